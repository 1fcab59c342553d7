/**
 * Records' storage on PostgreSQL: twins of src/db/records.ts. Record keys and names are ordered and compared byte by
 * byte (`COLLATE "C"`), as SQLite's binary collation does, whatever the database's default collation.
 *
 * Two writers may both find a record missing and both insert it (SQLite's single writer never does): the later insert
 * meets the unique index, and the runner (./op-runner.ts) runs the whole op again on that unique violation, which
 * now finds the record and updates it.
 */
import { and, eq, sql } from 'drizzle-orm'
import {
  findRecordByKey,
  insertRecord,
  listProjectCollections,
  listProjectParts,
  pageRecords,
  setRecordData,
  type CollectionRow,
  type ProjectPart,
  type RecordRow,
  type RecordScope,
} from '../records.ts'
import { byteOrder } from './byte-order.ts'
import { collections, environments, records, teams } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

/** Byte order, as SQLite's BINARY collation. */

const inScope = (scope: RecordScope) => and(eq(records.environmentId, scope.environmentId), eq(records.collectionId, scope.collectionId))

async function pageRecordsOnPostgres(db: PgDb, scope: RecordScope, after: string | undefined, limit: number): Promise<RecordRow[]> {
  return db
    .select()
    .from(records)
    .where(and(inScope(scope), after === undefined ? undefined : sql`${byteOrder(records.recordKey)} > ${after}`))
    .orderBy(byteOrder(records.recordKey))
    .limit(limit + 1)
}

async function findRecordByKeyOnPostgres(db: PgDb, scope: RecordScope, recordKey: string): Promise<RecordRow | undefined> {
  const [row] = await db.select().from(records).where(and(inScope(scope), eq(records.recordKey, recordKey)))
  return row
}

async function setRecordDataOnPostgres(db: PgDb, id: number, data: string, now: number): Promise<void> {
  await db.update(records).set({ data, updatedAt: now }).where(eq(records.id, id))
}

async function insertRecordOnPostgres(db: PgDb, scope: RecordScope & { recordKey: string; data: string; now: number }): Promise<void> {
  await db
    .insert(records)
    .values({ environmentId: scope.environmentId, collectionId: scope.collectionId, recordKey: scope.recordKey, data: scope.data, createdAt: scope.now, updatedAt: scope.now })
}

async function listProjectCollectionsOnPostgres(db: PgDb, projectId: number): Promise<CollectionRow[]> {
  return db.select().from(collections).where(eq(collections.projectId, projectId)).orderBy(byteOrder(collections.name))
}

const PART_TABLES = { environment: environments, team: teams, collection: collections }

/**
 * By name either way: SQLite's "storage order" is the order of the unique index (project, name) it reads them from
 * (a covering index), so both orders are by name there too.
 */
async function listProjectPartsOnPostgres(db: PgDb, part: ProjectPart, projectId: number, _byName = false): Promise<{ id: number; name: string }[]> {
  const table = PART_TABLES[part]
  return db.select({ id: table.id, name: table.name }).from(table).where(eq(table.projectId, projectId)).orderBy(byteOrder(table.name))
}

export const RECORDS_TWINS = twins(
  twin(pageRecords, pageRecordsOnPostgres),
  twin(findRecordByKey, findRecordByKeyOnPostgres),
  twin(setRecordData, setRecordDataOnPostgres),
  twin(insertRecord, insertRecordOnPostgres),
  twin(listProjectCollections, listProjectCollectionsOnPostgres),
  twin(listProjectParts, listProjectPartsOnPostgres),
)

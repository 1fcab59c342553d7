/**
 * Records' storage: a collection's records in one environment (paged by record id), one record by its id
 * (prepared: the executor's data steps look records up this way), writing a record's data, and the project's
 * collections, environments and teams by name that the records pages and `trellis apply` list.
 */
import { and, asc, eq, gt, sql } from 'drizzle-orm'
import type { Db } from './open.ts'
import { prepared } from './prepared.ts'
import { collections, environments, records, teams } from './schema.ts'

export type RecordRow = typeof records.$inferSelect
export type CollectionRow = typeof collections.$inferSelect

export interface RecordScope {
  environmentId: number
  collectionId: number
}

/** The records of one collection in one environment, as placeholders `environmentId` and `collectionId`. */
const inScope = () => and(eq(records.environmentId, sql.placeholder('environmentId')), eq(records.collectionId, sql.placeholder('collectionId')))

/** One page of a collection's records, by record id (ascending), starting after `after` (limit + 1 rows); prepared per shape. */
export function pageRecords(db: Db, scope: RecordScope, after: string | undefined, limit: number): RecordRow[] {
  const paged = after !== undefined
  return prepared(db, `records.page.${paged ? 'after' : 'first'}`, () =>
    db
      .select()
      .from(records)
      .where(and(inScope(), paged ? gt(records.recordKey, sql.placeholder('after')) : undefined))
      .orderBy(asc(records.recordKey))
      .limit(sql.placeholder('limit'))
      .prepare(),
  ).all({ environmentId: scope.environmentId, collectionId: scope.collectionId, after, limit: limit + 1 })
}

/** One record by its id in a collection and environment. */
export function findRecordByKey(db: Db, scope: RecordScope, recordKey: string): RecordRow | undefined {
  return prepared(db, 'records.by-key', () =>
    db
      .select()
      .from(records)
      .where(and(inScope(), eq(records.recordKey, sql.placeholder('key'))))
      .prepare(),
  ).all({ environmentId: scope.environmentId, collectionId: scope.collectionId, key: recordKey })[0]
}

/** Replaces one record's data (`data`: its canonical JSON text). */
export function setRecordData(db: Db, id: number, data: string, now: number): void {
  prepared(db, 'records.replace-data', () =>
    db
      .update(records)
      .set({ data: sql`${sql.placeholder('data')}`, updatedAt: sql`${sql.placeholder('now')}` })
      .where(eq(records.id, sql.placeholder('id')))
      .prepare(),
  ).run({ data, now, id })
}

/** A new record (`data`: its canonical JSON text). */
export function insertRecord(db: Db, scope: RecordScope & { recordKey: string; data: string; now: number }): void {
  db.insert(records)
    .values({ environmentId: scope.environmentId, collectionId: scope.collectionId, recordKey: scope.recordKey, data: scope.data, createdAt: scope.now, updatedAt: scope.now })
    .run()
}

/** The collections of a project, by name (prepared: the console's rendering page). */
export function listProjectCollections(db: Db, projectId: number): CollectionRow[] {
  return prepared(db, 'collections.of-project', () =>
    db.select().from(collections).where(eq(collections.projectId, sql.placeholder('projectId'))).orderBy(asc(collections.name)).prepare(),
  ).all({ projectId })
}

export type ProjectPart = 'environment' | 'team' | 'collection'
const PART_TABLES = { environment: environments, team: teams, collection: collections }

/** A project's environments, teams or collections (id and name); by name when `byName`, else in storage order (prepared per shape). */
export function listProjectParts(db: Db, part: ProjectPart, projectId: number, byName = false): { id: number; name: string }[] {
  return prepared(db, `records.parts.${part}.${byName ? 'by-name' : 'stored'}`, () => {
    const table = PART_TABLES[part]
    const query = db.select({ id: table.id, name: table.name }).from(table).where(eq(table.projectId, sql.placeholder('projectId'))).$dynamic()
    return (byName ? query.orderBy(asc(table.name)) : query).prepare()
  }).all({ projectId })
}

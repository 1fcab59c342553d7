/**
 * Records' storage: a collection's records in one environment (paged by record id), one record by its id
 * (a statement: the executor's data steps look records up this way), writing a record's data, and the project's
 * collections, environments and teams by name that the records pages and `trellis apply` list. Record ids and names
 * are ordered and compared byte by byte on both stores (`d.byteOrder`).
 *
 * On PostgreSQL two writers may both find a record missing and both insert it (SQLite's single writer never does):
 * the later insert meets the unique index, and the runner (./postgres/op-runner.ts) runs the whole op again on that
 * unique violation, which now finds the record and updates it.
 */
import { createHash } from 'node:crypto'
import { and, eq, inArray, isNull, type SQL, sql } from 'drizzle-orm'
import type { Built, Db, Dialect, RecordFieldValue, RecordValueKind } from './dialect.ts'
import { type Op, plan, runPlan } from './op.ts'
import { clientOf, type PgDb } from './postgres/client.ts'
import type { ProjectPart } from './projects.ts'
import { allOf, statementOfShape } from './pages.ts'
import { exec, setPlaceholders, type Statement, statement } from './query.ts'
import { type collections, records } from './schema.ts'
import { type ChangeOrigin, recordWorkflowEvents, subscribersOf } from './workflow-events.ts'

export type RecordRow = typeof records.$inferSelect
export type CollectionRow = typeof collections.$inferSelect

export interface RecordScope {
  environmentId: number
  collectionId: number
}

/** A record not deleted: every read but a restore's and the purge's (a deleted record is gone to everyone else). */
const live = ({ t }: Dialect) => isNull(t.records.deletedAt)

/** The live records of one collection in one environment, as placeholders `environmentId` and `collectionId`. */
const inScope = (d: Dialect) => and(eq(d.t.records.environmentId, sql.placeholder('environmentId')), eq(d.t.records.collectionId, sql.placeholder('collectionId')), live(d))

const recordsPage = (paged: boolean) =>
  statement(`records.page.${paged ? 'after' : 'first'}`, (d) =>
    d.db
      .select()
      .from(d.t.records)
      .where(and(inScope(d), paged ? sql`${d.byteOrder(d.t.records.recordKey)} > ${sql.placeholder('after')}` : undefined))
      .orderBy(d.byteOrder(d.t.records.recordKey))
      .limit(sql.placeholder('limit')),
  )
const RECORDS_PAGE = { first: recordsPage(false), after: recordsPage(true) }

/** One page of a collection's records, by record id (ascending), starting after `after` (limit + 1 rows). */
export function pageRecords(scope: RecordScope, after: string | undefined, limit: number) {
  const values = { environmentId: scope.environmentId, collectionId: scope.collectionId, after, limit: limit + 1 }
  return (after === undefined ? RECORDS_PAGE.first : RECORDS_PAGE.after).rows(values)
}

/** What a collection's records are searched by: a part of the id (ASCII letters in any case), a field's value (exact). */
export interface RecordSearch {
  idContains?: string
  field?: { name: string; value: string }
}

/** A LIKE pattern (`ESCAPE '\'`) matching text that contains `part`, its own `%`, `_` and backslashes taken literally. */
export const containsPattern = (part: string) => `%${part.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/** ASCII letters lowercased, as `asciiLower` does in SQL. */
export const asciiLowerText = (text: string) => text.replace(/[A-Z]/g, (c) => c.toLowerCase())

/**
 * One page of a collection's records matching a search, by record id after `after` (limit + 1 rows): a statement per
 * shape of the search. The collection's records are walked in id order through its unique index, each tested.
 */
export function searchRecords(scope: RecordScope, search: RecordSearch, after: string | undefined, limit: number) {
  const shape = [after === undefined ? 'first' : 'after', search.idContains === undefined ? '' : 'id', search.field === undefined ? '' : 'field'].join('.')
  const query = statementOfShape(`records.search.${shape}`, (d) =>
    d.db
      .select()
      .from(d.t.records)
      .where(
        allOf([
          inScope(d),
          after === undefined ? undefined : sql`${d.byteOrder(d.t.records.recordKey)} > ${sql.placeholder('after')}`,
          search.idContains === undefined ? undefined : sql`${d.asciiLower(d.t.records.recordKey)} LIKE ${sql.placeholder('idPattern')} ESCAPE '\\'`,
          search.field === undefined ? undefined : sql`${d.jsonFieldText(d.t.records.data, 'field')} = ${sql.placeholder('value')}`,
        ]),
      )
      .orderBy(d.byteOrder(d.t.records.recordKey))
      .limit(sql.placeholder('limit')),
  )
  return query.rows({
    environmentId: scope.environmentId,
    collectionId: scope.collectionId,
    after,
    idPattern: search.idContains === undefined ? undefined : containsPattern(asciiLowerText(search.idContains)),
    field: search.field?.name,
    value: search.field?.value,
    limit: limit + 1,
  })
}

const RECORD_IDS_IN = statement('records.search.ids-in', (d) => {
  const r = d.t.records
  return d.db
    .select({ environmentId: r.environmentId, collectionId: r.collectionId, recordKey: r.recordKey })
    .from(r)
    .where(
      and(
        live(d),
        d.inJsonArray(r.environmentId, 'environments', 'integer'),
        d.inJsonArray(sql`${r.environmentId} || ':' || ${r.collectionId}`, 'places', 'text'),
        sql`${d.asciiLower(r.recordKey)} LIKE ${sql.placeholder('idPattern')} ESCAPE '\\'`,
      ),
    )
    // The unique index's order: a walk that stops at the limit, never a sort of every match.
    .orderBy(r.environmentId, r.collectionId, d.byteOrder(r.recordKey))
    .limit(sql.placeholder('limit'))
})

/** Records whose id contains `part` (ASCII letters in any case) in any of these collections of environments (by environment, collection, id): at most `limit`. */
export function findRecordIdsIn(scopes: RecordScope[], part: string, limit: number) {
  return RECORD_IDS_IN.rows({
    environments: JSON.stringify([...new Set(scopes.map((s) => s.environmentId))]),
    places: JSON.stringify(scopes.map((s) => `${s.environmentId}:${s.collectionId}`)),
    idPattern: containsPattern(asciiLowerText(part)),
    limit,
  })
}

/**
 * The row holding a record's id in its collection and environment, deleted or not: one seek on
 * `records_env_collection_key_unique`. Whether it is deleted is checked on the row (`liveRow`), not in the WHERE:
 * with `deleted_at IS NULL` there, PostgreSQL could answer from the live-records index (its predicate) and filter
 * the key, reading every live record of the collection — the plan it chose, and kept, while the table's statistics
 * were those of a few rows.
 */
const byKey = ({ t }: Dialect) =>
  and(eq(t.records.environmentId, sql.placeholder('environmentId')), eq(t.records.collectionId, sql.placeholder('collectionId')), eq(t.records.recordKey, sql.placeholder('key')))

/** The row, unless deleted. */
const liveRow = (row: RecordRow | undefined): RecordRow | undefined => (row?.deletedAt === null ? row : undefined)

const RECORD_BY_KEY = statement('records.by-key', (d) => d.db.select().from(d.t.records).where(byKey(d)))

/** One record by its id in a collection and environment. */
export function* findRecordByKey(scope: RecordScope, recordKey: string): Op<RecordRow | undefined> {
  return liveRow(yield* RECORD_BY_KEY.row({ environmentId: scope.environmentId, collectionId: scope.collectionId, key: recordKey }))
}

const RECORD_BY_KEY_TO_CHANGE = statement('records.by-key.to-change', (d) => d.forUpdate(d.db.select().from(d.t.records).where(byKey(d))))

/**
 * The row holding a record's id, deleted or not, read to be changed (locked until commit on PostgreSQL): a write that
 * creates a record or restores one must see the deleted row that still holds the id.
 */
export function findRecordRowToChange(scope: RecordScope, recordKey: string) {
  return RECORD_BY_KEY_TO_CHANGE.row({ environmentId: scope.environmentId, collectionId: scope.collectionId, key: recordKey })
}

/**
 * One record by its id, read to be changed in this transaction from what it holds (the executor's data steps): on
 * PostgreSQL its row stays locked until commit, so a concurrent writer (another workflow's run on the same record)
 * waits and then reads this transaction's result instead of overwriting it with what it read before.
 */
export function* findRecordByKeyToChange(scope: RecordScope, recordKey: string): Op<RecordRow | undefined> {
  return liveRow(yield* findRecordRowToChange(scope, recordKey))
}

// It answers how many workflows subscribe to the record's collection in its environment, in the same statement: the
// common write, of a collection no workflow subscribes to, pays no second statement (a round trip on PostgreSQL).
const SET_RECORD_DATA = statement('records.replace-data', ({ db, t }) =>
  db
    .update(t.records)
    .set(setPlaceholders('data', 'updatedAt'))
    .where(eq(t.records.id, sql.placeholder('id')))
    .returning({ subscribers: subscribersOf(t, t.records) }),
)

/**
 * Which record a write changes and what changed in it, for the events it starts (./workflow-events.ts): every write
 * below records them in its own transaction, so no path that writes a record can miss them.
 */
export interface RecordWritten extends RecordScope {
  recordKey: string
  /** An update's changed top-level fields. */
  changedFields?: readonly string[]
  /** The run whose step writes it (the loop bound), if a run does. */
  byRun?: ChangeOrigin | null
}

/** Replaces one record's data (`data`: its canonical JSON text); a `recordUpdated` event. */
export function* setRecordData(id: number, data: string, now: number, written: RecordWritten): Op<void> {
  const [row] = yield* SET_RECORD_DATA.rows({ data, updatedAt: now, id })
  if (!row || row.subscribers === 0) return
  yield* recordWorkflowEvents(written, [{ recordKey: written.recordKey, event: 'recordUpdated', changedFields: written.changedFields ?? [], byRun: written.byRun }], now)
}

const SET_RECORD_DELETED = statement('records.set-deleted', ({ db, t }) =>
  db.update(t.records).set(setPlaceholders('deletedAt')).where(eq(t.records.id, sql.placeholder('id'))),
)

/**
 * Deletes a record (`deletedAt`: when, epoch ms; a `recordDeleted` event) or restores it (null: no event — the record
 * comes back as it was); its data and times stay as they are.
 */
export function* setRecordDeleted(id: number, deletedAt: number | null, written: RecordWritten): Op<void> {
  yield* SET_RECORD_DELETED.exec({ deletedAt, id })
  if (deletedAt !== null) yield* recordWorkflowEvents(written, [{ recordKey: written.recordKey, event: 'recordDeleted', byRun: written.byRun }], deletedAt)
}

/** A new record (`data`: its canonical JSON text); a `recordCreated` event. */
export function* insertRecord(scope: RecordScope & { recordKey: string; data: string; now: number }): Op<void> {
  const { environmentId, collectionId, recordKey, data, now } = scope
  yield* exec(({ db, t }) => db.insert(t.records).values({ environmentId, collectionId, recordKey, data, createdAt: now, updatedAt: now }))
  yield* recordWorkflowEvents(scope, [{ recordKey, event: 'recordCreated' }], now)
}

/**
 * The rows of a collection in an environment holding these ids, deleted ones too (a CSV import's batch: one statement,
 * not one per id), locked until commit on PostgreSQL as `findRecordRowToChange`'s.
 */
export function findRecordsByKeys(scope: RecordScope, recordKeys: readonly string[]): Op<RecordRow[]> {
  return runPlan(recordsByKeys, scope, [...recordKeys])
}

const recordsByKeys = plan({
  sqlite: (db: Db, scope: RecordScope, keys: string[]): RecordRow[] =>
    keys.length === 0
      ? []
      : db.select().from(records).where(and(eq(records.environmentId, scope.environmentId), eq(records.collectionId, scope.collectionId), inArray(records.recordKey, keys))).all(),
  postgres: async (db: PgDb, scope: RecordScope, keys: string[]): Promise<RecordRow[]> =>
    keys.length === 0 ? [] : ((await clientOf(db).unsafe(RECORDS_BY_KEYS_ON_POSTGRES, [scope.environmentId, scope.collectionId, keys] as never[])) as unknown as RecordRow[]),
  why: 'PostgreSQL plans on the statistics of the table, and a collection they have not seen yet (a first large import, in one transaction, before autovacuum analyzes it) is estimated at a row or two: joined to an IN list or to the ids as a set, it hashes or walks the whole collection for every batch, quadratic over an import. Each id probes the unique index instead (LATERAL … LIMIT 1), with environment and collection as init-plans so that no plan depends on their values; the unique index is the only one a lookup that reads deleted records can use (the created-order index holds live records only). SQLite probes the unique index for an IN list.',
})

/** Exported for the plan test of records-api.test.ts. */
export const RECORDS_BY_KEYS_ON_POSTGRES = `SELECT r.id::float8 AS id, r.environment_id::float8 AS "environmentId", r.collection_id::float8 AS "collectionId",
    r.record_key AS "recordKey", r.data, r.created_at::float8 AS "createdAt", r.updated_at::float8 AS "updatedAt", r.deleted_at::float8 AS "deletedAt"
  FROM unnest($3::text[]) AS k(key)
  CROSS JOIN LATERAL (
    SELECT * FROM records WHERE environment_id = (SELECT $1::int8) AND collection_id = (SELECT $2::int8) AND record_key = k.key LIMIT 1 FOR UPDATE
  ) r`

/** New records in one statement (`data`: each one's canonical JSON text), all at `now`; a `recordCreated` event each. */
export function* insertRecords(scope: RecordScope, records: readonly { recordKey: string; data: string }[], now: number): Op<void> {
  const { environmentId, collectionId } = scope
  yield* exec(({ db, t }) => db.insert(t.records).values(records.map(({ recordKey, data }) => ({ environmentId, collectionId, recordKey, data, createdAt: now, updatedAt: now }))))
  yield* recordWorkflowEvents(scope, records.map(({ recordKey }) => ({ recordKey, event: 'recordCreated' as const })), now)
}

const PROJECT_COLLECTIONS = statement('collections.of-project', ({ db, t, byteOrder }) =>
  db.select().from(t.collections).where(eq(t.collections.projectId, sql.placeholder('projectId'))).orderBy(byteOrder(t.collections.name)),
)

/** The collections of a project, by name (a statement: the console's rendering page). */
export function listProjectCollections(projectId: number) {
  return PROJECT_COLLECTIONS.rows({ projectId })
}

export type { ProjectPart }

const projectParts = (part: ProjectPart) =>
  statement(`records.parts.${part}`, ({ db, t, byteOrder }) => {
    const table = { environment: t.environments, team: t.teams, collection: t.collections }[part]
    return db.select({ id: table.id, name: table.name }).from(table).where(eq(table.projectId, sql.placeholder('projectId'))).orderBy(byteOrder(table.name))
  })
const PROJECT_PARTS = { environment: projectParts('environment'), team: projectParts('team'), collection: projectParts('collection') }

/** A project's environments, teams or collections (id and name), by name. */
export function listProjectParts(part: ProjectPart, projectId: number) {
  return PROJECT_PARTS[part].rows({ projectId })
}

// ── Collection schemas ────────────────────────────────────────────────────────

const schemaColumns = ({ t }: Dialect) => ({
  id: t.collections.id,
  projectId: t.collections.projectId,
  name: t.collections.name,
  schema: t.collections.schema,
  schemaVersion: t.collections.schemaVersion,
  schemaUpdatedAt: t.collections.schemaUpdatedAt,
})
export type CollectionSchemaRow = { id: number; projectId: number; name: string; schema: string | null; schemaVersion: number; schemaUpdatedAt: number | null }

const COLLECTION_SCHEMA = statement('collections.schema', (d) => d.db.select(schemaColumns(d)).from(d.t.collections).where(eq(d.t.collections.id, sql.placeholder('id'))))
const COLLECTION_SCHEMA_FOR_WRITE = statement('collections.schema.for-write', (d) =>
  d.forShare(d.db.select(schemaColumns(d)).from(d.t.collections).where(eq(d.t.collections.id, sql.placeholder('id')))),
)
const COLLECTION_SCHEMA_TO_CHANGE = statement('collections.schema.to-change', (d) =>
  d.forUpdate(d.db.select(schemaColumns(d)).from(d.t.collections).where(eq(d.t.collections.id, sql.placeholder('id')))),
)

/**
 * A collection's schema as stored: `read` to show it; `write` by a record write, which on PostgreSQL holds it
 * (`FOR SHARE`) until commit so that a schema change waits for the write it would judge; `change` by a schema change
 * (`FOR UPDATE`), which so waits for the record writes under way and makes later ones wait for it.
 */
export function findCollectionSchema(collectionId: number, purpose: 'read' | 'write' | 'change'): Op<CollectionSchemaRow | undefined> {
  const query = purpose === 'read' ? COLLECTION_SCHEMA : purpose === 'write' ? COLLECTION_SCHEMA_FOR_WRITE : COLLECTION_SCHEMA_TO_CHANGE
  return query.row({ id: collectionId }) as Op<CollectionSchemaRow | undefined>
}

/** Stores a collection's schema (`schema`: canonical JSON of its stored fields, or null) as version `version`. */
export function setCollectionSchema(collectionId: number, schema: string | null, version: number, now: number) {
  return exec(({ db, t }) => db.update(t.collections).set({ schema, schemaVersion: version, schemaUpdatedAt: now }).where(eq(t.collections.id, collectionId)))
}

/**
 * The name of the index on one field of one collection's records: the field's name hashed, so that any field name
 * (up to 64 characters) and any collection id stay within PostgreSQL's 63-byte names.
 */
export function fieldIndexName(collectionId: number, field: string): string {
  return `records_field_${collectionId}_${createHash('sha256').update(field).digest('hex').slice(0, 16)}`
}

/**
 * Runs the DDL `build` makes for one index, as a statement of its own (named for the index and the action, made once
 * per process): a query that is not a statement is awaited as a query builder on PostgreSQL, and raw SQL is not one.
 */
const indexStatements = new Map<string, Statement<Built>>()
function indexStatement(key: string, build: (d: Dialect) => SQL) {
  let made = indexStatements.get(key)
  if (!made) {
    made = statement(key, (d) => d.valueRows(build(d)))
    indexStatements.set(key, made)
  }
  return made.exec()
}

/**
 * The index on one field of one collection's records (`Dialect.createRecordFieldIndex`: each store's statement),
 * holding the field's values as `kind` compares them. Built inside the caller's transaction: on PostgreSQL it holds
 * writes to `records` while it builds (a plain CREATE INDEX; CONCURRENTLY cannot run in a transaction).
 */
export function createFieldIndex(collectionId: number, field: string, kind: RecordValueKind) {
  const name = fieldIndexName(collectionId, field)
  return indexStatement(`records.field-index.create.${name}.${kind}`, (d) => d.createRecordFieldIndex(name, collectionId, field, kind))
}

/** Drops the index of one field of one collection (none: nothing happens). */
export function dropFieldIndex(collectionId: number, field: string) {
  const name = fieldIndexName(collectionId, field)
  return indexStatement(`records.field-index.drop.${name}`, (d) => d.dropRecordFieldIndex(name))
}

// ── The records list ─────────────────────────────────────────────────────────

export type RecordFilterOp = 'eq' | 'ne' | 'lt' | 'lte' | 'gt' | 'gte' | 'in' | 'contains'

/** One `<field>.<op>` filter of the list, its values already of the field's kind (strings; numbers for `number`). */
export interface RecordFieldFilter {
  field: string
  kind: RecordValueKind
  op: RecordFilterOp
  values: (string | number)[]
  /** A time every record has (epoch ms values), rather than a field of its data. */
  column?: RecordTimeColumn
}

/** The times of a record that filters take beside its fields. */
export type RecordTimeColumn = 'createdAt' | 'updatedAt'


/** What a page continues after: the sort key of the previous page's last row (null: it had no value) and its row id. */
export interface RecordCursor {
  key: string | number | null
  id: number
}

export interface RecordListQuery {
  filters: RecordFieldFilter[]
  /** A field of the schema, or null for `createdAt`. */
  sort: { field: string; kind: RecordValueKind } | null
  direction: 'asc' | 'desc'
  after?: RecordCursor
  /** Only this record (a workflow event's `where`, tested on the record it is about). */
  recordKey?: string
  /**
   * Write the collection's id into the SQL rather than bind it: a field's index is partial to its collection
   * (`WHERE collection_id = N`), and SQLite uses it only for a query naming that collection literally.
   */
  literalCollection: boolean
}

export interface RecordListRow {
  id: number
  recordKey: string
  data: string
  createdAt: number
  updatedAt: number
  /** The sort key, for the cursor. */
  key: string | number | null
}

/** A record's own time as a filter compares it: every record has one, compared as stored (epoch ms). */
const timeColumn = (column: SQL): Pick<RecordFieldValue, 'value' | 'hasKind' | 'param'> => ({ value: column, hasKind: sql`TRUE`, param: (placeholder) => placeholder })

const COMPARISONS: Record<Exclude<RecordFilterOp, 'in' | 'contains'>, string> = { eq: '=', ne: '<>', lt: '<', lte: '<=', gt: '>', gte: '>=' }

/**
 * One page of a collection's records in one environment (limit + 1 rows), filtered and sorted as `q` says: keyset
 * paging on (sort value, row id), nulls lowest, so a record written meanwhile is never returned twice nor makes
 * another one skipped. A statement per shape of the query (its fields, operators, sort, cursor), values bound.
 */
export function pageRecordList(scope: RecordScope, q: RecordListQuery, limit: number): Op<RecordListRow[]> {
  const after = q.after === undefined ? 'first' : q.after.key === null ? 'after-null' : 'after'
  const shape = [
    q.literalCollection ? `c${Math.trunc(scope.collectionId)}` : 'c?',
    q.sort === null ? 'createdAt' : `${q.sort.field}:${q.sort.kind}`,
    q.direction,
    after,
    q.recordKey === undefined ? 'all' : 'one',
    ...q.filters.map((f) => `${f.column === undefined ? `${f.field}:${f.kind}` : `@${f.column}`}.${f.op}${f.op === 'in' ? f.values.length : ''}`),
  ].join(',')
  const values: Record<string, unknown> = { environmentId: scope.environmentId, collectionId: scope.collectionId, limit: limit + 1, afterKey: q.after?.key, afterId: q.after?.id, recordKey: q.recordKey }
  q.filters.forEach((f, i) => f.values.forEach((v, j) => (values[`f${i}_${j}`] = f.op === 'contains' ? containsPattern(asciiLowerText(String(v))) : v)))
  const query = statementOfShape(`records.list.${shape}`, (d) => {
    const r = d.t.records
    const collection = q.literalCollection ? sql.raw(`${r.collectionId.name} = ${Math.trunc(scope.collectionId)}`) : eq(r.collectionId, sql.placeholder('collectionId'))
    const sorted = q.sort === null ? null : d.recordFieldValue(q.sort.field, q.sort.kind)
    const key = sorted === null ? sql`${r.createdAt}` : sorted.value
    const keyParam = sorted === null ? sql.placeholder('afterKey') : sorted.cursorParam(sql`${sql.placeholder('afterKey')}`)
    const id = sql`${r.id}`
    const afterId = sql.placeholder('afterId')
    const [beyond, beyondOrAt, idBeyond] = q.direction === 'asc' ? ['>', '>=', '>'] : ['<', '<=', '<']
    const keyset =
      after === 'first'
        ? undefined
        : after === 'after-null'
          ? q.direction === 'asc'
            ? sql`((${key} IS NULL AND ${id} > ${afterId}) OR ${key} IS NOT NULL)`
            : sql`(${key} IS NULL AND ${id} < ${afterId})`
          : sql`((${key} ${sql.raw(beyondOrAt)} ${keyParam} AND (${key} ${sql.raw(beyond)} ${keyParam} OR ${id} ${sql.raw(idBeyond)} ${afterId}))${q.direction === 'desc' && sorted !== null ? sql` OR ${key} IS NULL` : sql``})`
    const filters = q.filters.map((f, i) => {
      const field = f.column === undefined ? d.recordFieldValue(f.field, f.kind) : timeColumn(sql`${r[f.column]}`)
      const param = (j: number) => field.param(sql`${sql.placeholder(`f${i}_${j}`)}`)
      const test =
        f.op === 'in'
          ? sql`${field.value} IN (${sql.join(f.values.map((_, j) => param(j)), sql`, `)})`
          : f.op === 'contains'
            ? sql`${d.asciiLower(field.value)} LIKE ${sql.placeholder(`f${i}_0`)} ESCAPE '\\'`
            : sql`${field.value} ${sql.raw(COMPARISONS[f.op])} ${param(0)}`
      return sql`(${field.hasKind} AND ${test})`
    })
    return d.db
      .select({ id: r.id, recordKey: r.recordKey, data: r.data, createdAt: r.createdAt, updatedAt: r.updatedAt, key: sorted === null ? r.createdAt : sql`${sorted.cursorKey}` })
      .from(r)
      .where(allOf([eq(r.environmentId, sql.placeholder('environmentId')), collection, live(d), keyset, q.recordKey === undefined ? undefined : eq(r.recordKey, sql.placeholder('recordKey')), ...filters]))
      .orderBy(sorted === null ? sql`${key} ${sql.raw(q.direction)}` : d.orderNullsLow(key, q.direction), sql`${id} ${sql.raw(q.direction)}`)
      .limit(sql.placeholder('limit'))
  })
  return query.rows(values) as Op<RecordListRow[]>
}

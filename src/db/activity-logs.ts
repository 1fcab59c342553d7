/**
 * What the activity log asks the database: append an entry with its record ids, a page of entry ids, and the
 * entries of a page, written once for both stores (./query.ts) but the append's own insert (`insertActivityLogRows`,
 * a plan: ./op.ts).
 * Every statement is built once per dialect and connection (appends run in every write, lists are hot).
 */
import { and, eq, inArray, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import type { Micros } from '../lib/time.ts'
import { nextCreatedAt, nextCreatedAts } from './monotonic.ts'
import { type Op, plan, runPlan } from './op.ts'
import type { Db } from './dialect.ts'
import { clientOf, type PgDb } from './postgres/client.ts'
import { createdAtBounds, hideExtensions, type PageCondition, pageIds, rawNumber, type TimeOrderedList } from './pages.ts'
import { prepared } from './sqlite/prepared.ts'
import { statement } from './query.ts'
import { activityLogRecords, activityLogs } from './schema.ts'

/** An environment's activity log: its createdAt order and id bounds. */
const ACTIVITY_TIMES = { name: 'activity-logs', table: 'activityLogs', scope: 'environmentId' } as const satisfies TimeOrderedList

export interface NewActivityLogRow {
  environmentId: number
  type: 'read' | 'write'
  action: string
  label: string | null
  userId: number
  teamId: number | null
  collectionId: number | null
  tokenId: number | null
  workflowName: string | null
  runId: string | null
  stepName: string | null
  /** The action is a Trellis extension (listed only with `extensions=true`). */
  extension: boolean
}

const p = (name: string) => sql.placeholder(name)

/**
 * Inserts an entry and its record ids (each once); its createdAt is `now`, or strictly after the environment's
 * previous entry (DESIGN §3). Returns the entry's id. Call inside the transaction of the change it records.
 */
export function* insertActivityLog(entry: NewActivityLogRow, recordIds: Iterable<string>, now: number): Op<number> {
  const createdAt = yield* nextCreatedAt(ACTIVITY_TIMES, entry.environmentId, now)
  const [id] = yield* runPlan(insertActivityLogRows, [{ ...entry, createdAt }], [[...new Set(recordIds)]])
  return id!
}

/**
 * `insertActivityLog` for many entries of one environment (a CSV import's batch: one entry per record written), dated
 * one after another in the order given, as that many calls would date them, and written in one statement on
 * PostgreSQL (one round trip under the environment's lock, not one per entry). Call inside the transaction of the change.
 */
export function* insertActivityLogs(environmentId: number, entries: readonly { entry: NewActivityLogRow; recordIds: Iterable<string> }[], now: number): Op<void> {
  if (entries.length === 0) return
  if (entries.some(({ entry }) => entry.environmentId !== environmentId)) throw new Error('insertActivityLogs: entries of one environment only')
  const first = yield* nextCreatedAts(ACTIVITY_TIMES, environmentId, now, entries.length)
  yield* runPlan(
    insertActivityLogRows,
    entries.map(({ entry }, i) => ({ ...entry, createdAt: (first + i) as Micros })),
    entries.map(({ recordIds }) => [...new Set(recordIds)]),
  )
}

type DatedEntry = NewActivityLogRow & { createdAt: Micros }

/** The entries at their times and one row per record id of each (`recordIds[i]`: entry i's, distinct); answers their ids. */
const insertActivityLogRows = plan({
  sqlite: insertRowsOnSqlite,
  postgres: insertRowsOnPostgres,
  why: 'one data-modifying CTE writes the entries and their record ids in one round trip under the lock; SQLite has no such CTE and no round trips',
})

/** SQLite's: each entry, then each of its record ids, each statement prepared once per connection. */
function insertRowsOnSqlite(db: Db, entries: DatedEntry[], recordIds: string[][]): number[] {
  const insertEntry = prepared(db, 'activity-logs.insert', () =>
    db
      .insert(activityLogs)
      .values({
        environmentId: p('environmentId'),
        type: p('type'),
        action: p('action'),
        label: p('label'),
        userId: p('userId'),
        teamId: p('teamId'),
        collectionId: p('collectionId'),
        tokenId: p('tokenId'),
        workflowName: p('workflowName'),
        runId: p('runId'),
        stepName: p('stepName'),
        extension: p('extension'),
        createdAt: p('createdAt'),
      })
      .returning({ id: activityLogs.id })
      .prepare(),
  )
  const insertRecord = prepared(db, 'activity-logs.insert-record', () =>
    db.insert(activityLogRecords).values({ logId: p('logId'), environmentId: p('environmentId'), recordId: p('recordId') }).prepare(),
  )
  return entries.map((entry, i) => {
    const [row] = insertEntry.all({ ...entry })
    for (const recordId of recordIds[i]!) insertRecord.run({ logId: row!.id, environmentId: entry.environmentId, recordId })
    return row!.id
  })
}

/** PostgreSQL's: one entry in one statement (`INSERT_ENTRY`, every write's), several in another (`INSERT_ENTRIES`). */
async function insertRowsOnPostgres(db: PgDb, entries: DatedEntry[], recordIds: string[][]): Promise<number[]> {
  const columns = (entry: DatedEntry) => {
    const { environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt } = entry
    return [environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt]
  }
  if (entries.length === 1) {
    const [row] = (await clientOf(db).unsafe(INSERT_ENTRY, [...columns(entries[0]!), recordIds[0]!] as never[])) as { id: number }[]
    return [row!.id]
  }
  // Column by column: parameter k holds every entry's k-th value; the record ids name their entry by its time.
  const byColumn = entries.map(columns)
  const values = byColumn[0]!.map((_, k) => byColumn.map((row) => row[k]))
  const times = entries.flatMap((entry, i) => recordIds[i]!.map(() => entry.createdAt))
  const rows = (await clientOf(db).unsafe(INSERT_ENTRIES, [...values, entries[0]!.environmentId, times, recordIds.flat()] as never[])) as { id: number; at: number }[]
  const idAt = new Map(rows.map((row) => [row.at, row.id]))
  return entries.map((entry) => idAt.get(entry.createdAt)!)
}

/**
 * The entry and its record ids ($14, distinct, one row each) in one statement: it runs under the environment's lock
 * (./postgres/monotonic.ts), held to commit, so every round trip saved there is one less that other writers wait out.
 */
const INSERT_ENTRY = `WITH entry AS (
    INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at)
    VALUES ($1::int8, $2, $3, $4, $5::int8, $6::int8, $7::int8, $8::int8, $9, $10, $11, $12::boolean, $13::int8)
    RETURNING id),
  entry_records AS (INSERT INTO activity_log_records (log_id, environment_id, record_id) SELECT entry.id, $1::int8, unnest($14::text[]) FROM entry)
  SELECT id::float8 AS id FROM entry`

/**
 * Entries of one environment ($14), each column an array ($1…$13), and their record ids ($16), each with its
 * entry's time ($15: distinct within the environment), in one statement.
 */
const INSERT_ENTRIES = `WITH entries AS (
    INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at)
    SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::text[], $10::text[], $11::text[], $12::boolean[], $13::int8[])
    RETURNING id, created_at),
  entry_records AS (
    INSERT INTO activity_log_records (log_id, environment_id, record_id)
    SELECT entries.id, $14::int8, r.record_id FROM unnest($15::int8[], $16::text[]) AS r(created_at, record_id) JOIN entries ON entries.created_at = r.created_at)
  SELECT id::float8 AS id, created_at::float8 AS at FROM entries`

/** An activity page's filters (names already resolved to ids); undefined ones are left out. */
export interface ActivityPageFilters {
  userId?: number
  teamId?: number
  collectionId?: number
  action?: string
  type?: 'read' | 'write'
  /** Only entries that name this record. */
  recordId?: string
  /** Include the extension entries. */
  withExtensions: boolean
}

/** Ids of one page (limit + 1) of an environment's activity log, newest first. */
export function* pageActivityLogIds(environmentId: number, filters: ActivityPageFilters, dates: DateFilter[], limit: number): Op<number[]> {
  const { userId, teamId, collectionId, action, type, recordId } = filters
  // Entries take createdAt strictly after the previous one in their environment, so ids stand in.
  const bounds = yield* createdAtBounds(dates, ACTIVITY_TIMES, environmentId)
  const namesRecord: PageCondition | undefined =
    recordId === undefined
      ? undefined
      : {
          condition: ({ db, t }) =>
            inArray(
              t.activityLogs.id,
              db
                .select({ id: t.activityLogRecords.logId })
                .from(t.activityLogRecords)
                .where(and(eq(t.activityLogRecords.environmentId, sql.placeholder('environmentId')), eq(t.activityLogRecords.recordId, sql.placeholder('recordId')))),
            ),
          values: { recordId },
        }
  return yield* pageIds(
    {
      name: 'activity-logs',
      table: 'activityLogs',
      equal: { environmentId, userId, teamId, collectionId, action, type },
      bounds,
      extra: { documented: hideExtensions('activityLogs', filters.withExtensions), recordId: namesRecord },
    },
    limit,
  )
}

const ACTIVITY_LOGS_TO_RENDER = statement('activity-logs.render', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT ${n('l.id')}, l.type, l.action, l.label, ${n('l.created_at')}, l.workflow_name, l.run_id, l.step_name,
    ${n('u.id')}, u.username, u.email, e.name, t.name, c.name, k.name, k.prefix
  FROM activity_logs l
  JOIN users u ON u.id = l.user_id
  JOIN environments e ON e.id = l.environment_id
  LEFT JOIN teams t ON t.id = l.team_id
  LEFT JOIN collections c ON c.id = l.collection_id
  LEFT JOIN api_tokens k ON k.id = l.token_id
  WHERE ${d.inJsonArray(sql.raw('l.id'), 'ids', 'integer')}
  ORDER BY l.id`)
})

type L = typeof activityLogs.$inferSelect
/** A render row's values in ACTIVITY_LOGS_TO_RENDER's column order. */
export type ActivityLogRenderValues = [L['id'], L['type'], L['action'], L['label'], L['createdAt'], L['workflowName'], L['runId'], L['stepName'],
  number, string, string, string, string | null, string | null, string | null, string | null]

/**
 * The entries with these ids (by id), with their author, environment, team, collection and token. Raw rows shaped
 * here (Drizzle's nested row mapping cost more than the query, as for notes).
 */
export function* findActivityLogsForRender(ids: number[]) {
  return ((yield* ACTIVITY_LOGS_TO_RENDER.rows({ ids: JSON.stringify(ids) })) as ActivityLogRenderValues[]).map(activityLogToRender)
}

/** One render row as the activity service reads it. */
export function activityLogToRender([id, type, action, label, createdAt, workflowName, runId, stepName, userId, username, email, environment, team, collection, tokenName, tokenPrefix]: ActivityLogRenderValues) {
  return {
    log: { id, type, action, label, createdAt, workflowName, runId, stepName },
    user: { id: userId, username, email },
    environment,
    team,
    collection,
    token: tokenPrefix === null ? null : { name: tokenName, prefix: tokenPrefix },
  }
}

/** By entry, then record id in byte order (SQLite reads them so off the primary key (log_id, record_id)). */
const RECORD_IDS_TO_RENDER = statement('activity-logs.render.records', (d) =>
  d.valueRows(
    sql`SELECT ${rawNumber(d)('log_id')}, record_id FROM activity_log_records WHERE ${d.inJsonArray(sql.raw('log_id'), 'ids', 'integer')} ORDER BY log_id, ${d.byteOrder(sql.raw('record_id'))}`,
  ),
)

/** The record ids each of these entries names, entry id → record ids. */
export function* findActivityLogRecordIds(ids: number[]): Op<Map<number, string[]>> {
  return recordIdsByEntry((yield* RECORD_IDS_TO_RENDER.rows({ ids: JSON.stringify(ids) })) as [number, string][])
}

/** (entry id, record id) rows, by entry, as entry id → its record ids in row order. */
export function recordIdsByEntry(rows: [number, string][]): Map<number, string[]> {
  const recordIds = new Map<number, string[]>()
  for (const [logId, recordId] of rows) {
    const list = recordIds.get(logId)
    if (list) list.push(recordId)
    else recordIds.set(logId, [recordId])
  }
  return recordIds
}

/**
 * What the activity log asks the database: append an entry with its record ids (chained: ./log-chain.ts), a page of
 * entry ids, and the entries of a page, written once for both stores (./query.ts).
 * Every statement is built once per dialect and connection (appends run in every write, lists are hot).
 */
import { and, eq, inArray, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import { appendChained, type NewActivityLogRow } from './log-chain.ts'
import type { Dialect } from './dialect.ts'
import type { Op } from './op.ts'
import { createdAtBounds, hideExtensions, type PageCondition, pageIds, rawNumber, type TimeOrderedList } from './pages.ts'
import { statement } from './query.ts'
import type { activityLogs } from './schema.ts'

/** An environment's activity log: its createdAt order and id bounds, and its hash chain (src/lib/audit-chain.ts). */
const ACTIVITY_TIMES = {
  name: 'activity-logs',
  table: 'activityLogs',
  scope: 'environmentId',
  chain: { log: 'activity', table: 'activity_logs', column: 'environment_id', scope: 'environment_id' },
  watermark: 'activity_logs',
} as const satisfies TimeOrderedList

export type { NewActivityLogRow } from './log-chain.ts'

/**
 * Inserts an entry and its record ids (each once); its createdAt is `now`, or strictly after the environment's
 * previous entry (DESIGN §3). Call inside the transaction of the change it records.
 */
export function* insertActivityLog(entry: NewActivityLogRow, recordIds: Iterable<string>, now: number): Op<void> {
  yield* appendChained(ACTIVITY_TIMES, entry.environmentId, [{ log: 'activity', entry, recordIds: [...new Set(recordIds)] }], now)
}

/**
 * `insertActivityLog` for many entries of one environment (a CSV import's batch: one entry per record written), dated
 * one after another in the order given, as that many calls would date them, and written in one statement on
 * PostgreSQL (one round trip under the environment's lock, not one per entry). Call inside the transaction of the change.
 */
export function* insertActivityLogs(environmentId: number, entries: readonly { entry: NewActivityLogRow; recordIds: Iterable<string> }[], now: number): Op<void> {
  if (entries.length === 0) return
  if (entries.some(({ entry }) => entry.environmentId !== environmentId)) throw new Error('insertActivityLogs: entries of one environment only')
  yield* appendChained(
    ACTIVITY_TIMES,
    environmentId,
    entries.map(({ entry, recordIds }) => ({ log: 'activity', entry, recordIds: [...new Set(recordIds)] })),
    now,
  )
}

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
      watermark: ACTIVITY_TIMES.watermark,
    },
    limit,
  )
}

/**
 * An entry at or below the log's watermark: the only ones read (PostgreSQL's pass dates and chains the rest:
 * ./log-chain.ts).
 */
export const listedActivityEntry = (d: Dialect) => d.listed('activity_logs', sql`${d.t.activityLogs.id}`)

const ACTIVITY_LOGS_TO_RENDER = statement('activity-logs.render', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT ${n('l.id')}, l.type, l.action, l.label, ${n('l.created_at')}, l.workflow_name, l.run_id, l.step_name,
    ${n('u.id')}, u.username, u.email, e.name, t.name, c.name, k.name, k.prefix, ${n('l.chain_position')}, l.chain_hash
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
  number, string, string, string, string | null, string | null, string | null, string | null, L['chainPosition'], L['chainHash']]

/**
 * The entries with these ids (by id), with their author, environment, team, collection and token. Raw rows shaped
 * here (Drizzle's nested row mapping cost more than the query, as for notes).
 */
export function* findActivityLogsForRender(ids: number[]) {
  return ((yield* ACTIVITY_LOGS_TO_RENDER.rows({ ids: JSON.stringify(ids) })) as ActivityLogRenderValues[]).map(activityLogToRender)
}

/** One render row as the activity service reads it. */
export function activityLogToRender([id, type, action, label, createdAt, workflowName, runId, stepName, userId, username, email, environment, team, collection, tokenName, tokenPrefix, chainPosition, chainHash]: ActivityLogRenderValues) {
  return {
    log: { id, type, action, label, createdAt, workflowName, runId, stepName, chainPosition, chainHash },
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

/**
 * Maintenance on either store: log retention's batches and the run counts /metrics reads. SQLite's own housekeeping
 * (WAL checkpoints, planner statistics) is ./sqlite/upkeep.ts.
 */
import { asc, inArray, lt, sql } from 'drizzle-orm'
import type { Micros } from '../lib/time.ts'
import type { Store } from './open.ts'
import { statement } from './query.ts'
import { type ExecutorIdentity, queueStats, type QueueStats } from './queue.ts'
import { read } from './read.ts'

export type LogTable = 'activity_logs' | 'admin_logs'

const logBatchDelete = (table: LogTable) =>
  statement(`retention.delete.${table}`, ({ db, t }) => {
    const log = table === 'activity_logs' ? t.activityLogs : t.adminLogs
    const oldest = db.select({ id: log.id }).from(log).where(lt(log.createdAt, sql.placeholder('cutoff'))).orderBy(asc(log.id)).limit(sql.placeholder('batch'))
    return db.delete(log).where(inArray(log.id, oldest)).returning({ id: log.id })
  })
const LOG_BATCH_DELETE = { activity_logs: logBatchDelete('activity_logs'), admin_logs: logBatchDelete('admin_logs') }

/**
 * Deletes up to `batch` entries created before `cutoff` (epoch µs, the unit of log times; oldest ids first); returns
 * how many. Run it in a short write transaction.
 */
export function* deleteLogBatch(table: LogTable, cutoff: Micros, batch: number) {
  return (yield* LOG_BATCH_DELETE[table].rows({ cutoff, batch })).length
}

/** The run counts /metrics reads at scrape time (see `queueStats`), on the store's connection; `executor`: this instance's. */
export function runQueueStats(store: Store, now: number, executor: ExecutorIdentity | null = null): Promise<QueueStats> {
  return read(store, queueStats(now, executor))
}

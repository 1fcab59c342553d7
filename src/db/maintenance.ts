/**
 * Maintenance on either store: log retention's batches (PostgreSQL's twin: ./postgres/maintenance.ts) and the run
 * counts /metrics reads. SQLite's own housekeeping (WAL checkpoints, planner statistics) is ./sqlite/upkeep.ts.
 */
import type { Micros } from '../lib/time.ts'
import type { Db, Store } from './open.ts'
import { queueStatsOnPostgres } from './postgres/queue.ts'
import { connectionOf, prepared } from './prepared.ts'
import { type ExecutorIdentity, queueStats, type QueueStats } from './queue.ts'

export type LogTable = 'activity_logs' | 'admin_logs'

/**
 * Deletes up to `batch` entries created before `cutoff` (epoch µs, the unit of log times); returns how many. Run it
 * in a short write transaction (`db` is that transaction's handle).
 */
export function deleteLogBatch(db: Db, table: LogTable, cutoff: Micros, batch: number): number {
  const statement = prepared(db, `retention.delete.${table}`, () =>
    connectionOf(db).prepare(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE created_at < ? ORDER BY id LIMIT ?)`),
  )
  return statement.run(cutoff, batch).changes
}

/** The run counts /metrics reads at scrape time (see `queueStats`), on the store's connection; `executor`: this instance's. */
export function runQueueStats(store: Store, now: number, executor: ExecutorIdentity | null = null): QueueStats | Promise<QueueStats> {
  return store.kind === 'postgres' ? queueStatsOnPostgres(store, now, executor) : queueStats(store.sqlite, now, executor)
}

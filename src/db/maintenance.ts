/** Maintenance SQL: log retention batches, WAL checkpoints, planner statistics. */
import type { Database } from 'bun:sqlite'
import { Cron } from 'croner'
import type { Micros } from '../lib/time.ts'
import type { Db, Store } from './open.ts'
import { connectionOf, prepared } from './prepared.ts'
import { queueStats, type QueueStats } from './queue.ts'

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

/** The run counts /metrics reads at scrape time (see `queueStats`), on the store's connection. */
export function runQueueStats(store: Store, now: number): QueueStats {
  return queueStats(store.sqlite, now)
}

/**
 * Copies every committed page from the WAL into the database file and truncates the WAL (graceful shutdown:
 * the file alone is then complete). `busy` is true when a reader elsewhere (a CLI process) kept it from finishing.
 */
export function checkpointWal(store: Store): { busy: boolean; walPages: number; checkpointedPages: number } {
  const [row] = store.sqlite.query('PRAGMA wal_checkpoint(TRUNCATE)').all() as { busy: number; log: number; checkpointed: number }[]
  return { busy: row?.busy === 1, walPages: row?.log ?? 0, checkpointedPages: row?.checkpointed ?? 0 }
}

/**
 * Keeps the query planner's statistics current (`PRAGMA optimize`, bounded by `analysis_limit`). Without them
 * SQLite may pick a poor index for combined filters (userEmail + teamName walked the team's index: 50× slower).
 */
export function optimizeDatabase(sqlite: Database): void {
  sqlite.run('PRAGMA analysis_limit = 1000')
  sqlite.run('PRAGMA optimize = 0x10002')
}

/** Runs optimizeDatabase now and then daily at 04:07 (croner); the returned job stops with the server. */
export function scheduleMaintenance(store: Store, onError: (error: Error) => void): Cron {
  const run = () => {
    try {
      optimizeDatabase(store.sqlite)
    } catch (error) {
      onError(error as Error)
    }
  }
  run()
  return new Cron('7 4 * * *', { protect: true }, run)
}

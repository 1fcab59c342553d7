/** Maintenance SQL: batched deletion of old log entries (retention). */
import type { Database } from 'bun:sqlite'

export type LogTable = 'activity_logs' | 'admin_logs'

/** Deletes up to `batch` entries created before `cutoff`; returns how many. One short IMMEDIATE transaction. */
export function deleteLogBatch(sqlite: Database, table: LogTable, cutoff: number, batch: number): number {
  const statement = sqlite.prepare(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE created_at < ? ORDER BY id LIMIT ?)`)
  return sqlite.transaction(() => statement.run(cutoff, batch).changes).immediate()
}

/**
 * Copies every committed page from the WAL into the database file and truncates the WAL (graceful shutdown:
 * the file alone is then complete). `busy` is true when a reader elsewhere (a CLI process) kept it from finishing.
 */
export function checkpointWal(sqlite: Database): { busy: boolean; walPages: number; checkpointedPages: number } {
  const [row] = sqlite.query('PRAGMA wal_checkpoint(TRUNCATE)').all() as { busy: number; log: number; checkpointed: number }[]
  return { busy: row?.busy === 1, walPages: row?.log ?? 0, checkpointedPages: row?.checkpointed ?? 0 }
}

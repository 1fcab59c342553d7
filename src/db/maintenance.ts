/** Maintenance SQL: batched deletion of old log entries (retention). */
import type { Database } from 'bun:sqlite'

export type LogTable = 'activity_logs' | 'admin_logs'

/** Deletes up to `batch` entries created before `cutoff`; returns how many. One short IMMEDIATE transaction. */
export function deleteLogBatch(sqlite: Database, table: LogTable, cutoff: number, batch: number): number {
  const statement = sqlite.prepare(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE created_at < ? ORDER BY id LIMIT ?)`)
  return sqlite.transaction(() => statement.run(cutoff, batch).changes).immediate()
}

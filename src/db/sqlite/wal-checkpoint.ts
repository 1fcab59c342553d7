/**
 * One WAL checkpoint on a connection: what the server's checkpoint thread (./checkpoint-worker.ts) runs, and what a
 * graceful shutdown runs on the server's own connection (./upkeep.ts).
 */
import type { Database } from 'bun:sqlite'

export type CheckpointMode = 'PASSIVE' | 'TRUNCATE'

export interface CheckpointResult {
  /** Another connection (a CLI's reader or writer, or the server's own write) kept the checkpoint from finishing. */
  busy: boolean
  walPages: number
  checkpointedPages: number
}

/**
 * Copies committed pages from the WAL into the database file. TRUNCATE also resets the WAL to zero bytes, so the file
 * alone is complete; PASSIVE copies what it can and never waits.
 */
export function checkpointOn(connection: Database, mode: CheckpointMode): CheckpointResult {
  const [row] = connection.query(`PRAGMA wal_checkpoint(${mode === 'TRUNCATE' ? 'TRUNCATE' : 'PASSIVE'})`).all() as { busy: number; log: number; checkpointed: number }[]
  return { busy: row?.busy === 1, walPages: row?.log ?? 0, checkpointedPages: row?.checkpointed ?? 0 }
}

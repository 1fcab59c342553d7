/**
 * SQLite's own housekeeping (the server's file only; PostgreSQL checkpoints and vacuums itself): WAL checkpoints off
 * the request path, and the query planner's statistics. Started through the store-neutral face, ../store.ts.
 */
import type { Database } from 'bun:sqlite'
import { statSync } from 'node:fs'
import { Cron } from 'croner'
import type { SqliteStore } from '../open.ts'

export interface CheckpointResult {
  /** Another process (a CLI's reader or writer) kept the checkpoint from finishing. */
  busy: boolean
  walPages: number
  checkpointedPages: number
}

/**
 * Copies committed pages from the WAL into the database file. TRUNCATE (graceful shutdown, or a WAL grown large)
 * also resets the WAL to zero bytes, so the file alone is complete; PASSIVE copies what it can and never waits.
 */
export function checkpointWal(store: SqliteStore, mode: 'PASSIVE' | 'TRUNCATE' = 'TRUNCATE'): CheckpointResult {
  const [row] = store.sqlite.query(`PRAGMA wal_checkpoint(${mode})`).all() as { busy: number; log: number; checkpointed: number }[]
  return { busy: row?.busy === 1, walPages: row?.log ?? 0, checkpointedPages: row?.checkpointed ?? 0 }
}

/** The size of the store's `-wal` file in bytes (0 when there is none). */
export function walBytes(store: SqliteStore): number {
  try {
    return statSync(`${store.path}-wal`).size
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw error
  }
}

/** Above this size the WAL is checkpointed at once (not at the next tick) and, once caught up, truncated. */
export const WAL_TRUNCATE_ABOVE_BYTES = 16 * 1024 * 1024

/** How often the timer looks at the `-wal` file's size (a stat: microseconds). */
const WAL_SIZE_POLL_MS = 25

/**
 * Takes WAL checkpoints off every request's path. SQLite's own (`wal_autocheckpoint`: the commit that crosses
 * 1,000 pages copies them and fsyncs, inside that request) is turned off on the server's connection; instead a
 * timer checkpoints between requests, every `everyMs` and at once when the file passes WAL_TRUNCATE_ABOVE_BYTES:
 * PASSIVE (copies what no reader still needs, never waits), then TRUNCATE when the file is that large and the copy
 * caught up (with busy_timeout 0 it gives up at once when another process is busy). Once a checkpoint has caught
 * up, the next commit writes the WAL from its start again: the file stays about as large as what is committed
 * between two checkpoints. While another process pins the WAL (busy), only the regular ticks retry.
 */
export function scheduleWalCheckpoints(
  store: SqliteStore,
  everyMs: number,
  report: { checkpointed(mode: 'passive' | 'truncate', result: CheckpointResult, walBytes: number): void; failed(error: Error): void },
): { stop(): void } {
  store.sqlite.run('PRAGMA wal_autocheckpoint = 0')
  let last = Date.now()
  let busy = false
  const tick = () => {
    const size = walBytes(store)
    const large = size > WAL_TRUNCATE_ABOVE_BYTES
    if (Date.now() - last < everyMs && !(large && !busy)) return
    last = Date.now()
    const passive = checkpointWal(store, 'PASSIVE')
    busy = passive.busy
    report.checkpointed('passive', passive, size)
    if (!large || passive.busy || passive.checkpointedPages < passive.walPages) return
    const truncated = checkpointWal(store, 'TRUNCATE')
    busy = truncated.busy
    report.checkpointed('truncate', truncated, walBytes(store))
  }
  const timer = setInterval(() => {
    try {
      tick()
    } catch (error) {
      report.failed(error as Error)
    }
  }, Math.min(everyMs, WAL_SIZE_POLL_MS))
  return { stop: () => clearInterval(timer) }
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
export function scheduleMaintenance(store: SqliteStore, onError: (error: Error) => void): Cron {
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

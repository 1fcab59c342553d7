/**
 * SQLite's own housekeeping (the server's file only; PostgreSQL checkpoints and vacuums itself): WAL checkpoints off
 * the request path (on a thread of their own), and the query planner's statistics. Started by a serving store
 * (./store.ts `serve`).
 */
import type { Database } from 'bun:sqlite'
import { statSync } from 'node:fs'
import { type DailyJob, runNowThenDaily } from '../../lib/daily-job.ts'
import type { SqliteFile } from './open.ts'
import type { CheckpointAnswer, CheckpointAsk } from './checkpoint-worker.ts'
import { type CheckpointMode, type CheckpointResult, checkpointOn } from './wal-checkpoint.ts'

export type { CheckpointResult } from './wal-checkpoint.ts'

/**
 * A checkpoint on the server's own connection, on the event loop: for a graceful shutdown (TRUNCATE, nothing else
 * runs any more) and for tools; the serving server's timed checkpoints run on their own thread (below).
 */
export function checkpointWal(store: SqliteFile, mode: CheckpointMode = 'TRUNCATE'): CheckpointResult {
  return checkpointOn(store.sqlite, mode)
}

/**
 * The checkpoint of a graceful stop: TRUNCATE, tried again every 25 ms for up to `withinMs` while another connection
 * keeps it busy (a CLI's reader, or the checkpoint thread's connection still closing), so the file alone is complete
 * whenever that connection lets go in time. The last result says whether it did.
 */
export async function checkpointBeforeClose(store: SqliteFile, withinMs: number, walRestarts: WalRestarts = 'trellis'): Promise<CheckpointResult> {
  // Litestream still has the last frames to copy: copy what can be copied, leave the WAL for it to restart.
  if (walRestarts === 'litestream') return checkpointWal(store, 'PASSIVE')
  const deadline = performance.now() + withinMs
  let result = checkpointWal(store, 'TRUNCATE')
  while (result.busy && performance.now() < deadline) {
    await Bun.sleep(25)
    result = checkpointWal(store, 'TRUNCATE')
  }
  return result
}

/** The size of the store's `-wal` file in bytes (0 when there is none). */
export function walBytes(store: SqliteFile): number {
  try {
    return statSync(`${store.path}-wal`).size
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw error
  }
}

/**
 * Who starts the WAL over. `trellis`: the server (a TRUNCATE past WAL_TRUNCATE_ABOVE_BYTES, and at a graceful stop).
 * `litestream`: Litestream replicates the file (src/lib/litestream.ts) and must copy every frame before the WAL
 * starts over, so it alone restarts it (its own checkpoints, under the read transaction it holds); the server's
 * checkpoints are all PASSIVE — they copy pages into the database file and never reset the WAL — and none runs while
 * Litestream is away (a WAL copied to its end is started over by SQLite's next commit when no reader holds it), so no
 * frame Litestream has not seen is ever overwritten.
 */
export type WalRestarts = 'trellis' | 'litestream'

/** Above this size the WAL is checkpointed at once (not at the next tick) and, once caught up, truncated. */
export const WAL_TRUNCATE_ABOVE_BYTES = 16 * 1024 * 1024

/** How often the timer looks at the `-wal` file's size (a stat: microseconds). */
const WAL_SIZE_POLL_MS = 25

/**
 * The checkpoint thread (./checkpoint-worker.ts, started from `entrypoint`): one checkpoint at a time on its own
 * connection to the file; a failed one rejects with the SQLite error's message and code (so a full disk is still
 * told from a bug).
 */
class CheckpointThread {
  private readonly worker: Worker
  private pending: { resolve(result: CheckpointResult): void; reject(error: Error): void } | null = null
  /** The thread failed or ended: the next checkpoint starts another. */
  dead = false

  constructor(entrypoint: URL, private readonly path: string) {
    this.worker = new Worker(entrypoint)
    this.worker.unref() // never what keeps the process alive
    this.worker.onmessage = ({ data }: MessageEvent<CheckpointAnswer>) => {
      const pending = this.take()
      if (data.ok) pending?.resolve(data.result)
      else pending?.reject(Object.assign(new Error(data.message), { code: data.code }))
    }
    const died = (why: string) => {
      this.dead = true
      this.take()?.reject(new Error(`WAL checkpoint thread: ${why}`))
    }
    this.worker.onerror = (event) => died(event.message)
    this.worker.addEventListener('close', () => died('ended'))
  }

  checkpoint(mode: CheckpointMode): Promise<CheckpointResult> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject }
      this.worker.postMessage({ path: this.path, mode } satisfies CheckpointAsk)
    })
  }

  terminate(): void {
    this.worker.terminate()
  }

  private take() {
    const pending = this.pending
    this.pending = null
    return pending
  }
}

/**
 * Takes WAL checkpoints off every request's path. SQLite's own (`wal_autocheckpoint`: the commit that crosses
 * 1,000 pages copies them and fsyncs, inside that request) is turned off on the server's connection; instead a
 * timer asks the checkpoint thread (`entrypoint`: its own connection, so the copy and the sync never hold the event
 * loop) for a PASSIVE checkpoint every `everyMs` (copies what no reader still needs, never waits, never locks out a
 * writer), one at a time; when the file passes WAL_TRUNCATE_ABOVE_BYTES, a TRUNCATE on the server's own connection,
 * between requests (copies the little the thread has not, resets the file; with busy_timeout 0 it gives up at once
 * when another connection is busy). Once a checkpoint has caught up, the next commit writes the WAL from its start
 * again: the file stays about as large as what is committed between two checkpoints. A TRUNCATE that found another
 * connection reading is tried again at the next poll (WAL_SIZE_POLL_MS), the thread's PASSIVEs going on at their pace
 * in between: a reader that pauses between long reads leaves short windows, and a retry every `everyMs` mostly missed
 * them while the file grew (a reader holding 300 ms and pausing 60 ms: 108–160 MB; with this retry 31–44 MB on a
 * quiet host, 101 MB once in CI: how short a pause it finds depends on how late a busy event loop runs the poll). The thread starts at the first checkpoint with a WAL to copy (an idle server
 * that has written nothing runs none).
 */
export function scheduleWalCheckpoints(
  store: SqliteFile,
  everyMs: number,
  entrypoint: URL,
  report: { checkpointed(mode: 'passive' | 'truncate', result: CheckpointResult, walBytes: number): void; failed(error: Error): void },
  walRestarts: WalRestarts = 'trellis',
  replicating: () => boolean = () => true,
): { stop(): Promise<void> } {
  store.sqlite.run('PRAGMA wal_autocheckpoint = 0')
  let thread: CheckpointThread | null = null
  let last = Date.now()
  let running: Promise<void> | null = null
  const tick = async () => {
    const size = walBytes(store)
    if (size === 0) return
    // Litestream away (restarting): no checkpoint, so the WAL cannot be copied to its end and started over by the next
    // commit before Litestream is back to copy it; it grows meanwhile, and the replica keeps its generation.
    if (walRestarts === 'litestream' && !replicating()) return
    if (walRestarts === 'trellis' && size > WAL_TRUNCATE_ABOVE_BYTES) {
      // The thread's PASSIVE copies run beside the server's commits, so under a steady write load they rarely catch up
      // and the WAL never starts over: past the threshold, this thread (between requests, as SQLite's own checkpoint
      // would inside one) copies what is left — little, the thread copied the rest — and truncates the file.
      const truncated = checkpointWal(store, 'TRUNCATE')
      report.checkpointed('truncate', truncated, walBytes(store))
      // Busy: tried again at the next poll; meanwhile the thread keeps copying at its pace, so a retry has little to copy.
      if (!truncated.busy) return
    }
    if (Date.now() - last < everyMs) return
    last = Date.now()
    if (thread?.dead) thread.terminate()
    if (!thread || thread.dead) thread = new CheckpointThread(entrypoint, store.path)
    report.checkpointed('passive', await thread.checkpoint('PASSIVE'), size)
  }
  const timer = setInterval(() => {
    running ??= tick()
      .catch((error: Error) => report.failed(error))
      .finally(() => (running = null))
  }, Math.min(everyMs, WAL_SIZE_POLL_MS))
  return {
    // After the checkpoint under way (the server's shutdown checkpoint follows, on its own connection).
    stop: async () => {
      clearInterval(timer)
      await running
      thread?.terminate()
      thread = null
    },
  }
}

/**
 * Keeps the query planner's statistics current (`PRAGMA optimize`, bounded by `analysis_limit`). Without them
 * SQLite may pick a poor index for combined filters (userEmail + teamName walked the team's index: 50× slower).
 */
export function optimizeDatabase(sqlite: Database): void {
  sqlite.run('PRAGMA analysis_limit = 1000')
  sqlite.run('PRAGMA optimize = 0x10002')
}

/** Runs optimizeDatabase now and then daily at 04:07 (local time); the returned job stops with the server. */
export function scheduleMaintenance(store: SqliteFile, onError: (error: Error) => void): DailyJob {
  return runNowThenDaily('7 4 * * *', () => {
    try {
      optimizeDatabase(store.sqlite)
    } catch (error) {
      onError(error as Error)
    }
  })
}

/**
 * The SQLite store (../store.ts `Store`): the one file of a data directory, opened with its pragmas (./open.ts). One
 * process serves it; its writes commit in groups (./group-commit.ts), its requests' reads run at once on its one
 * connection, and its upkeep (WAL checkpoints off the request path, planner statistics, the serving lock) runs
 * beside it while it serves. PostgreSQL's: ../postgres/store.ts.
 */
import type { Database } from 'bun:sqlite'
import type { Logger } from '../../lib/logger.ts'
import type { Metrics } from '../../lib/metrics.ts'
import { MemoryRateCounters, type RateCounters } from '../../lib/rate-counters.ts'
import { StorageUnavailableError } from '../../lib/storage-unavailable.ts'
import type { Db } from '../dialect.ts'
import type { Op } from '../op.ts'
import { announceRunEvents, takeAppendedEnvironments } from '../run-event-commits.ts'
import type { Listening, QueueWakeups, ServingSettings, Store, StoreUpkeep } from '../store.ts'
import { listenForCallbacks } from './callback-wakeups.ts'
import { GroupCommit } from './group-commit.ts'
import { migrate, pendingMigrations } from './migrate.ts'
import { openDatabaseFile, type SqliteFile } from './open.ts'
import { runOp } from './op-runner.ts'
import { holdServingLock, type ServingLock } from './serving-lock.ts'
import { filesReadOnly, roomToWrite, sqliteFaultOf, transaction } from './transactions.ts'
import { checkpointBeforeClose, scheduleMaintenance, scheduleWalCheckpoints } from './upkeep.ts'

/** How long a graceful stop's WAL checkpoint waits for another connection to let go (within SHUTDOWN_GRACE's budget). */
const CLOSING_CHECKPOINT_WAIT_MS = 1_000

export class SqliteStore implements Store, SqliteFile {
  readonly kind = 'sqlite'
  /** The raw connection, for prepared hot-path statements and maintenance. */
  readonly sqlite: Database
  readonly db: Db
  readonly path: string
  /** Held while this store serves its data directory (`serve`): no other process serves it. */
  servingLock: ServingLock | null = null
  /**
   * A run that ends claims the run taking over its slot in its own transaction: a claim of its own would cost a
   * group commit of its own, a commit after the group's.
   */
  readonly handsOverSlots = true
  private readonly commits: GroupCommit

  constructor(file: SqliteFile) {
    this.sqlite = file.sqlite
    this.db = file.db
    this.path = file.path
    this.commits = new GroupCommit(this)
  }

  close(): void {
    this.sqlite.close()
  }

  /** Group commits since the store opened: transactions committed and the writes they carried. */
  get committed(): { readonly transactions: number; readonly writes: number } {
    return this.commits.committed
  }

  /** Serving its data directory, it holds the serving lock: no other process runs anything of it. */
  get servesAlone(): boolean {
    return this.servingLock !== null
  }

  /**
   * The server's connection from now on: the driver never waits for a lock (busy_timeout 0 — its wait is synchronous
   * and would stop every request); `write()` waits instead, asynchronously, up to `writeWaitMs`.
   */
  keepEventLoopFree(writeWaitMs: number): void {
    this.sqlite.run('PRAGMA busy_timeout = 0')
    this.commits.waitMs = writeWaitMs
  }

  async read<T>(work: Op<T>): Promise<T> {
    return runOp(this.db, work)
  }

  async readSnapshot<T>(work: Op<T>): Promise<T> {
    return this.readTransaction(work)
  }

  readSync<T>(work: Op<T>): T {
    return this.readTransaction(work)
  }

  /** `work` in one read (deferred) transaction, synchronously; storage faults as in `writeTransaction`. */
  readTransaction<T>(work: Op<T>): T {
    return transaction(this, 'deferred', (db) => runOp(db, work))
  }

  /**
   * Runs `fn` in an IMMEDIATE transaction, once, and returns its result. The driver waits for another process's lock
   * as long as the connection's busy_timeout says (the CLI's: seconds; the server's: not at all). `fn` must be
   * synchronous — bun:sqlite transactions are. Storage faults are thrown as StorageUnavailableError.
   */
  writeTransaction<T>(fn: (tx: Db) => T): T {
    return transaction(this, 'immediate', fn)
  }

  write<T>(body: () => Op<T>, shareMs?: number): Promise<T> {
    return this.commits.queue(body, shareMs)
  }

  async writeNow<T>(body: () => Op<T>): Promise<T> {
    return this.commitNow(body)
  }

  writeSync<T>(body: () => Op<T>): T {
    return this.commitNow(body)
  }

  /** An op in one IMMEDIATE transaction, at once: the CLI's write (its connection waits in the driver for a lock). */
  commitNow<T>(body: () => Op<T>): T {
    let answer: T
    try {
      answer = this.writeTransaction((tx) => runOp(tx, body()))
    } catch (error) {
      takeAppendedEnvironments(this.db) // rolled back: nothing to announce
      throw error
    }
    announceRunEvents(this, takeAppendedEnvironments(this.db))
    return answer
  }

  tryWrite(body: () => Op<unknown>): boolean {
    try {
      this.writeTransaction((tx) => runOp(tx, body()))
      return true
    } catch (error) {
      if (error instanceof StorageUnavailableError) return false
      throw error
    }
  }

  storageErrorOf(error: unknown): StorageUnavailableError | null {
    return sqliteFaultOf(this, error)
  }

  /** A read-only mount, immutable or read-only files (/readyz, and the cause of a write's I/O error). */
  storageReadOnlyNow(): boolean {
    return filesReadOnly(this)
  }

  /**
   * Free space on the data directory's filesystem, or within SQLite's page limit, below `floorBytes` (/readyz).
   * Measured at each call, never inferred from the last write: one small commit on an all but full disk does not make
   * the instance ready.
   */
  storageFullNow(floorBytes: number): boolean {
    return roomToWrite(this) < floorBytes
  }

  /** One writer, in this process: no other transaction holds anything back. */
  longTransactionSeconds(): null {
    return null
  }

  /** One writer commits in the lists' order: every row committed is listed. */
  listingDelay(): null {
    return null
  }

  async pendingMigrations(): Promise<string[]> {
    return pendingMigrations(this.sqlite)
  }

  /** This process's memory: one process serves the instance. */
  rateCounters(): RateCounters {
    return new MemoryRateCounters()
  }

  /** One process queues and runs: its routes wake its executor directly (`Executor.notify`), nothing to listen to. */
  async listenForQueuedRuns(): Promise<QueueWakeups | null> {
    return null
  }

  async listenForTaskDeadlines(): Promise<Listening | null> {
    return null
  }

  /** By this process, on the store's connection (./callback-wakeups.ts). */
  async listenForCallbacks(wake: () => void): Promise<QueueWakeups> {
    return listenForCallbacks(this.sqlite, wake)
  }

  /** One process writes: nothing to listen to. Its own commits: `onRunEventsCommitted` (../run-event-commits.ts). */
  async listenForRunEvents(): Promise<Listening | null> {
    return null
  }

  /** Committed in id order: readable at once. */
  async awaitListed(): Promise<boolean> {
    return true
  }

  writeCounts(): { transactions: number; writes: number } {
    return this.commits.committed
  }

  /**
   * The data directory's serving lock is taken (a second `serve` on it is refused: ./serving-lock.ts), the driver
   * never waits for a lock again (`keepEventLoopFree`), and WAL checkpoints leave every request's path for a timer
   * (./upkeep.ts); at close, the last checkpoint.
   */
  serve(settings: ServingSettings, logger: Logger, metrics: Metrics): StoreUpkeep {
    this.servingLock = holdServingLock(settings.dataDir)
    this.keepEventLoopFree(settings.dbBusyWaitMs)
    // A full disk or a lock held elsewhere is a storage fault, not a failure of the server: said once (warn) until a
    // checkpoint succeeds again; the WAL keeps every committed write meanwhile.
    let checkpointFault = false
    const checkpoints = scheduleWalCheckpoints(this, settings.walCheckpointMs, settings.walCheckpointWorker, {
      checkpointed: (mode, result, bytes) => {
        checkpointFault = false
        metrics.walCheckpoints.inc({ mode, outcome: result.busy ? 'busy' : 'done' })
        metrics.walBytes.set(bytes)
      },
      failed: (error) => {
        const fault = this.storageErrorOf(error)
        // A checkpoint runs on its own thread: its I/O error may be told after the files became writable again, when
        // they no longer say why. Under a fault already said, it is that fault's; a second one in a row is an error.
        const lingering = fault === null && checkpointFault && String((error as { code?: unknown }).code ?? '').startsWith('SQLITE_IOERR')
        if (!fault && !lingering) logger.error('WAL checkpoint failed', { error: error.message })
        else if (fault && !checkpointFault) logger.warn('WAL checkpoint waits for the storage', { error: fault.message })
        checkpointFault = fault !== null
      },
    }, settings.walRestarts, settings.walReplicating)
    let maintenance: { stop(): void } | null = null
    let checkpointsStopped: Promise<void> | null = null
    const stop = () => {
      maintenance?.stop()
      checkpointsStopped ??= checkpoints.stop()
      return checkpointsStopped
    }
    return {
      startMaintenance: () => {
        maintenance = scheduleMaintenance(this, (error) => logger.error('database maintenance failed', { error: error.message }))
      },
      stop: () => void stop(),
      close: async () => {
        await stop() // the checkpoint thread's last checkpoint done: the final one is not refused as busy
        const checkpoint = await checkpointBeforeClose(this, CLOSING_CHECKPOINT_WAIT_MS, settings.walRestarts)
        this.close()
        this.servingLock?.release()
        this.servingLock = null
        return { walCheckpointed: !checkpoint.busy }
      },
    }
  }
}

/**
 * Opens (creating if needed) `<dataDir>/trellis.db` for the CLI: the driver waits for another's lock (./open.ts).
 * Does not migrate (`openMigrated`). A server then calls `serve`, which keeps its event loop free.
 */
export function openStore(dataDir: string): SqliteStore {
  return new SqliteStore(openDatabaseFile(dataDir))
}

/** Opens the data directory's database (the CLI's connection, see `openStore`) and brings its schema up to date. */
export function openMigrated(dataDir: string): SqliteStore {
  const store = openStore(dataDir)
  try {
    migrate(store.sqlite)
  } catch (error) {
    store.close()
    throw error
  }
  return store
}

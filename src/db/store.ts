/**
 * The store: where Trellis keeps its data, one interface over two classes — the embedded SQLite file
 * (./sqlite/store.ts, the default) and PostgreSQL (./postgres/store.ts, TRELLIS_DATABASE_URL). Code outside
 * `src/db/` takes a `Store` and never asks which one it has; where the two differ, each class answers its own way
 * (docs/architecture.md "The store is one interface"). Ops reach it through ./read.ts and ./write.ts.
 */
import type { Logger } from '../lib/logger.ts'
import type { Metrics } from '../lib/metrics.ts'
import type { RateCounters } from '../lib/rate-counters.ts'
import type { StorageUnavailableError } from '../lib/storage-unavailable.ts'
import type { Op } from './op.ts'
import type { WatermarkedList } from './dialect.ts'

/** Told the environments whose run events just committed (null: any environment may have new events). */
export type RunEventsListener = (environmentIds: readonly number[] | null) => void

/** A subscription to the store's notifications, until stopped. */
export interface Listening {
  stop(): Promise<void>
}

export type QueueWakeups = Listening

/** The fields of the configuration (src/config.ts) a serving store's upkeep needs. */
export interface ServingSettings {
  /** How long a write waits, asynchronously, for another process's lock before `database_busy`. */
  dbBusyWaitMs: number
  walCheckpointMs: number
  /** PostgreSQL: the age past which a transaction open anywhere in the cluster is reported (./postgres/transaction-watch.ts). */
  databaseLongTransactionSeconds: number
  /** PostgreSQL: how long a list's newest rows may stay unlisted before it is reported (./postgres/listing-watch.ts). */
  listingDelaySeconds: number
  /** SQLite: who starts the WAL over (./sqlite/upkeep.ts `WalRestarts`); `litestream` while Litestream replicates the file. */
  walRestarts?: 'trellis' | 'litestream'
  /** With `walRestarts: 'litestream'`: whether Litestream runs now; the server's checkpoints wait while it does not. */
  walReplicating?: () => boolean
  /** The checkpoint thread's entrypoint (src/worker-entrypoints.ts: it differs between the source tree and the binary). */
  walCheckpointWorker: URL
  /** The instance secret from TRELLIS_SECRET, when set (else the data directory's file). */
  secretFromEnv?: string | undefined
  dataDir: string
}

/** The upkeep a server runs beside its store, from start to close. */
export interface StoreUpkeep {
  /** Starts the scheduled maintenance (SQLite: planner statistics now and daily; nothing on PostgreSQL). */
  startMaintenance(): void
  /** Stops every timer (the first step of a graceful stop). */
  stop(): void
  /** Closes the store, SQLite's WAL checkpointed first so the file alone is complete; what the `stopped` line reports. */
  close(): Promise<{ walCheckpointed?: boolean }>
}

export interface Store {
  /** Which database it is, for messages; nothing decides by it (each class answers for itself). */
  readonly kind: 'sqlite' | 'postgres'
  close(): void | Promise<void>

  // ── Ops (./read.ts, ./write.ts) ──
  /** A request's read: each statement its own snapshot. */
  read<T>(work: Op<T>): Promise<T>
  /** `work` over one consistent snapshot (the CLI's reads, the server's start). */
  readSnapshot<T>(work: Op<T>): Promise<T>
  /** `readSnapshot` answered at once (tests, the bench's seeding); a store that answers only later refuses by name (`what`). */
  readSync<T>(work: Op<T>, what: string): T
  /** The server's write: one transaction (SQLite: a group commit); `shareMs`, the executor's share of a group commit. */
  write<T>(body: () => Op<T>, shareMs?: number): Promise<T>
  /** An op in one write transaction, at once: the CLI's write. */
  writeNow<T>(body: () => Op<T>): Promise<T>
  /** `writeNow` answered at once; a store that answers only later refuses by name (`what`). */
  writeSync<T>(body: () => Op<T>, what: string): T
  /** A write that may be skipped (a `lastUsedAt` stamp): false when the database is busy or full now. */
  tryWrite(body: () => Op<unknown>): boolean

  // ── The storage's state (/readyz, error answers) ──
  /** A driver error as the storage fault it is (the lock held elsewhere, a full disk, a server gone), else null. */
  storageErrorOf(error: unknown): StorageUnavailableError | null
  /** Whether the database's files refuse writes now (false where the storage is a database server's). */
  storageReadOnlyNow(): boolean
  /** Whether less than `floorBytes` of room is left now (false where the storage is a database server's). */
  storageFullNow(floorBytes: number): boolean
  /**
   * The age in seconds of a transaction open past TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS anywhere in the database
   * cluster, while serving; else null. PostgreSQL's (./postgres/transaction-watch.ts); SQLite has no other writers to
   * hold anything back: null.
   */
  longTransactionSeconds(): number | null
  /**
   * The list whose newest rows have stayed unlisted past TRELLIS_LISTING_DELAY_SECONDS, and for how long, while
   * serving; else null. PostgreSQL's (./postgres/listing-watch.ts); SQLite's one writer commits in list order: null.
   */
  listingDelay(): { list: string; seconds: number } | null
  /** The embedded migrations not applied yet. */
  pendingMigrations(): Promise<string[]>

  // ── The store's services beyond one op ──
  /** Where the limits count: this process's memory, or the database all instances share. */
  rateCounters(): RateCounters
  /** Calls `wake` whenever a run is queued on another connection or instance; null when nothing else can queue. */
  listenForQueuedRuns(wake: () => void): Promise<QueueWakeups | null>
  /** Calls `wake` whenever callback deliveries were queued and their transaction committed. */
  listenForCallbacks(wake: () => void): Promise<QueueWakeups>
  /**
   * Calls `wake` whenever a task with a deadline opened on another instance (../db/tasks.ts announces it); null when
   * no other can (SQLite: one process opens tasks and its executor tells its own deadline timer).
   */
  listenForTaskDeadlines(wake: () => void): Promise<Listening | null>
  /** Calls `wake` with the environments whose run events other instances committed; null when no other can. */
  listenForRunEvents(wake: RunEventsListener): Promise<Listening | null>
  /**
   * Resolves once the rows of `list` committed before the call can be read (true; SQLite's one writer commits in id
   * order: at once), or false after a second on PostgreSQL while a long transaction holds its watermark back
   * (./postgres/list-watermark.ts): what is listed can be read, the rest later. Within a served request "before the
   * call" is before the request arrived, and the request's own writes (a read shared with concurrent requests).
   */
  awaitListed(list: WatermarkedList): Promise<boolean>
  /**
   * Whether no other process can hold a lease of this store's work now (a SQLite store serving its data directory):
   * every run or delivery still leased at start is a dead process's, and is taken back at once.
   */
  readonly servesAlone: boolean
  /** Whether a run that ends claims the run taking over its slot in its own transaction (src/executor/executor.ts). */
  readonly handsOverSlots: boolean
  /** Group commits since the store opened (zero where each write commits alone). */
  writeCounts(): { transactions: number; writes: number }
  /** The store as a server's from now on, with the upkeep it runs beside its store until close. */
  serve(settings: ServingSettings, logger: Logger, metrics: Metrics): StoreUpkeep
}

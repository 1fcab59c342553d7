/**
 * The PostgreSQL store (../store.ts `Store`): a pool of Bun's built-in client (`SQL` from 'bun', chosen by
 * measurement: docs/architecture.md "Transactions across the face") behind Drizzle's `bun-sql` dialect, so PostgreSQL
 * reads and writes with the same query builder and the same row shapes (`bigint` columns in number mode) as the
 * SQLite side. `sql.begin` / Drizzle's `transaction` reserve one connection for `BEGIN … COMMIT`; other requests run
 * meanwhile on other connections and never see uncommitted rows (READ COMMITTED). Several instances may share it:
 * the limits count in the database, and instances hear of each other's queued runs, callbacks and run events through
 * `NOTIFY`. SQLite's: ../sqlite/store.ts.
 *
 * Imported only where a PostgreSQL store is opened (../connect.ts loads it with `import()`): the driver loads Bun's
 * PostgreSQL client with it (./client.ts has the types and `clientOf` everything else uses).
 */
import { SQL } from 'bun'
import { drizzle } from 'drizzle-orm/bun-sql'
import type { Logger } from '../../lib/logger.ts'
import type { RateCounters } from '../../lib/rate-counters.ts'
import type { StorageUnavailableError } from '../../lib/storage-unavailable.ts'
import type { Op } from '../op.ts'
import { announceRunEvents } from '../run-event-commits.ts'
import type { Listening, QueueWakeups, RunEventsListener, ServingSettings, Store, StoreUpkeep } from '../store.ts'
import type { WatermarkedList } from '../dialect.ts'
import type { PgDb } from './client.ts'
import { pendingPostgresMigrations } from './migrate.ts'
import { notifySoon } from './notify.ts'
import { type Committed, postgresFaultOf, readOnPostgres, snapshotOnPostgres, writeOnPostgres } from './op-runner.ts'
import { CALLBACKS_CHANNEL, listenOnPostgres, RUNS_CHANNEL, TASKS_CHANNEL } from './queue.ts'
import { PgRateCounters } from './rate-windows.ts'
import { ListingWatch } from './listing-watch.ts'
import { TransactionWatch } from './transaction-watch.ts'
import type { Metrics } from '../../lib/metrics.ts'
import { listenForRunEvents, notifyRunEventsCommitted } from './run-events.ts'
import { awaitListed } from './list-watermark.ts'
import { requestWroteNow } from '../../lib/request-arrival.ts'

export { clientOf, type PgDb } from './client.ts'

/** How long a reader of run events waits for their watermark at most before it reads what is listed. */
const LISTING_WAIT_MS = 1_000

export class PgStore implements Store {
  readonly kind = 'postgres'
  readonly db: PgDb
  /** Other instances may be alive and holding their leases: a lease is taken back only once it ran out. */
  readonly servesAlone = false
  /**
   * A run that ends leaves its slot to the executor's next claim: here the claim's row locks would last as long as
   * the step group's transaction, and its drain measured slower (docs/performance.md).
   */
  readonly handsOverSlots = false
  /**
   * After a commit: the run events it appended to this process's listeners and every other instance, and the channels
   * it should wake (queued runs, deliveries, deadlines) — one NOTIFY a channel for many commits, sent after them (./notify.ts).
   */
  private readonly committed = ({ runEvents, channels }: Committed) => {
    requestWroteNow() // the request's later reads of the lists include what it wrote
    if (runEvents.length > 0) {
      announceRunEvents(this, runEvents)
      notifyRunEventsCommitted(this.sql, runEvents)
    }
    for (const channel of channels) notifySoon(this.sql, channel)
  }

  /** The watches for long transactions and for the lists' lag, while serving. */
  private transactions: TransactionWatch | undefined
  private listing: ListingWatch | undefined

  /**
   * `sql`: the pool, for raw statements (the queue's claim, migrations, NOTIFY). `listener`: where LISTEN runs — the
   * pool's own dedicated connection, or a direct connection of its own when the pool goes through a transaction
   * pooler, which hands each transaction any server connection and so cannot keep a LISTEN (`openPostgres`).
   */
  constructor(
    readonly sql: SQL,
    private readonly listener: SQL = sql,
  ) {
    this.db = drizzle({ client: sql })
  }

  async close(): Promise<void> {
    if (this.listener !== this.sql) await this.listener.close()
    await this.sql.close()
  }

  /** On the pool, each statement its own snapshot. */
  read<T>(work: Op<T>): Promise<T> {
    return readOnPostgres(this.db, work)
  }

  /** REPEATABLE READ, read only. */
  readSnapshot<T>(work: Op<T>): Promise<T> {
    return snapshotOnPostgres(this.db, work)
  }

  readSync<T>(_work: Op<T>, what: string): T {
    throw answersOnlyLater(what)
  }

  /** Each write in its own transaction: the executor's statements run in the database server, not on the event loop. */
  write<T>(body: () => Op<T>): Promise<T> {
    return writeOnPostgres(this.db, body, this.committed)
  }

  writeNow<T>(body: () => Op<T>): Promise<T> {
    return writeOnPostgres(this.db, body, this.committed)
  }

  writeSync<T>(_body: () => Op<T>, what: string): T {
    throw answersOnlyLater(what)
  }

  /** Nothing waits on it: the write commits in the background, and is simply lost if the database cannot take it. */
  tryWrite(body: () => Op<unknown>): boolean {
    this.write(body).catch(() => {})
    return true
  }

  storageErrorOf(error: unknown): StorageUnavailableError | null {
    return postgresFaultOf(error)
  }

  /** The storage is the database server's, not this process's to see. */
  storageReadOnlyNow(): boolean {
    return false
  }

  /** The disk is the database server's, not this process's to see. */
  storageFullNow(): boolean {
    return false
  }

  /** While serving: the watch's age of a transaction open past the limit (./transaction-watch.ts). */
  longTransactionSeconds(): number | null {
    return this.transactions?.overLimit() ?? null
  }

  /** While serving: the list lagging past the limit (./listing-watch.ts). */
  listingDelay(): { list: string; seconds: number } | null {
    return this.listing?.overLimit() ?? null
  }

  pendingMigrations(): Promise<string[]> {
    return pendingPostgresMigrations(this.sql)
  }

  /** In the database, so every instance sharing it spends one budget (./rate-windows.ts). */
  rateCounters(): RateCounters {
    return new PgRateCounters(this.sql)
  }

  /**
   * A run queued (or given back) on any instance sends `NOTIFY trellis_runs` on commit (../queue.ts
   * `announceQueuedRuns`), so every executor claims at once instead of at its next poll.
   */
  listenForQueuedRuns(wake: () => void): Promise<QueueWakeups> {
    return listenOnPostgres(this.listener, RUNS_CHANNEL, wake)
  }

  /** Tasks with a deadline opened on any instance: `NOTIFY trellis_tasks` (../tasks.ts). */
  listenForTaskDeadlines(wake: () => void): Promise<Listening> {
    return listenOnPostgres(this.listener, TASKS_CHANNEL, wake)
  }

  /** Deliveries queued on any instance: `NOTIFY trellis_callbacks` (../callbacks.ts `announceCallbacks`). */
  listenForCallbacks(wake: () => void): Promise<QueueWakeups> {
    return listenOnPostgres(this.listener, CALLBACKS_CHANNEL, wake)
  }

  /** The NOTIFY each instance sends after a commit that appended run events, and null after a reconnect (./run-events.ts). */
  listenForRunEvents(wake: RunEventsListener): Promise<Listening> {
    return listenForRunEvents(this.listener, wake)
  }

  /** The passes the list's watermark needs, on the pool (./list-watermark.ts). */
  awaitListed(list: WatermarkedList): Promise<boolean> {
    return awaitListed(this.sql, list, LISTING_WAIT_MS)
  }

  /** Each write commits alone. */
  writeCounts(): { transactions: number; writes: number } {
    return { transactions: 0, writes: 0 }
  }

  /**
   * PostgreSQL checkpoints and vacuums itself; beside it run the watches for long transactions in the cluster
   * (./transaction-watch.ts) and for the lists' lag (./listing-watch.ts). Several instances may share it, so without
   * TRELLIS_SECRET it warns that they must share the secret.
   */
  serve(settings: ServingSettings, logger: Logger, metrics: Metrics): StoreUpkeep {
    if (!settings.secretFromEnv) {
      logger.warn('PostgreSQL: every instance must sign webhook URLs with the same secret; set TRELLIS_SECRET on all of them', { secretFile: settings.dataDir })
    }
    const watch = new TransactionWatch(this.sql, settings.databaseLongTransactionSeconds, logger, metrics.oldestTransaction)
    const listing = new ListingWatch(this.sql, settings.listingDelaySeconds, logger, metrics.listLag)
    this.transactions = watch
    this.listing = listing
    watch.start()
    listing.start()
    const stop = () => {
      watch.stop()
      listing.stop()
    }
    return { startMaintenance: () => {}, stop, close: () => this.close().then(() => ({})) }
  }
}

/** What a caller that needs an answer at once is told: PostgreSQL answers only later. */
function answersOnlyLater(what: string): Error {
  return new Error(`${what} works on the embedded SQLite database only`)
}

/**
 * A store on the database at `url`. With `listenUrl` (TRELLIS_DATABASE_LISTEN_URL), `url` goes through a pooler in
 * transaction mode (PgBouncer): each transaction may run on another server connection, so the pool sends unnamed
 * statements (a named prepared statement lives on one server connection), nothing outlives a transaction (advisory
 * locks are all transaction-level), and LISTEN runs on a direct connection to the same database at `listenUrl`.
 * `max`: the pool's connections at most (the instance's TRELLIS_DATABASE_POOL).
 */
export function openPostgres(url: string, options: { max: number; listenUrl?: string }): PgStore {
  const pooled = options.listenUrl !== undefined
  const sql = new SQL({ url, max: options.max, prepare: !pooled })
  return new PgStore(sql, pooled ? new SQL({ url: options.listenUrl, max: 1 }) : sql)
}

/**
 * The store-neutral face of what a store does beyond reads and writes (docs/architecture.md "Architecture"): the counters every
 * limit counts with, how an executor hears of runs queued elsewhere, the group-commit counts, and the upkeep a server
 * runs beside its store. Each function takes either store and decides here by its kind, so code outside `src/db/`
 * never knows which store it has. The dialects' own code: ./sqlite/ (and ./open.ts), ./postgres/.
 */
import type { Logger } from '../lib/logger.ts'
import type { Metrics } from '../lib/metrics.ts'
import { MemoryRateCounters, type RateCounters } from '../lib/rate-counters.ts'
import { keepEventLoopFree, type Store } from './open.ts'
import { CALLBACKS_CHANNEL, listenOnPostgres, RUNS_CHANNEL, TASKS_CHANNEL } from './postgres/queue.ts'
import { listenForRunEvents } from './postgres/run-events.ts'
import { PgRateCounters } from './postgres/rate-windows.ts'
import { listenForSqliteCallbacks, releaseEveryCallbackLease } from './callbacks.ts'
import { releaseEveryMailLease } from './mail.ts'
import { answer, type Op } from './op.ts'
import { recoverExpiredRuns, requeueRunningRuns } from './queue.ts'
import type { RunEventsListener } from './run-event-commits.ts'
import { holdServingLock } from './sqlite/serving-lock.ts'
import { checkpointBeforeClose, scheduleMaintenance, scheduleWalCheckpoints } from './sqlite/upkeep.ts'
import { storageErrorOf } from './write.ts'

/**
 * Where the limits count: this process's memory on SQLite (one process serves the instance), the database on
 * PostgreSQL so every instance sharing it spends one budget (./postgres/rate-windows.ts).
 */
export function rateCountersOf(store: Store): RateCounters {
  return store.kind === 'postgres' ? new PgRateCounters(store.sql) : new MemoryRateCounters()
}

/** A subscription to the store's notifications, until stopped. */
export interface Listening {
  stop(): Promise<void>
}

export type QueueWakeups = Listening

/**
 * Calls `wake` whenever a run is queued on another connection or instance; resolves once listening. On PostgreSQL
 * several instances share the queue: a run queued (or given back) on one sends `NOTIFY trellis_runs` on commit
 * (./queue.ts `announceQueuedRuns`) and every executor LISTENs (./postgres/queue.ts), so it claims at once instead of at its next poll. On SQLite one
 * process queues and runs: its routes wake its executor directly (`Executor.notify`), and there is nothing to listen
 * to (null).
 */
export async function listenForQueuedRunsOn(store: Store, wake: () => void): Promise<QueueWakeups | null> {
  return store.kind === 'postgres' ? listenOnPostgres(store.sql, RUNS_CHANNEL, wake) : null
}

/**
 * Calls `wake` whenever callback deliveries were queued (a run ended, a resend) and their transaction committed;
 * resolves once listening. PostgreSQL: on any instance (`NOTIFY trellis_callbacks`, ./callbacks.ts `announceCallbacks`).
 * SQLite: by this process on the store's connection (../db/callbacks.ts `announceCallbacks`).
 */
export async function listenForCallbacksOn(store: Store, wake: () => void): Promise<QueueWakeups> {
  return store.kind === 'postgres' ? listenOnPostgres(store.sql, CALLBACKS_CHANNEL, wake) : listenForSqliteCallbacks(store.sqlite, wake)
}

/**
 * Calls `wake` whenever a task with a deadline opened on another instance (PostgreSQL: `NOTIFY trellis_tasks` on
 * commit, ./tasks.ts); resolves once listening. SQLite: one process opens tasks and its executor tells its own
 * deadline timer (null).
 */
export async function listenForTaskDeadlinesOn(store: Store, wake: () => void): Promise<Listening | null> {
  return store.kind === 'postgres' ? listenOnPostgres(store.sql, TASKS_CHANNEL, wake) : null
}

/**
 * What a starting delivery worker takes back at once: as for runs (`recoverRunsAtStart`), on a SQLite store that
 * serves its data directory every lease is a dead process's, so all are handed back; elsewhere a lease is taken over
 * once it has run out (the claim's own rule), and nothing is done now.
 */
export function recoverCallbacksAtStart(store: Store): Op<number> {
  return store.kind === 'sqlite' && store.servingLock !== null ? releaseEveryCallbackLease() : answer(0)
}

/** What a starting mail sender takes back at once: the same rule as `recoverCallbacksAtStart`. */
export function recoverMailAtStart(store: Store): Op<number> {
  return store.kind === 'sqlite' && store.servingLock !== null ? releaseEveryMailLease() : answer(0)
}

/**
 * Calls `wake` with the environments whose run events other instances committed (null: any may have): on PostgreSQL
 * the NOTIFY each instance sends after such a commit (./postgres/run-events.ts), and null again after the listening
 * connection was lost and is back; resolves once listening. SQLite: one process writes, nothing to listen to (null).
 * This process's own commits: `onRunEventsCommitted` (./run-event-commits.ts).
 */
export async function listenForRunEventsOn(store: Store, wake: RunEventsListener): Promise<Listening | null> {
  return store.kind === 'postgres' ? listenForRunEvents(store.sql, wake) : null
}

/**
 * What a starting executor takes back into the queue at once. SQLite: a store that serves its data directory holds
 * the serving lock (`serveFrom`), so no other process runs anything of it — a run still `running` belongs to a
 * process that died, and every one resumes now instead of after its lease (until then its record answers 409).
 * PostgreSQL (and a SQLite store that does not serve): other processes may be alive and holding their runs, so only
 * leases that expired.
 */
export function recoverRunsAtStart(store: Store, now: number): Op<number> {
  return store.kind === 'sqlite' && store.servingLock !== null ? requeueRunningRuns(now) : recoverExpiredRuns(now)
}

/**
 * Whether a run that ends claims the run taking over its slot in its own transaction (src/executor/executor.ts
 * `persistGroup`). SQLite: yes — a claim of its own would cost a group commit of its own, a commit after the group's.
 * PostgreSQL: no — there the claim's row locks would last as long as the step group's transaction, and its drain
 * measured slower (docs/performance.md "Executor on a large database: the slot handed over").
 */
export function handsOverSlots(store: Store): boolean {
  return store.kind === 'sqlite'
}

/** Group commits since the store opened (SQLite's write queue, ./write.ts); PostgreSQL commits each write alone: zero. */
export function writeCountsOf(store: Store): { transactions: number; writes: number } {
  return store.kind === 'sqlite' ? store.committed : { transactions: 0, writes: 0 }
}

/** The fields of the configuration (src/config.ts) the store's upkeep needs. */
export interface ServingSettings {
  /** How long a write waits, asynchronously, for another process's lock before `database_busy`. */
  dbBusyWaitMs: number
  walCheckpointMs: number
  /** The checkpoint thread's entrypoint (src/worker-entrypoints.ts: it differs between the source tree and the binary). */
  walCheckpointWorker: URL
  /** The instance secret from TRELLIS_SECRET, when set (else the data directory's file). */
  secretFromEnv?: string | undefined
  dataDir: string
}

/** How long a graceful stop's WAL checkpoint waits for another connection to let go (within SHUTDOWN_GRACE's budget). */
const CLOSING_CHECKPOINT_WAIT_MS = 1_000

/** The upkeep a server runs beside its store, from start to close. */
export interface StoreUpkeep {
  /** Starts the scheduled maintenance (SQLite: planner statistics now and daily; nothing on PostgreSQL). */
  startMaintenance(): void
  /** Stops every timer (the first step of a graceful stop). */
  stop(): void
  /** Closes the store, SQLite's WAL checkpointed first so the file alone is complete; what the `stopped` line reports. */
  close(): Promise<{ walCheckpointed?: boolean }>
}

/**
 * The store as a server's from now on. SQLite: the data directory's serving lock is taken (a second `serve` on it is
 * refused: ./sqlite/serving-lock.ts), the driver never waits for a lock again (`keepEventLoopFree`), and
 * WAL checkpoints leave every request's path for a timer (./sqlite/upkeep.ts). PostgreSQL checkpoints and vacuums
 * itself; several instances may share it, so without TRELLIS_SECRET it warns that they must share the secret.
 */
export function serveFrom(store: Store, settings: ServingSettings, logger: Logger, metrics: Metrics): StoreUpkeep {
  if (store.kind === 'postgres') {
    if (!settings.secretFromEnv) {
      logger.warn('PostgreSQL: every instance must sign webhook URLs with the same secret; set TRELLIS_SECRET on all of them', { secretFile: settings.dataDir })
    }
    return { startMaintenance: () => {}, stop: () => {}, close: () => store.close().then(() => ({})) }
  }
  store.servingLock = holdServingLock(settings.dataDir)
  keepEventLoopFree(store, settings.dbBusyWaitMs)
  // A full disk or a lock held elsewhere is a storage fault, not a failure of the server: said once (warn) until a
  // checkpoint succeeds again; the WAL keeps every committed write meanwhile.
  let checkpointFault = false
  const checkpoints = scheduleWalCheckpoints(store, settings.walCheckpointMs, settings.walCheckpointWorker, {
    checkpointed: (mode, result, bytes) => {
      checkpointFault = false
      metrics.walCheckpoints.inc({ mode, outcome: result.busy ? 'busy' : 'done' })
      metrics.walBytes.set(bytes)
    },
    failed: (error) => {
      const fault = storageErrorOf(store, error)
      if (!fault) logger.error('WAL checkpoint failed', { error: error.message })
      else if (!checkpointFault) logger.warn('WAL checkpoint waits for the storage', { error: fault.message })
      checkpointFault = fault !== null
    },
  })
  let maintenance: { stop(): void } | null = null
  let checkpointsStopped: Promise<void> | null = null
  const stop = () => {
    maintenance?.stop()
    checkpointsStopped ??= checkpoints.stop()
    return checkpointsStopped
  }
  return {
    startMaintenance: () => {
      maintenance = scheduleMaintenance(store, (error) => logger.error('database maintenance failed', { error: error.message }))
    },
    stop: () => void stop(),
    close: async () => {
      await stop() // the checkpoint thread's last checkpoint done: the final one is not refused as busy
      const checkpoint = await checkpointBeforeClose(store, CLOSING_CHECKPOINT_WAIT_MS)
      store.close()
      store.servingLock?.release()
      store.servingLock = null
      return { walCheckpointed: !checkpoint.busy }
    },
  }
}

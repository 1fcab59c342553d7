/**
 * The one rule for writing (docs/operations.md "Storage faults"): every write is an IMMEDIATE transaction; a process with an
 * event loop to keep free (the server) never lets the driver wait for another process's lock — `write()` waits
 * asynchronously, retrying, up to the store's budget, then gives up with `database_busy`; a full disk is
 * `storage_full` at once. The CLI has no event loop to protect: its `writeTransaction` waits in the driver.
 */
import { accessSync, constants, existsSync, statfsSync } from 'node:fs'
import { dirname } from 'node:path'
import { StorageUnavailableError, storageFull } from '../lib/storage-unavailable.ts'
import { countListTimes } from './monotonic.ts'
import type { Op } from './op.ts'
import { runOp } from './sqlite/op-runner.ts'
import { connectionOf } from './prepared.ts'
import { inSavepoint } from './savepoint.ts'
import { type Db, type QueuedWrite, type SqliteStore, sqliteOnly, type Store } from './open.ts'
import { postgresFaultOf, writeOnPostgres } from './postgres/op-runner.ts'
import { announceRunEvents, takeAppendedEnvironments } from './run-event-commits.ts'

/** Seconds a client should wait before retrying a write refused for the lock. */
export const BUSY_RETRY_AFTER_SECONDS = 1
/** A file system made read-only rarely comes back within seconds either (an operator remounts it). */
export const READ_ONLY_RETRY_AFTER_SECONDS = 60

const FIRST_RETRY_MS = 5
const LONGEST_RETRY_MS = 50

/** A driver error as the storage fault it is (the lock is held elsewhere, the disk is full), else null. */
export function storageErrorOf(store: Store, error: unknown): StorageUnavailableError | null {
  if (error instanceof StorageUnavailableError) return error
  if (store.kind === 'postgres') return postgresFaultOf(error)
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code !== 'string') return null
  if (code.startsWith('SQLITE_BUSY')) {
    return new StorageUnavailableError('database_busy', 'Another process holds the database write lock', BUSY_RETRY_AFTER_SECONDS)
  }
  if (code === 'SQLITE_FULL') return storageFull()
  // A read-only file system (or immutable files) fails SQLite's write() with EROFS/EPERM, which it reports as an
  // I/O error: it is one only when the files are still writable; else it is the read-only storage it is.
  if (code.startsWith('SQLITE_READONLY') || (code.startsWith('SQLITE_IOERR') && storageReadOnlyNow(store))) {
    return new StorageUnavailableError('storage_read_only', 'The database files cannot be written (a read-only file system or files): nothing was written', READ_ONLY_RETRY_AFTER_SECONDS)
  }
  return null
}

/**
 * Whether the SQLite database's files refuse writes now (/readyz, and the cause of a write's I/O error): a read-only
 * mount, immutable or read-only files. PostgreSQL's storage is the database server's: false.
 */
export function storageReadOnlyNow(store: Store): boolean {
  if (store.kind !== 'sqlite') return false
  for (const file of [store.path, `${store.path}-wal`]) {
    try {
      if (existsSync(file)) accessSync(file, constants.W_OK)
    } catch {
      return true
    }
  }
  return false
}

/**
 * Runs `fn` in an IMMEDIATE transaction, once, and returns its result. The driver waits for another process's lock
 * as long as the connection's busy_timeout says (the CLI's: seconds; the server's: not at all). `fn` must be
 * synchronous — bun:sqlite transactions are. Storage faults are thrown as StorageUnavailableError.
 */
export function writeTransaction<T>(store: SqliteStore, fn: (tx: Db) => T): T {
  return transaction(store, 'immediate', fn)
}

/** An op in one write transaction, at once, on either store: the CLI's write (SQLite: `commitNow`). */
export async function writeNow<T>(store: Store, body: () => Op<T>): Promise<T> {
  return store.kind === 'postgres' ? writeOnPostgres(store, body) : commitNow(store, body)
}

/** `writeNow` answered synchronously (see `readSync`): SQLite's `commitNow`; PostgreSQL is refused by name (`what`). */
export function writeSync<T>(store: Store, body: () => Op<T>, what: string): T {
  return commitNow(sqliteOnly(store, what), body)
}

/** An op in one IMMEDIATE transaction, at once: the CLI's write (its connection waits in the driver for a lock). */
export function commitNow<T>(store: SqliteStore, body: () => Op<T>): T {
  let answer: T
  try {
    answer = writeTransaction(store, (tx) => runOp(tx, body()))
  } catch (error) {
    takeAppendedEnvironments(store.db) // rolled back: nothing to announce
    throw error
  }
  announceRunEvents(store, takeAppendedEnvironments(store.db))
  return answer
}

/** `fn` in one transaction of the given kind; a driver error that is a storage fault is thrown as one. */
export function transaction<T>(store: SqliteStore, behavior: 'immediate' | 'deferred', fn: (tx: Db) => T): T {
  try {
    return store.db.transaction((tx) => countListTimes(store.db, () => fn(tx as unknown as Db)), { behavior })
  } catch (error) {
    throw storageErrorOf(store, error) ?? error
  }
}

/**
 * The server's write, committed with the others that arrive in the same turn of the event loop (group commit): the
 * op waits in the store's queue; at the end of the turn one IMMEDIATE transaction runs the queued ops, each in its
 * own savepoint, so one op's failure (a 409, a validation error, a lost lease) rolls back that op alone and reaches
 * its caller alone. Every caller is answered only after the COMMIT: acknowledged means committed. While another
 * process holds the lock the batch waits asynchronously (5 ms doubling to 50 ms), the event loop serving everything
 * else, until each write's own `writeWaitMs` has passed, then `database_busy`. A batch that did not commit rolled
 * back entirely, so its ops run again from scratch (`body` makes a fresh one): an op must have no effect outside
 * the transaction.
 */
export function write<T>(store: Store, body: () => Op<T>): Promise<T> {
  return queueWrite(store, body)
}

/**
 * `write`, for the executor's share of the event loop (docs/workflows.md "Executor"): on SQLite one group commit runs
 * such writes for `shareMs` at most (and at least one); those past it go back to the front of the queue for the
 * next turn, while the other writes of the batch go on. So a busy turn gives HTTP its request slice
 * (src/http/turn-slices.ts) and the executor `shareMs` of step groups, whatever the backlog. PostgreSQL runs the
 * executor's statements in the database server, not on the event loop: there it is `write`.
 */
export function writeInShare<T>(store: Store, body: () => Op<T>, shareMs: number): Promise<T> {
  return queueWrite(store, body, shareMs)
}

function queueWrite<T>(store: Store, body: () => Op<T>, shareMs?: number): Promise<T> {
  if (store.kind === 'postgres') return writeOnPostgres(store, body)
  return new Promise<T>((resolve, reject) => {
    store.queuedWrites.push({
      run: (tx) => runOp(tx, body()),
      resolve: resolve as (value: unknown) => void,
      reject,
      deadline: performance.now() + store.writeWaitMs,
      shareMs,
    })
    scheduleCommit(store, 0)
  })
}

/** The most writes one transaction commits; the rest wait for the next (a turn's worth is far below it). */
export const GROUP_COMMIT_LIMIT = 512

/**
 * The work one group commit runs before it commits: the writes queued past it go to the next transaction, in the
 * next turn. Like the request slices (src/http/turn-slices.ts) it keeps each turn of the event loop short under a
 * write load, so that `/healthz` is never held behind a long commit; a commit still takes every write
 * that fits (a few at about 1 ms a write, dozens of small ones).
 */
export const GROUP_COMMIT_BUDGET_MS = 3

/**
 * The budget instead while the commit's next write is the executor's and no request waits (its share unbounded,
 * `writeInShare`): a step group on a large database takes 1–2 ms, so the 3 ms budget would split the default four
 * workers' groups over two commits, each writing again the pages they share (the newest pages of the runs', events'
 * and logs' indexes). One commit writes them once (docs/performance.md). Bounded still: however many workers, a
 * request arriving meanwhile waits about this long at most.
 */
export const EXECUTOR_COMMIT_BUDGET_MS = 12

/** The work a group commit may have run before it starts `queued` (it runs at least one write). */
const budgetBefore = (queued: QueuedWrite) => (queued.shareMs === Number.POSITIVE_INFINITY ? EXECUTOR_COMMIT_BUDGET_MS : GROUP_COMMIT_BUDGET_MS)

/** The next group commit, at the end of this turn or after `delayMs`; `pause`: the wait after it if the lock is taken. */
function scheduleCommit(store: SqliteStore, delayMs: number, pause = FIRST_RETRY_MS): void {
  if (store.commitScheduled) return
  store.commitScheduled = true
  const commit = () => {
    store.commitScheduled = false
    commitQueued(store, pause)
  }
  if (delayMs === 0) setImmediate(commit)
  else setTimeout(commit, delayMs)
}

/**
 * One transaction for the queued writes (up to the limit), oldest first, while the budget lasts (at least one): the
 * writes it did not reach go back to the front of the queue for the next. Answers each after the commit, or retries
 * or refuses the whole batch when the transaction fails.
 */
function commitQueued(store: SqliteStore, pause: number): void {
  const batch = store.queuedWrites.splice(0, GROUP_COMMIT_LIMIT)
  if (batch.length === 0) return
  const started = performance.now()
  let outcomes: ({ value: unknown } | { error: unknown })[]
  try {
    outcomes = writeTransaction(store, (tx) => {
      if (batch.length === 1) return [{ value: batch[0]!.run(tx) }]
      const done: ({ value: unknown } | { error: unknown })[] = []
      const share = new ShareOfCommit()
      try {
        for (let i = 0; i < batch.length; i++) {
          if (done.length > 0 && performance.now() - started >= budgetBefore(batch[i]!)) break
          // Past the executor's share: its writes go back to the queue (unanswered, unrun) for the next commit.
          if (share.spent(batch[i]!)) share.deferred.push(...batch.splice(i--, 1))
          else done.push(share.timed(batch[i]!, () => inOwnSavepoint(store, tx, batch[i]!)))
        }
      } finally {
        store.queuedWrites.unshift(...share.deferred)
      }
      return done
    })
  } catch (error) {
    takeAppendedEnvironments(store.db) // rolled back: nothing to announce
    const fault = storageErrorOf(store, error) ?? error
    if (fault instanceof StorageUnavailableError && fault.code === 'database_busy') return retryLater(store, batch, fault, pause)
    for (const queued of batch) queued.reject(fault)
    if (store.queuedWrites.length > 0) scheduleCommit(store, 0)
    return
  }
  store.queuedWrites.unshift(...batch.splice(outcomes.length))
  if (store.queuedWrites.length > 0) scheduleCommit(store, 0)
  announceRunEvents(store, takeAppendedEnvironments(store.db))
  store.committed.transactions++
  store.committed.writes += batch.length
  batch.forEach((queued, i) => {
    const outcome = outcomes[i]!
    if ('value' in outcome) queued.resolve(outcome.value)
    else queued.reject(outcome.error)
  })
}

/** The executor's writes (`writeInShare`) in one group commit: the ms they took, and those put off past their share. */
class ShareOfCommit {
  private ms = 0
  private ran = false
  readonly deferred: QueuedWrite[] = []

  /** Whether `queued` is the executor's and its share of this commit is spent (one of its writes always runs). */
  spent(queued: QueuedWrite): boolean {
    return queued.shareMs !== undefined && this.ran && this.ms >= queued.shareMs
  }

  timed<T>(queued: QueuedWrite, run: () => T): T {
    if (queued.shareMs === undefined) return run()
    const started = performance.now()
    try {
      return run()
    } finally {
      this.ms += performance.now() - started
      this.ran = true
    }
  }
}

/**
 * One write of a batch in its savepoint: its own failure is its answer, the batch goes on. A storage fault is the
 * whole batch's, and so is any failure after which SQLite has ended the transaction itself (a full disk can): it is
 * thrown on, nobody's write committed, and no later write runs outside the transaction.
 */
function inOwnSavepoint(store: SqliteStore, tx: Db, queued: QueuedWrite): { value: unknown } | { error: unknown } {
  try {
    return { value: inSavepoint(tx, queued.run) }
  } catch (error) {
    if (storageErrorOf(store, error) || !connectionOf(tx).inTransaction) throw error
    return { error }
  }
}

/** Another process holds the lock: writes still within their wait go back to the front of the queue, the rest give up. */
function retryLater(store: SqliteStore, batch: QueuedWrite[], busy: StorageUnavailableError, pause: number): void {
  const now = performance.now()
  const waiting = batch.filter((queued) => queued.deadline > now)
  for (const queued of batch) if (queued.deadline <= now) queued.reject(busy)
  if (waiting.length === 0) return
  store.queuedWrites.unshift(...waiting)
  const wait = Math.min(pause, Math.max(1, Math.min(...waiting.map((queued) => queued.deadline)) - now))
  scheduleCommit(store, wait, Math.min(LONGEST_RETRY_MS, pause * 2))
}

/** A write that may be skipped (a `lastUsedAt` stamp): one attempt, no wait; false when the database is busy or full. */
export function tryWrite(store: Store, body: () => Op<unknown>): boolean {
  if (store.kind === 'postgres') {
    // Nothing waits on it: the stamp commits in the background, and is simply lost if the database cannot take it.
    writeOnPostgres(store, body).catch(() => {})
    return true
  }
  try {
    writeTransaction(store, (tx) => runOp(tx, body()))
    return true
  } catch (error) {
    if (error instanceof StorageUnavailableError) return false
    throw error
  }
}

/**
 * Whether the store has less than `floorBytes` of room (/readyz): free space on the data directory's filesystem, or
 * within SQLite's page limit. Measured at each call (a statfs and three PRAGMAs, microseconds), never inferred from
 * the last write: one small commit on an all but full disk does not make the instance ready. On PostgreSQL the disk
 * is the database server's, not this process's to see: false.
 */
export function storageFullNow(store: Store, floorBytes: number): boolean {
  return store.kind === 'sqlite' && roomToWrite(store) < floorBytes
}

function roomToWrite(store: SqliteStore): number {
  const { bavail, bsize } = statfsSync(dirname(store.path))
  const pragma = (name: string) => Object.values(store.sqlite.query(`PRAGMA ${name}`).all()[0] as Record<string, number>)[0]!
  const pages = pragma('max_page_count') - pragma('page_count') + pragma('freelist_count')
  return Math.min(bavail * bsize, pages * pragma('page_size'))
}

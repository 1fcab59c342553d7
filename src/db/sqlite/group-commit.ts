/**
 * The server's writes on SQLite, committed together (group commit): a write waits in the store's queue; at the end
 * of the turn of the event loop one IMMEDIATE transaction runs the queued ops, each in its own savepoint, so one op's
 * failure (a 409, a validation error, a lost lease) rolls back that op alone and reaches its caller alone. Every
 * caller is answered only after the COMMIT: acknowledged means committed. While another process holds the lock the
 * batch waits asynchronously (5 ms doubling to 50 ms), the event loop serving everything else, until each write's
 * own wait (`waitMs`) has passed, then `database_busy`. A batch that did not commit rolled back entirely, so its ops
 * run again from scratch (`body` makes a fresh one): an op must have no effect outside the transaction.
 */
import { StorageUnavailableError } from '../../lib/storage-unavailable.ts'
import type { Db } from '../dialect.ts'
import type { Op } from '../op.ts'
import { announceRunEvents, takeAppendedEnvironments } from '../run-event-commits.ts'
import type { Store } from '../store.ts'
import type { SqliteFile } from './open.ts'
import { runOp } from './op-runner.ts'
import { connectionOf } from './prepared.ts'
import { inSavepoint } from './savepoint.ts'
import { sqliteFaultOf, transaction } from './transactions.ts'

const FIRST_RETRY_MS = 5
const LONGEST_RETRY_MS = 50

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

/** A write waiting for the store's next group commit: its op's run, and how to answer its caller. */
interface QueuedWrite {
  readonly run: (tx: Db) => unknown
  readonly resolve: (value: unknown) => void
  readonly reject: (error: unknown) => void
  /** `performance.now()` after which a write still refused for another process's lock gives up. */
  readonly deadline: number
  /** A write of the executor's (`writeInShare`, ../write.ts): the ms of such writes one group commit runs at most. */
  readonly shareMs?: number
}

type Outcome = { value: unknown } | { error: unknown }

/** The work a group commit may have run before it starts `queued` (it runs at least one write). */
const budgetBefore = (queued: QueuedWrite) => (queued.shareMs === Number.POSITIVE_INFINITY ? EXECUTOR_COMMIT_BUDGET_MS : GROUP_COMMIT_BUDGET_MS)

/** One store's queue of writes and its group commits. */
export class GroupCommit {
  /** Writes waiting for the next group commit, oldest first. */
  private readonly queued: QueuedWrite[] = []
  private scheduled = false
  /** Group commits since the store opened: transactions committed and the writes they carried. */
  readonly committed = { transactions: 0, writes: 0 }
  /** How long a write waits, asynchronously, for another process's write lock before `database_busy` (0: the CLI's, which waits in the driver). */
  waitMs = 0

  constructor(private readonly store: Store & SqliteFile) {}

  /** `body`'s op in the next group commit (`shareMs`: the executor's, ../write.ts `writeInShare`). */
  queue<T>(body: () => Op<T>, shareMs?: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queued.push({
        run: (tx) => runOp(tx, body()),
        resolve: resolve as (value: unknown) => void,
        reject,
        deadline: performance.now() + this.waitMs,
        shareMs,
      })
      this.schedule(0)
    })
  }

  /** The next group commit, at the end of this turn or after `delayMs`; `pause`: the wait after it if the lock is taken. */
  private schedule(delayMs: number, pause = FIRST_RETRY_MS): void {
    if (this.scheduled) return
    this.scheduled = true
    const commit = () => {
      this.scheduled = false
      this.commit(pause)
    }
    if (delayMs === 0) setImmediate(commit)
    else setTimeout(commit, delayMs)
  }

  /**
   * One transaction for the queued writes (up to the limit), oldest first, while the budget lasts (at least one): the
   * writes it did not reach go back to the front of the queue for the next. Answers each after the commit, or retries
   * or refuses the whole batch when the transaction fails.
   */
  private commit(pause: number): void {
    const { store, queued } = this
    const batch = queued.splice(0, GROUP_COMMIT_LIMIT)
    if (batch.length === 0) return
    const started = performance.now()
    let outcomes: Outcome[]
    try {
      outcomes = transaction(store, 'immediate', (tx) => {
        if (batch.length === 1) return [{ value: batch[0]!.run(tx) }]
        const done: Outcome[] = []
        const share = new ShareOfCommit()
        try {
          for (let i = 0; i < batch.length; i++) {
            if (done.length > 0 && performance.now() - started >= budgetBefore(batch[i]!)) break
            // Past the executor's share: its writes go back to the queue (unanswered, unrun) for the next commit.
            if (share.spent(batch[i]!)) share.deferred.push(...batch.splice(i--, 1))
            else done.push(share.timed(batch[i]!, () => this.inOwnSavepoint(tx, batch[i]!)))
          }
        } finally {
          queued.unshift(...share.deferred)
        }
        return done
      })
    } catch (error) {
      takeAppendedEnvironments(store.db) // rolled back: nothing to announce
      const fault = sqliteFaultOf(store, error) ?? error
      if (fault instanceof StorageUnavailableError && fault.code === 'database_busy') return this.retryLater(batch, fault, pause)
      for (const write of batch) write.reject(fault)
      if (queued.length > 0) this.schedule(0)
      return
    }
    queued.unshift(...batch.splice(outcomes.length))
    if (queued.length > 0) this.schedule(0)
    announceRunEvents(store, takeAppendedEnvironments(store.db))
    this.committed.transactions++
    this.committed.writes += batch.length
    batch.forEach((write, i) => {
      const outcome = outcomes[i]!
      if ('value' in outcome) write.resolve(outcome.value)
      else write.reject(outcome.error)
    })
  }

  /**
   * One write of a batch in its savepoint: its own failure is its answer, the batch goes on. A storage fault is the
   * whole batch's, and so is any failure after which SQLite has ended the transaction itself (a full disk can): it is
   * thrown on, nobody's write committed, and no later write runs outside the transaction.
   */
  private inOwnSavepoint(tx: Db, write: QueuedWrite): Outcome {
    try {
      return { value: inSavepoint(tx, write.run) }
    } catch (error) {
      if (sqliteFaultOf(this.store, error) || !connectionOf(tx).inTransaction) throw error
      return { error }
    }
  }

  /** Another process holds the lock: writes still within their wait go back to the front of the queue, the rest give up. */
  private retryLater(batch: QueuedWrite[], busy: StorageUnavailableError, pause: number): void {
    const now = performance.now()
    const waiting = batch.filter((write) => write.deadline > now)
    for (const write of batch) if (write.deadline <= now) write.reject(busy)
    if (waiting.length === 0) return
    this.queued.unshift(...waiting)
    const wait = Math.min(pause, Math.max(1, Math.min(...waiting.map((write) => write.deadline)) - now))
    this.schedule(wait, Math.min(LONGEST_RETRY_MS, pause * 2))
  }
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

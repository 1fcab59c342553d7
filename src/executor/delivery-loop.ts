/**
 * The loop of an outbox's worker — the completion callbacks' (./callback-delivery.ts) and the mail sender's
 * (./mail-delivery.ts), over the leased outboxes of src/db/leased-queue.ts: it claims due items under a lease into
 * its free slots, attempts each (the worker's `send`), and records the outcome guarded by the lease — delivered,
 * else due again after the backoff, or failed once the attempts are spent or the attempt said not to retry. When idle
 * it waits for the next item to come due, at most `pollMs`, or for a wake-up (`notify`, and the worker's `listen`).
 * A worker extends it with what differs: how one item is attempted and its attempt recorded.
 *
 * At least once: a worker that dies mid-attempt leaves the item leased, and it is attempted again when the lease runs
 * out, or at once by the next `serve` of a SQLite data directory (`recoverAtStart`). A stopping worker lets its
 * attempts finish (bounded, then aborts them: not recorded) and hands back what it holds.
 */
import type { LeaseOutcome } from '../db/leased-queue.ts'
import type { Op } from '../db/op.ts'
import type { Store } from '../db/store.ts'
import { StorageUnavailableError } from '../lib/storage-unavailable.ts'
import { read } from '../db/read.ts'
import type { QueueWakeups } from '../db/store.ts'
import { write } from '../db/write.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { WakeSignal } from '../lib/wake-signal.ts'
import { backOffAfterFailedClaim, finishOrAbort, idleWaitMs, writeOutlastingStorage } from './loop.ts'

/** What one attempt came to: delivered (`ok`), or not — `final`: not to be retried. */
export interface Attempted {
  ok: boolean
  final: boolean
}

export interface DeliveryLoopOptions<Item, Done extends string> {
  store: Store
  clock: Clock
  logger: Logger
  /** What an item is called in the log lines, one (`callback`, `mail`) and many (`callbacks`, `mail`); the owner is `<many>-<uuid>`. */
  one: string
  many: string
  /** Told after `took back <many> no live process holds` at start: what becomes of them. */
  recoveredNote?: string
  /** Items attempted at once. */
  concurrency: number
  /** Longest idle sleep between polls (default 1 s). */
  pollMs?: number
  /** How long a claim holds an item: an attempt and its record fit in it. */
  leaseMs: number
  /** The status of an item delivered. */
  done: Done
  /** Attempts in all, the first included. */
  maxAttempts: number
  /** The wait before the next attempt, after `attempts` failed ones. */
  retryDelayMs(attempts: number): number
  /**
   * Whether a claim is preceded by a read of the next due time (`nextDueAt`): the claim — a write transaction — is
   * skipped when nothing is due. For an outbox that is empty most of the time, so that an idle instance writes nothing
   * per poll.
   */
  readBeforeClaim?: boolean
  /** The outbox's operations (src/db): the leases taken back at start, the claim, the next due time, the hand-back. */
  recoverAtStart(store: Store): Op<number>
  claim(owner: string, now: number, leaseMs: number, limit: number): Op<Item[]>
  nextDueAt(after: number): Op<number | null>
  release(owner: string): Op<number>
}

/** A worker of one outbox: it says how to attempt an item and record the attempt; the loop does the rest. */
export abstract class DeliveryLoop<Item extends { attempts: number }, Sent extends Attempted, Done extends string> {
  readonly owner: string
  private running = false
  private loop: Promise<void> | null = null
  private readonly inFlight = new Set<Promise<void>>()
  private readonly wakeUps = new WakeSignal()
  private listening: Promise<QueueWakeups | null> | null = null
  private readonly stopController = new AbortController()

  constructor(private readonly config: DeliveryLoopOptions<Item, Done>) {
    this.owner = `${config.many}-${crypto.randomUUID()}`
  }

  /** One attempt of `item`; null when `stop` (aborted) ended it: not recorded. */
  protected abstract send(item: Item, stop: AbortSignal): Promise<Sent | null>

  /**
   * The attempt's record, guarded by the loop's lease (`owner`): false when the loop no longer holds the item.
   * `startedAt` (the clock's) and `durationMs` time the attempt.
   */
  protected abstract record(item: Item, sent: Sent, outcome: LeaseOutcome<Done>, attempts: number, startedAt: number, durationMs: number): Op<boolean>

  /** Told of each attempt recorded (its log line, its metric). */
  protected recorded?(item: Item, sent: Sent, outcome: LeaseOutcome<Done>, attempts: number): void

  /** The log fields naming an item whose attempt threw. */
  protected abstract describeFailure(item: Item, error: Error): Record<string, unknown>

  /**
   * An item whose record threw (not the database being away: a fault of the item itself), settled in a transaction of
   * its own — due again later, or failed once `attempts` are spent — so that it is not claimed again and again each
   * time its lease runs out. Without it such an item waits for its lease and is attempted again.
   */
  protected recordFailed?(item: Item, attempts: number, now: number): Op<void>

  /** Before each claim (the clock's `now`): the worker's upkeep. */
  protected beforeClaim?(now: number): Promise<void>

  /** Wakes the loop when items are queued (on any instance); resolves once listening. */
  protected listen?(wake: () => void): Promise<QueueWakeups | null>

  start(): void {
    if (this.running) return
    this.running = true
    this.listening =
      this.listen?.(() => this.notify()).catch((error) => {
        // Not listening: the poll still finds every item, at most `pollMs` late.
        this.config.logger.warn(`listening for ${this.config.many} failed; polling only`, { error: (error as Error).message })
        return null
      }) ?? null
    this.loop = this.run()
  }

  /** Stops claiming, lets attempts in flight finish (bounded, then aborts them: not recorded), hands back what it holds. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.running) return
    this.running = false
    this.notify()
    await (await this.listening)?.stop().catch(() => {})
    await finishOrAbort(this.loop ?? Promise.resolve(), timeoutMs, this.stopController)
    try {
      await write(this.config.store, () => this.config.release(this.owner))
    } catch (error) {
      // Not handed back: their leases run out and they are attempted again.
      this.config.logger.warn(`could not hand back held ${this.config.many}`, { error: (error as Error).message })
    }
  }

  /** Items were queued: claim now instead of at the next poll. */
  notify(): void {
    this.wakeUps.notify()
  }

  /** The claiming loop: fills the free slots with due items, else waits for one to be queued or come due. */
  private async run(): Promise<void> {
    const { store, clock, logger, many } = this.config
    try {
      const recovered = await write(store, () => this.config.recoverAtStart(store))
      const note = this.config.recoveredNote === undefined ? '' : `: ${this.config.recoveredNote}`
      if (recovered > 0) logger.warn(`took back ${many} no live process holds${note}`, { count: recovered })
    } catch (error) {
      // Their leases run out and the claim takes them then.
      logger.warn(`taking back ${many} at start failed`, { error: (error as Error).message })
    }
    let failedClaims = 0
    while (this.running) {
      const free = this.config.concurrency - this.inFlight.size
      if (free <= 0) {
        await this.wakeUps.wait(null)
        continue
      }
      this.wakeUps.clear()
      try {
        const now = clock.now()
        await this.beforeClaim?.(now)
        const claimed = this.config.readBeforeClaim && !(await this.anyDue(now)) ? [] : await write(store, () => this.config.claim(this.owner, now, this.config.leaseMs, free))
        failedClaims = 0
        for (const item of claimed) this.launch(item)
        if (claimed.length < free) {
          const next = await read(store, this.config.nextDueAt(now))
          await this.wakeUps.wait(idleWaitMs(next, clock.now(), this.config.pollMs ?? 1000))
        }
      } catch (error) {
        // The items stay in the outbox.
        await backOffAfterFailedClaim(logger, `claiming ${many}`, error, ++failedClaims)
      }
    }
    await Promise.all(this.inFlight)
  }

  /** An item is due at `now` (one read of the outbox's due index). */
  private async anyDue(now: number): Promise<boolean> {
    const next = await read(this.config.store, this.config.nextDueAt(-1))
    return next !== null && next <= now
  }

  private launch(item: Item): void {
    const attempt: Promise<void> = this.deliver(item)
      .catch((error) => this.config.logger.error(`${this.config.one} delivery failed unexpectedly`, this.describeFailure(item, error as Error)))
      .finally(() => {
        this.inFlight.delete(attempt)
        this.notify()
      })
    this.inFlight.add(attempt)
  }

  /** One attempt, then its record: delivered, due again after the backoff, or failed for good. */
  private async deliver(item: Item): Promise<void> {
    const { clock, maxAttempts } = this.config
    const startedAt = clock.now()
    const started = performance.now()
    const sent = await this.send(item, this.stopController.signal)
    // Stopping: not recorded; `stop` hands the item back and it is attempted again (at least once).
    if (sent === null) return
    const durationMs = Math.round(performance.now() - started)
    const now = clock.now()
    const attempts = item.attempts + 1
    const outcome: LeaseOutcome<Done> = sent.ok
      ? { status: this.config.done, at: now }
      : sent.final || attempts >= maxAttempts
        ? { status: 'failed', at: now }
        : { status: 'pending', nextAttemptAt: now + this.config.retryDelayMs(attempts) }
    let recorded: boolean
    try {
      recorded = await writeOutlastingStorage(
        this.config.store,
        () => this.record(item, sent, outcome, attempts, startedAt, durationMs),
        () => this.running,
        (error) => this.config.logger.warn(`recording a ${this.config.one} attempt waits for the database`, { error: error.message }),
      )
    } catch (error) {
      if (!this.recordFailed || error instanceof StorageUnavailableError) throw error
      this.config.logger.error(`a ${this.config.one} could not be recorded`, { ...this.describeFailure(item, error as Error), attempts })
      await write(this.config.store, () => this.recordFailed!(item, attempts, now))
      return
    }
    if (recorded) this.recorded?.(item, sent, outcome, attempts)
  }
}

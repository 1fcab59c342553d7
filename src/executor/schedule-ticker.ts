/**
 * The executor's schedule ticker (docs/workflows.md "Schedules"): it reads from the database which schedules are due
 * (their next fire time, an index) and which ticks were left unfinished by an instance that stopped or died (their
 * lease expired), claims each due tick (src/modules/schedules/service.ts `claimTick`: a row unique per workflow and
 * fire time, so of several instances one alone fires it) and starts its runs in batches, each batch its own short
 * transaction, the executor woken after each. Between batches other writes and requests get their turn; the runs
 * queued go through the executor's claim like any other (fair share between projects, workflow limits).
 *
 * No timer holds a tick: the fire times are rows, so a restart or a `kill -9` loses none — a tick claimed but not
 * finished is resumed at its cursor once its lease expires, and fire times missed while every instance was down are
 * caught up as the schedule's `catchUp` says. Idle, it reads again within `pollMs` (a second: a schedule may fire
 * every second, and one saved on another instance is seen within it).
 */
import { read } from '../db/read.ts'
import { abandonedTickIds, dueSchedules, nextScheduleFireAt, nextTickLeaseExpiry } from '../db/schedules.ts'
import type { Store } from '../db/store.ts'
import { write } from '../db/write.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { Metrics } from '../lib/metrics.ts'
import { WakeSignal } from '../lib/wake-signal.ts'
import { claimTick, workTickBatch } from '../modules/schedules/service.ts'
import { backOffAfterFailedClaim, idleWaitMs } from './loop.ts'

/** Schedules and abandoned ticks read per look; more are taken at once in the next look. */
const DUE_BATCH = 20
/**
 * Records one transaction of a tick considers: a 10,000-record tick is four hundred short transactions, never one that
 * holds SQLite's write lock for long.
 */
export const TICK_BATCH = 25

export interface ScheduleTickerOptions {
  store: Store
  clock: Clock
  logger: Logger
  /** The lease owner of the ticks this instance works on (the executor's). */
  owner: string
  /** How long a tick stays this instance's without a batch (the executor's lease). */
  leaseMs: number
  /** Runs were queued: wake the executor. */
  onRunsQueued: () => void
  metrics?: Pick<Metrics, 'schedules'>
  /** Longest wait between two reads of what is due (default a second). */
  pollMs?: number
}

export class ScheduleTicker {
  private running = false
  private loop: Promise<void> | null = null
  private readonly wakeUps = new WakeSignal()

  constructor(private readonly options: ScheduleTickerOptions) {}

  start(): void {
    if (this.running) return
    this.running = true
    this.loop = this.run()
  }

  /** Stops after the batch under way (a short transaction): the tick's lease expires and any instance resumes it. */
  async stop(): Promise<void> {
    if (!this.running) return
    this.running = false
    this.notify()
    await this.loop
  }

  /** A schedule was saved here: read what is due again. */
  notify(): void {
    this.wakeUps.notify()
  }

  private async run(): Promise<void> {
    const { store, clock, logger, owner, leaseMs } = this.options
    let failures = 0
    while (this.running) {
      this.wakeUps.clear()
      try {
        const now = clock.now()
        const due = await read(store, dueSchedules(now, DUE_BATCH))
        for (const schedule of due) {
          if (!this.running) break
          const tickId = await write(store, () => claimTick(clock, schedule, owner, leaseMs))
          if (tickId !== null) await this.work(tickId)
        }
        const abandoned = await read(store, abandonedTickIds(clock.now(), DUE_BATCH))
        for (const tickId of abandoned) if (this.running) await this.work(tickId)
        failures = 0
        if (due.length === DUE_BATCH || abandoned.length === DUE_BATCH) continue
        const [fireAt, leaseExpiry] = await Promise.all([read(store, nextScheduleFireAt()), read(store, nextTickLeaseExpiry())])
        const next = fireAt === null ? leaseExpiry : leaseExpiry === null ? fireAt : Math.min(fireAt, leaseExpiry + 1)
        await this.wakeUps.wait(idleWaitMs(next, clock.now(), this.options.pollMs ?? 1000))
      } catch (error) {
        // A claimed tick stays open under its lease: this instance, or another once the lease expires, resumes it.
        await backOffAfterFailedClaim(logger, 'ticking schedules', error, ++failures)
      }
    }
  }

  /** A tick's batches until it is done (or another instance holds it, or the ticker stops). */
  private async work(tickId: number): Promise<void> {
    const { store, clock, owner, leaseMs, metrics, logger } = this.options
    while (this.running) {
      const batch = await write(store, () => workTickBatch(clock, tickId, owner, leaseMs, TICK_BATCH))
      if (batch === null) return
      const workflow = { workflow_id: String(batch.workflowId) }
      if (batch.started > 0) {
        metrics?.schedules.runsStarted.inc(workflow, batch.started)
        this.options.onRunsQueued()
      }
      if (batch.skipped > 0) metrics?.schedules.recordsSkipped.inc(workflow, batch.skipped)
      if (batch.done) {
        metrics?.schedules.ticks.inc(workflow)
        if (batch.warning !== null) logger.warn('schedule tick did less than asked', { workflowId: batch.workflowId, tickId, warning: batch.warning })
        return
      }
      // The next batch in a later turn: requests and other writes go between.
      await Bun.sleep(0)
    }
  }
}

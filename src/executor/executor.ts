/**
 * The in-process executor (DESIGN §8): workers claim runs under a lease, run their steps one by one and
 * record each step's outcome in one short transaction together with its data effects, guarded by the lease.
 * Every change of a run's state is a function of the queue (src/db/queue.ts); this file holds no SQL.
 * A run whose process died is recovered when its lease expires and resumes at its first step not done.
 */
import { type Op, savepoint } from '../db/op.ts'
import type { QueueWakeups, Store } from '../db/store.ts'
import {
  advanceRun,
  claimRuns,
  failRun,
  finishRun,
  LeaseLostError,
  nextRunAvailableAt,
  parkRun,
  recordStepOutcomes,
  recoverExpiredRuns,
  recoverRunsAtStart,
  releaseOwnedRuns,
  renewLease,
  type RunRow,
  runWorkflow,
  type StepOutcome,
  UNTIL_TASK_CLOSES,
} from '../db/queue.ts'
import { recordedTaskOutputs } from '../db/tasks.ts'
import { type NewRunEvent, type RunEventType, subjectOfRow, withRunEvents } from '../db/run-events.ts'
import { read } from '../db/read.ts'
import { write, writeInShare } from '../db/write.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { RunStatus } from '../lib/run-statuses.ts'
import type { StorageUnavailableError } from '../lib/storage-unavailable.ts'
import { toIso } from '../lib/time.ts'
import { OutboundClient } from '../lib/outbound/client.ts'
import { redactUrlsIn } from '../lib/outbound/redact.ts'
import { WakeSignal } from '../lib/wake-signal.ts'
import { withEntriesLast } from '../modules/activity-logs/service.ts'
import { DATA_STEP_TYPES, type Step, stepLabel, type WorkflowDefinition } from '../modules/workflows/definition.ts'
import { type GroupReads, logRunActivity, type RunTarget, type StepContext, StepFailure, type StepResult, type StepRunner } from './step.ts'
import { runCondition } from './steps/condition.ts'
import { loadRecordAs } from './steps/data-access.ts'
import { runHttp } from './steps/http.ts'
import { runLoad } from './steps/load.ts'
import { runNote } from './steps/note.ts'
import { runUpdate } from './steps/update.ts'
import { runTask } from './steps/task.ts'
import { runWait } from './steps/wait.ts'
import { TaskDeadlines } from './task-deadlines.ts'
import { ScheduleTicker } from './schedule-ticker.ts'
import type { Metrics } from '../lib/metrics.ts'
import { EventDispatch } from './event-dispatch.ts'
import type { MailSettings } from '../modules/mail/service.ts'
import type { TaskOutcome } from '../lib/template.ts'
import { backOffAfterFailedClaim, finishOrAbort, idleWaitMs, writeOutlastingStorage } from './loop.ts'
import { activeTracer, type RunTrace } from '../lib/tracing.ts'
import { endUnrecordedSpans, type GroupTrace, groupTrace, startStepSpan, type TracedStep } from './run-trace.ts'

/**
 * How long free slots wait for more to free before a claim, where claims batch them (`Executor.gathering`): a run due
 * while other runs are in flight starts at most this much later.
 */
const CLAIM_GATHER_MS = 5

/** How often a running executor recovers the runs whose leases expired (a crashed instance's, or its own lost ones). */
const SWEEP_EVERY_MS = 10_000

/** Each step type's runner. */
export const STEP_RUNNERS: { [K in Step['type']]: StepRunner<Extract<Step, { type: K }>> } = {
  load: runLoad,
  condition: runCondition,
  update: runUpdate,
  note: runNote,
  http: runHttp,
  wait: runWait,
  task: runTask,
}

/**
 * Where the group of steps starting at `from` ends (exclusive): an `http` step runs alone (its call happens
 * outside any transaction); other steps run together up to and including a `wait`, or up to the next `http`.
 */
export function stepGroupEnd(steps: readonly Step[], from: number): number {
  if (steps[from]?.type === 'http') return from + 1
  let end = from
  while (end < steps.length && steps[end]!.type !== 'http') {
    end++
    if (steps[end - 1]!.type === 'wait') break
  }
  return end
}

export interface ExecutorOptions {
  store: Store
  clock: Clock
  logger: Logger
  concurrency: number
  leaseMs: number
  /**
   * Longest idle sleep between polls; a new run wakes workers at once (`notify`, and on PostgreSQL a run queued on
   * any instance: LISTEN/NOTIFY). Polling stays the fallback.
   */
  pollMs?: number
  /** How `http` steps call out; by default one that opens no local or private destination. */
  outbound?: OutboundClient
  /**
   * The ms of claims and step groups one group commit runs at most now (SQLite; `writeInShare`): the executor's share
   * of a busy turn of the event loop beside HTTP's request slice while requests are being served, else no limit
   * (TRELLIS_EXECUTOR_SHARE, src/cli/serve.ts). Default: no limit but the group commit's own budget.
   */
  shareMs?: () => number
  /** What queuing a mail needs (a task step's, a deadline's: `deps.mail`); null or absent: no mail is sent. */
  mail?: MailSettings | null
  /** Longest wait of the deadline timer between two reads of the next deadline (./task-deadlines.ts; default a minute). */
  deadlinePollMs?: number
  /** Where the schedule ticker counts its ticks (./schedule-ticker.ts); none in most tests. */
  metrics?: Pick<Metrics, 'schedules'>
  /** Longest wait of the schedule ticker between two reads of what is due (./schedule-ticker.ts; default a second). */
  schedulePollMs?: number
  /** Longest wait of the record and note events' dispatcher between two polls (./event-dispatch.ts; default 1 s). */
  eventPollMs?: number
}

/** A step whose slow part is done: what remains is its data part, run in the group's transaction. */
interface PlannedStep {
  ctx: StepContext
  step: Step
  index: number
  startedAt: number
  apply: (reads: GroupReads) => Op<StepResult>
}

export class Executor {
  readonly owner = `executor-${crypto.randomUUID()}`
  private running = false
  private dispatcher: Promise<void> | null = null
  private dispatching = false
  private readonly inFlight = new Set<Promise<void>>()
  /** A run queued, a slot freed: a wake-up while the claiming loop is not waiting makes its next wait return at once. */
  private readonly wakeUps = new WakeSignal()
  /** Runs queued by other instances (PostgreSQL's LISTEN), while started; null where nothing is to be heard. */
  private queueWakeups: Promise<QueueWakeups | null> | null = null
  private sweeper: ReturnType<typeof setInterval> | null = null
  /** The sweep under way, if any: the next one is skipped rather than run beside it. */
  private sweeping: Promise<void> | null = null
  private readonly stopController = new AbortController()
  private readonly cancelled = new Map<string, AbortController>()
  /**
   * The events each run held here has, where this worker knows them: from its first claim (which wrote its first) on,
   * counted as its groups commit, so that their events need not read the run's newest. A resumed run's are read.
   */
  private readonly eventCounts = new Map<string, number>()
  private readonly outbound: OutboundClient
  /** The timer of the tasks' deadlines and reminders, started and stopped with the executor. */
  private readonly deadlines: TaskDeadlines
  /** The ticker of the workflows' schedules, started and stopped with the executor. */
  private readonly schedules: ScheduleTicker
  /** The dispatcher of record and note events into runs, started and stopped with the executor. */
  readonly events: EventDispatch

  constructor(private readonly options: ExecutorOptions) {
    this.outbound = options.outbound ?? new OutboundClient()
    const { store, clock, logger } = options
    this.deadlines = new TaskDeadlines({ store, clock, logger, mail: options.mail ?? null, pollMs: options.deadlinePollMs })
    this.schedules = new ScheduleTicker({
      store, clock, logger, owner: this.owner, leaseMs: options.leaseMs, onRunsQueued: () => this.notify(), metrics: options.metrics, pollMs: options.schedulePollMs,
    })
    this.events = new EventDispatch({ store, clock, logger, pollMs: options.eventPollMs, onRunQueued: () => this.notify() })
  }

  /** Runs being executed now (at most `concurrency`). */
  get busyWorkers(): number {
    return this.inFlight.size
  }

  /** Workers (`TRELLIS_EXECUTOR_CONCURRENCY`): runs it executes at once at most. */
  get concurrency(): number {
    return this.options.concurrency
  }

  /** Configured to run runs (`TRELLIS_EXECUTOR_CONCURRENCY` above 0). */
  get enabled(): boolean {
    return this.options.concurrency > 0
  }

  /** Started, not stopping, and the claiming loop still going (for /readyz). */
  get alive(): boolean {
    return this.running && this.dispatching
  }

  /** Whether runs queued on other instances wake it (once the store's LISTEN is acknowledged); false where the store has none (SQLite) or before start. */
  async listening(): Promise<boolean> {
    return (await this.queueWakeups) != null
  }

  start(): void {
    if (this.running || this.options.concurrency === 0) return
    this.running = true
    this.queueWakeups = this.options.store.listenForQueuedRuns(() => this.notify()).catch((error) => {
      // Not listening: the poll still finds every run, at most `pollMs` late.
      this.options.logger.warn('listening for queued runs failed; polling only', { error: (error as Error).message })
      return null
    })
    // At start, what no live process holds (on SQLite every run still running: ../db/store.ts); then expired leases.
    void this.recover(true)
    // Leases of crashed processes expire while we run too: sweep them every SWEEP_EVERY_MS, not only at start. A plain
    // interval, not a cron: croner's first schedule loads the time-zone data, ~7 ms of every start (docs/performance.md).
    this.sweeper = setInterval(() => {
      this.sweeping ??= this.recover().finally(() => (this.sweeping = null))
    }, SWEEP_EVERY_MS)
    this.dispatcher = this.dispatch()
    this.deadlines.start()
    this.schedules.start()
    this.events.start()
  }

  /** Stops claiming, aborts in-flight waits, lets running steps finish (bounded), gives back held runs. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.running) return
    this.running = false
    if (this.sweeper) clearInterval(this.sweeper)
    this.notify()
    await (await this.queueWakeups)?.stop().catch(() => {})
    await Promise.all([
      finishOrAbort(this.dispatcher ?? Promise.resolve(), timeoutMs, this.stopController), this.deadlines.stop(), this.schedules.stop(), this.events.stop(timeoutMs),
    ])
    try {
      await write(this.options.store, () => releaseOwnedRuns(this.owner, this.options.clock.now()))
    } catch (error) {
      // Not given back: the runs' leases expire and the next start recovers them.
      this.options.logger.warn('could not give back held runs', { error: (error as Error).message })
    }
  }

  /** Wakes the claiming loop: a run was just queued, or a run ended and freed a slot. */
  notify(): void {
    this.wakeUps.notify()
  }

  /** A schedule was saved: its ticker reads what is due again. */
  notifySchedules(): void {
    this.schedules.notify()
  }

  /** A cancelled run stops at its next step boundary; an in-flight HTTP call is aborted. */
  abortRun(runId: string): void {
    this.cancelled.get(runId)?.abort()
  }

  private async recover(atStart = false): Promise<void> {
    try {
      const now = this.options.clock.now()
      const recovered = await write(this.options.store, () => (atStart ? recoverRunsAtStart(this.options.store, now) : recoverExpiredRuns(now)))
      if (recovered > 0) {
        this.options.logger.warn(atStart ? 'recovered runs no live process holds' : 'recovered runs with expired leases', { count: recovered })
        this.notify()
      }
    } catch (error) {
      // The sweep runs again in SWEEP_EVERY_MS.
      this.options.logger.warn('recovering expired leases failed', { error: (error as Error).message })
    }
  }

  /**
   * The claiming loop: while a slot is free (`concurrency` runs at most), claims the due runs that fill the free
   * slots in one statement and starts each; waits for a slot, or for a run to come due, otherwise. On stop it
   * claims nothing more and waits for the runs it started.
   */
  private async dispatch(): Promise<void> {
    this.dispatching = true
    try {
      let failedClaims = 0
      /** When the slots now free began to wait for more to gather (claims that batch them: `gathering`). */
      let gatheringSince: number | null = null
      while (this.running) {
        const free = this.options.concurrency - this.inFlight.size
        if (free <= 0) {
          await this.wake()
          continue
        }
        if (this.gathering(free)) {
          const now = performance.now()
          gatheringSince ??= now
          const left = gatheringSince + CLAIM_GATHER_MS - now
          if (left > 0) {
            await this.wakeUps.wait(left)
            continue
          }
        }
        gatheringSince = null
        // A wake-up from here on may be for a run this claim does not see yet: the wait after it then returns at once.
        this.wakeUps.clear()
        try {
          const now = this.options.clock.now()
          const runs = await writeInShare(this.options.store, () => claimRuns(this.owner, now, this.options.leaseMs, free, this.options.concurrency), this.shareMs)
          failedClaims = 0
          for (const run of runs) this.launch(run)
          // Fewer runs than free slots: none is left that may start now (those due are held back by their workflow's
          // limit or their project's reserve); wait for one (queued, coming due, or a run ending anywhere here).
          if (runs.length < free) await this.idle(now)
        } catch (error) {
          // The database locked, full or unreachable (a claim, or the idle wait's read): the runs stay queued.
          await backOffAfterFailedClaim(this.options.logger, 'claiming runs', error, ++failedClaims)
        }
      }
      // Until none is left: a run ending meanwhile may have handed its slot over (persistGroup).
      while (this.inFlight.size > 0) await Promise.all(this.inFlight)
    } finally {
      this.dispatching = false
    }
  }

  /**
   * Whether the free slots wait a moment for more before a claim: where the claiming loop claims for freed slots
   * (`handsOverSlots` false: PostgreSQL), a claim is a transaction of its own whatever the runs it starts, so while
   * other runs are in flight and fewer than half the slots are free, the claim waits up to CLAIM_GATHER_MS for more
   * to free and starts them together. A busy executor's slots free every few milliseconds; an idle one claims at once.
   */
  private gathering(free: number): boolean {
    return !this.options.store.handsOverSlots && this.inFlight.size > 0 && free < Math.ceil(this.options.concurrency / 2)
  }

  /** Executes a claimed run in a slot; the slot frees (and wakes the claiming loop) when the run stops. */
  private launch(run: RunRow): void {
    const execution: Promise<void> = this.execute(run)
      .catch((error) => {
        if (!(error instanceof LeaseLostError)) {
          // Whatever threw may quote a step's URL: never its credentials in a log line.
          this.options.logger.error('run execution failed', { runId: run.id, error: redactUrlsIn((error as Error).stack ?? String(error)) })
        }
      })
      .finally(() => {
        this.inFlight.delete(execution)
        this.notify()
      })
    this.inFlight.add(execution)
  }

  /** Until `notify()`: a run queued, or a slot freed (at once when one came since the last claim). */
  private wake(): Promise<void> {
    return this.wakeUps.wait(null)
  }

  /**
   * Until a run may be due: `notify()`, the next time a run comes due after the claim at `claimedAt` (runs due then and
   * not taken wait for a run to end), or the poll interval, whichever comes first.
   */
  private async idle(claimedAt: number): Promise<void> {
    const pollMs = this.options.pollMs ?? 1000
    const next = await read(this.options.store, nextRunAvailableAt(claimedAt))
    return this.wakeUps.wait(idleWaitMs(next, this.options.clock.now(), pollMs))
  }

  private async loadTarget(run: RunRow): Promise<{ target: RunTarget; definition: WorkflowDefinition }> {
    const row = await read(this.options.store, runWorkflow(run))
    if (!row) throw new Error(`workflow ${run.workflow_id} of run ${run.id} not found`)
    return {
      target: {
        run,
        workflowName: row.workflowName,
        projectId: row.projectId,
        environmentId: row.environmentId,
        teamId: row.teamId,
        collectionId: row.collectionId,
      },
      definition: JSON.parse(row.definition) as WorkflowDefinition,
    }
  }

  /** Executes the run, inside its trace when tracing is on (log lines written meanwhile carry its trace id). */
  private execute(run: RunRow): Promise<void> {
    const traced = activeTracer()?.run(run) ?? null
    return traced === null ? this.executeTraced(run, null) : traced.within(() => this.executeTraced(run, traced))
  }

  private async executeTraced(run: RunRow, traced: RunTrace | null): Promise<void> {
    const { target, definition } = await this.loadTarget(run)
    const runAbort = new AbortController()
    this.cancelled.set(run.id, runAbort)
    // A later claim (a resumption) reads the run's newest: it also drops the count of any execution of the run still
    // going here (its lease expired under it and this executor claimed the run again), which then reads it too.
    if (run.attempts === 1) this.eventCounts.set(run.id, 1)
    else this.eventCounts.delete(run.id)
    // The lease outlives a missed beat or two (one every third of it): a beat the database refuses is skipped.
    const heartbeat = () => {
      write(this.options.store, () => renewLease(run.id, this.owner, this.options.clock.now(), this.options.leaseMs)).then(
        (owned) => owned || runAbort.abort(),
        (error) => this.options.logger.warn('lease heartbeat failed', { runId: run.id, error: (error as Error).message }),
      )
    }
    const timer = setInterval(heartbeat, Math.max(50, Math.floor(this.options.leaseMs / 3)))
    let record = await this.resumedRecord(target, definition, run.next_step)
    const tasks = await this.closedTasks(run, definition)
    try {
      const steps = definition.steps
      const signal = AbortSignal.any([this.stopController.signal, runAbort.signal])
      for (let index = run.next_step; index < steps.length; ) {
        // Shutting down: stop at a step boundary; stop() gives the run back and it resumes here.
        if (!this.running) return
        // No turn of the event loop to wait for here: each group ends with its write, committed in a later turn
        // (the group commit), within the executor's share of it (`shareMs`).
        const end = stepGroupEnd(steps, index)
        const outcome = await this.runSteps({ target, steps, from: index, to: end, record, tasks, heartbeat, signal, traced })
        if (outcome === 'stop') return
        record = outcome.record
        index = end
      }
      // Reached only when a run resumes after its last step (a trailing `wait`): nothing left but to end it.
      await this.persistGroup(run, (events) => this.finishIn(target, events, 'succeeded', null), () => true, groupTrace(traced, target, new Map()))
    } finally {
      clearInterval(timer)
      this.cancelled.delete(run.id)
      this.eventCounts.delete(run.id)
    }
  }

  /**
   * A run taken up again (after a wait, or recovered after a crash) reads its record afresh as its user, so
   * templates of the steps left see it as an uninterrupted run would. When it can no longer be read, the
   * templates see none and the next data step fails the run with the reason.
   */
  private async resumedRecord(target: RunTarget, definition: WorkflowDefinition, nextStep: number): Promise<Record<string, unknown> | null> {
    if (!definition.steps.slice(0, nextStep).some((step) => DATA_STEP_TYPES.includes(step.type))) return null
    try {
      return (await read(this.options.store, loadRecordAs(target, 'read'))).data
    } catch (error) {
      if (error instanceof StepFailure) return null
      throw error
    }
  }

  /**
   * The outcomes of the run's task steps before `next_step` (recorded as their outputs; a retry's carried over), for
   * the templates and conditions of the steps left: none to read when the workflow asks nobody.
   */
  private async closedTasks(run: RunRow, definition: WorkflowDefinition): Promise<Map<string, TaskOutcome>> {
    if (run.next_step === 0 || !definition.steps.some((step) => step.type === 'task')) return new Map()
    return (await read(this.options.store, recordedTaskOutputs(run.id))) as Map<string, TaskOutcome>
  }

  /**
   * Runs steps [from, to) — one `http` step, or consecutive other steps (ending at a `wait`) — and records them in
   * one transaction with their effects: a step that fails is recorded as failed with the run, after the steps before
   * it. Returns what the next steps see, or 'stop' when the run ended, parked or was lost.
   */
  private async runSteps(group: {
    target: RunTarget
    steps: Step[]
    from: number
    to: number
    record: Record<string, unknown> | null
    tasks: Map<string, TaskOutcome>
    heartbeat: () => void
    signal: AbortSignal
    traced: RunTrace | null
  }): Promise<{ record: Record<string, unknown> | null } | 'stop'> {
    const { target, steps } = group
    const planned: PlannedStep[] = []
    const spans = new Map<number, TracedStep>()
    const traceOf = groupTrace(group.traced, target, spans)
    for (let index = group.from; index < group.to; index++) {
      const step = steps[index]!
      const startedAt = this.options.clock.now()
      const ctx: StepContext = {
        target,
        stepName: stepLabel(step, index),
        stepIndex: index,
        tasks: group.tasks,
        clock: this.options.clock,
        record: group.record,
        heartbeat: group.heartbeat,
        signal: group.signal,
        outbound: this.outbound,
        mail: this.options.mail ?? null,
      }
      if (group.traced !== null) ctx.traceparent = startStepSpan(group.traced, spans, ctx, step.type, startedAt)
      try {
        planned.push({ ctx, step, index, startedAt, apply: await (STEP_RUNNERS[step.type] as StepRunner)(ctx, step) })
      } catch (error) {
        // Only an http step's call fails here, and it is alone in its group.
        if (error instanceof LeaseLostError) throw error
        // Aborted by us (shutdown, cancel, a lost lease), not failed: the run is given back, or already ended.
        if (ctx.signal.aborted) {
          endUnrecordedSpans(spans)
          return 'stop'
        }
        if (!(error instanceof StepFailure)) throw error
        await this.persistGroup(target.run, (events) => this.failIn(ctx, step, index, startedAt, error, events, []), () => true, traceOf)
        return 'stop'
      }
    }
    // Each group ends with a lease-guarded transition of the run (advance, park, finish or fail): when the lease
    // is gone it throws LeaseLostError and the whole group, effects included, rolls back.
    const outcome = await this.persistGroup(target.run, (events) => this.recordGroup(group, planned, events), (outcome) => outcome === 'stop' || outcome === 'parked', traceOf)
    if (outcome === 'parked') {
      this.notify()
      // A task opened: its deadline may come before the one the timer is armed for.
      if (planned.some(({ step }) => step.type === 'task')) this.deadlines.notify()
      return 'stop'
    }
    return outcome
  }

  /**
   * The group's transaction: each planned step's effects, then the steps' `run_steps` rows (one statement for the
   * group) and the run's transition; the events of the steps and the transition go into `events` (appended by the
   * caller, after everything else). No savepoint per step: a step fails only in its checks, before its first write
   * (the StepRunner contract, ./step.ts), so a failed step leaves nothing to roll back.
   */
  private *recordGroup(
    group: { target: RunTarget; steps: Step[]; to: number; record: Record<string, unknown> | null },
    planned: PlannedStep[],
    events: NewRunEvent[],
  ): Op<{ record: Record<string, unknown> | null } | 'stop' | 'parked'> {
    const { target, steps } = group
    const reads: GroupReads = {}
    const recorded: StepOutcome[] = []
    let record = group.record
    for (const { ctx, step, index, startedAt, apply } of planned) {
      let result: StepResult
      try {
        result = yield* apply(reads)
      } catch (error) {
        if (!(error instanceof StepFailure)) throw error
        yield* this.failIn(ctx, step, index, startedAt, error, events, recorded)
        return 'stop' as const
      }
      const outcome = this.stepOutcome(ctx, step, index, startedAt, 'succeeded', result.output, null)
      for (const event of result.events ?? []) {
        events.push({ ...subjectOfRow(target.run), type: event.type, status: 'waiting', stepIndex: index, stepName: ctx.stepName, data: event.data, at: outcome.finishedAt })
      }
      if (typeof result.next === 'object' && 'awaitTask' in result.next) {
        // Parked on its task, the step is not done: woken when the task closes, it runs again and reads the outcome.
        yield* recordStepOutcomes(recorded)
        yield* parkRun(target.run.id, this.owner, index, UNTIL_TASK_CLOSES)
        events.push(stepEvent(target, outcome, 'step.waiting', 'waiting', { taskId: result.next.awaitTask }))
        return 'parked' as const
      }
      recorded.push(outcome)
      record = result.record ?? record
      if (typeof result.next === 'object') {
        yield* recordStepOutcomes(recorded)
        yield* parkRun(target.run.id, this.owner, index + 1, result.next.waitUntil)
        events.push(stepEvent(target, outcome, 'step.waiting', 'waiting', { until: toIso(result.next.waitUntil) }))
        return 'parked' as const
      }
      events.push(stepEvent(target, outcome, 'step.succeeded', 'running'))
      if (result.next === 'end' || index === steps.length - 1) {
        // The last step's transaction also ends the run.
        yield* recordStepOutcomes(recorded)
        yield* this.finishIn(target, events, 'succeeded', null, index + 1)
        return 'stop' as const
      }
    }
    yield* recordStepOutcomes(recorded)
    yield* advanceRun(target.run.id, this.owner, group.to)
    return { record }
  }

  /**
   * Records a failed step after `recorded` (the group's steps before it) and fails the run (error names the step);
   * their events go into `events`.
   */
  private *failIn(ctx: StepContext, step: Step, index: number, startedAt: number, error: StepFailure, events: NewRunEvent[], recorded: StepOutcome[]): Op<void> {
    const problem = { code: error.code, message: error.message }
    const outcome = this.stepOutcome(ctx, step, index, startedAt, 'failed', error.output, problem)
    yield* recordStepOutcomes([...recorded, outcome])
    events.push(stepEvent(ctx.target, outcome, 'step.failed', 'failed', { error: problem }))
    yield* this.finishIn(ctx.target, events, 'failed', { ...problem, step: ctx.stepName }, index)
  }

  /**
   * A step's `run_steps` row, finished now. No activity entry of its own: the step is the run's row
   * (GET /v1/workflow-runs/{id}); what it changed wrote its own entry, with the step's name (docs/api.md "Activity and admin logs").
   */
  private stepOutcome(
    ctx: StepContext,
    step: Step,
    index: number,
    startedAt: number,
    status: 'succeeded' | 'failed',
    output: unknown,
    error: { code: string; message: string } | null,
  ): StepOutcome {
    return {
      runId: ctx.target.run.id,
      index,
      name: ctx.stepName,
      type: step.type,
      status,
      output,
      error,
      startedAt,
      finishedAt: this.options.clock.now(),
    }
  }

  /**
   * Records a step group's outcome: what it did already happened (an HTTP call), so a locked or full database is
   * waited out — retried with backoff while the executor runs — rather than the outcome dropped. The transaction
   * rolls back whole on each failure, so retrying `fn` is safe. On stop it gives up: the run resumes at this group.
   */
  private persist<T>(body: () => Op<T>): Promise<T> {
    const waiting = (error: StorageUnavailableError) => this.options.logger.warn('recording a step waits for the database', { error: error.message })
    return writeOutlastingStorage(this.options.store, body, () => this.running, waiting, this.shareMs)
  }

  /**
   * Records a step group (`body`, its events appended last) and, when `frees(outcome)` says the run leaves its slot
   * (it ended or parked at a `wait`), claims on SQLite in the same transaction the run that takes the slot over,
   * launched at once. A claim of its own would wait for the group's commit and cost a commit of its own, a commit
   * after which its run's group commits: the runs ending in one commit would start a commit apart from the others
   * and stay apart (docs/workflows.md "Executor"). Where the store says not (`handsOverSlots`: PostgreSQL) the
   * claiming loop claims for freed slots.
   */
  private async persistGroup<T>(run: RunRow, body: (events: NewRunEvent[]) => Op<T>, frees: (outcome: T) => boolean, traced: GroupTrace | null = null): Promise<T> {
    const known = this.eventCounts.get(run.id)
    let appended: NewRunEvent[] = []
    // The database's time as one span per group (its transaction, waits for the lock included), none per statement.
    const commit = traced?.run.child('commit steps')
    const { outcome, successors } = await this.persist(() => this.handingOver(withRunEvents((events) => withEntriesLast(this.options.clock, body((appended = events))), known), frees))
    commit?.end({ attributes: { 'trellis.events': appended.length } })
    traced?.committed(appended)
    if (known !== undefined) this.eventCounts.set(run.id, known + appended.length)
    for (const run of successors) this.launch(run)
    return outcome
  }

  private *handingOver<T>(group: Op<T>, frees: (outcome: T) => boolean): Op<{ outcome: T; successors: RunRow[] }> {
    const outcome = yield* group
    if (!this.options.store.handsOverSlots || !this.running || !frees(outcome)) return { outcome, successors: [] }
    try {
      // In a savepoint: a claim that fails costs the slot's successor (the claiming loop claims it), never the group.
      const successors = yield* savepoint(() => claimRuns(this.owner, this.options.clock.now(), this.options.leaseMs, 1, this.options.concurrency))
      return { outcome, successors }
    } catch (error) {
      if (this.options.store.storageErrorOf(error)) throw error
      this.options.logger.error('claiming the run taking over a slot failed', { error: (error as Error).message })
      return { outcome, successors: [] }
    }
  }

  private get shareMs(): number {
    return this.options.shareMs?.() ?? Number.POSITIVE_INFINITY
  }

  /** Ends the run (freeing the record for a new run at once) with its activity entry; its event goes into `events`. */
  private *finishIn(target: RunTarget, events: NewRunEvent[], status: 'succeeded' | 'failed', error: unknown, nextStep?: number): Op<void> {
    const now = this.options.clock.now()
    if (status === 'succeeded') yield* finishRun(target.run.id, this.owner, now, nextStep)
    else yield* failRun(target.run.id, this.owner, now, error, nextStep)
    yield* logRunActivity(this.options.clock, target, {
      action: status === 'succeeded' ? 'completeWorkflow' : 'failWorkflow',
      label: status === 'succeeded' ? 'workflow run succeeded' : `workflow run failed: ${(error as { code?: string })?.code ?? 'error'}`,
    })
    events.push({ ...subjectOfRow(target.run), type: `run.${status}`, status, data: error === null ? null : { error }, at: now })
  }
}

/** A step's event, from the outcome recorded: the step's index, name, type and times. */
function stepEvent(target: RunTarget, outcome: StepOutcome, type: RunEventType, status: RunStatus, extra: Record<string, unknown> = {}): NewRunEvent {
  return {
    ...subjectOfRow(target.run),
    type,
    status,
    stepIndex: outcome.index,
    stepName: outcome.name,
    data: { stepType: outcome.type, startedAt: toIso(outcome.startedAt), finishedAt: toIso(outcome.finishedAt), ...extra },
    at: outcome.finishedAt,
  }
}

/**
 * The dispatcher of record and note events (docs/workflows.md "Events"), started and stopped with the executor: a
 * delivery loop (./delivery-loop.ts) over the events' outbox (src/db/workflow-events.ts). It claims due events under a
 * lease — on PostgreSQL any instance may, and the conditional claim hands each to one — and acts on each in one
 * transaction that removes it and queues its run (src/modules/workflow-events/service.ts `dispatchWorkflowEvent`): a
 * dispatcher that dies before that commit leaves the event leased, and it is dispatched when the lease runs out, once.
 */
import type { LeaseOutcome } from '../db/leased-queue.ts'
import type { Op } from '../db/op.ts'
import type { Store } from '../db/store.ts'
import {
  claimWorkflowEvents,
  nextWorkflowEventDueAt,
  recoverWorkflowEventsAtStart,
  releaseWorkflowEventLeases,
  settleUndispatchedEvent,
  type WorkflowEventRow,
} from '../db/workflow-events.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { dispatchWorkflowEvent } from '../modules/workflow-events/service.ts'
import { DeliveryLoop } from './delivery-loop.ts'

export interface EventDispatchOptions {
  store: Store
  clock: Clock
  logger: Logger
  /** Longest idle sleep between polls (default 1 s): a change is dispatched at most this late. */
  pollMs?: number
  /** Told when a run was queued (the executor's wake-up). */
  onRunQueued(): void
}

/**
 * An event whose dispatch throws (its subscription's stored `where` unreadable, a bug): tried this many times in all,
 * the waits doubling from `FAILED_DISPATCH_FIRST_WAIT_MS`, then kept as `failed` and counted in `/metrics`.
 */
export const MAX_DISPATCH_ATTEMPTS = 5
const FAILED_DISPATCH_FIRST_WAIT_MS = 30_000

/** Dispatching needs no outside call: an attempt is its transaction. */
type Dispatch = { ok: true; final: false }
const READY: Dispatch = { ok: true, final: false }

export class EventDispatch extends DeliveryLoop<WorkflowEventRow, Dispatch, 'dispatched'> {
  constructor(private readonly options: EventDispatchOptions) {
    super({
      store: options.store,
      clock: options.clock,
      logger: options.logger,
      one: 'workflow event',
      many: 'workflow-events',
      concurrency: 4,
      pollMs: options.pollMs,
      leaseMs: 30_000,
      done: 'dispatched',
      maxAttempts: 1,
      retryDelayMs: () => 0,
      recoverAtStart: recoverWorkflowEventsAtStart,
      claim: claimWorkflowEvents,
      nextDueAt: nextWorkflowEventDueAt,
      release: releaseWorkflowEventLeases,
      // The outbox is empty most of the time: an idle instance's poll reads the due index and writes nothing.
      readBeforeClaim: true,
    })
  }

  protected async send(): Promise<Dispatch> {
    return READY
  }

  protected *record(event: WorkflowEventRow, _sent: Dispatch, _outcome: LeaseOutcome<'dispatched'>): Op<boolean> {
    const outcome = yield* dispatchWorkflowEvent(this.options.clock, event, this.owner)
    if (outcome === 'started') queueMicrotask(() => this.options.onRunQueued())
    return outcome !== 'lost'
  }

  protected override *recordFailed(event: WorkflowEventRow, attempts: number, now: number): Op<void> {
    const outcome: LeaseOutcome<'dispatched'> =
      attempts >= MAX_DISPATCH_ATTEMPTS ? { status: 'failed', at: now } : { status: 'pending', nextAttemptAt: now + FAILED_DISPATCH_FIRST_WAIT_MS * 2 ** (attempts - 1) }
    yield* settleUndispatchedEvent(event, this.owner, attempts, outcome)
  }

  protected describeFailure(event: WorkflowEventRow, error: Error): Record<string, unknown> {
    return { eventId: event.id, workflowId: event.workflowId, recordId: event.recordKey, error: error.message }
  }
}

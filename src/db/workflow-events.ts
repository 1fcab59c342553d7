/**
 * Record and note events that start workflows (docs/workflows.md "Events"; DESIGN §15): each workflow's subscription
 * (`workflow_event_triggers`), and the outbox (`workflow_events`) a change writes in its own transaction — one row per
 * subscribing workflow — so that a committed change starts its run once, even across a crash, and a rolled-back one
 * never does. The dispatcher of any instance claims due rows under a lease (./leased-queue.ts, as mail and callbacks)
 * and deletes each in the transaction that starts its run (src/modules/workflow-events/service.ts).
 *
 * Every record write of ./records.ts and every note of ./notes.ts calls `recordWorkflowEvents`: the subscribers of the
 * record's collection in its environment are one seek on `workflow_event_triggers_place_idx`; with none (the common
 * case) nothing else is read or written. A record's data change and a new note count them in their own statement
 * (`subscribersOf`) and call it only when there are some: no statement of its own on their hot paths.
 */
import { randomUUIDv7 } from 'bun'
import { and, type AnyColumn, eq, getTableName, gt, sql } from 'drizzle-orm'
import { type LeaseOutcome, leasedQueue } from './leased-queue.ts'
import type { Op } from './op.ts'
import { constantLimit, exec, placeholders, statement } from './query.ts'
import type { Dialect } from './dialect.ts'
import type { workflowEvents, workflowEventTriggers } from './schema.ts'

export type WorkflowEventRow = typeof workflowEvents.$inferSelect
export type EventTriggerRow = typeof workflowEventTriggers.$inferSelect

export const WORKFLOW_EVENT_KINDS = ['recordCreated', 'recordUpdated', 'recordDeleted', 'noteAdded'] as const
export type WorkflowEventKind = (typeof WORKFLOW_EVENT_KINDS)[number]

/** One entry of `on`: the event, and for `recordUpdated` the fields of which one must change (none named: any). */
export interface EventSpec {
  event: WorkflowEventKind
  fields?: string[]
}

/**
 * How many event-started runs may lead to one another through their writes (A updates a record, which starts B, whose
 * update starts C…): an event whose chain is this long starts nothing (counted as skipped).
 */
export const MAX_EVENT_CHAIN = 8

/** One run of a chain: an event-started run whose write caused the next event. */
export interface ChainLink {
  runId: string
  workflow: string
  recordId: string
}

/** What started an event-triggered run (`runs.cause`, JSON). */
export interface RunCause {
  event: WorkflowEventKind
  recordId: string
  changedFields?: string[]
  noteId?: number
  chain: ChainLink[]
}

/** The run whose step made a change (its `update` or `note`); null: a person, the API, an import. */
export interface ChangeOrigin {
  runId: string
}

/** One change of one record of a collection in an environment, as its write tells it. */
export interface RecordChange {
  recordKey: string
  event: WorkflowEventKind
  /** `recordUpdated`: the top-level fields whose value changed. */
  changedFields?: readonly string[]
  noteId?: number
  byRun?: ChangeOrigin | null
}

const ph = (name: string) => sql.placeholder(name)

const SUBSCRIBERS = statement('workflow-events.subscribers', ({ db, t }) =>
  db
    .select({ workflowId: t.workflowEventTriggers.workflowId, events: t.workflowEventTriggers.events, debounceSeconds: t.workflowEventTriggers.debounceSeconds })
    .from(t.workflowEventTriggers)
    .where(and(eq(t.workflowEventTriggers.environmentId, ph('environmentId')), eq(t.workflowEventTriggers.collectionId, ph('collectionId')))),
)

const INSERT_EVENT = statement('workflow-events.insert', ({ db, t }) =>
  db.insert(t.workflowEvents).values({
    ...placeholders('id', 'workflowId', 'recordKey', 'event', 'changedFields', 'noteId', 'chain', 'nextAttemptAt', 'createdAt'),
    status: 'pending',
    attempts: 0,
  }),
)

/**
 * In a write's RETURNING on `records` or `notes`: how many workflows subscribe to the row's collection in its
 * environment — the same seek as the subscribers' lookup, so a write that finds none skips `recordWorkflowEvents`.
 * The row's columns are named with their table: unqualified, a name inside the sub-select is the subscription's own.
 */
export const subscribersOf = (t: Dialect['t'], written: Dialect['t']['records'] | Dialect['t']['notes']) => {
  const own = (column: AnyColumn) => sql`${sql.identifier(getTableName(written))}.${sql.identifier(column.name)}`
  const s = t.workflowEventTriggers
  return sql<number>`(SELECT count(*) FROM ${s} WHERE ${s.environmentId} = ${own(written.environmentId)} AND ${s.collectionId} = ${own(written.collectionId)})`.mapWith(Number)
}

const RUN_CHAIN = statement('workflow-events.run-chain', ({ db, t }) =>
  db
    .select({ workflowId: t.runs.workflowId, cause: t.runs.cause, workflow: t.workflows.name, recordId: t.runs.recordId })
    .from(t.runs)
    .innerJoin(t.workflows, eq(t.workflows.id, t.runs.workflowId))
    .where(eq(t.runs.id, ph('runId'))),
)

const COUNT = statement('workflow-events.count', ({ db, t }) =>
  db
    .update(t.workflowEventTriggers)
    .set({
      received: sql`${t.workflowEventTriggers.received} + ${ph('received')}`,
      started: sql`${t.workflowEventTriggers.started} + ${ph('started')}`,
      skipped: sql`${t.workflowEventTriggers.skipped} + ${ph('skipped')}`,
    })
    .where(eq(t.workflowEventTriggers.workflowId, ph('workflowId'))),
)

/** What a write adds to a subscription's counters (`/metrics`). */
export interface WorkflowEventCounts {
  received?: number
  started?: number
  skipped?: number
}

/**
 * Adds to a subscription's counters, in one statement on its one row. Every event of the subscription updates that
 * row, which stays locked until the transaction commits: a dispatch counts last in its transaction, so concurrent
 * dispatches wait on each other only for a commit.
 */
export function countWorkflowEvents(workflowId: number, counts: WorkflowEventCounts): Op<void> {
  return COUNT.exec({ workflowId, received: counts.received ?? 0, started: counts.started ?? 0, skipped: counts.skipped ?? 0 })
}

/** The subscription takes this change: its kind is named, and for an update one of the named fields changed. */
function wants(specs: readonly EventSpec[], change: RecordChange): boolean {
  return specs.some(
    (spec) =>
      spec.event === change.event &&
      (spec.event !== 'recordUpdated' || !spec.fields?.length || spec.fields.some((field) => change.changedFields?.includes(field))),
  )
}

/** The run whose write caused the changes: its workflow, and the chain its events carry — its own chain, then itself. */
function* originOf(origin: ChangeOrigin | null | undefined): Op<{ workflowId: number | null; chain: ChainLink[] }> {
  const run = origin ? yield* RUN_CHAIN.row({ runId: origin.runId }) : undefined
  if (!origin || !run) return { workflowId: null, chain: [] }
  const before = run.cause ? ((JSON.parse(run.cause) as { chain?: ChainLink[] }).chain ?? []) : []
  return { workflowId: run.workflowId, chain: [...before, { runId: origin.runId, workflow: run.workflow, recordId: run.recordId }] }
}

/**
 * The outbox rows of these changes of one collection's records in one environment, in the caller's transaction: one
 * per change and workflow subscribed to it, due after the workflow's debounce. A workflow's own write never starts
 * itself on the same record, and a chain `MAX_EVENT_CHAIN` long starts nothing: both counted as skipped.
 */
export function* recordWorkflowEvents(scope: { environmentId: number; collectionId: number }, changes: readonly RecordChange[], now: number): Op<void> {
  if (changes.length === 0) return
  const subscribers = yield* SUBSCRIBERS.rows(scope)
  if (subscribers.length === 0) return
  const origins = new Map<string, { workflowId: number | null; chain: ChainLink[] }>()
  for (const subscriber of subscribers) {
    const specs = JSON.parse(subscriber.events) as EventSpec[]
    let skipped = 0
    for (const change of changes) {
      if (!wants(specs, change)) continue
      const runId = change.byRun?.runId ?? ''
      let origin = origins.get(runId)
      if (!origin) origins.set(runId, (origin = yield* originOf(change.byRun)))
      const { workflowId, chain } = origin
      if (workflowId === subscriber.workflowId || chain.length >= MAX_EVENT_CHAIN) {
        skipped++
        continue
      }
      yield* INSERT_EVENT.exec({
        id: randomUUIDv7(),
        workflowId: subscriber.workflowId,
        recordKey: change.recordKey,
        event: change.event,
        changedFields: change.changedFields ? JSON.stringify(change.changedFields) : null,
        noteId: change.noteId ?? null,
        chain: JSON.stringify(chain),
        nextAttemptAt: now + (subscriber.debounceSeconds ?? 0) * 1000,
        createdAt: now,
      })
    }
    if (skipped > 0) yield* countWorkflowEvents(subscriber.workflowId, { skipped })
  }
}

// ── The dispatcher's side ────────────────────────────────────────────────────

const OUTBOX = leasedQueue<WorkflowEventRow, 'dispatched'>({ name: 'workflow-events', table: (t) => t.workflowEvents, claimAnswers: 'rows' })

/** Leases up to `limit` due events to `owner` until `now + leaseMs`, oldest due first. */
export function* claimWorkflowEvents(owner: string, now: number, leaseMs: number, limit: number): Op<WorkflowEventRow[]> {
  const claimed = yield* OUTBOX.claim(owner, now, leaseMs, limit)
  return claimed.sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || a.id.localeCompare(b.id))
}
export const releaseWorkflowEventLeases = OUTBOX.releaseOwned
/** An event that could not be dispatched: due again at `nextAttemptAt`, or failed for good (kept, counted in `/metrics`). */
export function* settleUndispatchedEvent(event: Pick<WorkflowEventRow, 'id'>, owner: string, attempts: number, outcome: LeaseOutcome<'dispatched'>): Op<boolean> {
  return yield* OUTBOX.settle({ id: event.id, owner, attempts, error: null, outcome })
}
export const recoverWorkflowEventsAtStart = OUTBOX.recoverAtStart
export const nextWorkflowEventDueAt = OUTBOX.nextDueAt

const TAKE = statement('workflow-events.take', ({ db, t }) =>
  db
    .delete(t.workflowEvents)
    .where(and(eq(t.workflowEvents.id, ph('id')), eq(t.workflowEvents.leaseOwner, ph('owner')), sql`${t.workflowEvents.status} = 'pending'`))
    .returning({ id: t.workflowEvents.id }),
)

/** Removes the event `owner` holds, in the transaction that acts on it: false (nothing written) when it no longer holds it. */
export function* takeWorkflowEvent(id: string, owner: string): Op<boolean> {
  return (yield* TAKE.rows({ id, owner })).length > 0
}

const NEWER = statement('workflow-events.newer', ({ db, t }) =>
  db
    .select({ id: t.workflowEvents.id })
    .from(t.workflowEvents)
    .where(and(eq(t.workflowEvents.workflowId, ph('workflowId')), eq(t.workflowEvents.recordKey, ph('recordKey')), gt(t.workflowEvents.id, ph('id'))))
    .limit(constantLimit(1)),
)

/** A later event of the workflow on the record is still to come (a debounce: only the last one starts a run). */
export function* laterWorkflowEventWaits(event: Pick<WorkflowEventRow, 'id' | 'workflowId' | 'recordKey'>): Op<boolean> {
  return (yield* NEWER.rows({ workflowId: event.workflowId, recordKey: event.recordKey, id: event.id })).length > 0
}

// ── Subscriptions ────────────────────────────────────────────────────────────

const TRIGGER = statement('workflow-events.trigger', ({ db, t }) => db.select().from(t.workflowEventTriggers).where(eq(t.workflowEventTriggers.workflowId, ph('workflowId'))))

/** A workflow's event subscription, if it has one. */
export function findEventTrigger(workflowId: number): Op<EventTriggerRow | undefined> {
  return TRIGGER.row({ workflowId })
}

export type EventTriggerValues = Pick<EventTriggerRow, 'workflowId' | 'environmentId' | 'collectionId' | 'events' | 'filter' | 'runAsUserId' | 'debounceSeconds' | 'updatedAt'>

/** Sets a workflow's subscription (its counters kept). */
export function saveEventTrigger(values: EventTriggerValues): Op<void> {
  const { workflowId: _key, ...change } = values
  return exec(({ db, t }) => db.insert(t.workflowEventTriggers).values(values).onConflictDoUpdate({ target: t.workflowEventTriggers.workflowId, set: change }))
}

/** Removes a workflow's subscription and its events still to be dispatched. */
export function* deleteEventTrigger(workflowId: number): Op<void> {
  yield* exec(({ db, t }) => db.delete(t.workflowEvents).where(eq(t.workflowEvents.workflowId, workflowId)))
  yield* exec(({ db, t }) => db.delete(t.workflowEventTriggers).where(eq(t.workflowEventTriggers.workflowId, workflowId)))
}

/** Every subscription's counters with its workflow's project and name (`/metrics`). */
export function listEventCounters() {
  return statementOfCounters.rows()
}
const statementOfCounters = statement('workflow-events.counters', ({ db, t }) =>
  db
    .select({
      project: t.projects.name,
      workflow: t.workflows.name,
      received: t.workflowEventTriggers.received,
      started: t.workflowEventTriggers.started,
      skipped: t.workflowEventTriggers.skipped,
      failed: sql<number>`(SELECT count(*) FROM ${t.workflowEvents} WHERE ${t.workflowEvents.workflowId} = ${t.workflowEventTriggers.workflowId} AND ${t.workflowEvents.status} = 'failed')`.mapWith(Number),
    })
    .from(t.workflowEventTriggers)
    .innerJoin(t.workflows, eq(t.workflows.id, t.workflowEventTriggers.workflowId))
    .innerJoin(t.collections, eq(t.collections.id, t.workflowEventTriggers.collectionId))
    .innerJoin(t.projects, eq(t.projects.id, t.collections.projectId)),
)

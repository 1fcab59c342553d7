/**
 * Completion callbacks' storage (docs/workflows.md "Completion callbacks"): a workflow's endpoints, and the outbox —
 * one delivery per endpoint and event, written in the transaction that makes it happen (./queue.ts calls
 * `queueRunCallbacks` from every end of a run: finish, fail, cancel; src/modules/tasks/service.ts `queueCallbacks` when
 * a task opens, is decided or closes), claimed under a lease by the delivery worker of any
 * instance, each attempt recorded guarded by that lease, as the runs are (./queue.ts), by the statements the mail
 * outbox (./mail.ts) uses too (./leased-queue.ts). Written once for both stores.
 */
import { randomUUIDv7 } from 'bun'
import { and, asc, eq, sql } from 'drizzle-orm'
import { type CallbackEvent, callbackEventOf, callbackPayload } from '../lib/callbacks.ts'
import type { Micros } from '../lib/time.ts'
import { type LeaseOutcome, leasedQueue } from './leased-queue.ts'
import { type Op, plan, runPlan } from './op.ts'
import type { Db } from './dialect.ts'
import { notifyOnCommit } from './postgres/monotonic.ts'
import { CALLBACKS_CHANNEL } from './postgres/queue.ts'
import { exec, placeholders, rows, statement } from './query.ts'
import { wakeCallbackListeners } from './sqlite/callback-wakeups.ts'
import { joinWorkflowPlace } from './workflows.ts'
import type { callbackAttempts, callbackDeliveries, callbackEndpoints } from './schema.ts'

export type CallbackEndpointRow = typeof callbackEndpoints.$inferSelect
export type CallbackDeliveryRow = typeof callbackDeliveries.$inferSelect
export type CallbackAttemptRow = typeof callbackAttempts.$inferSelect

const ph = (name: string) => sql.placeholder(name)

// ── Endpoints ─────────────────────────────────────────────────────────────────

const ENDPOINTS = statement('callbacks.endpoints', ({ db, t }) =>
  db
    .select()
    .from(t.callbackEndpoints)
    .where(eq(t.callbackEndpoints.workflowId, ph('workflowId')))
    .orderBy(asc(t.callbackEndpoints.createdAt), asc(t.callbackEndpoints.id)),
)

/** A workflow's endpoints, oldest first. */
export function listCallbackEndpoints(workflowId: number) {
  return ENDPOINTS.rows({ workflowId })
}

const INSERT_ENDPOINT = statement('callbacks.insert-endpoint', ({ db, t }) =>
  db.insert(t.callbackEndpoints).values(placeholders('id', 'workflowId', 'url', 'events', 'secretSalt', 'createdBy', 'createdAt')),
)

export function insertCallbackEndpoint(endpoint: CallbackEndpointRow): Op<void> {
  return INSERT_ENDPOINT.exec({ ...endpoint })
}

const SET_EVENTS = statement('callbacks.set-events', ({ db, t }) =>
  db
    .update(t.callbackEndpoints)
    .set({ events: sql`${ph('events')}` })
    .where(eq(t.callbackEndpoints.id, ph('id'))),
)

/** The events an endpoint is sent (a JSON array). */
export function setCallbackEndpointEvents(id: string, events: string): Op<void> {
  return SET_EVENTS.exec({ id, events })
}

const DELETE_ENDPOINT = statement('callbacks.delete-endpoint', ({ db, t }) =>
  db
    .delete(t.callbackEndpoints)
    .where(and(eq(t.callbackEndpoints.id, ph('id')), eq(t.callbackEndpoints.workflowId, ph('workflowId'))))
    .returning(),
)

/** Removes the workflow's endpoint (its deliveries and their attempts go with it); the row removed, if there was one. */
export function* deleteCallbackEndpoint(workflowId: number, id: string): Op<CallbackEndpointRow | undefined> {
  return (yield* DELETE_ENDPOINT.rows({ workflowId, id }))[0]
}

// ── The outbox ───────────────────────────────────────────────────────────────

/**
 * The endpoints of the run's workflow sent `pattern`'s event, locked against removal until the run's transaction
 * commits (PostgreSQL's `FOR SHARE`: a removal committed before it is not seen, one after it waits, then removes the
 * new deliveries with the endpoint). `events` is a JSON array of known event names: `LIKE '%"<event>"%'`, `_`
 * escaped. The workflow is the run's (one more primary-key read here): the run's end then needs no answer from the
 * transition before it (./queue.ts `endRun`).
 */
const SUBSCRIBED = statement('callbacks.subscribed', (d) =>
  d.forShare(
    d.db
      .select({ id: d.t.callbackEndpoints.id })
      .from(d.t.callbackEndpoints)
      .where(
        and(
          eq(d.t.callbackEndpoints.workflowId, sql`(SELECT ${d.t.runs.workflowId} FROM ${d.t.runs} WHERE ${d.t.runs.id} = ${ph('runId')})`),
          sql`${d.t.callbackEndpoints.events} LIKE ${ph('pattern')} ESCAPE '\\'`,
        ),
      )
      .orderBy(asc(d.t.callbackEndpoints.id)),
  ),
)

const ENDED_RUN = statement('callbacks.ended-run', ({ db, t }) =>
  joinWorkflowPlace(t, db
    .select({
      id: t.runs.id,
      status: t.runs.status,
      trigger: t.runs.trigger,
      recordId: t.runs.recordId,
      error: t.runs.error,
      retryOf: t.runs.retryOf,
      createdAt: t.runs.createdAt,
      startedAt: t.runs.startedAt,
      finishedAt: t.runs.finishedAt,
      workflow: t.workflows.name,
      workflowVersion: t.workflowVersions.version,
      project: t.projects.name,
      environment: t.environments.name,
      team: t.teams.name,
    })
    .from(t.runs)
    .innerJoin(t.workflows, eq(t.workflows.id, t.runs.workflowId))
    .innerJoin(t.workflowVersions, eq(t.workflowVersions.id, t.runs.workflowVersionId))
    .$dynamic())
    .innerJoin(t.projects, eq(t.projects.id, t.environments.projectId))
    .where(eq(t.runs.id, ph('id'))),
)

/** A delivery's id, its Standard Webhooks `webhook-id`: `msg_` and 32 hex digits (a UUIDv7's, time-ordered). */
const newDeliveryId = () => `msg_${randomUUIDv7().replaceAll('-', '')}`

/**
 * The outbox write of an event of a run (in the transaction that makes it happen): one pending delivery per endpoint of
 * the workflow sent `type`, due at once, its body built now by `payload` (so every attempt sends the same bytes),
 * announced to the delivery workers on commit. A workflow without such an endpoint costs one indexed read, and
 * `payload` is not called.
 */
export function* queueCallbacks(run: { id: string }, type: CallbackEvent, now: number, payload: () => Op<string>): Op<number> {
  const endpoints = yield* SUBSCRIBED.rows({ runId: run.id, pattern: `%${JSON.stringify(type).replaceAll('_', '\\_')}%` })
  if (endpoints.length === 0) return 0
  const body = yield* payload()
  yield* exec(({ db, t }) =>
    db.insert(t.callbackDeliveries).values(
      endpoints.map((endpoint) => ({
        id: newDeliveryId(), endpointId: endpoint.id, runId: run.id, type, payload: body, status: 'pending' as const, attempts: 0, nextAttemptAt: now, createdAt: now,
      })),
    ),
  )
  yield* runPlan(announceCallbacks)
  return endpoints.length
}

/** The deliveries of a run that just ended as `status` (in its final transaction, after the run's row changed), its body the run as it ended. */
export function queueRunCallbacks(run: { id: string }, status: 'succeeded' | 'failed' | 'cancelled', now: number): Op<number> {
  return queueCallbacks(run, callbackEventOf(status), now, function* () {
    const ended = yield* ENDED_RUN.row({ id: run.id })
    if (!ended) throw new Error(`run ${run.id} vanished in its own transaction`)
    return callbackPayload({ ...ended, status, createdAt: ended.createdAt as Micros, finishedAt: ended.finishedAt ?? now })
  })
}


/**
 * Wakes the delivery workers once the transaction that queued deliveries has committed. SQLite: this process's
 * listeners on the connection, after the commit (./sqlite/callback-wakeups.ts). PostgreSQL: `NOTIFY
 * trellis_callbacks` to every instance's delivery worker once the handle's transaction committed (./postgres/notify.ts).
 */
const announceCallbacks = plan({
  sqlite: (db: Db): void => wakeCallbackListeners(db),
  postgres: (db) => notifyOnCommit(db, CALLBACKS_CHANNEL),
  why: "NOTIFY wakes every instance's callback delivery worker after the commit; SQLite's is this process's, woken after the commit",
})

// ── The delivery worker's operations ────────────────────────────────────────

/** The outbox's lease, claim and settle (./leased-queue.ts), as the mail outbox's. */
const OUTBOX = leasedQueue<{ id: string }, 'succeeded'>({ name: 'callbacks', table: (t) => t.callbackDeliveries, claimAnswers: 'ids' })

/** A delivery as its worker sends it. */
export interface ClaimedDelivery {
  id: string
  endpointId: string
  url: string
  secretSalt: string
  payload: string
  /** Attempts made since it was queued or last resent (the retry schedule's count). */
  attempts: number
  /** Attempts ever recorded for it (their numbers go on after a resend). */
  recorded: number
  /** The run it tells of (its trace is the delivery's span's parent), when it is a run's. */
  runId: string | null
}

const CLAIMED = statement('callbacks.claimed', (d) => {
  const { db, t } = d
  const x = t.callbackDeliveries
  return db
    .select({
      id: x.id,
      endpointId: x.endpointId,
      url: t.callbackEndpoints.url,
      secretSalt: t.callbackEndpoints.secretSalt,
      payload: x.payload,
      attempts: x.attempts,
      recorded: sql<number>`(SELECT coalesce(max(a.attempt), 0) FROM callback_attempts a WHERE a.delivery_id = ${x.id})`.mapWith(Number),
      runId: x.runId,
    })
    .from(x)
    .innerJoin(t.callbackEndpoints, eq(t.callbackEndpoints.id, x.endpointId))
    .where(d.inJsonArray(x.id, 'ids', 'text'))
    .orderBy(asc(x.nextAttemptAt), asc(x.id))
})

/** Leases up to `limit` due deliveries to `owner` until `now + leaseMs`, oldest due first. */
export function* claimCallbackDeliveries(owner: string, now: number, leaseMs: number, limit: number): Op<ClaimedDelivery[]> {
  const claimed = yield* OUTBOX.claim(owner, now, leaseMs, limit)
  if (claimed.length === 0) return []
  return yield* CLAIMED.rows({ ids: JSON.stringify(claimed.map((c) => c.id)) })
}

/** One attempt's outcome: the delivery `succeeded`, `failed` for good, or is `pending` again until `nextAttemptAt`. */
export interface CallbackAttempt {
  deliveryId: string
  owner: string
  /** The attempt's number among every attempt recorded for the delivery. */
  attempt: number
  /** The series' count after this attempt (reset by a resend). */
  attempts: number
  startedAt: number
  durationMs: number
  statusCode: number | null
  error: string | null
  outcome: LeaseOutcome<'succeeded'>
}

const INSERT_ATTEMPT = statement('callbacks.insert-attempt', ({ db, t }) =>
  db.insert(t.callbackAttempts).values(placeholders('deliveryId', 'attempt', 'startedAt', 'durationMs', 'statusCode', 'error')),
)

/**
 * The attempt and the delivery's new state, guarded by the lease: false (nothing written) when `owner` no longer
 * holds it — its lease ran out and another worker took it, or it was removed with its endpoint or run.
 */
export function* recordCallbackAttempt(attempt: CallbackAttempt): Op<boolean> {
  const { deliveryId, owner, attempts, startedAt, durationMs, statusCode, error, outcome } = attempt
  if (!(yield* OUTBOX.settle({ id: deliveryId, owner, attempts, error, outcome }))) return false
  yield* INSERT_ATTEMPT.exec({ deliveryId, attempt: attempt.attempt, startedAt, durationMs, statusCode, error })
  return true
}

/** Graceful stop: what `owner` holds (attempts it gave up on) is due again for any worker. */
export const releaseCallbackLeases = OUTBOX.releaseOwned

/** Every lease handed back: only for a store no other process serves (./store.ts), where every holder is dead. */
export const releaseEveryCallbackLease = OUTBOX.releaseAll

/** What a starting delivery worker takes back at once (./leased-queue.ts `recoverAtStart`). */
export const recoverCallbacksAtStart = OUTBOX.recoverAtStart

/** When the next pending delivery comes due after `after` (ms), or null. */
export const nextCallbackDueAt = OUTBOX.nextDueAt

// ── A run's deliveries ───────────────────────────────────────────────────────

const RUN_DELIVERIES = statement('callbacks.run-deliveries', ({ db, t }) =>
  db
    .select({ delivery: t.callbackDeliveries, url: t.callbackEndpoints.url })
    .from(t.callbackDeliveries)
    .innerJoin(t.callbackEndpoints, eq(t.callbackEndpoints.id, t.callbackDeliveries.endpointId))
    .where(eq(t.callbackDeliveries.runId, ph('runId')))
    .orderBy(asc(t.callbackDeliveries.createdAt), asc(t.callbackDeliveries.id)),
)

const ATTEMPTS = statement('callbacks.attempts', (d) =>
  d.db
    .select()
    .from(d.t.callbackAttempts)
    .where(d.inJsonArray(d.t.callbackAttempts.deliveryId, 'ids', 'text'))
    .orderBy(asc(d.t.callbackAttempts.deliveryId), asc(d.t.callbackAttempts.attempt)),
)

/** A run's deliveries with their endpoint's URL, oldest first, and every attempt of each in order. */
export function* findRunCallbackDeliveries(runId: string) {
  const deliveries = yield* RUN_DELIVERIES.rows({ runId })
  const attempts = deliveries.length === 0 ? [] : yield* ATTEMPTS.rows({ ids: JSON.stringify(deliveries.map((d) => d.delivery.id)) })
  return deliveries.map(({ delivery, url }) => ({ ...delivery, url, attemptList: attempts.filter((a) => a.deliveryId === delivery.id) }))
}

const RESEND = statement('callbacks.resend', (d) =>
  d.db
    .update(d.t.callbackDeliveries)
    .set({ status: 'pending', attempts: 0, nextAttemptAt: sql`${ph('now')}`, finishedAt: null, leaseOwner: null, leaseExpiresAt: null })
    .where(and(eq(d.t.callbackDeliveries.id, ph('id')), eq(d.t.callbackDeliveries.runId, ph('runId')), sql`${d.t.callbackDeliveries.status} <> 'pending'`))
    .returning({ id: d.t.callbackDeliveries.id }),
)

/**
 * A succeeded or failed delivery of the run, pending again and due `now`, with its id (the same `webhook-id`) and
 * a new series of attempts; announced on commit. Answers what it found: `pending` (already to be sent) or `unknown`.
 */
export function* requeueCallbackDelivery(runId: string, id: string, now: number): Op<'requeued' | 'pending' | 'unknown'> {
  if ((yield* RESEND.rows({ runId, id, now })).length > 0) {
    yield* runPlan(announceCallbacks)
    return 'requeued'
  }
  const found = yield* rows(({ db, t }) =>
    db
      .select({ status: t.callbackDeliveries.status })
      .from(t.callbackDeliveries)
      .where(and(eq(t.callbackDeliveries.id, id), eq(t.callbackDeliveries.runId, runId))),
  )
  return found.length > 0 ? 'pending' : 'unknown'
}

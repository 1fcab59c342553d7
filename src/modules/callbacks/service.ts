/**
 * Completion callbacks (docs/workflows.md "Completion callbacks"): a workflow's endpoints — added and removed by
 * project admins (the API, the console, `trellis apply`), each change an admin log entry — and a run's deliveries,
 * read and resent. The outbox itself is written by the run's end (src/db/queue.ts) and sent by ./delivery.ts.
 */
import { randomUUIDv7 } from 'bun'
import { randomBytes } from 'node:crypto'
import {
  type CallbackEndpointRow,
  deleteCallbackEndpoint,
  findRunCallbackDeliveries,
  insertCallbackEndpoint,
  listCallbackEndpoints,
  requeueCallbackDelivery,
  setCallbackEndpointEvents,
} from '../../db/callbacks.ts'
import type { Op } from '../../db/op.ts'
import { lockRule } from '../../db/rule-locks.ts'
import type { TriggerTarget } from '../../db/workflows.ts'
import { CALLBACK_EVENTS, type CallbackEvent, callbackSecret, callbackUrlProblem, MAX_CALLBACKS_PER_WORKFLOW, RUN_CALLBACK_EVENTS } from '../../lib/callbacks.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict, invalidField, notFound } from '../../lib/errors.ts'
import type { AllowList } from '../../lib/outbound/policy.ts'
import { redactUrl, redactUrlsIn } from '../../lib/outbound/redact.ts'
import { toIso, toIsoOrNull } from '../../lib/time.ts'
import { appendAdminLog } from '../admin-logs/service.ts'

/**
 * An endpoint as answers show it: never its secret, and its URL without query or fragment (`?[redacted]`, as runs and
 * the admin log show URLs: a receiver's credential often travels there). Both are shown whole once, by
 * `addCallbackEndpoint`.
 */
export interface CallbackEndpointView {
  id: string
  url: string
  events: CallbackEvent[]
  createdAt: string
}

export const endpointView = (row: CallbackEndpointRow): CallbackEndpointView => ({
  id: row.id,
  url: redactUrl(row.url),
  events: JSON.parse(row.events) as CallbackEvent[],
  createdAt: toIso(row.createdAt),
})

/** The events asked for, in their one order, each once; absent: the three ends of a run. */
export const canonicalEvents = (events: readonly CallbackEvent[] | undefined): CallbackEvent[] =>
  events === undefined ? [...RUN_CALLBACK_EVENTS] : CALLBACK_EVENTS.filter((event) => events.includes(event))

/** The workflow's endpoints, oldest first. */
export function* listWorkflowCallbacks(workflowId: number): Op<CallbackEndpointView[]> {
  return (yield* listCallbackEndpoints(workflowId)).map(endpointView)
}

export interface NewCallbackEndpoint {
  url: string
  events?: readonly CallbackEvent[]
}

/** Where an endpoint is added, and by whom. */
export interface CallbackContext {
  clock: Clock
  /** The instance secret: each endpoint's secret is derived from it. */
  secret: Buffer
  /** The outbound allow-list in effect: what a URL's address may be. */
  allow: AllowList
  /** The acting user; null for `trellis apply`. */
  actorId: number | null
  /** The field a bad URL is named by (`url`; `projects[0].workflows[1].callbacks[0].url` in an apply file). */
  urlField?: string
}

/**
 * Adds an endpoint to the workflow, with its admin log entry: 400 naming the URL's field for a URL that is not
 * http(s), holds credentials, or points to an address outbound requests may not reach; 409 `callback_exists` for a
 * URL the workflow has already, 409 `too_many_callbacks` past the bound. Both are checked under the workflow's rule
 * lock (PostgreSQL's instances add endpoints one at a time per workflow). Answers the endpoint with its secret and its
 * whole URL, the one time they are shown.
 */
export function* addCallbackEndpoint(ctx: CallbackContext, target: TriggerTarget, wanted: NewCallbackEndpoint): Op<CallbackEndpointView & { secret: string }> {
  const problem = callbackUrlProblem(wanted.url, ctx.allow)
  if (problem) throw invalidField(ctx.urlField ?? 'url', problem)
  yield* lockRule('workflowCallbacks', target.workflowId)
  const existing = yield* listCallbackEndpoints(target.workflowId)
  const same = existing.find((endpoint) => endpoint.url === wanted.url)
  if (same) throw conflict('callback_exists', `Workflow ${target.workflowName} already has a callback to this URL`, { id: same.id })
  if (existing.length >= MAX_CALLBACKS_PER_WORKFLOW) {
    throw conflict('too_many_callbacks', `Workflow ${target.workflowName} has ${existing.length} callbacks already, the most it may have: remove one first`)
  }
  const row: CallbackEndpointRow = {
    id: randomUUIDv7(),
    workflowId: target.workflowId,
    url: wanted.url,
    events: JSON.stringify(canonicalEvents(wanted.events)),
    secretSalt: randomBytes(16).toString('base64url'),
    createdBy: ctx.actorId,
    createdAt: ctx.clock.now(),
  }
  yield* insertCallbackEndpoint(row)
  yield* logCallbackChange(ctx, target, 'add', undefined, row)
  return { ...endpointView(row), url: row.url, secret: callbackSecret(ctx.secret, row.id, row.secretSalt) }
}

/** Sets the events an endpoint is sent (`trellis apply`), with its admin log entry; false when they are those already. */
export function* setCallbackEvents(ctx: CallbackContext, target: TriggerTarget, endpoint: CallbackEndpointRow, events: readonly CallbackEvent[] | undefined): Op<boolean> {
  const wanted = JSON.stringify(canonicalEvents(events))
  if (wanted === endpoint.events) return false
  yield* setCallbackEndpointEvents(endpoint.id, wanted)
  yield* logCallbackChange(ctx, target, 'update', endpoint, { ...endpoint, events: wanted })
  return true
}

/** Removes one of the workflow's endpoints (its deliveries with it), with its admin log entry; 404 when it has none of that id. */
export function* removeCallbackEndpoint(ctx: CallbackContext, target: TriggerTarget, id: string): Op<void> {
  const removed = yield* deleteCallbackEndpoint(target.workflowId, id)
  if (!removed) throw notFound(`Callback ${id} not found for workflow ${target.workflowName}`)
  yield* logCallbackChange(ctx, target, 'remove', removed, undefined)
}

/** The admin log's `{name}` values (the compatibility document's shape): the workflow, the URL as runs show URLs, the events. */
function logCallbackChange(ctx: CallbackContext, target: TriggerTarget, type: 'add' | 'update' | 'remove', before?: CallbackEndpointRow, after?: CallbackEndpointRow) {
  const describe = (endpoint: CallbackEndpointRow) =>
    `${target.workflowName}: callback ${redactUrl(endpoint.url)} (${(JSON.parse(endpoint.events) as string[]).map((e) => e.replace('workflow_run.', '')).join(', ')})`
  return appendAdminLog(ctx.clock, {
    projectId: target.projectId,
    type,
    resource: 'workflow-callback',
    actorId: ctx.actorId,
    previousValue: before && { name: describe(before) },
    newValue: after && { name: describe(after) },
  })
}

/**
 * A run's deliveries as answers show them, oldest first: each with its endpoint (its URL as runs show URLs: a run's
 * reader need not be the workflow's admin), state and every attempt.
 */
export function* renderRunCallbacks(runId: string) {
  return (yield* findRunCallbackDeliveries(runId)).map((delivery) => ({
    id: delivery.id,
    endpoint: { id: delivery.endpointId, url: redactUrl(delivery.url) },
    type: delivery.type as CallbackEvent,
    status: delivery.status,
    nextAttemptAt: delivery.status === 'pending' ? toIso(delivery.nextAttemptAt) : null,
    createdAt: toIso(delivery.createdAt),
    finishedAt: toIsoOrNull(delivery.finishedAt),
    attempts: delivery.attemptList.map((attempt) => ({
      attempt: attempt.attempt,
      startedAt: toIso(attempt.startedAt),
      durationMs: attempt.durationMs,
      statusCode: attempt.statusCode,
      error: attempt.error === null ? null : redactUrlsIn(attempt.error),
    })),
  }))
}

/** A run's delivery sent again (same id, a new series of attempts, due now): 404 for none of that id, 409 while it is pending. */
export function* resendRunCallback(clock: Clock, runId: string, deliveryId: string): Op<void> {
  const outcome = yield* requeueCallbackDelivery(runId, deliveryId, clock.now())
  if (outcome === 'unknown') throw notFound(`Callback delivery ${deliveryId} not found for run ${runId}`)
  if (outcome === 'pending') throw conflict('delivery_pending', `Callback delivery ${deliveryId} is still to be sent: wait for its next attempt`)
}

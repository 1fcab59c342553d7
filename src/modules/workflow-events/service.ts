/**
 * Record and note events that start a workflow (docs/workflows.md "Events"): a workflow's subscription — which events
 * of its collection, a `where` on the record, whose rights the runs use, a debounce — and the start of a run from one
 * event of the outbox (src/db/workflow-events.ts), which the dispatcher (src/executor/event-dispatch.ts) calls in the
 * transaction that removes the event: the run starts once, or not at all.
 */
import { randomUUIDv7 } from 'bun'
import type { Op } from '../../db/op.ts'
import { pageRecordList, type RecordFieldFilter } from '../../db/records.ts'
import {
  countWorkflowEvents,
  deleteEventTrigger,
  type EventSpec,
  type EventTriggerRow,
  findEventTrigger,
  laterWorkflowEventWaits,
  type RunCause,
  saveEventTrigger,
  takeWorkflowEvent,
  WORKFLOW_EVENT_KINDS,
  type WorkflowEventRow,
} from '../../db/workflow-events.ts'
import type { TriggerTarget } from '../../db/workflows.ts'
import type { Clock } from '../../lib/clock.ts'
import { canonicalJson } from '../../lib/json.ts'
import { HttpError, invalidField, notFound } from '../../lib/errors.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { canReachRendering } from '../directory/projects.ts'
import { recordListPlan } from '../records/query.ts'
import { collectionFields } from '../records/service.ts'
import { queueRunIfIdle } from '../runs/service.ts'
import { findUser, findUserByEmail } from '../users/service.ts'
import { findTriggerTarget } from '../workflows/service.ts'

export { WORKFLOW_EVENT_KINDS }

/** The longest debounce: a day. */
export const MAX_DEBOUNCE_SECONDS = 86_400

/** `where`: per field, per operator (the records list's: eq ne lt lte gt gte in contains), the value. */
export type EventWhere = Record<string, Record<string, string | number | boolean | (string | number)[]>>

/** A workflow's events as the API takes and shows them. */
export interface EventsSettings {
  on: EventSpec[]
  where?: EventWhere
  runAs: string
  debounceSeconds?: number
}

/**
 * `where` as the records list's filters, read against the collection's fields by the list's own parser (the same
 * operators, value checks and semantics; src/modules/records/query.ts): a problem is 400 naming `where.<field>.<op>`.
 */
export function whereFilters(where: EventWhere | undefined, fields: Parameters<typeof recordListPlan>[1]): RecordFieldFilter[] {
  if (where === undefined) return []
  const query: Record<string, string> = {}
  for (const [field, ops] of Object.entries(where)) {
    if (ops === null || typeof ops !== 'object' || Array.isArray(ops) || Object.keys(ops).length === 0) {
      throw invalidField(`where.${field}`, 'must be an object of operators, e.g. { "eq": "pending" }')
    }
    for (const [op, value] of Object.entries(ops)) {
      const text = Array.isArray(value) ? value.map(String).join(',') : String(value)
      if (text === '') throw invalidField(`where.${field}.${op}`, 'must not be empty')
      query[`${field}.${op}`] = text
    }
  }
  try {
    return recordListPlan(query, fields).query(undefined).filters
  } catch (error) {
    const detail = error instanceof HttpError ? (error.extra.details as { field: string; message: string }[] | undefined)?.[0] : undefined
    if (detail) throw invalidField(`where.${detail.field}`, detail.message)
    throw error
  }
}

/** The runAs user, active, who can reach the workflow's team; else why not (null: fine). */
function* runAsProblem(userId: number, target: TriggerTarget): Op<string | null> {
  const user = yield* findUser(userId)
  if (!user || user.disabledAt !== null) return 'is deactivated'
  if (!(yield* canReachRendering({ userId, projectId: target.projectId, teamId: target.teamId }))) return "cannot reach the workflow's team"
  return null
}

/** A workflow's events as the API shows them; 404 when it has none. */
export function* readEvents(target: TriggerTarget): Op<EventsSettings> {
  const row = yield* findEventTrigger(target.workflowId)
  if (!row) throw notFound(`Workflow ${target.workflowName} has no events`, 'not_found')
  return yield* settingsOf(row)
}

/** A workflow's events and their counters, or nulls when it has none (the console's trigger settings). */
export function* workflowEventsView(
  target: TriggerTarget,
): Op<{ settings: EventsSettings | null; counts: Pick<EventTriggerRow, 'received' | 'started' | 'skipped'> | null; fieldNames: string[] }> {
  const row = yield* findEventTrigger(target.workflowId)
  const fieldNames = (yield* collectionFields(target.collectionId, 'read')).map((field) => field.name)
  return row ? { settings: yield* settingsOf(row), counts: row, fieldNames } : { settings: null, counts: null, fieldNames }
}

function* settingsOf(row: EventTriggerRow): Op<EventsSettings> {
  const user = yield* findUser(row.runAsUserId)
  return {
    on: JSON.parse(row.events) as EventSpec[],
    ...(row.filter === null ? {} : { where: JSON.parse(row.filter) as EventWhere }),
    runAs: user?.email ?? '',
    ...(row.debounceSeconds === null ? {} : { debounceSeconds: row.debounceSeconds }),
  }
}

/** A one-line description for the admin log. */
const describe = (name: string, s: EventsSettings | null) =>
  s === null
    ? `${name}: no events`
    : `${name}: on ${s.on.map((o) => (o.fields?.length ? `${o.event} (${o.fields.join(', ')})` : o.event)).join(', ')}` +
      `${s.where ? ` where ${canonicalJson(s.where)}` : ''} as ${s.runAs}${s.debounceSeconds ? `, debounce ${s.debounceSeconds} s` : ''}`

/**
 * Sets a workflow's events (project admins; an admin log entry `workflow-events`): each event named once, `fields`
 * only for `recordUpdated` and of the collection's schema when it has one, `where` read as the records list reads its
 * filters, `runAs` an active user who reaches the workflow's team. 400 naming the field otherwise.
 */
export function* setEvents(clock: Clock, target: TriggerTarget, input: EventsSettings, actorId: number | null): Op<EventsSettings & { changed: boolean }> {
  const seen = new Set<string>()
  for (const [i, spec] of input.on.entries()) {
    if (seen.has(spec.event)) throw invalidField(`on[${i}].event`, `${spec.event} is named twice`)
    seen.add(spec.event)
    if (spec.fields !== undefined && spec.event !== 'recordUpdated') throw invalidField(`on[${i}].fields`, 'only recordUpdated takes fields')
  }
  const fields = yield* collectionFields(target.collectionId, 'read')
  if (fields.length > 0) {
    for (const [i, spec] of input.on.entries()) {
      const unknown = spec.fields?.find((name) => !fields.some((f) => f.name === name))
      if (unknown !== undefined) throw invalidField(`on[${i}].fields`, `the collection's schema has no field ${unknown}`)
    }
  }
  whereFilters(input.where, fields)
  const user = yield* findUserByEmail(input.runAs)
  if (!user) throw invalidField('runAs', `no user ${input.runAs}`)
  const problem = yield* runAsProblem(user.id, target)
  if (problem) throw invalidField('runAs', `${input.runAs} ${problem}`)
  const before = yield* findEventTrigger(target.workflowId)
  const on = input.on.map((spec) => (spec.fields?.length ? { event: spec.event, fields: [...new Set(spec.fields)] } : { event: spec.event }))
  const shownBefore = before ? yield* settingsOf(before) : null
  const wanted: EventsSettings = {
    on,
    ...(input.where === undefined || Object.keys(input.where).length === 0 ? {} : { where: input.where }),
    runAs: user.email,
    ...(input.debounceSeconds === undefined ? {} : { debounceSeconds: input.debounceSeconds }),
  }
  // The same settings again (a re-applied file): nothing written, nothing logged.
  if (shownBefore && canonicalJson(shownBefore) === canonicalJson(wanted)) return { ...shownBefore, changed: false }
  yield* saveEventTrigger({
    workflowId: target.workflowId,
    environmentId: target.environmentId,
    collectionId: target.collectionId,
    events: JSON.stringify(on),
    filter: input.where === undefined || Object.keys(input.where).length === 0 ? null : canonicalJson(input.where),
    runAsUserId: user.id,
    debounceSeconds: input.debounceSeconds ?? null,
    updatedAt: clock.now(),
  })
  const after = yield* settingsOf((yield* findEventTrigger(target.workflowId))!)
  yield* appendAdminLog(clock, {
    projectId: target.projectId,
    type: before ? 'update' : 'add',
    resource: 'workflow-events',
    actorId,
    previousValue: shownBefore ? { name: describe(target.workflowName, shownBefore) } : null,
    newValue: { name: describe(target.workflowName, after) },
  })
  return { ...after, changed: true }
}

/** Removes a workflow's events and those still to be dispatched; 404 when it has none. */
export function* removeEvents(clock: Clock, target: TriggerTarget, actorId: number | null): Op<void> {
  const before = yield* findEventTrigger(target.workflowId)
  if (!before) throw notFound(`Workflow ${target.workflowName} has no events`, 'not_found')
  yield* deleteEventTrigger(target.workflowId)
  yield* appendAdminLog(clock, {
    projectId: target.projectId,
    type: 'remove',
    resource: 'workflow-events',
    actorId,
    previousValue: { name: describe(target.workflowName, yield* settingsOf(before)) },
    newValue: null,
  })
}

/** The record matches `where` now (the records list's query, on this one record); a deleted record matches no `where`. */
function* recordMatches(target: TriggerTarget, recordKey: string, where: EventWhere): Op<boolean> {
  const fields = yield* collectionFields(target.collectionId, 'read')
  let filters: RecordFieldFilter[]
  try {
    filters = whereFilters(where, fields)
  } catch {
    // The schema changed since the events were saved: the filter no longer reads, and nothing matches it.
    return false
  }
  const scope = { environmentId: target.environmentId, collectionId: target.collectionId }
  const rows = yield* pageRecordList(scope, { filters, sort: null, direction: 'asc', literalCollection: false, recordKey }, 1)
  return rows.length > 0
}

/** What one event came to, for the dispatcher's log and wake-up. */
export type Dispatched = 'lost' | 'started' | 'skipped' | 'filtered' | 'merged'

/**
 * Acts on one event `owner` holds, in one transaction: removes it (nothing when the lease was lost), then — unless a
 * later event of the same workflow and record waits (a debounce), the workflow is gone or unpublished, its `runAs`
 * lost its rights, or the record does not match `where` — queues the run (trigger `event`, its cause), or skips it when
 * the record has an active run of the workflow (counted, never an error).
 */
export function* dispatchWorkflowEvent(clock: Clock, event: WorkflowEventRow, owner: string): Op<Dispatched> {
  if (!(yield* takeWorkflowEvent(event.id, owner))) return 'lost'
  const trigger = yield* findEventTrigger(event.workflowId)
  if (!trigger) return 'filtered'
  const outcome = yield* actOnWorkflowEvent(clock, event, trigger)
  // Last in the transaction: the counters row is the subscription's one row every dispatch updates (and locks).
  yield* countWorkflowEvents(event.workflowId, { received: 1, started: outcome === 'started' ? 1 : 0, skipped: outcome === 'skipped' ? 1 : 0 })
  return outcome
}

/** What a received event of a live subscription comes to (see `dispatchWorkflowEvent`), its run queued if it starts one. */
function* actOnWorkflowEvent(clock: Clock, event: WorkflowEventRow, trigger: EventTriggerRow): Op<Exclude<Dispatched, 'lost'>> {
  if (trigger.debounceSeconds !== null && (yield* laterWorkflowEventWaits(event))) return 'merged'
  const target = yield* findTriggerTarget(event.workflowId)
  if (!target || target.activeVersionId === null) return 'skipped'
  if ((yield* runAsProblem(trigger.runAsUserId, target)) !== null) return 'skipped'
  if (trigger.filter !== null && (event.event === 'recordDeleted' || !(yield* recordMatches(target, event.recordKey, JSON.parse(trigger.filter) as EventWhere)))) {
    return 'filtered'
  }
  const cause: RunCause = {
    event: event.event as RunCause['event'],
    recordId: event.recordKey,
    ...(event.changedFields === null ? {} : { changedFields: JSON.parse(event.changedFields) as string[] }),
    ...(event.noteId === null ? {} : { noteId: event.noteId }),
    chain: JSON.parse(event.chain) as RunCause['chain'],
  }
  const queued = yield* queueRunIfIdle(clock, randomUUIDv7(), {
    target,
    versionId: target.activeVersionId,
    recordId: event.recordKey,
    userId: trigger.runAsUserId,
    tokenId: null,
    trigger: 'event',
    cause,
  })
  return queued.inserted ? 'started' : 'skipped'
}

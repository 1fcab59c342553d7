/**
 * Workflow schedules (docs/workflows.md "Schedules"): checking and saving one, its next fire times, and its ticks.
 *
 * A tick fires once: an instance claims it by moving the schedule's next fire time on and inserting the tick row,
 * unique per (workflow, fire time), in one transaction (src/db/schedules.ts). Its runs are then started in batches
 * under the tick's lease, each batch committing the runs, their activity entries and the tick's cursor together, so
 * a tick resumed after a crash never considers a record twice. A record with an active run of the workflow is
 * skipped and counted, never refused. The records are the records list's own query (../records/query.ts), its
 * relative times read at the tick's fire time, so a resumed tick sees the same set.
 */
import { randomUUIDv7 } from 'bun'
import { Cron } from 'croner'
import { answer, type Op } from '../../db/op.ts'
import type { RecordCursor } from '../../db/records.ts'
import {
  deleteSchedule,
  findSchedule,
  insertTick,
  lastTickOf,
  leaseTick,
  moveNextFireAt,
  recordTickProgress,
  saveSchedule,
  type ScheduleRow,
  type TickProgress,
} from '../../db/schedules.ts'
import { findTriggerTarget, type TriggerTarget } from '../../db/workflows.ts'
import { findUserById, findUserByStoredEmail } from '../../db/users.ts'
import { pageRecordList } from '../../db/records.ts'
import type { Query } from '../records/query.ts'
import type { Clock } from '../../lib/clock.ts'
import { HttpError, invalidField, notFound } from '../../lib/errors.ts'
import { toIso } from '../../lib/time.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { canReachRendering } from '../directory/projects.ts'
import { normalizeEmail } from '../directory/users.ts'
import { recordListPlan } from '../records/query.ts'
import { collectionFields } from '../records/service.ts'
import { queueRunIfIdle } from '../runs/service.ts'
import { DEFAULT_TICK_RECORDS } from './model.ts'

export type ScheduleWhere = Record<string, Record<string, string | number | boolean | (string | number | boolean)[]>>

/** A schedule as a PUT sends it (the model's ScheduleBody). */
export interface ScheduleInput {
  cron: string
  timezone?: string
  records?: { where?: ScheduleWhere; limit?: number }
  runAs: string
  catchUp?: 'once' | 'skip'
  enabled?: boolean
}

/** How many fire times answers show. */
const SHOWN_FIRE_TIMES = 5

/**
 * How late a fire time may be found and still count as on time. A later one was missed (the instances were down):
 * `catchUp: once` fires one tick for it, `skip` none.
 */
export const ON_TIME_MS = 30_000

/** The cron in its time zone (400 naming `cron` or `timezone`). */
export function cronOf(pattern: string, timezone: string): Cron {
  if (!isTimeZone(timezone)) throw invalidField('timezone', `unknown time zone ${timezone} (an IANA name such as Europe/Paris, or UTC)`)
  let cron: Cron
  try {
    cron = new Cron(pattern, { timezone, paused: true })
  } catch (error) {
    throw invalidField('cron', plainCronError((error as Error).message))
  }
  if (cron.nextRun() === null) throw invalidField('cron', 'never fires')
  return cron
}

/** croner's message without its class prefix: "Invalid value for minute: 61". */
function plainCronError(message: string): string {
  return message.replace(/^Cron\w*:\s*/, '').replace(/^[a-z]/, (c) => c.toUpperCase())
}

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name })
    return true
  } catch {
    return false
  }
}

/** A time as the schedule's zone shows it: `2026-12-03T09:00:00+01:00`. */
export function zonedIso(ms: number, timezone: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', { timeZone: timezone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' })
      .formatToParts(new Date(ms))
      .map((p) => [p.type, p.value]),
  )
  const wall = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute), Number(parts.second))
  const offset = Math.round((wall - Math.floor(ms / 1000) * 1000) / 60_000)
  const sign = offset < 0 ? '-' : '+'
  const abs = Math.abs(offset)
  const hhmm = `${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${sign}${hhmm}`
}

/** The next fire times after `after`: in the zone and in UTC. */
export function nextFireTimes(cron: Cron, timezone: string, after: number, count = SHOWN_FIRE_TIMES): { at: string; utc: string }[] {
  return cron.nextRuns(count, new Date(after)).map((d) => ({ at: zonedIso(d.getTime(), timezone), utc: toIso(d.getTime()) }))
}

/** The first fire time strictly after `after` (null: it never fires again). */
export function fireTimeAfter(cron: Cron, after: number): number | null {
  return cron.nextRun(new Date(after))?.getTime() ?? null
}

const RELATIVE_TIME = /^\{\{\s*now\s*(?:([+-])\s*(\d{1,6})\s*([smhdw]))?\s*\}\}$/
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }

/** A filter value with its relative time (`{{now-3d}}`) read at `now`, as a UTC date-time; other values as text. */
function filterText(value: string | number | boolean, now: number, field: string): string {
  if (typeof value !== 'string' || !value.includes('{{')) return String(value)
  const relative = RELATIVE_TIME.exec(value)
  if (!relative) throw invalidField(field, 'a relative time is written {{now}}, {{now-3d}} or {{now+2h}} (units s, m, h, d, w)')
  const [, sign, amount, unit] = relative
  const offset = sign === undefined ? 0 : (sign === '-' ? -1 : 1) * Number(amount) * UNIT_MS[unit!]!
  return toIso(now + offset)
}

/**
 * The schedule's `where` as the records list's query parameters (`status.eq=pending`), relative times read at `now`:
 * the list's own parsing then judges each against the collection's schema. A value with a comma cannot be one of
 * `in`'s values (the list splits them there).
 */
export function whereQuery(where: ScheduleWhere, now: number): Query {
  const query: Query = {}
  for (const [field, tests] of Object.entries(where)) {
    if (tests === null || typeof tests !== 'object' || Array.isArray(tests)) throw invalidField(`records.where.${field}`, 'must be an object of operator → value')
    for (const [op, value] of Object.entries(tests)) {
      const name = `records.where.${field}.${op}`
      if (Array.isArray(value) !== (op === 'in')) throw invalidField(name, op === 'in' ? 'in takes an array of values' : 'must be a single value (only in takes an array)')
      const values = (Array.isArray(value) ? value : [value]).map((v) => filterText(v, now, name))
      if (op === 'in' && values.some((v) => v.includes(','))) throw invalidField(name, 'an in value cannot hold a comma')
      if (op === 'in' && values.length === 0) throw invalidField(name, 'in takes at least one value')
      query[`${field}.${op}`] = values.join(',')
    }
  }
  return query
}

/** The records list's plan for the schedule's `where` at `now`, its problems named under `records.where`. */
function* recordsPlan(collectionId: number, where: ScheduleWhere, now: number) {
  const fields = yield* collectionFields(collectionId, 'read')
  try {
    return recordListPlan({ ...whereQuery(where, now), sort: 'createdAt' }, fields)
  } catch (error) {
    const detail = error instanceof HttpError ? (error.extra.details as { field: string; message: string }[] | undefined)?.[0] : undefined
    if (detail === undefined || detail.field.startsWith('records.')) throw error
    throw invalidField(`records.where.${detail.field}`, detail.message)
  }
}

/** Whether `userId` may run the workflow now: an active user who reaches its team (a member, or a project admin). */
function* mayRun(userId: number, target: TriggerTarget): Op<boolean> {
  const user = yield* findUserById(userId)
  if (!user || user.disabledAt !== null) return false
  return yield* canReachRendering({ userId, projectId: target.projectId, teamId: target.teamId })
}

/** A workflow's schedule as answers show it: the definition, the next five fire times, the last tick. */
export function* scheduleView(schedule: ScheduleRow, now: number) {
  const runAs = yield* findUserById(schedule.runAsUserId)
  const last = yield* lastTickOf(schedule.workflowId)
  const cron = new Cron(schedule.cron, { timezone: schedule.timezone, paused: true })
  return {
    cron: schedule.cron,
    timezone: schedule.timezone,
    records: { where: JSON.parse(schedule.recordsWhere) as ScheduleWhere, limit: schedule.recordsLimit },
    runAs: runAs?.email ?? '',
    catchUp: schedule.catchUp,
    enabled: schedule.enabled,
    nextAt: schedule.enabled ? nextFireTimes(cron, schedule.timezone, now) : [],
    lastTick: last
      ? {
          at: toIso(last.fireAt),
          started: last.started,
          skipped: last.skipped,
          failed: last.failed,
          finished: last.finishedAt !== null,
          warning: last.warning as 'run_as_forbidden' | 'over_limit' | 'invalid_where' | null,
        }
      : null,
  }
}

/** The workflow's schedule, or 404 `schedule_not_found`. */
export function* requireSchedule(target: TriggerTarget): Op<ScheduleRow> {
  const schedule = yield* findSchedule(target.workflowId)
  if (!schedule) throw notFound(`Workflow ${target.workflowName} has no schedule`, 'schedule_not_found')
  return schedule
}

/** `{name}` of the admin log entries: the schedule in one line. */
const describeSchedule = (target: TriggerTarget, s: Pick<ScheduleRow, 'cron' | 'timezone' | 'enabled'>) =>
  `${target.workflowName}: schedule ${s.cron} (${s.timezone})${s.enabled ? '' : ', disabled'}`

/**
 * Checks and saves a workflow's schedule (400 naming the field: the cron, the time zone, the filter against the
 * collection's schema, the runAs user, who must be able to run the workflow), with its admin log entry. Its next fire
 * time counts from `now`: fire times before the save are not missed ones. Call in a write transaction.
 */
export function* putSchedule(clock: Clock, target: TriggerTarget, input: ScheduleInput, actorId: number | null): Op<{ schedule: ScheduleRow; outcome: 'created' | 'updated' | 'unchanged' }> {
  const now = clock.now()
  const timezone = input.timezone ?? 'UTC'
  const cron = cronOf(input.cron, timezone)
  const where = input.records?.where ?? {}
  yield* recordsPlan(target.collectionId, where, now)
  const runAs = yield* findUserByStoredEmail(normalizeEmail(input.runAs))
  if (!runAs) throw invalidField('runAs', `no user has the email ${input.runAs}`)
  if (!(yield* mayRun(runAs.id, target))) throw invalidField('runAs', `${input.runAs} cannot run this workflow (an active member of its team, or a project admin)`)
  const enabled = input.enabled ?? true
  const before = yield* findSchedule(target.workflowId)
  const wanted = {
    cron: input.cron,
    timezone,
    recordsWhere: JSON.stringify(where),
    recordsLimit: input.records?.limit ?? DEFAULT_TICK_RECORDS,
    runAsUserId: runAs.id,
    catchUp: input.catchUp ?? 'once',
    enabled,
  }
  // The same schedule again (an apply run twice): nothing written, its next fire time kept.
  if (before && (Object.keys(wanted) as (keyof typeof wanted)[]).every((key) => before[key] === wanted[key])) return { schedule: before, outcome: 'unchanged' }
  const schedule = { ...wanted, workflowId: target.workflowId, nextFireAt: enabled ? fireTimeAfter(cron, now) : null, updatedAt: now }
  yield* saveSchedule(schedule, now)
  yield* appendAdminLog(clock, {
    projectId: target.projectId,
    type: before ? 'update' : 'add',
    resource: 'workflow-schedule',
    actorId,
    previousValue: before ? { name: describeSchedule(target, before) } : undefined,
    newValue: { name: describeSchedule(target, schedule) },
  })
  return { schedule: (yield* findSchedule(target.workflowId))!, outcome: before ? 'updated' : 'created' }
}

/** Removes the workflow's schedule (404 when it has none), with its admin log entry. Ticks under way finish. */
export function* removeSchedule(clock: Clock, target: TriggerTarget, actorId: number | null): Op<void> {
  const schedule = yield* requireSchedule(target)
  yield* deleteSchedule(target.workflowId)
  yield* appendAdminLog(clock, {
    projectId: target.projectId,
    type: 'remove',
    resource: 'workflow-schedule',
    actorId,
    previousValue: { name: describeSchedule(target, schedule) },
  })
}

// ── Ticks ────────────────────────────────────────────────────────────────────

/**
 * Claims the tick of a due schedule for `owner`: the fire time is the latest one come (one tick for all those
 * missed); when it is later than ON_TIME_MS and the schedule says `catchUp: skip`, no tick — the schedule just moves
 * on. Either way the next fire time moves past now, in the statement that makes this instance the one that claims it.
 * Answers the tick's id (null: another instance claimed it, or it was skipped).
 */
export function* claimTick(clock: Clock, due: ScheduleRow, owner: string, leaseMs: number): Op<number | null> {
  const now = clock.now()
  const expected = due.nextFireAt!
  let cron: Cron
  try {
    cron = new Cron(due.cron, { timezone: due.timezone, paused: true })
  } catch {
    yield* moveNextFireAt(due.workflowId, expected, null) // a pattern croner no longer reads: the schedule stops
    return null
  }
  const latest = Math.max(expected, cron.previousRuns(1, new Date(now + 1))[0]?.getTime() ?? expected)
  if (!(yield* moveNextFireAt(due.workflowId, expected, fireTimeAfter(cron, Math.max(now, latest))))) return null
  if (due.catchUp === 'skip' && now - latest > ON_TIME_MS) return null
  return (yield* insertTick({ workflowId: due.workflowId, fireAt: latest, owner, leaseExpiresAt: now + leaseMs, now }))?.id ?? null
}

/** What one batch of a tick did (null: the tick is finished, or another instance holds it). */
export interface TickBatch {
  workflowId: number
  started: number
  skipped: number
  failed: number
  done: boolean
  /** The warning the tick finished with, if any. */
  warning: string | null
}

/**
 * One batch of a tick, in the caller's write transaction: leases the tick (the row as last committed: its cursor),
 * then considers up to `batchSize` of the schedule's matching records after the cursor — one run each, `trigger:
 * schedule`, as the runAs user; a record with an active run is skipped — and commits the new cursor and counts with
 * the runs. The runAs user's rights are checked at each batch: lost, the tick ends starting nothing more, with a
 * warning and an admin log entry; so does a tick that finds more records than its limit.
 */
export function* workTickBatch(clock: Clock, tickId: number, owner: string, leaseMs: number, batchSize: number): Op<TickBatch | null> {
  const now = clock.now()
  const tick = yield* leaseTick(tickId, owner, now, leaseMs)
  if (!tick) return null
  const schedule = yield* findSchedule(tick.workflowId)
  const target = yield* findTriggerTarget(tick.workflowId)
  const finish = function* (progress: Omit<TickProgress, 'finishedAt'>, note?: string): Op<TickBatch> {
    yield* recordTickProgress(tickId, owner, { ...progress, finishedAt: now })
    if (note !== undefined && target) {
      yield* appendAdminLog(clock, {
        projectId: target.projectId,
        type: 'update',
        resource: 'workflow-schedule',
        actorId: null,
        initiator: 'system',
        newValue: { name: `${target.workflowName}: tick of ${toIso(tick.fireAt)} ${note}` },
      })
    }
    return { workflowId: tick.workflowId, started: progress.started, skipped: progress.skipped, failed: progress.failed, done: true, warning: progress.warning ?? null }
  }
  // Removed or withdrawn since the tick was claimed: it ends having started what it had.
  if (!schedule || !target || target.activeVersionId === null) return yield* finish({ cursor: tick.cursor, started: 0, skipped: 0, failed: 0 })
  let plan
  try {
    plan = yield* recordsPlan(target.collectionId, JSON.parse(schedule.recordsWhere) as ScheduleWhere, tick.fireAt)
  } catch (error) {
    if (!(error instanceof HttpError)) throw error
    return yield* finish({ cursor: tick.cursor, started: 0, skipped: 0, failed: 0, warning: 'invalid_where' }, `started nothing: its filter no longer fits the collection (${error.message})`)
  }
  const considered = tick.started + tick.skipped + tick.failed
  const after = tick.cursor === null ? undefined : (JSON.parse(tick.cursor) as RecordCursor)
  const matching = (limit: number) => (limit <= 0 ? answer([]) : pageRecordList({ environmentId: target.environmentId, collectionId: target.collectionId }, plan.query(after), limit))
  if (!(yield* mayRun(schedule.runAsUserId, target))) {
    const runAs = yield* findUserById(schedule.runAsUserId)
    const failed = Math.min((yield* matching(schedule.recordsLimit - considered)).length, schedule.recordsLimit - considered)
    return yield* finish({ cursor: tick.cursor, started: 0, skipped: 0, failed, warning: 'run_as_forbidden' }, `started nothing: ${runAs?.email ?? 'its runAs user'} can no longer run the workflow`)
  }
  const take = Math.min(batchSize, schedule.recordsLimit - considered)
  const found = yield* matching(take)
  const batch = found.slice(0, take)
  let started = 0
  let skipped = 0
  for (const record of batch) {
    const result = yield* queueRunIfIdle(clock, randomUUIDv7(), {
      target,
      versionId: target.activeVersionId,
      recordId: record.recordKey,
      userId: schedule.runAsUserId,
      tokenId: null,
      trigger: 'schedule',
      scheduledFor: tick.fireAt,
    })
    if (result.inserted) started++
    else skipped++
  }
  const last = batch.at(-1)
  const cursor = last === undefined ? tick.cursor : JSON.stringify({ key: last.key, id: last.id } satisfies RecordCursor)
  const progress = { cursor, started, skipped, failed: 0 }
  if (found.length > take && considered + batch.length >= schedule.recordsLimit) {
    return yield* finish({ ...progress, warning: 'over_limit' }, `matched more records than its limit of ${schedule.recordsLimit}: the rest wait for the next tick`)
  }
  if (found.length <= take) return yield* finish(progress)
  yield* recordTickProgress(tickId, owner, progress)
  return { workflowId: tick.workflowId, started, skipped, failed: 0, done: false, warning: null }
}

/** Workflow runs: starting one (webhook or manual), reading, cancelling and listing them (DESIGN §8). */
import { cancelActiveRun, carryRunSteps, type InsertResult, insertRun, type RunTrigger } from '../../db/queue.ts'
import { appendRunEvents } from '../../db/run-events.ts'
import { findRunWithWorkflow, loadRunsToRender, pageRunIds, type RunFilters, type RunRecord, type RunStepRecord } from '../../db/runs.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import { redactUrlsIn } from '../../lib/outbound/redact.ts'
import { someHoldUnstorableText } from '../../lib/storable-text.ts'
import { findWorkflowIdsNamed, type TriggerTarget } from '../../db/workflows.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { conflict, notFound } from '../../lib/errors.ts'
import { isAdminOf } from '../directory/projects.ts'
import { requireProjectAccess } from '../auth/service.ts'
import { inIdOrder } from '../../lib/id-order.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIso, toIsoMicros, toIsoOrNull } from '../../lib/time.ts'
import { appendActivityLog, type Channel } from '../activity-logs/service.ts'
import { userObject } from '../directory/users.ts'
import { cancelTasksOfRun } from '../tasks/service.ts'
import type { MailSettings } from '../mail/service.ts'
import type { Op } from '../../db/op.ts'
import type { RunCause } from '../../db/workflow-events.ts'

export type { TriggerTarget }
export type { RunFilters } from '../../db/runs.ts'
/** One run with its workflow's name and collection, and its team and project. */
export const findRun = findRunWithWorkflow

/**
 * A run the caller may see: past the project's access decision (`requireProjectAccess`: its members, the SSO rule),
 * theirs, or any run of a project they administer. Others are 404, never 403.
 */
export function* visibleRun(caller: AccountCaller, runId: string) {
  const hidden = () => notFound(`Run ${runId} not found`)
  const found = yield* findRun(runId)
  if (!found) throw hidden()
  yield* requireProjectAccess(caller, found.project, hidden)
  if (found.run.userId !== caller.user.id && !(yield* isAdminOf(caller.user.id, found.projectId))) throw hidden()
  return found
}
/** Ids of the environment's workflows called `name` (in one team when given); a name holding U+0000 or a lone surrogate names none. */
export function* workflowIdsNamed(environmentId: number, name: string, teamName?: string): Op<number[]> {
  if (someHoldUnstorableText({ name, teamName })) return []
  return yield* findWorkflowIdsNamed(environmentId, name, teamName)
}

/** One page of an environment's run ids (limit + 1); a text filter holding U+0000 or a lone surrogate matches no run (src/lib/storable-text.ts). */
export function* listRunIds(environmentId: number, filters: RunFilters, dates: DateFilter[], limit: number): Op<string[]> {
  if (someHoldUnstorableText(filters)) return []
  return yield* pageRunIds(environmentId, filters, dates, limit)
}

/** What starts a run: the workflow, the version to run, the record, who, and how it was triggered. */
export interface RunStart {
  target: Pick<TriggerTarget, 'workflowId' | 'workflowName' | 'environmentId' | 'teamId' | 'collectionId'>
  versionId: number
  recordId: string
  userId: number
  tokenId: number | null
  via?: Channel
  trigger: RunTrigger
  /** A schedule's run: its tick's fire time (ms). */
  scheduledFor?: number
  /** Trigger `event`: the change that started it. */
  cause?: RunCause
  /** A retry (./retry.ts): the run it retries and the step it resumes at; its entry is `retryWorkflow`. */
  retry?: { of: string; resumeAt: number }
  /** The `traceparent` of the span that started it (the request's), when tracing is on: the run's trace links to it. */
  traceContext?: string | null
}

/**
 * The start's op, run in one transaction by `startRunOnce` (./idempotency.ts) and by a retry (./retry.ts): the queued
 * run and its activity entry, or the 409 — `run_in_progress` (the partial unique index decides it; the answer names the active run),
 * or for a retry `already_retried` naming the run that retries it. Answers the run's id: `id` as given, or on
 * PostgreSQL a later one when another instance queued a greater one first (src/db/queue.ts).
 */
export function* queueRun(clock: Clock, id: string, input: RunStart): Op<string> {
  const result = yield* queueRunIfIdle(clock, id, input)
  if (!result.inserted && result.retriedBy !== undefined) {
    throw conflict('already_retried', `Run ${input.retry!.of} has already been retried`, { runId: result.retriedBy })
  }
  if (!result.inserted) {
    throw conflict('run_in_progress', 'A run of this workflow is already ongoing on this record', { runId: result.activeRunId })
  }
  return result.id
}

/**
 * `queueRun` without its 409s: the run queued with its activity entry, or what stopped it (a run active on the
 * record, a retry retried already) with nothing written. A schedule's tick counts a record with an active run as
 * skipped this way.
 */
export function* queueRunIfIdle(clock: Clock, id: string, input: RunStart): Op<InsertResult> {
  const result = yield* insertRun({
    id,
    workflowId: input.target.workflowId,
    workflowVersionId: input.versionId,
    environmentId: input.target.environmentId,
    recordId: input.recordId,
    userId: input.userId,
    tokenId: input.tokenId,
    trigger: input.trigger,
    scheduledFor: input.scheduledFor ?? null,
    cause: input.cause ?? null,
    createdAt: () => clock.now(), // read by the insert, as late as it can (SQLite's: inside its write lock)
    nextStep: input.retry?.resumeAt,
    retryOf: input.retry?.of,
    traceContext: input.traceContext ?? null,
  })
  if (!result.inserted) return result
  if (input.retry) yield* carryRunSteps(input.retry.of, result.id, input.retry.resumeAt)
  yield* appendActivityLog(clock, {
    environmentId: input.target.environmentId,
    type: 'write',
    ...startEntryOf(input),
    userId: input.userId,
    teamId: input.target.teamId,
    collectionId: input.target.collectionId,
    tokenId: input.tokenId,
    via: input.via,
    recordIds: [input.recordId],
    workflow: { name: input.target.workflowName, runId: result.id },
  })
  return result
}

/** The activity label of a start (a retry's aside): an event's names the event. */
const START_LABELS: Record<Exclude<RunStart['trigger'], 'event'>, string> = {
  manual: 'triggered manually',
  webhook: 'triggered via webhook',
  schedule: 'triggered by its schedule',
}

/** The start's activity entry: `triggerWorkflow`, or for a retry the extension `retryWorkflow` naming the run it retries. */
function startEntryOf(input: RunStart): { action: 'triggerWorkflow' | 'retryWorkflow'; label: string } {
  if (input.retry) return { action: 'retryWorkflow', label: `retry of run ${input.retry.of}` }
  return { action: 'triggerWorkflow', label: input.trigger === 'event' ? `triggered by ${input.cause?.event ?? 'an event'}` : START_LABELS[input.trigger] }
}

/**
 * A `wait` step is recorded when the run parks, but it is not over until its time has passed: while the run is
 * parked on it and `until` lies ahead it reads `waiting` (no `finishedAt`), a run cancelled during the wait shows
 * the wait `cancelled` at the run's end, and once its time has passed it finished at `until` (its row holds when it
 * began waiting). Any other step reads as recorded.
 */
function stepState(run: RunRecord, step: RunStepRecord, now: number) {
  const recorded = { status: step.status as 'succeeded' | 'failed' | 'waiting' | 'cancelled', finishedAt: toIsoOrNull(step.finishedAt) }
  if (step.type !== 'wait' || step.status !== 'succeeded' || !step.output) return recorded
  const until = Date.parse((JSON.parse(step.output) as { until?: string }).until ?? '')
  if (!Number.isFinite(until)) return recorded
  const parkedOnIt = step.stepIndex === run.nextStep - 1
  if (parkedOnIt && run.status === 'waiting' && now < until) return { status: 'waiting' as const, finishedAt: null }
  if (parkedOnIt && run.status === 'cancelled' && run.finishedAt !== null && run.finishedAt < until) {
    return { status: 'cancelled' as const, finishedAt: toIso(run.finishedAt) }
  }
  return { ...recorded, finishedAt: toIso(until) }
}

/**
 * A run's or a step's stored error as answers show it: any URL in its message without user, password or query
 * (errors are redacted when recorded; this covers those recorded before, for every reader of the run).
 */
function shownError<E extends { message?: unknown }>(stored: string): E {
  const error = JSON.parse(stored) as E
  return typeof error.message === 'string' ? { ...error, message: redactUrlsIn(error.message) } : error
}

/** `{object: "workflow-run", …}` for the given ids, in that order, with their steps as of `now`. */
export function* renderRuns(ids: string[], now: number) {
  if (ids.length === 0) return []
  const { rows, steps } = yield* loadRunsToRender(ids)
  return inIdOrder(ids, rows, (r) => r.run.id).map((r) => {
    const id = r.run.id
    return {
      object: 'workflow-run' as const,
      id: r.run.id,
      status: r.run.status,
      trigger: r.run.trigger,
      workflow: { id: r.run.workflowId, name: r.workflowName, version: r.version },
      recordId: r.run.recordId,
      environment: { object: 'environment' as const, name: r.environment },
      team: { object: 'team' as const, name: r.team },
      user: userObject(r.user),
      token: r.token?.id == null ? null : { object: 'api-token' as const, id: r.token.id, name: r.token.name!, prefix: r.token.prefix! },
      createdAt: toIsoMicros(r.run.createdAt),
      startedAt: toIsoOrNull(r.run.startedAt),
      finishedAt: toIsoOrNull(r.run.finishedAt),
      retryOf: r.run.retryOf,
      retriedBy: r.retriedBy,
      scheduledFor: toIsoOrNull(r.run.scheduledFor),
      cause: r.run.cause === null ? null : (JSON.parse(r.run.cause) as RunCause),
      ...(r.run.error ? { error: shownError<{ code: string; message: string; step?: string }>(r.run.error) } : {}),
      steps: steps
        .filter((s) => s.runId === id)
        .map((s) => ({
          index: s.stepIndex,
          name: s.name,
          type: s.type,
          ...stepState(r.run, s, now),
          ...(r.carriedBefore !== null && s.stepIndex < r.carriedBefore ? { carriedFrom: r.run.retryOf! } : {}),
          startedAt: toIso(s.startedAt),
          ...(s.output ? { output: JSON.parse(s.output) as unknown } : {}),
          ...(s.error ? { error: shownError<{ message?: unknown }>(s.error) as unknown } : {}),
        })),
    }
  })
}


/** Who acts on a run: the user, through its token when the call was made with one, and how the call came in. */
export interface RunActor {
  userId: number
  tokenId: number | null
  via?: Channel
}

/**
 * Cancels an active run with an `abortWorkflow` entry, and the task it waits on (its outcome mailed through `mail` to
 * the run's user); 409 when it already finished.
 */
export function* cancelRun(clock: Clock, mail: MailSettings | null, runId: string, actor: RunActor): Op<void> {
  const found = yield* findRunWithWorkflow(runId)
  if (!found) throw new Error(`run ${runId} vanished`)
  const taskEvents = yield* cancelTasksOfRun(clock, mail, found.run, found, actor)
  if (!(yield* cancelActiveRun(runId, clock.now()))) throw conflict('run_finished', `Run ${runId} already finished (${found.run.status})`)
  yield* appendActivityLog(clock, {
    environmentId: found.run.environmentId,
    type: 'write',
    action: 'abortWorkflow',
    label: 'workflow run cancelled',
    userId: actor.userId,
    tokenId: actor.tokenId,
    via: actor.via,
    teamId: found.teamId,
    collectionId: found.collectionId,
    recordIds: [found.run.recordId],
    workflow: { name: found.workflowName, runId },
  })
  const { environmentId, workflowId, recordId } = found.run
  yield* appendRunEvents([...taskEvents, { runId, environmentId, workflowId, recordId, type: 'run.cancelled', status: 'cancelled', at: clock.now() }])
}

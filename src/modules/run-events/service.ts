/**
 * Which run events a caller may stream (docs/workflows.md "Run events (SSE)"), decided as the run API decides: a run's events
 * for whoever may read the run (`GET /v1/workflow-runs/{runId}`: the user it acts as, or a project admin); an
 * environment's for any member of its project — a project admin's stream carries every run of the environment,
 * anyone else's the runs acting as them and the task events of the tasks they see as assignees (directly or through
 * a team: `GET /v1/tasks/{id}`'s rule). And an event as a stream's `data:` shows it.
 */
import type { Op } from '../../db/op.ts'
import type { EnvironmentEventFilter, StoredRunEvent } from '../../db/run-events.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { redactUrlsIn } from '../../lib/outbound/redact.ts'
import { FINISHED_RUN_STATUSES } from '../../lib/run-statuses.ts'
import { someHoldUnstorableText } from '../../lib/storable-text.ts'
import { toIsoMicros } from '../../lib/time.ts'
import { callerProject } from '../auth/service.ts'
import { isAdminOf, requireEnvironment } from '../directory/projects.ts'
import { visibleRun, workflowIdsNamed } from '../runs/service.ts'

/** A run the caller may read (404 otherwise): its project and environment, and whether it had finished. */
export function* streamableRun(caller: AccountCaller, runId: string): Op<{ projectId: number; environmentId: number; finished: boolean }> {
  const { run, projectId } = yield* visibleRun(caller, runId)
  return { projectId, environmentId: run.environmentId, finished: (FINISHED_RUN_STATUSES as readonly string[]).includes(run.status) }
}

/** What an environment stream's caller asked for (query parameters). */
export interface EnvironmentStreamQuery {
  workflowName?: string
  teamName?: string
  recordId?: string
}

/**
 * The environment a member of its project may stream (404 for a project they are not in, or an unknown environment),
 * and which of its events: those asked for, of every run for a project admin, else of the runs acting as the caller
 * and of the tasks assigned to them or one of their teams.
 * A name or record id holding U+0000 or a lone surrogate matches no run.
 */
export function* streamableEnvironment(
  caller: AccountCaller,
  projectName: string,
  environmentName: string,
  query: EnvironmentStreamQuery,
): Op<{ projectId: number; environmentId: number; filter: EnvironmentEventFilter }> {
  const project = yield* callerProject(caller, projectName)
  const { environment } = yield* requireEnvironment(projectName, environmentName)
  const seesAll = yield* isAdminOf(caller.user.id, project.id)
  const filter: EnvironmentEventFilter = seesAll ? {} : { userId: caller.user.id }
  if (query.workflowName !== undefined) filter.workflowIds = yield* workflowIdsNamed(environment.id, query.workflowName, query.teamName)
  if (query.recordId !== undefined) {
    if (someHoldUnstorableText({ recordId: query.recordId })) filter.workflowIds = []
    else filter.recordId = query.recordId
  }
  return { projectId: project.id, environmentId: environment.id, filter }
}

/** An event as a stream's `data:` line shows it: what it is, its run, workflow, record and step, when, and what else it tells. */
export function renderRunEvent(event: StoredRunEvent) {
  const data = event.data === null ? {} : (JSON.parse(event.data) as Record<string, unknown>)
  const error = data.error as { message?: unknown } | undefined
  return {
    ...data,
    ...(error && typeof error.message === 'string' ? { error: { ...error, message: redactUrlsIn(error.message) } } : {}),
    id: event.id,
    type: event.type,
    runId: event.runId,
    sequence: event.sequence,
    status: event.status,
    workflow: { id: event.workflowId, name: event.workflowName },
    recordId: event.recordId,
    stepIndex: event.stepIndex,
    stepName: event.stepName,
    createdAt: toIsoMicros(event.createdAt),
  }
}

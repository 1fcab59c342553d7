/** Workflow runs: starting one (webhook or manual), reading, cancelling and listing them (DESIGN §8). */
import { asc, eq, inArray, lt, sql } from 'drizzle-orm'
import { randomUUIDv7 } from 'bun'
import type { Db, Store } from '../../db/open.ts'
import { write } from '../../db/write.ts'
import { inJsonArray, prepared } from '../../db/prepared.ts'
import { cancelActiveRun, type RunQueue } from '../../db/queue.ts'
import { apiTokens, environments, renderings, runSteps, runs, teams, users, webhookTriggers, workflows, workflowVersions } from '../../db/schema.ts'
import { conflict } from '../../http/errors.ts'
import { allOf, pageIds } from '../../db/pages.ts'
import { inIdOrder } from '../../http/list.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIso, toIsoOrNull } from '../../lib/time.ts'
import { appendActivityLog } from '../activity-logs/service.ts'
import { userColumns, userObject } from '../users/service.ts'

/** A workflow with what a trigger needs to check: its rendering, project, collection and webhook settings. */
export interface TriggerTarget {
  workflowId: number
  workflowName: string
  activeVersionId: number | null
  renderingId: number
  environmentId: number
  teamId: number
  projectId: number
  collectionId: number
  webhookEnabled: boolean
  webhookGeneration: number
  webhookRatePerMinute: number | null
}

export function findTriggerTarget(db: Db, workflowId: number): TriggerTarget | undefined {
  const statement = prepared(db, 'workflows.trigger-target', () =>
    db
      .select({
        workflowId: workflows.id,
        workflowName: workflows.name,
        activeVersionId: workflows.activeVersionId,
        renderingId: workflows.renderingId,
        environmentId: renderings.environmentId,
        teamId: renderings.teamId,
        projectId: teams.projectId,
        collectionId: workflows.collectionId,
        webhookEnabled: webhookTriggers.enabled,
        webhookGeneration: webhookTriggers.generation,
        webhookRatePerMinute: webhookTriggers.ratePerMinute,
      })
      .from(workflows)
      .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
      .innerJoin(teams, eq(teams.id, renderings.teamId))
      .innerJoin(webhookTriggers, eq(webhookTriggers.workflowId, workflows.id))
      .where(eq(workflows.id, sql.placeholder('id')))
      .prepare(),
  )
  return statement.all({ id: workflowId })[0]
}

/**
 * Queues a run and writes its `triggerWorkflow` entry in one transaction. The partial unique index decides
 * the 409: `{code: "run_in_progress", runId}` names the active run.
 */
export async function startRun(
  store: Store,
  clock: Clock,
  queue: RunQueue,
  input: { target: TriggerTarget; versionId: number; recordId: string; userId: number; tokenId: number | null; trigger: 'manual' | 'webhook' },
): Promise<string> {
  const id = randomUUIDv7()
  return write(store, (tx) => {
    const now = clock.now()
    const result = queue.insert({
      id,
      workflowId: input.target.workflowId,
      workflowVersionId: input.versionId,
      environmentId: input.target.environmentId,
      recordId: input.recordId,
      userId: input.userId,
      tokenId: input.tokenId,
      trigger: input.trigger,
      createdAt: now,
    })
    if (!result.inserted) {
      throw conflict('run_in_progress', 'A run of this workflow is already ongoing on this record', { runId: result.activeRunId })
    }
    appendActivityLog(tx, clock, {
      environmentId: input.target.environmentId,
      type: 'write',
      action: 'triggerWorkflow',
      label: input.trigger === 'webhook' ? 'triggered via webhook' : 'triggered manually',
      userId: input.userId,
      teamId: input.target.teamId,
      collectionId: input.target.collectionId,
      tokenId: input.tokenId,
      recordIds: [input.recordId],
      workflow: { name: input.target.workflowName, runId: id },
    })
    return id
  })
}

export function findRun(db: Db, id: string) {
  return db
    .select({ run: runs, projectId: teams.projectId, workflowName: workflows.name, teamId: teams.id, collectionId: workflows.collectionId })
    .from(runs)
    .innerJoin(workflows, eq(workflows.id, runs.workflowId))
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
    .where(eq(runs.id, id))
    .get()
}

/**
 * A `wait` step is recorded when the run parks, but it is not over until its time has passed: while the run is
 * parked on it and `until` lies ahead it reads `waiting` (no `finishedAt`), and a run cancelled during the wait shows
 * the wait `cancelled` at the run's end. Otherwise the step reads as recorded.
 */
function stepState(run: typeof runs.$inferSelect, step: typeof runSteps.$inferSelect, now: number) {
  const recorded = { status: step.status as 'succeeded' | 'failed' | 'waiting' | 'cancelled', finishedAt: toIsoOrNull(step.finishedAt) }
  if (step.type !== 'wait' || step.stepIndex !== run.nextStep - 1 || !step.output) return recorded
  const until = Date.parse((JSON.parse(step.output) as { until?: string }).until ?? '')
  if (!Number.isFinite(until)) return recorded
  if (run.status === 'waiting' && now < until) return { status: 'waiting' as const, finishedAt: null }
  if (run.status === 'cancelled' && run.finishedAt !== null && run.finishedAt < until) {
    return { status: 'cancelled' as const, finishedAt: toIso(run.finishedAt) }
  }
  return recorded
}

/** `{object: "workflow-run", …}` for the given ids, in that order, with their steps as of `now`. */
export function renderRuns(db: Db, ids: string[], now: number) {
  if (ids.length === 0) return []
  const rows = db
    .select({
      run: runs,
      workflowName: workflows.name,
      version: workflowVersions.version,
      environment: environments.name,
      team: teams.name,
      user: userColumns,
      token: { id: apiTokens.id, name: apiTokens.name, prefix: apiTokens.prefix },
    })
    .from(runs)
    .innerJoin(workflows, eq(workflows.id, runs.workflowId))
    .innerJoin(workflowVersions, eq(workflowVersions.id, runs.workflowVersionId))
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(environments, eq(environments.id, renderings.environmentId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
    .innerJoin(users, eq(users.id, runs.userId))
    .leftJoin(apiTokens, eq(apiTokens.id, runs.tokenId))
    .where(inArray(runs.id, ids))
    .all()
  const steps = db.select().from(runSteps).where(inArray(runSteps.runId, ids)).orderBy(asc(runSteps.runId), asc(runSteps.stepIndex)).all()
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
      createdAt: toIso(r.run.createdAt),
      startedAt: toIsoOrNull(r.run.startedAt),
      finishedAt: toIsoOrNull(r.run.finishedAt),
      ...(r.run.error ? { error: JSON.parse(r.run.error) as { code: string; message: string; step?: string } } : {}),
      steps: steps
        .filter((s) => s.runId === id)
        .map((s) => ({
          index: s.stepIndex,
          name: s.name,
          type: s.type,
          ...stepState(r.run, s, now),
          startedAt: toIso(s.startedAt),
          ...(s.output ? { output: JSON.parse(s.output) as unknown } : {}),
          ...(s.error ? { error: JSON.parse(s.error) as unknown } : {}),
        })),
    }
  })
}

/** Cancels an active run with an `abortWorkflow` entry; 409 when it already finished. */
export function cancelRun(db: Db, clock: Clock, runId: string, actor: { userId: number; tokenId: number | null }): void {
  const found = findRun(db, runId)
  if (!found) throw new Error(`run ${runId} vanished`)
  if (!cancelActiveRun(db, runId, clock.now())) throw conflict('run_finished', `Run ${runId} already finished (${found.run.status})`)
  appendActivityLog(db, clock, {
    environmentId: found.run.environmentId,
    type: 'write',
    action: 'abortWorkflow',
    label: 'workflow run cancelled',
    userId: actor.userId,
    tokenId: actor.tokenId,
    teamId: found.teamId,
    collectionId: found.collectionId,
    recordIds: [found.run.recordId],
    workflow: { name: found.workflowName, runId },
  })
}

export interface RunFilters {
  /** Workflows of the environment with the filtered name (one per team that has it). */
  workflowIds?: number[]
  recordId?: string
  status?: string
  /** Only runs older than this run id (UUIDv7: id order is time order); the console pages with it, exactly. */
  beforeId?: string
  /** Only runs of this user. */
  userId?: number
}

/** Ids of the environment's workflows called `name` (in one team when given). */
export function workflowIdsNamed(db: Db, environmentId: number, name: string, teamName?: string): number[] {
  return db
    .select({ id: workflows.id })
    .from(workflows)
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
    .where(allOf([eq(renderings.environmentId, environmentId), eq(workflows.name, name), teamName === undefined ? undefined : eq(teams.name, teamName)]))
    .all()
    .map((r) => r.id)
}

export function listRunIds(db: Db, environmentId: number, filters: RunFilters, dates: DateFilter[], limit: number): string[] {
  if (filters.workflowIds?.length === 0) return []
  return pageIds<string>(
    db,
    {
      name: 'runs',
      table: runs,
      id: runs.id,
      equal: {
        environmentId: [runs.environmentId, environmentId],
        recordId: [runs.recordId, filters.recordId],
        status: [runs.status, filters.status],
        userId: [runs.userId, filters.userId],
      },
      // Run times come from the clock as they are: no order guarantee, so they stay plain comparisons.
      dates: { filters: dates, columns: { createdAt: runs.createdAt } },
      extra: {
        workflowIds:
          filters.workflowIds === undefined
            ? undefined
            : { condition: inJsonArray(runs.workflowId, 'workflowIds'), values: { workflowIds: JSON.stringify(filters.workflowIds) } },
        beforeId: filters.beforeId === undefined ? undefined : { condition: lt(runs.id, sql.placeholder('beforeId')), values: { beforeId: filters.beforeId } },
      },
    },
    limit,
  )
}

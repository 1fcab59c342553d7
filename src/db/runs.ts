/**
 * Runs' storage reads (their state changes live in queue.ts): one run with where its workflow lives, the rows a
 * run's rendering reads (run, workflow version, environment, team, user, token, steps), and one page of run ids.
 */
import { asc, eq, inArray, lt, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import type { Db } from './open.ts'
import { pageIds } from './pages.ts'
import { inJsonArray } from './prepared.ts'
import { apiTokens, environments, runSteps, runs, teams, users, workflows, workflowVersions } from './schema.ts'
import { userColumns } from './users.ts'
import { joinWorkflowPlace } from './workflows.ts'

export type RunRecord = typeof runs.$inferSelect
export type RunStepRecord = typeof runSteps.$inferSelect

/** A run with its workflow's name and collection, and its team and project. */
export function findRunWithWorkflow(db: Db, id: string) {
  const run = db
    .select({ run: runs, projectId: teams.projectId, workflowName: workflows.name, teamId: teams.id, collectionId: workflows.collectionId })
    .from(runs)
    .innerJoin(workflows, eq(workflows.id, runs.workflowId))
    .$dynamic()
  return joinWorkflowPlace(run)
    .where(eq(runs.id, id))
    .get()
}

/** What rendering the runs `ids` reads: each run with its names (any order), and their steps by run and index. */
export function loadRunsToRender(db: Db, ids: string[]) {
  const select = db.select({
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
    .$dynamic()
  const rows = joinWorkflowPlace(select)
    .innerJoin(users, eq(users.id, runs.userId))
    .leftJoin(apiTokens, eq(apiTokens.id, runs.tokenId))
    .where(inArray(runs.id, ids))
    .all()
  const steps: RunStepRecord[] = db.select().from(runSteps).where(inArray(runSteps.runId, ids)).orderBy(asc(runSteps.runId), asc(runSteps.stepIndex)).all()
  return { rows, steps }
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

/** One page of an environment's run ids, newest first (limit + 1 of them); prepared per shape of present filters. */
export function pageRunIds(db: Db, environmentId: number, filters: RunFilters, dates: DateFilter[], limit: number): string[] {
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

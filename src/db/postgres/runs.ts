/**
 * Runs' storage reads on PostgreSQL: twins of src/db/runs.ts (one run with its workflow's place, what rendering runs
 * reads, one page of run ids). Run ids are UUIDv7 in canonical lower-case form: their order is byte order under any
 * collation (hex digits before letters, dashes at the same places), so the pages walk the (environment, id) index.
 */
import { asc, eq, lt, sql } from 'drizzle-orm'
import type { DateFilter } from '../../lib/date-filter.ts'
import { findRunWithWorkflow, loadRunsToRender, pageRunIds, runToRender, type RunFilters } from '../runs.ts'
import { pageIdsOnPostgres } from './pages.ts'
import { apiTokens, environments, renderings, runs, runSteps, teams, users, workflows, workflowVersions } from './schema.ts'
import { preparedOn } from './prepared.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

async function findRunWithWorkflowOnPostgres(db: PgDb, id: string) {
  const [row] = await preparedOn(db, 'runs.with-workflow', (db) => db
    .select({ run: runs, projectId: teams.projectId, workflowName: workflows.name, teamId: teams.id, collectionId: workflows.collectionId })
    .from(runs)
    .innerJoin(workflows, eq(workflows.id, runs.workflowId))
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
    .where(eq(runs.id, sql.placeholder('id'))),
  ).execute({ id })
  return row
}

/** `column = ANY(the ids)`: one compiled statement serves any number of run ids (placeholder `ids`). */
const anyRunId = (column: typeof runs.id | typeof runSteps.runId) => sql`${column} = ANY(${sql.placeholder('ids')}::text[])`

async function loadRunsToRenderOnPostgres(db: PgDb, ids: string[]) {
  const rows = await preparedOn(db, 'runs.to-render', (db) => db
    .select({
      run: runs,
      workflowName: workflows.name,
      version: workflowVersions.version,
      environment: environments.name,
      team: teams.name,
      username: users.username,
      email: users.email,
      tokenId: apiTokens.id,
      tokenName: apiTokens.name,
      tokenPrefix: apiTokens.prefix,
    })
    .from(runs)
    .innerJoin(workflows, eq(workflows.id, runs.workflowId))
    .innerJoin(workflowVersions, eq(workflowVersions.id, runs.workflowVersionId))
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(environments, eq(environments.id, renderings.environmentId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
    .innerJoin(users, eq(users.id, runs.userId))
    .leftJoin(apiTokens, eq(apiTokens.id, runs.tokenId))
    .where(anyRunId(runs.id))
    .orderBy(asc(runs.id)),
  ).execute({ ids })
  const steps = await preparedOn(db, 'run-steps.to-render', (db) =>
    db.select().from(runSteps).where(anyRunId(runSteps.runId)).orderBy(asc(runSteps.runId), asc(runSteps.stepIndex)),
  ).execute({ ids })
  return { rows: rows.map(runToRender), steps }
}

/** A run id as the runs make them; any other `before` value is compared byte by byte, as SQLite does. */
const CANONICAL_RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

async function pageRunIdsOnPostgres(db: PgDb, environmentId: number, filters: RunFilters, dates: DateFilter[], limit: number): Promise<string[]> {
  if (filters.workflowIds?.length === 0) return []
  const { beforeId } = filters
  return pageIdsOnPostgres<string>(
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
            : { condition: () => sql`${runs.workflowId} = ANY(${sql.placeholder('workflowIds')}::int8[])`, values: { workflowIds: filters.workflowIds } },
        // Named apart: each is its own statement.
        ...(beforeId === undefined
          ? {}
          : CANONICAL_RUN_ID.test(beforeId)
            ? { beforeId: { condition: () => lt(runs.id, sql.placeholder('beforeId')), values: { beforeId } } }
            : { beforeIdBytes: { condition: () => sql`${runs.id} COLLATE "C" < ${sql.placeholder('beforeId')}`, values: { beforeId } } }),
      },
    },
    limit,
  )
}

export const RUNS_TWINS = twins(
  twin(findRunWithWorkflow, findRunWithWorkflowOnPostgres),
  twin(loadRunsToRender, loadRunsToRenderOnPostgres),
  twin(pageRunIds, pageRunIdsOnPostgres),
)

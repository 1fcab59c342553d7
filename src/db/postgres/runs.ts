/**
 * What rendering runs reads, on PostgreSQL: the twin of src/db/runs.ts's `loadRunsToRender` (runs' other reads are
 * written once there). Run ids are UUIDv7 in canonical lower-case form: their order is byte order under any
 * collation (hex digits before letters, dashes at the same places).
 */
import { asc, eq, sql } from 'drizzle-orm'
import { loadRunsToRender, runToRender } from '../runs.ts'
import { apiTokens, environments, renderings, runs, runSteps, teams, users, workflows, workflowVersions } from './schema.ts'
import { preparedOn } from './prepared.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

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

export const RUNS_TWINS = twins(
  // per-dialect: SQLite's raw render rows as arrays (json_each, no row mapping); PostgreSQL's builder with = ANY.
  twin(loadRunsToRender, loadRunsToRenderOnPostgres),
)

/**
 * Runs' storage reads (their state changes live in queue.ts): one run with where its workflow lives, the rows a
 * run's rendering reads (run, workflow version, environment, team, user, token, steps), and one page of run ids;
 * written once for both stores (./query.ts), each a statement built once per dialect and connection.
 */
import { eq, type SQL, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import type { Op } from './op.ts'
import { type PageCondition, pageIds, rawNumber } from './pages.ts'
import { statement } from './query.ts'
import { joinWorkflowPlace } from './workflows.ts'
import type { runSteps, runs } from './schema.ts'

export type RunRecord = typeof runs.$inferSelect
export type RunStepRecord = typeof runSteps.$inferSelect

/** A `runs` row's columns, in the order `runOf` reads them. */
const runColumns = (n: (column: string) => SQL) => sql`r.id, ${n('r.workflow_id')}, ${n('r.workflow_version_id')}, ${n('r.environment_id')}, r.record_id,
    ${n('r.user_id')}, ${n('r.token_id')}, r."trigger", r.status, ${n('r.next_step')}, ${n('r.available_at')}, r.lease_owner, ${n('r.lease_expires_at')},
    ${n('r.attempts')}, r.error, ${n('r.created_at')}, ${n('r.started_at')}, ${n('r.finished_at')}, r.retry_of,
    ${n('r.scheduled_for')}, r.cause`
const RUN_COLUMN_COUNT = 21

function runOf(row: unknown[]): RunRecord {
  const [id, workflowId, workflowVersionId, environmentId, recordId, userId, tokenId, trigger, status, nextStep, availableAt, leaseOwner, leaseExpiresAt, attempts, error, createdAt, startedAt, finishedAt, retryOf, scheduledFor, cause] = row
  return {
    id, workflowId, workflowVersionId, environmentId, recordId, userId, tokenId, trigger, status, nextStep, availableAt,
    leaseOwner, leaseExpiresAt, attempts, error, createdAt, startedAt, finishedAt, retryOf, scheduledFor, cause,
  } as RunRecord
}

const RUN_WITH_WORKFLOW = statement('runs.with-workflow', ({ db, t }) =>
  joinWorkflowPlace(t, db
    .select({
      run: t.runs,
      projectId: t.teams.projectId,
      project: { id: t.projects.id, name: t.projects.name, sso: t.projects.sso },
      workflowName: t.workflows.name,
      teamId: t.teams.id,
      collectionId: t.workflows.collectionId,
    })
    .from(t.runs)
    .innerJoin(t.workflows, eq(t.workflows.id, t.runs.workflowId))
    .$dynamic()
  )
    .innerJoin(t.projects, eq(t.projects.id, t.teams.projectId))
    .where(eq(t.runs.id, sql.placeholder('id'))),
)

/** A run with its workflow's name and collection, and its team and project (with the project's SSO rule). */
export function findRunWithWorkflow(id: string) {
  return RUN_WITH_WORKFLOW.row({ id })
}

const RUNS_TO_RENDER = statement('runs.render', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT ${runColumns(n)}, w.name, ${n('v.version')}, e.name, t.name, u.username, u.email, ${n('k.id')}, k.name, k.prefix,
    ${n('o.next_step')}, x.id
  FROM runs r
    JOIN workflows w ON w.id = r.workflow_id
    JOIN workflow_versions v ON v.id = r.workflow_version_id
    JOIN renderings g ON g.id = w.rendering_id
    JOIN environments e ON e.id = g.environment_id
    JOIN teams t ON t.id = g.team_id
    JOIN users u ON u.id = r.user_id
    LEFT JOIN api_tokens k ON k.id = r.token_id
    LEFT JOIN runs o ON o.id = r.retry_of
    LEFT JOIN runs x ON x.retry_of = r.id
  WHERE ${d.inJsonArray(sql.raw('r.id'), 'ids', 'text')}
  ORDER BY ${d.byteOrder(sql.raw('r.id'))}`)
})

const STEPS_TO_RENDER = statement('runs.render.steps', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT run_id, ${n('step_index')}, name, type, status, ${n('attempts')}, output, error, ${n('started_at')}, ${n('finished_at')}
  FROM run_steps WHERE ${d.inJsonArray(sql.raw('run_id'), 'ids', 'text')} ORDER BY ${d.byteOrder(sql.raw('run_id'))}, step_index`)
})

/**
 * What rendering the runs `ids` reads: each run with its names (by id), and their steps by run and index. Raw rows
 * shaped here (Drizzle's nested row mapping cost more than the query). A retry also reads `carriedBefore`, the step
 * its retried run stopped at (its steps below it were carried from that run; null when the run retries none, or the
 * retried run is gone), and every run `retriedBy`, the run that retries it (null when none does).
 */
export function* loadRunsToRender(ids: string[]) {
  const values = { ids: JSON.stringify(ids) }
  const rows = ((yield* RUNS_TO_RENDER.rows(values)) as unknown[][]).map((row) => {
    const [workflowName, version, environment, team, username, email, tokenId, tokenName, tokenPrefix, carriedBefore, retriedBy] = row.slice(RUN_COLUMN_COUNT) as [
      string, number, string, string, string, string, number | null, string | null, string | null, number | null, string | null,
    ]
    return { ...runToRender({ run: runOf(row), workflowName, version, environment, team, username, email, tokenId, tokenName, tokenPrefix }), carriedBefore, retriedBy }
  })
  const steps = ((yield* STEPS_TO_RENDER.rows(values)) as unknown[][]).map(
    ([runId, stepIndex, name, type, status, attempts, output, error, startedAt, finishedAt]) => ({ runId, stepIndex, name, type, status, attempts, output, error, startedAt, finishedAt }) as RunStepRecord,
  )
  return { rows, steps }
}

/** What RUNS_TO_RENDER reads of one run. */
export interface RunRenderColumns {
  run: RunRecord
  workflowName: string
  version: number
  environment: string
  team: string
  username: string
  email: string
  tokenId: number | null
  tokenName: string | null
  tokenPrefix: string | null
}

/** One run as its rendering reads it. */
export function runToRender({ run, workflowName, version, environment, team, username, email, tokenId, tokenName, tokenPrefix }: RunRenderColumns) {
  return {
    run,
    workflowName,
    version,
    environment,
    team,
    user: { id: run.userId, username, email },
    token: tokenId === null ? null : { id: tokenId, name: tokenName, prefix: tokenPrefix },
  }
}

export interface RunFilters {
  /** Workflows of the environment with the filtered name (one per team that has it). */
  workflowIds?: number[]
  recordId?: string
  status?: string
  /** Only runs older than this run in the list's `(createdAt, id)` order; none for an unknown id. The console pages with it. */
  beforeId?: string
  /** Only runs of this user. */
  userId?: number
  /** Only runs no run retries (`runs_retry_of_idx`): those a bulk retry may still retry. */
  notRetried?: boolean
}

/** Only runs before the run `beforeId` in the list's order: one seek of that run by id, then the walk goes on below it. */
function runsBefore(beforeId: string | undefined): Record<string, PageCondition> {
  if (beforeId === undefined) return {}
  return {
    beforeId: {
      condition: ({ t }) => sql`(${t.runs.createdAt}, ${t.runs.id}) < (SELECT b.created_at, b.id FROM runs b WHERE b.id = ${sql.placeholder('beforeId')})`,
      values: { beforeId },
    },
  }
}

/** One page of an environment's listed run ids, newest first (limit + 1 of them); a statement per shape of present filters. */
export function* pageRunIds(environmentId: number, filters: RunFilters, dates: DateFilter[], limit: number): Op<string[]> {
  const { workflowIds, recordId, status, userId } = filters
  if (workflowIds?.length === 0) return []
  const ofWorkflows: PageCondition | undefined =
    workflowIds === undefined
      ? undefined
      : { condition: ({ t, inJsonArray }) => inJsonArray(t.runs.workflowId, 'workflowIds', 'integer'), values: { workflowIds: JSON.stringify(workflowIds) } }
  const notRetried: PageCondition | undefined = filters.notRetried ? { condition: ({ t }) => sql`NOT EXISTS (SELECT 1 FROM runs x WHERE x.retry_of = ${t.runs.id})`, values: {} } : undefined
  return yield* pageIds<string, 'runs'>(
    {
      name: 'runs',
      table: 'runs',
      equal: { environmentId, recordId, status, userId },
      dates,
      extra: { workflowIds: ofWorkflows, notRetried, ...runsBefore(filters.beforeId) },
      watermark: 'runs',
      byTime: true,
    },
    limit,
  )
}

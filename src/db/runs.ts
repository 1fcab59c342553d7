/**
 * Runs' storage reads (their state changes live in queue.ts): one run with where its workflow lives, the rows a
 * run's rendering reads (run, workflow version, environment, team, user, token, steps), and one page of run ids.
 */
import { lt, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import type { Db } from './open.ts'
import { pageIds } from './pages.ts'
import { inJsonArray, statementOn } from './prepared.ts'
import { runSteps, runs } from './schema.ts'

export type RunRecord = typeof runs.$inferSelect
export type RunStepRecord = typeof runSteps.$inferSelect

/** A `runs` row's columns, in the order `runOf` reads them (from `offset`). */
const RUN_COLUMNS = `r.id, r.workflow_id, r.workflow_version_id, r.environment_id, r.record_id, r.user_id, r.token_id, r."trigger",
    r.status, r.next_step, r.available_at, r.lease_owner, r.lease_expires_at, r.attempts, r.error, r.created_at,
    r.started_at, r.finished_at`
const RUN_COLUMN_COUNT = 18

function runOf(row: unknown[]): RunRecord {
  const [id, workflowId, workflowVersionId, environmentId, recordId, userId, tokenId, trigger, status, nextStep, availableAt, leaseOwner, leaseExpiresAt, attempts, error, createdAt, startedAt, finishedAt] = row
  return {
    id, workflowId, workflowVersionId, environmentId, recordId, userId, tokenId, trigger, status, nextStep, availableAt,
    leaseOwner, leaseExpiresAt, attempts, error, createdAt, startedAt, finishedAt,
  } as RunRecord
}

const RUN_WITH_WORKFLOW = `SELECT ${RUN_COLUMNS}, t.project_id, w.name, t.id, w.collection_id
  FROM runs r
    JOIN workflows w ON w.id = r.workflow_id
    JOIN renderings g ON g.id = w.rendering_id
    JOIN teams t ON t.id = g.team_id
  WHERE r.id = ?`

/** A run with its workflow's name and collection, and its team and project (prepared; shaped here). */
export function findRunWithWorkflow(db: Db, id: string): { run: RunRecord; projectId: number; workflowName: string; teamId: number; collectionId: number } | undefined {
  const row = statementOn(db, 'runs.with-workflow', RUN_WITH_WORKFLOW).values(id)[0]
  if (!row) return undefined
  const [projectId, workflowName, teamId, collectionId] = row.slice(RUN_COLUMN_COUNT) as [number, string, number, number]
  return { run: runOf(row), projectId, workflowName, teamId, collectionId }
}

const RUNS_TO_RENDER = `SELECT ${RUN_COLUMNS}, w.name, v.version, e.name, t.name, u.username, u.email, k.id, k.name, k.prefix
  FROM runs r
    JOIN workflows w ON w.id = r.workflow_id
    JOIN workflow_versions v ON v.id = r.workflow_version_id
    JOIN renderings g ON g.id = w.rendering_id
    JOIN environments e ON e.id = g.environment_id
    JOIN teams t ON t.id = g.team_id
    JOIN users u ON u.id = r.user_id
    LEFT JOIN api_tokens k ON k.id = r.token_id
  WHERE r.id IN (SELECT value FROM json_each(?))`

const STEPS_TO_RENDER = `SELECT run_id, step_index, name, type, status, attempts, output, error, started_at, finished_at
  FROM run_steps WHERE run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, step_index`

/**
 * What rendering the runs `ids` reads: each run with its names (any order), and their steps by run and index.
 * Prepared once per connection; the rows are shaped here (Drizzle's nested row mapping cost more than the query).
 */
export function loadRunsToRender(db: Db, ids: string[]) {
  const json = JSON.stringify(ids)
  const rows = statementOn(db, 'runs.render', RUNS_TO_RENDER)
    .values(json)
    .map((row: unknown[]) => {
      const [workflowName, version, environment, team, username, email, tokenId, tokenName, tokenPrefix] = row.slice(RUN_COLUMN_COUNT) as [
        string, number, string, string, string, string, number | null, string | null, string | null,
      ]
      return runToRender({ run: runOf(row), workflowName, version, environment, team, username, email, tokenId, tokenName, tokenPrefix })
    })
  const steps = statementOn(db, 'runs.render.steps', STEPS_TO_RENDER)
    .values(json)
    .map(([runId, stepIndex, name, type, status, attempts, output, error, startedAt, finishedAt]: unknown[]) => ({ runId, stepIndex, name, type, status, attempts, output, error, startedAt, finishedAt }) as RunStepRecord)
  return { rows, steps }
}

/** What RUNS_TO_RENDER reads of one run (the PostgreSQL twin reads the same). */
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
            : { condition: () => inJsonArray(runs.workflowId, 'workflowIds'), values: { workflowIds: JSON.stringify(filters.workflowIds) } },
        beforeId: filters.beforeId === undefined ? undefined : { condition: () => lt(runs.id, sql.placeholder('beforeId')), values: { beforeId: filters.beforeId } },
      },
    },
    limit,
  )
}

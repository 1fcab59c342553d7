/**
 * Workflow health's reads (docs/workflows.md "Workflow health"): over a window of the runs created since `from`, in
 * one environment or one workflow of it — runs per status per bucket, the run durations' percentiles, each step's
 * counts and durations, and the open tasks with their waits. Written once for both stores (./query.ts), each a
 * statement whose `workflowId` is null for the whole environment.
 *
 * Every aggregate is the database's: the rows answered are bounded by the buckets, the statuses, the workflows' steps
 * and a few tasks, never by the number of runs. A percentile is the row at its nearest rank of the durations numbered
 * in order (`runDurationPercentiles`: `row_number()` and `count(*)` over the window's rows, which both stores have),
 * so neither store needs a percentile function of its own. The runs are found through the runs list's index
 * (`runs_env_created_idx`, environment then `created_at`): a window walks the environment's runs created in it (three
 * times a read: buckets, durations, steps); the open tasks through `tasks_open_env_idx`.
 */
import { type SQL, sql } from 'drizzle-orm'
import { FINISHED_RUN_STATUSES, type RunStatus } from '../lib/run-statuses.ts'
import type { Micros } from '../lib/time.ts'
import type { Dialect } from './dialect.ts'
import type { Op } from './op.ts'
import { absent, rawNumber } from './pages.ts'
import { statement } from './query.ts'
import { anyOfLiterals } from './tables.ts'

/** Which runs and tasks a health read covers: an environment's, or one workflow's of it. */
export interface HealthScope {
  environmentId: number
  workflowId?: number
}

const ph = (name: string) => sql.placeholder(name)
/** The scope's placeholders' values. */
const scopeValues = (scope: HealthScope) => ({ environmentId: scope.environmentId, workflowId: scope.workflowId ?? null })

/** The rows (`alias`: runs or tasks) of the scope's environment, and of its workflow when it names one. */
const inScope = (alias: string): SQL =>
  sql`${sql.raw(alias)}.environment_id = ${ph('environmentId')} AND (${absent('workflowId', 'int8')} OR ${sql.raw(alias)}.workflow_id = ${ph('workflowId')})`
/** The runs (`alias`) of the scope created at or after `from` (µs). */
const windowRuns = (alias: string): SQL => sql`${inScope(alias)} AND ${sql.raw(alias)}.created_at >= ${ph('from')}`
/** The tasks (`alias`) of the scope open now. */
const openTasks = (alias: string): SQL => sql`${inScope(alias)} AND ${sql.raw(alias)}.status = 'open'`
/** The finished runs of the window that ran (a start and an end): the durations the percentiles read. */
const timedRuns = (): SQL =>
  sql`${windowRuns('r')} AND ${sql.raw(anyOfLiterals('r.status', FINISHED_RUN_STATUSES))} AND r.started_at IS NOT NULL AND r.finished_at IS NOT NULL`

/** A statement's value rows (each row its values in column order), each shaped by `shape`. */
function* shaped<T>(work: Op<unknown>, shape: (row: unknown[]) => T): Op<T[]> {
  return ((yield* work) as unknown[][]).map(shape)
}

export interface BucketCount {
  bucket: number
  status: RunStatus
  count: number
}

const RUNS_PER_BUCKET = statement('workflow-health.buckets', (d: Dialect) =>
  d.valueRows(sql`SELECT ${d.number(sql`CAST((r.created_at - ${ph('from')}) / ${ph('bucket')} AS INTEGER)`)}, r.status, ${rawNumber(d)('count(*)')}
  FROM runs r WHERE ${windowRuns('r')}
  GROUP BY 1, 2`),
)

/** How many runs of each status each bucket holds: bucket `i` has the runs created in [from + i·size, from + (i+1)·size). */
export function runsPerBucket(scope: HealthScope, from: Micros, bucketMicros: number): Op<BucketCount[]> {
  return shaped(RUNS_PER_BUCKET.rows({ ...scopeValues(scope), from, bucket: bucketMicros }), ([bucket, status, count]) => ({
    bucket: Number(bucket),
    status: status as RunStatus,
    count: Number(count),
  }))
}

/** The run duration percentiles a read answers. */
export const DURATION_PERCENTILES = [50, 95] as const

/** Nearest rank (from 1) of the p-th percentile of `count` sorted values, ⌈p·count/100⌉, in integers (both stores divide integers so). */
const nearestRank = (percent: number, count: SQL) => sql`(${sql.raw(String(percent))} * ${count} + 99) / 100`

const DURATION_PERCENTILES_STATEMENT = statement('workflow-health.duration-percentiles', (d) =>
  d.valueRows(sql`SELECT ${rawNumber(d)('rn')}, ${rawNumber(d)('ms')}, ${rawNumber(d)('n')}
  FROM (SELECT r.finished_at - r.started_at AS ms, row_number() OVER (ORDER BY r.finished_at - r.started_at) AS rn, count(*) OVER () AS n
    FROM runs r WHERE ${timedRuns()}) ranked
  WHERE ${sql.join(DURATION_PERCENTILES.map((percent) => sql`rn = ${nearestRank(percent, sql.raw('n'))}`), sql` OR `)}`),
)

/**
 * How many finished runs of the window have a duration (ms, finished − started), and the duration at each of
 * DURATION_PERCENTILES (nearest rank; null without any): one walk and one sort.
 */
export function* runDurationPercentiles(scope: HealthScope, from: Micros): Op<{ runs: number; at: (number | null)[] }> {
  const rows = yield* shaped(DURATION_PERCENTILES_STATEMENT.rows({ ...scopeValues(scope), from }), ([rn, ms, n]) => ({ rank: Number(rn), ms: Number(ms), runs: Number(n) }))
  const runs = rows[0]?.runs ?? 0
  const byRank = new Map(rows.map((row) => [row.rank, row.ms]))
  return { runs, at: DURATION_PERCENTILES.map((percent) => byRank.get(Math.ceil((percent * runs) / 100)) ?? null) }
}

export interface StepFigures {
  workflowId: number
  workflowName: string
  teamName: string
  stepName: string
  /** The step's outcomes recorded in the window (skipped ones aside). */
  count: number
  failures: number
  meanMs: number
  maxMs: number
}

const STEP_FIGURES = statement('workflow-health.steps', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT ${n('r.workflow_id')}, w.name, tm.name, s.name, ${n('count(*)')},
    ${n("sum(CASE WHEN s.status = 'failed' THEN 1 ELSE 0 END)")}, ${n('avg(s.finished_at - s.started_at)')}, ${n('max(s.finished_at - s.started_at)')}
  FROM run_steps s
    JOIN runs r ON r.id = s.run_id
    JOIN workflows w ON w.id = r.workflow_id
    JOIN renderings g ON g.id = w.rendering_id
    JOIN teams tm ON tm.id = g.team_id
  WHERE ${windowRuns('r')} AND s.status <> 'skipped'
  GROUP BY r.workflow_id, w.name, tm.name, s.name`)
})

/**
 * Each step (by workflow and name) of the window's runs: how often it ran and failed, its mean and longest duration.
 * Skipped steps did not run and are not counted.
 */
export function stepFigures(scope: HealthScope, from: Micros): Op<StepFigures[]> {
  return shaped(STEP_FIGURES.rows({ ...scopeValues(scope), from }), ([workflowId, workflowName, teamName, stepName, count, failures, meanMs, maxMs]) => ({
    workflowId: Number(workflowId),
    workflowName: workflowName as string,
    teamName: teamName as string,
    stepName: stepName as string,
    count: Number(count),
    failures: Number(failures ?? 0),
    meanMs: Number(meanMs ?? 0),
    maxMs: Number(maxMs ?? 0),
  }))
}

export interface OpenTaskRow {
  id: string
  title: string
  stepName: string
  workflowName: string
  teamName: string
  createdAt: Micros
}

const OPEN_TASKS = statement('workflow-health.open-tasks', (d) => d.valueRows(sql`SELECT ${rawNumber(d)('count(*)')} FROM tasks k WHERE ${openTasks('k')}`))

/** How many tasks of the scope are open now. */
export function* countOpenTasks(scope: HealthScope): Op<number> {
  const [count] = yield* shaped(OPEN_TASKS.rows(scopeValues(scope)), ([n]) => Number(n))
  return count ?? 0
}

/** How many of the longest-waiting open tasks a read lists. */
export const LONGEST_WAITING_TASKS = 5

const LONGEST_OPEN_TASKS = statement('workflow-health.longest-open-tasks', (d) =>
  d.valueRows(sql`SELECT k.id, k.title, k.step_name, w.name, tm.name, ${rawNumber(d)('k.created_at')}
  FROM tasks k JOIN workflows w ON w.id = k.workflow_id JOIN teams tm ON tm.id = k.team_id
  WHERE ${openTasks('k')}
  ORDER BY k.created_at, ${d.byteOrder(sql.raw('k.id'))} LIMIT ${sql.raw(String(LONGEST_WAITING_TASKS))}`),
)

/**
 * The open tasks of the scope that have waited longest (LONGEST_WAITING_TASKS), oldest first: in the lists' order,
 * `(created_at, id)`, which `tasks_open_env_idx` answers without a sort.
 */
export function longestOpenTasks(scope: HealthScope): Op<OpenTaskRow[]> {
  return shaped(LONGEST_OPEN_TASKS.rows(scopeValues(scope)), ([id, title, stepName, workflowName, teamName, createdAt]) => ({
    id: id as string,
    title: title as string,
    stepName: stepName as string,
    workflowName: workflowName as string,
    teamName: teamName as string,
    createdAt: Number(createdAt) as Micros,
  }))
}

export interface EnvironmentWorkflow {
  workflowId: number
  workflowName: string
  teamName: string
}

const ENVIRONMENT_WORKFLOWS = statement('workflow-health.workflows', (d) =>
  d.valueRows(sql`SELECT ${rawNumber(d)('w.id')}, w.name, tm.name
  FROM workflows w JOIN renderings g ON g.id = w.rendering_id JOIN teams tm ON tm.id = g.team_id
  WHERE g.environment_id = ${ph('environmentId')}
  ORDER BY ${d.byteOrder(sql.raw('tm.name'))}, ${d.byteOrder(sql.raw('w.name'))}`),
)

/** Every workflow of the environment, by team then name (byte order). */
export function environmentWorkflows(environmentId: number): Op<EnvironmentWorkflow[]> {
  return shaped(ENVIRONMENT_WORKFLOWS.rows({ environmentId }), ([workflowId, workflowName, teamName]) => ({
    workflowId: Number(workflowId),
    workflowName: workflowName as string,
    teamName: teamName as string,
  }))
}

const RUNS_PER_WORKFLOW = statement('workflow-health.runs-per-workflow', (d) =>
  d.valueRows(sql`SELECT ${rawNumber(d)('r.workflow_id')}, r.status, ${rawNumber(d)('count(*)')} FROM runs r WHERE ${windowRuns('r')}
  GROUP BY r.workflow_id, r.status`),
)

/** How many runs of each status each workflow of the environment has in the window. */
export function runsPerWorkflow(environmentId: number, from: Micros): Op<{ workflowId: number; status: RunStatus; count: number }[]> {
  return shaped(RUNS_PER_WORKFLOW.rows({ ...scopeValues({ environmentId }), from }), ([workflowId, status, count]) => ({
    workflowId: Number(workflowId),
    status: status as RunStatus,
    count: Number(count),
  }))
}

const OPEN_TASKS_PER_WORKFLOW = statement('workflow-health.open-tasks-per-workflow', (d) =>
  d.valueRows(sql`SELECT ${rawNumber(d)('k.workflow_id')}, ${rawNumber(d)('count(*)')} FROM tasks k WHERE ${openTasks('k')} GROUP BY k.workflow_id`),
)

/** How many open tasks each workflow of the environment has. */
export function openTasksPerWorkflow(environmentId: number): Op<{ workflowId: number; count: number }[]> {
  return shaped(OPEN_TASKS_PER_WORKFLOW.rows(scopeValues({ environmentId })), ([workflowId, count]) => ({ workflowId: Number(workflowId), count: Number(count) }))
}

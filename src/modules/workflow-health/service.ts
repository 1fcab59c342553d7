/**
 * Workflow health (docs/workflows.md "Workflow health"): a workflow's, or an environment's, figures over the last day
 * or week — runs per status per bucket, failure rate, run duration percentiles, the slowest and most failing steps,
 * the open tasks and their waits. The database aggregates (src/db/workflow-health.ts); this shapes the answer.
 */
import type { Op } from '../../db/op.ts'
import {
  type BucketCount,
  countOpenTasks,
  environmentWorkflows,
  type HealthScope,
  longestOpenTasks,
  openTasksPerWorkflow,
  runDurationPercentiles,
  runsPerWorkflow,
  runsPerBucket,
  type StepFigures,
  stepFigures,
} from '../../db/workflow-health.ts'
import type { TriggerTarget } from '../../db/workflows.ts'
import { RUN_STATUSES, type RunStatus } from '../../lib/run-statuses.ts'
import { type Micros, microsFromMillis, toIso, toIsoMicros } from '../../lib/time.ts'

const HOUR = 3_600_000
const DAY = 24 * HOUR

/** Each window: how far back it reaches and the width of its chart's buckets. */
export const HEALTH_WINDOWS = {
  day: { spanMs: DAY, bucketMs: HOUR },
  week: { spanMs: 7 * DAY, bucketMs: DAY },
} as const
export type HealthWindow = keyof typeof HEALTH_WINDOWS
export const HEALTH_WINDOW_NAMES = Object.keys(HEALTH_WINDOWS) as HealthWindow[]

/** How many steps each "slowest" and "most failing" list holds. */
export const TOP_STEPS = 5

/** Runs per status. */
export type StatusCounts = Record<RunStatus, number>

/** A step's figures in the window (./model.ts describes each field), its durations rounded to the millisecond. */
export type HealthStep = Omit<StepFigures, 'workflowId'>

/** The figures of a scope over a window (./model.ts describes each field). */
export interface HealthFigures {
  window: HealthWindow
  from: string
  to: string
  bucketSeconds: number
  buckets: { from: string; to: string; counts: StatusCounts; total: number }[]
  counts: StatusCounts
  total: number
  failureRate: number | null
  duration: { runs: number; p50Ms: number | null; p95Ms: number | null }
  slowestSteps: HealthStep[]
  failingSteps: HealthStep[]
  openTasks: {
    count: number
    oldestWaitMs: number | null
    longestWaiting: { id: string; title: string; stepName: string; workflowName: string; teamName: string; createdAt: string; waitMs: number }[]
  }
}

export type WorkflowHealthView = { workflowName: string; teamName: string } & HealthFigures
export type EnvironmentHealthView = {
  environmentName: string
  workflows: { workflowName: string; teamName: string; counts: StatusCounts; total: number; failureRate: number | null; openTasks: number }[]
} & HealthFigures

const noRuns = (): StatusCounts => Object.fromEntries(RUN_STATUSES.map((status) => [status, 0])) as StatusCounts
const totalOf = (counts: StatusCounts) => RUN_STATUSES.reduce((sum, status) => sum + counts[status], 0)

/** failed ÷ finished, or null when nothing finished. */
export function failureRate(counts: StatusCounts): number | null {
  const finished = counts.succeeded + counts.failed + counts.cancelled
  return finished === 0 ? null : counts.failed / finished
}

/** Run counts by bucket, the window's first bucket first (a run created past the read's time counts in the last). */
function bucketsOf(rows: BucketCount[], start: number, window: HealthWindow): { buckets: HealthFigures['buckets']; counts: StatusCounts } {
  const { spanMs, bucketMs } = HEALTH_WINDOWS[window]
  const size = spanMs / bucketMs
  const buckets = Array.from({ length: size }, (_, i) => ({ from: toIso(start + i * bucketMs), to: toIso(start + (i + 1) * bucketMs), counts: noRuns(), total: 0 }))
  const counts = noRuns()
  for (const row of rows) {
    const bucket = buckets[Math.min(Math.max(row.bucket, 0), size - 1)]!
    bucket.counts[row.status] += row.count
    bucket.total += row.count
    counts[row.status] += row.count
  }
  return { buckets, counts }
}

const stepOf = (step: StepFigures): HealthStep => ({
  workflowName: step.workflowName,
  teamName: step.teamName,
  stepName: step.stepName,
  count: step.count,
  failures: step.failures,
  meanMs: Math.round(step.meanMs),
  maxMs: Math.round(step.maxMs),
})

/** Names, then team, as a tie-break that reads the same on both stores. */
const byNames = (a: StepFigures, b: StepFigures) =>
  a.workflowName < b.workflowName ? -1 : a.workflowName > b.workflowName ? 1 : a.teamName < b.teamName ? -1 : a.teamName > b.teamName ? 1 : a.stepName < b.stepName ? -1 : a.stepName > b.stepName ? 1 : 0

/** The figures of a scope over a window ending at `now`. */
function* healthFigures(scope: HealthScope, window: HealthWindow, now: number): Op<HealthFigures> {
  const { spanMs, bucketMs } = HEALTH_WINDOWS[window]
  const start = now - spanMs
  const from = microsFromMillis(start)
  const { buckets, counts } = bucketsOf(yield* runsPerBucket(scope, from, bucketMs * 1000), start, window)
  const durations = yield* runDurationPercentiles(scope, from)
  const [p50Ms, p95Ms] = durations.at
  const steps = yield* stepFigures(scope, from)
  const openCount = yield* countOpenTasks(scope)
  const longest = openCount === 0 ? [] : yield* longestOpenTasks(scope)
  const waitOf = (createdAt: Micros) => Math.max(0, now - Math.floor(createdAt / 1000))
  return {
    window,
    from: toIso(start),
    to: toIso(now),
    bucketSeconds: bucketMs / 1000,
    buckets,
    counts,
    total: totalOf(counts),
    failureRate: failureRate(counts),
    duration: { runs: durations.runs, p50Ms: p50Ms ?? null, p95Ms: p95Ms ?? null },
    slowestSteps: [...steps].sort((a, b) => b.meanMs - a.meanMs || b.maxMs - a.maxMs || byNames(a, b)).slice(0, TOP_STEPS).map(stepOf),
    failingSteps: steps
      .filter((step) => step.failures > 0)
      .sort((a, b) => b.failures - a.failures || b.failures / b.count - a.failures / a.count || byNames(a, b))
      .slice(0, TOP_STEPS)
      .map(stepOf),
    openTasks: {
      count: openCount,
      oldestWaitMs: longest[0] ? waitOf(longest[0].createdAt) : null,
      longestWaiting: longest.map((task) => ({
        id: task.id,
        title: task.title,
        stepName: task.stepName,
        workflowName: task.workflowName,
        teamName: task.teamName,
        createdAt: toIsoMicros(task.createdAt),
        waitMs: waitOf(task.createdAt),
      })),
    },
  }
}

/** A workflow's health over `window`, read at `now`. */
export function* workflowHealth(target: TriggerTarget, teamName: string, window: HealthWindow, now: number): Op<WorkflowHealthView> {
  const figures = yield* healthFigures({ environmentId: target.environmentId, workflowId: target.workflowId }, window, now)
  return { workflowName: target.workflowName, teamName, ...figures }
}

/** An environment's health over `window`, read at `now`: its workflows together, then a row per workflow. */
export function* environmentHealth(environment: { id: number; name: string }, window: HealthWindow, now: number): Op<EnvironmentHealthView> {
  const figures = yield* healthFigures({ environmentId: environment.id }, window, now)
  const perWorkflow = new Map<number, StatusCounts>()
  for (const row of yield* runsPerWorkflow(environment.id, microsFromMillis(now - HEALTH_WINDOWS[window].spanMs))) {
    const counts = perWorkflow.get(row.workflowId) ?? noRuns()
    counts[row.status as RunStatus] += row.count
    perWorkflow.set(row.workflowId, counts)
  }
  const openTasks = new Map((yield* openTasksPerWorkflow(environment.id)).map((row) => [row.workflowId, row.count]))
  const workflows = (yield* environmentWorkflows(environment.id)).map((workflow) => {
    const counts = perWorkflow.get(workflow.workflowId) ?? noRuns()
    return {
      workflowName: workflow.workflowName,
      teamName: workflow.teamName,
      counts,
      total: totalOf(counts),
      failureRate: failureRate(counts),
      openTasks: openTasks.get(workflow.workflowId) ?? 0,
    }
  })
  return { environmentName: environment.name, ...figures, workflows }
}

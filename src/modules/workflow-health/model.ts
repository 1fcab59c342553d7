/** Workflow health through the API: a workflow's figures, and an environment's with a row per workflow. */
import { t } from 'elysia'
import { RUN_STATUSES } from '../../lib/run-statuses.ts'
import { Integer, IsoDateTime, IsoDateTimeMicros } from '../../http/schemas.ts'

/** How many runs hold each status: one key per status, 0 for none. */
export const StatusCounts = t.Object(Object.fromEntries(RUN_STATUSES.map((status) => [status, Integer({ minimum: 0 })])) as Record<(typeof RUN_STATUSES)[number], ReturnType<typeof Integer>>, {
  description: 'Runs per status',
})

const Bucket = t.Object({
  from: IsoDateTime,
  to: IsoDateTime,
  counts: StatusCounts,
  total: Integer({ minimum: 0 }),
})

const FailureRate = t.Union([t.Number({ minimum: 0, maximum: 1 }), t.Null()], {
  description: 'failed ÷ (succeeded + failed + cancelled) of the runs created in the window; null when none has finished',
})

const Step = t.Object({
  workflowName: t.String(),
  teamName: t.String(),
  stepName: t.String(),
  count: Integer({ minimum: 0, description: 'Times the step ran (skipped aside) in the runs created in the window' }),
  failures: Integer({ minimum: 0 }),
  meanMs: Integer({ minimum: 0, description: 'Mean duration, rounded to the millisecond' }),
  maxMs: Integer({ minimum: 0 }),
})

const OpenTask = t.Object({
  id: t.String(),
  title: t.String(),
  stepName: t.String(),
  workflowName: t.String(),
  teamName: t.String(),
  createdAt: IsoDateTimeMicros,
  waitMs: Integer({ minimum: 0, description: 'How long it has been open' }),
})

/** The figures of one scope (a workflow, or an environment's workflows together). */
const figures = {
  window: t.UnionEnum(['day', 'week']),
  from: t.String({ format: 'date-time', description: 'The window’s start: it holds the runs created at or after this time' }),
  to: t.String({ format: 'date-time', description: 'The time of the read: the window’s end' }),
  bucketSeconds: Integer({ description: '3600 for day, 86400 for week' }),
  buckets: t.Array(Bucket, { description: 'Runs per status by creation time, oldest bucket first: 24 hourly (day) or 7 daily (week), counted back from `to`' }),
  counts: StatusCounts,
  total: Integer({ minimum: 0 }),
  failureRate: FailureRate,
  duration: t.Object(
    {
      runs: Integer({ minimum: 0, description: 'Finished runs with a start and an end (the percentiles are theirs)' }),
      p50Ms: t.Union([Integer({ minimum: 0 }), t.Null()]),
      p95Ms: t.Union([Integer({ minimum: 0 }), t.Null()]),
    },
    { description: 'Run duration (finished − started) percentiles, nearest rank; null with no finished run' },
  ),
  slowestSteps: t.Array(Step, { description: 'At most 5, by mean duration (longest first)' }),
  failingSteps: t.Array(Step, { description: 'At most 5 steps that failed, by failures (most first)' }),
  openTasks: t.Object(
    {
      count: Integer({ minimum: 0 }),
      oldestWaitMs: t.Union([Integer({ minimum: 0 }), t.Null()]),
      longestWaiting: t.Array(OpenTask, { description: 'At most 5, the longest waiting first' }),
    },
    { description: 'Tasks open now (whatever the window)' },
  ),
}

export const WorkflowHealth = t.Object({ workflowName: t.String(), teamName: t.String(), ...figures })

export const EnvironmentHealth = t.Object({
  environmentName: t.String(),
  ...figures,
  workflows: t.Array(
    t.Object({
      workflowName: t.String(),
      teamName: t.String(),
      counts: StatusCounts,
      total: Integer({ minimum: 0 }),
      failureRate: FailureRate,
      openTasks: Integer({ minimum: 0 }),
    }),
    { description: 'Every workflow of the environment, by team then name' },
  ),
})

export const EnvironmentPathParams = t.Object({ projectName: t.String(), environmentName: t.String() })

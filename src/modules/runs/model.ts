/** Workflow runs as the API renders them, and the manual trigger's body. */
import { t } from 'elysia'
import { RUN_STATUSES } from '../../lib/run-statuses.ts'
import { EnvironmentPageParameters, pageSchema } from '../../http/list-schema.ts'
import { Integer, IsoDateTime, IsoDateTimeOrNull, renderedAnswer } from '../../http/schemas.ts'
import { EnvironmentRef, TeamRef, UserObject } from '../directory/model.ts'
import { BULK_RETRY_MAX_RUNS } from './retry.ts'

export const RunIdParams = t.Object({ runId: t.String({ format: 'uuid' }) })

export const StartRunBody = t.Object({
  workflowName: t.String({ minLength: 1, maxLength: 200 }),
  teamName: t.String({ minLength: 1, maxLength: 200 }),
  recordId: t.String({ minLength: 1, maxLength: 1024 }),
})

/** 202: the run is queued; read it at `GET /v1/workflow-runs/{runId}`. */
export const RunAccepted = t.Object({ runId: t.String({ format: 'uuid' }) }, { $id: 'RunAccepted' })

const RunStep = t.Object({
  index: Integer({ minimum: 0 }),
  name: t.String(),
  type: t.String({ description: 'load, condition, update, note, http, wait or task' }),
  status: t.String({
    enum: ['succeeded', 'failed', 'waiting', 'cancelled'],
    description: '`waiting`: a `wait` step whose time has not passed yet; `cancelled`: a wait the run was cancelled during',
  }),
  startedAt: IsoDateTime,
  finishedAt: t.Union([IsoDateTime, t.Null()], { description: 'null while a `wait` step is `waiting`' }),
  carriedFrom: t.Optional(
    t.String({
      format: 'uuid',
      description: 'On a retry: the run this step was recorded by (the retried run); it was carried over as it was recorded, not run again',
    }),
  ),
  output: t.Optional(t.Unknown({ description: 'What the step produced (per step type)' })),
  error: t.Optional(t.Unknown({ description: '`{code, message}` of a failed step' })),
})

/** The change that started an event-triggered run (docs/workflows.md "Events"). */
export const RunCause = t.Object(
  {
    event: t.UnionEnum(['recordCreated', 'recordUpdated', 'recordDeleted', 'noteAdded']),
    recordId: t.String(),
    changedFields: t.Optional(t.Array(t.String(), { description: 'recordUpdated: the top-level fields the change changed' })),
    noteId: t.Optional(Integer({ description: 'noteAdded: the note' })),
    chain: t.Array(t.Object({ runId: t.String({ format: 'uuid' }), workflow: t.String(), recordId: t.String() }), {
      description: 'The event-started runs whose writes led to this one, oldest first (at most 8: the loop bound)',
    }),
  },
  { $id: 'RunCause' },
)

export const Run = renderedAnswer(
  t.Object(
    {
      object: t.Literal('workflow-run'),
      id: t.String({ format: 'uuid' }),
      status: t.UnionEnum(RUN_STATUSES),
      trigger: t.UnionEnum(['manual', 'webhook', 'schedule', 'event']),
      workflow: t.Object({ id: Integer(), name: t.String(), version: Integer({ description: 'The version this run executes' }) }),
      recordId: t.String(),
      environment: EnvironmentRef,
      team: TeamRef,
      user: UserObject,
      token: t.Union(
        [t.Object({ object: t.Literal('api-token'), id: Integer(), name: t.String(), prefix: t.String() }), t.Null()],
        { description: 'The application token the run was started with (null: a console session, or the token was deleted)' },
      ),
      createdAt: IsoDateTime,
      startedAt: IsoDateTimeOrNull,
      finishedAt: IsoDateTimeOrNull,
      retryOf: t.Union([t.String({ format: 'uuid' }), t.Null()], {
        description: 'The failed or cancelled run this run retries (POST /v1/workflow-runs/{runId}/retry), or null. It may be gone (404): the run history\'s retention deletes it first',
      }),
      retriedBy: t.Union([t.String({ format: 'uuid' }), t.Null()], { description: 'The run that retries this one (a run is retried at most once), or null' }),
      scheduledFor: t.Union([IsoDateTime, t.Null()], { description: "A run its workflow's schedule started: the fire time of the tick (UTC); null for every other trigger" }),
      cause: t.Union([RunCause, t.Null()], { description: 'What started a run of trigger `event`: the change, and the chain of event-started runs that led to it; null for other triggers' }),
      error: t.Optional(t.Object({ code: t.String(), message: t.String(), step: t.Optional(t.String()) })),
      steps: t.Array(RunStep, { description: 'The steps recorded so far, in order' }),
    },
    { $id: 'Run' },
  ),
)

export const RunPage = renderedAnswer(pageSchema(Run, EnvironmentPageParameters, 'A page of runs, newest first'))

/** 202: the retry is queued; read it at `GET /v1/workflow-runs/{runId}`. */
export const RetryAccepted = t.Object(
  { runId: t.String({ format: 'uuid', description: 'The new run' }), retryOf: t.String({ format: 'uuid', description: 'The run it retries' }) },
  { $id: 'RetryAccepted' },
)

export const BulkRetryBody = t.Object({
  workflowName: t.String({ minLength: 1, maxLength: 200, description: 'Only failed runs of this workflow' }),
  teamName: t.Optional(t.String({ minLength: 1, maxLength: 200, description: "The workflow's team, when several teams have a workflow of that name" })),
  createdAfter: t.Optional(t.String({ maxLength: 64, description: 'Only runs created at or after this ISO 8601 date-time' })),
  createdBefore: t.Optional(t.String({ maxLength: 64, description: 'Only runs created before this ISO 8601 date-time' })),
  limit: t.Optional(Integer({ minimum: 1, maximum: BULK_RETRY_MAX_RUNS, description: `Retry at most this many runs (default and most: ${BULK_RETRY_MAX_RUNS})` })),
})

export const BulkRetryAnswer = t.Object(
  {
    retried: t.Array(RetryAccepted, { description: 'The runs retried, newest first: each new run and the run it retries' }),
    skipped: t.Array(
      t.Object({
        runId: t.String({ format: 'uuid' }),
        code: t.String({ description: 'Why: run_in_progress (the record has an active run of the workflow), already_retried, workflow_withdrawn, not_found (the run history\'s retention deleted it meanwhile)' }),
      }),
      { description: 'Matching runs this call did not retry' },
    ),
    more: t.Boolean({ description: 'More matching failed runs are left: call again' }),
  },
  { $id: 'BulkRetryAnswer' },
)

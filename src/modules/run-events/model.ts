/** A run event as an event stream's `data:` carries it (documented in /openapi.json as `RunEvent`). */
import { t } from 'elysia'
import { RUN_EVENT_TYPES } from '../../db/run-events.ts'
import { RUN_STATUSES } from '../../lib/run-statuses.ts'
import { Integer, IsoDateTime, IsoDateTimeMicros } from '../../http/schemas.ts'

export const RunEvent = t.Object(
  {
    id: Integer({ minimum: 1, description: 'The event id, also its SSE `id:`: global to the instance’s database, increasing' }),
    type: t.UnionEnum(RUN_EVENT_TYPES, { description: 'Also its SSE `event:`' }),
    runId: t.String({ format: 'uuid' }),
    sequence: Integer({ minimum: 1, description: 'The event’s place among its run’s events: 1, 2, 3… without a gap' }),
    status: t.UnionEnum(RUN_STATUSES, { description: 'The run’s status once this happened (`failed` from the step that failed it on)' }),
    workflow: t.Object({ id: Integer(), name: t.String() }),
    recordId: t.String(),
    stepIndex: t.Union([Integer({ minimum: 0 }), t.Null()], { description: 'Step events: the step’s index; else null' }),
    stepName: t.Union([t.String(), t.Null()], { description: 'Step events: the step’s name; else null' }),
    createdAt: IsoDateTimeMicros,
    stepType: t.Optional(t.String({ description: 'Step events: load, condition, update, note, http or wait' })),
    startedAt: t.Optional(IsoDateTime),
    finishedAt: t.Optional(IsoDateTime),
    until: t.Optional(t.Union([IsoDateTime], { description: '`step.waiting`: when the wait ends' })),
    error: t.Optional(
      t.Object({ code: t.String(), message: t.String(), step: t.Optional(t.String()) }, { description: '`step.failed`, `run.failed`: why' }),
    ),
    trigger: t.Optional(t.UnionEnum(['manual', 'webhook'], { description: '`run.started`: how the run was started' })),
    retryOf: t.Optional(t.Union([t.String({ format: 'uuid' }), t.Null()], { description: '`run.started`: the run this one retries, or null' })),
    nextStep: t.Optional(Integer({ minimum: 0, description: '`run.started`, `run.resumed`: the step it starts or resumes at' })),
    attempt: t.Optional(Integer({ minimum: 1, description: '`run.started`, `run.resumed`: how many times the run has been claimed' })),
    reason: t.Optional(
      t.UnionEnum(['lease_expired', 'restarted', 'released'], {
        description: '`run.requeued`: its worker’s lease expired, the (SQLite) server restarted, or a stopping instance gave it back',
      }),
    ),
  },
  { $id: 'RunEvent', additionalProperties: false },
)

/** A workflow's record and note events as the API takes and shows them (docs/workflows.md "Events"). */
import { t } from 'elysia'
import { WORKFLOW_EVENT_KINDS } from '../../db/workflow-events.ts'
import { MAX_DEBOUNCE_SECONDS } from './service.ts'

const FilterValue = t.Union([t.String({ maxLength: 1000 }), t.Number(), t.Boolean(), t.Array(t.Union([t.String({ maxLength: 1000 }), t.Number()]), { maxItems: 100 })])

export const WorkflowEvents = t.Object(
  {
    on: t.Array(
      t.Object(
        {
          event: t.UnionEnum([...WORKFLOW_EVENT_KINDS]),
          fields: t.Optional(
            t.Array(t.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 100, description: 'recordUpdated only: a run starts when one of these fields changed' }),
          ),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 4, description: 'The events of the workflow’s collection (in its environment) that start a run' },
    ),
    where: t.Optional(
      t.Record(t.String({ minLength: 1, maxLength: 64 }), t.Record(t.String(), FilterValue), {
        description: 'Tested on the record when the event is dispatched, as the records list filters: { "status": { "eq": "disputed" } }; eq ne lt lte gt gte in contains',
      }),
    ),
    runAs: t.String({ minLength: 1, maxLength: 320, description: 'The email of the user whose rights the runs use: checked when saved and at every event' }),
    debounceSeconds: t.Optional(
      t.Integer({ minimum: 1, maximum: MAX_DEBOUNCE_SECONDS, description: 'Changes of one record within this window start one run, after the last change' }),
    ),
  },
  { additionalProperties: false, $id: 'WorkflowEvents' },
)

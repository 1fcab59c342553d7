/** The webhook trigger: its call's body (documented; the route reads it itself, after authentication) and settings. */
import { t } from 'elysia'
import { WebhookRate } from '../workflows/definition.ts'

export const RECORD_ID_MAX_LENGTH = 1024

export const WorkflowPathParams = t.Object({
  projectName: t.String(),
  environmentName: t.String(),
  teamName: t.String(),
  workflowName: t.String(),
})

/** Documentation only: validating it before the URL and the token were checked would change DESIGN §8's order. */
export const TriggerBody = t.Object(
  { record_id: t.String({ minLength: 1, maxLength: RECORD_ID_MAX_LENGTH, description: 'The record the run works on' }) },
  { additionalProperties: true, description: 'Other fields are ignored' },
)

export const WebhookSettingsChange = t.Object(
  {
    enabled: t.Optional(t.Boolean()),
    ratePerMinute: t.Optional(t.Union([WebhookRate, t.Null()], { description: 'Calls per minute; null = the instance default' })),
  },
  { minProperties: 1 },
)

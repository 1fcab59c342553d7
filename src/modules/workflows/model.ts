/** Publishing a workflow: the definition's body (checked by definition.ts, every problem at once) and the answer. */
import { t } from 'elysia'
import { Integer } from '../../http/schemas.ts'
import { WebhookSettings } from '../webhooks/model.ts'

export const WorkflowParams = t.Object({
  projectName: t.String(),
  environmentName: t.String(),
  teamName: t.String(),
  workflowName: t.String({ maxLength: 200 }),
})

/**
 * Typed loosely on purpose: definition.ts checks the definition and reports every problem with its path
 * (`steps[2].set: expected object`), which schema validation here would pre-empt with one message.
 */
export const WorkflowDefinitionBody = t.Object(
  {
    collection: t.Optional(t.Unknown({ description: 'The collection the workflow works on (required)' })),
    steps: t.Optional(
      t.Unknown({
        description:
          'The ordered steps (required): `load`, `condition`, `update`, `note`, `http`, `wait`, each `{type, name?, …}` (see the README)',
      }),
    ),
    webhook: t.Optional(t.Unknown({ description: '`{enabled, ratePerMinute}`: trigger settings, not part of the version' })),
  },
  { additionalProperties: true, description: 'A workflow definition; its name, environment and team come from the path' },
)

export const PublishedWorkflow = t.Object({
  name: t.String(),
  version: Integer(),
  outcome: t.UnionEnum(['created', 'published', 'unchanged'], { description: 'A changed definition publishes a new version' }),
  webhook: WebhookSettings,
})

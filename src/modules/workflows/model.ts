/** Publishing a workflow: the path, the answer; the body's schema is definition.ts's WorkflowDefinitionBody. */
import { t } from 'elysia'
import { Integer } from '../../http/schemas.ts'
import { WebhookSettings } from '../webhooks/model.ts'

export const WorkflowParams = t.Object({
  projectName: t.String(),
  environmentName: t.String(),
  teamName: t.String(),
  workflowName: t.String({ maxLength: 200 }),
})

export const PublishedWorkflow = t.Object({
  name: t.String(),
  version: Integer(),
  outcome: t.UnionEnum(['created', 'published', 'unchanged'], { description: 'A changed definition publishes a new version' }),
  webhook: WebhookSettings,
})

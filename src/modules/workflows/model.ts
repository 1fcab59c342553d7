/** Publishing and reading a workflow: the path, the answers; the body's schema is definition.ts's WorkflowDefinitionBody. */
import { t } from 'elysia'
import { pageSchema } from '../../http/list-schema.ts'
import { IdParam } from '../../http/params.ts'
import { Integer, IsoDateTime } from '../../http/schemas.ts'
import { UserObject } from '../directory/model.ts'
import { RECORD_ID_MAX_LENGTH } from '../records/schema.ts'
import { type Step, STEP_TYPES, type StepType, StepSchema, WorkflowConcurrency, WorkflowDefinitionBody } from './definition.ts'

/** A workflow's webhook trigger as answers show it. */
export const WebhookSettings = t.Object(
  {
    enabled: t.Boolean(),
    ratePerMinute: t.Union([Integer(), t.Null()], { description: 'This webhook’s own limit; null = the instance default' }),
    effectiveRatePerMinute: Integer(),
    url: t.Union([t.String(), t.Null()], { description: 'The URL to call (a credential); null while disabled' }),
  },
  { $id: 'WebhookSettings' },
)

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

/** `GET …/workflows/{name}`: the definition its runs use now (the active version), with its trigger. */
export const WorkflowAnswer = t.Object({
  name: t.String(),
  environment: t.String(),
  team: t.String(),
  collection: t.String(),
  version: Integer({ description: 'The active version: new runs use it' }),
  concurrency: t.Union([WorkflowConcurrency, t.Null()]),
  steps: t.Array(t.Unsafe<Step>(StepSchema)),
  webhook: WebhookSettings,
})

export const WorkflowVersionParams = t.Object({ ...WorkflowParams.properties, version: IdParam })

/** One published version: who published it, when, and whether new runs use it. */
export const WorkflowVersion = t.Object({
  version: Integer(),
  createdAt: IsoDateTime,
  // The user's fields without its `$id`: the document writes a nullable object as one schema of two types.
  publishedBy: t.Union([t.Object(UserObject.properties), t.Null()], { description: 'The user who published it; null for a version published by `trellis apply`' }),
  active: t.Boolean({ description: 'New runs use this version' }),
})

/** `GET …/workflows/{name}/versions`: newest first. */
export const WorkflowVersionPage = pageSchema(
  WorkflowVersion,
  t.Object({ projectName: t.String(), environmentName: t.String(), teamName: t.String(), workflowName: t.String(), limit: Integer() }),
  'A page of a workflow\'s versions, newest first',
  'Whether older versions follow: repeat with `before` set to the last item\'s `version`',
)

/** `GET …/workflows/{name}/versions/{version}`: one version's definition as it was published. */
export const WorkflowVersionAnswer = t.Object({
  ...WorkflowVersion.properties,
  name: t.String(),
  collection: t.String({ description: 'The collection the version works on' }),
  concurrency: t.Union([WorkflowConcurrency, t.Null()]),
  steps: t.Array(t.Unsafe<Step>(StepSchema)),
})

/** `POST …/workflows/{name}/dry-run`: a definition as the PUT takes it, and the record to try it on. */
export const DryRunBody = t.Object(
  {
    definition: WorkflowDefinitionBody,
    recordId: t.String({ minLength: 1, maxLength: RECORD_ID_MAX_LENGTH, description: 'A record of the definition’s collection, in the workflow’s environment' }),
  },
  { additionalProperties: false },
)

const DryRunStepAnswer = t.Object({
  index: Integer({ description: 'The step’s place, from 0' }),
  name: t.String({ description: 'Its name, or `<n>-<type>`' }),
  type: t.UnionEnum(STEP_TYPES as [StepType, ...StepType[]]),
  outcome: t.UnionEnum(['continue', 'end', 'fail', 'skipped'], { description: 'Go on, end the run, fail it; skipped: an earlier step stopped the run' }),
  summary: t.String({ description: 'What the step would do, in words' }),
  would: t.Record(t.String(), t.Unknown(), {
    description: 'What it would do as data: `update` the fields it would set; `http` the method, URL (query redacted), header names and body it would send; `task` its title, assignees, approvals, form fields and deadline; `condition` the value read and whether the test holds',
  }),
})

export const DryRunAnswer = t.Object({
  recordId: t.String(),
  outcome: t.UnionEnum(['succeeded', 'ended', 'failed'], { description: 'How the run would end (a task step is taken as approved)' }),
  failure: t.Union([t.Object({ step: t.String(), code: t.String(), message: t.String() }), t.Null()], { description: 'The step that would fail the run, with the code a run would record' }),
  steps: t.Array(DryRunStepAnswer),
})

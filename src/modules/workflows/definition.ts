/**
 * Workflow definitions (DESIGN §8): the TypeBox model of each step type and the checks TypeBox cannot
 * express (templates, step order). Errors name the step and the field: `steps[2] (update).set: …`.
 */
import { type Static, Type as T } from '@sinclair/typebox'
import { canonicalJson } from '../../lib/json.ts'
import { PLACEHOLDER, placeholderInHead, placeholderInHeadMessage } from '../../lib/outbound/url-template.ts'
import { type Problem, schemaProblems } from '../../lib/validation.ts'

const Name = T.String({ minLength: 1, maxLength: 200 })
const StepName = T.Optional(T.String({ minLength: 1, maxLength: 100 }))
const Scalar = T.Union([T.String({ maxLength: 10_000 }), T.Number(), T.Boolean(), T.Null()])
const AnyJson = T.Union([T.String(), T.Number(), T.Boolean(), T.Null(), T.Array(T.Unknown()), T.Record(T.String(), T.Unknown())], {
  description: 'Any JSON value',
})

export const STEP_SCHEMAS = {
  load: T.Object({ type: T.Literal('load'), name: StepName }, { additionalProperties: false }),
  condition: T.Object(
    {
      type: T.Literal('condition'),
      name: StepName,
      if: T.Object(
        {
          field: T.String({ minLength: 1, maxLength: 200 }),
          equals: T.Optional(Scalar),
          notEquals: T.Optional(Scalar),
          in: T.Optional(T.Array(Scalar, { maxItems: 1000 })),
          exists: T.Optional(T.Boolean()),
        },
        { additionalProperties: false },
      ),
      else: T.Optional(T.Union([T.Literal('end'), T.Literal('fail')])),
    },
    { additionalProperties: false },
  ),
  update: T.Object(
    {
      type: T.Literal('update'),
      name: StepName,
      set: T.Record(T.String({ minLength: 1, maxLength: 200 }), T.Unknown(), { minProperties: 1 }),
    },
    { additionalProperties: false },
  ),
  note: T.Object(
    {
      type: T.Literal('note'),
      name: StepName,
      title: T.String({ minLength: 1, maxLength: 500 }),
      content: T.String({ minLength: 1, maxLength: 65_536 }),
    },
    { additionalProperties: false },
  ),
  http: T.Object(
    {
      type: T.Literal('http'),
      name: StepName,
      method: T.Union(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => T.Literal(m))),
      url: T.String({ pattern: '^https?://', maxLength: 2048 }),
      headers: T.Optional(T.Record(T.String({ minLength: 1 }), T.String())),
      body: T.Optional(AnyJson),
      timeoutSeconds: T.Optional(T.Integer({ minimum: 1, maximum: 120 })),
      retries: T.Optional(T.Integer({ minimum: 0, maximum: 10 })),
    },
    { additionalProperties: false },
  ),
  wait: T.Object(
    {
      type: T.Literal('wait'),
      name: StepName,
      seconds: T.Integer({ minimum: 1, maximum: 30 * 24 * 3600 }),
    },
    { additionalProperties: false },
  ),
} as const

export type StepType = keyof typeof STEP_SCHEMAS
export type Step = { [K in StepType]: Static<(typeof STEP_SCHEMAS)[K]> }[StepType]
export const STEP_TYPES = Object.keys(STEP_SCHEMAS) as StepType[]
/** Steps that read or write the record as the run's user. */
export const DATA_STEP_TYPES: readonly StepType[] = ['load', 'update', 'note']

/** A webhook's own limit, in calls per minute. */
export const WebhookRate = T.Integer({ minimum: 1, maximum: 100_000 })

export const WebhookSettings = T.Object(
  {
    enabled: T.Optional(T.Boolean()),
    ratePerMinute: T.Optional(WebhookRate),
  },
  { additionalProperties: false, description: 'Trigger settings: not part of the version' },
)

/** The highest `concurrency` a workflow may declare. */
export const MAX_WORKFLOW_CONCURRENCY = 1000

/** A workflow's concurrency limit (src/db/claims.ts enforces it in every claim). */
export const WorkflowConcurrency = T.Integer({
  minimum: 1,
  maximum: MAX_WORKFLOW_CONCURRENCY,
  description:
    'At most this many runs of the workflow running at once, over every instance; runs beyond it stay queued and start as running ones end. Absent (null in answers): no limit',
})

const MAX_STEPS = 100
/** What a definition holds besides its name, environment and team. */
const definitionFields = {
  collection: T.String({ minLength: 1, maxLength: 200, description: 'The collection the workflow works on' }),
  concurrency: T.Optional(WorkflowConcurrency),
  webhook: T.Optional(WebhookSettings),
}

/** Any one step, told apart by its `type`. */
export const StepSchema = T.Union(STEP_TYPES.map((type) => STEP_SCHEMAS[type]))

/**
 * The body of `PUT …/team/{t}/workflows/{name}`: the definition less what the path names. Built from the same
 * step schemas as the checks below, so /openapi.json describes exactly what they accept.
 */
export const WorkflowDefinitionBody = T.Object(
  { ...definitionFields, steps: T.Array(StepSchema, { minItems: 1, maxItems: MAX_STEPS, description: 'The steps, run in order' }) },
  { additionalProperties: false, description: 'A workflow definition; its name, environment and team come from the path' },
)

/** Shape checked before the steps are checked one by one (each with its label: `steps[2] (3-update).set`). */
export const WorkflowDefinitionShape = T.Object(
  {
    name: Name,
    environment: Name,
    team: Name,
    ...definitionFields,
    steps: T.Array(T.Object({ type: T.String() }), { minItems: 1, maxItems: MAX_STEPS }),
  },
  { additionalProperties: false },
)

export interface WorkflowDefinition {
  name: string
  environment: string
  team: string
  collection: string
  /** At most this many runs running at once (absent: no limit); part of the version. */
  concurrency?: number
  webhook?: Static<typeof WebhookSettings>
  steps: Step[]
}

const TEMPLATE_VARIABLE = /^(record\.[A-Za-z_][\w.-]*|workflow\.name|run\.id|now)$/

/** Every `{{…}}` in a string must be one of the known variables. */
function templateProblems(value: unknown, path: string): Problem[] {
  if (typeof value === 'string') {
    return [...value.matchAll(PLACEHOLDER)]
      .filter((m) => !TEMPLATE_VARIABLE.test(m[1] ?? ''))
      .map((m) => ({
        path,
        message: `unknown template variable {{${m[1]}}} (use record.<field>, record.id, workflow.name, run.id or now)`,
      }))
  }
  if (Array.isArray(value)) return value.flatMap((v, i) => templateProblems(v, `${path}[${i}]`))
  if (value && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => templateProblems(v, `${path}.${k}`))
  }
  return []
}

export function stepLabel(step: { type: string; name?: string }, index: number): string {
  return step.name ?? `${index + 1}-${step.type}`
}

/** All problems of a definition, each with a path under `base`. Empty means valid. */
export function workflowDefinitionProblems(value: unknown, base = ''): Problem[] {
  const shape = schemaProblems(WorkflowDefinitionShape, value, base)
  if (shape.length > 0 && !isObjectWithSteps(value)) return shape
  const problems = shape.filter((p) => !p.path.includes('.steps['))
  const steps = (value as { steps: unknown[] }).steps
  const names = new Set<string>()
  steps.forEach((raw, index) => {
    const at = `${base ? `${base}.` : ''}steps[${index}]`
    const type = (raw as { type?: unknown })?.type
    if (typeof type !== 'string' || !Object.hasOwn(STEP_SCHEMAS, type)) {
      problems.push({ path: `${at}.type`, message: `unknown step type ${JSON.stringify(type)} (one of ${STEP_TYPES.join(', ')})` })
      return
    }
    const step = raw as Step
    const label = `${at} (${stepLabel(step, index)})`
    const stepProblems = schemaProblems(STEP_SCHEMAS[type as StepType], raw, '')
    for (const p of stepProblems) problems.push({ path: p.path === '(root)' ? label : `${label}.${p.path}`, message: p.message })
    if (stepProblems.length > 0) return
    const name = stepLabel(step, index)
    if (names.has(name)) problems.push({ path: `${label}.name`, message: `duplicate step name "${name}"` })
    names.add(name)
    if (step.type === 'condition' && !steps.slice(0, index).some((s) => (s as Step).type === 'load')) {
      problems.push({ path: label, message: 'a condition needs a load step before it' })
    }
    problems.push(...templateProblems(raw, label))
    const inHead = step.type === 'http' ? placeholderInHead(step.url) : null
    if (inHead !== null) problems.push({ path: `${label}.url`, message: placeholderInHeadMessage(inHead) })
  })
  return problems
}

function isObjectWithSteps(value: unknown): boolean {
  return !!value && typeof value === 'object' && Array.isArray((value as { steps?: unknown }).steps)
}

/**
 * Canonical JSON of what a version pins: everything but the trigger settings (`webhook`), with keys
 * sorted so that re-ordering keys in the file is not a new version.
 */
export function canonicalDefinition(definition: WorkflowDefinition): string {
  const { webhook: _webhook, ...versioned } = definition
  return canonicalJson(versioned)
}

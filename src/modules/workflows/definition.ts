/**
 * Workflow definitions (DESIGN §8): the TypeBox model of each step type and the checks TypeBox cannot
 * express (templates, step order). Errors name the step and the field: `steps[2] (update).set: …`.
 */
import { type Static, Type as T } from '@sinclair/typebox'
import { canonicalJson } from '../../lib/json.ts'
import { PLACEHOLDER, placeholderInHead, placeholderInHeadMessage } from '../../lib/outbound/url-template.ts'
import { formSchemaProblems } from '../../lib/form-schema.ts'
import { TASK_REJECT_ACTIONS, TASK_TIMEOUT_ACTIONS } from '../../lib/task-statuses.ts'
import { type Problem, schemaProblems } from '../../lib/validation.ts'

const Name = T.String({ minLength: 1, maxLength: 200 })
const StepName = T.Optional(T.String({ minLength: 1, maxLength: 100 }))
const Scalar = T.Union([T.String({ maxLength: 10_000 }), T.Number(), T.Boolean(), T.Null()])
/** An operand of gt, gte, lt, lte: a number, or a date (YYYY-MM-DD) or ISO date-time compared as an instant. */
const Ordered = T.Union([T.Number(), T.String({ minLength: 10, maxLength: 64 })], { description: 'A number, or a date or date-time (compared as instants)' })
const AnyJson = T.Union([T.String(), T.Number(), T.Boolean(), T.Null(), T.Array(T.Unknown()), T.Record(T.String(), T.Unknown())], {
  description: 'Any JSON value',
})

/** Who may decide a task: teams of the workflow's project by name, members by email. */
const TaskPeople = (description: string) =>
  T.Object(
    {
      teams: T.Optional(T.Array(T.String({ minLength: 1, maxLength: 200 }), { maxItems: 50, uniqueItems: true })),
      users: T.Optional(T.Array(T.String({ minLength: 3, maxLength: 320 }), { maxItems: 50, uniqueItems: true })),
    },
    { additionalProperties: false, description },
  )

/** The longest deadline a task may have. */
export const MAX_TASK_DUE_SECONDS = 365 * 24 * 3600
const DueUnit = T.Optional(T.Integer({ minimum: 0, maximum: MAX_TASK_DUE_SECONDS }))
/** Seconds in each unit of `dueIn`. */
export const DUE_UNIT_SECONDS = { seconds: 1, minutes: 60, hours: 3600, days: 86_400 } as const

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
          gt: T.Optional(Ordered),
          gte: T.Optional(Ordered),
          lt: T.Optional(Ordered),
          lte: T.Optional(Ordered),
          contains: T.Optional(T.String({ minLength: 1, maxLength: 10_000, description: 'A text holds it (any case), or a list holds it as an element' })),
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
  task: T.Object(
    {
      type: T.Literal('task'),
      name: T.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z_][\\w-]*$', description: 'Unique in the workflow; templates read the outcome as tasks.<name>.…' }),
      title: T.String({ minLength: 1, maxLength: 500, description: 'What is asked (templates allowed)' }),
      assignees: TaskPeople('Who may decide (at least one team or user); project admins may always'),
      approvals: T.Optional(T.Integer({ minimum: 1, maximum: 100, description: 'Distinct approvals needed (default 1); one rejection rejects' })),
      allowRequester: T.Optional(T.Boolean({ description: "Whether the run's user may decide (default false)" })),
      form: T.Optional(T.Record(T.String(), T.Unknown(), { description: 'A JSON Schema (type object) of what a decider fills in: the documented subset' })),
      dueIn: T.Optional(
        T.Object({ seconds: DueUnit, minutes: DueUnit, hours: DueUnit, days: DueUnit }, { additionalProperties: false, minProperties: 1, description: 'The deadline after the task opens (at most 365 days)' }),
      ),
      onTimeout: T.Optional(T.Union(TASK_TIMEOUT_ACTIONS.map((a) => T.Literal(a)), { description: 'At the deadline (default fail)' })),
      escalateTo: T.Optional(TaskPeople('With onTimeout: escalate, added as assignees at the deadline')),
      onReject: T.Optional(T.Union(TASK_REJECT_ACTIONS.map((a) => T.Literal(a)), { description: 'When rejected: fail the run (default), end it, or continue' })),
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

/** What a `{{…}}` may name (the console's builder checks templates with this same pattern). */
export const TEMPLATE_VARIABLE = /^(record\.[A-Za-z_][\w.-]*|workflow\.name|run\.id|now|tasks\.[A-Za-z_][\w-]*\.(decision|decidedBy|input\.[A-Za-z_][\w.-]*))$/
/** A path into a task's outcome (`tasks.approve.input.amount`): the task step's name. */
const TASK_PATH = /^tasks\.([A-Za-z_][\w-]*)\./

/** The task step a template variable or condition field reads (`tasks.<name>.…`), or null. */
export function taskNameOf(path: string): string | null {
  return TASK_PATH.exec(path)?.[1] ?? null
}

/** Every `{{…}}` in a string must be one of the known variables. */
function templateProblems(value: unknown, path: string): Problem[] {
  if (typeof value === 'string') {
    return [...value.matchAll(PLACEHOLDER)]
      .filter((m) => !TEMPLATE_VARIABLE.test(m[1] ?? ''))
      .map((m) => ({
        path,
        message: `unknown template variable {{${m[1]}}} (use record.<field>, record.id, workflow.name, run.id, now or tasks.<step>.decision|decidedBy|input.<field>)`,
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
    const before = steps.slice(0, index) as Step[]
    if (step.type === 'condition' && taskNameOf(step.if.field) === null && !before.some((s) => s.type === 'load')) {
      problems.push({ path: label, message: 'a condition needs a load step before it' })
    }
    problems.push(...templateProblems(raw, label))
    problems.push(...taskReferenceProblems(raw, label, before))
    if (step.type === 'task') problems.push(...taskStepProblems(step, label))
    const inHead = step.type === 'http' ? placeholderInHead(step.url) : null
    if (inHead !== null) problems.push({ path: `${label}.url`, message: placeholderInHeadMessage(inHead) })
  })
  return problems
}

/** Every `tasks.<name>.…` a step reads (its templates, a condition's field) must name a task step before it. */
function taskReferenceProblems(raw: unknown, label: string, before: Step[]): Problem[] {
  const tasks = new Set(before.filter((s) => s.type === 'task').map((s) => s.name))
  const paths: string[] = []
  const walk = (value: unknown): void => {
    if (typeof value === 'string') for (const m of value.matchAll(PLACEHOLDER)) paths.push(m[1] ?? '')
    else if (Array.isArray(value)) value.forEach(walk)
    else if (value && typeof value === 'object') Object.values(value).forEach(walk)
  }
  walk(raw)
  const field = (raw as { type: string; if?: { field?: unknown } }).if?.field
  if ((raw as { type: string }).type === 'condition' && typeof field === 'string') paths.push(field)
  return [...new Set(paths.map(taskNameOf).filter((name): name is string => name !== null && !tasks.has(name)))].map((name) => ({
    path: label,
    message: `reads tasks.${name}, but no task step named "${name}" comes before it`,
  }))
}

/** What a task step needs besides its shape: someone to ask, a form in the subset, escalation only with escalate. */
function taskStepProblems(step: Extract<Step, { type: 'task' }>, label: string): Problem[] {
  const problems: Problem[] = []
  const nobody = (people: { teams?: string[]; users?: string[] } | undefined) => (people?.teams?.length ?? 0) + (people?.users?.length ?? 0) === 0
  if (nobody(step.assignees)) problems.push({ path: `${label}.assignees`, message: 'must name at least one team or user' })
  if (step.form !== undefined) problems.push(...formSchemaProblems(step.form, `${label}.form`))
  if (step.onTimeout === 'escalate' && nobody(step.escalateTo)) problems.push({ path: `${label}.escalateTo`, message: 'must name at least one team or user with onTimeout: escalate' })
  if (step.onTimeout !== 'escalate' && step.escalateTo !== undefined) problems.push({ path: `${label}.escalateTo`, message: 'is only used with onTimeout: escalate' })
  if (step.onTimeout !== undefined && step.dueIn === undefined) problems.push({ path: `${label}.onTimeout`, message: 'needs a dueIn deadline' })
  const due = dueInSeconds(step)
  if (due !== null && (due < 1 || due > MAX_TASK_DUE_SECONDS)) problems.push({ path: `${label}.dueIn`, message: 'must add up to between 1 second and 365 days' })
  return problems
}

/** A task step's deadline after it opens, in seconds (null without one). */
export function dueInSeconds(step: Pick<Extract<Step, { type: 'task' }>, 'dueIn'>): number | null {
  if (step.dueIn === undefined) return null
  return Object.entries(step.dueIn).reduce((sum, [unit, n]) => sum + (n ?? 0) * DUE_UNIT_SECONDS[unit as keyof typeof DUE_UNIT_SECONDS], 0)
}

function isObjectWithSteps(value: unknown): boolean {
  return !!value && typeof value === 'object' && Array.isArray((value as { steps?: unknown }).steps)
}

/**
 * What a version pins: everything but the trigger settings (`webhook`). `text` keeps the author's key order (the
 * editor, the API and the version diff show what was typed); `canonical` sorts the keys, so that re-ordering keys
 * is not a new version (its hash decides) — but for a form's fields, whose order is the order the task page shows
 * them in.
 */
export function pinnedDefinition(definition: WorkflowDefinition): { text: string; canonical: string } {
  const { webhook: _webhook, ...versioned } = definition
  return { text: JSON.stringify(versioned), canonical: canonicalJson(versioned, isFormFields) }
}

/** The canonical JSON of what a version pins (`pinnedDefinition`). */
export const canonicalDefinition = (definition: WorkflowDefinition): string => pinnedDefinition(definition).canonical

/** `…steps.<i>.form.properties`: a task step's form fields. */
const isFormFields = (path: readonly string[]) => path.length >= 4 && path.at(-1) === 'properties' && path.at(-2) === 'form' && path.at(-4) === 'steps'


/**
 * Schema problems in plain words: every TypeBox error becomes `{path, message}` where the path reads like the
 * field (`steps[2].set`) and the message states the field's whole rule ("must be an integer between 1 and 100"),
 * never TypeBox's own wording ("Expected union value"). The API's 400s, the apply file and workflow
 * definitions all report through here, so one schema reads the same wherever it is checked.
 */
import { Kind, type TSchema } from '@sinclair/typebox'
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors'
import { Value } from '@sinclair/typebox/value'

export interface Problem {
  path: string
  message: string
}

/** `/steps/0/type` → `steps[0].type`, prefixed with `base`. */
export function joinPath(base: string, pointer: string): string {
  return pointer
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), base)
}

/** One problem per path (the first TypeBox reports), in document order; the root is `(root)`. */
export function schemaProblems(schema: TSchema, value: unknown, base = ''): Problem[] {
  return explainErrors(Value.Errors(schema, value), base, '(root)')
}

/**
 * TypeBox errors (from `Value.Errors` or a compiled checker, as Elysia's validation error holds them) as
 * problems: one per path, the root named `root`.
 */
export function explainErrors(errors: Iterable<ValueError>, base: string, root: string): Problem[] {
  const all = [...errors]
  // A value of the wrong kind (a string where an object goes) is one problem, not one more per field inside it.
  const wrongKind = all.filter((e) => WRONG_KIND.has(e.type)).map((e) => `${e.path}/`)
  const seen = new Set<string>()
  const problems: Problem[] = []
  for (const error of all) {
    if (wrongKind.some((prefix) => error.path.startsWith(prefix))) continue
    for (const problem of explain(error, base)) {
      const path = problem.path || root
      if (seen.has(path)) continue
      seen.add(path)
      problems.push({ path, message: problem.message })
    }
  }
  return problems
}

const WRONG_KIND = new Set([
  ValueErrorType.Object,
  ValueErrorType.Array,
  ValueErrorType.String,
  ValueErrorType.Integer,
  ValueErrorType.Number,
  ValueErrorType.Boolean,
  ValueErrorType.Null,
  ValueErrorType.Literal,
  ValueErrorType.Union,
])

function explain(error: ValueError, base: string): Problem[] {
  const path = joinPath(base, error.path)
  const schema = error.schema
  switch (error.type) {
    case ValueErrorType.ObjectAdditionalProperties:
      return [{ path, message: 'unknown field' }]
    case ValueErrorType.ObjectRequiredProperty:
      return [{ path, message: `is required (${ruleOf(schema)})` }]
    case ValueErrorType.ObjectMinProperties: {
      const names = Object.keys((schema.properties ?? {}) as Record<string, unknown>)
      const count = schema.minProperties as number
      return [{ path, message: names.length > 0 ? `must set at least ${count} of ${names.join(', ')}` : `must have at least ${count} field${count === 1 ? '' : 's'}` }]
    }
    case ValueErrorType.Union: {
      // An object union told apart by one literal field (a workflow step's `type`): explain against the member
      // the value names, or say which values that field takes.
      const key = discriminator(schema)
      const value = error.value
      if (key && isRecord(value)) {
        const members = schema.anyOf as TSchema[]
        const member = members.find((m) => (m.properties as Record<string, TSchema>)[key]!.const === value[key])
        if (member) return [...Value.Errors(member, value)].flatMap((inner) => explain(inner, path))
        return [{ path: `${path ? `${path}.` : ''}${key}`, message: ruleOf({ anyOf: members.map((m) => (m.properties as Record<string, TSchema>)[key]!) } as unknown as TSchema) }]
      }
      // An object where "an object or null" goes: say what is wrong inside it, not that it is neither.
      const objects = ((schema.anyOf as TSchema[] | undefined) ?? []).filter((m) => m.type === 'object')
      if (isRecord(value) && objects.length === 1) return [...Value.Errors(objects[0]!, value)].flatMap((inner) => explain(inner, path))
      return [{ path, message: ruleOf(schema) }]
    }
    default:
      return [{ path, message: ruleOf(schema) }]
  }
}

/** The property every member of an object union holds as a literal, with a different value in each. */
function discriminator(schema: TSchema): string | undefined {
  const members = schema.anyOf as TSchema[] | undefined
  if (!members || members.length < 2 || !members.every((m) => m.type === 'object' && m.properties)) return undefined
  const first = members[0]!.properties as Record<string, TSchema>
  return Object.keys(first).find((key) => {
    const values = members.map((m) => (m.properties as Record<string, TSchema>)[key]?.const)
    return values.every((v) => v !== undefined) && new Set(values).size === values.length
  })
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** The rule a value must follow, as "must be …" (or a schema's own `error` text). */
export function ruleOf(schema: TSchema): string {
  if (typeof schema.error === 'string') return schema.error
  return `must be ${describe(schema)}`
}

function describe(schema: TSchema): string {
  if (schema.const !== undefined) return JSON.stringify(schema.const)
  if (Array.isArray(schema.anyOf)) {
    const members = schema.anyOf as TSchema[]
    if (members.every((m) => m.const !== undefined)) return `one of ${members.map((m) => m.const).join(', ')}`
    return members.map(describe).join(', or ')
  }
  switch (schema.type) {
    case 'string':
      return describeString(schema)
    case 'integer':
      return `an integer${bounds(schema.minimum, schema.maximum)}`
    case 'number':
      return `a number${bounds(schema.minimum, schema.maximum)}`
    case 'boolean':
      return 'true or false'
    case 'null':
      return 'null'
    case 'array':
      return `a list${sizes(schema.minItems, schema.maxItems, 'item')}`
    case 'object':
      return schema.minProperties ? `an object with at least ${schema.minProperties} field${schema.minProperties === 1 ? '' : 's'}` : 'an object'
  }
  return schema[Kind] === 'Unknown' || schema[Kind] === 'Any' ? 'a JSON value' : 'valid'
}

const FORMATS: Record<string, string> = {
  'date-time': 'an ISO 8601 date-time',
  uuid: 'a UUID',
  email: 'an email address',
  uri: 'a URL',
}

function describeString(schema: TSchema): string {
  if (Array.isArray(schema.enum)) return `one of ${schema.enum.join(', ')}`
  const format = typeof schema.format === 'string' ? FORMATS[schema.format] : undefined
  if (format) return format
  const min = schema.minLength as number | undefined
  const max = schema.maxLength as number | undefined
  const text = min === 1 ? `a non-empty string${max === undefined ? '' : ` of at most ${max} characters`}` : `a string${sizes(min, max, 'character')}`
  return typeof schema.pattern === 'string' ? `${text} matching ${schema.pattern}` : text
}

function bounds(min: unknown, max: unknown): string {
  if (typeof min === 'number' && typeof max === 'number') return ` between ${min} and ${max}`
  if (typeof min === 'number') return ` of at least ${min}`
  if (typeof max === 'number') return ` of at most ${max}`
  return ''
}

function sizes(min: unknown, max: unknown, unit: string): string {
  const plural = (n: number) => `${n} ${unit}${n === 1 ? '' : 's'}`
  if (typeof min === 'number' && min > 0 && typeof max === 'number') return ` of ${min} to ${plural(max)}`
  if (typeof min === 'number' && min > 0) return ` of at least ${plural(min)}`
  if (typeof max === 'number') return ` of at most ${plural(max)}`
  return ''
}

export function formatProblems(problems: Problem[]): string {
  return problems.map((p) => `${p.path}: ${p.message}`).join('\n')
}

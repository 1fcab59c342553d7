/**
 * A workflow's steps and its collection's types (docs/records.md "Workflows and types").
 *
 * At publish, against the collection's schema (none: any field, any value): an `update` step may set only the
 * schema's fields, and a constant value must be one the field takes; a `condition` on a record field must name a
 * field of the schema, use an operator its type takes (`gt`, `gte`, `lt`, `lte` on numbers, integers, dates and
 * date-times; `contains` on text, email, url and multiselect fields), with operands of its type. A templated value is
 * judged when the step runs (`invalid_field`), after `typedChanges` has read its text as the field's type.
 *
 * When a condition runs, values are compared by what they are: numbers as numbers, dates and date-times as instants,
 * `contains` as a case-insensitive substring of a text or an element of a list; values of different kinds never match
 * (a record written before its schema changed answers false, never an error).
 */
import { PLACEHOLDER } from '../../lib/outbound/url-template.ts'
import { parseIsoDateTime } from '../../lib/time.ts'
import type { Problem } from '../../lib/validation.ts'
import { type FieldType, type StoredField, valueProblem } from '../records/schema.ts'
import { type Step, stepLabel, taskNameOf } from './definition.ts'

type Condition = Extract<Step, { type: 'condition' }>['if']
export type OrderOperator = 'gt' | 'gte' | 'lt' | 'lte'
export const ORDER_OPERATORS: readonly OrderOperator[] = ['gt', 'gte', 'lt', 'lte']

const ORDERED: readonly FieldType[] = ['number', 'integer', 'date', 'datetime']
const SEARCHABLE: readonly FieldType[] = ['text', 'email', 'url', 'multiselect']

/** Whether a value holds a `{{…}}` anywhere (a templated value: judged when the step runs). */
function isTemplated(value: unknown): boolean {
  if (typeof value === 'string') return value.match(PLACEHOLDER) !== null
  if (Array.isArray(value)) return value.some(isTemplated)
  if (value && typeof value === 'object') return Object.values(value).some(isTemplated)
  return false
}

/** What the steps break of the collection's fields (empty list: untyped, nothing), each under `base`'s step label. */
export function typedStepProblems(steps: readonly Step[], fields: readonly StoredField[], base = ''): Problem[] {
  if (fields.length === 0) return []
  const byName = new Map(fields.map((f) => [f.name, f]))
  const problems: Problem[] = []
  steps.forEach((step, index) => {
    const label = `${base ? `${base}.` : ''}steps[${index}] (${stepLabel(step, index)})`
    if (step.type === 'update') {
      for (const [name, value] of Object.entries(step.set)) {
        const field = byName.get(name)
        const at = `${label}.set.${name}`
        if (!field) problems.push({ path: at, message: "unknown field: the collection's schema has no such field" })
        else if (!isTemplated(value)) {
          const problem = value === null ? (field.required ? 'is required: it cannot be set to null' : null) : valueProblem(field, value)
          if (problem) problems.push({ path: at, message: problem })
        }
      }
    }
    if (step.type === 'condition' && taskNameOf(step.if.field) === null) problems.push(...conditionProblems(step.if, byName, `${label}.if`))
  })
  return problems
}

function conditionProblems(test: Condition, byName: ReadonlyMap<string, StoredField>, at: string): Problem[] {
  const [name, ...rest] = test.field.split('.')
  const field = byName.get(name ?? '')
  if (!field) return [{ path: `${at}.field`, message: `the collection's schema has no field ${name}` }]
  // A json field holds anything: its parts are not typed.
  if (field.type === 'json') return []
  if (rest.length > 0) return [{ path: `${at}.field`, message: `${name} is a ${field.type} field: it has no parts to name` }]
  const problems: Problem[] = []
  const operand = (key: string, value: unknown, as: StoredField = field) => {
    if (value === null) return
    const problem = valueProblem(as, value)
    if (problem) problems.push({ path: `${at}.${key}`, message: problem })
  }
  // Equality on a multiselect compares whole lists: a scalar operand never matches, so only order and search are typed there.
  if (field.type !== 'multiselect') {
    if (test.equals !== undefined) operand('equals', test.equals)
    if (test.notEquals !== undefined) operand('notEquals', test.notEquals)
    test.in?.forEach((value, i) => operand(`in[${i}]`, value))
  }
  for (const op of ORDER_OPERATORS) {
    if (test[op] === undefined) continue
    if (!ORDERED.includes(field.type)) problems.push({ path: `${at}.${op}`, message: `a ${field.type} field is not ordered (${op} takes number, integer, date and datetime fields)` })
    else operand(op, test[op], field.type === 'integer' ? { ...field, type: 'number' } : field)
  }
  if (test.contains !== undefined) {
    if (!SEARCHABLE.includes(field.type)) problems.push({ path: `${at}.contains`, message: `a ${field.type} field takes no contains (text, email, url and multiselect fields do)` })
    else if (field.type === 'multiselect') operand('contains', test.contains, { ...field, type: 'select' })
  }
  return problems
}

/** A value as an instant, when it is a date or an ISO date-time; null otherwise. */
function instantOf(value: unknown): number | null {
  if (typeof value !== 'string') return null
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return parseIsoDateTime(`${value}T00:00:00Z`)
  return /^\d{4}-\d{2}-\d{2}T/.test(value) ? parseIsoDateTime(value) : null
}

/** `value op operand` by what both are (numbers, then instants); values of different kinds do not compare (false). */
export function compareOrdered(op: OrderOperator, value: unknown, operand: unknown): boolean {
  let pair: [number, number] | null = null
  if (typeof value === 'number' && typeof operand === 'number') pair = [value, operand]
  else {
    const [a, b] = [instantOf(value), instantOf(operand)]
    if (a !== null && b !== null) pair = [a, b]
  }
  if (pair === null) return false
  const [a, b] = pair
  return op === 'gt' ? a > b : op === 'gte' ? a >= b : op === 'lt' ? a < b : a <= b
}

/** Whether a condition's test holds of the value its field has: every test given must (the executor's condition step, the dry run). */
export function conditionHolds(test: Condition, value: unknown): boolean {
  const checks: boolean[] = []
  if (test.equals !== undefined) checks.push(value === test.equals)
  if (test.notEquals !== undefined) checks.push(value !== test.notEquals)
  if (test.in !== undefined) checks.push(test.in.includes(value as never))
  if (test.exists !== undefined) checks.push((value !== undefined && value !== null) === test.exists)
  for (const op of ORDER_OPERATORS) if (test[op] !== undefined) checks.push(compareOrdered(op, value, test[op]))
  if (test.contains !== undefined) checks.push(containsValue(value, test.contains))
  return checks.every(Boolean)
}

/** Whether a text holds the operand (any case) or a list holds it as an element. */
export function containsValue(value: unknown, operand: unknown): boolean {
  if (typeof value === 'string' && typeof operand === 'string') return value.toLowerCase().includes(operand.toLowerCase())
  return Array.isArray(value) && value.includes(operand)
}

/**
 * An update's rendered values read as their fields' types where they came from a template (rendering makes text):
 * `"42"` for a number or integer, `"true"`/`"false"` for a boolean, JSON for a multiselect or json field, and an empty
 * text as no value (null) for any field but text. Constants, untyped collections and text that does not read as the
 * type are left as they are (the schema check then names the field).
 */
export function typedChanges(set: Record<string, unknown>, rendered: Record<string, unknown>, fields: readonly StoredField[]): Record<string, unknown> {
  if (fields.length === 0) return rendered
  const byName = new Map(fields.map((f) => [f.name, f]))
  return Object.fromEntries(
    Object.entries(rendered).map(([name, value]) => {
      const field = byName.get(name)
      if (!field || typeof value !== 'string' || !isTemplated(set[name])) return [name, value]
      return [name, textAsType(field.type, value)]
    }),
  )
}

const NUMBER = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/

function textAsType(type: FieldType, text: string): unknown {
  if (type === 'text') return text
  if (text.trim() === '') return null
  switch (type) {
    case 'number':
    case 'integer':
      return NUMBER.test(text.trim()) ? Number(text.trim()) : text
    case 'boolean':
      return text === 'true' ? true : text === 'false' ? false : text
    case 'multiselect':
    case 'json':
      try {
        return JSON.parse(text) as unknown
      } catch {
        return text
      }
    default:
      return text
  }
}

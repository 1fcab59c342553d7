/**
 * A task's form (docs/workflows.md "Task steps"): a JSON Schema of what a decider fills in, limited to a documented
 * subset a console can render field by field — an object of string (enum, format, minLength, maxLength),
 * number/integer (minimum, maximum) and boolean properties, `required`, `title`, `description`. The subset is checked
 * when the workflow is published (`formSchemaProblems`); a decision's input is validated against the schema with Ajv
 * (`formInputProblems`), each schema compiled once.
 */
import Ajv, { type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import type { Problem } from './validation.ts'

/** The `format`s a string property may name (Ajv's definitions of them). */
export const FORM_FORMATS = ['email', 'date', 'date-time', 'time', 'uri', 'uuid'] as const
/** The most properties a form may have. */
export const MAX_FORM_PROPERTIES = 50

const COMMON = ['type', 'title', 'description'] as const
const KEYWORDS: Record<string, readonly string[]> = {
  string: [...COMMON, 'enum', 'format', 'minLength', 'maxLength'],
  number: [...COMMON, 'minimum', 'maximum'],
  integer: [...COMMON, 'minimum', 'maximum'],
  boolean: COMMON,
}
const ROOT_KEYWORDS = [...COMMON, 'properties', 'required']

const isObject = (value: unknown): value is Record<string, unknown> => !!value && typeof value === 'object' && !Array.isArray(value)
const isCount = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0
const isText = (value: unknown) => typeof value === 'string' && value.length <= 1000

/** Everything in `schema` outside the subset, each problem at its path under `base` (`steps[1] (approve).form.properties.amount.minimum`). */
export function formSchemaProblems(schema: unknown, base: string): Problem[] {
  if (!isObject(schema)) return [{ path: base, message: 'must be a JSON Schema object with type: object' }]
  const problems: Problem[] = []
  const at = (path: string, message: string) => problems.push({ path, message })
  for (const key of Object.keys(schema)) if (!ROOT_KEYWORDS.includes(key)) at(`${base}.${key}`, `is not supported in a form (only ${ROOT_KEYWORDS.join(', ')})`)
  if (schema.type !== 'object') at(`${base}.type`, 'must be "object"')
  for (const key of ['title', 'description']) if (schema[key] !== undefined && !isText(schema[key])) at(`${base}.${key}`, 'must be a string of at most 1000 characters')
  const properties = schema.properties ?? {}
  if (!isObject(properties)) {
    at(`${base}.properties`, 'must be an object of the form\'s fields')
    return problems
  }
  const names = Object.keys(properties)
  if (names.length > MAX_FORM_PROPERTIES) at(`${base}.properties`, `must have at most ${MAX_FORM_PROPERTIES} fields`)
  for (const name of names) {
    const path = `${base}.properties.${name}`
    if (!/^[A-Za-z_][\w-]{0,99}$/.test(name)) at(path, 'a field name is a letter or _ then letters, digits, _ or - (at most 100)')
    problems.push(...propertyProblems(properties[name], path))
  }
  const required = schema.required
  if (required !== undefined) {
    if (!Array.isArray(required) || !required.every((r) => typeof r === 'string')) at(`${base}.required`, 'must be an array of field names')
    else for (const name of required) if (!Object.hasOwn(properties, name)) at(`${base}.required`, `names "${name}", which is not a field of properties`)
  }
  return problems
}

function propertyProblems(property: unknown, path: string): Problem[] {
  if (!isObject(property)) return [{ path, message: 'must be an object with a type (string, number, integer or boolean)' }]
  const type = property.type
  if (typeof type !== 'string' || !Object.hasOwn(KEYWORDS, type)) return [{ path: `${path}.type`, message: 'must be one of string, number, integer, boolean' }]
  const problems: Problem[] = []
  const at = (key: string, message: string) => problems.push({ path: `${path}.${key}`, message })
  for (const key of Object.keys(property)) if (!KEYWORDS[type]!.includes(key)) at(key, `is not supported for a ${type} field (only ${KEYWORDS[type]!.join(', ')})`)
  for (const key of ['title', 'description']) if (property[key] !== undefined && !isText(property[key])) at(key, 'must be a string of at most 1000 characters')
  for (const key of ['minLength', 'maxLength']) if (property[key] !== undefined && !isCount(property[key])) at(key, 'must be a non-negative integer')
  for (const key of ['minimum', 'maximum']) if (property[key] !== undefined && !Number.isFinite(property[key])) at(key, 'must be a number')
  if (property.enum !== undefined && (!Array.isArray(property.enum) || property.enum.length === 0 || !property.enum.every(isText))) {
    at('enum', 'must be a non-empty array of strings')
  }
  if (property.format !== undefined && !(FORM_FORMATS as readonly unknown[]).includes(property.format)) at('format', `must be one of ${FORM_FORMATS.join(', ')}`)
  return problems
}

const ajv = new Ajv({ allErrors: true, strict: true })
addFormats(ajv, [...FORM_FORMATS])
/** Compiled forms by their JSON text: a form is compiled once however many decisions it checks. */
const compiled = new Map<string, ValidateFunction>()
/** Forms kept compiled at most (each workflow version's forms; the oldest are dropped beyond it). */
const MAX_COMPILED = 1000

function validatorOf(form: string): ValidateFunction {
  let validate = compiled.get(form)
  if (validate === undefined) {
    // A field the form does not have is refused by name rather than stored unseen.
    validate = ajv.compile({ ...(JSON.parse(form) as object), additionalProperties: false })
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!)
    compiled.set(form, validate)
  }
  return validate
}

/**
 * What is wrong with a decision's `input` for the form (its JSON text, checked when published), each problem at a
 * JSON pointer (`/amount`; a missing required field at its own pointer). Empty: valid. No form: only an absent input
 * (or an empty object) is valid.
 */
export function formInputProblems(form: string | null, input: unknown): Problem[] {
  if (form === null) return input === undefined || (isObject(input) && Object.keys(input).length === 0) ? [] : [{ path: '', message: 'this task has no form: send no input' }]
  const validate = validatorOf(form)
  if (validate(input ?? {})) return []
  return (validate.errors ?? []).map((error) => {
    const missing = error.keyword === 'required' ? `/${(error.params as { missingProperty: string }).missingProperty}` : ''
    const extra = error.keyword === 'additionalProperties' ? `/${(error.params as { additionalProperty: string }).additionalProperty}` : ''
    return { path: `${error.instancePath}${missing}${extra}`, message: error.message ?? 'is not valid' }
  })
}

/**
 * Requests made from an OpenAPI 3.1 document, for the conformance test: valid values from each schema
 * (json-schema-faker, seeded), and for every rule a schema states, a value that breaks it — found by walking the
 * schema along a valid value, and kept only when ajv agrees it breaks the document. Answers are checked with ajv
 * against the document's own response schemas.
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { createGeneratorSync } from 'json-schema-faker'

export type Json = Record<string, any>

/** A copy of `schema` with every `#/components/schemas/…` reference replaced by its target. */
export function deref(schema: unknown, components: Json): any {
  if (Array.isArray(schema)) return schema.map((item) => deref(item, components))
  if (schema === null || typeof schema !== 'object') return schema
  const ref = (schema as Json).$ref
  if (typeof ref === 'string') return deref(components[ref.replace('#/components/schemas/', '')], components)
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, deref(value, components)]))
}

export function schemaValidator(): (schema: Json) => ValidateFunction {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true })
  addFormats(ajv)
  const byObject = new WeakMap<Json, ValidateFunction>()
  const byText = new Map<string, ValidateFunction>()
  return (schema) => {
    let validate = byObject.get(schema)
    if (validate) return validate
    const key = JSON.stringify(schema)
    validate = byText.get(key) ?? ajv.compile(schema)
    byText.set(key, validate)
    byObject.set(schema, validate)
    return validate
  }
}

/** One operation of an OpenAPI document: its path template (`/v1/notes/{id}`), its method (lower case) and its object. */
export interface Operation {
  path: string
  method: string
  operation: Json
}

/** Every operation of `doc`, in the document's order. */
export function operationsOf(doc: Json): Operation[] {
  return Object.entries(doc.paths as Record<string, Record<string, Json>>).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ path, method, operation })),
  )
}

/** The operation's parameters that travel `where` (path, query, header). */
export const parametersOf = (operation: Json, where: string): Json[] => ((operation.parameters ?? []) as Json[]).filter((p) => p.in === where)

/** The operation's JSON request body schema, its references resolved; undefined when it takes no body. */
export function bodySchemaOf(doc: Json, operation: Json): Json | undefined {
  const schema = operation.requestBody?.content?.['application/json']?.schema
  return schema ? deref(schema, doc.components.schemas) : undefined
}

/** Seeded generators of valid values: only required properties, or every property. */
export function valueGenerators(seed: number) {
  // Short strings and lists: the maxima are reached on purpose elsewhere (atMaximum, the mutations).
  const options = { seed, maxDefaultItems: 2, maxItems: 2, maxLength: 40 }
  const minimal = createGeneratorSync({ ...options, optionalsProbability: 0 })
  const full = createGeneratorSync({ ...options, optionalsProbability: 1 })
  const generateMinimal = (schema: Json) => {
    try {
      return minimal.generate(schema)
    } catch {
      return full.generate(schema) // an object that needs some optional field (minProperties)
    }
  }
  return { minimal: generateMinimal, full: (schema: Json) => full.generate(schema) }
}

/** A value that breaks one rule, and the field it belongs to (`steps[0].name`, `limit`). */
export interface Mutation {
  field: string
  rule: string
  value: unknown
}

const WRONG_TYPE: Record<string, unknown> = { string: 12345, integer: 'twelve', number: 'twelve', boolean: 'yes', object: 'an object?', array: 'a list?', null: 'not null' }

function joinField(base: string, key: string | number): string {
  return typeof key === 'number' ? `${base}[${key}]` : base ? `${base}.${key}` : key
}

/**
 * Every rule-breaking change of `value` under `schema`, as the whole changed value. Walks objects and arrays
 * along the valid value; in an `anyOf` it follows the member the value matches. Each candidate is a guess:
 * the caller keeps those the full schema refuses.
 */
export function mutations(schema: Json, value: unknown, valid: (schema: Json, value: unknown) => boolean, field = ''): Mutation[] {
  const out: Mutation[] = []
  const add = (rule: string, changed: unknown, at = field) => out.push({ field: at, rule, value: changed })
  if (Array.isArray(schema.anyOf)) {
    const member = (schema.anyOf as Json[]).find((m) => valid(m, value))
    return member ? mutations({ ...member, ...withoutAnyOf(schema) }, value, valid, field) : out
  }
  const type = schema.const !== undefined ? typeof schema.const : schema.type
  if (typeof type === 'string' && WRONG_TYPE[type] !== undefined) add(`not ${type}`, WRONG_TYPE[type])
  if (schema.const !== undefined) add('other constant', `${String(schema.const)}-not`)
  if (Array.isArray(schema.enum)) add('not in enum', 'not-one-of-them')
  if (type === 'string') {
    if (typeof schema.maxLength === 'number') add('over maxLength', 'x'.repeat(schema.maxLength + 1))
    if (typeof schema.minLength === 'number' && schema.minLength > 0) add('under minLength', '')
    if (schema.format === 'date-time') add('not a date-time', 'yesterday')
    if (schema.format === 'uuid') add('not a uuid', 'not-a-uuid')
    if (typeof schema.pattern === 'string') add('not matching pattern', '%%')
  }
  if (type === 'integer' || type === 'number') {
    if (typeof schema.minimum === 'number') add('under minimum', schema.minimum - 1)
    if (typeof schema.maximum === 'number') add('over maximum', schema.maximum + 1)
    if (type === 'integer') add('not whole', 1.5)
  }
  if (type === 'array' && Array.isArray(value)) {
    if (typeof schema.maxItems === 'number') add('over maxItems', Array.from({ length: schema.maxItems + 1 }, () => value[0]))
    if (typeof schema.minItems === 'number' && schema.minItems > 0) add('under minItems', [])
    value.forEach((item, index) => {
      for (const inner of mutations(schema.items ?? {}, item, valid, joinField(field, index))) {
        add(inner.rule, value.map((v, i) => (i === index ? inner.value : v)), inner.field)
      }
    })
  }
  if (type === 'object' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const record = value as Json
    const properties = (schema.properties ?? {}) as Record<string, Json>
    for (const name of (schema.required ?? []) as string[]) {
      const { [name]: _dropped, ...rest } = record
      add('missing required', rest, joinField(field, name))
    }
    if (schema.additionalProperties === false) add('unknown property', { ...record, unexpectedField: 1 }, joinField(field, 'unexpectedField'))
    if (typeof schema.minProperties === 'number' && schema.minProperties > 0) add('under minProperties', {})
    for (const [name, inner] of Object.entries(record)) {
      const propertySchema = properties[name]
      if (!propertySchema) continue
      for (const mutation of mutations(propertySchema, inner, valid, joinField(field, name))) {
        add(mutation.rule, { ...record, [name]: mutation.value }, mutation.field)
      }
    }
  }
  return out
}

function withoutAnyOf(schema: Json): Json {
  const { anyOf: _anyOf, ...rest } = schema
  return rest
}

/**
 * `value` with each string field that has a `maxLength` (and no format or pattern) at its maximum, one field
 * at a time, filled with a character JSON escapes to six bytes: the largest body each maximum allows.
 */
export function atMaximum(schema: Json, value: unknown): { field: string; value: unknown }[] {
  if (schema.type !== 'object' || value === null || typeof value !== 'object' || Array.isArray(value)) return []
  const record = value as Json
  return Object.entries((schema.properties ?? {}) as Record<string, Json>).flatMap(([name, property]) => {
    if (property.type === 'string' && typeof property.maxLength === 'number' && !property.format && !property.pattern && !property.enum) {
      return [{ field: name, value: { ...record, [name]: '\u0001'.repeat(property.maxLength) } }]
    }
    return atMaximum(property, record[name]).map((inner) => ({ field: `${name}.${inner.field}`, value: { ...record, [name]: inner.value } }))
  })
}

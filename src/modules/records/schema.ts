/**
 * A collection's schema (docs/records.md): the TypeBox shape of its field list, the checks a shape cannot state
 * (names unique, options only where they belong, relation targets, defaults), and the validation of a record's data
 * against the fields. Pure: no storage. A relation's target record is looked up by the caller
 * (./service.ts), which hands the references `recordProblems` collects back as one more list of problems.
 *
 * The rules, in one place:
 * - data holds only the schema's fields: an unknown key is a problem ("unknown field"), as everywhere in the API;
 * - a required field must be present and not null; an optional one may be absent or null;
 * - `integer` is a number without a fraction (a safe integer); `number` any JSON number;
 * - `date` is `YYYY-MM-DD`, a real day; `datetime` ISO 8601 with seconds and an offset (`Z` or `±HH:MM`);
 * - `email` is something@domain.tld without spaces; `url` an absolute `http:` or `https:` URL;
 * - `select` one of its options; `multiselect` a list of its options without repeats;
 * - `relation` a record id (string) of the target collection in the same environment;
 * - `json` any JSON value.
 */
import { type Static, t as T } from 'elysia'
import type { RecordValueKind } from '../../db/dialect.ts'
import { parseIsoDateTime } from '../../lib/time.ts'
import type { Problem } from '../../lib/validation.ts'

export const FIELD_TYPES = ['text', 'number', 'integer', 'boolean', 'date', 'datetime', 'email', 'url', 'select', 'multiselect', 'json', 'relation'] as const
export type FieldType = (typeof FIELD_TYPES)[number]

export const MAX_SCHEMA_FIELDS = 200
const strict = { additionalProperties: false } as const

/** One field of a schema, as the API, the console and the apply file write it. */
export const SchemaField = T.Object(
  {
    name: T.String({
      minLength: 1,
      maxLength: 64,
      pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
      error: 'must be a letter or _ then letters, digits or _ (at most 64 characters)',
    }),
    type: T.UnionEnum(FIELD_TYPES),
    required: T.Optional(T.Boolean()),
    label: T.Optional(T.String({ maxLength: 200 })),
    description: T.Optional(T.String({ maxLength: 2000 })),
    default: T.Optional(
      T.Union([T.String(), T.Number(), T.Boolean(), T.Array(T.Unknown()), T.Record(T.String(), T.Unknown())], {
        description: 'Written when the whole record is written without this field; must itself conform',
      }),
    ),
    indexed: T.Optional(T.Boolean({ description: 'An expression index on the field for this collection (docs/records.md)' })),
    options: T.Optional(T.Array(T.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: 500, description: 'select and multiselect: the values allowed' })),
    collection: T.Optional(T.String({ minLength: 1, maxLength: 200, description: "relation: the target collection's name (in this project)" })),
  },
  strict,
)
export type SchemaField = Static<typeof SchemaField>

export const SchemaFields = T.Array(SchemaField, { maxItems: MAX_SCHEMA_FIELDS })

/** The longest record id (the records' own ids, and so a relation's value). */
export const RECORD_ID_MAX_LENGTH = 1024

/**
 * A field as stored: a relation's target by the collection's id, so that renaming the collection keeps the relation
 * (the API and the apply file show and take its name).
 */
export type StoredField = Omit<SchemaField, 'collection'> & { collectionId?: number }

const VALUE_KINDS: Partial<Record<FieldType, RecordValueKind>> = { number: 'number', integer: 'number', boolean: 'boolean', datetime: 'datetime' }
/** How a field's values compare in a records list and in its index (docs/records.md "Listing records"): every other type as text. */
export const valueKindOf = (type: FieldType): RecordValueKind => VALUE_KINDS[type] ?? 'text'

const WITH_OPTIONS: readonly FieldType[] = ['select', 'multiselect']
/** Types whose value is one scalar: the only ones an index serves. */
const NOT_INDEXABLE: readonly FieldType[] = ['multiselect', 'json']

/**
 * What a shape-checked field list breaks that its shape cannot say, each at `fields[i].key`: repeated names, options
 * missing, repeated or where they do not belong, a relation without a target or to a collection the project lacks
 * (`collections`: its names), `indexed` on a list or JSON field, a default that does not conform.
 */
export function schemaFieldProblems(fields: readonly SchemaField[], collections: ReadonlySet<string>, base = 'fields'): Problem[] {
  const problems: Problem[] = []
  const seen = new Set<string>()
  fields.forEach((field, i) => {
    const at = (key: string, message: string) => problems.push({ path: `${base}[${i}].${key}`, message })
    if (seen.has(field.name)) at('name', `repeats the field name ${field.name}`)
    seen.add(field.name)
    const takesOptions = WITH_OPTIONS.includes(field.type)
    if (takesOptions && field.options === undefined) at('options', `is required for a ${field.type} field (a non-empty list of values)`)
    if (!takesOptions && field.options !== undefined) at('options', 'is only for select and multiselect fields')
    if (field.options && new Set(field.options).size !== field.options.length) at('options', 'must not repeat a value')
    if (field.type === 'relation') {
      if (field.collection === undefined) at('collection', "is required for a relation field (the target collection's name)")
      else if (!collections.has(field.collection)) at('collection', `names no collection of this project: ${field.collection}`)
    } else if (field.collection !== undefined) at('collection', 'is only for relation fields')
    if (field.indexed && NOT_INDEXABLE.includes(field.type)) at('indexed', `is not available for a ${field.type} field (only single values are indexed)`)
    if (field.default !== undefined) {
      if (field.type === 'relation') at('default', 'is not available for a relation field')
      else {
        const problem = valueProblem(field, field.default)
        if (problem) at('default', problem)
      }
    }
  })
  return problems
}

/** The fields as stored (`collectionIds`: the project's collections by name); each field's keys in one order, absent ones left out. */
export function storedFields(fields: readonly SchemaField[], collectionIds: ReadonlyMap<string, number>): StoredField[] {
  return fields.map((f) => {
    const { name, type, required, label, description, indexed, options } = f
    const collectionId = f.collection === undefined ? undefined : collectionIds.get(f.collection)
    const stored: Record<string, unknown> = { name, type, required, label, description, default: f.default, indexed, options, collectionId }
    return Object.fromEntries(Object.entries(stored).filter(([, v]) => v !== undefined)) as StoredField
  })
}

/** Stored fields as the API shows them (`collectionNames`: the project's collections by id), in the stored key order. */
export function shownFields(fields: readonly StoredField[], collectionNames: ReadonlyMap<number, string>): SchemaField[] {
  return fields.map(({ collectionId, ...rest }) => (collectionId === undefined ? rest : { ...rest, collection: collectionNames.get(collectionId) ?? `#${collectionId}` }))
}

/** One record's reference to a record of another collection, checked against storage by the caller. */
export interface RelationReference {
  /** The field's JSON pointer (`/customer`). */
  field: string
  collectionId: number
  id: string
}

/** What data breaks, each problem at its field's JSON pointer, and the relation references left to check. */
export interface RecordCheck {
  problems: { field: string; message: string }[]
  relations: RelationReference[]
}

/** Escapes a key for a JSON pointer (`a/b` → `/a~1b`). */
export const pointer = (key: string) => `/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`

/** Checks `data` against `fields` (see the file comment for the rules); an empty field list accepts any object. */
export function checkRecord(fields: readonly StoredField[], data: Record<string, unknown>): RecordCheck {
  const check: RecordCheck = { problems: [], relations: [] }
  if (fields.length === 0) return check
  const byName = new Map(fields.map((f) => [f.name, f]))
  for (const key of Object.keys(data)) {
    if (!byName.has(key)) check.problems.push({ field: pointer(key), message: 'unknown field: the collection\'s schema has no such field' })
  }
  for (const field of fields) {
    const value = Object.hasOwn(data, field.name) ? data[field.name] : undefined
    if (value === undefined || value === null) {
      if (field.required) check.problems.push({ field: pointer(field.name), message: `is required (${describeType(field)})` })
      continue
    }
    const problem = valueProblem(field, value)
    if (problem) check.problems.push({ field: pointer(field.name), message: problem })
    else if (field.type === 'relation') check.relations.push({ field: pointer(field.name), collectionId: field.collectionId!, id: value as string })
  }
  return check
}

/** `data` with each absent field that has a default set to it (the whole record is being written). */
export function withDefaults(fields: readonly StoredField[], data: Record<string, unknown>): Record<string, unknown> {
  const absent = fields.filter((f) => f.default !== undefined && !Object.hasOwn(data, f.name))
  // fromEntries defines own properties: a field named __proto__ stays a field.
  return Object.fromEntries([...Object.entries(data), ...absent.map((f) => [f.name, f.default])])
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
const DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** The field's rule in plain words ("must be …"). */
function describeType(field: StoredField): string {
  switch (field.type) {
    case 'text': return 'a string'
    case 'number': return 'a number'
    case 'integer': return 'an integer (no fraction)'
    case 'boolean': return 'true or false'
    case 'date': return 'a date YYYY-MM-DD'
    case 'datetime': return 'an ISO 8601 date-time with seconds and an offset (2026-05-01T09:30:00Z, …+02:00)'
    case 'email': return 'an email address'
    case 'url': return 'an absolute http or https URL'
    case 'select': return `one of ${field.options!.join(', ')}`
    case 'multiselect': return `a list of distinct values among ${field.options!.join(', ')}`
    case 'json': return 'any JSON value'
    case 'relation': return 'the id (a string) of a record of the related collection'
  }
}

/** Why `value` (not null, not absent) is not a value of the field, or null. */
export function valueProblem(field: StoredField, value: unknown): string | null {
  return valueConforms(field, value) ? null : `must be ${describeType(field)}`
}

function valueConforms(field: StoredField, value: unknown): boolean {
  switch (field.type) {
    case 'text': return typeof value === 'string'
    case 'number': return typeof value === 'number' && Number.isFinite(value)
    case 'integer': return Number.isSafeInteger(value)
    case 'boolean': return typeof value === 'boolean'
    case 'date': return typeof value === 'string' && isDate(value)
    case 'datetime': return typeof value === 'string' && DATETIME.test(value) && parseIsoDateTime(value) !== null
    case 'email': return typeof value === 'string' && value.length <= 320 && EMAIL.test(value)
    case 'url': return typeof value === 'string' && isWebUrl(value)
    case 'select': return typeof value === 'string' && field.options!.includes(value)
    case 'multiselect':
      return Array.isArray(value) && value.every((v) => typeof v === 'string' && field.options!.includes(v)) && new Set(value).size === value.length
    case 'json': return true
    case 'relation': return typeof value === 'string' && value.length > 0 && value.length <= RECORD_ID_MAX_LENGTH
  }
}

function isDate(text: string): boolean {
  const match = DATE.exec(text)
  if (!match) return false
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])]
  const date = new Date(Date.UTC(2000, month - 1, day))
  date.setUTCFullYear(year)
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day
}

function isWebUrl(text: string): boolean {
  if (text.length > 2048 || /\s/.test(text)) return false
  try {
    const url = new URL(text)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== ''
  } catch {
    return false
  }
}

/**
 * The records list as the API route runs it (docs/records.md "Reading records"): a collection's records in one
 * environment, filtered on the schema's fields (typed by each field's type) and on its own `createdAt` and `updatedAt`,
 * sorted, paged by an opaque cursor;
 * who may read it: ./calls.ts.
 */
import type { Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import { type RecordCursor, type RecordFieldFilter, type RecordFilterOp, type RecordListQuery, type RecordListRow, type RecordScope, type RecordTimeColumn, pageRecordList } from '../../db/records.ts'
import type { Store } from '../../db/store.ts'
import { environmentPage, invalidParameter, MAX_FILTER_LENGTH, MAX_NAME_LENGTH, type Query } from '../../http/list.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import type { FieldType, StoredField } from './schema.ts'
import { valueKindOf, valueProblem } from './schema.ts'
import { collectionFields } from './service.ts'
import { authorizeRead, type RecordPlace, readableCollection, recordBody } from './calls.ts'

export type { Query }

/** The operators each field type takes; `multiselect` and `json` take none (nor sort). */
const COMPARE = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in'] as const
const OPERATORS: Record<FieldType, readonly RecordFilterOp[]> = {
  text: [...COMPARE, 'contains'],
  email: [...COMPARE, 'contains'],
  url: [...COMPARE, 'contains'],
  number: COMPARE,
  integer: COMPARE,
  date: COMPARE,
  datetime: COMPARE,
  select: ['eq', 'ne', 'in'],
  relation: ['eq', 'ne', 'in'],
  boolean: ['eq', 'ne'],
  multiselect: [],
  json: [],
}
export const RECORD_FILTER_OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'contains'] as const satisfies readonly RecordFilterOp[]
/** The most values one `.in` filter takes. */
export const MAX_IN_VALUES = 100
/** The query parameters that are not filters. */
const LIST_PARAMETERS = new Set(['limit', 'sort', 'cursor'])

/** The value of one filter parameter as the field's type reads it (400 naming the parameter otherwise). */
function filterValue(name: string, field: StoredField, op: RecordFilterOp, raw: string): string | number {
  if (raw.length > MAX_FILTER_LENGTH) throw invalidParameter(name, `must be at most ${MAX_FILTER_LENGTH} characters`)
  if (op === 'contains') {
    if (raw === '') throw invalidParameter(name, 'must not be empty')
    return raw
  }
  if (field.type === 'number' || field.type === 'integer') {
    const number = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw) ? Number(raw) : Number.NaN
    const problem = Number.isFinite(number) ? valueProblem(field, number) : `must be ${field.type === 'integer' ? 'an integer' : 'a number'}`
    if (problem) throw invalidParameter(name, problem)
    return number
  }
  if (field.type === 'boolean') {
    if (raw !== 'true' && raw !== 'false') throw invalidParameter(name, 'must be true or false')
    return raw
  }
  const problem = valueProblem(field, raw)
  if (problem) throw invalidParameter(name, problem)
  return raw
}

/** The `<field>.<op>` filters of the query, each against the collection's fields (400 naming a bad one). */
function parseFieldFilters(query: Query, fields: readonly StoredField[]): RecordFieldFilter[] {
  const filters: RecordFieldFilter[] = []
  for (const [name, raw] of Object.entries(query)) {
    if (LIST_PARAMETERS.has(name) || raw === undefined || raw === '') continue
    const dot = name.lastIndexOf('.')
    if (dot < 0) continue
    const [fieldName, op] = [name.slice(0, dot), name.slice(dot + 1) as RecordFilterOp]
    const field = fields.find((f) => f.name === fieldName)
    if (!field && isTimeColumn(fieldName)) {
      filters.push(timeFilter(name, fieldName, op, raw))
      continue
    }
    if (fields.length === 0) throw invalidParameter(name, 'this collection has no schema: filters need typed fields, or createdAt and updatedAt (docs/records.md)')
    if (!field) throw invalidParameter(name, `the collection's schema has no field ${fieldName}`)
    if (!RECORD_FILTER_OPERATORS.includes(op as (typeof RECORD_FILTER_OPERATORS)[number])) throw invalidParameter(name, `unknown operator ${op} (one of ${RECORD_FILTER_OPERATORS.join(', ')})`)
    const allowed = OPERATORS[field.type]
    if (!allowed.includes(op)) throw invalidParameter(name, allowed.length === 0 ? `a ${field.type} field takes no filter` : `a ${field.type} field takes ${allowed.join(', ')}`)
    const raws = op === 'in' ? raw.split(',') : [raw]
    if (raws.length > MAX_IN_VALUES) throw invalidParameter(name, `takes at most ${MAX_IN_VALUES} values`)
    filters.push({ field: field.name, kind: valueKindOf(field.type), op, values: raws.map((r) => filterValue(name, field, op, r)) })
  }
  return filters
}

const TIME_COLUMNS: readonly RecordTimeColumn[] = ['createdAt', 'updatedAt']
const isTimeColumn = (name: string): name is RecordTimeColumn => (TIME_COLUMNS as readonly string[]).includes(name)
/** The datetime every record has, as a filter reads it (a schema field of the same name comes first). */
const TIME_FIELD: StoredField = { name: 'createdAt', type: 'datetime' } as StoredField

/** `createdAt.<op>` / `updatedAt.<op>`: the record's own times, compared as datetimes (400 naming a bad one). */
function timeFilter(name: string, column: RecordTimeColumn, op: RecordFilterOp, raw: string): RecordFieldFilter {
  const allowed = COMPARE
  if (!(allowed as readonly string[]).includes(op)) throw invalidParameter(name, `${column} takes ${allowed.join(', ')}`)
  const raws = op === 'in' ? raw.split(',') : [raw]
  if (raws.length > MAX_IN_VALUES) throw invalidParameter(name, `takes at most ${MAX_IN_VALUES} values`)
  const values = raws.map((r) => Date.parse(String(filterValue(name, TIME_FIELD, op, r))))
  return { field: column, kind: 'datetime', op, values, column }
}

type Sort = { field: StoredField | null; direction: 'asc' | 'desc'; spec: string }

/** `sort`: `createdAt` or a sortable field, `-` first for descending; default `-createdAt` (newest first). */
function parseSort(raw: string | undefined, fields: readonly StoredField[]): Sort {
  const spec = raw === undefined || raw === '' ? '-createdAt' : raw
  const direction = spec.startsWith('-') ? 'desc' : 'asc'
  const name = direction === 'desc' ? spec.slice(1) : spec
  if (name === 'createdAt') return { field: null, direction, spec }
  const field = fields.find((f) => f.name === name)
  if (!field) throw invalidParameter('sort', `must be createdAt or a field of the collection's schema, - first for descending (no field ${name})`)
  if (OPERATORS[field.type].length === 0) throw invalidParameter('sort', `a ${field.type} field cannot be sorted`)
  return { field, direction, spec }
}

/** The opaque cursor: the sort it belongs to, the last row's sort key and row id, as base64url JSON. */
function encodeCursor(sort: Sort, row: RecordListRow): string {
  return Buffer.from(JSON.stringify([sort.spec, row.key, row.id])).toString('base64url')
}

function decodeCursor(raw: string | undefined, sort: Sort): RecordCursor | undefined {
  if (raw === undefined || raw === '') return undefined
  const refused = () => invalidParameter('cursor', 'is not a cursor this list gave (send back nextCursor as it is, with the same sort)')
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'))
  } catch {
    throw refused()
  }
  if (!Array.isArray(parsed) || parsed.length !== 3) throw refused()
  const [spec, key, id] = parsed as unknown[]
  if (spec !== sort.spec || !Number.isSafeInteger(id) || (id as number) < 1) throw refused()
  if (key !== null && typeof key !== 'string' && !(typeof key === 'number' && Number.isFinite(key))) throw refused()
  return { key: key as string | number | null, id: id as number }
}

/** A list's filters, sort and the indexes they may use, read from the query against the collection's fields (400 naming a bad parameter). */
export interface RecordListPlan {
  sort: Sort
  /** The store's query continuing after `after` (undefined: from the first record). */
  query(after: RecordCursor | undefined): RecordListQuery
}

/** The one reading of a records list's query: the list API and the CSV export (./csv-calls.ts) share it. */
export function recordListPlan(query: Query, fields: readonly StoredField[]): RecordListPlan {
  const filters = parseFieldFilters(query, fields)
  const sort = parseSort(query.sort, fields)
  const indexed = new Set(fields.filter((f) => f.indexed).map((f) => f.name))
  const literalCollection = (sort.field !== null && indexed.has(sort.field.name)) || filters.some((f) => indexed.has(f.field))
  const order = sort.field === null ? null : { field: sort.field.name, kind: valueKindOf(sort.field.type) }
  return { sort, query: (after) => ({ filters, sort: order, direction: sort.direction, after, literalCollection }) }
}

/** The operators a field of this type takes in a filter (none: it is neither filtered nor sorted). */
export const operatorsOf = (type: FieldType): readonly RecordFilterOp[] => OPERATORS[type]

/** One page of a list: `limit + 1` rows at most (one more says more follow), its sort, and the cursor of the next page. */
export interface RecordListPage {
  rows: RecordListRow[]
  sort: string
  nextCursor?: string
}

/**
 * One page of a collection's records as `query` asks (`<field>.<op>` filters, `sort`, `cursor`), read against its
 * `fields` (400 naming a bad parameter): what the API's list and the console's collection page both run.
 */
export function* recordListPage(scope: RecordScope, fields: readonly StoredField[], query: Query, limit: number): Op<RecordListPage> {
  const plan = recordListPlan(query, fields)
  const rows = yield* pageRecordList(scope, plan.query(decodeCursor(query.cursor, plan.sort)), limit)
  const last = rows.length > limit ? rows[limit - 1] : undefined
  return { rows, sort: plan.sort.spec, ...(last ? { nextCursor: encodeCursor(plan.sort, last) } : {}) }
}

/**
 * One page of a collection's records as the caller may read them: the shared envelope (`hasMore`, `data`,
 * `parameters`) and `nextCursor` while more follow.
 */
export async function recordsPageAs(store: Store, caller: AccountCaller, place: RecordPlace, query: Query) {
  let listed: RecordListPage | undefined
  const envelope = await environmentPage(query, place, {
    filters: () => undefined,
    authorize: () => authorizeRead(store, caller, place.projectName),
    where: () => read(store, readableCollection(caller, place)),
    ids: async (scope, _filters, query, limit) => {
      const fields = await read(store, collectionFields(scope.collectionId, 'read'))
      listed = await read(store, recordListPage(scope, fields, query, limit))
      return listed.rows
    },
    render: async (page) => page.map(recordBody),
  })
  return {
    ...envelope,
    parameters: { ...envelope.parameters, collectionName: place.collectionName, sort: listed!.sort },
    ...(listed!.nextCursor ? { nextCursor: listed!.nextCursor } : {}),
  }
}

export interface ImportOptions {
  dryRun: boolean
  allOrNothing: boolean
  teamName?: string
}

/** A CSV import's options (./csv-calls.ts): `dryRun`, `allOrNothing` (`true`/`false`) and `teamName` of an import's query (400 naming a bad one). */
export function importOptions(query: Query): ImportOptions {
  const flag = (name: string) => {
    const raw = query[name]
    if (raw === undefined || raw === '' || raw === 'false') return false
    if (raw === 'true') return true
    throw invalidParameter(name, 'must be true or false')
  }
  const teamName = query.teamName === undefined || query.teamName === '' ? undefined : query.teamName
  if (teamName !== undefined && teamName.length > MAX_NAME_LENGTH) throw invalidParameter('teamName', `must be at most ${MAX_NAME_LENGTH} characters`)
  return { dryRun: flag('dryRun'), allOrNothing: flag('allOrNothing'), ...(teamName === undefined ? {} : { teamName }) }
}

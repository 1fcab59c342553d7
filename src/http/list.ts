/**
 * The one list machinery shared by notes, activity logs, admin logs and runs: `limit` parsing, the
 * `<field>.<op>` date filters, and the `{hasMore, data, parameters}` envelope. Pages are ordered by id
 * descending; `hasMore` comes from fetching one row more than the limit.
 */
import { and, asc, desc, eq, gt, gte, lt, lte, type Placeholder, type SQL, sql } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { Db } from '../db/open.ts'
import { prepared } from '../db/prepared.ts'
import { parseIsoDateTime } from '../lib/time.ts'
import { type Environment, type Project, requireEnvironment } from '../modules/projects/service.ts'
import { badRequest } from './errors.ts'
import { ID_RANGE_MESSAGE, parseId } from './params.ts'

export const DEFAULT_LIMIT = 10
/** The longest value a string filter takes (names, emails, anything else); /openapi.json states each. */
export const MAX_NAME_LENGTH = 200
export const MAX_EMAIL_LENGTH = 320
export const MAX_FILTER_LENGTH = 1024
export const MAX_LIMIT = 100
export const DATE_OPERATORS = ['eq', 'lt', 'lte', 'gt', 'gte'] as const
export type DateOperator = (typeof DATE_OPERATORS)[number]

export type Query = Record<string, string | undefined>

/** The query string as first-value-per-key (Elysia would merge repeats into arrays). */
export function queryOf(request: Request): Query {
  const query: Query = {}
  for (const [key, value] of new URL(request.url).searchParams) if (!(key in query)) query[key] = value
  return query
}

export function invalidParameter(name: string, message: string) {
  return badRequest('invalid_parameter', `Invalid query parameter '${name}': ${message}`, { details: [{ field: name, message }] })
}

/** `limit`: an integer from 1 to 100, default 10. `0`, `101`, `-1`, `abc`, `1.5` → 400 naming `limit`. */
export function parseLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_LIMIT
  if (!/^\d+$/.test(raw.trim())) throw invalidParameter('limit', `must be an integer between 1 and ${MAX_LIMIT}`)
  const limit = Number(raw.trim())
  if (limit < 1 || limit > MAX_LIMIT) throw invalidParameter('limit', `must be an integer between 1 and ${MAX_LIMIT}`)
  return limit
}

/** A positive integer id filter (`userId`, 1 to MAX_ID), or undefined when absent. */
export function parseIdParameter(query: Query, name: string): number | undefined {
  const raw = query[name]
  if (raw === undefined || raw === '') return undefined
  const id = parseId(raw.trim())
  if (id === null) throw invalidParameter(name, ID_RANGE_MESSAGE)
  return id
}

/** A string filter; empty means absent. Over-long values are refused rather than silently matching nothing. */
export function parseStringParameter(query: Query, name: string, maxLength = MAX_FILTER_LENGTH): string | undefined {
  const raw = query[name]
  if (raw === undefined || raw === '') return undefined
  if (raw.length > maxLength) throw invalidParameter(name, `must be at most ${maxLength} characters`)
  return raw
}

/** A value from a fixed set (`type`, `action`…). */
export function parseEnumParameter<T extends string>(query: Query, name: string, values: readonly T[]): T | undefined {
  const raw = parseStringParameter(query, name)
  if (raw === undefined) return undefined
  if (!values.includes(raw as T)) throw invalidParameter(name, `must be one of ${values.join(', ')}`)
  return raw as T
}

/**
 * `extensions`: `true` or `false` (absent or empty: false), exactly as JSON and OpenAPI spell a boolean. With
 * `true` a log list also returns the entries the compatibility document cannot describe (DESIGN "Wire
 * compatibility"); anything else is a 400 naming it.
 */
export function parseExtensionsParameter(query: Query): boolean {
  const raw = parseStringParameter(query, 'extensions')
  if (raw === undefined || raw === 'false') return false
  if (raw === 'true') return true
  throw invalidParameter('extensions', 'must be true or false')
}

/**
 * A filter on one of the compatibility document's enums (`action`, `resource`, `initiator`): one of its values,
 * or one of Trellis's extension values when the caller asked for `extensions=true`. The 400 lists what is allowed.
 */
export function parseExtensibleEnumParameter<Documented extends string, Extension extends string>(
  query: Query,
  name: string,
  values: { documented: readonly Documented[]; extensions: readonly Extension[] },
  withExtensions: boolean,
): Documented | Extension | undefined {
  const allowed: readonly (Documented | Extension)[] = withExtensions ? [...values.documented, ...values.extensions] : values.documented
  const raw = parseStringParameter(query, name)
  if (raw === undefined) return undefined
  if (allowed.includes(raw as Documented | Extension)) return raw as Documented | Extension
  const hint = withExtensions ? '' : ` (the Trellis extensions ${values.extensions.join(', ')} need extensions=true)`
  throw invalidParameter(name, `must be one of ${allowed.join(', ')}${hint}`)
}

/**
 * The page condition that leaves extension entries out unless the caller asked for them. A literal, not a
 * placeholder, so SQLite can use the log's partial index `(scope, id) WHERE extension = 0`.
 */
export function hideExtensions(extensionColumn: SQLiteColumn, withExtensions: boolean) {
  return withExtensions ? undefined : { condition: sql`${extensionColumn} = 0`, values: {} }
}

export interface DateFilter {
  field: string
  op: DateOperator
  ms: number
}

/**
 * `createdAt.lt=…` style filters for the given fields, each parsed as ISO 8601 (any offset, with or without
 * milliseconds) into UTC epoch ms. A bad date is a 400 naming the parameter.
 */
export function parseDateFilters(query: Query, fields: readonly string[]): DateFilter[] {
  const filters: DateFilter[] = []
  for (const field of fields) {
    for (const op of DATE_OPERATORS) {
      const name = `${field}.${op}`
      const raw = query[name]
      if (raw === undefined || raw === '') continue
      const ms = parseIsoDateTime(raw)
      if (ms === null) throw invalidParameter(name, `"${raw}" is not an ISO 8601 date-time (e.g. 2024-06-04T09:21:26.159Z)`)
      filters.push({ field, op, ms })
    }
  }
  return filters
}


export interface TimeOrderedTable {
  /** Names the cached statements. */
  name: string
  table: SQLiteTable
  id: SQLiteColumn
  createdAt: SQLiteColumn
  /** The list's scope (environment or project): createdAt never decreases in id order within one scope value. */
  scope: SQLiteColumn
}

export interface IdBounds {
  /** Every id of the page is below this one. */
  below?: number
  /** Every id of the page is above this one. */
  above?: number
}

/**
 * createdAt filters as id bounds. Exact when createdAt never decreases in id order within the scope (logs
 * always; notes while their environment is in time order): then `createdAt < X` is `id <` the first id at or
 * after X. Each bound is one seek on an index over (scope, created_at), and the page itself then walks an
 * id-ordered index from the right place instead of skipping or sorting every newer row.
 */
export function createdAtBounds(db: Db, filters: DateFilter[], t: TimeOrderedTable, scopeValue: number): IdBounds {
  const seek = (edge: 'first' | 'last', op: 'gte' | 'gt' | 'lte' | 'lt') =>
    prepared(db, `${t.name}.bound.${edge}.${op}`, () =>
      db
        .select({ id: t.id })
        .from(t.table)
        .where(and(eq(t.scope, sql.placeholder('scope')), compare(t.createdAt, op, sql.placeholder('at'))))
        .orderBy(...(edge === 'first' ? [asc(t.createdAt), asc(t.id)] : [desc(t.createdAt), desc(t.id)]))
        .limit(1)
        .prepare(),
    )
  const idOf = (edge: 'first' | 'last', op: 'gte' | 'gt' | 'lte' | 'lt', at: number) =>
    seek(edge, op).all({ scope: scopeValue, at })[0]?.id as number | undefined
  const bounds: IdBounds = {}
  const below = (id: number | undefined) => {
    if (id !== undefined) bounds.below = Math.min(bounds.below ?? id, id)
  }
  const above = (id: number | undefined) => {
    if (id !== undefined) bounds.above = Math.max(bounds.above ?? id, id)
  }
  for (const { op, ms } of filters) {
    if (op === 'lt') below(idOf('first', 'gte', ms))
    if (op === 'lte' || op === 'eq') below(idOf('first', 'gt', ms))
    if (op === 'gt') above(idOf('last', 'lte', ms))
    if (op === 'gte' || op === 'eq') above(idOf('last', 'lt', ms))
  }
  return bounds
}

export interface PageQuery {
  /** Names the cached statements (one per shape of present filters). */
  name: string
  table: SQLiteTable
  id: SQLiteColumn
  /** `column = value` filters; undefined values are left out. */
  equal: Record<string, [SQLiteColumn, number | string | undefined]>
  /** Date comparisons that stay comparisons (not id bounds). */
  dates?: { filters: DateFilter[]; columns: Record<string, SQLiteColumn> }
  bounds?: IdBounds
  /** Further conditions written with placeholders, each with its values; present ones only. */
  extra?: Record<string, { condition: SQL; values: Record<string, unknown> } | undefined>
}

/**
 * The ids of one page (limit + 1 rows, newest first) — the one page query of every list. The statement is
 * prepared once per shape (which filters are present) and run with the values as placeholders.
 */
export function pageIds<Id extends number | string = number>(db: Db, q: PageQuery, limit: number): Id[] {
  const equal = Object.entries(q.equal).filter(([, [, value]]) => value !== undefined)
  const dates = q.dates?.filters ?? []
  const extra = Object.entries(q.extra ?? {}).filter((e): e is [string, { condition: SQL; values: Record<string, unknown> }] => e[1] !== undefined)
  const shape = [
    ...equal.map(([name]) => name),
    ...dates.map((d) => `${d.field}.${d.op}`),
    ...(q.bounds?.below !== undefined ? ['<id'] : []),
    ...(q.bounds?.above !== undefined ? ['>id'] : []),
    ...extra.map(([name]) => name),
  ].join(',')
  const statement = prepared(db, `${q.name}.page.${shape}`, () =>
    db
      .select({ id: q.id })
      .from(q.table)
      .where(
        allOf([
          ...equal.map(([name, [column]]) => eq(column, sql.placeholder(name))),
          ...dates.map((d) => compare(q.dates!.columns[d.field]!, d.op, sql.placeholder(`${d.field}.${d.op}`))),
          q.bounds?.below !== undefined ? lt(q.id, sql.placeholder('below')) : undefined,
          q.bounds?.above !== undefined ? gt(q.id, sql.placeholder('above')) : undefined,
          ...extra.map(([, e]) => e.condition),
        ]),
      )
      .orderBy(desc(q.id))
      .limit(sql.placeholder('limit'))
      .prepare(),
  )
  const values: Record<string, unknown> = { limit: limit + 1, below: q.bounds?.below, above: q.bounds?.above }
  for (const [name, [, value]] of equal) values[name] = value
  for (const d of dates) values[`${d.field}.${d.op}`] = d.ms
  for (const [, e] of extra) Object.assign(values, e.values)
  return statement.all(values).map((r) => r.id as Id)
}

function compare(column: SQLiteColumn, op: DateOperator, value: number | Placeholder): SQL {
  switch (op) {
    case 'eq':
      return eq(column, value)
    case 'lt':
      return lt(column, value)
    case 'lte':
      return lte(column, value)
    case 'gt':
      return gt(column, value)
    case 'gte':
      return gte(column, value)
  }
}

export function allOf(conditions: (SQL | undefined)[]): SQL | undefined {
  return and(...conditions.filter((c): c is SQL => c !== undefined))
}

/** `{hasMore, data, parameters}` from `limit + 1` fetched rows. */
export function page<Row, Item, Parameters extends Record<string, unknown>>(rows: Row[], limit: number, render: (rows: Row[]) => Item[], parameters: Parameters) {
  return { hasMore: rows.length > limit, data: render(rows.slice(0, limit)), parameters }
}

/**
 * The body of every `GET …/project/{p}/environment/{e}/<list>` route: the query's `limit` and filters (a bad one is
 * a 400 before anything is looked up), the route's own check, the environment (404), one page of ids, and the
 * envelope whose `parameters` echo the project, the environment and the effective limit.
 */
export function environmentPage<Filters, Id, Item>(
  db: Db,
  request: Request,
  params: { projectName: string; environmentName: string },
  list: {
    filters: (query: Query) => Filters
    /** A check after parsing, before the environment is looked up (e.g. the caller's role). */
    authorize?: () => void
    ids: (where: { project: Project; environment: Environment }, filters: Filters, query: Query, limit: number) => Id[]
    render: (ids: Id[]) => Item[]
  },
) {
  const query = queryOf(request)
  const limit = parseLimit(query.limit)
  const filters = list.filters(query)
  list.authorize?.()
  const where = requireEnvironment(db, params.projectName, params.environmentName)
  return page(list.ids(where, filters, query, limit), limit, list.render, { projectName: params.projectName, environmentName: params.environmentName, limit })
}

/** The rows for `ids`, in the order of `ids` (a page's order), skipping ids with no row. */
export function inIdOrder<Row, Id>(ids: Id[], rows: Row[], idOf: (row: Row) => Id): Row[] {
  const byId = new Map(rows.map((row) => [idOf(row), row]))
  return ids.flatMap((id) => {
    const row = byId.get(id)
    return row === undefined ? [] : [row]
  })
}

/** The filters notes and activity logs share: who (`userEmail`, `userId`), where (`teamName`, `collectionName`) and which record. */
export function parseRecordFilters(query: Query) {
  return {
    userEmail: parseStringParameter(query, 'userEmail', MAX_EMAIL_LENGTH),
    userId: parseIdParameter(query, 'userId'),
    teamName: parseStringParameter(query, 'teamName', MAX_NAME_LENGTH),
    collectionName: parseStringParameter(query, 'collectionName', MAX_NAME_LENGTH),
    recordId: parseStringParameter(query, 'recordId'),
  }
}

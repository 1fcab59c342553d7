/**
 * The one list machinery shared by notes, activity logs, admin logs and runs: `limit` parsing, the
 * `<field>.<op>` date filters, and the `{hasMore, data, parameters}` envelope. Pages are ordered by id
 * descending; `hasMore` comes from fetching one row more than the limit.
 */
import { DATE_OPERATORS, type DateFilter } from '../lib/date-filter.ts'
import { type Micros, parseIsoDateTime, parseIsoMicros } from '../lib/time.ts'
import { badRequest } from '../lib/errors.ts'
import { ID_RANGE_MESSAGE, parseId } from './params.ts'

export { DATE_OPERATORS, type DateFilter, type DateOperator } from '../lib/date-filter.ts'

export const DEFAULT_LIMIT = 10
/** The longest value a string filter takes (names, emails, anything else); /openapi.json states each. */
export const MAX_NAME_LENGTH = 200
export const MAX_EMAIL_LENGTH = 320
export const MAX_FILTER_LENGTH = 1024
export const MAX_LIMIT = 100

export type Query = Record<string, string | undefined>

/**
 * The query string as first-value-per-key (Elysia would merge repeats into arrays). No prototype: a parameter named
 * `constructor` or `__proto__` is a key like any other, and a name never sent reads as undefined.
 */
export function queryOf(request: Request): Query {
  const query: Query = Object.create(null)
  for (const [key, value] of new URL(request.url).searchParams) if (!Object.hasOwn(query, key)) query[key] = value
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
 * `createdAt.lt=…` style filters for the given fields, each parsed as ISO 8601 (any offset, with or without a
 * fraction) into UTC epoch µs, so the `createdAt` of a list's last item, sent back as `createdAt.lt`, is exact.
 * A bad date is a 400 naming the parameter. A valid date beyond exact microseconds (after 2255, before 1685) is
 * clamped to the nearest safe integer: it still compares as it should with every time a list can hold.
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
      const at = parseIsoMicros(raw) ?? ((ms < 0 ? Number.MIN_SAFE_INTEGER : Number.MAX_SAFE_INTEGER) as Micros)
      filters.push({ field, op, at })
    }
  }
  return filters
}

/** `{hasMore, data, parameters}` from `limit + 1` fetched rows. */
export async function page<Row, Item, Parameters extends Record<string, unknown>>(
  rows: Row[],
  limit: number,
  render: (rows: Row[]) => Item[] | Promise<Item[]>,
  parameters: Parameters,
) {
  return { hasMore: rows.length > limit, data: await render(rows.slice(0, limit)), parameters }
}

/** What an environment's list is: its filters, its own check, where it lists, a page of ids and their items. */
export interface EnvironmentList<Where, Filters, Id, Item> {
  filters: (query: Query) => Filters
  /** A check after parsing, before the environment is looked up (e.g. the caller's role). */
  authorize?: () => void | Promise<void>
  /** The project and environment the path names (404 when unknown). */
  where: (params: { projectName: string; environmentName: string }) => Promise<Where>
  ids: (where: Where, filters: Filters, query: Query, limit: number) => Promise<Id[]>
  /** The page's items (`filters`: what the query asked, e.g. `extensions=true`'s extra fields). */
  render: (ids: Id[], filters: Filters) => Promise<Item[]>
}

/** An environment's list as a value (a route and a tool run the same one), its callbacks typed from `where` and `filters`. */
export const environmentList = <Where, Filters, Id, Item>(list: EnvironmentList<Where, Filters, Id, Item>) => list

/**
 * The body of every `GET …/project/{p}/environment/{e}/<list>` route (and of the MCP tool that lists the same): the
 * query's `limit` and filters (a bad one is a 400 before anything is looked up), the list's own check, the
 * environment (`where`: its 404), one page of ids, and the envelope whose `parameters` echo the project, the
 * environment and the effective limit.
 */
export async function environmentPage<Where, Filters, Id, Item>(
  query: Query,
  params: { projectName: string; environmentName: string },
  list: EnvironmentList<Where, Filters, Id, Item>,
) {
  const limit = parseLimit(query.limit)
  const filters = list.filters(query)
  await list.authorize?.()
  const where = await list.where(params)
  const ids = await list.ids(where, filters, query, limit)
  return page(ids, limit, (pageIds: Id[]) => list.render(pageIds, filters), { projectName: params.projectName, environmentName: params.environmentName, limit })
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

/**
 * The page queries every list shares (notes, activity logs, admin logs, runs, tasks): one page of ids newest first —
 * by id, the runs and tasks by `(createdAt, id)` — (`limit + 1` rows, so the caller knows `hasMore`), `createdAt`
 * filters turned into id bounds, and the conditions lists add. Each is written once for both stores (./query.ts), a
 * statement per shape of present filters: built once per dialect and connection, run with the values as placeholders.
 */
import { and, type AnyColumn, asc, type Column, desc, eq, gt, gte, lt, lte, type Placeholder, type SQL, sql } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { DateFilter, DateOperator } from '../lib/date-filter.ts'
import type { Built, Dialect, Tables, WatermarkedList } from './dialect.ts'
import type { Op } from './op.ts'
import { constantLimit, type Statement, statement } from './query.ts'

/** The tables with an id and a createdAt: those a list can order by time. */
export type TimedTable = { [K in keyof Tables]: Tables[K] extends { id: AnyColumn; createdAt: AnyColumn } ? K : never }[keyof Tables]

/** A list ordered by time (./monotonic.ts): its table and the column that scopes it (environment, project); null scopes all rows. */
export interface TimeOrderedList {
  /** Names its statements. */
  name: string
  table: TimedTable
  /** Within one scope value createdAt never decreases in id order. */
  scope: string | null
  /**
   * A hash-chained log (./monotonic.ts `nextChainedEntries`): its table and scope column as SQL names, and the
   * expression its chain index scopes positions by (0 for a null scope).
   */
  chain?: { log: 'activity' | 'admin'; table: string; column: string; scope: string }
  /** Read at or below its watermark on PostgreSQL (`Dialect.listed`): its rows past it may still move. */
  watermark?: WatermarkedList
}

/** The list's table and columns in the dialect. */
export function listColumns(d: Dialect, list: TimeOrderedList) {
  const table = d.t[list.table] as unknown as SQLiteTable & Record<string, SQLiteColumn>
  return { table, id: table.id!, createdAt: table.createdAt!, scope: list.scope === null ? null : table[list.scope]! }
}

const shapes = new Map<string, Statement<Built>>()

/** The statement of one shape of a query (`name` says which), made on first use: a query built per shape, never per request. */
export function statementOfShape<Q extends Built>(name: string, build: (d: Dialect) => Q): Statement<Q> {
  let shaped = shapes.get(name)
  if (shaped === undefined) {
    shaped = statement(name, build)
    shapes.set(name, shaped)
  }
  return shaped as Statement<Q>
}

/**
 * The page condition that leaves extension entries out unless the caller asked for them. A literal, not a
 * placeholder, so the planner can use the log's partial index `(scope, id) WHERE extension = 0` (`= false`).
 */
export function hideExtensions(table: 'activityLogs' | 'adminLogs', withExtensions: boolean): PageCondition | undefined {
  return withExtensions ? undefined : { condition: (d) => d.isFalse(d.t[table].extension), values: {} }
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
export function* createdAtBounds(filters: DateFilter[], list: TimeOrderedList, scopeValue: number): Op<IdBounds> {
  const found: { side: keyof IdBounds; id: number | undefined }[] = []
  for (const s of boundSeeks(filters)) {
    const seek = statementOfShape(`${list.name}.bound.${s.edge}.${s.op}`, (d) => {
      const { table, id, createdAt, scope } = listColumns(d, list)
      const order = s.edge === 'first' ? [asc(createdAt), asc(id)] : [desc(createdAt), desc(id)]
      return d.db
        .select({ id })
        .from(table)
        .where(and(eq(scope!, sql.placeholder('scope')), compare(createdAt, s.op, sql.placeholder('at')), list.watermark === undefined ? undefined : d.listed(list.watermark, sql`${id}`)))
        .orderBy(...order)
        .limit(constantLimit(1))
    })
    found.push({ side: s.side, id: (yield* seek.row({ scope: scopeValue, at: s.at }))?.id as number | undefined })
  }
  return boundsOf(found)
}

/**
 * One seek of `createdAtBounds`: the first (lowest createdAt, then id) or last row of the scope whose createdAt is
 * `op` `at`; the id found bounds the page on `side`.
 */
interface BoundSeek {
  edge: 'first' | 'last'
  op: 'gte' | 'gt' | 'lte' | 'lt'
  at: number
  side: keyof IdBounds
}

/** The seeks that turn createdAt filters into id bounds (see `createdAtBounds`). */
function boundSeeks(filters: DateFilter[]): BoundSeek[] {
  const seeks: BoundSeek[] = []
  for (const { op, at } of filters) {
    if (op === 'lt') seeks.push({ edge: 'first', op: 'gte', at, side: 'below' })
    if (op === 'lte' || op === 'eq') seeks.push({ edge: 'first', op: 'gt', at, side: 'below' })
    if (op === 'gt') seeks.push({ edge: 'last', op: 'lte', at, side: 'above' })
    if (op === 'gte' || op === 'eq') seeks.push({ edge: 'last', op: 'lt', at, side: 'above' })
  }
  return seeks
}

/** The tightest bounds the seeks found; a seek that found nothing bounds nothing. */
function boundsOf(found: { side: keyof IdBounds; id: number | undefined }[]): IdBounds {
  const bounds: IdBounds = {}
  for (const { side, id } of found) {
    if (id === undefined) continue
    const current = bounds[side]
    bounds[side] = current === undefined ? id : side === 'below' ? Math.min(current, id) : Math.max(current, id)
  }
  return bounds
}

/** A further condition of a page, written with placeholders, and their values. */
export interface PageCondition {
  /** Built only when its statement is first built: never a query built per request. */
  condition: (d: Dialect) => SQL
  values: Record<string, unknown>
}

type ColumnName<K extends TimedTable> = keyof Tables[K]['$inferSelect'] & string

/** One page's query over a list's table. */
export interface PageQuery<K extends TimedTable> {
  /** Names the statements (one per shape of present filters). */
  name: string
  table: K
  /** `column = value` filters by column name (also the placeholder's); undefined values are left out. */
  equal: Partial<Record<ColumnName<K>, number | string | undefined>>
  /** Date comparisons that stay comparisons (not id bounds): each filter's field is the column it compares (epoch µs). */
  dates?: DateFilter[]
  bounds?: IdBounds
  /** Further conditions by name; present ones only. */
  extra?: Record<string, PageCondition | undefined>
  /** The list's watermark (`TimeOrderedList.watermark`): only its rows at or below it are read. */
  watermark?: WatermarkedList
  /**
   * Ordered by `(createdAt, id)` instead of `id`: a list whose ids are handed out before its order is decided (the
   * runs' and tasks' UUIDs; createdAt is strictly increasing per scope, so `createdAt` filters page it exactly).
   */
  byTime?: true
  /**
   * Walks the page through another table's index instead of the list's own: the rows of `table` whose `column` is
   * `value`, each naming a list row by `key`, in `key` order — or, for a list ordered by time, in the order of `time`
   * (the list row's createdAt, kept beside it) and `key` (an index on (column, [time,] key) serves it). For a filter
   * that picks few rows of a large list, and picks them from an index of its own (a person's task assignments).
   */
  through?: { table: keyof Tables; key: string; column: string; value: number; time?: string }
}

/**
 * The ids of one page (limit + 1 rows, newest first) — the one page query of every list. The statement is built
 * once per shape (which filters are present) and run with the values as placeholders.
 */
export function* pageIds<Id extends number | string = number, K extends TimedTable = TimedTable>(q: PageQuery<K>, limit: number): Op<Id[]> {
  return (yield* pageRows<Id, K>(q, limit)).map((row) => row.id)
}

/**
 * `pageIds`, each id with its createdAt (`at`) for a list ordered by time (`byTime`): read from the index the page
 * walks (the list's, or `through`'s copy), so a caller merging pages of several walks needs no read of its own.
 */
export function* pageRows<Id extends number | string = number, K extends TimedTable = TimedTable>(q: PageQuery<K>, limit: number): Op<{ id: Id; at?: number }[]> {
  const equal = Object.entries(q.equal).filter(([, value]) => value !== undefined) as [string, number | string][]
  const dates = q.dates ?? []
  const extra = Object.entries(q.extra ?? {}).filter((e): e is [string, PageCondition] => e[1] !== undefined)
  const { below, above } = q.bounds ?? {}
  const shape = [
    ...equal.map(([name]) => name),
    ...dates.map((d) => `${d.field}.${d.op}`),
    ...(below !== undefined ? ['<id'] : []),
    ...(above !== undefined ? ['>id'] : []),
    ...extra.map(([name]) => name),
    ...(q.through ? [`through ${q.through.table}.${q.through.column}`] : []),
    ...(q.byTime ? ['by time'] : []),
  ].join(',')
  const page = statementOfShape(`${q.name}.page.${shape}`, (d) => {
    const table = d.t[q.table] as unknown as Record<string, SQLiteColumn>
    const where = allOf([
      ...equal.map(([name]) => eq(table[name]!, sql.placeholder(name))),
      ...dates.map((f) => compare(table[f.field]!, f.op, sql.placeholder(`${f.field}.${f.op}`))),
      below !== undefined ? lt(table.id!, sql.placeholder('below')) : undefined,
      above !== undefined ? gt(table.id!, sql.placeholder('above')) : undefined,
      ...extra.map(([, e]) => e.condition(d)),
      q.watermark === undefined ? undefined : d.listed(q.watermark, sql`${table.id!}`),
    ])
    if (q.through) {
      const viaTable = d.t[q.through.table] as unknown as SQLiteTable
      const via = viaTable as unknown as Record<string, SQLiteColumn>
      const key = via[q.through.key]!
      const time = q.through.time === undefined ? undefined : via[q.through.time]!
      // Each list row tested by a sub-select of one row that PostgreSQL never turns into a join: both stores then walk
      // `via`'s index and look each row up by its key, stopping at the page's end. As a join, PostgreSQL merged it
      // with a backward walk of the list's primary key — every row down to the oldest one the walk reached, however
      // few of them the filter picks —, and as an EXISTS, planned with no statistics, it read every open task of the
      // environment to find one member's fifty (314,762 rows, 2.5 s).
      const listed = d.db.select({ one: sql`1` }).from(d.t[q.table]).where(allOf([eq(table.id!, key), where])).limit(constantLimit(1))
      return d.db
        .select({ id: key, ...(time === undefined ? {} : { at: time }) })
        .from(viaTable)
        .where(allOf([eq(via[q.through.column]!, sql.placeholder('through')), sql`(${listed}) IS NOT NULL`]))
        .orderBy(...(time === undefined ? [desc(key)] : [desc(time), desc(key)]))
        .limit(sql.placeholder('limit'))
    }
    return d.db
      .select({ id: table.id!, ...(q.byTime ? { at: table.createdAt! } : {}) })
      .from(d.t[q.table])
      .where(where)
      .orderBy(...(q.byTime ? [desc(table.createdAt!), desc(table.id!)] : [desc(table.id!)]))
      .limit(sql.placeholder('limit'))
  })
  const values: Record<string, unknown> = { limit: limit + 1, below, above, through: q.through?.value, ...Object.fromEntries(equal) }
  for (const f of dates) values[`${f.field}.${f.op}`] = f.at
  for (const [, e] of extra) Object.assign(values, e.values)
  return (yield* page.rows(values)).map((r) => {
    const row = r as { id: Id; at?: number }
    return row.at === undefined ? { id: row.id } : { id: row.id, at: Number(row.at) }
  })
}

/** `placeholder` is null (an optional filter not given), written so that PostgreSQL knows the parameter's type. */
export const absent = (placeholder: string, type: 'text' | 'int8'): SQL => sql`cast(${sql.placeholder(placeholder)} as ${sql.raw(type === 'int8' ? 'bigint' : 'text')}) IS NULL`

/** A column of a raw `valueRows` statement, written as text (`n('n.id')`), as a number in either dialect. */
export function rawNumber(d: Dialect): (column: string) => SQL {
  return (column) => d.number(sql.raw(column))
}

/** `column op value` for a date filter's operator (either dialect's column). */
function compare(column: Column, op: DateOperator, value: number | Placeholder): SQL {
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


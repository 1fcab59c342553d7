/**
 * The page queries every list shares (notes, activity logs, admin logs, runs): one page of ids newest first
 * (`limit + 1` rows, so the caller knows `hasMore`), `createdAt` filters turned into id bounds, and the
 * conditions lists add. Each statement is prepared once per connection and shape of present filters.
 */
import { and, asc, type Column, desc, eq, gt, gte, lt, lte, type Placeholder, type SQL, sql } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { DateFilter, DateOperator } from '../lib/date-filter.ts'
import type { Db } from './open.ts'
import { prepared } from './prepared.ts'

/**
 * The page condition that leaves extension entries out unless the caller asked for them. A literal, not a
 * placeholder, so SQLite can use the log's partial index `(scope, id) WHERE extension = 0`.
 */
export function hideExtensions(extensionColumn: SQLiteColumn, withExtensions: boolean) {
  return withExtensions ? undefined : { condition: () => sql`${extensionColumn} = 0`, values: {} }
}

/** A list ordered by time within a scope; `C` and `T` are the dialect's column and table (SQLite's unless said). */
export interface TimeOrderedTable<C extends Column = SQLiteColumn, T = SQLiteTable> {
  /** Names the cached statements. */
  name: string
  table: T
  id: C
  createdAt: C
  /** The list's scope (environment or project): createdAt never decreases in id order within one scope value. */
  scope: C
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
  return boundsOf(
    boundSeeks(filters).map((s) => {
      const seek = boundSeekQuery(t, s)
      const statement = prepared(db, seek.key, () => db.select({ id: t.id }).from(t.table).where(seek.where()).orderBy(...seek.orderBy()).limit(1).prepare())
      return { side: s.side, id: statement.all({ scope: scopeValue, at: s.at })[0]?.id as number | undefined }
    }),
  )
}

/**
 * The statement of one seek, in either dialect: its cache key (one per edge and operator), its condition and order
 * (placeholders `scope` and `at`), built only when the statement is first prepared.
 */
export function boundSeekQuery(t: TimeOrderedTable<Column, unknown>, s: BoundSeek): { key: string; where: () => SQL | undefined; orderBy: () => SQL[] } {
  return {
    key: `${t.name}.bound.${s.edge}.${s.op}`,
    where: () => and(eq(t.scope, sql.placeholder('scope')), compare(t.createdAt, s.op, sql.placeholder('at'))),
    orderBy: () => (s.edge === 'first' ? [asc(t.createdAt), asc(t.id)] : [desc(t.createdAt), desc(t.id)]),
  }
}

/**
 * One seek of `createdAtBounds`: the first (lowest createdAt, then id) or last row of the scope whose createdAt is
 * `op` `at`; the id found bounds the page on `side`.
 */
export interface BoundSeek {
  edge: 'first' | 'last'
  op: 'gte' | 'gt' | 'lte' | 'lt'
  at: number
  side: keyof IdBounds
}

/** The seeks that turn createdAt filters into id bounds (both dialects run them; see `createdAtBounds`). */
export function boundSeeks(filters: DateFilter[]): BoundSeek[] {
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
export function boundsOf(found: { side: keyof IdBounds; id: number | undefined }[]): IdBounds {
  const bounds: IdBounds = {}
  for (const { side, id } of found) {
    if (id === undefined) continue
    const current = bounds[side]
    bounds[side] = current === undefined ? id : side === 'below' ? Math.min(current, id) : Math.max(current, id)
  }
  return bounds
}

/** One page's query; `C` and `T` are the dialect's column and table (SQLite's unless said). */
export interface PageQuery<C extends Column = SQLiteColumn, T = SQLiteTable> {
  /** Names the cached statements (one per shape of present filters). */
  name: string
  table: T
  id: C
  /** `column = value` filters; undefined values are left out. */
  equal: Record<string, [C, number | string | undefined]>
  /**
   * Date comparisons that stay comparisons (not id bounds). The columns hold epoch µs unless `millis` says ms: then
   * each filter's instant is divided by 1000 as it is (a fraction compares exactly with integer milliseconds).
   */
  dates?: { filters: DateFilter[]; columns: Record<string, C>; millis?: true }
  bounds?: IdBounds
  /**
   * Further conditions written with placeholders, each with its values; present ones only. Each condition is built
   * only when its statement is first prepared: never a query built per request.
   */
  extra?: Record<string, { condition: () => SQL; values: Record<string, unknown> } | undefined>
}

/**
 * The ids of one page (limit + 1 rows, newest first) — the one page query of every list. The statement is
 * prepared once per shape (which filters are present) and run with the values as placeholders.
 */
export function pageIds<Id extends number | string = number>(db: Db, q: PageQuery, limit: number): Id[] {
  const plan = pagePlan(q, limit)
  const statement = prepared(db, plan.key, () =>
    db.select({ id: q.id }).from(q.table).where(plan.where()).orderBy(desc(q.id)).limit(sql.placeholder('limit')).prepare(),
  )
  return statement.all(plan.values).map((r) => r.id as Id)
}

/**
 * A page query in either dialect: the key of its statement (one per shape: which filters are present), its condition
 * with the values as placeholders (built only when the statement is first prepared), and the placeholders' values.
 * The statement orders by id descending and takes `limit` (placeholder `limit`, here `limit + 1`) rows.
 */
export function pagePlan(q: PageQuery<Column, unknown>, limit: number): { key: string; where: () => SQL | undefined; values: Record<string, unknown> } {
  const equal = Object.entries(q.equal).filter(([, [, value]]) => value !== undefined)
  const dates = q.dates?.filters ?? []
  const extra = Object.entries(q.extra ?? {}).filter((e): e is [string, { condition: () => SQL; values: Record<string, unknown> }] => e[1] !== undefined)
  const shape = [
    ...equal.map(([name]) => name),
    ...dates.map((d) => `${d.field}.${d.op}`),
    ...(q.bounds?.below !== undefined ? ['<id'] : []),
    ...(q.bounds?.above !== undefined ? ['>id'] : []),
    ...extra.map(([name]) => name),
  ].join(',')
  const where = () =>
    allOf([
      ...equal.map(([name, [column]]) => eq(column, sql.placeholder(name))),
      ...dates.map((d) => compare(q.dates!.columns[d.field]!, d.op, sql.placeholder(`${d.field}.${d.op}`))),
      q.bounds?.below !== undefined ? lt(q.id, sql.placeholder('below')) : undefined,
      q.bounds?.above !== undefined ? gt(q.id, sql.placeholder('above')) : undefined,
      ...extra.map(([, e]) => e.condition()),
    ])
  const values: Record<string, unknown> = { limit: limit + 1, below: q.bounds?.below, above: q.bounds?.above }
  for (const [name, [, value]] of equal) values[name] = value
  for (const d of dates) values[`${d.field}.${d.op}`] = q.dates?.millis ? d.at / 1000 : d.at
  for (const [, e] of extra) Object.assign(values, e.values)
  return { key: `${q.name}.page.${shape}`, where, values }
}

/** `column op value` for a date filter's operator (either dialect's column). */
export function compare(column: Column, op: DateOperator, value: number | Placeholder): SQL {
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


/**
 * The page machinery of src/db/pages.ts on PostgreSQL, shared by the list twins (notes, activity logs, admin logs,
 * runs): one page of ids newest first (`limit + 1` rows), `createdAt` filters turned into id bounds by the same seeks
 * (`boundSeeks`, `boundsOf`: one rule for both dialects), the extension entries left out by a literal predicate (so
 * the planner can use the logs' partial indexes `WHERE extension = false`), and the render statements' rows.
 */
import { and, asc, desc, eq, gt, lt, type SQL, sql } from 'drizzle-orm'
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core'
import type { DateFilter } from '../../lib/date-filter.ts'
import { allOf, boundSeeks, boundsOf, compare, type IdBounds } from '../pages.ts'
import { clientOf, type PgDb } from './store.ts'

/** A list ordered by time within a scope (src/db/pages.ts `TimeOrderedTable`), in the PostgreSQL schema. */
export interface PgTimeOrderedTable {
  table: PgTable
  id: PgColumn
  createdAt: PgColumn
  scope: PgColumn
}

/** src/db/pages.ts `createdAtBounds`: the same seeks, each the first or last row of the scope at the filter's edge. */
export async function createdAtBoundsOnPostgres(db: PgDb, filters: DateFilter[], t: PgTimeOrderedTable, scopeValue: number): Promise<IdBounds> {
  const found = []
  for (const s of boundSeeks(filters)) {
    const [row] = await db
      .select({ id: t.id })
      .from(t.table)
      .where(and(eq(t.scope, scopeValue), compare(t.createdAt, s.op, s.at)))
      .orderBy(...(s.edge === 'first' ? [asc(t.createdAt), asc(t.id)] : [desc(t.createdAt), desc(t.id)]))
      .limit(1)
    found.push({ side: s.side, id: row?.id as number | undefined })
  }
  return boundsOf(found)
}

/** src/db/pages.ts `PageQuery` on PostgreSQL: the conditions are built per call (no statement cache to key). */
export interface PgPageQuery {
  table: PgTable
  id: PgColumn
  /** `column = value` filters; undefined values are left out. */
  equal: [PgColumn, number | string | undefined][]
  /** Date comparisons that stay comparisons (not id bounds); the columns hold epoch µs. */
  dates?: { filters: DateFilter[]; columns: Record<string, PgColumn> }
  bounds?: IdBounds
  /** Further conditions; undefined ones are left out. */
  extra?: (SQL | undefined)[]
}

/** src/db/pages.ts `pageIds`: the ids of one page (limit + 1 rows, newest first). */
export async function pageIdsOnPostgres<Id extends number | string = number>(db: PgDb, q: PgPageQuery, limit: number): Promise<Id[]> {
  const rows = await db
    .select({ id: q.id })
    .from(q.table)
    .where(
      allOf([
        ...q.equal.map(([column, value]) => (value === undefined ? undefined : eq(column, value))),
        ...(q.dates?.filters ?? []).map((d) => compare(q.dates!.columns[d.field]!, d.op, d.at)),
        q.bounds?.below !== undefined ? lt(q.id, q.bounds.below) : undefined,
        q.bounds?.above !== undefined ? gt(q.id, q.bounds.above) : undefined,
        ...(q.extra ?? []),
      ]),
    )
    .orderBy(desc(q.id))
    .limit(limit + 1)
  return rows.map((r) => r.id as Id)
}

/** src/db/pages.ts `hideExtensions`: a literal, so PostgreSQL can use the log's partial index `WHERE extension = false`. */
export function hideExtensionsOnPostgres(extensionColumn: PgColumn, withExtensions: boolean): SQL | undefined {
  return withExtensions ? undefined : sql`${extensionColumn} = false`
}

/**
 * The rows of a raw render statement as arrays of values, in its column order (the SQLite render functions shape
 * such arrays; their twins select the same columns, int8 cast to float8 so they arrive as numbers).
 */
export async function valuesOf<Row extends unknown[]>(db: PgDb, text: string, values: unknown[]): Promise<Row[]> {
  return [...((await clientOf(db).unsafe(text, values as never[]).values()) as Row[])]
}

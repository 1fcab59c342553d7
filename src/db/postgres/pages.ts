/**
 * The page machinery of src/db/pages.ts on PostgreSQL, shared by the list twins (notes, activity logs, admin logs,
 * runs): one page of ids newest first (`limit + 1` rows), `createdAt` filters turned into id bounds by the same seeks,
 * the extension entries left out by a literal predicate (so the planner can use the logs' partial indexes
 * `WHERE extension = false`), and the render statements' rows. The page and seek statements are SQLite's own plans
 * (`pagePlan`, `boundSeekQuery`: one rule for both dialects), compiled once per shape of present filters
 * (./prepared.ts) and run with the values as placeholders.
 */
import { desc, sql } from 'drizzle-orm'
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core'
import type { DateFilter } from '../../lib/date-filter.ts'
import { boundSeekQuery, boundSeeks, boundsOf, type IdBounds, type PageQuery, pagePlan, type TimeOrderedTable } from '../pages.ts'
import { preparedOn } from './prepared.ts'
import { clientOf, type PgDb } from './store.ts'

/** A list ordered by time within a scope (src/db/pages.ts `TimeOrderedTable`), in the PostgreSQL schema. */
export type PgTimeOrderedTable = TimeOrderedTable<PgColumn, PgTable>

/** src/db/pages.ts `createdAtBounds`: the same seeks, each the first or last row of the scope at the filter's edge. */
export async function createdAtBoundsOnPostgres(db: PgDb, filters: DateFilter[], t: PgTimeOrderedTable, scopeValue: number): Promise<IdBounds> {
  const found = []
  for (const s of boundSeeks(filters)) {
    const seek = boundSeekQuery(t, s)
    const [row] = await preparedOn(db, seek.key, (db) => db.select({ id: t.id }).from(t.table).where(seek.where()).orderBy(...seek.orderBy()).limit(1)).execute({
      scope: scopeValue,
      at: s.at,
    })
    found.push({ side: s.side, id: row?.id as number | undefined })
  }
  return boundsOf(found)
}

/** src/db/pages.ts `PageQuery` in the PostgreSQL schema. */
export type PgPageQuery = PageQuery<PgColumn, PgTable>

/** src/db/pages.ts `pageIds`: the ids of one page (limit + 1 rows, newest first). */
export async function pageIdsOnPostgres<Id extends number | string = number>(db: PgDb, q: PgPageQuery, limit: number): Promise<Id[]> {
  const plan = pagePlan(q, limit)
  const rows = await preparedOn(db, plan.key, (db) => db.select({ id: q.id }).from(q.table).where(plan.where()).orderBy(desc(q.id)).limit(sql.placeholder('limit'))).execute(
    plan.values,
  )
  return rows.map((r) => r.id as Id)
}

/** src/db/pages.ts `hideExtensions`: a literal, so PostgreSQL can use the log's partial index `WHERE extension = false`. */
export function hideExtensionsOnPostgres(extensionColumn: PgColumn, withExtensions: boolean) {
  return withExtensions ? undefined : { condition: () => sql`${extensionColumn} = false`, values: {} }
}

/**
 * The rows of a raw render statement as arrays of values, in its column order (the SQLite render functions shape
 * such arrays; their twins select the same columns, int8 cast to float8 so they arrive as numbers).
 */
export async function valuesOf<Row extends unknown[]>(db: PgDb, text: string, values: unknown[]): Promise<Row[]> {
  return [...((await clientOf(db).unsafe(text, values as never[]).values()) as Row[])]
}

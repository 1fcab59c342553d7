/**
 * Lists page by `createdAt` while ordering by id, so `createdAt` must never go backwards in id order within
 * what one list shows (DESIGN §3). Call inside the write transaction that inserts the row.
 */
import { eq, isNull, max, sql } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { Db } from './open.ts'
import { prepared } from './prepared.ts'

/** A list: the table, its createdAt and the column that scopes it (environment, project); null scopes all rows. */
export interface TimedList {
  name: string
  table: SQLiteTable
  createdAt: SQLiteColumn
  scope: SQLiteColumn | null
}

/**
 * `max(now, latest createdAt in the list)`; with `strict`, at least latest + 1 ms so no two rows share a time.
 * An index on (scope, created_at) makes this one seek.
 */
export function nextCreatedAt(db: Db, list: TimedList, scopeValue: number | null, now: number, strict: boolean): number {
  const latest = latestCreatedAt(db, list, scopeValue)
  if (latest === null) return now
  return Math.max(now, strict ? latest + 1 : latest)
}

/** The newest createdAt in the list, or null when it is empty. */
export function latestCreatedAt(db: Db, list: TimedList, scopeValue: number | null): number | null {
  const scoped = list.scope !== null && scopeValue !== null
  const statement = prepared(db, `${list.name}.latest.${list.scope === null ? 'all' : scoped ? 'scope' : 'null-scope'}`, () =>
    db
      .select({ at: max(list.createdAt) })
      .from(list.table)
      .where(list.scope === null ? undefined : scoped ? eq(list.scope, sql.placeholder('scope')) : isNull(list.scope))
      .prepare(),
  )
  return (statement.all({ scope: scopeValue })[0]?.at as number | null | undefined) ?? null
}

/**
 * Lists page by `createdAt` while ordering by id, so `createdAt` must never go backwards in id order within
 * what one list shows (DESIGN §3). Call inside the write transaction that inserts the row.
 *
 * Listed times are epoch microseconds taken from a millisecond clock: an entry gets `now` (its last three digits
 * 0) or, when the list already holds a time at or past it, the next microsecond. A thousand entries fit in each
 * millisecond before a list's times would run ahead of the clock (a million a second, far above any throughput:
 * README "Times").
 */
import { eq, isNull, max, sql } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import { type Micros, type Millis, microsFromMillis } from '../lib/time.ts'
import type { Db } from './open.ts'
import { prepared } from './prepared.ts'

/** A list: the table, its createdAt (epoch µs) and the column that scopes it (environment, project); null scopes all rows. */
export interface TimedList {
  name: string
  table: SQLiteTable
  createdAt: SQLiteColumn
  scope: SQLiteColumn | null
}

/**
 * `max(now, latest createdAt in the list + 1 µs)`: strictly after every earlier entry of the list, and `now` itself
 * whenever the list is not already past it. An index on (scope, created_at) makes this one seek.
 */
export function nextCreatedAt(db: Db, list: TimedList, scopeValue: number | null, now: Millis): Micros {
  const at = microsFromMillis(now)
  const latest = latestCreatedAt(db, list, scopeValue)
  return latest === null || latest < at ? at : ((latest + 1) as Micros)
}

/** The newest createdAt in the list (epoch µs), or null when it is empty. */
export function latestCreatedAt(db: Db, list: TimedList, scopeValue: number | null): Micros | null {
  const scoped = list.scope !== null && scopeValue !== null
  const statement = prepared(db, `${list.name}.latest.${list.scope === null ? 'all' : scoped ? 'scope' : 'null-scope'}`, () =>
    db
      .select({ at: max(list.createdAt) })
      .from(list.table)
      .where(list.scope === null ? undefined : scoped ? eq(list.scope, sql.placeholder('scope')) : isNull(list.scope))
      .prepare(),
  )
  return (statement.all({ scope: scopeValue })[0]?.at as Micros | null | undefined) ?? null
}

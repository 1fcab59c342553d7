/**
 * Lists page by `createdAt` while ordering by id, so `createdAt` must never go backwards in id order within
 * what one list shows (DESIGN §3). Call inside the write transaction that inserts the row.
 */
import { max, type SQL } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { Db } from './open.ts'

interface Timed {
  createdAt: SQLiteColumn
}

/**
 * `max(now, latest createdAt in scope)`; with `strict`, at least latest + 1 ms so no two rows share a time.
 * `scope` is the list the row appears in (an environment, a project); an index on (scope, created_at) makes
 * this one seek.
 */
export function nextCreatedAt(db: Db, table: SQLiteTable & Timed, scope: SQL | undefined, now: number, strict: boolean): number {
  const latest = latestCreatedAt(db, table, scope)
  if (latest === null) return now
  return Math.max(now, strict ? latest + 1 : latest)
}

/** The newest createdAt in scope, or null when the scope is empty. */
export function latestCreatedAt(db: Db, table: SQLiteTable & Timed, scope: SQL | undefined): number | null {
  return (db.select({ at: max(table.createdAt) }).from(table).where(scope).all()[0]?.at as number | null | undefined) ?? null
}

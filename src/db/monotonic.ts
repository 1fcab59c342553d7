/**
 * Lists page by `createdAt` while ordering by id, so `createdAt` must never go backwards in id order (DESIGN §3).
 * Call inside the write transaction that inserts the row.
 */
import { desc } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { Db } from './open.ts'

interface Timed {
  id: SQLiteColumn
  createdAt: SQLiteColumn
}

/** `max(now, last createdAt)`; with `strict`, at least last + 1 ms so no two rows share a time. */
export function nextCreatedAt(db: Db, table: SQLiteTable & Timed, now: number, strict: boolean): number {
  const last = db.select({ createdAt: table.createdAt }).from(table).orderBy(desc(table.id)).limit(1).all()[0]
  const previous = (last?.createdAt as number | undefined) ?? Number.NEGATIVE_INFINITY
  return Math.max(now, strict ? previous + 1 : previous)
}

/**
 * Small shapes every module of twins needs: a query's first row as SQLite Drizzle's `.get()` answers it, an insert's
 * returned row (text in SQLite's order: ./byte-order.ts).
 */

/** The first row a query answers, or undefined (SQLite Drizzle's `.get()`). */
export async function firstRow<T>(rows: Promise<T[]>): Promise<T | undefined> {
  return (await rows)[0]
}

/** The one row an insert returned; `what` names it in the error when there is none. */
export async function insertedRow<T>(rows: Promise<T[]>, what: string): Promise<T> {
  const row = await firstRow(rows)
  if (!row) throw new Error(`${what} insert returned no row`)
  return row
}

/**
 * Queries built once. Drizzle's builder compiles its SQL on every call (a third of a request's CPU on PostgreSQL's
 * hot paths, measured with `bun --cpu-prof`); a hot twin builds its query once per key with placeholders and runs
 * that compiled query — Drizzle's own row mapping included — on the connection of the handle it is given: the pool,
 * or the transaction's reserved connection (a query prepared on one handle must never run outside the caller's
 * transaction). Bun's client prepares the statement on each connection the first time it sees its text.
 */
import { type Placeholder, sql } from 'drizzle-orm'
import { clientOf, type PgDb } from './store.ts'

interface Prepared {
  execute(values?: Record<string, unknown>): Promise<unknown>
}

const compiled = new Map<string, Prepared>()

/** The query `build` makes, compiled once under `key`, bound to `db`'s connection: `await preparedOn(db, k, b).execute({ id })`. */
export function preparedOn<Q extends Prepared>(db: PgDb, key: string, build: (db: PgDb) => { prepare(name: string): Q }): Q {
  let query = compiled.get(key) as Q | undefined
  if (!query) {
    query = build(db).prepare(key)
    compiled.set(key, query)
  }
  // The compiled query with this handle's connection in place of the one it was built on.
  return Object.create(query, { client: { value: clientOf(db) } }) as Q
}

/** One placeholder per name, each named as its key: `values(placeholders('noteId', 'content'))`. */
export function placeholders<K extends string>(...names: K[]): Record<K, Placeholder> {
  return Object.fromEntries(names.map((name) => [name, sql.placeholder(name)])) as unknown as Record<K, Placeholder>
}

/**
 * Prepared statements cached per connection. Drizzle's query builder compiles its SQL on every call (half the
 * throughput on a hot path, STYLE "known traps"); hot paths build their query once per connection and key, and
 * run it with placeholders. Works with a transaction handle too: it is the same connection.
 */
import type { Database, Statement } from 'bun:sqlite'
import type { Db } from '../dialect.ts'

const caches = new WeakMap<Database, Map<string, unknown>>()

/** The bun:sqlite connection behind a Drizzle handle (root or transaction). */
export function connectionOf(db: Db): Database {
  const handle = db as unknown as { $client?: Database; session?: { client?: Database } }
  const client = handle.$client ?? handle.session?.client
  if (!client) throw new Error('no bun:sqlite connection behind this Drizzle handle')
  return client
}

/** The statement `build` makes for this connection and key, made on first use. */
export function prepared<T>(db: Db, key: string, build: () => T): T {
  const connection = connectionOf(db)
  let cache = caches.get(connection)
  if (!cache) {
    cache = new Map()
    caches.set(connection, cache)
  }
  let statement = cache.get(key) as T | undefined
  if (statement === undefined) {
    statement = build()
    cache.set(key, statement)
  }
  return statement
}

/** The raw statement `text` on the connection behind `db`, prepared once per connection under `key`. */
export function statementOn(db: Db, key: string, text: string): Statement {
  return prepared(db, key, () => connectionOf(db).prepare(text))
}

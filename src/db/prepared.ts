/**
 * Prepared statements cached per connection. Drizzle's query builder compiles its SQL on every call (half the
 * throughput on a hot path, STYLE "known traps"); hot paths build their query once per connection and key, and
 * run it with placeholders. Works with a transaction handle too: it is the same connection.
 */
import type { Database, Statement } from 'bun:sqlite'
import { sql, type SQL } from 'drizzle-orm'
import type { SQLiteColumn } from 'drizzle-orm/sqlite-core'
import type { Db } from './open.ts'

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

/**
 * `column IN (the ids in one JSON array placeholder)`: one prepared statement serves any number of ids.
 * SQLite's json_each; a PostgreSQL dialect would use `= ANY($1)`.
 */
export function inJsonArray(column: SQLiteColumn, placeholder: string): SQL {
  return sql`${column} IN (SELECT value FROM json_each(${sql.placeholder(placeholder)}))`
}

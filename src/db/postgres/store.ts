/**
 * The PostgreSQL store (issue 18): a pool of Bun's built-in client (`SQL` from 'bun', chosen by measurement:
 * docs/architecture.md "Transactions across the face") behind Drizzle's `bun-sql` dialect, so twins read and write with the same query
 * builder and the same row shapes (`bigint` columns in number mode) as the SQLite side. `sql.begin` / Drizzle's
 * `transaction` reserve one connection for `BEGIN … COMMIT`; other requests run meanwhile on other connections and
 * never see uncommitted rows (READ COMMITTED).
 */
import { SQL } from 'bun'
import { drizzle } from 'drizzle-orm/bun-sql'
import type { PgDatabase } from 'drizzle-orm/pg-core'
import type { BunSQLQueryResultHKT } from 'drizzle-orm/bun-sql/session'

/**
 * A Drizzle handle on PostgreSQL: the pool, or one transaction's connection (twins take either). Without the schema
 * registry: twins use the query builder over ./schema.ts's tables, never relational queries (`db.query.…`), and a
 * handle with the registry builds a relational query builder for every table each time one is made — once per
 * transaction (a few % of a webhook trigger's CPU).
 */
export type PgDb = PgDatabase<BunSQLQueryResultHKT>

export interface PgStore {
  readonly kind: 'postgres'
  /** The pool, for raw statements (the queue's claim, migrations, LISTEN/NOTIFY). */
  sql: SQL
  db: PgDb
  close(): Promise<void>
}

/** Connections each instance keeps open at most (TRELLIS_DATABASE_POOL overrides). */
export const DEFAULT_POOL_SIZE = 20

export function openPostgres(url: string, options: { max?: number } = {}): PgStore {
  const client = new SQL({ url, max: options.max ?? DEFAULT_POOL_SIZE })
  return { kind: 'postgres', sql: client, db: drizzle({ client }), close: () => client.close() }
}

/** Bun's client behind a Drizzle handle (the pool, or the transaction's reserved connection), for raw statements. */
export function clientOf(db: PgDb): SQL {
  return (db as unknown as { session: { client: SQL } }).session.client
}

/**
 * What the PostgreSQL side shares without opening anything: the Drizzle handle's type, and the client behind a
 * handle. Kept apart from ./store.ts, which opens the pool, so that nothing but `openPostgres` loads
 * Drizzle's `bun-sql` driver: that module reads `Bun.SQL` when it loads, and reading it loads Bun's PostgreSQL client
 * (about 10 ms of a start; ../connect.ts imports ./store.ts only when the configuration names a PostgreSQL database).
 */
import type { SQL } from 'bun'
import type { PgDatabase } from 'drizzle-orm/pg-core'
import type { BunSQLQueryResultHKT } from 'drizzle-orm/bun-sql/session'

/**
 * A Drizzle handle on PostgreSQL: the pool, or one transaction's connection (its runner and plans take either). Without the schema
 * registry: PostgreSQL's queries use the query builder over ./schema.ts's tables, never relational queries (`db.query.…`), and a
 * handle with the registry builds a relational query builder for every table each time one is made — once per
 * transaction (a few % of a webhook trigger's CPU).
 */
export type PgDb = PgDatabase<BunSQLQueryResultHKT>

/** Bun's client behind a Drizzle handle (the pool, or the transaction's reserved connection), for raw statements. */
export function clientOf(db: PgDb): SQL {
  return (db as unknown as { session: { client: SQL } }).session.client
}

/** Rows of a raw statement on the handle's connection (a plan's PostgreSQL half: ../op.ts `plan`). */
export async function rawRows<T>(db: PgDb, text: string, values: unknown[]): Promise<T[]> {
  return [...((await clientOf(db).unsafe(text, values as never[])) as T[])]
}

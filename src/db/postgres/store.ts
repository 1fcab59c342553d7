/**
 * The PostgreSQL store: a pool of Bun's built-in client (`SQL` from 'bun', chosen by measurement:
 * docs/architecture.md "Transactions across the face") behind Drizzle's `bun-sql` dialect, so PostgreSQL reads and writes with the same query
 * builder and the same row shapes (`bigint` columns in number mode) as the SQLite side. `sql.begin` / Drizzle's
 * `transaction` reserve one connection for `BEGIN … COMMIT`; other requests run meanwhile on other connections and
 * never see uncommitted rows (READ COMMITTED).
 *
 * Imported only where a PostgreSQL store is opened (../connect.ts loads it with `import()`): the driver loads Bun's
 * PostgreSQL client with it (./client.ts has the types and `clientOf` everything else uses).
 */
import { SQL } from 'bun'
import { drizzle } from 'drizzle-orm/bun-sql'
import type { PgStore } from './client.ts'

export { clientOf, type PgDb, type PgStore } from './client.ts'

/** Connections each instance keeps open at most (TRELLIS_DATABASE_POOL overrides). */
export const DEFAULT_POOL_SIZE = 20

export function openPostgres(url: string, options: { max?: number } = {}): PgStore {
  const client = new SQL({ url, max: options.max ?? DEFAULT_POOL_SIZE })
  return { kind: 'postgres', sql: client, db: drizzle({ client }), close: () => client.close() }
}

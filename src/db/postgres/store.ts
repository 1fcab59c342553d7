/**
 * PROTOTYPE (issue 16): the PostgreSQL side of the storage face, far enough to know the face fits its two hardest
 * operations — the trigger's multi-row write transaction and the queue claim (`runs.ts`). Nothing in the app imports
 * this folder; the real PostgreSQL dialect (migrations, every query, `TRELLIS_DATABASE_URL`) is issue 18's.
 *
 * Bun's built-in client (`SQL` from 'bun') is asynchronous and pooled: `sql.begin(async (tx) => …)` reserves one
 * connection, runs BEGIN, and COMMITs when the callback resolves or ROLLBACKs when it throws. Other requests run
 * meanwhile on other connections and never see the uncommitted rows (READ COMMITTED).
 */
import { SQL } from 'bun'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

/** A PostgreSQL store: the pool. (The SQLite store is `Store` in ../open.ts; a face over both takes either.) */
export interface PgStore {
  sql: SQL
}

export function openPgStore(url: string, options: { max?: number } = {}): PgStore {
  return { sql: new SQL({ url, max: options.max ?? 10 }) }
}

/** Creates the prototype's tables (schema.sql) in an empty database. */
export async function createPrototypeSchema(store: PgStore): Promise<void> {
  await store.sql.unsafe(readFileSync(join(import.meta.dir, 'schema.sql'), 'utf8')).simple()
}

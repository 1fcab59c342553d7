/**
 * Queries built once. Drizzle's builder compiles its SQL on every call (a third of a request's CPU on PostgreSQL's
 * hot paths, measured with `bun --cpu-prof`); a hot query is built once per key with placeholders, then runs
 * that compiled text — with Drizzle's own row mapping — on the connection of the handle it is given: the pool, or
 * the transaction's reserved connection (a query compiled on one handle must never run outside the caller's
 * transaction). Bun's client prepares the statement on each connection the first time it sees its text.
 *
 * The run itself is Drizzle's `BunSQLPreparedQuery.execute` without its per-call wrappers (three nested async spans
 * for tracing, a cache check that always finds no cache): fill the placeholders, send, map the rows, and wrap a
 * failure as Drizzle does (`DrizzleQueryError`, the driver's error as its `cause`), so callers see the same errors.
 */
import { DrizzleQueryError } from 'drizzle-orm'
import { fillPlaceholders } from 'drizzle-orm/sql'
import * as drizzleUtils from 'drizzle-orm/utils'
import { clientOf, type PgDb } from './client.ts'

interface Prepared {
  execute(values?: Record<string, unknown>): Promise<unknown>
}

/** What Drizzle's prepared query holds (bun-sql session), read once when a query is compiled. */
interface Compiled {
  queryString: string
  params: unknown[]
  fields?: unknown[]
  joinsNotNullableMap?: Record<string, boolean>
  customResultMapper?: (rows: unknown[][]) => unknown
}

/** Drizzle's row mapper (column decoders, nested selections, nullable joins): public in its build, internal in its types. */
const mapResultRow = (drizzleUtils as unknown as { mapResultRow: (fields: unknown[], row: unknown[], joins: Record<string, boolean> | undefined) => unknown }).mapResultRow

const compiled = new Map<string, Compiled>()

/** The query `build` makes, compiled once under `key`, run on `db`'s connection: `await preparedOn(db, k, b).execute({ id })`. */
export function preparedOn<Q extends Prepared>(db: PgDb, key: string, build: (db: PgDb) => { prepare(name: string): Q }): Pick<Q, 'execute'> {
  let query = compiled.get(key)
  if (!query) {
    query = build(db).prepare(key) as unknown as Compiled
    if (typeof query.queryString !== 'string' || !Array.isArray(query.params)) throw new Error(`preparedOn(${key}): not a bun-sql prepared query`)
    compiled.set(key, query)
  }
  const client = clientOf(db)
  const q = query
  return { execute: ((values: Record<string, unknown> = {}) => run(client, q, values)) as Q['execute'] }
}

async function run(client: ReturnType<typeof clientOf>, q: Compiled, values: Record<string, unknown>): Promise<unknown> {
  const params = fillPlaceholders(q.params, values)
  try {
    // `execute()` sends it now, not when first awaited: statements go out in the order the op makes them.
    if (!q.fields && !q.customResultMapper) return await client.unsafe(q.queryString, params as never[]).execute()
    const rows = (await client.unsafe(q.queryString, params as never[]).values().execute()) as unknown[][]
    return q.customResultMapper ? q.customResultMapper(rows) : rows.map((row) => mapResultRow(q.fields!, row, q.joinsNotNullableMap))
  } catch (error) {
    throw new DrizzleQueryError(q.queryString, params, error as Error)
  }
}

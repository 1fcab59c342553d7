/**
 * Queries written once for both stores (docs/architecture.md "Architecture", "One query, two dialects"). A storage operation is an
 * op (./op.ts) made of queries; each query is a function of the dialect context (./dialect.ts) that builds it:
 *
 *   export function findUserById(id: number) {
 *     return row((d) => d.db.select().from(d.t.users).where(eq(d.t.users.id, id)))
 *   }
 *
 * The op's runner builds the query in its store's dialect and runs it: SQLite at once on the connection (`runQuery`,
 * ./sqlite/dialect.ts), PostgreSQL awaited on the pool or the transaction's connection (./postgres/dialect.ts). A hot query is a
 * `statement`: built once per dialect and connection with placeholders, then run with values.
 */
import { type Placeholder, type SQL, sql } from 'drizzle-orm'
import type { Built, Dialect } from './dialect.ts'
import type { Op, QueryAnswer, QueryCall } from './op.ts'

type RowsOf<Q> = Q extends { all(...args: never[]): infer R } ? R : never
type RowOf<Q> = Q extends { get(...args: never[]): infer R } ? R : never

/** Every row the query answers. */
export function rows<Q extends Built>(build: (d: Dialect) => Q): Op<RowsOf<Q>> {
  return queryOp({ build, answer: 'rows' }) as Op<RowsOf<Q>>
}

/** The query's first row, or undefined. */
export function row<Q extends Built>(build: (d: Dialect) => Q): Op<RowOf<Q>> {
  return queryOp({ build, answer: 'row' }) as Op<RowOf<Q>>
}

/** Runs the query for its effect. */
export function exec(build: (d: Dialect) => Built): Op<void> {
  return queryOp({ build, answer: 'none' }) as Op<void>
}

/** The one row an insert returned; `what` names it in the error when there is none. */
export function* inserted<T>(work: Op<T | undefined>, what: string): Op<T> {
  const row = yield* work
  if (row === undefined) throw new Error(`${what} insert returned no row`)
  return row
}

export interface Statement<Q> {
  readonly name: string
  rows(values?: Record<string, unknown>): Op<RowsOf<Q>>
  row(values?: Record<string, unknown>): Op<RowOf<Q>>
  exec(values?: Record<string, unknown>): Op<void>
  /**
   * Runs it for its effect without waiting for its answer in a network store's write (./op.ts `QueryAnswer` 'sent'),
   * `check` judging its rows before the commit.
   */
  send(values?: Record<string, unknown>, check?: (rows: RowsOf<Q>) => void, holdsRun?: string): Op<void>
}

const statementNames = new Set<string>()

/**
 * A hot query: built once per dialect and connection, its values given as named placeholders
 * (`sql.placeholder('id')`, or `placeholders(…)`), then run with values. `name` is unique across the process.
 */
export function statement<Q extends Built>(name: string, build: (d: Dialect) => Q): Statement<Q> {
  if (statementNames.has(name)) throw new Error(`two statements are named ${name}`)
  statementNames.add(name)
  const call = (answer: QueryAnswer, values: Record<string, unknown> = {}) => queryOp({ build, answer, name, values })
  return {
    name,
    rows: (values) => call('rows', values) as Op<RowsOf<Q>>,
    row: (values) => call('row', values) as Op<RowOf<Q>>,
    exec: (values) => call('none', values) as Op<void>,
    send: (values = {}, check, holdsRun) => queryOp({ build, answer: 'sent', name, values, check: check as QueryCall['check'], holdsRun }) as Op<void>,
  }
}

/** One placeholder per name, each named as its key: `values(placeholders('noteId', 'content'))`. */
export function placeholders<K extends string>(...names: K[]): Record<K, Placeholder> {
  return Object.fromEntries(names.map((name) => [name, sql.placeholder(name)])) as unknown as Record<K, Placeholder>
}

/**
 * A constant LIMIT written into the SQL: `.limit(constantLimit(1))`. Drizzle binds a number as a parameter, and a
 * statement whose LIMIT is bound runs about 5 µs slower on SQLite, every time (five times a primary-key read: measured
 * with bench/inprocess.ts). A page's limit, which varies, stays a placeholder.
 */
export function constantLimit(n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`constantLimit(${n}): not a count`)
  return sql.raw(String(n)) as unknown as number // limit() is typed number | Placeholder; both builders embed any SQL
}

/** Placeholders as an update's new values (`set(setPlaceholders('data', 'updatedAt'))`): `set` takes SQL, not a bare placeholder. */
export function setPlaceholders<K extends string>(...names: K[]): Record<K, SQL> {
  return Object.fromEntries(names.map((name) => [name, sql`${sql.placeholder(name)}`])) as Record<K, SQL>
}

function* queryOp(query: QueryCall): Op<unknown> {
  return yield { kind: 'query', query }
}

/**
 * PROTOTYPE (issue 16), not wired into the app: the PostgreSQL runner of ops (src/db/op.ts). An op yields calls of
 * the face's named SQLite functions; here each call runs its PostgreSQL twin, awaited on the one connection of a
 * `BEGIN … COMMIT`, so the service code that built the op — its rules, its 409s — runs unchanged inside a
 * PostgreSQL transaction. A call without a twin is an error (the face is not yet complete for PostgreSQL), never a
 * silent fallback.
 */
import type { TransactionSQL } from 'bun'
import type { Call, Op } from '../op.ts'
import type { PgStore } from './store.ts'

/** A face function's PostgreSQL twin: the same arguments after the connection, the same answer, asynchronously. */
export type PgTwin = (tx: TransactionSQL, ...args: never[]) => Promise<unknown>

/** The twins by the SQLite function they stand for. */
export type PgTwins = ReadonlyMap<Call['fn'], PgTwin>

/** Runs the op `body` makes in one PostgreSQL transaction: all of it commits, or (it threw) none of it. */
export function writeOnPostgres<T>(store: PgStore, twins: PgTwins, body: () => Op<T>): Promise<T> {
  return store.sql.begin((tx) => runOpOnPostgres(tx, twins, body())) as Promise<T>
}

/** Drives `work` on `tx`: each call's twin awaited in turn; a failing call is thrown into the op, as SQLite's runner does. */
export async function runOpOnPostgres<T>(tx: TransactionSQL, twins: PgTwins, work: Op<T>): Promise<T> {
  let step = work.next()
  while (!step.done) {
    const { fn, args } = step.value
    const twin = twins.get(fn)
    if (!twin) throw new Error(`no PostgreSQL twin for ${fn.name || 'an anonymous face function'}`)
    let result: unknown
    try {
      result = await (twin as (tx: TransactionSQL, ...args: readonly unknown[]) => Promise<unknown>)(tx, ...args)
    } catch (error) {
      step = work.throw(error)
      continue
    }
    step = work.next(result)
  }
  return step.value
}

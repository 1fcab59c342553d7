/**
 * The storage face's unit of work (docs/architecture.md "Architecture", "Transactions across the face").
 *
 * Domain code never holds the database. It describes what it needs as an `Op<T>`: a generator that yields calls to
 * the named functions of `src/db` (`yield* op(findTeamByName, projectId, name)`) and returns its answer. A runner
 * of the store drives the generator, running each call and handing back its result:
 * - SQLite: synchronously, inside one transaction when the op is a write (`write` in ./write.ts) — the whole op runs
 *   in one turn of the event loop, so no other request's statements interleave and nobody reads its uncommitted
 *   rows, and a thrown error rolls it all back;
 * - a network database (PostgreSQL): each call awaited on one connection inside `BEGIN … COMMIT`.
 * A generator cannot `await`, so a transaction can never be held open across anything but storage: the rule the
 * face exists for is checked by the compiler. The rules that must hold inside a transaction (last admin, one active
 * run per record) are written once, in the services, whatever the database.
 */
import type { Db } from './open.ts'
import { inSavepoint } from './savepoint.ts'

/** One call of a `src/db` function, as a runner receives it. */
export interface Call {
  readonly fn: (db: Db, ...args: never[]) => unknown
  readonly args: readonly unknown[]
}

/** Domain work against storage that answers T (see the file comment). */
export type Op<T> = Generator<Call, T, unknown>

/** What an op answers: `Answer<ReturnType<typeof renderNotes>>`. */
export type Answer<O> = O extends Op<infer T> ? T : never

/** The call `fn(db, ...args)` as one step of an op: `const team = yield* op(findTeamByName, projectId, name)`. */
export function* op<A extends unknown[], T>(fn: (db: Db, ...args: A) => T, ...args: A): Op<T> {
  return (yield { fn: fn as unknown as Call['fn'], args }) as T
}

/** `fn` as a function of ops: `export const findRecord = findRecordByKey` lets domain code `yield* findRecord(…)`. */
export function asOp<A extends unknown[], T>(fn: (db: Db, ...args: A) => T): (...args: A) => Op<T> {
  return (...args) => op(fn, ...args)
}

/** The items `keep` answers true for, in order (an op's `Array.filter`: a callback cannot `yield`). */
export function* filterOp<T>(items: readonly T[], keep: (item: T) => Op<boolean>): Op<T[]> {
  const kept: T[] = []
  for (const item of items) if (yield* keep(item)) kept.push(item)
  return kept
}

/** An op's answer without any storage call (a branch that needs none). */
export function* answer<T>(value: T): Op<T> {
  return value
}

/**
 * Drives `work` on a SQLite connection, synchronously: every call runs at once; a call that throws is thrown into
 * the op (its `try` may handle it), and whatever the op throws goes on to the caller (whose transaction rolls back).
 */
export function runOp<T>(db: Db, work: Op<T>): T {
  let step = work.next()
  while (!step.done) {
    const { fn, args } = step.value
    let result: unknown
    try {
      result = (fn as (db: Db, ...args: readonly unknown[]) => unknown)(db, ...args)
    } catch (error) {
      step = work.throw(error)
      continue
    }
    step = work.next(result)
  }
  return step.value
}

/** `body` in a savepoint of the op's transaction: when it throws, its writes alone roll back and the error goes on. */
export function savepoint<T>(body: () => Op<T>): Op<T> {
  return op(runInSavepoint<T>, body)
}

/**
 * SAVEPOINT / RELEASE / ROLLBACK TO, prepared once per connection (Drizzle's nested transaction prepared them on every
 * step). One name serves nested savepoints too: SQLite releases or rolls back to the innermost of that name.
 */
export function runInSavepoint<T>(db: Db, body: () => Op<T>): T {
  return inSavepoint(db, (savepoint) => runOp(savepoint, body()))
}

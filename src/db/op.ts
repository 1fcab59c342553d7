/**
 * The storage face's unit of work (docs/architecture.md "Architecture", "Transactions across the face").
 *
 * Domain code never holds the database. It describes what it needs as an `Op<T>`: a generator that yields calls
 * (`Call`) and returns its answer. A runner of the store drives the generator, running each call and handing back
 * its result:
 * - SQLite (./sqlite/op-runner.ts): synchronously, inside one transaction when the op is a write (`write` in
 *   ./write.ts: ./sqlite/group-commit.ts) — the whole op runs in one turn of the event loop, so no other request's
 *   statements interleave and nobody reads its uncommitted rows, and a thrown error rolls it all back;
 * - a network database (./postgres/op-runner.ts): each call awaited on one connection inside `BEGIN … COMMIT`.
 * A generator cannot `await`, so a transaction can never be held open across anything but storage: the rule the
 * face exists for is checked by the compiler. The rules that must hold inside a transaction (last admin, one active
 * run per record) are written once, in the services, whatever the database.
 *
 * A call is one of four kinds, and each runner answers each kind its own way: a query written once (./query.ts), a
 * plan (an operation each store runs its own way: `plan` below), a savepoint around part of the op, a cached lookup
 * (./lookup-cache.ts `cached`).
 */
import type { Built, Db, Dialect } from './dialect.ts'
import type { PgDb } from './postgres/client.ts'

/**
 * What a query answers: every row, the first row (or undefined), or nothing — `sent`: nothing either, and a network
 * store's write transaction does not wait for it (./postgres/op-runner.ts): it sends the statement and goes on, the
 * connection running it in the order sent, and the write waits for its answer before or with its COMMIT. Its failure
 * fails the write, never the op's code after it: only for a statement the op would not catch anyway (not inside a
 * savepoint that is meant to catch it).
 */
export type QueryAnswer = 'rows' | 'row' | 'none' | 'sent'

/** One query written once (./query.ts), as a runner receives it: how to build it, what it answers, and (a statement) its name and values. */
export interface QueryCall {
  readonly build: (d: Dialect) => Built
  readonly answer: QueryAnswer
  /** A statement's name: built once per dialect and connection, run with `values`. */
  readonly name?: string
  readonly values?: Record<string, unknown>
  /**
   * A `sent` statement's check of its rows, thrown from before the COMMIT (the write does not commit): a lease-guarded
   * transition that matched no row. SQLite runs it at once.
   */
  readonly check?: (rows: unknown[]) => void
  /**
   * A `sent` guarded transition's run: from this statement on the transaction holds the run's row (one that matched
   * nothing fails the write before its COMMIT), so an append of the run's events takes no lock of its own on
   * PostgreSQL (./run-events.ts). SQLite has one writer and ignores it.
   */
  readonly holdsRun?: string
}

/**
 * An operation each store runs its own way, as one value: SQLite's half, PostgreSQL's half (the same arguments, the
 * same answer, awaited) and why they differ. Declared with `plan` beside the op that runs it, so a missing half, or
 * halves that disagree, fail to compile.
 */
export interface Plan<A extends unknown[], T> {
  readonly sqlite: (db: Db, ...args: A) => T
  readonly postgres: (db: PgDb, ...args: A) => Promise<T>
  /** Why PostgreSQL cannot run SQLite's half (or a query written once): test/per-dialect.test.ts prints it. */
  readonly why: string
}

/** Any plan, as a runner holds it: it passes the arguments the op gave it (`never[]`: whatever they are). */
export type AnyPlan = Plan<never[], unknown>

/** One call of an op, as a runner receives it: which kind decides how each runner runs it. */
export type Call =
  | { readonly kind: 'query'; readonly query: QueryCall }
  | { readonly kind: 'plan'; readonly plan: AnyPlan; readonly args: readonly unknown[] }
  | { readonly kind: 'savepoint'; readonly body: () => Op<unknown> }
  | { readonly kind: 'cached'; readonly lookup: string; readonly key: string | number; readonly work: Op<unknown> }

/** Domain work against storage that answers T (see the file comment). */
export type Op<T> = Generator<Call, T, unknown>

/** What an op answers: `Answer<ReturnType<typeof renderNotes>>`. */
export type Answer<O> = O extends Op<infer T> ? T : never

const declared: AnyPlan[] = []

/** Every plan declared so far (each module's at its load): test/per-dialect.test.ts counts them. */
export const declaredPlans: readonly AnyPlan[] = declared

/**
 * An operation each store runs its own way (see `Plan`): `const insertQueuedRun = plan({ sqlite: …, postgres: …,
 * why: '…' })`, run by an op as `yield* runPlan(insertQueuedRun, run)`. SQLite's half decides the arguments and the
 * answer; PostgreSQL's must match them. There are few (test/per-dialect.test.ts holds them to at most 15): every
 * other operation is a query written once.
 */
export function plan<A extends unknown[], T>(halves: {
  readonly sqlite: (db: Db, ...args: A) => T
  readonly postgres: (db: PgDb, ...args: A) => Promise<NoInfer<T>>
  readonly why: string
}): Plan<A, T> {
  if (typeof halves.sqlite !== 'function' || typeof halves.postgres !== 'function') throw new Error(`a plan needs both halves: ${halves.why}`)
  const made: Plan<A, T> = Object.freeze({ sqlite: halves.sqlite, postgres: halves.postgres, why: halves.why })
  declared.push(made as unknown as AnyPlan)
  return made
}

/** The plan as one step of an op: `const id = yield* runPlan(insertQueuedRun, run)`. */
export function* runPlan<A extends unknown[], T>(plan: Plan<A, T>, ...args: A): Op<T> {
  return (yield { kind: 'plan', plan: plan as unknown as AnyPlan, args }) as T
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

/** `body` in a savepoint of the op's transaction: when it throws, its writes alone roll back and the error goes on. */
export function* savepoint<T>(body: () => Op<T>): Op<T> {
  return (yield { kind: 'savepoint', body }) as T
}

/**
 * `body` with each of its resumptions run inside `during` (which sets up and undoes something synchronous around
 * it): the code of an op runs only between its yields, inside these resumptions, so what `during` sets holds for
 * every line of `body` and its nested ops, and for nothing else — not for the calls it yields (a savepoint's or a
 * cached lookup's own op is run by the runner, outside), nor for another transaction's op interleaved on
 * PostgreSQL. An op-scoped setting without a parameter threaded through every op between.
 */
export function* within<T>(body: Op<T>, during: <R>(resume: () => R) => R): Op<T> {
  let step = during(() => body.next())
  while (!step.done) {
    let result: unknown
    try {
      result = yield step.value
    } catch (error) {
      step = during(() => body.throw(error))
      continue
    }
    step = during(() => body.next(result))
  }
  return step.value
}

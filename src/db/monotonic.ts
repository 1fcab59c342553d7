/**
 * Lists page by `createdAt` while ordering by id, so `createdAt` must never go backwards in id order within
 * what one list shows (DESIGN §3). Call inside the write transaction that inserts the row.
 *
 * Listed times are epoch microseconds taken from a millisecond clock: an entry gets `now` (its last three digits
 * 0) or, when the list already holds a time at or past it, the next microsecond. A thousand entries fit in each
 * millisecond before a list's times would run ahead of the clock (a million a second, far above any throughput:
 * docs/design-decisions.md "Times").
 *
 * With one writer at a time (SQLite) `max(now, latest + 1 µs)` is exact. With several (PostgreSQL) the list scope is
 * held first (`holdListScope`: its lock, ./postgres/monotonic.ts), so each writer reads the latest its predecessor
 * committed and times follow commit order. On both, a transaction that already dated an entry of the scope counts on
 * from it without reading again. Holding a scope and remembering its time are plans (./op.ts `plan`): each store
 * keeps what a transaction knows its own way.
 */
import type { Database } from 'bun:sqlite'
import { eq, isNull, max, sql } from 'drizzle-orm'
import { type Micros, type Millis, microsFromMillis } from '../lib/time.ts'
import { type Op, plan, runPlan } from './op.ts'
import type { Db } from './dialect.ts'
import { connectionOf } from './sqlite/prepared.ts'
import { listColumns, statementOfShape, type TimeOrderedList } from './pages.ts'
import { rawRows } from './postgres/client.ts'
import { heldListTimes, lockListScope, pgListOf } from './postgres/monotonic.ts'

/**
 * `max(now, latest createdAt in the list + 1 µs)`: strictly after every earlier entry of the list scope, and `now`
 * itself whenever the list is not already past it. An index on (scope, created_at) makes the read one seek; a
 * transaction that already set the scope's newest time (PostgreSQL, under its lock) counts on from it unread.
 */
export function* nextCreatedAt(list: TimeOrderedList, scopeValue: number | null, now: Millis): Op<Micros> {
  const known = yield* runPlan(holdListScope, list, scopeValue)
  const at = microsFromMillis(now)
  const latest = known ?? (yield* readLatestCreatedAt(list, scopeValue))
  const next = latest === null || latest < at ? at : ((latest + 1) as Micros)
  yield* runPlan(rememberListTime, list, scopeValue, next)
  return next
}

/**
 * The first of `count` consecutive times (µs) for as many entries of the list scope written one after another in this
 * transaction (a batch): entry i gets the first + i, exactly what `count` calls of `nextCreatedAt` would give them.
 */
export function* nextCreatedAts(list: TimeOrderedList, scopeValue: number | null, now: Millis, count: number): Op<Micros> {
  const first = yield* nextCreatedAt(list, scopeValue, now)
  if (count > 1) yield* runPlan(rememberListTime, list, scopeValue, (first + count - 1) as Micros)
  return first
}

/**
 * The newest createdAt in the list scope (epoch µs), or null when it is empty, read with the scope held: the caller
 * may insert a row of its own time next (an import), before any other writer of the scope, so what this transaction
 * counted for the scope is forgotten.
 */
export function* latestCreatedAt(list: TimeOrderedList, scopeValue: number | null): Op<Micros | null> {
  yield* runPlan(holdListScope, list, scopeValue)
  yield* runPlan(rememberListTime, list, scopeValue, null)
  return yield* readLatestCreatedAt(list, scopeValue)
}

function* readLatestCreatedAt(list: TimeOrderedList, scopeValue: number | null): Op<Micros | null> {
  const shape = list.scope === null ? 'all' : scopeValue !== null ? 'scope' : 'null-scope'
  const latest = statementOfShape(`${list.name}.latest.${shape}`, (d) => {
    const { table, createdAt, scope } = listColumns(d, list)
    return d.db
      .select({ at: max(createdAt) })
      .from(table)
      .where(scope === null ? undefined : scopeValue !== null ? eq(scope, sql.placeholder('scope')) : isNull(scope))
  })
  return ((yield* latest.row({ scope: scopeValue }))?.at as Micros | null | undefined) ?? null
}

/**
 * SQLite: the newest time each list scope got in the connection's open write transaction (`countListTimes`). Its
 * one writer holds every scope already, so what the transaction set is the scope's newest until it ends: the entries
 * a group commit writes to one environment read the newest once, not once each. A savepoint rolled back may leave a
 * time here that its row no longer holds: the next entry comes a microsecond after it instead of after the row
 * before, still strictly later. Outside `countListTimes` (no map) nothing is counted and every entry reads.
 */
const sqliteListTimes = new WeakMap<Database, Map<string, Micros>>()
const scopeKey = (list: TimeOrderedList, scopeValue: number | null) => `${list.table}|${list.scope}|${scopeValue}`

/**
 * Runs `fn` (the body of a write transaction on the connection behind `db`: ./sqlite/transactions.ts's
 * `transaction`) with the transaction's list times counted, and forgets them when it ends, committed or not: after
 * the commit another process (the CLI) may write the same scopes.
 */
export function countListTimes<T>(db: Db, fn: () => T): T {
  const connection = connectionOf(db)
  sqliteListTimes.set(connection, new Map())
  try {
    return fn()
  } finally {
    sqliteListTimes.delete(connection)
  }
}

/**
 * Holds the list scope for this transaction's next entry, and answers the newest time this transaction set there
 * (undefined: none, read it). SQLite's one writer holds every scope already.
 *
 * PostgreSQL takes the list scope's lock; answers the newest time this transaction set in the scope, or else the
 * scope's newest time, read by a statement sent right behind the lock's without waiting for its answer: the
 * connection runs it once the lock is granted, so its snapshot (READ COMMITTED: taken when it starts) holds what the
 * lock's previous holder committed, and the writer waits once under the lock where it waited twice (0: the scope is
 * empty).
 */
const holdListScope = plan({
  sqlite: (db: Db, list: TimeOrderedList, scopeValue: number | null): Micros | undefined =>
    sqliteListTimes.get(connectionOf(db))?.get(scopeKey(list, scopeValue)),
  postgres: async (db, list, scopeValue) => {
    const pgList = pgListOf(list)
    const known = heldListTimes(db).get(pgList, scopeValue)
    const locked = lockListScope(db, pgList, scopeValue)
    if (known !== undefined) return locked.then(() => known)
    const where = pgList.scope === null ? '' : scopeValue === null ? `WHERE ${pgList.scope} IS NULL` : `WHERE ${pgList.scope} = $1`
    const latest = rawRows<{ at: number | null }>(db, `SELECT max(created_at)::float8 AS at FROM ${pgList.table} ${where}`, where.includes('$1') ? [scopeValue] : [])
    latest.catch(() => {}) // a failed lock fails it too: the lock's error is the one thrown
    await locked
    return ((await latest)[0]?.at ?? 0) as Micros
  },
  why: "writers of one list scope queue on its advisory lock to date entries in commit order; SQLite's one writer holds every scope",
})

/** Remembers the newest time this transaction set in the list scope (null: forgets it). */
const rememberListTime = plan({
  sqlite: (db: Db, list: TimeOrderedList, scopeValue: number | null, at: Micros | null): void => {
    const times = sqliteListTimes.get(connectionOf(db))
    if (times === undefined) return
    if (at === null) times.delete(scopeKey(list, scopeValue))
    else times.set(scopeKey(list, scopeValue), at)
  },
  postgres: async (db, list, scopeValue, at) => {
    heldListTimes(db).set(pgListOf(list), scopeValue, at)
  },
  why: "the transaction's newest time per list scope lives beside PostgreSQL's list locks and goes with them at a savepoint's rollback; SQLite's lives with the connection's write transaction",
})

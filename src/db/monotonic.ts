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
 * committed and times follow commit order.
 */
import { eq, isNull, max, sql } from 'drizzle-orm'
import { type Micros, type Millis, microsFromMillis } from '../lib/time.ts'
import { type Op, op } from './op.ts'
import type { Db } from './open.ts'
import { listColumns, statementOfShape, type TimeOrderedList } from './pages.ts'

/**
 * `max(now, latest createdAt in the list + 1 µs)`: strictly after every earlier entry of the list scope, and `now`
 * itself whenever the list is not already past it. An index on (scope, created_at) makes the read one seek; a
 * transaction that already set the scope's newest time (PostgreSQL, under its lock) counts on from it unread.
 */
export function* nextCreatedAt(list: TimeOrderedList, scopeValue: number | null, now: Millis): Op<Micros> {
  const known = yield* op(holdListScope, list, scopeValue)
  const at = microsFromMillis(now)
  const latest = known ?? (yield* readLatestCreatedAt(list, scopeValue))
  const next = latest === null || latest < at ? at : ((latest + 1) as Micros)
  yield* op(rememberListTime, list, scopeValue, next)
  return next
}

/**
 * The newest createdAt in the list scope (epoch µs), or null when it is empty, read with the scope held: the caller
 * may insert a row of its own time next (an import), before any other writer of the scope, so what this transaction
 * counted for the scope is forgotten.
 */
export function* latestCreatedAt(list: TimeOrderedList, scopeValue: number | null): Op<Micros | null> {
  yield* op(holdListScope, list, scopeValue)
  yield* op(rememberListTime, list, scopeValue, null)
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
 * Holds the list scope for this transaction's next entry, and answers the newest time this transaction set there
 * (undefined: none, read it). SQLite's one writer holds every scope already and counts nothing. Per-dialect:
 * PostgreSQL's in ./postgres/per-dialect.ts.
 */
export function holdListScope(_db: Db, _list: TimeOrderedList, _scopeValue: number | null): Micros | undefined {
  return undefined
}

/** Remembers the newest time this transaction set in the list scope (null: forgets it). SQLite counts nothing. Per-dialect. */
export function rememberListTime(_db: Db, _list: TimeOrderedList, _scopeValue: number | null, _at: Micros | null): void {}

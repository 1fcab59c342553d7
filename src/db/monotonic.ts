/**
 * Lists page by `createdAt` while ordering by id, so `createdAt` must never go backwards in id order within
 * what one list shows (DESIGN §3). Call inside the write transaction that inserts the row.
 *
 * Listed times are epoch microseconds taken from a millisecond clock: an entry gets `now` (its last three digits
 * 0) or, when the list already holds a time at or past it, the next microsecond. A thousand entries fit in each
 * millisecond before a list's times would run ahead of the clock (a million a second, far above any throughput:
 * docs/design-decisions.md "Times").
 *
 * With one writer at a time (SQLite) `max(now, latest + 1 µs)` is exact. With several (PostgreSQL) either the list
 * scope is held first (`holdListScope`: its lock, ./postgres/monotonic.ts), so each writer reads the latest its
 * predecessor committed and times follow commit order, or (the notes, the activity log) rows are inserted with the
 * time their writer proposes and the lists' pass dates them in id order before anyone reads them
 * (./postgres/list-watermark.ts). On both, a transaction that already dated an entry of the scope counts on
 * from it without reading again. Holding a scope and remembering its time are plans (./op.ts `plan`): each store
 * keeps what a transaction knows its own way.
 */
import type { Database } from 'bun:sqlite'
import { eq, isNull, max, type Placeholder, type SQL, sql } from 'drizzle-orm'
import { type ChainLink, chainKey } from '../lib/audit-chain.ts'
import { type Micros, type Millis, microsFromMillis } from '../lib/time.ts'
import { type Op, plan, runPlan } from './op.ts'
import type { Db, Dialect } from './dialect.ts'
import { connectionOf, statementOn } from './sqlite/prepared.ts'
import { listColumns, statementOfShape, type TimeOrderedList } from './pages.ts'
import { rawRows } from './postgres/client.ts'
import { heldListTimes, lockListScope, pgListOf, reserveIds, type ScopeHead } from './postgres/monotonic.ts'

/**
 * `max(now, latest createdAt in the list + 1 µs)`: strictly after every earlier entry of the list scope, and `now`
 * itself whenever the list is not already past it. An index on (scope, created_at) makes the read one seek; a
 * transaction that already set the scope's newest time (PostgreSQL, under its lock) counts on from it unread.
 */
export function* nextCreatedAt(list: TimeOrderedList, scopeValue: number | null, now: Millis): Op<Micros> {
  const known = yield* runPlan(holdListScope, list, scopeValue, 0)
  const latest = known?.at ?? (yield* readLatestCreatedAt(list, scopeValue))
  const next = timeAfter(latest, now)
  yield* runPlan(rememberListTime, list, scopeValue, { at: next })
  return next
}

/** `max(now, latest + 1 µs)`. */
const timeAfter = (latest: Micros | null, now: Millis): Micros => {
  const at = microsFromMillis(now)
  return latest === null || latest < at ? at : ((latest + 1) as Micros)
}

/** Where a chained log's next entries go: the first one's time (`nextCreatedAts`) and the scope's head link, null when the chain is empty. */
export interface ChainedEntries {
  createdAt: Micros
  head: ChainLink | null
}

/**
 * `nextCreatedAts` for a hash-chained log (src/lib/audit-chain.ts): the same time, and the link the entries chain on
 * from — both read from the scope's head entry in one seek of the chain index (its time is the scope's newest:
 * entries are dated in position order), or known to this transaction already; a chain with no entry left goes on from
 * its newest retention anchor. Positions follow the same order as times: commit order, under the scope's hold.
 * `reserve`: on PostgreSQL, the ids the insert will take, drawn from the log's sequence in the same statement, under
 * the lock. The caller inserts the entries at positions head + 1, … and then tells the transaction its new head
 * (`chainedEntriesWritten`).
 */
export function* nextChainedEntries(list: TimeOrderedList, scopeValue: number | null, now: Millis, reserve: number): Op<ChainedEntries> {
  const head = yield* runPlan(holdListScope, list, scopeValue, reserve)
  if (head?.link === undefined) throw new Error(`the list ${list.name} is not chained`)
  return { createdAt: timeAfter(head.at, now), head: head.link }
}

/** Remembers a chained log scope's newest entry this transaction wrote: its time and link. */
export function* chainedEntriesWritten(list: TimeOrderedList, scopeValue: number | null, at: Micros, link: ChainLink | null): Op<void> {
  yield* runPlan(rememberListTime, list, scopeValue, link === null ? { at } : { at, link })
}

/**
 * `max(now, latest + 1 µs)` in SQL (`timeAfter`), for an insert that dates its own row: the list scope's newest
 * createdAt + 1 µs, or `now` (µs) when the list is not past it — one statement where reading the newest and then
 * inserting took two (on PostgreSQL, two round trips under the scope's lock). Hold the scope first
 * (`holdListScopeToInsert`), and tell the transaction the time the row got (`listTimeWritten`).
 */
export function createdAtAfterLatest(d: Dialect, list: TimeOrderedList, scopeValue: Placeholder, now: Placeholder): SQL {
  const { table, createdAt, scope } = listColumns(d, list)
  const where = scope === null ? sql`` : sql` WHERE ${scope} = ${scopeValue}`
  return sql`(SELECT CASE WHEN latest >= ${now} THEN latest + 1 ELSE ${now} END FROM (SELECT max(${createdAt}) AS latest FROM ${table}${where}) newest)`
}

/**
 * Holds the list scope for an insert that dates its row itself (`createdAtAfterLatest`): on PostgreSQL its lock,
 * sent without waiting for the grant — the insert queues behind it and runs once the lock is held; SQLite's one
 * writer holds every scope already.
 */
export function* holdListScopeToInsert(list: TimeOrderedList, scopeValue: number | null): Op<void> {
  yield* runPlan(holdListScope, list, scopeValue, 'hold only')
}

/** Tells the transaction the time an insert gave the list scope's newest row (what `nextCreatedAt` counts on from). */
export function* listTimeWritten(list: TimeOrderedList, scopeValue: number | null, at: Micros): Op<void> {
  yield* runPlan(rememberListTime, list, scopeValue, { at })
}

/**
 * The first of `count` consecutive times (µs) for as many entries of the list scope written one after another in this
 * transaction (a batch): entry i gets the first + i, exactly what `count` calls of `nextCreatedAt` would give them.
 */
export function* nextCreatedAts(list: TimeOrderedList, scopeValue: number | null, now: Millis, count: number): Op<Micros> {
  const first = yield* nextCreatedAt(list, scopeValue, now)
  if (count > 1) yield* runPlan(rememberListTime, list, scopeValue, { at: (first + count - 1) as Micros })
  return first
}

/**
 * The newest createdAt in the list scope (epoch µs), or null when it is empty, read with the scope held: the caller
 * may insert a row of its own time next (an import), before any other writer of the scope, so what this transaction
 * counted for the scope is forgotten.
 */
export function* latestCreatedAt(list: TimeOrderedList, scopeValue: number | null): Op<Micros | null> {
  yield* runPlan(holdListScope, list, scopeValue, 0)
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
 * SQLite: the newest time (and, in a chained log, link) each list scope got in the connection's open write
 * transaction (`countListTimes`). Its one writer holds every scope already, so what the transaction set is the
 * scope's newest until it ends: the entries a group commit writes to one environment read the newest once, not once
 * each. A savepoint rolled back forgets them all (`forgetListTimes`): its rows are gone, and a link to a row that is
 * not there would break the chain. Outside `countListTimes` (no map) nothing is counted and every entry reads.
 */
const sqliteListTimes = new WeakMap<Database, Map<string, ScopeHead>>()
/** SQLite: the id the next row of a chained log's table takes in the open write transaction (`nextIdsOnSqlite`). */
const sqliteNextIds = new WeakMap<Database, Map<string, number>>()

/**
 * SQLite: the first of `count` ids the next rows of `table` (AUTOINCREMENT) take, as the table itself would number
 * them: read once per write transaction (`read`: one past the largest id the table ever gave), then counted on. Its
 * one writer inserts nothing else in between: a chained log's inserts all come through its plan (./log-chain.ts),
 * which hashes each entry with its id before inserting it (the append-only triggers refuse setting it after).
 */
export function nextIdsOnSqlite(db: Db, table: string, count: number, read: () => number): number {
  const ids = sqliteNextIds.get(connectionOf(db))
  const first = ids?.get(table) ?? read()
  ids?.set(table, first + count)
  return first
}
const scopeKey = (list: TimeOrderedList, scopeValue: number | null) => `${list.table}|${list.scope}|${scopeValue}`

/**
 * Runs `fn` (the body of a write transaction on the connection behind `db`: ./sqlite/transactions.ts's
 * `transaction`) with the transaction's list times counted, and forgets them when it ends, committed or not: after
 * the commit another process (the CLI) may write the same scopes.
 */
export function countListTimes<T>(db: Db, fn: () => T): T {
  const connection = connectionOf(db)
  sqliteListTimes.set(connection, new Map())
  sqliteNextIds.set(connection, new Map())
  try {
    return fn()
  } finally {
    sqliteListTimes.delete(connection)
    sqliteNextIds.delete(connection)
  }
}

/** After a savepoint's rollback on SQLite (./sqlite/savepoint.ts): what the transaction knew of its scopes may name rows now gone. */
export function forgetListTimes(db: Db): void {
  sqliteListTimes.get(connectionOf(db))?.clear()
  sqliteNextIds.get(connectionOf(db))?.clear()
}

/**
 * Holds the list scope for this transaction's next entry, and answers the newest entry this transaction set there
 * (undefined: none, read it). SQLite's one writer holds every scope already. `reserve` 'hold only': take the lock and read
 * nothing (`holdListScopeToInsert`: the insert dates its row itself).
 *
 * PostgreSQL takes the list scope's lock; answers the newest entry this transaction set in the scope, or else the
 * scope's newest time — and in a chained log its head link, with `reserve` ids drawn from the log's sequence —,
 * read by a statement sent right behind the lock's without waiting for its answer: the connection runs it once the
 * lock is granted, so its snapshot (READ COMMITTED: taken when it starts) holds what the lock's previous holder
 * committed, and the writer waits once under the lock where it waited twice (0: the scope is empty). A list the
 * lists' pass dates (`PgTimedList.watermark`: the notes, the activity log) holds nothing: its rows propose a time
 * (`PgTimedList.proposesNow`), and the pass moves the few that are not after the row before them.
 */
const holdListScope = plan({
  sqlite: (db: Db, list: TimeOrderedList, scopeValue: number | null, reserve: number | 'hold only'): ScopeHead | undefined => {
    const known = sqliteListTimes.get(connectionOf(db))?.get(scopeKey(list, scopeValue))
    if (reserve === 'hold only' || list.chain === undefined || known?.link !== undefined) return known
    return readHeadOnSqlite(db, list.chain, scopeValue)
  },
  postgres: async (db, list, scopeValue, reserve) => {
    const pgList = pgListOf(list)
    const known = heldListTimes(db).get(pgList, scopeValue)
    // Dated by the lists' pass: its writers hold nothing, and propose a time after their own newest entry, or `now`
    // (the activity log), or after the newest their snapshot sees (the notes: read below, under no lock).
    const dated = pgList.watermark !== undefined
    if (dated && pgList.proposesNow) return { at: known?.at ?? (0 as Micros), link: null }
    if (reserve === 'hold only') return dated ? known : lockListScope(db, pgList, scopeValue, false).then(() => known)
    const locked = dated ? Promise.resolve() : lockListScope(db, pgList, scopeValue)
    if (known !== undefined && (pgList.chain === undefined || known.link !== undefined)) return locked.then(() => known)
    const chain = pgList.chain
    if (chain === undefined) {
      const where = pgList.scope === null ? '' : scopeValue === null ? `WHERE ${pgList.scope} IS NULL` : `WHERE ${pgList.scope} = $1`
      const latest = rawRows<{ at: number | null }>(db, `SELECT max(created_at)::float8 AS at FROM ${pgList.table} ${where}`, where.includes('$1') ? [scopeValue] : [])
      latest.catch(() => {}) // a failed lock fails it too: the lock's error is the one thrown
      await locked
      return { at: ((await latest)[0]?.at ?? 0) as Micros }
    }
    // A chained log: its head row (its time is the scope's newest: entries are dated in position order) and the ids
    // its next entries take, drawn under the lock.
    const head = rawRows<{ at: number | null; position: number | null; hash: string | null; ids: number[] }>(
      db,
      `SELECT h.created_at::float8 AS at, h.chain_position::float8 AS position, h.chain_hash AS hash,
        ARRAY(SELECT nextval('${chain.ids}')::float8 FROM generate_series(1, $2::int4)) AS ids
      FROM (SELECT 1) o LEFT JOIN LATERAL (SELECT created_at, chain_position, chain_hash FROM ${pgList.table}
        WHERE ${chain.scope} AND chain_position IS NOT NULL ORDER BY chain_position DESC LIMIT 1) h ON TRUE`,
      [scopeValue ?? 0, reserve],
    )
    head.catch(() => {}) // as above
    await locked
    const [row] = await head
    reserveIds(db, pgList, scopeValue, row!.ids.map(Number))
    if (row!.position !== null && row!.hash !== null) return { at: (row!.at ?? 0) as Micros, link: { position: Number(row!.position), hash: row!.hash } }
    const [anchor] = await rawRows<{ position: number; hash: string }>(db, NEWEST_ANCHOR.replace('position,', 'position::float8 AS position,'), [chainKey({ log: chain.log, scopeId: scopeValue })])
    return { at: 0 as Micros, link: anchor === undefined ? null : { position: Number(anchor.position), hash: anchor.hash } }
  },
  why: "writers of one list scope queue on its advisory lock to date (and chain) entries in commit order; SQLite's one writer holds every scope",
})

/**
 * A chain with no entry left (log retention pruned them all) goes on from its newest anchor: the position and hash
 * of the last entry pruned (docs/audit.md "Anchors"); none: the chain starts at position 1.
 */
const NEWEST_ANCHOR = "SELECT position, hash FROM audit_checkpoints WHERE scope_key = $1 AND kind = 'anchor' ORDER BY position DESC LIMIT 1"

/**
 * SQLite's read of a chained log scope's head: its time (the scope's newest: entries are dated in position order), its
 * link, and the id the table gives its next row (kept for `nextIdsOnSqlite` unless this transaction counts it
 * already), in one seek of the chain index. An empty chain starts at position 1, dated `now`.
 */
function readHeadOnSqlite(db: Db, chain: NonNullable<TimeOrderedList['chain']>, scopeValue: number | null): ScopeHead {
  const { table, scope } = chain
  const read = statementOn(
    db,
    `${table}.head`,
    `SELECT created_at, chain_position, chain_hash, (SELECT seq FROM sqlite_sequence WHERE name = '${table}') + 1
    FROM ${table} WHERE ${scope} = ? AND chain_position IS NOT NULL ORDER BY chain_position DESC LIMIT 1`,
  )
  const found = read.values(scopeValue ?? 0)[0] as [number, number, string, number | null] | undefined
  if (found === undefined) {
    const anchor = statementOn(db, 'audit_checkpoints.newest-anchor', NEWEST_ANCHOR).values(chainKey({ log: chain.log, scopeId: scopeValue }))[0] as [number, string] | undefined
    return { at: 0 as Micros, link: anchor === undefined ? null : { position: anchor[0], hash: anchor[1] } }
  }
  const [at, position, hash, nextId] = found
  const ids = sqliteNextIds.get(connectionOf(db))
  if (ids !== undefined && nextId !== null && !ids.has(table)) ids.set(table, nextId)
  return { at: at as Micros, link: { position, hash } }
}

/** Remembers the newest entry this transaction wrote in the list scope (null: forgets it). */
const rememberListTime = plan({
  sqlite: (db: Db, list: TimeOrderedList, scopeValue: number | null, head: ScopeHead | null): void => {
    const times = sqliteListTimes.get(connectionOf(db))
    if (times === undefined) return
    if (head === null) times.delete(scopeKey(list, scopeValue))
    else times.set(scopeKey(list, scopeValue), head)
  },
  postgres: async (db, list, scopeValue, head) => {
    heldListTimes(db).set(pgListOf(list), scopeValue, head)
  },
  why: "the transaction's newest time per list scope lives beside PostgreSQL's list locks and goes with them at a savepoint's rollback; SQLite's lives with the connection's write transaction",
})

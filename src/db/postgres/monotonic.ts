/**
 * The lists' time rule (src/db/monotonic.ts, DESIGN §3) with several writers. On SQLite one writer at a time makes
 * `max(now, latest + 1 µs)` exact. On PostgreSQL instances write at once, so the next createdAt of a list scope (a
 * note's messages, a project's admin log) is taken under a transaction-level advisory lock on (list, scope): writers
 * of one scope queue there until the holder commits, so each reads the latest its predecessor committed, and times
 * follow commit order. Writers of other scopes never wait. The lists the lists' pass dates (the notes, the activity
 * log, the tasks: `PgTimedList.watermark`; the runs) take no lock: their rows propose a time, and the pass moves the
 * few that must move after the commit (./list-watermark.ts). The rule itself is ../monotonic.ts's, written once; here
 * are the locks, and what a transaction knows of them (used by the PostgreSQL halves of ../monotonic.ts's plans
 * `holdListScope` and `rememberListTime`).
 */
import type { ChainLink } from '../../lib/audit-chain.ts'
import type { Micros } from '../../lib/time.ts'
import type { TimeOrderedList } from '../pages.ts'
import { clientOf, type PgDb, rawRows } from './client.ts'
import type { WatermarkedList } from '../dialect.ts'

/** A list of PostgreSQL rows ordered by time: its table, its scope column (null: the whole table) and its lock key. */
export interface PgTimedList {
  table: string
  scope: string | null
  /** The first key of its advisory lock: a small constant, never reused by a list of another scope. */
  lockKey: number
  /**
   * A hash-chained log (src/lib/audit-chain.ts): the expression its chain index scopes positions by (`$1`: the
   * scope's value, 0 for none) and the sequence its ids come from (taken under the lock: ids rise with positions).
   */
  chain?: { log: 'activity' | 'admin'; scope: string; ids: string }
  /**
   * Dated (and chained) by the lists' pass (./list-watermark.ts), not under a lock: its writers insert at once, each
   * row with the time it proposes, and its readers read at or below the watermark.
   */
  watermark?: WatermarkedList
  /**
   * Its writers propose `now` (or 1 µs after their transaction's own newest row) without reading the scope's newest:
   * a log written several entries a write, where the read would be a round trip each. Otherwise a dated list's writer
   * proposes `max(now, newest it sees + 1 µs)`, so that its rows mostly need no move.
   */
  proposesNow?: true
}

/** What a transaction knows of a list scope's newest entry: its time and, in a chained log, its link (null: none yet). */
export interface ScopeHead {
  at: Micros
  link?: ChainLink | null
}

/**
 * The key the environment's lists once shared. The notes, the activity log and the tasks take no lock: the lists' pass
 * dates them (their keys are never taken), as it dates the runs (../queue.ts `insertQueuedRunOnPostgres`: not a list
 * of this file).
 */
const ENVIRONMENT_LISTS_LOCK = 3

export const PG_LISTS = {
  /** Dated by the lists' pass: its lock key is never taken. */
  notes: { table: 'notes', scope: 'environment_id', lockKey: ENVIRONMENT_LISTS_LOCK, watermark: 'notes' },
  noteMessages: { table: 'note_messages', scope: 'note_id', lockKey: 2 },
  /** Dated and chained by the lists' pass: its lock key is never taken, its head never read here. */
  activityLogs: { table: 'activity_logs', scope: 'environment_id', lockKey: ENVIRONMENT_LISTS_LOCK, watermark: 'activity_logs', proposesNow: true },
  adminLogs: { table: 'admin_logs', scope: 'project_id', lockKey: 4, chain: { log: 'admin', scope: 'coalesce(project_id, 0) = $1', ids: 'admin_logs_id_seq' } },
  /** Dated by the lists' pass (its rows wait in `tasks_unlisted`): its lock key is never taken. */
  tasks: { table: 'tasks', scope: 'environment_id', lockKey: ENVIRONMENT_LISTS_LOCK, watermark: 'tasks' },
} as const satisfies Record<string, PgTimedList>

/**
 * What a write's transaction knows of its list locks, kept by ./op-runner.ts (one per transaction, shared by its
 * savepoints): the scopes it holds, and each list scope's newest createdAt as this transaction set it. A step group
 * of a workflow writes several entries under one lock; only the first takes the lock and reads the newest, the
 * others count on from it (no other writer of the scope can commit meanwhile). Every round trip saved is one less
 * that the scope's other writers wait out. A savepoint rolled back also releases the locks taken inside it, so the
 * runner forgets everything then (`forgetListLocks`), and the next write locks and reads again.
 */
export interface ListLocks {
  held: Set<string>
  latest: Map<string, ScopeHead>
  /** Ids a chained log's next entries of a scope take, in order: drawn from its sequence under the scope's lock. */
  reservedIds: Map<string, number[]>
  /** The environments this transaction appended run events to (kept through a savepoint's rollback: announced after the commit). */
  runEvents: Set<number>
  /** The channels its commit should wake (./notify.ts; kept through a savepoint's rollback: a wake-up for nothing is harmless). */
  channels: Set<string>
  /**
   * The runs whose rows this transaction has updated, and so holds locked until it ends (a claim's start, a
   * transition): an append of their events needs no lock of its own (../run-events.ts).
   */
  lockedRuns: Set<string>
  /** Savepoints made so far (their names: ./op-runner.ts). */
  savepoints: number
  /**
   * Statements sent and not awaited (a savepoint's RELEASE, a `sent` query: ../op.ts `QueryAnswer`), in the order
   * sent: the COMMIT goes right behind them, and the write then reads their answers.
   */
  unanswered: Promise<unknown>[]
  /** The checks of `sent` queries (../op.ts `QueryCall.check`): awaited before the COMMIT is sent. */
  checks: Promise<unknown>[]
}

const LIST_LOCKS = Symbol('trellis.listLocks')
type Tracked = { [LIST_LOCKS]?: ListLocks }

/** Starts tracking on a transaction's handle, or (`from`) shares its parent's tracking with a savepoint's handle. */
export function trackListLocks(tx: PgDb, from?: PgDb): void {
  ;(tx as Tracked)[LIST_LOCKS] = from === undefined ? { held: new Set(), latest: new Map(), reservedIds: new Map(), runEvents: new Set(), channels: new Set(), lockedRuns: new Set(), savepoints: 0, unanswered: [], checks: [] } : (from as Tracked)[LIST_LOCKS]
}

/** After a savepoint's rollback: its locks are released, its rows gone. */
export function forgetListLocks(db: PgDb): void {
  const locks = (db as Tracked)[LIST_LOCKS]
  locks?.held.clear()
  locks?.latest.clear()
  locks?.reservedIds.clear()
  locks?.lockedRuns.clear()
}

const listLocksOf = (db: PgDb) => (db as Tracked)[LIST_LOCKS]

/** A new savepoint name in the tracked transaction `db`; null outside tracking. */
export function nextSavepointName(db: PgDb): string | null {
  const locks = listLocksOf(db)
  return locks === undefined ? null : `trellis_${++locks.savepoints}`
}

/**
 * A statement of the write `db` sent without awaiting its answer (`answer`: its answer, `check`ed before the COMMIT
 * when given): kept for the write to read with its COMMIT's, resolving at once — or, outside a tracked transaction,
 * where nobody would read it, awaited (and checked) before it resolves.
 */
export async function answerBeforeCommit(db: PgDb, answer: Promise<unknown[]>, check?: (rows: unknown[]) => void): Promise<void> {
  const locks = listLocksOf(db)
  if (locks === undefined) {
    const rows = await answer
    check?.(rows)
    return
  }
  answer.catch(() => {}) // read by the write later; not an unhandled rejection meanwhile
  locks.unanswered.push(answer)
  if (check !== undefined) {
    const checked = answer.then(check)
    checked.catch(() => {})
    locks.checks.push(checked)
  }
}

/** Sends a raw statement on the handle's connection; its answer is read as `answerBeforeCommit` says. */
export function sendRaw(db: PgDb, text: string, values: unknown[]): Promise<void> {
  return answerBeforeCommit(db, clientOf(db).unsafe(text, values as never[]).execute())
}

/** How many statements the transaction `db` has sent without awaiting them so far (a savepoint's start). */
export function sentMark(db: PgDb): { unanswered: number; checks: number } {
  const locks = listLocksOf(db)
  return { unanswered: locks?.unanswered.length ?? 0, checks: locks?.checks.length ?? 0 }
}

/** Waits for the answers and checks of what the transaction `db` sent since `mark`: the first failure is thrown. */
export async function answeredSince(db: PgDb, mark: { unanswered: number; checks: number }): Promise<void> {
  const locks = listLocksOf(db)
  if (locks !== undefined) await Promise.all([...locks.unanswered.slice(mark.unanswered), ...locks.checks.slice(mark.checks)])
}

/**
 * After a rollback to a savepoint: the statements sent since `mark` are undone, so the write no longer waits for
 * them; answers the first of them that failed (the reason the savepoint's body failed), if any.
 */
export async function dropSentSince(db: PgDb, mark: { unanswered: number; checks: number }): Promise<unknown> {
  const locks = listLocksOf(db)
  if (locks === undefined) return undefined
  locks.checks.splice(mark.checks)
  for (const outcome of await Promise.allSettled(locks.unanswered.splice(mark.unanswered))) if (outcome.status === 'rejected') return outcome.reason
  return undefined
}

/** The checks of the transaction's `sent` statements: the first to fail is thrown (the write must not commit). */
export async function checksBeforeCommit(tx: PgDb): Promise<void> {
  await Promise.all(listLocksOf(tx)?.checks.splice(0) ?? [])
}

/**
 * After the transaction ended: the failure of the first statement it sent without awaiting that failed, if any —
 * PostgreSQL aborted the transaction there (its COMMIT became a ROLLBACK), and every statement after it failed for
 * that reason alone: this is the error that says why.
 */
export async function firstUnansweredFailure(tx: PgDb | undefined): Promise<unknown> {
  const unanswered = tx === undefined ? [] : (listLocksOf(tx)?.unanswered.splice(0) ?? [])
  for (const outcome of await Promise.allSettled(unanswered)) if (outcome.status === 'rejected') return outcome.reason
  return undefined
}

/**
 * Notes that this transaction updated these runs' rows (a guarded transition sent, a claim's start): it holds them
 * locked until it ends. A guarded update that matched nothing fails the transaction before its COMMIT, so a run noted
 * here is locked whenever what follows it commits.
 */
export function noteRunsLocked(db: PgDb, runIds: Iterable<string>): void {
  const locked = listLocksOf(db)?.lockedRuns
  if (locked) for (const id of runIds) locked.add(id)
}

/** Of these runs, those this transaction does not hold locked yet (all of them outside tracking). */
export function runsNotLocked(db: PgDb, runIds: readonly string[]): string[] {
  const locked = listLocksOf(db)?.lockedRuns
  return locked === undefined ? [...runIds] : runIds.filter((id) => !locked.has(id))
}

/** Notes that this transaction appended run events to `environmentIds`. */
export function noteRunEventsAppended(db: PgDb, environmentIds: Iterable<number>): void {
  const runEvents = listLocksOf(db)?.runEvents
  if (runEvents) for (const id of environmentIds) runEvents.add(id)
}

/**
 * Notes that the commit of the transaction `db` should wake the listeners of `channel` (sent after it: ./notify.ts).
 * Outside a tracked transaction (a statement on the pool, committed as it runs): sent now.
 */
export async function notifyOnCommit(db: PgDb, channel: string): Promise<void> {
  const channels = listLocksOf(db)?.channels
  if (channels) channels.add(channel)
  else await clientOf(db).notify(channel)
}

/** The channels the committed transaction `tx` should wake. */
export function channelsToNotify(tx: PgDb): string[] {
  return [...(listLocksOf(tx)?.channels ?? [])]
}

/** The environments the transaction `tx` appended run events to (read after it committed). */
export function runEventsAppended(tx: PgDb): number[] {
  return [...(listLocksOf(tx)?.runEvents ?? [])]
}
const scopeKey = (name: string | number, scopeValue: number | null) => `${name}:${scopeValue}`

/** The newest entries this transaction wrote, by list scope (`key`: the list's table and the scope): none outside tracking. */
export function heldListTimes(db: PgDb): { get(list: PgTimedList, scopeValue: number | null): ScopeHead | undefined; set(list: PgTimedList, scopeValue: number | null, head: ScopeHead | null): void } {
  const latest = listLocksOf(db)?.latest
  return {
    get: (list, scopeValue) => latest?.get(scopeKey(list.table, scopeValue)),
    set: (list, scopeValue, head) => {
      if (head === null) latest?.delete(scopeKey(list.table, scopeValue))
      else latest?.set(scopeKey(list.table, scopeValue), head)
    },
  }
}

/** Keeps ids drawn under the scope's lock for the chained log's next entries of the scope (after any kept before). */
export function reserveIds(db: PgDb, list: PgTimedList, scopeValue: number | null, ids: readonly number[]): void {
  const reserved = listLocksOf(db)?.reservedIds
  if (reserved === undefined || ids.length === 0) return
  const key = scopeKey(list.table, scopeValue)
  reserved.set(key, [...(reserved.get(key) ?? []), ...ids])
}

/**
 * The next `count` ids for the chained log's entries of the scope, in order: those reserved, then more drawn from its
 * sequence (a round trip) when there are not enough. Call with the scope's lock held.
 */
export async function takeIds(db: PgDb, list: PgTimedList, scopeValue: number | null, count: number): Promise<number[]> {
  const key = scopeKey(list.table, scopeValue)
  const reserved = listLocksOf(db)?.reservedIds
  const ids = (reserved?.get(key) ?? []).splice(0, count)
  if (ids.length < count) {
    const more = await rawRows<{ id: number }>(db, `SELECT nextval('${list.chain!.ids}')::float8 AS id FROM generate_series(1, $1)`, [count - ids.length])
    ids.push(...more.map((row) => row.id).sort((a, b) => a - b))
  }
  return ids
}

/**
 * Takes the list scope's lock (held until the transaction ends); later writers of the scope wait for this one.
 * `wait` false: sent without waiting for the grant (./op-runner.ts reads the answer with the COMMIT's) — the
 * statements sent after it queue behind it on the connection, so they run once it is held.
 */
export async function lockListScope(db: PgDb, list: PgTimedList, scopeValue: number | null, wait = true): Promise<void> {
  const locks = listLocksOf(db)
  const key = scopeKey(list.lockKey, scopeValue)
  if (locks?.held.has(key)) return
  // The two-int4 form: (list, scope). Ids above 2^31 would wrap; a scope id that large is far beyond any deployment.
  const granted = clientOf(db).unsafe('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [list.lockKey, (scopeValue ?? 0) | 0]).execute()
  // Held from here on for what this transaction sends next (a failure fails the transaction).
  locks?.held.add(key)
  if (wait) await granted
  else await answerBeforeCommit(db, granted)
}

/** A list of ../pages.ts as its lock knows it. */
export function pgListOf(list: TimeOrderedList): PgTimedList {
  const pgList = (PG_LISTS as Record<string, PgTimedList>)[list.table]
  if (pgList === undefined) throw new Error(`the list ${list.name} has no lock on PostgreSQL`)
  return pgList
}

/**
 * The lists' time rule (src/db/monotonic.ts, DESIGN §3) with several writers. On SQLite one writer at a time makes
 * `max(now, latest + 1 µs)` exact. On PostgreSQL instances write at once, so the next createdAt of a list scope (an
 * environment's notes, a project's admin log…) is taken under a transaction-level advisory lock on (list, scope):
 * writers of one scope queue there until the holder commits, so each reads the latest its predecessor committed, and
 * times follow commit order. Writers of other scopes never wait. Call it inside the write's transaction (a twin is).
 */
import { type Micros, type Millis, microsFromMillis } from '../../lib/time.ts'
import { clientOf, type PgDb } from './store.ts'

/** A list of PostgreSQL rows ordered by time: its table, its scope column (null: the whole table) and its lock key. */
export interface PgTimedList {
  table: string
  scope: string | null
  /** The first key of its advisory lock: a small constant, never reused by a list of another scope. */
  lockKey: number
}

/**
 * An environment's notes and activity entries share one lock: a transaction may write both in either order (a note
 * and then its entry through the API; an entry and then a note in a workflow's step group), and two locks taken in
 * opposite orders by two transactions are a deadlock (PostgreSQL breaks it after a second: a stall, then a rerun).
 * Runs keep their own: a trigger takes the runs lock before the activity lock, and nothing takes them the other way.
 */
const ENVIRONMENT_RECORDS_LOCK = 3

export const PG_LISTS = {
  notes: { table: 'notes', scope: 'environment_id', lockKey: ENVIRONMENT_RECORDS_LOCK },
  noteMessages: { table: 'note_messages', scope: 'note_id', lockKey: 2 },
  activityLogs: { table: 'activity_logs', scope: 'environment_id', lockKey: ENVIRONMENT_RECORDS_LOCK },
  adminLogs: { table: 'admin_logs', scope: 'project_id', lockKey: 4 },
  runs: { table: 'runs', scope: 'environment_id', lockKey: 5 },
} as const satisfies Record<string, PgTimedList>

/** Takes the list scope's lock (held until the transaction ends); later writers of the scope wait for this one. */
export async function lockListScope(db: PgDb, list: PgTimedList, scopeValue: number | null): Promise<void> {
  // The two-int4 form: (list, scope). Ids above 2^31 would wrap; a scope id that large is far beyond any deployment.
  await clientOf(db).unsafe('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [list.lockKey, (scopeValue ?? 0) | 0])
}

/** The newest createdAt in the list scope (epoch µs), or null when it is empty. */
export async function latestCreatedAtOnPostgres(db: PgDb, list: PgTimedList, scopeValue: number | null): Promise<Micros | null> {
  const where = list.scope === null ? '' : scopeValue === null ? ` WHERE "${list.scope}" IS NULL` : ` WHERE "${list.scope}" = $1`
  const text = `SELECT max(created_at)::float8 AS at FROM "${list.table}"${where}`
  const rows = (await clientOf(db).unsafe(text, list.scope === null || scopeValue === null ? [] : [scopeValue])) as { at: number | null }[]
  return (rows[0]?.at ?? null) as Micros | null
}

/**
 * `max(now, latest + 1 µs)` for a new row of the list scope, after taking the scope's lock: strictly after every row
 * committed before and every row committed after this transaction (they wait for it).
 */
export async function nextCreatedAtOnPostgres(db: PgDb, list: PgTimedList, scopeValue: number | null, now: Millis): Promise<Micros> {
  await lockListScope(db, list, scopeValue)
  const at = microsFromMillis(now)
  const latest = await latestCreatedAtOnPostgres(db, list, scopeValue)
  return latest === null || latest < at ? at : ((latest + 1) as Micros)
}

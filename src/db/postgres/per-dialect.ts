/**
 * The storage operations PostgreSQL runs its own way (docs/architecture.md "Architecture", "One query, two dialects"), side by side
 * in one file as pg-boss keeps its plans: every other operation is written once, against the dialect context
 * (../query.ts). Each is the twin of the SQLite function of the same name, which stays beside the op that yields it
 * (there only that op's module can import it without closing an import circle), and `PER_DIALECT` below lists each
 * pair with its one-line reason; test/per-dialect.test.ts prints the list and holds it to at most 15.
 *
 * Most of them exist because PostgreSQL has several writers at once where SQLite has one: what SQLite's single writer
 * holds for a whole transaction, PostgreSQL holds with a lock (an advisory lock per rule or list scope, `FOR UPDATE
 * SKIP LOCKED` for the claim), and a queued run is announced to the other instances with NOTIFY.
 */
import { randomUUIDv7 } from 'bun'
import { eq, sql } from 'drizzle-orm'
import { type Micros, microsFromMillis } from '../../lib/time.ts'
import { insertActivityLogRows, type NewActivityLogRow } from '../activity-logs.ts'
import { announceCallbacks } from '../callbacks.ts'
import type { ClaimCandidate, ClaimFacts } from '../claims.ts'
import { holdListScope, rememberListTime } from '../monotonic.ts'
import { noteMessageTime } from '../notes.ts'
import type { Call } from '../op.ts'
import type { Db } from '../open.ts'
import type { TimeOrderedList } from '../pages.ts'
import {
  announceQueuedRuns,
  createdAtOf,
  type DueCandidates,
  insertQueuedRun,
  type NewRun,
  readDueRuns,
  readWidenedDueRuns,
  type RunRow,
  startRuns,
} from '../queue.ts'
import { holdRuleLock, type Rule } from '../rule-locks.ts'
import { insertRunEvents, type NewRunEvent, storedDataOf } from '../run-events.ts'
import { CLAIMABLE_RUN_STATUSES, sqlLiterals } from '../schema.ts'
import { heldListTimes, lockListScope, lockListScopes, noteRunEventsAppended, PG_LISTS, pgListOf } from './monotonic.ts'
import { preparedOn } from './prepared.ts'
import { CALLBACKS_CHANNEL, RUNS_CHANNEL } from './queue.ts'
import { RULE_LOCKS } from './rule-locks.ts'
import { notes } from './schema.ts'
import { clientOf, type PgDb } from './client.ts'

/** An operation each store runs its own way: SQLite's function (the name ops yield), PostgreSQL's, and why. */
export interface PerDialect {
  readonly sqlite: Call['fn']
  readonly postgres: (db: PgDb, ...args: never[]) => Promise<unknown>
  readonly reason: string
}

/** One pair; the compiler checks that PostgreSQL's takes the same arguments and answers the same value. */
function perDialect<A extends unknown[], T>(sqlite: (db: Db, ...args: A) => T, postgres: (db: PgDb, ...args: A) => Promise<T>, reason: string): PerDialect {
  return { sqlite: sqlite as unknown as Call['fn'], postgres: postgres as unknown as PerDialect['postgres'], reason }
}

/** Rows of a raw statement on the handle's connection. */
async function rows<T>(db: PgDb, text: string, values: unknown[]): Promise<T[]> {
  return [...((await clientOf(db).unsafe(text, values as never[])) as T[])]
}

// ── Rules of several rows (../rule-locks.ts) ─────────────────────────────────

/** Takes the rule's lock for `scope` (0: the whole instance) until the transaction ends. */
async function holdRuleLockOnPostgres(db: PgDb, rule: Rule, scope: number): Promise<void> {
  await clientOf(db).unsafe('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [RULE_LOCKS[rule], scope | 0])
}

// ── Lists' times (../monotonic.ts) ──────────────────────────────────────────

/**
 * Takes the list scope's lock; answers the newest time this transaction set in the scope, or else the scope's newest
 * time, read by a statement sent right behind the lock's without waiting for its answer: the connection runs it once
 * the lock is granted, so its snapshot (READ COMMITTED: taken when it starts) holds what the lock's previous holder
 * committed, and the writer waits once under the lock where it waited twice (0: the scope is empty).
 */
async function holdListScopeOnPostgres(db: PgDb, list: TimeOrderedList, scopeValue: number | null): Promise<Micros | undefined> {
  const pgList = pgListOf(list)
  const known = heldListTimes(db).get(pgList, scopeValue)
  const locked = lockListScope(db, pgList, scopeValue)
  if (known !== undefined) return locked.then(() => known)
  const where = pgList.scope === null ? '' : scopeValue === null ? `WHERE ${pgList.scope} IS NULL` : `WHERE ${pgList.scope} = $1`
  const latest = rows<{ at: number | null }>(db, `SELECT max(created_at)::float8 AS at FROM ${pgList.table} ${where}`, where.includes('$1') ? [scopeValue] : [])
  latest.catch(() => {}) // a failed lock fails it too: the lock's error is the one thrown
  await locked
  return ((await latest)[0]?.at ?? 0) as Micros
}

/** Remembers (null: forgets) the newest time this transaction set in the list scope. */
async function rememberListTimeOnPostgres(db: PgDb, list: TimeOrderedList, scopeValue: number | null, at: Micros | null): Promise<void> {
  heldListTimes(db).set(pgListOf(list), scopeValue, at)
}

// ── The activity log (../activity-logs.ts) ──────────────────────────────────

async function insertActivityLogRowsOnPostgres(db: PgDb, entry: NewActivityLogRow & { createdAt: Micros }, recordIds: string[]): Promise<number> {
  const { environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt } = entry
  const values = [environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt, recordIds]
  const [row] = (await clientOf(db).unsafe(INSERT_ENTRY, values as never[])) as { id: number }[]
  return row!.id
}

/**
 * The entry and its record ids ($14, distinct, one row each) in one statement: it runs under the environment's lock
 * (./monotonic.ts), held to commit, so every round trip saved there is one less that other writers wait out.
 */
const INSERT_ENTRY = `WITH entry AS (
    INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at)
    VALUES ($1::int8, $2, $3, $4, $5::int8, $6::int8, $7::int8, $8::int8, $9, $10, $11, $12::boolean, $13::int8)
    RETURNING id),
  entry_records AS (INSERT INTO activity_log_records (log_id, environment_id, record_id) SELECT entry.id, $1::int8, unnest($14::text[]) FROM entry)
  SELECT id::float8 AS id FROM entry`

// ── Notes (../notes.ts) ─────────────────────────────────────────────────────

/** Under the note's message lock: the message's time, or the note's last update when another writer committed a later one. */
async function noteMessageTimeOnPostgres(db: PgDb, noteId: number, createdAt: Micros): Promise<Micros> {
  await lockListScope(db, PG_LISTS.noteMessages, noteId)
  const [note] = await preparedOn(db, 'notes.updated-at', (db) => db.select({ updatedAt: notes.updatedAt }).from(notes).where(eq(notes.id, sql.placeholder('id')))).execute({
    id: noteId,
  })
  return note !== undefined && note.updatedAt > createdAt ? note.updatedAt : createdAt
}

// ── The run queue (../queue.ts) ─────────────────────────────────────────────

const CLAIMABLE = sqlLiterals(CLAIMABLE_RUN_STATUSES)

/** The numeric columns of a run as numbers (int8 arrives as a string), as src/db/queue.ts's RunRow has them. */
const RUN_COLUMNS = `id, workflow_id::float8 AS workflow_id, workflow_version_id::float8 AS workflow_version_id,
  environment_id::float8 AS environment_id, record_id, user_id::float8 AS user_id, token_id::float8 AS token_id, "trigger",
  status, next_step::float8 AS next_step, available_at::float8 AS available_at, lease_owner,
  lease_expires_at::float8 AS lease_expires_at, attempts::float8 AS attempts, error, created_at::float8 AS created_at, started_at::float8 AS started_at, finished_at::float8 AS finished_at,
  retry_of`

/**
 * Start: the run, queued (its id answered), unless another run of the workflow is active on the record, or the run a
 * retry retries has been retried already (the partial unique indexes decide: `ON CONFLICT DO NOTHING`, and null;
 * ../queue.ts `insertRun` then names the active run or the retry in a new statement — a new READ COMMITTED snapshot).
 *
 * The runs list orders by id and pages by `createdAt` (DESIGN §3), so within an environment `createdAt` must increase
 * strictly in id order. Ids are UUIDv7s made by each instance before its transaction: two instances (or two pooled
 * connections) may commit in the other order than their ids, and clocks differ between machines. So the insert takes
 * the environment's runs lock (PG_LISTS.runs: inserts of one environment commit one after another) — and its activity
 * lock in the same statement, which the trigger's entry needs next (`QUEUE_RUN`) — reads the
 * environment's newest run (by id: one seek on `runs_env_id_idx`; it also has the greatest `createdAt`) and stores
 * the run after it in both orders: its `createdAt` is `max(now, newest + 1 µs)`, as on SQLite, `now` read once the
 * lock is held (a trigger that waited 500 ms for it is not dated 500 ms before it could be listed), and its id is the
 * caller's when that is greater than the newest's (or already taken: then the primary key conflicts, as on SQLite),
 * else a UUIDv7 just after the newest (`idAfter`) — the answer carries the id stored. A new run is therefore always the top of its list: a reader paging meanwhile never misses it.
 */
async function insertQueuedRunOnPostgres(db: PgDb, run: NewRun): Promise<string | null> {
  await lockListScopes(db, [[PG_LISTS.runs, run.environmentId], [PG_LISTS.activityLogs, run.environmentId]])
  const createdAt = createdAtOf(run) // after the lock: the wait for it is not in the run's time
  const queue = async (id: string) => {
    const values = [id, run.workflowId, run.workflowVersionId, run.environmentId, run.recordId, run.userId, run.tokenId, run.trigger, createdAt, run.nextStep ?? 0, run.retryOf ?? null, RUNS_CHANNEL]
    return (await rows<{ id: string | null; newest_id: string | null; entries_at: number | null }>(db, QUEUE_RUN, values))[0]!
  }
  let queued = await queue(run.id)
  const entries = heldListTimes(db)
  if (entries.get(PG_LISTS.activityLogs, run.environmentId) === undefined) entries.set(PG_LISTS.activityLogs, run.environmentId, (queued.entries_at ?? 0) as Micros)
  // The caller's id is not after the newest run's (another instance's clock, or the same id): a UUIDv7 just after it, unless the id is taken.
  if (queued.id === null && queued.newest_id !== null && queued.newest_id >= run.id && !(await idTaken(db, run.id))) queued = await queue(idAfter(queued.newest_id))
  return queued.id
}

/**
 * The trigger's writes under the environment's runs and activity locks, in one statement (one round trip where there
 * were four): the environment's newest run (by id: one seek on `runs_env_id_idx`; it also has the greatest
 * `createdAt`), the run after it — unless its id ($1) is not greater than the newest's (then null, and the caller
 * picks one that is) or a partial unique index says no (`ON CONFLICT DO NOTHING`) — the NOTIFY ($12) when it was
 * queued, and the environment's newest activity entry time: a run is queued only by a trigger or a retry
 * (src/modules/runs/service.ts `queueRun`), whose entry follows in this transaction, so its time is counted on from
 * here unread (./monotonic.ts `heldListTimes`; 0: no entry yet). The locks are the statement before: READ COMMITTED
 * takes this one's snapshot when it starts, after them, so it sees what their previous holder committed.
 */
const QUEUE_RUN = `WITH newest AS (SELECT id, created_at FROM runs WHERE environment_id = $4 ORDER BY id DESC LIMIT 1),
  queued AS (
    INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
      status, next_step, available_at, attempts, created_at, retry_of)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, 'queued', $10, $9, 0, greatest($9::bigint * 1000, coalesce((SELECT created_at FROM newest), 0) + 1), $11
    WHERE NOT EXISTS (SELECT 1 FROM newest WHERE id >= $1)
    ON CONFLICT DO NOTHING
    RETURNING id)
  SELECT (SELECT id FROM queued) AS id, (SELECT id FROM newest) AS newest_id,
    (SELECT max(created_at)::float8 FROM activity_logs WHERE environment_id = $4) AS entries_at,
    (SELECT pg_notify($12, '') FROM queued) AS announced`

/** A run of this id exists: the insert keeps it, and conflicts on the primary key as SQLite's does. */
const idTaken = async (db: PgDb, id: string) => (await rows(db, 'SELECT 1 FROM runs WHERE id = $1', [id])).length > 0

/** A UUIDv7 greater than `id`: in the same millisecond when a random one lands above it, else in the next one. */
export function idAfter(id: string): string {
  const ms = Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
  const same = randomUUIDv7('hex', ms)
  return same > id ? same : randomUUIDv7('hex', ms + 1)
}

/** `NOTIFY trellis_runs` in the handle's transaction: delivered to every listener on commit, dropped on rollback. */
const announceRunsOnPostgres = async (db: PgDb): Promise<void> => {
  await clientOf(db).notify(RUNS_CHANNEL)
}

/** `NOTIFY trellis_callbacks` in the handle's transaction: every delivery worker hears of the deliveries on commit. */
const announceCallbacksOnPostgres = async (db: PgDb): Promise<void> => {
  await clientOf(db).notify(CALLBACKS_CHANNEL)
}

/**
 * Due runs a claim reads per environment (and per workflow, where it widens) for each free worker: the rules need one
 * (SQLite reads that many); the others let instances claiming at the same moment each find runs no other is taking.
 */
const CANDIDATES_PER_WORKER = 4

/**
 * The claim's first read: the workflows with a limit and a due run, locked `FOR NO KEY UPDATE SKIP LOCKED` (a
 * trigger's foreign-key check takes `FOR KEY SHARE`, which this does not block): only a claim holding a workflow's row
 * starts its runs, so two instances never both count its running runs below the limit; a workflow another claim holds
 * is left to that one. Then each environment's oldest due runs (`CANDIDATES_PER_WORKER` per free worker), read without
 * locking. ../queue.ts `claimRuns` reads the runs running next: a new READ COMMITTED snapshot, taken after those
 * locks, so every run another claim started under them has committed.
 */
async function readDueRunsOnPostgres(db: PgDb, now: number, limit: number): Promise<DueCandidates> {
  const locked = await rows<{ id: number }>(
    db,
    `SELECT id::float8 AS id FROM workflows w
     WHERE concurrency_limit IS NOT NULL
       AND EXISTS (SELECT 1 FROM runs r WHERE r.workflow_id = w.id AND r.status IN (${CLAIMABLE}) AND r.available_at <= $1)
     ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`,
    [now],
  )
  const candidates = await dueRuns(db, 'FROM environments e', 'environment_id = e.id', '', [now, limit * CANDIDATES_PER_WORKER])
  return { candidates, startable: new Set(locked.map((w) => w.id)) }
}

/** Where a workflow's limit holds some of an environment's oldest due runs back: each of its workflows' oldest ones. */
const readWidenedDueRunsOnPostgres = (db: PgDb, now: number, limit: number, projectOf: ReadonlyMap<number, number>, _facts: ClaimFacts) =>
  dueRuns(
    db,
    'FROM workflows w JOIN renderings g ON g.id = w.rendering_id',
    'workflow_id = w.id',
    'WHERE g.environment_id = ANY($3::int8[])',
    [now, limit * CANDIDATES_PER_WORKER, [...projectOf.keys()]],
  )

/**
 * The start: the first `limit` runs of the claim's order that no other claim has locked, picked once in a
 * materialized CTE (`FOR UPDATE SKIP LOCKED`, so instances claiming at the same moment split the runs without waiting
 * on each other), and the UPDATE joins it.
 *
 * The batch is picked once, in the CTE. Written as `WHERE id IN (SELECT … LIMIT $4 FOR UPDATE SKIP LOCKED)` instead,
 * the planner may run the sub-select as the inner side of a nested loop, once per due run: each rescan skips the
 * rows this statement already locked and locks the next ones, so the claim takes every due run whatever the limit.
 * It did, with statistics taken while no run was due (the bench's 10,000-run burst right after an autoanalyze): one
 * instance leased all 10,000 in a 10-second statement, started them all at once, and the drain collapsed.
 * `test/postgres-queue.test.ts` reproduces that plan.
 */
const startRunsOnPostgres = (db: PgDb, owner: string, now: number, leaseMs: number, order: readonly string[], limit: number) =>
  rows<RunRow>(
    db,
    `WITH picked AS MATERIALIZED (
       SELECT id AS picked_id FROM runs WHERE id = ANY($4::text[]) AND status IN (${CLAIMABLE}) AND available_at <= $2
       ORDER BY array_position($4::text[], id) LIMIT $5 FOR UPDATE SKIP LOCKED)
     UPDATE runs SET status = 'running', lease_owner = $1, lease_expires_at = $2::bigint + $3::bigint,
       started_at = coalesce(started_at, $2), attempts = attempts + 1
     FROM picked
     WHERE id = picked_id AND status IN (${CLAIMABLE})
     RETURNING ${RUN_COLUMNS}`,
    [owner, now, leaseMs, order, limit],
  )

/** The `$2` oldest runs due at `$1` of each row of `from` (matched by `match`, filtered by `where`), with what the claim weighs them by. */
async function dueRuns(db: PgDb, from: string, match: string, where: string, values: unknown[]): Promise<ClaimCandidate[]> {
  const due = await rows<{ id: string; workflow_id: number; environment_id: number; available_at: number; project_id: number; concurrency_limit: number | null }>(
    db,
    `SELECT t.id, t.workflow_id::float8 AS workflow_id, t.environment_id::float8 AS environment_id, t.available_at::float8 AS available_at,
       te.project_id::float8 AS project_id, tw.concurrency_limit::float8 AS concurrency_limit
     ${from} CROSS JOIN LATERAL (
       SELECT id, workflow_id, environment_id, available_at FROM runs
       WHERE ${match} AND status IN (${CLAIMABLE}) AND available_at <= $1
       ORDER BY available_at, id LIMIT $2) t
     JOIN environments te ON te.id = t.environment_id JOIN workflows tw ON tw.id = t.workflow_id
     ${where}`,
    values,
  )
  return due.map((r) => ({
    id: r.id, workflowId: r.workflow_id, environmentId: r.environment_id, projectId: r.project_id, availableAt: r.available_at, concurrencyLimit: r.concurrency_limit,
  }))
}

// ── Run events (../run-events.ts) ───────────────────────────────────────────

/**
 * The events, after each of their environments' run-events lock is taken (ascending: a claim appends to several), so
 * that the ids an environment's events take follow commit order; the environments are announced after the commit
 * (./op-runner.ts). Each sequence: the one the event carries, or the run's newest before this statement plus the
 * event's offset (COALESCE reads the newest only for an event without one). The rows are
 * ordered in a sub-select (never flattened: it sorts), so the ids the sequence hands out follow the array's order.
 * The locks are statements of their own: READ COMMITTED takes a statement's snapshot when it starts, so an insert
 * that waited for a lock inside itself would not see the events its predecessor committed meanwhile (tried: 40
 * concurrent appends to one run met the unique (run_id, sequence) index).
 */
async function insertRunEventsOnPostgres(db: PgDb, events: readonly NewRunEvent[]): Promise<void> {
  const environments = [...new Set(events.map((e) => e.environmentId))].sort((a, b) => a - b)
  for (const environmentId of environments) await lockListScope(db, PG_LISTS.runEvents, environmentId)
  await clientOf(db).unsafe(INSERT_EVENTS, [eventRowsJson(events)])
  noteRunEventsAppended(db, environments)
}

/** The events as the insert's one JSON parameter: an array per event, with its place among this insert's events of its run (1, 2, …) and its sequence if it carries one. */
function eventRowsJson(events: readonly NewRunEvent[]): string {
  const perRun = new Map<string, number>()
  return JSON.stringify(
    events.map((e) => {
      const offset = (perRun.get(e.runId) ?? 0) + 1
      perRun.set(e.runId, offset)
      return [e.runId, e.environmentId, e.workflowId, e.recordId, offset, e.type, e.status, e.stepIndex ?? null, e.stepName ?? null, storedDataOf(e), microsFromMillis(e.at), e.sequence ?? null]
    }),
  )
}

const INSERT_EVENTS = `INSERT INTO run_events (run_id, environment_id, workflow_id, record_id, sequence, type, status, step_index, step_name, data, created_at)
  SELECT e.v ->> 0, (e.v ->> 1)::int8, (e.v ->> 2)::int8, e.v ->> 3,
    coalesce((e.v ->> 11)::int8, coalesce((SELECT max(x.sequence) FROM run_events x WHERE x.run_id = e.v ->> 0), 0) + (e.v ->> 4)::int8),
    e.v ->> 5, e.v ->> 6, (e.v ->> 7)::int8, e.v ->> 8, e.v ->> 9, (e.v ->> 10)::int8
  FROM (SELECT v, n FROM jsonb_array_elements($1::text::jsonb) WITH ORDINALITY AS a(v, n) ORDER BY n) e`

/** Every operation PostgreSQL runs its own way, with the reason (docs/architecture.md "Architecture" lists them). */
export const PER_DIALECT: readonly PerDialect[] = [
  perDialect(holdRuleLock, holdRuleLockOnPostgres, "PostgreSQL's writers run at once, so a rule of several rows takes an advisory lock; SQLite's one writer needs none"),
  perDialect(holdListScope, holdListScopeOnPostgres, "writers of one list scope queue on its advisory lock to date entries in commit order; SQLite's one writer holds every scope"),
  perDialect(rememberListTime, rememberListTimeOnPostgres, "the transaction's newest time per list scope lives beside PostgreSQL's list locks and goes with them at a savepoint's rollback; SQLite's lives with the connection's write transaction"),
  perDialect(insertActivityLogRows, insertActivityLogRowsOnPostgres, 'one data-modifying CTE writes the entry and its record ids in one round trip under the lock; SQLite has no such CTE and no round trips'),
  perDialect(noteMessageTime, noteMessageTimeOnPostgres, "another instance may have moved the note's updatedAt: re-read under the note's lock; SQLite's one writer cannot"),
  perDialect(insertQueuedRun, insertQueuedRunOnPostgres, "the environment's runs lock dates and numbers the run after its newest, and NOTIFY announces it; SQLite's write lock orders inserts"),
  perDialect(announceQueuedRuns, announceRunsOnPostgres, "NOTIFY wakes every instance's executor on commit; SQLite's executor is this process's, woken by its own writes"),
  perDialect(announceCallbacks, announceCallbacksOnPostgres, "NOTIFY wakes every instance's callback delivery worker on commit; SQLite's is this process's, woken after the commit"),
  perDialect(readDueRuns, readDueRunsOnPostgres, 'locks the limited workflows FOR NO KEY UPDATE SKIP LOCKED and reads every environment in one LATERAL join; SQLite has no LATERAL'),
  perDialect(readWidenedDueRuns, readWidenedDueRunsOnPostgres, "one LATERAL join over the widened environments' workflows; SQLite walks each workflow's claim index"),
  perDialect(startRuns, startRunsOnPostgres, "picks the batch FOR UPDATE SKIP LOCKED so instances split the due runs; SQLite's one writer starts each run picked"),
  perDialect(insertRunEvents, insertRunEventsOnPostgres, "the environment's run-events lock, held to commit, makes its event ids follow commit order; SQLite's one writer commits in id order"),
]

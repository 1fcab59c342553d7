/**
 * Issue 18: what the run queue does its own way on PostgreSQL (../queue.ts writes the rest once for both stores).
 * Several instances claim at once: the claim locks what it counts on and takes its batch with `FOR UPDATE SKIP
 * LOCKED`, so instances split the due runs without waiting on each other; the insert takes the environment's runs
 * lock to keep its list's order. A run queued (or given back) sends `NOTIFY trellis_runs` inside its transaction, so
 * it reaches every instance's executor on commit (`listenForQueuedRuns`). Run by ./op-runner.ts.
 */
import { randomUUIDv7, type SQL } from 'bun'
import type { ClaimCandidate, ClaimFacts } from '../claims.ts'
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
import { CLAIMABLE_RUN_STATUSES, sqlLiterals } from '../schema.ts'
import { lockListScope, PG_LISTS } from './monotonic.ts'
import { clientOf, type PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const CLAIMABLE = sqlLiterals(CLAIMABLE_RUN_STATUSES)
/** The channel a queued run is announced on (payload empty): every instance's executor listens. */
export const RUNS_CHANNEL = 'trellis_runs'

/** The numeric columns of a run as numbers (int8 arrives as a string), as src/db/queue.ts's RunRow has them. */
const RUN_COLUMNS = `id, workflow_id::float8 AS workflow_id, workflow_version_id::float8 AS workflow_version_id,
  environment_id::float8 AS environment_id, record_id, user_id::float8 AS user_id, token_id::float8 AS token_id, "trigger",
  status, next_step::float8 AS next_step, available_at::float8 AS available_at, lease_owner,
  lease_expires_at::float8 AS lease_expires_at, attempts::float8 AS attempts, error, created_at::float8 AS created_at, started_at::float8 AS started_at, finished_at::float8 AS finished_at`

/** Rows of a raw statement on the handle's connection. */
async function rows<T>(db: PgDb, text: string, values: unknown[]): Promise<T[]> {
  return [...((await clientOf(db).unsafe(text, values as never[])) as T[])]
}

/**
 * Start: the run, queued (its id answered), unless another run of the workflow is active on the record (the partial
 * unique index decides: `ON CONFLICT DO NOTHING`, and null; ../queue.ts `insertRun` then names the active run in a
 * new statement — a new READ COMMITTED snapshot).
 *
 * The runs list orders by id and pages by `createdAt` (DESIGN §3), so within an environment `createdAt` must increase
 * strictly in id order. Ids are UUIDv7s made by each instance before its transaction: two instances (or two pooled
 * connections) may commit in the other order than their ids, and clocks differ between machines. So the insert takes
 * the environment's runs lock (PG_LISTS.runs: inserts of one environment commit one after another), reads the
 * environment's newest run (by id: one seek on `runs_env_id_idx`; it also has the greatest `createdAt`) and stores
 * the run after it in both orders: its `createdAt` is `max(now, newest + 1 µs)`, as on SQLite, `now` read once the
 * lock is held (a trigger that waited 500 ms for it is not dated 500 ms before it could be listed), and its id is the
 * caller's when that is greater than the newest's (or already taken: then the primary key conflicts, as on SQLite),
 * else a UUIDv7 just after the newest (`idAfter`) — the answer carries the id stored. A new run is therefore always the top of its list: a reader paging meanwhile never misses it.
 */
async function insertQueuedRunOnPostgres(db: PgDb, run: NewRun): Promise<string | null> {
  await lockListScope(db, PG_LISTS.runs, run.environmentId)
  const createdAt = createdAtOf(run) // after the lock: the wait for it is not in the run's time
  const [newest] = await rows<{ id: string; created_at: number }>(
    db,
    'SELECT id, created_at::float8 AS created_at FROM runs WHERE environment_id = $1 ORDER BY id DESC LIMIT 1',
    [run.environmentId],
  )
  const id = newest === undefined || run.id > newest.id || (await idTaken(db, run.id)) ? run.id : idAfter(newest.id)
  const inserted = await rows(
    db,
    `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
       status, next_step, available_at, attempts, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', 0, $9, 0, greatest($9::bigint * 1000, $10::bigint + 1))
     ON CONFLICT DO NOTHING
     RETURNING id`,
    [id, run.workflowId, run.workflowVersionId, run.environmentId, run.recordId, run.userId, run.tokenId, run.trigger, createdAt, newest?.created_at ?? 0],
  )
  if (inserted.length === 0) return null
  await announceRunsOnPostgres(db)
  return id
}

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

/**
 * Calls `wake` whenever a run is queued or given back on any instance (and once more after a dropped listening
 * connection is back, since notifications sent meanwhile are lost). Bun's client keeps the subscription on one
 * dedicated connection beside the pool and re-subscribes after a reconnect. Resolves once the server listens.
 */
export async function listenForQueuedRuns(sql: SQL, wake: () => void): Promise<{ stop(): Promise<void> }> {
  let subscribed = false
  const subscription = await sql.listen(RUNS_CHANNEL, () => wake(), () => {
    if (subscribed) wake()
    subscribed = true
  })
  return { stop: () => subscription.unlisten() }
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


/** The queue's operations PostgreSQL does its own way, by the SQLite function they stand for. */
export const QUEUE_TWINS = twins(
  // per-dialect: PostgreSQL takes the environment's runs lock to date and number the run after its newest (SQLite's write lock orders them), and NOTIFYs
  twin(insertQueuedRun, insertQueuedRunOnPostgres),
  // per-dialect: NOTIFY wakes every instance's executor on commit; SQLite's executors are this process's own
  twin(announceQueuedRuns, announceRunsOnPostgres),
  // per-dialect: PostgreSQL locks the limited workflows FOR NO KEY UPDATE SKIP LOCKED and reads every environment in one LATERAL join (SQLite has none)
  twin(readDueRuns, readDueRunsOnPostgres),
  // per-dialect: one LATERAL join over the widened environments' workflows; SQLite walks each workflow's claim index
  twin(readWidenedDueRuns, readWidenedDueRunsOnPostgres),
  // per-dialect: PostgreSQL picks the batch FOR UPDATE SKIP LOCKED so instances split the runs; SQLite's one writer starts each run picked
  twin(startRuns, startRunsOnPostgres),
)

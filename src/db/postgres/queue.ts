/**
 * Issue 18: the run queue as PostgreSQL twins of src/db/queue.ts — the same functions the runs service and the
 * executor yield (`op(insertRun, …)`, `op(claimRuns, …)`, `op(advanceRun, …)`…), each one guarded statement as there
 * (state and lease owner in the WHERE; a guard that matches nothing throws LeaseLostError and rolls the op back). The
 * claim takes its batch with `FOR UPDATE SKIP LOCKED`, so instances split the due runs without waiting on each other.
 * A run queued (or given back) sends `NOTIFY trellis_runs` inside its transaction, so it reaches every instance's
 * executor on commit (`listenForQueuedRuns`). Run by ./op-runner.ts.
 */
import { randomUUIDv7, type SQL } from 'bun'
import {
  advanceRun,
  cancelActiveRun,
  claimRuns,
  createdAtOf,
  dueGroupsOf,
  type ExecutorIdentity,
  failRun,
  finishRun,
  type InsertResult,
  insertRun,
  LeaseLostError,
  type NewRun,
  nextRunAvailableAt,
  parkRun,
  PROJECTS_WITH_WORKFLOWS,
  recordStepOutcome,
  recoverExpiredRuns,
  releaseOwnedRuns,
  renewLease,
  type QueueStats,
  type RunRow,
  type RunWorkflow,
  runningOf,
  runWorkflow,
  type StepOutcome,
} from '../queue.ts'
import { type ClaimCandidate, type ClaimFacts, claimOrder, deferredRuns, environmentsToWiden, projectCap } from '../claims.ts'
import { ACTIVE_RUN_STATUSES, CLAIMABLE_RUN_STATUSES, sqlLiterals } from '../schema.ts'
import { RUN_STATUSES, type RunStatus } from '../../lib/run-statuses.ts'
import { lockListScope, PG_LISTS } from './monotonic.ts'
import { clientOf, type PgDb, type PgStore } from './store.ts'
import { twin, twins } from './twin.ts'

const ACTIVE = sqlLiterals(ACTIVE_RUN_STATUSES)
const CLAIMABLE = sqlLiterals(CLAIMABLE_RUN_STATUSES)
/** The channel a queued run is announced on (payload empty): every instance's executor listens. */
export const RUNS_CHANNEL = 'trellis_runs'
/** Every write after the claim: only the worker holding the lease on a running run may make it ($1 run, $2 owner). */
const HELD = "id = $1 AND lease_owner = $2 AND status = 'running'"

/** The numeric columns of a run as numbers (int8 arrives as a string), as src/db/queue.ts's RunRow has them. */
const RUN_COLUMNS = `id, workflow_id::float8 AS workflow_id, workflow_version_id::float8 AS workflow_version_id,
  environment_id::float8 AS environment_id, record_id, user_id::float8 AS user_id, token_id::float8 AS token_id, "trigger",
  status, next_step::float8 AS next_step, available_at::float8 AS available_at, lease_owner,
  lease_expires_at::float8 AS lease_expires_at, attempts::float8 AS attempts, error, created_at::float8 AS created_at, started_at::float8 AS started_at, finished_at::float8 AS finished_at`

/** Rows of a raw statement on the handle's connection. */
async function rows<T>(db: PgDb, text: string, values: unknown[]): Promise<T[]> {
  return [...((await clientOf(db).unsafe(text, values as never[])) as T[])]
}

/** How many rows a statement changed. */
export async function changed(db: PgDb, text: string, values: unknown[]): Promise<number> {
  return ((await clientOf(db).unsafe(text, values as never[])) as unknown as { count: number }).count
}

/** A lease-guarded write: nothing matched means the lease is gone, and the op's transaction must not commit. */
async function guarded(db: PgDb, text: string, values: unknown[]): Promise<void> {
  if ((await changed(db, text, values)) === 0) throw new LeaseLostError(String(values[0]))
}

/**
 * Start: the run, queued, unless another run of the workflow is active on the record (the partial unique index
 * decides: `ON CONFLICT DO NOTHING`, then a new statement — a new READ COMMITTED snapshot — names the active run).
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
async function insertRunOnPostgres(db: PgDb, run: NewRun): Promise<InsertResult> {
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
  if (inserted.length > 0) {
    await announceRuns(db)
    return { inserted: true, id }
  }
  const [active] = await rows<{ id: string }>(db, `SELECT id FROM runs WHERE workflow_id = $1 AND record_id = $2 AND status IN (${ACTIVE})`, [run.workflowId, run.recordId])
  return { inserted: false, activeRunId: active?.id ?? null }
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
const announceRuns = (db: PgDb) => clientOf(db).notify(RUNS_CHANNEL)

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
 * The batched claim: up to `limit` due runs under a lease, those src/db/claims.ts puts first (the fair share between
 * projects, the workflows' concurrency limits), in four statements of one transaction:
 * 1. The workflows with a limit and a due run, locked `FOR NO KEY UPDATE SKIP LOCKED` (a trigger's foreign-key check
 *    takes `FOR KEY SHARE`, which this does not block): only a claim holding a workflow's row starts its runs, so two
 *    instances never both count its running runs below the limit; a workflow another claim holds is left to that one.
 * 2. The runs running: a new READ COMMITTED snapshot, taken after those locks, so every run another claim started
 *    under them has committed.
 * 3. Each environment's oldest due runs (`CANDIDATES_PER_WORKER` per free worker), read without locking — and,
 *    where a workflow's limit holds some of them back, each of the environment's other workflows' oldest ones too.
 * 4. The start: the first `limit` runs of the claim's order that no other claim has locked, picked once in a
 *    materialized CTE (`FOR UPDATE SKIP LOCKED`, so instances claiming at the same moment split the runs without
 *    waiting on each other), and the UPDATE joins it.
 *
 * The batch is picked once, in the CTE. Written as `WHERE id IN (SELECT … LIMIT $4 FOR UPDATE SKIP LOCKED)` instead,
 * the planner may run the sub-select as the inner side of a nested loop, once per due run: each rescan skips the
 * rows this statement already locked and locks the next ones, so the claim takes every due run whatever the limit.
 * It did, with statistics taken while no run was due (the bench's 10,000-run burst right after an autoanalyze): one
 * instance leased all 10,000 in a 10-second statement, started them all at once, and the drain collapsed.
 * `test/postgres-queue.test.ts` reproduces that plan.
 */
export async function claimRunsOnPostgres(db: PgDb, owner: string, now: number, leaseMs: number, limit: number, concurrency = Infinity): Promise<RunRow[]> {
  if (limit <= 0) return []
  const locked = await rows<{ id: number }>(
    db,
    `SELECT id::float8 AS id FROM workflows w
     WHERE concurrency_limit IS NOT NULL
       AND EXISTS (SELECT 1 FROM runs r WHERE r.workflow_id = w.id AND r.status IN (${CLAIMABLE}) AND r.available_at <= $1)
     ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`,
    [now],
  )
  const facts: ClaimFacts = {
    running: runningOf(await rows(db, RUNNING, []), owner),
    startable: new Set(locked.map((w) => w.id)),
    projectCap: Number.isFinite(concurrency) ? projectCap(concurrency, (await rows<{ n: number }>(db, PROJECTS_WITH_WORKFLOWS, []))[0]!.n) : Infinity,
  }
  const read = limit * CANDIDATES_PER_WORKER
  const tops = await dueRuns(db, 'FROM environments e', 'environment_id = e.id', '', [now, read])
  const widen = environmentsToWiden(tops, facts)
  const widened = widen.length === 0 ? [] : await dueRuns(
    db,
    'FROM workflows w JOIN renderings g ON g.id = w.rendering_id',
    'workflow_id = w.id',
    'WHERE g.environment_id = ANY($3::int8[])',
    [now, read, widen],
  )
  const order = claimOrder([...tops, ...widened], facts)
  if (order.length === 0) return []
  const claimed = await rows<RunRow>(
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
  return claimed.sort((a, b) => a.available_at - b.available_at || (a.id < b.id ? -1 : 1))
}

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

const advanceRunOnPostgres = (db: PgDb, runId: string, owner: string, nextStep: number) =>
  guarded(db, `UPDATE runs SET next_step = $3 WHERE ${HELD}`, [runId, owner, nextStep])

const parkRunOnPostgres = (db: PgDb, runId: string, owner: string, nextStep: number, until: number) =>
  guarded(
    db,
    `UPDATE runs SET next_step = $3, status = 'waiting', available_at = $4, lease_owner = NULL, lease_expires_at = NULL WHERE ${HELD}`,
    [runId, owner, nextStep, until],
  )

const endRun = (db: PgDb, runId: string, owner: string, status: 'succeeded' | 'failed', error: string | null, now: number, nextStep?: number) =>
  guarded(
    db,
    `UPDATE runs SET status = $3, error = $4, finished_at = $5, lease_owner = NULL, lease_expires_at = NULL,
       next_step = coalesce($6, next_step)
     WHERE ${HELD}`,
    [runId, owner, status, error, now, nextStep ?? null],
  )

const finishRunOnPostgres = (db: PgDb, runId: string, owner: string, now: number, nextStep?: number) =>
  endRun(db, runId, owner, 'succeeded', null, now, nextStep)

const failRunOnPostgres = (db: PgDb, runId: string, owner: string, now: number, error: unknown, nextStep?: number) =>
  endRun(db, runId, owner, 'failed', JSON.stringify(error), now, nextStep)

const renewLeaseOnPostgres = async (db: PgDb, runId: string, owner: string, now: number, leaseMs: number) =>
  (await changed(db, `UPDATE runs SET lease_expires_at = $3::bigint + $4::bigint WHERE ${HELD}`, [runId, owner, now, leaseMs])) > 0

const recoverExpiredRunsOnPostgres = (db: PgDb, now: number) =>
  changed(db, `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, available_at = $1 WHERE status = 'running' AND lease_expires_at < $1`, [now])

/** Give-back: the runs go back to the queue, announced, so another instance takes them up at once. */
async function releaseOwnedRunsOnPostgres(db: PgDb, owner: string, now: number): Promise<number> {
  const released = await changed(
    db,
    `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, available_at = $2 WHERE status = 'running' AND lease_owner = $1`,
    [owner, now],
  )
  if (released > 0) await announceRuns(db)
  return released
}

const cancelActiveRunOnPostgres = async (db: PgDb, runId: string, now: number) =>
  (await changed(
    db,
    `UPDATE runs SET status = 'cancelled', finished_at = $2, lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND status IN (${ACTIVE})`,
    [runId, now],
  )) > 0

async function recordStepOutcomeOnPostgres(db: PgDb, step: StepOutcome): Promise<void> {
  await clientOf(db).unsafe(
    `INSERT INTO run_steps (run_id, step_index, name, type, status, output, error, started_at, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      step.runId, step.index, step.name, step.type, step.status,
      step.output === undefined ? null : JSON.stringify(step.output),
      step.error ? JSON.stringify(step.error) : null,
      step.startedAt, step.finishedAt,
    ],
  )
}

const runWorkflowOnPostgres = async (db: PgDb, run: Pick<RunRow, 'workflow_id' | 'workflow_version_id'>): Promise<RunWorkflow | undefined> =>
  (
    await rows<RunWorkflow>(
      db,
      `SELECT w.name AS "workflowName", w.collection_id::float8 AS "collectionId", r.team_id::float8 AS "teamId",
         t.project_id::float8 AS "projectId", r.environment_id::float8 AS "environmentId", v.definition AS definition
       FROM workflows w
         JOIN renderings r ON r.id = w.rendering_id
         JOIN teams t ON t.id = r.team_id
         JOIN workflow_versions v ON v.id = $1
       WHERE w.id = $2`,
      [run.workflow_version_id, run.workflow_id],
    )
  )[0]

const nextRunAvailableAtOnPostgres = async (db: PgDb, after = -1): Promise<number | null> =>
  (await rows<{ at: number | null }>(db, `SELECT min(available_at)::float8 AS at FROM runs WHERE status IN (${CLAIMABLE}) AND available_at > $1`, [after]))[0]?.at ?? null

/** The runs running, for the claim's rules and the stats (runs_lease_idx). */
const RUNNING = `SELECT r.workflow_id::float8 AS workflow_id, e.project_id::float8 AS project_id, r.lease_owner
  FROM runs r JOIN environments e ON e.id = r.environment_id WHERE r.status = 'running'`

/** The run counts /metrics reads at scrape time (src/db/queue.ts `queueStats`). */
export async function queueStatsOnPostgres(store: PgStore, now: number, executor: ExecutorIdentity | null = null): Promise<QueueStats> {
  const byStatus = Object.fromEntries(RUN_STATUSES.map((status) => [status, 0])) as Record<RunStatus, number>
  for (const row of (await store.sql`SELECT status, count(*)::float8 AS n FROM runs GROUP BY status`) as { status: RunStatus; n: number }[]) {
    byStatus[row.status] = row.n
  }
  const [due] = (await store.sql.unsafe(
    `SELECT count(*)::float8 AS n, min(available_at)::float8 AS oldest FROM runs WHERE status IN (${CLAIMABLE}) AND available_at <= $1`,
    [now],
  )) as { n: number; oldest: number | null }[]
  const owner = executor?.owner ?? null
  const running = runningOf([...(await store.sql.unsafe(RUNNING, []))] as Parameters<typeof runningOf>[0], owner)
  const groups = dueGroupsOf([
    ...(await store.sql.unsafe(
      `SELECT r.workflow_id::float8 AS workflow_id, e.project_id::float8 AS project_id, w.concurrency_limit::float8 AS concurrency_limit, count(*)::float8 AS count
       FROM runs r JOIN environments e ON e.id = r.environment_id JOIN workflows w ON w.id = r.workflow_id
       WHERE r.status IN (${CLAIMABLE}) AND r.available_at <= $1 GROUP BY r.workflow_id, e.project_id, w.concurrency_limit`,
      [now],
    )),
  ] as Parameters<typeof dueGroupsOf>[0])
  const runningByProject = [
    ...(await store.sql.unsafe(
      `SELECT p.name AS project, coalesce(c.n, 0)::float8 AS running FROM projects p LEFT JOIN (
         SELECT e.project_id, count(*) AS n FROM runs r JOIN environments e ON e.id = r.environment_id
         WHERE r.status = 'running' AND r.lease_owner = $1 GROUP BY e.project_id) c ON c.project_id = p.id
       ORDER BY p.name COLLATE "C"`,
      [owner],
    )),
  ] as QueueStats['runningByProject']
  const [projects] = (await store.sql.unsafe(PROJECTS_WITH_WORKFLOWS, [])) as { n: number }[]
  return { byStatus, due: due!.n, oldestDueAt: due!.oldest, runningByProject, deferred: deferredRuns(groups, running, executor?.concurrency ?? 0, projects!.n) }
}

/** The twins of the queue's transitions, by the SQLite function they stand for. */
export const QUEUE_TWINS = twins(
  twin(insertRun, insertRunOnPostgres),
  twin(claimRuns, claimRunsOnPostgres),
  twin(advanceRun, advanceRunOnPostgres),
  twin(parkRun, parkRunOnPostgres),
  twin(finishRun, finishRunOnPostgres),
  twin(failRun, failRunOnPostgres),
  twin(renewLease, renewLeaseOnPostgres),
  twin(recoverExpiredRuns, recoverExpiredRunsOnPostgres),
  twin(releaseOwnedRuns, releaseOwnedRunsOnPostgres),
  twin(cancelActiveRun, cancelActiveRunOnPostgres),
  twin(recordStepOutcome, recordStepOutcomeOnPostgres),
  twin(runWorkflow, runWorkflowOnPostgres),
  twin(nextRunAvailableAt, nextRunAvailableAtOnPostgres),
)

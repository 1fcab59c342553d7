/**
 * Issue 18: the run queue's transitions as PostgreSQL twins of src/db/queue.ts — the same functions the executor
 * yields (`op(claimRuns, …)`, `op(advanceRun, …)`…), each one guarded statement as there (state and lease owner in
 * the WHERE; a guard that matches nothing throws LeaseLostError and rolls the op back). The claim takes its batch with
 * `FOR UPDATE SKIP LOCKED`, so instances split the due runs without waiting on each other. Run by
 * ./op-runner.ts.
 */
import {
  advanceRun,
  claimRuns,
  failRun,
  finishRun,
  LeaseLostError,
  parkRun,
  recoverExpiredRuns,
  releaseOwnedRuns,
  renewLease,
  type QueueStats,
  type RunRow,
} from '../queue.ts'
import { CLAIMABLE_RUN_STATUSES, sqlLiterals } from '../schema.ts'
import { RUN_STATUSES, type RunStatus } from '../../lib/run-statuses.ts'
import { clientOf, type PgDb, type PgStore } from './store.ts'
import { twin, twins } from './twin.ts'

const CLAIMABLE = sqlLiterals(CLAIMABLE_RUN_STATUSES)
/** Every write after the claim: only the worker holding the lease on a running run may make it ($1 run, $2 owner). */
const HELD = "id = $1 AND lease_owner = $2 AND status = 'running'"

/** The numeric columns of a run as numbers (int8 arrives as a string), as src/db/queue.ts's RunRow has them. */
const RUN_COLUMNS = `id, workflow_id::float8 AS workflow_id, workflow_version_id::float8 AS workflow_version_id,
  environment_id::float8 AS environment_id, record_id, user_id::float8 AS user_id, token_id::float8 AS token_id, "trigger",
  status, next_step::float8 AS next_step, available_at::float8 AS available_at, lease_owner,
  lease_expires_at::float8 AS lease_expires_at, attempts::float8 AS attempts, error, created_at::float8 AS created_at, started_at::float8 AS started_at, finished_at::float8 AS finished_at`

/** How many rows a statement changed. */
async function changed(db: PgDb, text: string, values: unknown[]): Promise<number> {
  return ((await clientOf(db).unsafe(text, values as never[])) as unknown as { count: number }).count
}

/** A lease-guarded write: nothing matched means the lease is gone, and the op's transaction must not commit. */
async function guarded(db: PgDb, text: string, values: unknown[]): Promise<void> {
  if ((await changed(db, text, values)) === 0) throw new LeaseLostError(String(values[0]))
}

/** The batched claim: up to `limit` due runs, oldest due first, skipping rows another claimer has locked. */
export async function claimRunsOnPostgres(db: PgDb, owner: string, now: number, leaseMs: number, limit: number): Promise<RunRow[]> {
  const rows = await clientOf(db).unsafe(
    `UPDATE runs SET status = 'running', lease_owner = $1, lease_expires_at = $2::bigint + $3::bigint,
       started_at = coalesce(started_at, $2), attempts = attempts + 1
     WHERE id IN (SELECT id FROM runs WHERE status IN (${CLAIMABLE}) AND available_at <= $2
                  ORDER BY available_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
       AND status IN (${CLAIMABLE})
     RETURNING ${RUN_COLUMNS}`,
    [owner, now, leaseMs, limit],
  )
  return ([...rows] as RunRow[]).sort((a, b) => a.available_at - b.available_at || (a.id < b.id ? -1 : 1))
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

const releaseOwnedRunsOnPostgres = (db: PgDb, owner: string, now: number) =>
  changed(db, `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, available_at = $2 WHERE status = 'running' AND lease_owner = $1`, [owner, now])

/** The run counts /metrics reads at scrape time (src/db/queue.ts `queueStats`). */
export async function queueStatsOnPostgres(store: PgStore, now: number): Promise<QueueStats> {
  const byStatus = Object.fromEntries(RUN_STATUSES.map((status) => [status, 0])) as Record<RunStatus, number>
  for (const row of (await store.sql`SELECT status, count(*)::float8 AS n FROM runs GROUP BY status`) as { status: RunStatus; n: number }[]) {
    byStatus[row.status] = row.n
  }
  const [due] = (await store.sql.unsafe(
    `SELECT count(*)::float8 AS n, min(available_at)::float8 AS oldest FROM runs WHERE status IN (${CLAIMABLE}) AND available_at <= $1`,
    [now],
  )) as { n: number; oldest: number | null }[]
  return { byStatus, due: due!.n, oldestDueAt: due!.oldest }
}

/** The twins of the queue's transitions, by the SQLite function they stand for. */
export const QUEUE_TWINS = twins(
  twin(claimRuns, claimRunsOnPostgres),
  twin(advanceRun, advanceRunOnPostgres),
  twin(parkRun, parkRunOnPostgres),
  twin(finishRun, finishRunOnPostgres),
  twin(failRun, failRunOnPostgres),
  twin(renewLease, renewLeaseOnPostgres),
  twin(recoverExpiredRuns, recoverExpiredRunsOnPostgres),
  twin(releaseOwnedRuns, releaseOwnedRunsOnPostgres),
)

/**
 * PROTOTYPE (issue 16), not wired into the app: the two hardest operations of the storage face in PostgreSQL.
 *
 * - `startRun`: the webhook/manual trigger's whole transaction as one async function (how DESIGN §13's shape (a)
 *   would write it): the run row (the partial unique index decides the 409: the result names the active run), the
 *   `triggerWorkflow` activity entry with a createdAt strictly after its environment's previous one, and the entry's
 *   record row. All or nothing.
 * - `claimRuns`: the queue claim, `FOR UPDATE SKIP LOCKED`, so concurrent claimers (other instances) never take the
 *   same run and never wait for each other.
 *
 * - `TRIGGER_TWINS`: the same statements as twins of the face's `insertRun` and `insertActivityLog`, so the runs
 *   service's own trigger op (`queueRun`) runs on PostgreSQL through ./op-runner.ts — the shape Trellis took.
 *
 * The SQLite side of the same operations is src/modules/runs/service.ts `queueRun` (inside `write()`) with
 * src/db/queue.ts `insertRun`/`claimRuns` and src/db/activity-logs.ts `insertActivityLog`.
 */
import type { TransactionSQL } from 'bun'
import { ACTIVE_RUN_STATUSES, sqlLiterals } from '../schema.ts'
import { type InsertResult, insertRun, type NewRun, type RunRow } from '../queue.ts'
import { insertActivityLog, type NewActivityLogRow } from '../activity-logs.ts'
import type { Call } from '../op.ts'
import type { PgTwin, PgTwins } from './op-runner.ts'
import { claimRunsOnPostgres } from './queue.ts'
import type { PgStore } from './store.ts'
import { microsFromMillis } from '../../lib/time.ts'

const ACTIVE = sqlLiterals(ACTIVE_RUN_STATUSES)

/** What the face answers for a trigger: the run started, or the run already active on the record (→ 409). */
export type StartRunResult = { runId: string } | { activeRunId: string | null }

/** The trigger's activity entry, as the service decides it (the run id is filled in here). */
export type TriggerEntry = Omit<NewActivityLogRow, 'runId' | 'environmentId' | 'userId' | 'tokenId'>

/**
 * Starts a run and writes its activity entry and record row in one transaction. When another run of the workflow
 * is active on the record nothing is written and the answer names that run. `now` is read by the caller (the clock);
 * the entry's createdAt is `max(now, previous + 1 µs)` in its environment (epoch µs, as on SQLite).
 */
export async function startRun(store: PgStore, run: NewRun, entry: TriggerEntry): Promise<StartRunResult> {
  return store.sql.begin(async (tx) => {
    const inserted = await insertRunOnPostgres(tx, run)
    if (!inserted.inserted) return { activeRunId: inserted.activeRunId }
    await appendActivity(tx, { ...entry, runId: run.id, environmentId: run.environmentId, userId: run.userId, tokenId: run.tokenId }, [run.recordId], run.createdAt)
    return { runId: run.id }
  })
}

/**
 * The twin of src/db/queue.ts `insertRun`: the queued run, or the run already active on the record. ON CONFLICT on
 * the partial index: a conflicting row of a transaction not yet committed makes this wait for it, then do nothing
 * (it committed) or insert (it rolled back) — never two active runs, never an error to parse.
 */
export async function insertRunOnPostgres(tx: TransactionSQL, run: NewRun): Promise<InsertResult> {
  const inserted = await tx.unsafe(
    `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
       status, next_step, available_at, attempts, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', 0, $9, 0, $9)
     ON CONFLICT (workflow_id, record_id) WHERE status IN (${ACTIVE}) DO NOTHING
     RETURNING id`,
    [run.id, run.workflowId, run.workflowVersionId, run.environmentId, run.recordId, run.userId, run.tokenId, run.trigger, run.createdAt],
  )
  if (inserted.length > 0) return { inserted: true }
  // A new statement, a new READ COMMITTED snapshot: it sees the run that won. Null when it ended meanwhile.
  const active = await tx.unsafe(`SELECT id FROM runs WHERE workflow_id = $1 AND record_id = $2 AND status IN (${ACTIVE})`, [run.workflowId, run.recordId])
  return { inserted: false, activeRunId: (active[0] as { id: string } | undefined)?.id ?? null }
}

/** The twins of the face functions the trigger's op calls (src/modules/runs/service.ts `queueRun`). */
export const TRIGGER_TWINS: PgTwins = new Map<Call['fn'], PgTwin>([
  [insertRun as Call['fn'], insertRunOnPostgres as PgTwin],
  [insertActivityLog as Call['fn'], appendActivity as PgTwin],
])

/**
 * Appends an activity entry and its record ids inside `tx`. The environment's clock row is upserted first: the
 * upsert takes its row lock until commit, so concurrent appends to one environment queue there (others don't) and
 * take createdAt and id in the same order — strictly increasing createdAt, as lists page by it (DESIGN §3).
 */
export async function appendActivity(tx: TransactionSQL, entry: NewActivityLogRow, recordIds: Iterable<string>, now: number): Promise<number> {
  const [clock] = await tx`
    INSERT INTO activity_log_clocks AS c (environment_id, latest_created_at) VALUES (${entry.environmentId}, ${microsFromMillis(now)})
    ON CONFLICT (environment_id) DO UPDATE SET latest_created_at = greatest(EXCLUDED.latest_created_at, c.latest_created_at + 1)
    RETURNING latest_created_at::float8 AS at`
  const [row] = await tx`
    INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, collection_id, token_id,
      workflow_name, run_id, step_name, extension, created_at)
    VALUES (${entry.environmentId}, ${entry.type}, ${entry.action}, ${entry.label}, ${entry.userId}, ${entry.teamId},
      ${entry.collectionId}, ${entry.tokenId}, ${entry.workflowName}, ${entry.runId}, ${entry.stepName}, ${entry.extension},
      ${(clock as { at: number }).at})
    RETURNING id::float8 AS id`
  const logId = (row as { id: number }).id
  for (const recordId of new Set(recordIds)) {
    await tx`INSERT INTO activity_log_records (log_id, environment_id, record_id) VALUES (${logId}, ${entry.environmentId}, ${recordId})`
  }
  return logId
}

/**
 * Claims up to `limit` due runs under a lease for `owner` with the queue's own twin (./queue.ts,
 * `FOR UPDATE SKIP LOCKED`): concurrent claimers split the due runs between them and never wait for each other.
 */
export function claimRuns(store: PgStore, owner: string, now: number, leaseMs: number, limit: number): Promise<RunRow[]> {
  return store.sql.begin((tx) => claimRunsOnPostgres(tx, owner, now, leaseMs, limit)) as Promise<RunRow[]>
}

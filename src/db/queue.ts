/**
 * The run queue's SQL (DESIGN §8): the `runs` table is the queue. Kept here because it is dialect-specific:
 * SQLite claims with one `UPDATE … WHERE id = (SELECT … LIMIT 1) RETURNING`, PostgreSQL would add
 * `FOR UPDATE SKIP LOCKED`; SQLite reports the partial unique index violation as SQLITE_CONSTRAINT_UNIQUE.
 * Every write after a claim is guarded by the lease owner, so a run recovered elsewhere is never written twice.
 */
import type { Database } from 'bun:sqlite'
import { RUN_STATUSES, type RunStatus } from './schema.ts'

export interface RunRow {
  id: string
  workflow_id: number
  workflow_version_id: number
  environment_id: number
  record_id: string
  user_id: number
  token_id: number | null
  trigger: 'manual' | 'webhook'
  status: RunStatus
  next_step: number
  available_at: number
  lease_owner: string | null
  lease_expires_at: number | null
  attempts: number
  error: string | null
  created_at: number
  started_at: number | null
  finished_at: number | null
}

export interface NewRun {
  id: string
  workflowId: number
  workflowVersionId: number
  environmentId: number
  recordId: string
  userId: number
  tokenId: number | null
  trigger: 'manual' | 'webhook'
  createdAt: number
}

export type InsertResult = { inserted: true } | { inserted: false; activeRunId: string | null }

export class LeaseLostError extends Error {
  constructor(runId: string) {
    super(`lease on run ${runId} was lost (cancelled or recovered elsewhere)`)
  }
}

function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

export class RunQueue {
  private readonly insertStatement
  private readonly activeRunStatement
  private readonly claimStatement
  private readonly heartbeatStatement
  private readonly recoverStatement
  private readonly releaseStatement
  private readonly guardStatement
  private readonly nextAvailableStatement

  constructor(sqlite: Database) {
    this.insertStatement = sqlite.prepare(
      `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
         status, next_step, available_at, attempts, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, 0, ?)`,
    )
    this.activeRunStatement = sqlite.prepare(
      "SELECT id FROM runs WHERE workflow_id = ? AND record_id = ? AND status IN ('queued', 'running', 'waiting')",
    )
    this.claimStatement = sqlite.prepare(
      `UPDATE runs SET status = 'running', lease_owner = ?1, lease_expires_at = ?2 + ?3,
         started_at = coalesce(started_at, ?2), attempts = attempts + 1
       WHERE id = (SELECT id FROM runs WHERE status IN ('queued', 'waiting') AND available_at <= ?2
                   ORDER BY available_at LIMIT 1)
         AND status IN ('queued', 'waiting')
       RETURNING *`,
    )
    this.heartbeatStatement = sqlite.prepare(
      "UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? AND status = 'running'",
    )
    this.recoverStatement = sqlite.prepare(
      `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, available_at = ?1
       WHERE status = 'running' AND lease_expires_at < ?1`,
    )
    this.releaseStatement = sqlite.prepare(
      `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, available_at = ?2
       WHERE status = 'running' AND lease_owner = ?1`,
    )
    this.guardStatement = sqlite.prepare("SELECT 1 FROM runs WHERE id = ? AND lease_owner = ? AND status = 'running'")
    this.nextAvailableStatement = sqlite.prepare(
      "SELECT min(available_at) AS at FROM runs WHERE status IN ('queued', 'waiting')",
    )
  }

  /**
   * Inserts a queued run. The partial unique index decides whether another run is active on the record:
   * no check-then-insert race. Call inside the transaction that also writes the trigger's activity entry.
   */
  insert(run: NewRun): InsertResult {
    try {
      this.insertStatement.run(
        run.id, run.workflowId, run.workflowVersionId, run.environmentId, run.recordId,
        run.userId, run.tokenId, run.trigger, run.createdAt, run.createdAt,
      )
      return { inserted: true }
    } catch (error) {
      if (!isUniqueViolation(error)) throw error
      const active = this.activeRunStatement.all(run.workflowId, run.recordId) as { id: string }[]
      return { inserted: false, activeRunId: active[0]?.id ?? null }
    }
  }

  /** Claims the next due run under a lease, or returns null. */
  claim(owner: string, now: number, leaseMs: number): RunRow | null {
    return (this.claimStatement.all(owner, now, leaseMs) as RunRow[])[0] ?? null
  }

  /** Extends the lease; false when the run is no longer ours (cancelled, recovered). */
  heartbeat(runId: string, owner: string, now: number, leaseMs: number): boolean {
    return this.heartbeatStatement.run(now + leaseMs, runId, owner).changes > 0
  }

  /** Throws LeaseLostError unless the run is still running under this owner. Call inside the step's transaction. */
  assertOwned(runId: string, owner: string): void {
    if (this.guardStatement.all(runId, owner).length === 0) throw new LeaseLostError(runId)
  }

  /** Runs whose lease expired (their process died) go back to the queue; they resume at their first step not done. */
  recoverExpired(now: number): number {
    return this.recoverStatement.run(now).changes
  }

  /** Graceful shutdown: give back what this process holds. */
  releaseOwned(owner: string, now: number): number {
    return this.releaseStatement.run(owner, now).changes
  }

  /** When the next queued or waiting run becomes due (null when none). */
  nextAvailableAt(): number | null {
    return (this.nextAvailableStatement.all()[0] as { at: number | null } | undefined)?.at ?? null
  }
}

export interface QueueStats {
  byStatus: Record<RunStatus, number>
  /** Queued runs and waiting runs whose time has come: what workers could claim now. */
  due: number
  /** `available_at` of the oldest of those (null when none). */
  oldestDueAt: number | null
}

/** Counts for /metrics, read at scrape time (the claim index answers the due part; the status count scans an index). */
export function queueStats(sqlite: Database, now: number): QueueStats {
  const byStatus = Object.fromEntries(RUN_STATUSES.map((status) => [status, 0])) as Record<RunStatus, number>
  for (const row of sqlite.query('SELECT status, count(*) AS n FROM runs GROUP BY status').all() as { status: RunStatus; n: number }[]) {
    byStatus[row.status] = row.n
  }
  const due = sqlite
    .query("SELECT count(*) AS n, min(available_at) AS oldest FROM runs WHERE status IN ('queued', 'waiting') AND available_at <= ?")
    .all(now)[0] as { n: number; oldest: number | null }
  return { byStatus, due: due.n, oldestDueAt: due.oldest }
}

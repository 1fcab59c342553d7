/**
 * The run queue (DESIGN §8): the `runs` table is the queue, and this file owns every change of a run's state —
 * start, claim (which also wakes a waiting run whose time has come), lease renewal, advance, park, finish, fail,
 * cancel, give back, recovery — each one guarded statement, as pg-boss's `plans.ts` keeps them: the state it
 * leaves (and, after a claim, the lease owner) is in its `WHERE`, so a run cancelled or recovered elsewhere is
 * never written twice. It is dialect-specific: a claim gathers each environment's oldest due runs and starts those
 * src/db/claims.ts picks (the fair share between projects, the workflows' concurrency limits) — on SQLite in one
 * IMMEDIATE transaction, on PostgreSQL with `FOR UPDATE SKIP LOCKED`; SQLite reports the partial unique index
 * violation as SQLITE_CONSTRAINT_UNIQUE.
 *
 * The status lists are written into the SQL as literals (from ACTIVE_RUN_STATUSES, never retyped): SQLite uses a
 * partial index (`runs_one_active_per_record`, `runs_claim_idx`) only when the query's WHERE repeats the index's
 * literal predicate, which a bound parameter does not.
 *
 * The transitions a worker makes while it records steps (`advanceRun`, `parkRun`, `finishRun`, `failRun`,
 * `recordStepOutcome`) take the caller's transaction handle: they commit with the step's effects and its activity
 * entries, or not at all. When the guard matches nothing they throw LeaseLostError, which rolls that transaction back.
 */
import type { Database, Statement } from 'bun:sqlite'
import {
  type ClaimCandidate,
  type ClaimFacts,
  claimOrder,
  deferredRuns,
  type DueRuns,
  environmentsToWiden,
  projectCap,
  type RunningRun,
  workflowsToReadFurther,
} from './claims.ts'
import type { Db, SqliteStore } from './open.ts'
import { connectionOf, prepared } from './prepared.ts'
import { ACTIVE_RUN_STATUSES, CLAIMABLE_RUN_STATUSES, RUN_STATUSES, type RunStatus, sqlLiterals } from './schema.ts'

const ACTIVE = sqlLiterals(ACTIVE_RUN_STATUSES)
const CLAIMABLE = sqlLiterals(CLAIMABLE_RUN_STATUSES)
/** Every write after the claim: only the worker holding the lease on a running run may make it. */
const HELD = "id = :id AND lease_owner = :owner AND status = 'running'"

/** A run as the queue hands it to a worker (the `runs` row, column names as stored). */
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
  /** Epoch µs (the other times of a run are ms). */
  created_at: number
  started_at: number | null
  finished_at: number | null
}

export interface NewRun {
  /**
   * The run's id (UUIDv7), made by the caller. SQLite stores it as given; PostgreSQL stores a later one when another
   * instance's run of the environment already has a greater id (src/db/postgres/queue.ts): use the id insertRun answers.
   */
  id: string
  workflowId: number
  workflowVersionId: number
  environmentId: number
  recordId: string
  userId: number
  tokenId: number | null
  trigger: 'manual' | 'webhook'
  /**
   * When the run is queued (ms): it is due then; its stored `created_at` is in µs (see the insert). A clock to read
   * (`() => clock.now()`) is read once the insert holds what orders the environment's runs — SQLite's write lock,
   * PostgreSQL's runs lock — so a run is never dated earlier than the moment it can be listed, however long its
   * transaction waited for that lock (a number is taken as given: seeding and tests).
   */
  createdAt: number | (() => number)
}

/** The run's `createdAt` in ms: read from its clock now, or as given. */
export const createdAtOf = (run: Pick<NewRun, 'createdAt'>): number => (typeof run.createdAt === 'function' ? run.createdAt() : run.createdAt)

/** The run queued under `id` (the id it was stored under), or the run already active on the record. */
export type InsertResult = { inserted: true; id: string } | { inserted: false; activeRunId: string | null }

export class LeaseLostError extends Error {
  constructor(runId: string) {
    super(`lease on run ${runId} was lost (cancelled or recovered elsewhere)`)
  }
}

function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

/**
 * The queue's statements that stand alone (each its own write, or the start inside the trigger's transaction),
 * prepared once on `sqlite`, which must be opened `strict` (as src/db/open.ts does) for the named parameters.
 */
/** The run queue of a store (what code outside src/db uses: it never holds the raw connection). */
export function runQueueOf(store: SqliteStore): RunQueue {
  return new RunQueue(store.sqlite)
}

/** The queue's statements on the connection behind `db`, prepared once per connection. */
function queueOn(db: Db): RunQueue {
  return prepared(db, 'queue.statements', () => new RunQueue(connectionOf(db)))
}

/** The queue's transitions as functions of the storage face (`op(claimRuns, …)`); see RunQueue for each rule. */
export const insertRun = (db: Db, run: NewRun): InsertResult => queueOn(db).insert(run)
/** `concurrency`: the claiming instance's worker count, for the projects' reserve (src/db/claims.ts); none without it. */
export const claimRuns = (db: Db, owner: string, now: number, leaseMs: number, limit: number, concurrency = Infinity): RunRow[] =>
  queueOn(db).claimBatch(owner, now, leaseMs, limit, concurrency)
export const renewLease = (db: Db, runId: string, owner: string, now: number, leaseMs: number): boolean =>
  queueOn(db).heartbeat(runId, owner, now, leaseMs)
export const recoverExpiredRuns = (db: Db, now: number): number => queueOn(db).recoverExpired(now)
export const releaseOwnedRuns = (db: Db, owner: string, now: number): number => queueOn(db).releaseOwned(owner, now)
/** When the next queued or waiting run becomes due after `after` (ms; by default any, due ones included), or null. */
export const nextRunAvailableAt = (db: Db, after?: number): number | null => queueOn(db).nextAvailableAt(after)

export class RunQueue {
  private readonly insertStatement
  private readonly activeRunStatement
  private readonly environmentsStatement
  private readonly runningStatement
  private readonly projectsWithWorkflowsStatement: Statement<{ n: number }, []>
  private readonly environmentTopStatement
  private readonly workflowHeadsStatement
  private readonly workflowTopStatement
  private readonly startStatement
  private readonly claimTransaction
  private readonly heartbeatStatement
  private readonly recoverStatement
  private readonly releaseStatement
  private readonly nextAvailableStatement

  constructor(sqlite: Database) {
    // created_at: the trigger's time in µs, or 1 µs after the environment's newest run (run ids are time-ordered
    // UUIDv7s, so the newest by id is the last inserted): strictly increasing per list, so `createdAt.lt` pages
    // exactly, and never ahead of the clock below a million triggers a second.
    this.insertStatement = sqlite.prepare(
      `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
         status, next_step, available_at, attempts, created_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', 0, ?9, 0,
         max(?9 * 1000, coalesce((SELECT created_at FROM runs WHERE environment_id = ?4 ORDER BY id DESC LIMIT 1), 0) + 1))`,
    )
    this.activeRunStatement = sqlite.prepare(`SELECT id FROM runs WHERE workflow_id = ? AND record_id = ? AND status IN (${ACTIVE})`)
    // The claim's facts (src/db/claims.ts): the environments (few) and the runs running (at most every instance's
    // workers: runs_lease_idx), then each environment's oldest due runs and, where a limit holds those back, each of its
    // other workflows' (runs_claim_env_idx, runs_claim_workflow_idx: in the index's order, no sort; ties in the order
    // they were queued, as the claim always took them on SQLite).
    this.environmentsStatement = sqlite.prepare(
      `SELECT e.id, e.project_id FROM environments e
       WHERE EXISTS (SELECT 1 FROM runs r WHERE r.environment_id = e.id AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?)`,
    )
    this.runningStatement = sqlite.prepare(RUNNING)
    this.projectsWithWorkflowsStatement = sqlite.prepare(PROJECTS_WITH_WORKFLOWS)
    this.environmentTopStatement = sqlite.prepare(
      `SELECT r.id, r.workflow_id, r.environment_id, r.available_at, w.concurrency_limit FROM runs r JOIN workflows w ON w.id = r.workflow_id
       WHERE r.environment_id = ?1 AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?2 ORDER BY r.available_at, r.rowid LIMIT ?3`,
    )
    this.workflowHeadsStatement = sqlite.prepare(
      `SELECT x.id, x.workflow_id, x.environment_id, x.available_at, h.concurrency_limit FROM (
         SELECT w.concurrency_limit, (SELECT r.rowid FROM runs r WHERE r.workflow_id = w.id AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?2
                                      ORDER BY r.available_at, r.rowid LIMIT 1) AS head
         FROM workflows w JOIN renderings g ON g.id = w.rendering_id WHERE g.environment_id = ?1) h
       JOIN runs x ON x.rowid = h.head`,
    )
    this.workflowTopStatement = sqlite.prepare(
      `SELECT r.id, r.workflow_id, r.environment_id, r.available_at, w.concurrency_limit FROM runs r JOIN workflows w ON w.id = r.workflow_id
       WHERE r.workflow_id = ?1 AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?2 ORDER BY r.available_at, r.rowid LIMIT ?3`,
    )
    this.startStatement = sqlite.prepare(
      `UPDATE runs SET status = 'running', lease_owner = ?1, lease_expires_at = ?2 + ?3,
         started_at = coalesce(started_at, ?2), attempts = attempts + 1
       WHERE id = ?4 AND status IN (${CLAIMABLE})
       RETURNING *`,
    )
    // IMMEDIATE: the facts and the starts in one write transaction (a savepoint inside the caller's), so no other
    // process claims between them.
    this.claimTransaction = sqlite.transaction((owner: string, now: number, leaseMs: number, limit: number, concurrency: number) =>
      this.claimNow(owner, now, leaseMs, limit, concurrency),
    )
    this.heartbeatStatement = sqlite.prepare(`UPDATE runs SET lease_expires_at = :until WHERE ${HELD}`)
    this.recoverStatement = sqlite.prepare(
      `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, available_at = ?1
       WHERE status = 'running' AND lease_expires_at < ?1`,
    )
    this.releaseStatement = sqlite.prepare(
      `UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, available_at = ?2
       WHERE status = 'running' AND lease_owner = ?1`,
    )
    this.nextAvailableStatement = sqlite.prepare(`SELECT min(available_at) AS at FROM runs WHERE status IN (${CLAIMABLE}) AND available_at > ?`)
  }

  /**
   * Start: inserts a queued run. The partial unique index decides whether another run is active on the record:
   * no check-then-insert race. Call inside the transaction that also writes the trigger's activity entry.
   */
  insert(run: NewRun): InsertResult {
    try {
      this.insertStatement.run(
        run.id, run.workflowId, run.workflowVersionId, run.environmentId, run.recordId,
        run.userId, run.tokenId, run.trigger, createdAtOf(run),
      )
      return { inserted: true, id: run.id }
    } catch (error) {
      if (!isUniqueViolation(error)) throw error
      const active = this.activeRunStatement.all(run.workflowId, run.recordId) as { id: string }[]
      return { inserted: false, activeRunId: active[0]?.id ?? null }
    }
  }

  /** Claims the next due run — queued, or waiting with its time come (the wake) — under a lease, or returns null. */
  claim(owner: string, now: number, leaseMs: number): RunRow | null {
    return this.claimBatch(owner, now, leaseMs, 1)[0] ?? null
  }

  /**
   * Claims up to `limit` due runs at once, each under a lease: those src/db/claims.ts picks (fair share between
   * projects, workflow limits), oldest due first in the answer.
   */
  claimBatch(owner: string, now: number, leaseMs: number, limit: number, concurrency = Infinity): RunRow[] {
    const runs = this.claimTransaction.immediate(owner, now, leaseMs, limit, concurrency)
    return runs.sort((a, b) => a.available_at - b.available_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  /** The claim's transaction (src/db/claims.ts has the rules; one writer, so the facts hold until it commits). */
  private claimNow(owner: string, now: number, leaseMs: number, limit: number, concurrency: number): RunRow[] {
    if (limit <= 0) return []
    const projectOf = new Map((this.environmentsStatement.all(now) as { id: number; project_id: number }[]).map((e) => [e.id, e.project_id]))
    if (projectOf.size === 0) return []
    const facts: ClaimFacts = {
      running: runningOf(this.runningStatement.all() as Parameters<typeof runningOf>[0], owner),
      startable: null,
      projectCap: Number.isFinite(concurrency) ? projectCap(concurrency, this.projectsWithWorkflowsStatement.get()!.n) : Infinity,
    }
    const candidates = (rows: unknown[]) =>
      (rows as DueRow[]).map((r): ClaimCandidate => ({
        id: r.id, workflowId: r.workflow_id, environmentId: r.environment_id, projectId: projectOf.get(r.environment_id)!, availableAt: r.available_at,
        concurrencyLimit: r.concurrency_limit,
      }))
    const tops = [...projectOf.keys()].flatMap((environmentId) => candidates(this.environmentTopStatement.all(environmentId, now, limit)))
    const widened = environmentsToWiden(tops, facts).flatMap((environmentId) => {
      const heads = candidates(this.workflowHeadsStatement.all(environmentId, now))
      const further = workflowsToReadFurther(heads, facts, limit).flatMap((workflowId) => candidates(this.workflowTopStatement.all(workflowId, now, limit)))
      return [...heads, ...further]
    })
    const started: RunRow[] = []
    for (const id of claimOrder([...tops, ...widened], facts).slice(0, limit)) started.push(...(this.startStatement.all(owner, now, leaseMs, id) as RunRow[]))
    return started
  }

  /** Lease renewal; false when the run is no longer ours (cancelled, recovered). */
  heartbeat(runId: string, owner: string, now: number, leaseMs: number): boolean {
    return this.heartbeatStatement.run({ until: now + leaseMs, id: runId, owner }).changes > 0
  }

  /** Recovery: runs whose lease expired (their process died) go back to the queue; they resume at their first step not done. */
  recoverExpired(now: number): number {
    return this.recoverStatement.run(now).changes
  }

  /** Graceful shutdown: give back what this process holds. */
  releaseOwned(owner: string, now: number): number {
    return this.releaseStatement.run(owner, now).changes
  }

  /** When the next queued or waiting run becomes due after `after` (by default any, due ones included; null when none). */
  nextAvailableAt(after = -1): number | null {
    return (this.nextAvailableStatement.all(after)[0] as { at: number | null } | undefined)?.at ?? null
  }
}

/** A due run as the claim's walks read it. */
interface DueRow {
  id: string
  workflow_id: number
  environment_id: number
  available_at: number
  concurrency_limit: number | null
}

/** The statement for `key` on the transaction's connection, prepared once per connection. */
function statement(tx: Db, key: string, text: string): Statement {
  return prepared(tx, `queue.${key}`, () => connectionOf(tx).prepare(text))
}

/** Runs a lease-guarded write; nothing matched means the lease is gone, and the caller's transaction must not commit. */
function guarded(tx: Db, key: string, text: string, values: Record<string, string | number | null>): void {
  if (statement(tx, key, text).run(values).changes === 0) throw new LeaseLostError(String(values.id))
}

/** Advance: the steps before `nextStep` are recorded; the run stays running under this owner. */
export function advanceRun(tx: Db, runId: string, owner: string, nextStep: number): void {
  guarded(tx, 'advance', `UPDATE runs SET next_step = :next WHERE ${HELD}`, { id: runId, owner, next: nextStep })
}

/** Park: a `wait` step gives the run back, `waiting` until `until`, resuming at `nextStep`; no worker holds it. */
export function parkRun(tx: Db, runId: string, owner: string, nextStep: number, until: number): void {
  guarded(
    tx,
    'park',
    `UPDATE runs SET next_step = :next, status = 'waiting', available_at = :until, lease_owner = NULL, lease_expires_at = NULL
     WHERE ${HELD}`,
    { id: runId, owner, next: nextStep, until },
  )
}

function endRun(tx: Db, runId: string, owner: string, end: { status: 'succeeded' | 'failed'; error: string | null; now: number; nextStep?: number }): void {
  guarded(
    tx,
    'end',
    `UPDATE runs SET status = :status, error = :error, finished_at = :now, lease_owner = NULL, lease_expires_at = NULL,
       next_step = coalesce(:next, next_step)
     WHERE ${HELD}`,
    { id: runId, owner, status: end.status, error: end.error, now: end.now, next: end.nextStep ?? null },
  )
}

/** Finish: the run succeeded (`nextStep` past its last recorded step, when given); the record is free at once. */
export function finishRun(tx: Db, runId: string, owner: string, now: number, nextStep?: number): void {
  endRun(tx, runId, owner, { status: 'succeeded', error: null, now, nextStep })
}

/** Fail: the run failed with `error` (`{code, message, step?}`), `nextStep` at the step that failed when given. */
export function failRun(tx: Db, runId: string, owner: string, now: number, error: unknown, nextStep?: number): void {
  endRun(tx, runId, owner, { status: 'failed', error: JSON.stringify(error), now, nextStep })
}

/**
 * Cancel: ends an active run whoever holds it (its worker loses the lease and stops at its next write). False when
 * the run is not active (already finished, or unknown).
 */
export function cancelActiveRun(tx: Db, runId: string, now: number): boolean {
  return (
    statement(
      tx,
      'cancel',
      `UPDATE runs SET status = 'cancelled', finished_at = :now, lease_owner = NULL, lease_expires_at = NULL
       WHERE id = :id AND status IN (${ACTIVE})`,
    ).run({ id: runId, now }).changes > 0
  )
}

export interface StepOutcome {
  runId: string
  index: number
  name: string
  type: string
  status: 'succeeded' | 'failed'
  output: unknown
  error: { code: string; message: string } | null
  startedAt: number
  finishedAt: number
}

/** A step's outcome (`run_steps`), in the transaction (and savepoint) of the step's effects. */
export function recordStepOutcome(tx: Db, step: StepOutcome): void {
  statement(
    tx,
    'record-step',
    `INSERT INTO run_steps (run_id, step_index, name, type, status, output, error, started_at, finished_at)
     VALUES (:runId, :index, :name, :type, :status, :output, :error, :startedAt, :finishedAt)`,
  ).run({
    runId: step.runId,
    index: step.index,
    name: step.name,
    type: step.type,
    status: step.status,
    output: step.output === undefined ? null : JSON.stringify(step.output),
    error: step.error ? JSON.stringify(step.error) : null,
    startedAt: step.startedAt,
    finishedAt: step.finishedAt,
  })
}

/** What a claimed run acts on: its workflow's name, rendering (team, environment, project), collection and definition. */
export interface RunWorkflow {
  workflowName: string
  collectionId: number
  teamId: number
  projectId: number
  environmentId: number
  /** The run's workflow version's definition (JSON). */
  definition: string
}

/** The workflow, rendering and version a run was started on; undefined when the workflow is gone. */
export function runWorkflow(db: Db, run: Pick<RunRow, 'workflow_id' | 'workflow_version_id'>): RunWorkflow | undefined {
  return statement(
    db,
    'run-workflow',
    `SELECT w.name AS workflowName, w.collection_id AS collectionId, r.team_id AS teamId, t.project_id AS projectId,
       r.environment_id AS environmentId, v.definition AS definition
     FROM workflows w
       JOIN renderings r ON r.id = w.rendering_id
       JOIN teams t ON t.id = r.team_id
       JOIN workflow_versions v ON v.id = :versionId
     WHERE w.id = :workflowId`,
  ).all({ versionId: run.workflow_version_id, workflowId: run.workflow_id })[0] as RunWorkflow | undefined
}

export interface QueueStats {
  byStatus: Record<RunStatus, number>
  /** Queued runs and waiting runs whose time has come: what workers could claim now. */
  due: number
  /** `available_at` of the oldest of those (null when none). */
  oldestDueAt: number | null
  /** Every project, by name, with the runs this instance's executor runs of it now (0 without one). */
  runningByProject: { project: string; running: number }[]
  /** Due runs held back now, by why (src/db/claims.ts `deferredRuns`; fair share 0 without an executor). */
  deferred: { workflowLimit: number; fairShare: number }
}

/** This instance's executor, for the stats that concern it: its lease owner and worker count. */
export interface ExecutorIdentity {
  owner: string
  concurrency: number
}

/** What the run stats group the due runs by (both stores; GROUP BY every column PostgreSQL asks for). */
const DUE_GROUPS = `SELECT r.workflow_id, e.project_id, w.concurrency_limit, count(*) AS count
  FROM runs r JOIN environments e ON e.id = r.environment_id JOIN workflows w ON w.id = r.workflow_id
  WHERE r.status IN (${CLAIMABLE}) AND r.available_at <= ? GROUP BY r.workflow_id, e.project_id, w.concurrency_limit`
/** Every project with the runs a lease owner holds of it (the running ones through runs_lease_idx). */
const RUNNING_BY_PROJECT = `SELECT p.name AS project, coalesce(c.n, 0) AS running FROM projects p LEFT JOIN (
    SELECT e.project_id, count(*) AS n FROM runs r JOIN environments e ON e.id = r.environment_id
    WHERE r.status = 'running' AND r.lease_owner = ? GROUP BY e.project_id) c ON c.project_id = p.id
  ORDER BY p.name`
/** Whether more than one project has a published workflow (0, 1 or 2: no more is counted), for the projects' reserve. */
export const PROJECTS_WITH_WORKFLOWS = `SELECT CAST(count(*) AS INTEGER) AS n FROM (
    SELECT DISTINCT e.project_id FROM workflows w JOIN renderings g ON g.id = w.rendering_id JOIN environments e ON e.id = g.environment_id
    WHERE w.active_version_id IS NOT NULL LIMIT 2) p`
/** The runs running, for the claim's rules (runs_lease_idx). */
const RUNNING = `SELECT r.workflow_id, e.project_id, r.lease_owner FROM runs r JOIN environments e ON e.id = r.environment_id WHERE r.status = 'running'`

/** The running rows as the claim's rules read them (`mine`: held by `owner`). */
export const runningOf = (rows: { workflow_id: number; project_id: number; lease_owner: string | null }[], owner: string | null): RunningRun[] =>
  rows.map((r) => ({ workflowId: r.workflow_id, projectId: r.project_id, mine: owner !== null && r.lease_owner === owner }))

/** The due groups as the claim's rules read them. */
export const dueGroupsOf = (rows: { workflow_id: number; project_id: number; concurrency_limit: number | null; count: number }[]): DueRuns[] =>
  rows.map((r) => ({ workflowId: r.workflow_id, projectId: r.project_id, concurrencyLimit: r.concurrency_limit, count: r.count }))

/**
 * Counts for /metrics, read at scrape time (the claim index answers the due part; the status count scans an index;
 * the deferred runs group the due ones by workflow).
 */
export function queueStats(sqlite: Database, now: number, executor: ExecutorIdentity | null = null): QueueStats {
  const byStatus = Object.fromEntries(RUN_STATUSES.map((status) => [status, 0])) as Record<RunStatus, number>
  for (const row of sqlite.query('SELECT status, count(*) AS n FROM runs GROUP BY status').all() as { status: RunStatus; n: number }[]) {
    byStatus[row.status] = row.n
  }
  const due = sqlite
    .query(`SELECT count(*) AS n, min(available_at) AS oldest FROM runs WHERE status IN (${CLAIMABLE}) AND available_at <= ?`)
    .all(now)[0] as { n: number; oldest: number | null }
  const running = runningOf(sqlite.query(RUNNING).all() as Parameters<typeof runningOf>[0], executor?.owner ?? null)
  const groups = dueGroupsOf(sqlite.query(DUE_GROUPS).all(now) as Parameters<typeof dueGroupsOf>[0])
  return {
    byStatus,
    due: due.n,
    oldestDueAt: due.oldest,
    runningByProject: sqlite.query(RUNNING_BY_PROJECT).all(executor?.owner ?? null) as QueueStats['runningByProject'],
    deferred: deferredRuns(groups, running, executor?.concurrency ?? 0, (sqlite.query(PROJECTS_WITH_WORKFLOWS).get() as { n: number }).n),
  }
}

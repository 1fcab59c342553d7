/**
 * The run queue (DESIGN §8): the `runs` table is the queue, and this file owns every change of a run's state —
 * start, claim (which also wakes a waiting run whose time has come), lease renewal, advance, park, finish, fail,
 * cancel, give back, recovery — each one guarded statement, as pg-boss's `plans.ts` keeps them: the state it
 * leaves (and, after a claim, the lease owner) is in its `WHERE`, so a run cancelled or recovered elsewhere is
 * never written twice. Each is written once for both stores (docs/architecture.md "One query, two dialects"), but for what only
 * one store needs: the insert's place in its environment's order and the claim's reads and starts — SQLite's single
 * writer holds everything they read until they commit, PostgreSQL locks (the runs list lock, `FOR UPDATE SKIP
 * LOCKED`) and announces a queued run with NOTIFY: those are plans (./op.ts `plan`), both halves side by side below.
The claim's rules are src/db/claims.ts.
 *
 * The status lists are written into the SQL as literals (from ACTIVE_RUN_STATUSES, never retyped), in the form the
 * schema's index predicates take (`runStatusIn` for three or more, src/db/tables.ts): SQLite uses a partial index
 * (`runs_one_active_per_record`, `runs_claim_idx`, `runs_lease_idx`) only when the query's WHERE repeats the index's
 * literal predicate as written, which a bound parameter — or the same set spelled `IN (…)` — does not.
 *
 * The transitions a worker makes while it records steps (`advanceRun`, `parkRun`, `finishRun`, `failRun`,
 * `recordStepOutcomes`) run in the caller's transaction: they commit with the step's effects and its activity
 * entries, or not at all. When the guard matches nothing they throw LeaseLostError, which rolls that transaction back.
 */
import type { Statement } from 'bun:sqlite'
import { and, type AnyColumn, count, eq, isNotNull, lt, type SQL, sql } from 'drizzle-orm'
import {
  type ClaimCandidate,
  type ClaimFacts,
  claimOrder,
  deferredRuns,
  environmentsToWiden,
  projectCap,
  type RunningRun,
  workflowsToReadFurther,
} from './claims.ts'
import { queueRunCallbacks } from './callbacks.ts'
import type { Db, Dialect } from './dialect.ts'
import { cached } from './lookup-cache.ts'
import { type Op, plan, runPlan } from './op.ts'
import { type PgDb, rawRows } from './postgres/client.ts'
import { noteRunsLocked, notifyOnCommit } from './postgres/monotonic.ts'
import { RUNS_CHANNEL } from './postgres/queue.ts'
import { constantLimit, rows, setPlaceholders, statement } from './query.ts'
import { connectionOf, prepared, statementOn } from './sqlite/prepared.ts'
import type { Store } from './store.ts'
import { joinWorkflowPlace } from './workflows.ts'
import { appendRunEvents, subjectOfRow } from './run-events.ts'
import type { RunCause } from './workflow-events.ts'
import { ACTIVE_RUN_STATUSES, CLAIMABLE_RUN_STATUSES, RUN_STATUSES, type RunStatus, runStatusIn, sqlLiterals } from './schema.ts'

const CLAIMABLE = sqlLiterals(CLAIMABLE_RUN_STATUSES)

/** The run is active (queued, running or waiting): `runs_one_active_per_record`'s predicate. */
const isActive = () => runStatusIn(ACTIVE_RUN_STATUSES)
/** The run is running: `runs_lease_idx`'s predicate. */
const isRunning = ({ t }: Dialect) => sql`${t.runs.status} = 'running'`
/** The run may be claimed (queued, or waiting) once its time comes: the claim indexes' predicate. */
const isClaimable = ({ t }: Dialect) => sql`${t.runs.status} IN (${sql.raw(CLAIMABLE)})`
/** Every write after the claim: only the worker holding the lease (placeholders `id`, `owner`) on a running run may make it. */
const isHeld = (d: Dialect) => and(eq(d.t.runs.id, sql.placeholder('id')), eq(d.t.runs.leaseOwner, sql.placeholder('owner')), isRunning(d))

/** How a run was started: by hand (the console or the API), its webhook, its schedule, a record or note event. */
export type RunTrigger = 'manual' | 'webhook' | 'schedule' | 'event'

/** A run as the queue hands it to a worker (the `runs` row, column names as stored). */
export interface RunRow {
  id: string
  workflow_id: number
  workflow_version_id: number
  environment_id: number
  record_id: string
  user_id: number
  token_id: number | null
  trigger: RunTrigger
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
  /** The run this one retries, or null. */
  retry_of: string | null
  /** The `traceparent` of the span that started the run, or null (src/lib/tracing.ts). */
  trace_context: string | null
}

export interface NewRun {
  /**
   * The run's id (UUIDv7), made by the caller; both stores keep it (the id insertRun answers).
   */
  id: string
  workflowId: number
  workflowVersionId: number
  environmentId: number
  recordId: string
  userId: number
  tokenId: number | null
  trigger: RunTrigger
  /** A schedule's run: its tick's fire time (ms); null or absent for other triggers. */
  scheduledFor?: number | null
  /** Trigger `event`: the change that started it (JSON in `runs.cause`). */
  cause?: RunCause | null
  /**
   * When the run is queued (ms): it is due then; its stored `created_at` is in µs (see the insert). A clock to read
   * (`() => clock.now()`) is read by the insert, as late as it can — on SQLite inside its write lock, so a run is never
   * dated before the moment its transaction could write (a number is taken as given: seeding and tests).
   */
  createdAt: number | (() => number)
  /** The first step to run (default 0): a retry resumes at the step its retried run failed at. */
  nextStep?: number
  /** The failed or cancelled run this one retries (`runs_retry_of_idx`: at most one run retries it). */
  retryOf?: string | null
  /** The `traceparent` of the span that started it, when tracing is on (src/lib/tracing.ts `currentTraceparent`). */
  traceContext?: string | null
}

/** The run's cause as stored: JSON, or null. */
const causeOf = (run: Pick<NewRun, 'cause'>): string | null => (run.cause ? JSON.stringify(run.cause) : null)

/** The run's `createdAt` in ms: read from its clock now, or as given. */
const createdAtOf = (run: Pick<NewRun, 'createdAt'>): number => (typeof run.createdAt === 'function' ? run.createdAt() : run.createdAt)

/**
 * The run queued under `id` (the id it was stored under); or the run already active on the record; or, for a retry,
 * the run that already retries the same run (`retriedBy`).
 */
export type InsertResult = { inserted: true; id: string } | { inserted: false; activeRunId: string | null; retriedBy?: string }

export class LeaseLostError extends Error {
  constructor(runId: string) {
    super(`lease on run ${runId} was lost (cancelled or recovered elsewhere)`)
  }
}

// ── Start ─────────────────────────────────────────────────────────────────────

/**
 * Start: inserts a queued run. The partial unique indexes decide whether another run is active on the record, and
 * whether the run a retry retries has been retried already: no check-then-insert race. Call inside the transaction
 * that also writes the trigger's activity entry.
 */
export function* insertRun(run: NewRun): Op<InsertResult> {
  const id = yield* runPlan(insertQueuedRun, run)
  if (id !== null) return { inserted: true, id }
  const retriedBy = run.retryOf == null ? undefined : (yield* findRetryOf(run.retryOf))?.id
  if (retriedBy !== undefined) return { inserted: false, activeRunId: null, retriedBy }
  return { inserted: false, activeRunId: (yield* findActiveRun(run.workflowId, run.recordId))?.id ?? null }
}

const RETRY_OF = statement('queue.retry-of', (d) => d.db.select({ id: d.t.runs.id }).from(d.t.runs).where(eq(d.t.runs.retryOf, sql.placeholder('runId'))))

/** The run that retries `runId` (`runs_retry_of_idx`), if any. */
export function findRetryOf(runId: string) {
  return RETRY_OF.row({ runId })
}

const HOLD_RUN = statement('queue.hold-run', (d) => d.forShare(d.db.select({ id: d.t.runs.id }).from(d.t.runs).where(eq(d.t.runs.id, sql.placeholder('id')))))

/**
 * Holds the run a retry retries until the retry's transaction ends (PostgreSQL: `FOR SHARE`; SQLite's one writer holds
 * it already), so the run history's retention cannot delete it, and its steps with it, before the retry has copied
 * them; a deletion under way is waited for. False when the run is gone.
 */
export function* holdRetriedRun(runId: string): Op<boolean> {
  return (yield* HOLD_RUN.rows({ id: runId })).length > 0
}

const ACTIVE_RUN = statement('queue.active-run', (d) =>
  d.db
    .select({ id: d.t.runs.id })
    .from(d.t.runs)
    .where(and(eq(d.t.runs.workflowId, sql.placeholder('workflowId')), eq(d.t.runs.recordId, sql.placeholder('recordId')), isActive())),
)

/** The run active on the record for the workflow (the one a start conflicts with), if any. */
export function findActiveRun(workflowId: number, recordId: string) {
  return ACTIVE_RUN.row({ workflowId, recordId })
}

function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

// created_at: the trigger's time in µs, or 1 µs after the environment's newest run: strictly increasing per list
// (SQLite's one writer inserts in that order), so `createdAt.lt` pages exactly, and never ahead of the clock below a
// million triggers a second.
const INSERT_RUN = `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
    status, next_step, available_at, attempts, created_at, retry_of, scheduled_for, cause, trace_context)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', ?10, ?9, 0,
    max(?9 * 1000, coalesce((SELECT created_at FROM runs WHERE environment_id = ?4 ORDER BY created_at DESC LIMIT 1), 0) + 1), ?11, ?12, ?13, ?14)`

/**
 * The run, queued: the id it was stored under, or null when the record has an active run of the workflow, when the run
 * it retries has been retried already, or when the id is taken.
 */
const insertQueuedRun = plan({
  sqlite: insertQueuedRunOnSqlite,
  postgres: insertQueuedRunOnPostgres,
  why: "PostgreSQL's run takes a list position the lists' pass dates it by, and a NOTIFY after the commit announces it; SQLite's write lock orders inserts",
})

/** SQLite's: its write lock orders the environment's inserts. */
function insertQueuedRunOnSqlite(db: Db, run: NewRun): string | null {
  try {
    statementOn(db, 'queue.insert', INSERT_RUN).run(
      run.id, run.workflowId, run.workflowVersionId, run.environmentId, run.recordId,
      run.userId, run.tokenId, run.trigger, createdAtOf(run), run.nextStep ?? 0, run.retryOf ?? null, run.scheduledFor ?? null, causeOf(run),
      run.traceContext ?? null,
    )
    return run.id
  } catch (error) {
    if (!isUniqueViolation(error)) throw error
    return null
  }
}

/**
 * PostgreSQL's: the run, queued (its id answered), unless another run of the workflow is active on the record, the run
 * a retry retries has been retried already, or the id is taken (the partial unique indexes and the primary key decide:
 * `ON CONFLICT DO NOTHING`, and null; `insertRun` then names the active run or the retry in a new statement — a new
 * READ COMMITTED snapshot).
 *
 * The runs list orders by `(createdAt, id)` and pages by `createdAt` (DESIGN §3), so within an environment `createdAt`
 * must increase strictly in the list's order. The insert takes no lock: the run draws its list position (a row in
 * `runs_unlisted`, drawn after its transaction took its transaction id) and proposes `max(now, newest its snapshot
 * sees + 1 µs)`, as on SQLite — `now` the database's clock in µs, read right after the draw, when it agrees with the
 * caller's to the second, so that concurrent runs propose their times nearly in the order of their positions. The
 * lists' pass (./postgres/list-watermark.ts) lists the runs in position order, moving the few whose time another run
 * committed meanwhile took, and readers read only listed runs (`Dialect.listed`). The run's id is the caller's UUIDv7
 * and is readable by id at once. One function call (`trellis_queue_run`,
 * drizzle/postgres/0032_runs_listed_by_time.sql): one round trip.
 */
async function insertQueuedRunOnPostgres(db: PgDb, run: NewRun): Promise<string | null> {
  const values = [run.id, run.workflowId, run.workflowVersionId, run.environmentId, run.recordId, run.userId, run.tokenId, run.trigger, createdAtOf(run), run.nextStep ?? 0, run.retryOf ?? null, run.scheduledFor ?? null, causeOf(run), run.traceContext ?? null]
  const queued = (await rawRows<{ id: string | null }>(db, QUEUE_RUN, values))[0]!.id
  if (queued !== null) await notifyOnCommit(db, RUNS_CHANNEL)
  return queued
}

/** The trigger's run, in one call: see `insertQueuedRunOnPostgres`. */
const QUEUE_RUN = `SELECT trellis_queue_run($1, $2::int8, $3::int8, $4::int8, $5, $6::int8, $7::int8, $8, $9::int8, $10::int8, $11, $12::int8, $13, $14) AS id`

/**
 * Tells every instance's executor that runs were queued: SQLite's are this process's, woken by its own writes;
 * PostgreSQL's `NOTIFY trellis_runs` goes to every listener once the handle's transaction committed, and not at all
 * when it rolls back (./postgres/notify.ts: a commit never waits on the cluster's notification lock).
 */
const announceQueuedRuns = plan({
  sqlite: (_db: Db): void => {},
  postgres: (db) => notifyOnCommit(db, RUNS_CHANNEL),
  why: "NOTIFY wakes every instance's executor after the commit; SQLite's executor is this process's, woken by its own writes",
})

// ── Claim ─────────────────────────────────────────────────────────────────────

/**
 * Claims up to `limit` due runs — queued, or waiting with their time come (the wake) — each under a lease: those
 * src/db/claims.ts puts first (fair share between projects, workflow limits), oldest due first in the answer.
 * `concurrency`: the claiming instance's worker count, for the projects' reserve (src/db/claims.ts); none without it.
 *
 * The claim gathers its facts in the op's (write) transaction: each environment's oldest due runs; the runs running;
 * where a workflow's limit holds some of those back, each of the environment's other workflows' oldest ones too; then
 * it starts the runs in `claimOrder`'s order. On SQLite the one writer holds them all until it commits; PostgreSQL's
 * reads and start lock what they must (`readDueRuns`, `startRuns`: plans).
 */
export function* claimRuns(owner: string, now: number, leaseMs: number, limit: number, concurrency = Infinity): Op<RunRow[]> {
  if (limit <= 0) return []
  const due = yield* runPlan(readDueRuns, now, limit)
  if (due.candidates.length === 0) return []
  const facts: ClaimFacts = {
    running: yield* runningRuns(owner),
    startable: due.startable,
    projectCap: Number.isFinite(concurrency) ? projectCap(concurrency, yield* projectsWithWorkflows()) : Infinity,
  }
  const projectOf = new Map(due.candidates.map((run) => [run.environmentId, run.projectId]))
  const widen = new Map(environmentsToWiden(due.candidates, facts).map((environmentId) => [environmentId, projectOf.get(environmentId)!]))
  const widened = widen.size === 0 ? [] : yield* runPlan(readWidenedDueRuns, now, limit, widen, facts)
  const order = claimOrder([...due.candidates, ...widened], facts)
  if (order.length === 0) return []
  const started = yield* runPlan(startRuns, owner, now, leaseMs, order, limit)
  started.sort((a, b) => a.available_at - b.available_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  // A run's first claim starts it (and tells how it was started); a later one (after a wait, a recovery, a give-back) resumes it.
  yield* appendRunEvents(
    started.map((run) => ({
      ...subjectOfRow(run),
      type: run.attempts === 1 ? 'run.started' : 'run.resumed',
      // A run's first claim writes its first event: it was queued without one.
      ...(run.attempts === 1 ? { sequence: 1 } : {}),
      status: 'running',
      data: { attempt: run.attempts, nextStep: run.next_step, ...(run.attempts === 1 ? { trigger: run.trigger, retryOf: run.retry_of } : {}) },
      at: now,
    })),
  )
  return started
}

/** What a claim reads first: the oldest due runs of each environment, and the workflows with a limit it may start. */
export interface DueCandidates {
  candidates: ClaimCandidate[]
  /** ClaimFacts' `startable`: null on SQLite, whose single writer holds every workflow. */
  startable: ReadonlySet<number> | null
}

/** A due run as SQLite's claim walks read it (its project: the environment's, read first). */
interface DueRow {
  id: string
  workflow_id: number
  environment_id: number
  available_at: number
  concurrency_limit: number | null
}

/**
 * SQLite's claim statements: the environments with due runs (few), then each one's oldest due runs and, where a limit
 * holds those back, each of its workflows' (runs_claim_env_idx, runs_claim_workflow_idx: in the index's order, no
 * sort; ties in the order they were queued, as the claim always took them on SQLite), and the start of a run picked.
 * SQLite has no LATERAL join: it walks one environment or workflow at a time.
 */
export const SQLITE_CLAIM = {
  environments: `SELECT e.id, e.project_id FROM environments e
    WHERE EXISTS (SELECT 1 FROM runs r WHERE r.environment_id = e.id AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?)`,
  environmentTop: `SELECT r.id, r.workflow_id, r.environment_id, r.available_at, w.concurrency_limit FROM runs r JOIN workflows w ON w.id = r.workflow_id
    WHERE r.environment_id = ?1 AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?2 ORDER BY r.available_at, r.rowid LIMIT ?3`,
  workflowHeads: `SELECT x.id, x.workflow_id, x.environment_id, x.available_at, h.concurrency_limit FROM (
      SELECT w.concurrency_limit, (SELECT r.rowid FROM runs r WHERE r.workflow_id = w.id AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?2
                                   ORDER BY r.available_at, r.rowid LIMIT 1) AS head
      FROM workflows w JOIN renderings g ON g.id = w.rendering_id WHERE g.environment_id = ?1) h
    JOIN runs x ON x.rowid = h.head`,
  workflowTop: `SELECT r.id, r.workflow_id, r.environment_id, r.available_at, w.concurrency_limit FROM runs r JOIN workflows w ON w.id = r.workflow_id
    WHERE r.workflow_id = ?1 AND r.status IN (${CLAIMABLE}) AND r.available_at <= ?2 ORDER BY r.available_at, r.rowid LIMIT ?3`,
  start: `UPDATE runs SET status = 'running', lease_owner = ?1, lease_expires_at = ?2 + ?3,
      started_at = coalesce(started_at, ?2), attempts = attempts + 1
    WHERE id = ?4 AND status IN (${CLAIMABLE})
    RETURNING id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger", status, next_step,
      available_at, lease_owner, lease_expires_at, attempts, error, created_at, started_at, finished_at, retry_of, trace_context`,
}

/** A SQLite claim statement on the connection behind `db`: all of them prepared together at the first claim, as a hot path's are. */
const claimStatement = (db: Db, key: keyof typeof SQLITE_CLAIM) =>
  prepared(db, 'queue.claim', () => {
    const connection = connectionOf(db)
    return Object.fromEntries(Object.entries(SQLITE_CLAIM).map(([name, text]) => [name, connection.prepare(text)])) as Record<keyof typeof SQLITE_CLAIM, Statement>
  })[key]

/** The due rows as candidates, each with its environment's project. */
const candidatesOf = (rows: unknown[], projectOf: ReadonlyMap<number, number>): ClaimCandidate[] =>
  (rows as DueRow[]).map((r) => ({
    id: r.id, workflowId: r.workflow_id, environmentId: r.environment_id, projectId: projectOf.get(r.environment_id)!, availableAt: r.available_at,
    concurrencyLimit: r.concurrency_limit,
  }))

/** Each environment's oldest due runs, and (PostgreSQL) the workflows with a limit this claim may start. */
const readDueRuns = plan({
  sqlite: readDueRunsOnSqlite,
  postgres: readDueRunsOnPostgres,
  why: 'locks the limited workflows FOR NO KEY UPDATE SKIP LOCKED and reads every environment in one LATERAL join; SQLite has no LATERAL',
})

/** The due runs of the environments to widen (`projectOf`: each one's project), each of their workflows' oldest first. */
const readWidenedDueRuns = plan({
  sqlite: readWidenedDueRunsOnSqlite,
  postgres: readWidenedDueRunsOnPostgres,
  why: "one LATERAL join over the widened environments' workflows; SQLite walks each workflow's claim index",
})

/** Starts the first `limit` runs of `order` that no other claim is starting, under a lease. */
const startRuns = plan({
  sqlite: startRunsOnSqlite,
  postgres: startRunsOnPostgres,
  why: "picks the batch FOR UPDATE SKIP LOCKED so instances split the due runs; SQLite's one writer starts each run picked",
})

/** SQLite's: each environment's `limit` oldest due runs (one per free worker: the rules need no more). */
function readDueRunsOnSqlite(db: Db, now: number, limit: number): DueCandidates {
  const environments = claimStatement(db, 'environments').all(now) as { id: number; project_id: number }[]
  const projectOf = new Map(environments.map((e) => [e.id, e.project_id]))
  const top = claimStatement(db, 'environmentTop')
  return { candidates: environments.flatMap((e) => candidatesOf(top.all(e.id, now, limit), projectOf)), startable: null }
}

/** SQLite's: each workflow's oldest, and the further ones of the workflows src/db/claims.ts `workflowsToReadFurther` names. */
function readWidenedDueRunsOnSqlite(db: Db, now: number, limit: number, projectOf: ReadonlyMap<number, number>, facts: ClaimFacts): ClaimCandidate[] {
  const heads = claimStatement(db, 'workflowHeads')
  const top = claimStatement(db, 'workflowTop')
  return [...projectOf.keys()].flatMap((environmentId) => {
    const first = candidatesOf(heads.all(environmentId, now), projectOf)
    const further = workflowsToReadFurther(first, facts, limit).flatMap((workflowId) => candidatesOf(top.all(workflowId, now, limit), projectOf))
    return [...first, ...further]
  })
}

/** SQLite's: the one writer, so none of them is being started elsewhere. */
function startRunsOnSqlite(db: Db, owner: string, now: number, leaseMs: number, order: readonly string[], limit: number): RunRow[] {
  const start = claimStatement(db, 'start')
  return order.slice(0, limit).flatMap((id) => start.all(owner, now, leaseMs, id) as RunRow[])
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
 * is left to that one (a due run looked up per limited workflow, one index entry each: as an `EXISTS` the planner may
 * read every due run first, when statistics say few are due). Then each environment's oldest due runs
 * (`CANDIDATES_PER_WORKER` per free worker), read without locking. `claimRuns` reads the runs running next: a new
 * READ COMMITTED snapshot, taken after those locks, so every run another claim started under them has committed.
 */
async function readDueRunsOnPostgres(db: PgDb, now: number, limit: number): Promise<DueCandidates> {
  const locked = await rawRows<{ id: number }>(
    db,
    `SELECT id::float8 AS id FROM workflows w
     WHERE concurrency_limit IS NOT NULL
       AND (SELECT 1 FROM runs r WHERE r.workflow_id = w.id AND r.status IN (${CLAIMABLE}) AND r.available_at <= $1 LIMIT 1) IS NOT NULL
     ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`,
    [now],
  )
  const candidates = await dueRuns(db, 'FROM environments e', 'environment_id = e.id', '', [now, limit * CANDIDATES_PER_WORKER])
  return { candidates, startable: new Set(locked.map((w) => w.id)) }
}

/** Where a workflow's limit holds some of an environment's oldest due runs back: each of its workflows' oldest ones. */
function readWidenedDueRunsOnPostgres(db: PgDb, now: number, limit: number, projectOf: ReadonlyMap<number, number>, _facts: ClaimFacts): Promise<ClaimCandidate[]> {
  return dueRuns(
    db,
    'FROM workflows w JOIN renderings g ON g.id = w.rendering_id',
    'workflow_id = w.id',
    'WHERE g.environment_id = ANY($3::int8[])',
    [now, limit * CANDIDATES_PER_WORKER, [...projectOf.keys()]],
  )
}

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
 *
 * Both halves find the runs by primary key alone: with the status and due time in a WHERE, the planner may walk the
 * claim's partial index (runs_claim_idx) instead — every due run read and filtered, when statistics say few are due
 * (2,700 heap pages a claim in the bench's drain). The pick reads whether each run it locked may still start (the
 * row as locked: nothing changes it before the UPDATE); a run another instance started since the read is locked and
 * left unchanged, and this claim starts one fewer.
 */
async function startRunsOnPostgres(db: PgDb, owner: string, now: number, leaseMs: number, order: readonly string[], limit: number): Promise<RunRow[]> {
  const started = await rawRows<RunRow>(
    db,
    `WITH picked AS MATERIALIZED (
       SELECT id AS picked_id, status IN (${CLAIMABLE}) AND available_at <= $2 AS startable FROM runs WHERE id = ANY($4::text[])
       ORDER BY array_position($4::text[], id) LIMIT $5 FOR UPDATE SKIP LOCKED)
     UPDATE runs SET status = 'running', lease_owner = $1, lease_expires_at = $2::bigint + $3::bigint,
       started_at = coalesce(started_at, $2), attempts = attempts + 1
     FROM picked
     WHERE id = picked_id AND startable
     RETURNING ${RUN_COLUMNS}`,
    [owner, now, leaseMs, order, limit],
  )
  noteRunsLocked(db, started.map((run) => run.id))
  return started
}

/**
 * The `$2` oldest runs due at `$1` of each row of `from` (matched by `match`, filtered by `where`), with what the claim
 * weighs them by. In the index's order (runs_claim_env_idx, runs_claim_workflow_idx; ties as the index keeps them,
 * by where each row lies in the table), so the read stops after `$2` index entries whatever the statistics say: ordered
 * by `id` too, a plan made while few runs were due sorted every due run of the environment at each claim (3,000 of
 * them, for a claim of 8, in the bench's drain).
 */
async function dueRuns(db: PgDb, from: string, match: string, where: string, values: unknown[]): Promise<ClaimCandidate[]> {
  const due = await rawRows<{ id: string; workflow_id: number; environment_id: number; available_at: number; project_id: number; concurrency_limit: number | null }>(
    db,
    `SELECT t.id, t.workflow_id::float8 AS workflow_id, t.environment_id::float8 AS environment_id, t.available_at::float8 AS available_at,
       te.project_id::float8 AS project_id, tw.concurrency_limit::float8 AS concurrency_limit
     ${from} CROSS JOIN LATERAL (
       SELECT id, workflow_id, environment_id, available_at FROM runs
       WHERE ${match} AND status IN (${CLAIMABLE}) AND available_at <= $1
       ORDER BY available_at LIMIT $2) t
     JOIN environments te ON te.id = t.environment_id JOIN workflows tw ON tw.id = t.workflow_id
     ${where}`,
    values,
  )
  return due.map((r) => ({
    id: r.id, workflowId: r.workflow_id, environmentId: r.environment_id, projectId: r.project_id, availableAt: r.available_at, concurrencyLimit: r.concurrency_limit,
  }))
}

/** RunRow's columns, the numeric ones as numbers (int8 arrives as a string); SQLite's claim returns the same list. */
const RUN_COLUMNS = `id, workflow_id::float8 AS workflow_id, workflow_version_id::float8 AS workflow_version_id,
  environment_id::float8 AS environment_id, record_id, user_id::float8 AS user_id, token_id::float8 AS token_id, "trigger",
  status, next_step::float8 AS next_step, available_at::float8 AS available_at, lease_owner,
  lease_expires_at::float8 AS lease_expires_at, attempts::float8 AS attempts, error, created_at::float8 AS created_at, started_at::float8 AS started_at, finished_at::float8 AS finished_at,
  retry_of, trace_context`

/**
 * Driven from the running runs (runs_lease_idx), the project read per run: written as a join, SQLite's planner
 * walks every environment's runs through the runs list's index instead (measured: 1 ms a claim with 5,000 finished runs
 * in the environment, a quarter of a drain's statement time, growing with the runs kept). Whether a run is the
 * claiming instance's is decided here (`owner`), which also gives the statement a parameter: Bun sends one without
 * parameters as a simple query, which PostgreSQL parses and plans at every call.
 */
const RUNNING = statement('queue.running', (d) =>
  d.db
    .select({
      workflowId: d.t.runs.workflowId,
      projectId: sql<number>`(${d.db.select({ p: d.t.environments.projectId }).from(d.t.environments).where(eq(d.t.environments.id, d.t.runs.environmentId))})`.mapWith(Number),
      mine: sql<boolean>`coalesce(${d.t.runs.leaseOwner} = ${sql.placeholder('owner')}, false)`.mapWith(Boolean),
    })
    .from(d.t.runs)
    .where(isRunning(d)),
)

/** The runs running on every instance (runs_lease_idx), as the claim's rules read them (`mine`: held by `owner`). */
export function* runningRuns(owner: string | null): Op<RunningRun[]> {
  return yield* RUNNING.rows({ owner })
}

const PROJECTS_WITH_WORKFLOWS = statement('queue.projects-with-workflows', ({ db, t }) => {
  const projects = db
    .selectDistinct({ projectId: t.environments.projectId })
    .from(t.workflows)
    .innerJoin(t.renderings, eq(t.renderings.id, t.workflows.renderingId))
    .innerJoin(t.environments, eq(t.environments.id, t.renderings.environmentId))
    .where(isNotNull(t.workflows.activeVersionId))
    .limit(constantLimit(PROJECTS_COUNTED))
    .as('p')
  // `atMost` (the same bound) is there to be a parameter: Bun sends a statement without one as a simple query, which
  // PostgreSQL parses and plans at every call. In the select list it cannot change the plan, so the generic plan is
  // as cheap as a custom one and PostgreSQL keeps it (as the limit it would not: a custom plan looks cheaper).
  const atMost = sql.placeholder('atMost')
  return db.select({ n: sql<number>`CASE WHEN count(*) < ${atMost} THEN count(*) ELSE ${atMost} END`.mapWith(Number) }).from(projects)
})

/** Projects with a published workflow counted: whether there is more than one is what the reserve needs. */
const PROJECTS_COUNTED = 2

/** Whether more than one project has a published workflow (0, 1 or 2: no more is counted), for the projects' reserve. */
export function* projectsWithWorkflows(): Op<number> {
  return (yield* PROJECTS_WITH_WORKFLOWS.row({ atMost: PROJECTS_COUNTED }))!.n
}

// ── Leases ────────────────────────────────────────────────────────────────────

const RENEW_LEASE = statement('queue.heartbeat', (d) =>
  d.db.update(d.t.runs).set({ leaseExpiresAt: sql`${sql.placeholder('until')}` }).where(isHeld(d)).returning({ id: d.t.runs.id }),
)

/** Lease renewal; false when the run is no longer ours (cancelled, recovered). */
export function* renewLease(runId: string, owner: string, now: number, leaseMs: number): Op<boolean> {
  return (yield* RENEW_LEASE.rows({ id: runId, owner, until: now + leaseMs })).length > 0
}

/** Why running runs went back to the queue (`run.requeued`'s `reason`). */
type RequeueReason = 'lease_expired' | 'restarted' | 'released'

/** Running runs (those `which` picks) back to the queue, due at `now` (placeholder), nobody's; each with its event. */
const requeue = (name: string, which: (d: Dialect) => SQL, reason: RequeueReason) => {
  const write = statement(name, (d) =>
    d.db
      .update(d.t.runs)
      .set({ status: 'queued', leaseOwner: null, leaseExpiresAt: null, availableAt: sql`${sql.placeholder('now')}` })
      .where(and(isRunning(d), which(d)))
      .returning({ id: d.t.runs.id, environment_id: d.t.runs.environmentId, workflow_id: d.t.runs.workflowId, record_id: d.t.runs.recordId }),
  )
  return function* (values: { now: number; owner?: string }): Op<number> {
    const requeued = yield* write.rows(values)
    yield* appendRunEvents(requeued.map((run) => ({ ...subjectOfRow(run), type: 'run.requeued', status: 'queued', data: { reason }, at: values.now })))
    return requeued.length
  }
}

const RECOVER_EXPIRED = requeue('queue.recover', (d) => lt(d.t.runs.leaseExpiresAt, sql.placeholder('now')), 'lease_expired')

/** Recovery: runs whose lease expired (their process died) go back to the queue; they resume at their first step not done. */
export function recoverExpiredRuns(now: number): Op<number> {
  return RECOVER_EXPIRED({ now })
}

const REQUEUE_RUNNING = requeue('queue.requeue-running', () => sql`1 = 1`, 'restarted')

/**
 * Every running run back to the queue, whoever held it: only for a store no other process serves
 * (`recoverRunsAtStart`), where every holder is known dead.
 */
export function requeueRunningRuns(now: number): Op<number> {
  return REQUEUE_RUNNING({ now })
}

/**
 * What a starting executor takes back into the queue at once. A store no other process serves (`Store.servesAlone`:
 * SQLite serving its data directory, under its serving lock): a run still `running` belongs to a process that died,
 * and every one resumes now instead of after its lease (until then its record answers 409). Elsewhere (PostgreSQL, a
 * SQLite store that does not serve) other processes may be alive and holding their runs, so only leases that expired.
 */
export function recoverRunsAtStart(store: Store, now: number): Op<number> {
  return store.servesAlone ? requeueRunningRuns(now) : recoverExpiredRuns(now)
}

const RELEASE_OWNED = requeue('queue.release', (d) => eq(d.t.runs.leaseOwner, sql.placeholder('owner')), 'released')

/** Graceful shutdown: give back what this process holds, announced, so another instance takes them up at once. */
export function* releaseOwnedRuns(owner: string, now: number): Op<number> {
  const released = yield* RELEASE_OWNED({ owner, now })
  if (released > 0) yield* runPlan(announceQueuedRuns)
  return released
}

const NEXT_AVAILABLE = statement('queue.next-available', (d) =>
  d.db
    .select({ at: sql<number | null>`min(${d.t.runs.availableAt})`.mapWith(Number) })
    .from(d.t.runs)
    .where(and(isClaimable(d), sql`${d.t.runs.availableAt} > ${sql.placeholder('after')}`)),
)

/** When the next queued or waiting run becomes due after `after` (ms; by default any, due ones included), or null. */
export function* nextRunAvailableAt(after = -1): Op<number | null> {
  return (yield* NEXT_AVAILABLE.row({ after }))?.at ?? null
}

// ── A worker's transitions ────────────────────────────────────────────────────

/**
 * A lease-guarded write: nothing matched means the lease is gone, and the op's transaction must not commit. Sent
 * without waiting for its answer (./query.ts `send`): a step group's transition is one of its last statements, and
 * the check runs before the COMMIT. From here on the transaction holds the run's row (`holdsRun`).
 */
function* guarded(write: { send(values: Record<string, unknown>, check: (rows: unknown[]) => void, holdsRun: string): Op<void> }, values: { id: string; owner: string } & Record<string, unknown>): Op<void> {
  yield* write.send(
    values,
    (rows) => {
      if (rows.length === 0) throw new LeaseLostError(values.id)
    },
    values.id,
  )
}

const ADVANCE = statement('queue.advance', (d) =>
  d.db.update(d.t.runs).set({ nextStep: sql`${sql.placeholder('next')}` }).where(isHeld(d)).returning({ id: d.t.runs.id }),
)

/** Advance: the steps before `nextStep` are recorded; the run stays running under this owner. */
export function* advanceRun(runId: string, owner: string, nextStep: number): Op<void> {
  yield* guarded(ADVANCE, { id: runId, owner, next: nextStep })
}

const PARK = statement('queue.park', (d) =>
  d.db
    .update(d.t.runs)
    .set({ ...setPlaceholders('nextStep', 'availableAt'), status: 'waiting', leaseOwner: null, leaseExpiresAt: null })
    .where(isHeld(d))
    .returning({ id: d.t.runs.id }),
)

/** Park: a `wait` step gives the run back, `waiting` until `until`, resuming at `nextStep`; no worker holds it. */
export function* parkRun(runId: string, owner: string, nextStep: number, until: number): Op<void> {
  yield* guarded(PARK, { id: runId, owner, nextStep, availableAt: until })
}

/**
 * When a run parked on a task (`parkRun` with it) is due: at no time a clock reaches. It waits, holding no worker,
 * until the task closes and `wakeRunOfTask` makes it due; the claim then resumes it. The greatest time a Date holds.
 */
export const UNTIL_TASK_CLOSES = 8_640_000_000_000_000

const WAKE = statement('queue.wake', (d) =>
  d.db
    .update(d.t.runs)
    .set({ availableAt: sql`${sql.placeholder('now')}` })
    .where(and(eq(d.t.runs.id, sql.placeholder('id')), sql`${d.t.runs.status} = 'waiting'`))
    .returning({ id: d.t.runs.id }),
)

/**
 * Wake: the task a waiting run is parked on closed; the run is due now and every instance's executor is told (in the
 * closing transaction: on commit). False when the run is not waiting (cancelled meanwhile).
 */
export function* wakeRunOfTask(runId: string, now: number): Op<boolean> {
  const woken = (yield* WAKE.rows({ id: runId, now })).length > 0
  if (woken) yield* runPlan(announceQueuedRuns)
  return woken
}

const END = statement('queue.end', (d) =>
  d.db
    .update(d.t.runs)
    .set({
      ...setPlaceholders('status', 'error', 'finishedAt'),
      leaseOwner: null,
      leaseExpiresAt: null,
      nextStep: sql`coalesce(${sql.placeholder('next')}, ${d.t.runs.nextStep})`,
    })
    .where(isHeld(d))
    .returning({ id: d.t.runs.id }),
)

/** The run ended, and its completion callbacks queued in the same transaction (./callbacks.ts). */
function* endRun(runId: string, owner: string, end: { status: 'succeeded' | 'failed'; error: string | null; now: number; nextStep?: number }): Op<void> {
  yield* guarded(END, { id: runId, owner, status: end.status, error: end.error, finishedAt: end.now, next: end.nextStep ?? null })
  yield* queueRunCallbacks({ id: runId }, end.status, end.now)
}

/** Finish: the run succeeded (`nextStep` past its last recorded step, when given); the record is free at once. */
export function finishRun(runId: string, owner: string, now: number, nextStep?: number): Op<void> {
  return endRun(runId, owner, { status: 'succeeded', error: null, now, nextStep })
}

/** Fail: the run failed with `error` (`{code, message, step?}`), `nextStep` at the step that failed when given. */
export function failRun(runId: string, owner: string, now: number, error: unknown, nextStep?: number): Op<void> {
  return endRun(runId, owner, { status: 'failed', error: JSON.stringify(error), now, nextStep })
}

const CANCEL = statement('queue.cancel', (d) =>
  d.db
    .update(d.t.runs)
    .set({ status: 'cancelled', finishedAt: sql`${sql.placeholder('now')}`, leaseOwner: null, leaseExpiresAt: null })
    .where(and(eq(d.t.runs.id, sql.placeholder('id')), isActive()))
    .returning({ id: d.t.runs.id, workflowId: d.t.runs.workflowId }),
)

/**
 * Cancel: ends an active run whoever holds it (its worker loses the lease and stops at its next write), its
 * completion callbacks queued in the same transaction. False when the run is not active (already finished, or unknown).
 */
export function* cancelActiveRun(runId: string, now: number): Op<boolean> {
  const [cancelled] = yield* CANCEL.rows({ id: runId, now })
  if (cancelled === undefined) return false
  yield* queueRunCallbacks(cancelled, 'cancelled', now)
  return true
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

/** The most `run_steps` rows one statement inserts (a group of more steps takes several). */
const STEPS_PER_INSERT = 8
const STEP_COLUMNS = ['runId', 'stepIndex', 'name', 'type', 'status', 'output', 'error', 'startedAt', 'finishedAt'] as const
type StepColumn = (typeof STEP_COLUMNS)[number]

/** `RECORD_STEPS[n - 1]` inserts n rows; row r's placeholders are the columns' names followed by r (`runId0`, …). */
const RECORD_STEPS = Array.from({ length: STEPS_PER_INSERT }, (_, last) =>
  statement(`queue.record-steps.${last + 1}`, ({ db, t }) =>
    db.insert(t.runSteps).values(Array.from({ length: last + 1 }, (_, row) => Object.fromEntries(STEP_COLUMNS.map((column) => [column, sql.placeholder(`${column}${row}`)])) as Record<StepColumn, never>)),
  ),
)

/**
 * A step group's outcomes (`run_steps`), in the transaction of the steps' effects, before the run's transition: one
 * statement for a group of up to STEPS_PER_INSERT steps.
 */
export function* recordStepOutcomes(steps: readonly StepOutcome[]): Op<void> {
  for (let from = 0; from < steps.length; from += STEPS_PER_INSERT) {
    const chunk = steps.slice(from, from + STEPS_PER_INSERT)
    const values: Record<string, unknown> = {}
    chunk.forEach((step, row) => {
      const columns: Record<StepColumn, unknown> = {
        runId: step.runId,
        stepIndex: step.index,
        name: step.name,
        type: step.type,
        status: step.status,
        output: step.output === undefined ? null : JSON.stringify(step.output),
        error: step.error ? JSON.stringify(step.error) : null,
        startedAt: step.startedAt,
        finishedAt: step.finishedAt,
      }
      for (const column of STEP_COLUMNS) values[`${column}${row}`] = columns[column]
    })
    yield* RECORD_STEPS[chunk.length - 1]!.send(values)
  }
}

const CARRY_STEPS = statement('queue.carry-steps', ({ db, t }) =>
  db.insert(t.runSteps).select(
    db
      .select({
        runId: sql<string>`cast(${sql.placeholder('to')} as text)`.as('run_id'),
        stepIndex: t.runSteps.stepIndex,
        name: t.runSteps.name,
        type: t.runSteps.type,
        status: t.runSteps.status,
        attempts: t.runSteps.attempts,
        output: t.runSteps.output,
        error: t.runSteps.error,
        startedAt: t.runSteps.startedAt,
        finishedAt: t.runSteps.finishedAt,
      })
      .from(t.runSteps)
      .where(and(eq(t.runSteps.runId, sql.placeholder('from')), lt(t.runSteps.stepIndex, sql.placeholder('before')))),
  ),
)

/**
 * A retry's steps already done: the retried run's `run_steps` rows before `before` (the step it resumes at), copied
 * as they were recorded to the run `to`, so its answer and its resumption read them like its own.
 */
export function carryRunSteps(from: string, to: string, before: number): Op<void> {
  return CARRY_STEPS.exec({ from, to, before })
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

const RUN_WORKFLOW = statement('queue.run-workflow', ({ db, t }) =>
  joinWorkflowPlace(t, db
    .select({
      workflowName: t.workflows.name,
      collectionId: t.workflows.collectionId,
      teamId: t.renderings.teamId,
      projectId: t.teams.projectId,
      environmentId: t.renderings.environmentId,
      definition: t.workflowVersions.definition,
    })
    .from(t.workflows)
    .$dynamic())
    .innerJoin(t.workflowVersions, eq(t.workflowVersions.id, sql.placeholder('versionId')))
    .where(eq(t.workflows.id, sql.placeholder('workflowId'))),
)

/**
 * The workflow, rendering and version a run was started on; undefined when the workflow is gone. A cached lookup
 * (./lookup-cache.ts): the workflow's place is read from watched tables, and a version's definition never changes
 * once published (a version is only ever inserted, and goes with its workflow), so the cache stays exact. The runs
 * one claim starts share one check of the cache on PostgreSQL instead of a read each.
 */
export function runWorkflow(run: Pick<RunRow, 'workflow_id' | 'workflow_version_id'>): Op<RunWorkflow | undefined> {
  return cached('run-workflow', `${run.workflow_id}:${run.workflow_version_id}`, RUN_WORKFLOW.row({ versionId: run.workflow_version_id, workflowId: run.workflow_id }))
}

// ── Stats ─────────────────────────────────────────────────────────────────────

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

/** Queued runs and waiting runs whose time has come at `now`: what workers could claim (runs_claim_idx). */
const isDue = (d: Dialect, now: number) => and(isClaimable(d), sql`${d.t.runs.availableAt} <= ${now}`)

/** `min(column)` as a number (PostgreSQL answers a bigint's as text), null over no rows. */
const minOf = (column: AnyColumn) => sql<number | null>`min(${column})`.mapWith(Number)

/**
 * Counts for /metrics, read at scrape time (the claim index answers the due part; the status count scans an index;
 * the deferred runs group the due ones by workflow). `executor`: this instance's, for the stats that concern it.
 */
export function* queueStats(now: number, executor: ExecutorIdentity | null = null): Op<QueueStats> {
  const byStatus = Object.fromEntries(RUN_STATUSES.map((status) => [status, 0])) as Record<RunStatus, number>
  for (const row of yield* rows(({ db, t }) => db.select({ status: t.runs.status, n: count() }).from(t.runs).groupBy(t.runs.status))) {
    byStatus[row.status] = row.n
  }
  const due = (yield* rows((d) => d.db.select({ n: count(), oldest: minOf(d.t.runs.availableAt) }).from(d.t.runs).where(isDue(d, now))))[0]!
  const owner = executor?.owner ?? null
  const running = yield* runningRuns(owner)
  const groups = yield* rows((d) =>
    d.db
      .select({ workflowId: d.t.runs.workflowId, projectId: d.t.environments.projectId, concurrencyLimit: d.t.workflows.concurrencyLimit, count: count() })
      .from(d.t.runs)
      .innerJoin(d.t.environments, eq(d.t.environments.id, d.t.runs.environmentId))
      .innerJoin(d.t.workflows, eq(d.t.workflows.id, d.t.runs.workflowId))
      .where(isDue(d, now))
      .groupBy(d.t.runs.workflowId, d.t.environments.projectId, d.t.workflows.concurrencyLimit),
  )
  return {
    byStatus,
    due: due.n,
    oldestDueAt: due.oldest,
    runningByProject: yield* runningByProject(owner),
    deferred: deferredRuns(groups, running, executor?.concurrency ?? 0, yield* projectsWithWorkflows()),
  }
}

/** Every project, by name, with the runs a lease owner holds of it (the running ones through runs_lease_idx). */
function runningByProject(owner: string | null): Op<QueueStats['runningByProject']> {
  return rows((d) => {
    const { db, t } = d
    const held = db
      .select({ projectId: t.environments.projectId, n: count().as('n') })
      .from(t.runs)
      .innerJoin(t.environments, eq(t.environments.id, t.runs.environmentId))
      .where(and(isRunning(d), eq(t.runs.leaseOwner, sql`${owner}`)))
      .groupBy(t.environments.projectId)
      .as('c')
    return db
      .select({ project: t.projects.name, running: sql<number>`coalesce(${held.n}, 0)`.mapWith(Number) })
      .from(t.projects)
      .leftJoin(held, eq(held.projectId, t.projects.id))
      .orderBy(d.byteOrder(t.projects.name))
  })
}

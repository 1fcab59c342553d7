/**
 * Maintenance on either store: the batches of log retention and of the run history's retention, and the run counts
 * /metrics reads. SQLite's own housekeeping (WAL checkpoints, planner statistics) is ./sqlite/upkeep.ts.
 */
import { and, asc, inArray, isNotNull, lt, sql } from 'drizzle-orm'
import { FINISHED_RUN_STATUSES } from '../lib/run-statuses.ts'
import type { Micros } from '../lib/time.ts'
import { listedActivityEntry } from './activity-logs.ts'
import type { Op } from './op.ts'
import { type AuditSigning, recordAnchors } from './audit.ts'
import type { Store } from './store.ts'
import { constantLimit, statement } from './query.ts'
import { runStatusIn } from './schema.ts'
import { type ExecutorIdentity, queueStats, type QueueStats } from './queue.ts'
import { read } from './read.ts'

export type LogTable = 'activity_logs' | 'admin_logs'

const logBatchDelete = (table: LogTable) =>
  statement(`retention.delete.${table}`, (d) => {
    const { db, t } = d
    const log = table === 'activity_logs' ? t.activityLogs : t.adminLogs
    const scopeId = table === 'activity_logs' ? t.activityLogs.environmentId : t.adminLogs.projectId
    // PostgreSQL's activity entries past the log's watermark are not chained yet: never cut before they are.
    const listed = table === 'activity_logs' ? listedActivityEntry(d) : undefined
    const oldest = db.select({ id: log.id }).from(log).where(and(lt(log.createdAt, sql.placeholder('cutoff')), listed)).orderBy(asc(log.id)).limit(sql.placeholder('batch'))
    return db.delete(log).where(inArray(log.id, oldest)).returning({ scopeId, position: log.chainPosition, hash: log.chainHash })
  })
const LOG_BATCH_DELETE = { activity_logs: logBatchDelete('activity_logs'), admin_logs: logBatchDelete('admin_logs') }

/**
 * Deletes up to `batch` entries created before `cutoff` (epoch µs, the unit of log times; oldest ids first); returns
 * how many. In the same transaction, each chain it cut gets a signed anchor at its last deleted entry (docs/audit.md
 * "Anchors"), so what remains verifies from there. Run it in a short write transaction.
 */
export function* deleteLogBatch(table: LogTable, cutoff: Micros, batch: number, signing: AuditSigning, now: number) {
  const deleted = yield* LOG_BATCH_DELETE[table].rows({ cutoff, batch })
  yield* recordAnchors(table === 'activity_logs' ? 'activity' : 'admin', deleted, signing, now)
  return deleted.length
}

/**
 * Finished runs deleted per transaction: a batch of 100 runs of three steps and an idempotency key each takes about
 * 2.5 ms on SQLite, 3 ms on PostgreSQL, from queued to committed (measured: docs/workflows.md "Run history retention"); 500 take
 * 11 ms on SQLite, longer than a write should hold the database.
 */
export const FINISHED_RUNS_PER_BATCH = 100

// The oldest finished runs, walked on `runs_finished_idx` — its predicate repeated as literals: SQLite uses a partial
// index only for a WHERE that repeats it — then deleted by primary key. Their steps and idempotency keys go with them
// (ON DELETE CASCADE: SQLite's connections turn foreign keys on, ./sqlite/open.ts); activity entries keep the run's id.
const FINISHED_RUNS_DELETE = statement('retention.delete.runs', ({ db, t }) => {
  const runs = t.runs
  const finished = runStatusIn(FINISHED_RUN_STATUSES)
  const oldest = db
    .select({ id: runs.id })
    .from(runs)
    .where(and(finished, lt(runs.finishedAt, sql.placeholder('cutoff'))))
    .orderBy(asc(runs.finishedAt))
    .limit(constantLimit(FINISHED_RUNS_PER_BATCH))
  return db.delete(runs).where(inArray(runs.id, oldest)).returning({ id: runs.id })
})

/**
 * Deletes the oldest finished runs (succeeded, failed, cancelled) that finished before `cutoff` (epoch ms), at most
 * FINISHED_RUNS_PER_BATCH, with their steps and idempotency keys; returns how many. An active run is never deleted,
 * whatever its age. Run it in a short write transaction.
 */
export function* deleteFinishedRunBatch(cutoff: number): Op<number> {
  return (yield* FINISHED_RUNS_DELETE.rows({ cutoff })).length
}

/** Deleted records purged per transaction: a short write, as a batch of runs. */
export const DELETED_RECORDS_PER_BATCH = 500

// The records deleted longest ago, walked on `records_deleted_idx` (its predicate repeated, as SQLite requires of a
// partial index), then deleted by primary key. Notes and activity entries name records by their id, not their row:
// they stay, the history of a record that is gone.
const DELETED_RECORDS_PURGE = statement('retention.delete.records', ({ db, t }) => {
  const r = t.records
  const oldest = db
    .select({ id: r.id })
    .from(r)
    .where(and(isNotNull(r.deletedAt), lt(r.deletedAt, sql.placeholder('cutoff'))))
    .orderBy(asc(r.deletedAt))
    .limit(constantLimit(DELETED_RECORDS_PER_BATCH))
  return db.delete(r).where(inArray(r.id, oldest)).returning({ id: r.id })
})

/** Removes for good up to DELETED_RECORDS_PER_BATCH records deleted before `cutoff` (epoch ms); returns how many. */
export function* purgeDeletedRecordBatch(cutoff: number): Op<number> {
  return (yield* DELETED_RECORDS_PURGE.rows({ cutoff })).length
}

/** The run counts /metrics reads at scrape time (see `queueStats`), on the store's connection; `executor`: this instance's. */
export function runQueueStats(store: Store, now: number, executor: ExecutorIdentity | null = null): Promise<QueueStats> {
  return read(store, queueStats(now, executor))
}

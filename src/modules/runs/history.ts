/**
 * The run history's retention (docs/workflows.md "Run history retention"): one job of `serve` deletes the finished runs
 * older than TRELLIS_RUN_RETENTION, with their steps and idempotency keys, and the idempotency keys past their window
 * (./idempotency.ts), and the records deleted longer ago than TRELLIS_RECORD_RETENTION_DAYS (docs/records.md "Deleting
 * records") — each in short batches, each batch a write of its own, so requests interleave between them.
 * Activity and admin logs are not touched: log retention is theirs (../admin-logs/retention.ts).
 */
import { DELETED_RECORDS_PER_BATCH, deleteFinishedRunBatch, FINISHED_RUNS_PER_BATCH, purgeDeletedRecordBatch } from '../../db/maintenance.ts'
import type { Store } from '../../db/store.ts'
import { write } from '../../db/write.ts'
import type { Clock } from '../../lib/clock.ts'
import type { Logger } from '../../lib/logger.ts'
import type { Metrics } from '../../lib/metrics.ts'
import { toIso } from '../../lib/time.ts'
import { pruneIdempotencyKeys } from './idempotency.ts'

/** What the job keeps: finished runs for `runRetentionMs` after they finished (null: forever), keys for their window. */
export interface HistoryRetention {
  runRetentionMs: number | null
  idempotencyKeyWindowMs: number
  /** Days a deleted record stays restorable; purged after. */
  recordRetentionDays: number
}

/** Passes are at most an hour apart (the keys' pruning too), and at least a second. */
const LONGEST_PASS_INTERVAL_MS = 3_600_000
const SHORTEST_PASS_INTERVAL_MS = 1_000

/**
 * Time between two passes: half the run retention, between a second and an hour (an hour when runs are kept forever).
 * A finished run is deleted between `retention` and `retention + interval` after it finished (plus a pass's time).
 */
export function historyPassIntervalMs(runRetentionMs: number | null): number {
  if (runRetentionMs === null) return LONGEST_PASS_INTERVAL_MS
  return Math.min(LONGEST_PASS_INTERVAL_MS, Math.max(SHORTEST_PASS_INTERVAL_MS, Math.floor(runRetentionMs / 2)))
}

/**
 * One pruning of the runs: the runs finished before `cutoff` (epoch ms) that went, in how many batches, and the longest
 * batch's write (queued to committed).
 */
export interface RunsPruned {
  cutoff: number
  runs: number
  batches: number
  longestBatchMs: number
}

/**
 * Deletes every run that finished more than `retentionMs` ago, with its steps and idempotency keys, oldest first, in
 * batches of FINISHED_RUNS_PER_BATCH (one write each); stops between batches once `stopped()` says so.
 */
export async function pruneRunHistory(store: Store, clock: Clock, retentionMs: number, stopped: () => boolean = () => false): Promise<RunsPruned> {
  const pruned: RunsPruned = { cutoff: clock.now() - retentionMs, runs: 0, batches: 0, longestBatchMs: 0 }
  while (!stopped()) {
    const started = performance.now()
    const n = await write(store, () => deleteFinishedRunBatch(pruned.cutoff))
    pruned.longestBatchMs = Math.max(pruned.longestBatchMs, performance.now() - started)
    pruned.batches++
    pruned.runs += n
    if (n < FINISHED_RUNS_PER_BATCH) break
  }
  return pruned
}

/**
 * Removes for good every record deleted more than `retentionDays` ago, in batches (one write each); returns how many.
 * Their notes and activity entries stay: they name the record by its id.
 */
export async function purgeDeletedRecords(store: Store, clock: Clock, retentionDays: number, stopped: () => boolean = () => false): Promise<number> {
  const cutoff = clock.now() - retentionDays * 86_400_000
  let purged = 0
  while (!stopped()) {
    const n = await write(store, () => purgeDeletedRecordBatch(cutoff))
    purged += n
    if (n < DELETED_RECORDS_PER_BATCH) break
  }
  return purged
}

/** The job `serve` runs; `stop()` ends it, resolving once a pass under way has stopped (between two batches). */
export interface HistoryRetentionJob {
  stop(): Promise<void>
}

/**
 * Prunes at start, then `historyPassIntervalMs` after each pass ends (passes never overlap): the runs past their
 * retention, then the expired idempotency keys. A pass that removed something logs one `info` line and adds the runs
 * to `trellis_runs_pruned_total`; a failed pass is logged and the next one tries again.
 */
export function scheduleHistoryRetention(store: Store, clock: Clock, logger: Logger, metrics: Metrics, retention: HistoryRetention): HistoryRetentionJob {
  const intervalMs = historyPassIntervalMs(retention.runRetentionMs)
  let stopped = false
  let timer: ReturnType<typeof setTimeout> | undefined
  const pass = async () => {
    try {
      const runs = retention.runRetentionMs === null ? null : await pruneRunHistory(store, clock, retention.runRetentionMs, () => stopped)
      if (runs !== null) metrics.runsPruned.inc(runs.runs)
      const idempotencyKeys = stopped ? 0 : await pruneIdempotencyKeys(store, clock, retention.idempotencyKeyWindowMs)
      const records = stopped ? 0 : await purgeDeletedRecords(store, clock, retention.recordRetentionDays, () => stopped)
      if ((runs?.runs ?? 0) + idempotencyKeys + records === 0) return
      logger.info('pruned run history', {
        ...(runs === null ? {} : { ...runs, cutoff: toIso(runs.cutoff), longestBatchMs: Math.round(runs.longestBatchMs * 10) / 10 }),
        idempotencyKeys,
        deletedRecordsPurged: records,
        runRetentionSeconds: retention.runRetentionMs === null ? null : retention.runRetentionMs / 1000,
      })
    } catch (error) {
      logger.error('run history pruning failed', { error: (error as Error).message })
    }
  }
  const passThenWait = async (): Promise<void> => {
    await pass()
    if (!stopped) timer = setTimeout(() => (current = passThenWait()), intervalMs)
  }
  let current = passThenWait()
  return {
    stop: () => {
      stopped = true
      clearTimeout(timer)
      return current
    },
  }
}

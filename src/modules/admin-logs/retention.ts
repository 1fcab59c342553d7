/**
 * Log retention (TRELLIS_LOG_RETENTION_DAYS; unset keeps logs forever). Entries older than the cutoff are
 * deleted in small batches (short write locks), and each project gets a `system` admin log entry saying so.
 */
import type { Store } from '../../db/store.ts'
import { allProjectIds } from '../../db/admin-logs.ts'
import type { AuditSigning } from '../../db/audit.ts'
import { deleteLogBatch, type LogTable } from '../../db/maintenance.ts'
import { write } from '../../db/write.ts'
import type { Clock } from '../../lib/clock.ts'
import { type DailyJob, runNowThenDaily } from '../../lib/daily-job.ts'
import type { Logger } from '../../lib/logger.ts'
import { microsFromMillis, toIso } from '../../lib/time.ts'
import { appendAdminLog } from './service.ts'

const BATCH = 5000

export interface PruneResult {
  activityLogs: number
  adminLogs: number
  cutoff: number
}

/** Prunes entries older than `retentionDays`; each chain cut gets a signed anchor (`signing`) in the deleting transaction. */
export async function pruneLogs(store: Store, clock: Clock, retentionDays: number, signing: AuditSigning): Promise<PruneResult> {
  const cutoff = clock.now() - retentionDays * 86_400_000
  const result: PruneResult = { activityLogs: 0, adminLogs: 0, cutoff }
  const batch = (table: LogTable) => write(store, function* () {
    return yield* deleteLogBatch(table, microsFromMillis(cutoff), BATCH, signing, clock.now())
  })
  // PostgreSQL's activity entries are pruned once chained (listed): those committed before now, after the passes.
  await store.awaitListed('activity_logs')
  for (let n = BATCH; n === BATCH; result.activityLogs += n) n = await batch('activity_logs')
  for (let n = BATCH; n === BATCH; result.adminLogs += n) n = await batch('admin_logs')
  if (result.activityLogs + result.adminLogs === 0) return result
  await write(store, function* () {
    for (const projectId of (yield* allProjectIds())) {
      yield* appendAdminLog(clock, {
        projectId,
        type: 'remove',
        resource: 'log-retention',
        initiator: 'system',
        actorId: null,
        newValue: {
          name: `pruned ${result.activityLogs} activity and ${result.adminLogs} admin log entries older than ${toIso(cutoff)} (retention ${retentionDays} days)`,
        },
      })
    }
  })
  return result
}

/** Prunes once at start and then daily at 03:17 (local time); null when retention is off. */
export function scheduleRetention(store: Store, clock: Clock, logger: Logger, retentionDays: number | null, signing: AuditSigning): DailyJob | null {
  if (retentionDays === null) return null
  const run = async () => {
    try {
      const result = await pruneLogs(store, clock, retentionDays, signing)
      if (result.activityLogs + result.adminLogs > 0) logger.info('pruned logs', { ...result, cutoff: toIso(result.cutoff) })
    } catch (error) {
      // A locked or full database, like any failure, waits for the next day's run.
      logger.error('log pruning failed', { error: (error as Error).message })
    }
  }
  return runNowThenDaily('17 3 * * *', run)
}

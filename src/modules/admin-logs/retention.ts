/**
 * Log retention (TRELLIS_LOG_RETENTION_DAYS; unset keeps logs forever). Entries older than the cutoff are
 * deleted in small batches (short write locks), and each project gets a `system` admin log entry saying so.
 */
import { Cron } from 'croner'
import { type Store, writeTransaction } from '../../db/open.ts'
import { deleteLogBatch } from '../../db/maintenance.ts'
import { projects } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import type { Logger } from '../../lib/logger.ts'
import { toIso } from '../../lib/time.ts'
import { appendAdminLog } from './service.ts'

const BATCH = 5000

export interface PruneResult {
  activityLogs: number
  adminLogs: number
  cutoff: number
}

export function pruneLogs(store: Store, clock: Clock, retentionDays: number): PruneResult {
  const cutoff = clock.now() - retentionDays * 86_400_000
  const result: PruneResult = { activityLogs: 0, adminLogs: 0, cutoff }
  for (let n = BATCH; n === BATCH; result.activityLogs += n) n = deleteLogBatch(store.sqlite, 'activity_logs', cutoff, BATCH)
  for (let n = BATCH; n === BATCH; result.adminLogs += n) n = deleteLogBatch(store.sqlite, 'admin_logs', cutoff, BATCH)
  if (result.activityLogs + result.adminLogs === 0) return result
  writeTransaction(store, (tx) => {
    for (const project of tx.select({ id: projects.id }).from(projects).all()) {
      appendAdminLog(tx, clock, {
        projectId: project.id,
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

/** Prunes once at start and then daily at 03:17 (local time) with croner; null when retention is off. */
export function scheduleRetention(store: Store, clock: Clock, logger: Logger, retentionDays: number | null): Cron | null {
  if (retentionDays === null) return null
  const run = () => {
    try {
      const result = pruneLogs(store, clock, retentionDays)
      if (result.activityLogs + result.adminLogs > 0) logger.info('pruned logs', { ...result, cutoff: toIso(result.cutoff) })
    } catch (error) {
      logger.error('log pruning failed', { error: (error as Error).message })
    }
  }
  run()
  return new Cron('17 3 * * *', { protect: true }, run)
}

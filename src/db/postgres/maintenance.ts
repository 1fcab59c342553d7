/**
 * Issue 18: log retention's batch delete as the PostgreSQL twin of src/db/maintenance.ts `deleteLogBatch` (SQLite's
 * own housekeeping — WAL checkpoints, planner statistics, src/db/sqlite/upkeep.ts — has no twin).
 */
import { asc, inArray, lt } from 'drizzle-orm'
import { deleteLogBatch, type LogTable } from '../maintenance.ts'
import type { Micros } from '../../lib/time.ts'
import { activityLogs, adminLogs } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const LOG_TABLES = { activity_logs: activityLogs, admin_logs: adminLogs }

/** Deletes up to `batch` entries created before `cutoff` (oldest ids first); returns how many. */
async function deleteLogBatchOnPostgres(db: PgDb, table: LogTable, cutoff: Micros, batch: number): Promise<number> {
  const log = LOG_TABLES[table]
  const oldest = db.select({ id: log.id }).from(log).where(lt(log.createdAt, cutoff)).orderBy(asc(log.id)).limit(batch)
  return (await db.delete(log).where(inArray(log.id, oldest)).returning({ id: log.id })).length
}

/** The twin of log retention's delete, by the SQLite function it stands for. */
export const MAINTENANCE_TWINS = twins(twin(deleteLogBatch, deleteLogBatchOnPostgres))

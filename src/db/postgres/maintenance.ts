/** PostgreSQL twins of src/db/maintenance.ts's face functions: log retention's batched delete. */
import { deleteLogBatch, type LogTable } from '../maintenance.ts'
import type { Micros } from '../../lib/time.ts'
import { changed } from './queue.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

/** Up to `batch` entries created before `cutoff`, lowest ids first (their record rows go with them: ON DELETE CASCADE). */
const deleteLogBatchOnPostgres = (db: PgDb, table: LogTable, cutoff: Micros, batch: number) =>
  changed(db, `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE created_at < $1 ORDER BY id LIMIT $2)`, [cutoff, batch])

export const MAINTENANCE_TWINS = twins(twin(deleteLogBatch, deleteLogBatchOnPostgres))

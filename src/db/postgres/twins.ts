/**
 * Every twin of the storage face (./twin.ts), by the SQLite function it stands for: what ./op-runner.ts runs an op's
 * calls through. Each module of twins exports its map; this one joins them.
 */
import { runInSavepoint } from '../op.ts'
import { savepointOnPostgres } from './op-runner.ts'
import { MAINTENANCE_TWINS } from './maintenance.ts'
import { QUEUE_TWINS } from './queue.ts'
import { twin, type PgTwins } from './twin.ts'

export const TWINS: PgTwins = new Map([
  twin(runInSavepoint, savepointOnPostgres),
  ...QUEUE_TWINS,
  ...MAINTENANCE_TWINS,
])

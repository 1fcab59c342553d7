/**
 * Every twin of the storage face (./twin.ts), by the SQLite function it stands for: what ./op-runner.ts runs an op's
 * calls through. Each module of twins exports its map; this one joins them.
 */
import { runInSavepoint } from '../op.ts'
import { LOGS_TWINS } from './logs.ts'
import { NOTES_TWINS } from './notes.ts'
import { savepointOnPostgres } from './op-runner.ts'
import { QUEUE_TWINS } from './queue.ts'
import { RECORDS_TWINS } from './records.ts'
import { RUNS_TWINS } from './runs.ts'
import { twin, type PgTwins } from './twin.ts'

export const TWINS: PgTwins = new Map([
  twin(runInSavepoint, savepointOnPostgres),
  ...QUEUE_TWINS,
  ...NOTES_TWINS,
  ...LOGS_TWINS,
  ...RUNS_TWINS,
  ...RECORDS_TWINS,
])

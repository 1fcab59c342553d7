/**
 * Every twin of the storage face (./twin.ts), by the SQLite function it stands for: what ./op-runner.ts runs an op's
 * calls through. Each module of twins exports its map; this one joins them.
 */
import { runInSavepoint } from '../op.ts'
import { savepointOnPostgres } from './op-runner.ts'
import { APPLY_TWINS } from './apply.ts'
import { MAINTENANCE_TWINS } from './maintenance.ts'
import { QUEUE_TWINS } from './queue.ts'
import { SESSIONS_TWINS } from './sessions.ts'
import { TOKENS_TWINS } from './tokens.ts'
import { WEBHOOKS_TWINS } from './webhooks.ts'
import { WORKFLOWS_TWINS } from './workflows.ts'
import { twin, type PgTwins } from './twin.ts'

export const TWINS: PgTwins = new Map([
  twin(runInSavepoint, savepointOnPostgres),
  ...QUEUE_TWINS,
  ...SESSIONS_TWINS, ...TOKENS_TWINS, ...WEBHOOKS_TWINS, ...WORKFLOWS_TWINS, ...APPLY_TWINS, ...MAINTENANCE_TWINS,
])

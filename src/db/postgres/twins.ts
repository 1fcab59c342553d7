/**
 * Every twin of the storage face (./twin.ts), by the SQLite function it stands for: what ./op-runner.ts runs an op's
 * calls through. Each module of twins exports its map; this one joins them.
 */
import { runInSavepoint } from '../op.ts'
import { MEMBERS_TWINS } from './members.ts'
import { savepointOnPostgres } from './op-runner.ts'
import { PROJECTS_TWINS } from './projects.ts'
import { QUEUE_TWINS } from './queue.ts'
import { twin, type PgTwins } from './twin.ts'
import { USERS_TWINS } from './users.ts'

export const TWINS: PgTwins = new Map([
  twin(runInSavepoint, savepointOnPostgres),
  ...QUEUE_TWINS,
  ...PROJECTS_TWINS,
  ...MEMBERS_TWINS,
  ...USERS_TWINS,
])

/**
 * Every twin of the storage face (./twin.ts), by the SQLite function it stands for: what ./op-runner.ts runs an
 * op's calls through (the savepoint's twin is the runner's own). Each module of twins exports its map; this one
 * joins them.
 */
import { APPLY_TWINS } from './apply.ts'
import { runQuery } from '../query.ts'
import { runQueryOnPostgres } from './dialect.ts'
import { LOGS_TWINS } from './logs.ts'
import { MAINTENANCE_TWINS } from './maintenance.ts'
import { MEMBERS_TWINS } from './members.ts'
import { MONOTONIC_TWINS } from './monotonic.ts'
import { NOTES_TWINS } from './notes.ts'
import { PROJECTS_TWINS } from './projects.ts'
import { QUEUE_TWINS } from './queue.ts'
import { SESSIONS_TWINS } from './sessions.ts'
import { SSO_IDENTITIES_TWINS } from './sso-identities.ts'
import { TOKENS_TWINS } from './tokens.ts'
import { twin, type PgTwins } from './twin.ts'
import { USERS_TWINS } from './users.ts'
import { WEBHOOKS_TWINS } from './webhooks.ts'
import { WORKFLOWS_TWINS } from './workflows.ts'

export const TWINS: PgTwins = new Map([
  twin(runQuery, runQueryOnPostgres),
  ...APPLY_TWINS,
  ...LOGS_TWINS,
  ...MAINTENANCE_TWINS,
  ...MEMBERS_TWINS,
  ...MONOTONIC_TWINS,
  ...NOTES_TWINS,
  ...PROJECTS_TWINS,
  ...QUEUE_TWINS,
  ...SESSIONS_TWINS,
  ...SSO_IDENTITIES_TWINS,
  ...TOKENS_TWINS,
  ...USERS_TWINS,
  ...WEBHOOKS_TWINS,
  ...WORKFLOWS_TWINS,
])

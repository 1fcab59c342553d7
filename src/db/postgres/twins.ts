/**
 * Every twin of the storage face (./twin.ts), by the SQLite function it stands for: what ./op-runner.ts runs an
 * op's calls through (the savepoint's twin is the runner's own). Each module of twins exports its map; this one
 * joins them.
 */
import { runQuery } from '../query.ts'
import { runQueryOnPostgres } from './dialect.ts'
import { LOGS_TWINS } from './logs.ts'
import { MONOTONIC_TWINS } from './monotonic.ts'
import { NOTES_TWINS } from './notes.ts'
import { QUEUE_TWINS } from './queue.ts'
import { RULE_LOCK_TWIN } from './rule-locks.ts'
import { TOKENS_TWINS } from './tokens.ts'
import { twin, type PgTwins } from './twin.ts'

export const TWINS: PgTwins = new Map([
  twin(runQuery, runQueryOnPostgres),
  RULE_LOCK_TWIN,
  ...LOGS_TWINS,
  ...MONOTONIC_TWINS,
  ...NOTES_TWINS,
  ...QUEUE_TWINS,
  ...TOKENS_TWINS,
])

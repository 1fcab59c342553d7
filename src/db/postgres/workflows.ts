/**
 * Issue 18: what of workflows' storage (src/db/workflows.ts) differs on PostgreSQL: the trigger target, which SQLite
 * caches per connection (src/db/lookup-cache.ts), is read afresh here, so a webhook change made through any instance
 * applies to every instance's next call.
 */
import { cachedTriggerTarget, readTriggerTarget } from '../workflows.ts'
import { runOpOnPostgres } from './op-runner.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

function triggerTargetOnPostgres(db: PgDb, workflowId: number) {
  return runOpOnPostgres(db, readTriggerTarget(workflowId))
}

/** The twins of the workflows' storage, by the SQLite function they stand for. */
export const WORKFLOWS_TWINS = twins(
  // per-dialect: SQLite caches the trigger target per connection (lookup-cache.ts); PostgreSQL has no cross-instance invalidation, so it reads afresh.
  twin(cachedTriggerTarget, triggerTargetOnPostgres),
)

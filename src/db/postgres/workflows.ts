/**
 * Issue 18: what of workflows' storage (src/db/workflows.ts) differs on PostgreSQL: the trigger target, which SQLite
 * caches per connection (src/db/lookup-cache.ts), is read afresh here, so a webhook change made through any instance
 * applies to every instance's next call.
 */
import { cachedTriggerTarget, type TriggerTarget, triggerTargetQuery } from '../workflows.ts'
import { runQueryOnPostgres } from './dialect.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

async function triggerTargetOnPostgres(db: PgDb, workflowId: number): Promise<TriggerTarget | undefined> {
  return (await runQueryOnPostgres(db, triggerTargetQuery(workflowId))) as TriggerTarget | undefined
}

/** The twins of the workflows' storage, by the SQLite function they stand for. */
export const WORKFLOWS_TWINS = twins(
  // per-dialect: SQLite caches the trigger target per connection (lookup-cache.ts); PostgreSQL has no cross-instance invalidation, so it reads afresh.
  twin(cachedTriggerTarget, triggerTargetOnPostgres),
)

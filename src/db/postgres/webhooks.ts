/** Issue 18: webhook triggers' storage as PostgreSQL twins of src/db/webhooks.ts (one row per workflow). */
import { eq, sql } from 'drizzle-orm'
import { findWebhookTrigger, insertWebhookTrigger, updateWebhookTrigger, type WebhookTrigger, type WebhookTriggerChange } from '../webhooks.ts'
import { webhookTriggers } from './schema.ts'
import { preparedOn } from './prepared.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

async function insertWebhookTriggerOnPostgres(db: PgDb, workflowId: number, now: number): Promise<void> {
  await db.insert(webhookTriggers).values({ workflowId, enabled: false, generation: 1, updatedAt: now })
}

async function findWebhookTriggerOnPostgres(db: PgDb, workflowId: number): Promise<WebhookTrigger | undefined> {
  const query = preparedOn(db, 'webhook-triggers.find', (db) => db.select().from(webhookTriggers).where(eq(webhookTriggers.workflowId, sql.placeholder('workflowId'))))
  return (await query.execute({ workflowId }))[0]
}

async function updateWebhookTriggerOnPostgres(db: PgDb, workflowId: number, change: WebhookTriggerChange, now: number): Promise<WebhookTrigger> {
  const [trigger] = await db
    .update(webhookTriggers)
    .set({ ...change, updatedAt: now })
    .where(eq(webhookTriggers.workflowId, workflowId))
    .returning()
  return trigger!
}

/** The twins of the webhook triggers' storage, by the SQLite function they stand for. */
export const WEBHOOKS_TWINS = twins(
  twin(insertWebhookTrigger, insertWebhookTriggerOnPostgres),
  twin(findWebhookTrigger, findWebhookTriggerOnPostgres),
  twin(updateWebhookTrigger, updateWebhookTriggerOnPostgres),
)

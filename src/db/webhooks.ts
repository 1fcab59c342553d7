/** Webhook triggers' storage: one row per workflow (off by default; disabling pauses, regenerating bumps the generation). */
import { eq } from 'drizzle-orm'
import type { Db } from './open.ts'
import { webhookTriggers } from './schema.ts'

export type WebhookTrigger = typeof webhookTriggers.$inferSelect

export interface WebhookTriggerChange {
  enabled?: boolean
  ratePerMinute?: number | null
  generation?: number
}

/** A new workflow's trigger: disabled, generation 1, the instance's default rate. */
export function insertWebhookTrigger(db: Db, workflowId: number, now: number): void {
  db.insert(webhookTriggers).values({ workflowId, enabled: false, generation: 1, updatedAt: now }).run()
}

export function findWebhookTrigger(db: Db, workflowId: number): WebhookTrigger | undefined {
  return db.select().from(webhookTriggers).where(eq(webhookTriggers.workflowId, workflowId)).get()
}

/** Applies `change` to a workflow's trigger; returns the trigger as it now is. */
export function updateWebhookTrigger(db: Db, workflowId: number, change: WebhookTriggerChange, now: number): WebhookTrigger {
  return db
    .update(webhookTriggers)
    .set({ ...change, updatedAt: now })
    .where(eq(webhookTriggers.workflowId, workflowId))
    .returning()
    .all()[0]!
}

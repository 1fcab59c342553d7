/** Webhook triggers' storage: one row per workflow (off by default; disabling pauses, regenerating bumps the generation). */
import { eq, sql } from 'drizzle-orm'
import type { Op } from './op.ts'
import { exec, row, statement } from './query.ts'
import type { webhookTriggers } from './schema.ts'

export type WebhookTrigger = typeof webhookTriggers.$inferSelect

export interface WebhookTriggerChange {
  enabled?: boolean
  ratePerMinute?: number | null
  generation?: number
}

/** A new workflow's trigger: disabled, generation 1, the instance's default rate. */
export function insertWebhookTrigger(workflowId: number, now: number) {
  return exec(({ db, t }) => db.insert(t.webhookTriggers).values({ workflowId, enabled: false, generation: 1, updatedAt: now }))
}

const WEBHOOK_TRIGGER = statement('webhook-triggers.find', ({ db, t }) =>
  db.select().from(t.webhookTriggers).where(eq(t.webhookTriggers.workflowId, sql.placeholder('workflowId'))),
)

export function findWebhookTrigger(workflowId: number) {
  return WEBHOOK_TRIGGER.row({ workflowId })
}

/** Applies `change` to a workflow's trigger; returns the trigger as it now is. */
export function* updateWebhookTrigger(workflowId: number, change: WebhookTriggerChange, now: number): Op<WebhookTrigger> {
  return (yield* row(({ db, t }) => db.update(t.webhookTriggers).set({ ...change, updatedAt: now }).where(eq(t.webhookTriggers.workflowId, workflowId)).returning()))!
}

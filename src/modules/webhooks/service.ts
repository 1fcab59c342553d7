/** Webhook trigger settings of a workflow: enable (a pause, not a reset), disable, regenerate, rate. */
import { updateWebhookTrigger } from '../../db/webhooks.ts'
import { findTriggerTarget, type TriggerTarget } from '../../db/workflows.ts'
import type { Clock } from '../../lib/clock.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { describeTrigger } from '../workflows/service.ts'
import type { Op } from '../../db/op.ts'

export type WebhookChange = { enabled: boolean } | { ratePerMinute: number | null } | { regenerate: true }

/** Applies one change with its admin log entry; returns the updated target. Call in a write transaction. */
export function* changeWebhook(clock: Clock, target: TriggerTarget, change: WebhookChange, actorId: number | null): Op<TriggerTarget> {
  const before = { enabled: target.webhookEnabled, ratePerMinute: target.webhookRatePerMinute }
  const set =
    'regenerate' in change
      ? { generation: target.webhookGeneration + 1 }
      : 'enabled' in change
        ? { enabled: change.enabled }
        : { ratePerMinute: change.ratePerMinute }
  const unchanged =
    ('enabled' in change && change.enabled === before.enabled) ||
    ('ratePerMinute' in change && change.ratePerMinute === before.ratePerMinute)
  if (unchanged) return target
  yield* updateWebhookTrigger(target.workflowId, set, clock.now())
  const after = (yield* findTriggerTarget(target.workflowId))!
  const describe = (t: TriggerTarget) =>
    `${describeTrigger(t.workflowName, { enabled: t.webhookEnabled, ratePerMinute: t.webhookRatePerMinute })}, URL generation ${t.webhookGeneration}`
  yield* appendAdminLog(clock, {
    projectId: target.projectId,
    type: 'update',
    resource: 'workflow-webhook',
    actorId,
    previousValue: { name: describe(target) },
    newValue: { name: describe(after) },
  })
  return after
}

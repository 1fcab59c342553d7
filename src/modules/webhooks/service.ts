/** Webhook trigger settings of a workflow: enable (a pause, not a reset), disable, regenerate, rate. */
import { updateWebhookTrigger } from '../../db/webhooks.ts'
import { findTriggerTarget, findWorkflowIdByNames, type TriggerTarget } from '../../db/workflows.ts'
import { notFound } from '../../http/errors.ts'
import type { Clock } from '../../lib/clock.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { describeTrigger } from '../workflows/service.ts'
import { webhookUrl } from './url.ts'
import { type Op, op } from '../../db/op.ts'

/** The workflow named by (project, environment, team, workflow), or 404. */
export function* requireWorkflow(projectId: number, environmentName: string, teamName: string, workflowName: string): Op<TriggerTarget> {
  const workflowId = yield* op(findWorkflowIdByNames, { projectId, environment: environmentName, team: teamName, workflow: workflowName })
  const target = workflowId !== undefined ? (yield* op(findTriggerTarget, workflowId)) : undefined
  if (!target) throw notFound(`Workflow ${workflowName} not found for team ${teamName} in ${environmentName}`)
  return target
}

export interface WebhookSettings {
  enabled: boolean
  /** The per-webhook override; null means the instance default. */
  ratePerMinute: number | null
  effectiveRatePerMinute: number
  /** Only while enabled: a disabled webhook has no URL to copy (re-enabling restores the same one). */
  url: string | null
}

export function webhookSettings(target: TriggerTarget, secret: Buffer, baseUrl: string, defaultRate: number): WebhookSettings {
  return {
    enabled: target.webhookEnabled,
    ratePerMinute: target.webhookRatePerMinute,
    effectiveRatePerMinute: target.webhookRatePerMinute ?? defaultRate,
    url: target.webhookEnabled
      ? webhookUrl(secret, baseUrl, { workflowId: target.workflowId, renderingId: target.renderingId, generation: target.webhookGeneration })
      : null,
  }
}

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
  yield* op(updateWebhookTrigger, target.workflowId, set, clock.now())
  const after = (yield* op(findTriggerTarget, target.workflowId))!
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

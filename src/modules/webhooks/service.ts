/** Webhook trigger settings of a workflow: enable (a pause, not a reset), disable, regenerate, rate. */
import { and, eq } from 'drizzle-orm'
import type { Db } from '../../db/open.ts'
import { environments, renderings, teams, webhookTriggers, workflows } from '../../db/schema.ts'
import { notFound } from '../../http/errors.ts'
import type { Clock } from '../../lib/clock.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { findTriggerTarget, type TriggerTarget } from '../runs/service.ts'
import { describeTrigger } from '../workflows/service.ts'
import { webhookUrl } from './url.ts'

/** The workflow named by (project, environment, team, workflow), or 404. */
export function requireWorkflow(db: Db, projectId: number, environmentName: string, teamName: string, workflowName: string): TriggerTarget {
  const row = db
    .select({ id: workflows.id })
    .from(workflows)
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(environments, eq(environments.id, renderings.environmentId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
    .where(
      and(
        eq(environments.projectId, projectId),
        eq(environments.name, environmentName),
        eq(teams.name, teamName),
        eq(workflows.name, workflowName),
      ),
    )
    .get()
  const target = row && findTriggerTarget(db, row.id)
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
export function changeWebhook(db: Db, clock: Clock, target: TriggerTarget, change: WebhookChange, actorId: number | null): TriggerTarget {
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
  db.update(webhookTriggers).set({ ...set, updatedAt: clock.now() }).where(eq(webhookTriggers.workflowId, target.workflowId)).run()
  const after = findTriggerTarget(db, target.workflowId)!
  const describe = (t: TriggerTarget) =>
    `${describeTrigger(t.workflowName, { enabled: t.webhookEnabled, ratePerMinute: t.webhookRatePerMinute })}, URL generation ${t.webhookGeneration}`
  appendAdminLog(db, clock, {
    projectId: target.projectId,
    type: 'update',
    resource: 'workflow-webhook',
    actorId,
    previousValue: { name: describe(target) },
    newValue: { name: describe(after) },
  })
  return after
}

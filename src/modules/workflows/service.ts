/** Publishing workflow definitions: versions, the rendering they belong to, and their webhook trigger row. */
import { and, desc, eq } from 'drizzle-orm'
import { createHash } from 'node:crypto'
import type { Db } from '../../db/open.ts'
import { renderings, webhookTriggers, workflows, workflowVersions } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { canonicalDefinition, type WorkflowDefinition } from './definition.ts'

export interface WorkflowTarget {
  projectId: number
  environmentId: number
  teamId: number
  collectionId: number
}

export type WebhookTrigger = typeof webhookTriggers.$inferSelect

export interface PublishResult {
  outcome: 'created' | 'published' | 'unchanged'
  triggerChanged: boolean
  workflowId: number
  renderingId: number
  version: number
  trigger: WebhookTrigger
}

/** The rendering (environment, team), created on first use. */
export function ensureRendering(db: Db, environmentId: number, teamId: number): number {
  const where = and(eq(renderings.environmentId, environmentId), eq(renderings.teamId, teamId))
  const existing = db.select({ id: renderings.id }).from(renderings).where(where).get()
  if (existing) return existing.id
  return db.insert(renderings).values({ environmentId, teamId }).returning({ id: renderings.id }).all()[0]!.id
}

/**
 * Publishes a definition: a new version when it differs from the active one (canonical JSON, `webhook` excluded),
 * nothing otherwise. Trigger settings given in `definition.webhook` are applied; omitted ones are left alone.
 * Call inside a write transaction.
 */
export function publishWorkflow(
  db: Db,
  clock: Clock,
  target: WorkflowTarget,
  definition: WorkflowDefinition,
  actorId: number | null,
): PublishResult {
  const now = clock.now()
  const renderingId = ensureRendering(db, target.environmentId, target.teamId)
  const canonical = canonicalDefinition(definition)
  const hash = createHash('sha256').update(canonical).digest('hex')

  let workflow = db
    .select()
    .from(workflows)
    .where(and(eq(workflows.renderingId, renderingId), eq(workflows.name, definition.name)))
    .get()
  const created = !workflow
  if (!workflow) {
    workflow = db
      .insert(workflows)
      .values({ renderingId, name: definition.name, collectionId: target.collectionId, createdAt: now, updatedAt: now })
      .returning()
      .all()[0]!
    db.insert(webhookTriggers).values({ workflowId: workflow.id, enabled: false, generation: 1, updatedAt: now }).run()
  }
  const active = workflow.activeVersionId
    ? db.select().from(workflowVersions).where(eq(workflowVersions.id, workflow.activeVersionId)).get()
    : undefined

  let version = active?.version ?? 0
  let outcome: PublishResult['outcome'] = 'unchanged'
  if (!active || active.definitionHash !== hash) {
    const latest = db
      .select({ version: workflowVersions.version })
      .from(workflowVersions)
      .where(eq(workflowVersions.workflowId, workflow.id))
      .orderBy(desc(workflowVersions.version))
      .limit(1)
      .get()
    version = (latest?.version ?? 0) + 1
    const [row] = db
      .insert(workflowVersions)
      .values({ workflowId: workflow.id, version, definition: canonical, definitionHash: hash, publishedBy: actorId, createdAt: now })
      .returning({ id: workflowVersions.id })
      .all()
    db.update(workflows)
      .set({ activeVersionId: row!.id, collectionId: target.collectionId, updatedAt: now })
      .where(eq(workflows.id, workflow.id))
      .run()
    appendAdminLog(db, clock, {
      projectId: target.projectId,
      type: created ? 'add' : 'update',
      resource: 'workflow',
      actorId,
      previousValue: active ? { name: `${definition.name} v${active.version}` } : undefined,
      newValue: { name: `${definition.name} v${version}` },
    })
    outcome = created ? 'created' : 'published'
  }

  const { trigger, changed } = applyTriggerSettings(db, clock, target.projectId, workflow.id, definition, actorId)
  return { outcome, triggerChanged: changed, workflowId: workflow.id, renderingId, version, trigger }
}

function applyTriggerSettings(
  db: Db,
  clock: Clock,
  projectId: number,
  workflowId: number,
  definition: WorkflowDefinition,
  actorId: number | null,
): { trigger: WebhookTrigger; changed: boolean } {
  const current = db.select().from(webhookTriggers).where(eq(webhookTriggers.workflowId, workflowId)).get()!
  const wanted = {
    enabled: definition.webhook?.enabled ?? current.enabled,
    ratePerMinute: definition.webhook?.ratePerMinute ?? current.ratePerMinute,
  }
  if (wanted.enabled === current.enabled && wanted.ratePerMinute === current.ratePerMinute) {
    return { trigger: current, changed: false }
  }
  const [trigger] = db
    .update(webhookTriggers)
    .set({ ...wanted, updatedAt: clock.now() })
    .where(eq(webhookTriggers.workflowId, workflowId))
    .returning()
    .all()
  appendAdminLog(db, clock, {
    projectId,
    type: 'update',
    resource: 'workflow-webhook',
    actorId,
    previousValue: { name: describeTrigger(definition.name, current) },
    newValue: { name: describeTrigger(definition.name, wanted) },
  })
  return { trigger: trigger!, changed: true }
}

/** Admin log values must fit the compatibility document's `{name}` shape: the trigger state as one readable text. */
export function describeTrigger(workflowName: string, trigger: { enabled: boolean; ratePerMinute: number | null }): string {
  const rate = trigger.ratePerMinute === null ? 'default rate' : `${trigger.ratePerMinute}/min`
  return `${workflowName}: webhook ${trigger.enabled ? 'enabled' : 'disabled'}, ${rate}`
}

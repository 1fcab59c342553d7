/** Publishing workflow definitions: versions, the rendering they belong to, and their webhook trigger row. */
import { createHash } from 'node:crypto'
import { findWebhookTrigger, insertWebhookTrigger, updateWebhookTrigger, type WebhookTrigger } from '../../db/webhooks.ts'
import { invalidFields, notFound } from '../../lib/errors.ts'
import {
  anyWorkflowExists,
  ensureRendering,
  findTriggerTarget,
  findWorkflowIdByNames,
  findWorkflowInRendering,
  findWorkflowVersion,
  findNumberedWorkflowVersion,
  insertWorkflow,
  loadWorkflowVersions,
  pageWorkflowVersionIds,
  latestWorkflowVersion,
  listProjectWorkflowPlaces,
  listWorkflowPlaces,
  publishWorkflowVersion,
  type TriggerTarget,
} from '../../db/workflows.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIso } from '../../lib/time.ts'
import { webhookUrl } from '../../lib/webhook-url.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { canReachRendering } from '../directory/projects.ts'
import { collectionFields } from '../records/service.ts'
import { pinnedDefinition, type WorkflowDefinition } from './definition.ts'
import { typedStepProblems } from './typed-steps.ts'
import type { Answer, Op } from '../../db/op.ts'

/** Where workflows live, by names (project, environment, team, collection): the console's links. */
export const workflowPlacesById = listWorkflowPlaces

/** The steps of one published version of a workflow (a run's page lists them all, done or not). */
export function* versionSteps(versionId: number): Op<{ type: string; name?: string }[]> {
  const version = yield* findWorkflowVersion(versionId)
  return version ? (JSON.parse(version.definition) as WorkflowDefinition).steps : []
}

export interface WorkflowTarget {
  projectId: number
  environmentId: number
  teamId: number
  collectionId: number
}

export type { WebhookTrigger }
export { ensureRendering }

export interface PublishResult {
  outcome: 'created' | 'published' | 'unchanged'
  triggerChanged: boolean
  workflowId: number
  renderingId: number
  version: number
  trigger: WebhookTrigger
}

/**
 * Publishes a definition: a new version when it differs from the active one (canonical JSON, `webhook` excluded;
 * stored as typed),
 * nothing otherwise. Trigger settings given in `definition.webhook` are applied; omitted ones are left alone. The steps
 * must agree with the collection's schema (./typed-steps.ts: 400 naming each step's field, under `at`).
 * Call inside a write transaction.
 */
export function* publishWorkflow(
  clock: Clock,
  target: WorkflowTarget,
  definition: WorkflowDefinition,
  actorId: number | null,
  at = '',
): Op<PublishResult> {
  const typed = typedStepProblems(definition.steps, yield* collectionFields(target.collectionId, 'read'), at)
  if (typed.length > 0) throw invalidFields(typed.map((p) => ({ field: p.path, message: p.message })))
  const now = clock.now()
  const renderingId = yield* ensureRendering(target.environmentId, target.teamId)
  const pinned = pinnedDefinition(definition)
  const hash = createHash('sha256').update(pinned.canonical).digest('hex')

  let workflow = yield* findWorkflowInRendering(renderingId, definition.name)
  const created = !workflow
  if (!workflow) {
    workflow = yield* insertWorkflow({ renderingId, name: definition.name, collectionId: target.collectionId, now })
    yield* insertWebhookTrigger(workflow.id, now)
  }
  const active = workflow.activeVersionId ? (yield* findWorkflowVersion(workflow.activeVersionId)) : undefined

  let version = active?.version ?? 0
  let outcome: PublishResult['outcome'] = 'unchanged'
  if (!active || active.definitionHash !== hash) {
    version = (yield* latestWorkflowVersion(workflow.id)) + 1
    yield* publishWorkflowVersion({
      workflowId: workflow.id, version, definition: pinned.text, definitionHash: hash, publishedBy: actorId, collectionId: target.collectionId,
      concurrencyLimit: definition.concurrency ?? null, now,
    })
    yield* appendAdminLog(clock, {
      projectId: target.projectId,
      type: created ? 'add' : 'update',
      resource: 'workflow',
      actorId,
      previousValue: active ? { name: `${definition.name} v${active.version}` } : undefined,
      newValue: { name: `${definition.name} v${version}` },
    })
    outcome = created ? 'created' : 'published'
  }

  const { trigger, changed } = yield* applyTriggerSettings(clock, target.projectId, workflow.id, definition, actorId)
  return { outcome, triggerChanged: changed, workflowId: workflow.id, renderingId, version, trigger }
}

function* applyTriggerSettings(
  clock: Clock,
  projectId: number,
  workflowId: number,
  definition: WorkflowDefinition,
  actorId: number | null,
): Op<{ trigger: WebhookTrigger; changed: boolean }> {
  const current = (yield* findWebhookTrigger(workflowId))!
  const wanted = {
    enabled: definition.webhook?.enabled ?? current.enabled,
    ratePerMinute: definition.webhook?.ratePerMinute ?? current.ratePerMinute,
  }
  if (wanted.enabled === current.enabled && wanted.ratePerMinute === current.ratePerMinute) {
    return { trigger: current, changed: false }
  }
  const trigger = yield* updateWebhookTrigger(workflowId, wanted, clock.now())
  yield* appendAdminLog(clock, {
    projectId,
    type: 'update',
    resource: 'workflow-webhook',
    actorId,
    previousValue: { name: describeTrigger(definition.name, current) },
    newValue: { name: describeTrigger(definition.name, wanted) },
  })
  return { trigger, changed: true }
}

/** The definition a workflow runs now (its active version) and that version's number; 404 when none is published. */
export function* activeDefinition(target: TriggerTarget): Op<{ version: number; definition: WorkflowDefinition }> {
  const active = target.activeVersionId === null ? undefined : yield* findWorkflowVersion(target.activeVersionId)
  if (!active) throw notFound(`Workflow ${target.workflowName} has no published version`)
  return { version: active.version, definition: JSON.parse(active.definition) as WorkflowDefinition }
}

/** Admin log values must fit the compatibility document's `{name}` shape: the trigger state as one readable text. */
export function describeTrigger(workflowName: string, trigger: { enabled: boolean; ratePerMinute: number | null }): string {
  const rate = trigger.ratePerMinute === null ? 'default rate' : `${trigger.ratePerMinute}/min`
  return `${workflowName}: webhook ${trigger.enabled ? 'enabled' : 'disabled'}, ${rate}`
}

/** The trigger target of a workflow id (cached on SQLite: every webhook call reads it). */
export { findTriggerTarget }

/**
 * The workflows of a project (of one environment when named) whose team the user can reach — those the user may
 * start, when published — by environment, team and name.
 */
export function* workflowsReachableBy(userId: number, projectId: number, environmentName?: string) {
  const reach = new Map<number, boolean>()
  const found = []
  for (const workflow of yield* listProjectWorkflowPlaces(projectId)) {
    if (environmentName !== undefined && workflow.environment !== environmentName) continue
    if (!reach.has(workflow.teamId)) reach.set(workflow.teamId, yield* canReachRendering({ userId, projectId, teamId: workflow.teamId }))
    if (reach.get(workflow.teamId)) found.push({ name: workflow.name, environment: workflow.environment, team: workflow.team, collection: workflow.collection, published: workflow.published })
  }
  return found
}

/** The workflow named by (project, environment, team, workflow), or 404. */
export function* requireWorkflow(projectId: number, environmentName: string, teamName: string, workflowName: string): Op<TriggerTarget> {
  const workflowId = yield* findWorkflowIdByNames({ projectId, environment: environmentName, team: teamName, workflow: workflowName })
  const target = workflowId !== undefined ? (yield* findTriggerTarget(workflowId)) : undefined
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

/** Whether the instance has any workflow yet (the console's first-start checklist). */
export function* hasWorkflows(): Op<boolean> {
  return yield* anyWorkflowExists()
}

/** One published version as answers show it: who published it and when, and whether new runs use it. */
export interface WorkflowVersionView {
  version: number
  createdAt: string
  /** Null for a version `trellis apply` published (it acts as no user). */
  publishedBy: { object: 'user'; id: number; username: string; email: string } | null
  active: boolean
}

type VersionRow = Answer<ReturnType<typeof loadWorkflowVersions>>[number]

function versionView(target: TriggerTarget, row: VersionRow): WorkflowVersionView {
  return {
    version: row.version,
    createdAt: toIso(row.createdAt),
    publishedBy: row.userId === null ? null : { object: 'user', id: row.userId, username: row.username!, email: row.email! },
    active: row.id === target.activeVersionId,
  }
}

/** One page of a workflow's versions, newest first (limit + 1 ids fetched: the caller pages them). */
export function pageWorkflowVersions(target: TriggerTarget, beforeVersion: number | undefined, limit: number) {
  return pageWorkflowVersionIds(target.workflowId, beforeVersion, limit)
}

export function* renderWorkflowVersions(target: TriggerTarget, ids: number[]): Op<WorkflowVersionView[]> {
  return ids.length === 0 ? [] : (yield* loadWorkflowVersions(ids)).map((row) => versionView(target, row))
}

/** A version of the workflow with its definition; 404 when it has no version with that number. */
export function* workflowVersion(target: TriggerTarget, version: number): Op<WorkflowVersionView & { definition: WorkflowDefinition }> {
  const found = yield* findNumberedWorkflowVersion(target.workflowId, version)
  const row = found === undefined ? undefined : (yield* loadWorkflowVersions([found.id]))[0]
  if (!found || !row) throw notFound(`Workflow ${target.workflowName} has no version ${version}`)
  return { ...versionView(target, row), definition: JSON.parse(found.definition) as WorkflowDefinition }
}

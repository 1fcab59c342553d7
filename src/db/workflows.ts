/**
 * Workflows' storage: where a workflow lives (the one join workflow → rendering → environment and team, written
 * once in `joinWorkflowPlace`), the trigger target a webhook call or a manual run looks up (prepared: a hot path),
 * renderings, and the versions a publication writes.
 */
import { and, asc, desc, eq, sql } from 'drizzle-orm'
import type { SQLiteSelect } from 'drizzle-orm/sqlite-core'
import type { Db } from './open.ts'
import { allOf } from './pages.ts'
import { cachedLookup } from './lookup-cache.ts'
import { prepared, statementOn } from './prepared.ts'
import { collections, environments, renderings, teams, workflows, workflowVersions } from './schema.ts'

export type WorkflowRow = typeof workflows.$inferSelect
export type WorkflowVersionRow = typeof workflowVersions.$inferSelect

/**
 * Joins where a workflow lives — its rendering, that rendering's environment and team (every workflow has all
 * three) — to a dynamic query that already has `workflows`. The one place this join is written.
 */
export function joinWorkflowPlace<T extends SQLiteSelect>(query: T) {
  return query
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(environments, eq(environments.id, renderings.environmentId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
}

/** A workflow with what a trigger needs to check: its rendering, project, collection and webhook settings. */
export interface TriggerTarget {
  workflowId: number
  workflowName: string
  activeVersionId: number | null
  renderingId: number
  environmentId: number
  teamId: number
  projectId: number
  collectionId: number
  webhookEnabled: boolean
  webhookGeneration: number
  webhookRatePerMinute: number | null
}

const TRIGGER_TARGET = `SELECT w.id AS workflowId, w.name AS workflowName, w.active_version_id AS activeVersionId,
    w.rendering_id AS renderingId, r.environment_id AS environmentId, r.team_id AS teamId, t.project_id AS projectId,
    w.collection_id AS collectionId, h.enabled AS webhookEnabled, h.generation AS webhookGeneration,
    h.rate_per_minute AS webhookRatePerMinute
  FROM workflows w
    JOIN webhook_triggers h ON h.workflow_id = w.id
    JOIN renderings r ON r.id = w.rendering_id
    JOIN teams t ON t.id = r.team_id
  WHERE w.id = ?`

/**
 * The trigger target of a workflow id: every webhook call reads it, so it is prepared once per connection and
 * cached per connection (lookup-cache.ts: a change to the workflow or its webhook applies to the next call).
 */
export function findTriggerTarget(db: Db, workflowId: number): TriggerTarget | undefined {
  return cachedLookup(db, 'trigger-target', workflowId, () => {
    const row = statementOn(db, 'workflows.trigger-target', TRIGGER_TARGET).all(workflowId)[0] as (Omit<TriggerTarget, 'webhookEnabled'> & { webhookEnabled: number }) | undefined
    return row && { ...row, webhookEnabled: row.webhookEnabled === 1 }
  })
}

/** The id of the workflow named by (project, environment, team, workflow) names (prepared: the manual trigger asks). */
export function findWorkflowIdByNames(
  db: Db,
  names: { projectId: number; environment: string; team: string; workflow: string },
): number | undefined {
  return prepared(db, 'workflows.id-by-names', () =>
    joinWorkflowPlace(db.select({ id: workflows.id }).from(workflows).$dynamic())
      .where(
        and(
          eq(environments.projectId, sql.placeholder('projectId')),
          eq(environments.name, sql.placeholder('environment')),
          eq(teams.name, sql.placeholder('team')),
          eq(workflows.name, sql.placeholder('workflow')),
        ),
      )
      .prepare(),
  ).all(names)[0]?.id
}

/** Ids of the environment's workflows called `name` (in one team when given); prepared per shape. */
export function findWorkflowIdsNamed(db: Db, environmentId: number, name: string, teamName?: string): number[] {
  const inTeam = teamName !== undefined
  return prepared(db, `workflows.ids-named.${inTeam ? 'team' : 'any'}`, () =>
    joinWorkflowPlace(db.select({ id: workflows.id }).from(workflows).$dynamic())
      .where(
        allOf([
          eq(renderings.environmentId, sql.placeholder('environmentId')),
          eq(workflows.name, sql.placeholder('name')),
          inTeam ? eq(teams.name, sql.placeholder('teamName')) : undefined,
        ]),
      )
      .prepare(),
  )
    .all({ environmentId, name, teamName })
    .map((r) => r.id)
}

/** The workflows of one rendering (environment, team), by name, with their collection (prepared: a console page). */
export function listRenderingWorkflows(db: Db, environmentId: number, teamId: number) {
  return prepared(db, 'workflows.of-rendering', () =>
    joinWorkflowPlace(
      db
        .select({ id: workflows.id, name: workflows.name, collectionId: workflows.collectionId, collectionName: collections.name, activeVersionId: workflows.activeVersionId })
        .from(workflows)
        .innerJoin(collections, eq(collections.id, workflows.collectionId))
        .$dynamic(),
    )
      .where(and(eq(renderings.environmentId, sql.placeholder('environmentId')), eq(renderings.teamId, sql.placeholder('teamId'))))
      .orderBy(asc(workflows.name))
      .prepare(),
  ).all({ environmentId, teamId })
}

/** Every workflow of a project with the names of its environment and team. */
export function listProjectWorkflowPlaces(db: Db, projectId: number): { name: string; environment: string; team: string }[] {
  const query = db.select({ name: workflows.name, environment: environments.name, team: teams.name }).from(workflows).$dynamic()
  return joinWorkflowPlace(query).where(eq(environments.projectId, projectId)).all()
}

/** The rendering (environment, team), created on first use. */
export function ensureRendering(db: Db, environmentId: number, teamId: number): number {
  const where = and(eq(renderings.environmentId, environmentId), eq(renderings.teamId, teamId))
  const existing = db.select({ id: renderings.id }).from(renderings).where(where).get()
  if (existing) return existing.id
  return db.insert(renderings).values({ environmentId, teamId }).returning({ id: renderings.id }).all()[0]!.id
}

export function findWorkflowInRendering(db: Db, renderingId: number, name: string): WorkflowRow | undefined {
  return db
    .select()
    .from(workflows)
    .where(and(eq(workflows.renderingId, renderingId), eq(workflows.name, name)))
    .get()
}

/** A new workflow (no active version yet). */
export function insertWorkflow(db: Db, input: { renderingId: number; name: string; collectionId: number; now: number }): WorkflowRow {
  return db
    .insert(workflows)
    .values({ renderingId: input.renderingId, name: input.name, collectionId: input.collectionId, createdAt: input.now, updatedAt: input.now })
    .returning()
    .all()[0]!
}

export function findWorkflowVersion(db: Db, versionId: number): WorkflowVersionRow | undefined {
  return db.select().from(workflowVersions).where(eq(workflowVersions.id, versionId)).get()
}

/** The highest version number a workflow has published; 0 when none. */
export function latestWorkflowVersion(db: Db, workflowId: number): number {
  const latest = db
    .select({ version: workflowVersions.version })
    .from(workflowVersions)
    .where(eq(workflowVersions.workflowId, workflowId))
    .orderBy(desc(workflowVersions.version))
    .limit(1)
    .get()
  return latest?.version ?? 0
}

/** What a publication stores: the version, and what the workflow takes from it. */
export interface NewWorkflowVersion {
  workflowId: number
  version: number
  definition: string
  definitionHash: string
  publishedBy: number | null
  collectionId: number
  /** The version's `concurrency` (absent or null: no limit): the claim reads it from the workflow. */
  concurrencyLimit?: number | null
  now: number
}

/** Stores a version and makes it the workflow's active one (with its collection and concurrency limit); returns its id. */
export function publishWorkflowVersion(db: Db, input: NewWorkflowVersion): number {
  const [row] = db
    .insert(workflowVersions)
    .values({
      workflowId: input.workflowId,
      version: input.version,
      definition: input.definition,
      definitionHash: input.definitionHash,
      publishedBy: input.publishedBy,
      createdAt: input.now,
    })
    .returning({ id: workflowVersions.id })
    .all()
  db.update(workflows)
    .set({ activeVersionId: row!.id, collectionId: input.collectionId, concurrencyLimit: input.concurrencyLimit ?? null, updatedAt: input.now })
    .where(eq(workflows.id, input.workflowId))
    .run()
  return row!.id
}

/**
 * Workflows' storage: where a workflow lives (`joinWorkflowPlace`: workflow → rendering → environment and team, for
 * this file's lists), the trigger target a webhook call or a manual run looks up (a statement: a hot path),
 * renderings, and the versions a publication writes. Lists order the same on both stores (names byte by byte:
 * `d.byteOrder`).
 *
 * Two instances publishing the same new workflow (or a new version of one) at once on PostgreSQL: the second's insert
 * meets the first's row in a unique index (23505) and its whole transaction runs again (./postgres/op-runner.ts), now
 * finding the row, as SQLite's single writer would have had it.
 */
import { and, asc, desc, eq, lt, type SQL, sql } from 'drizzle-orm'
import type { SQLiteSelect } from 'drizzle-orm/sqlite-core'
import type { Dialect, Tables } from './dialect.ts'
import { cached } from './lookup-cache.ts'
import type { Op } from './op.ts'
import { constantLimit, exec, inserted, row, rows, statement } from './query.ts'
import type { workflows, workflowVersions } from './schema.ts'

export type WorkflowRow = typeof workflows.$inferSelect
export type WorkflowVersionRow = typeof workflowVersions.$inferSelect

/**
 * Joins where a workflow lives — its rendering, that rendering's environment and team (every workflow has all
 * three) — to a dynamic query that already has `workflows`. The trigger target below, ./runs.ts, ./queue.ts,
 * ./callbacks.ts and the PostgreSQL half of ./queue.ts's claim reads write the same join in their own statements.
 */
export function joinWorkflowPlace<T extends SQLiteSelect>(t: Tables, query: T) {
  return query
    .innerJoin(t.renderings, eq(t.renderings.id, t.workflows.renderingId))
    .innerJoin(t.environments, eq(t.environments.id, t.renderings.environmentId))
    .innerJoin(t.teams, eq(t.teams.id, t.renderings.teamId))
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

const buildTriggerTarget = ({ db, t }: Dialect) =>
  db
    .select({
      workflowId: t.workflows.id,
      workflowName: t.workflows.name,
      activeVersionId: t.workflows.activeVersionId,
      renderingId: t.workflows.renderingId,
      environmentId: t.renderings.environmentId,
      teamId: t.renderings.teamId,
      projectId: t.teams.projectId,
      collectionId: t.workflows.collectionId,
      webhookEnabled: t.webhookTriggers.enabled,
      webhookGeneration: t.webhookTriggers.generation,
      webhookRatePerMinute: t.webhookTriggers.ratePerMinute,
    })
    .from(t.workflows)
    .innerJoin(t.webhookTriggers, eq(t.webhookTriggers.workflowId, t.workflows.id))
    .innerJoin(t.renderings, eq(t.renderings.id, t.workflows.renderingId))
    .innerJoin(t.teams, eq(t.teams.id, t.renderings.teamId))
    .where(eq(t.workflows.id, sql.placeholder('workflowId')))
const TRIGGER_TARGET = statement('workflows.trigger-target', buildTriggerTarget)

/**
 * The trigger target of a workflow id. Every webhook call reads it, so it is cached (lookup-cache.ts: per connection
 * on SQLite, per instance on PostgreSQL; a change to the workflow or its webhook, made through any instance, applies
 * to the next call).
 */
export function findTriggerTarget(workflowId: number): Op<TriggerTarget | undefined> {
  return cached('trigger-target', workflowId, TRIGGER_TARGET.row({ workflowId }))
}

/**
 * The ids of workflows in their place (joined as above) matching `where` (its placeholders filled by the values), in
 * the order of the rendering's team: a statement named `name`.
 */
const workflowIdsWhere = (name: string, where: (t: Tables) => SQL | undefined) =>
  statement(name, ({ db, t }) =>
    joinWorkflowPlace(t, db.select({ id: t.workflows.id }).from(t.workflows).$dynamic())
      .where(where(t))
      .orderBy(asc(t.renderings.teamId)),
  )

const WORKFLOW_ID_BY_NAMES = workflowIdsWhere('workflows.id-by-names', (t) =>
  and(
    eq(t.environments.projectId, sql.placeholder('projectId')),
    eq(t.environments.name, sql.placeholder('environment')),
    eq(t.teams.name, sql.placeholder('team')),
    eq(t.workflows.name, sql.placeholder('workflow')),
  ),
)

/** The id of the workflow named by (project, environment, team, workflow) names (a statement: the manual trigger asks). */
export function* findWorkflowIdByNames(names: { projectId: number; environment: string; team: string; workflow: string }): Op<number | undefined> {
  return (yield* WORKFLOW_ID_BY_NAMES.row(names))?.id
}

const workflowIdsNamed = (inTeam: boolean) =>
  workflowIdsWhere(`workflows.ids-named.${inTeam ? 'team' : 'any'}`, (t) =>
    and(
      eq(t.renderings.environmentId, sql.placeholder('environmentId')),
      eq(t.workflows.name, sql.placeholder('name')),
      inTeam ? eq(t.teams.name, sql.placeholder('teamName')) : undefined,
    ),
  )
const WORKFLOW_IDS_NAMED = { team: workflowIdsNamed(true), any: workflowIdsNamed(false) }

/** Ids of the environment's workflows called `name` (in one team when given), by team; a statement per shape. */
export function* findWorkflowIdsNamed(environmentId: number, name: string, teamName?: string): Op<number[]> {
  const ids = yield* WORKFLOW_IDS_NAMED[teamName === undefined ? 'any' : 'team'].rows({ environmentId, name, teamName })
  return ids.map((r) => r.id)
}

const RENDERING_WORKFLOWS = statement('workflows.of-rendering', ({ db, t, byteOrder }) =>
  joinWorkflowPlace(
    t,
    db
      .select({ id: t.workflows.id, name: t.workflows.name, collectionId: t.workflows.collectionId, collectionName: t.collections.name, activeVersionId: t.workflows.activeVersionId })
      .from(t.workflows)
      .innerJoin(t.collections, eq(t.collections.id, t.workflows.collectionId))
      .$dynamic(),
  )
    .where(and(eq(t.renderings.environmentId, sql.placeholder('environmentId')), eq(t.renderings.teamId, sql.placeholder('teamId'))))
    .orderBy(byteOrder(t.workflows.name)),
)

/** The workflows of one rendering (environment, team), by name, with their collection (a statement: a console page). */
export function listRenderingWorkflows(environmentId: number, teamId: number) {
  return RENDERING_WORKFLOWS.rows({ environmentId, teamId })
}

/**
 * Every workflow of a project with the names of its environment, team and collection, its team's id and whether it
 * has an active version: by environment name, the rendering's team, then workflow name.
 */
export function listProjectWorkflowPlaces(
  projectId: number,
): Op<{ name: string; environment: string; team: string; teamId: number; collection: string; published: boolean }[]> {
  return rows(({ db, t, byteOrder }) =>
    joinWorkflowPlace(
      t,
      db
        .select({
          name: t.workflows.name,
          environment: t.environments.name,
          team: t.teams.name,
          teamId: t.teams.id,
          collection: t.collections.name,
          published: sql<boolean>`${t.workflows.activeVersionId} IS NOT NULL`.mapWith(Boolean),
        })
        .from(t.workflows)
        .innerJoin(t.collections, eq(t.collections.id, t.workflows.collectionId))
        .$dynamic(),
    )
      .where(eq(t.environments.projectId, projectId))
      .orderBy(byteOrder(t.environments.name), asc(t.renderings.teamId), byteOrder(t.workflows.name)),
  )
}

/**
 * The rendering (environment, team), created on first use. Looked up first (a conflicting insert would use up an id
 * of PostgreSQL's sequence); there, an insert that meets a rendering another transaction just made waits for it and
 * then finds it.
 */
export function* ensureRendering(environmentId: number, teamId: number): Op<number> {
  const existing = () =>
    row(({ db, t }) => db.select({ id: t.renderings.id }).from(t.renderings).where(and(eq(t.renderings.environmentId, environmentId), eq(t.renderings.teamId, teamId))))
  const found = yield* existing()
  if (found) return found.id
  const made = yield* row(({ db, t }) => db.insert(t.renderings).values({ environmentId, teamId }).onConflictDoNothing().returning({ id: t.renderings.id }))
  return made?.id ?? (yield* existing())!.id
}

export function findWorkflowInRendering(renderingId: number, name: string) {
  return row(({ db, t }) => db.select().from(t.workflows).where(and(eq(t.workflows.renderingId, renderingId), eq(t.workflows.name, name))))
}

/** A new workflow (no active version yet). */
/** Whether any workflow exists on the instance (the console's first-start checklist). */
export function* anyWorkflowExists(): Op<boolean> {
  return (yield* row(({ db, t }) => db.select({ id: t.workflows.id }).from(t.workflows).limit(constantLimit(1)))) !== undefined
}

export function insertWorkflow(input: { renderingId: number; name: string; collectionId: number; now: number }): Op<WorkflowRow> {
  const { renderingId, name, collectionId, now } = input
  return inserted(row(({ db, t }) => db.insert(t.workflows).values({ renderingId, name, collectionId, createdAt: now, updatedAt: now }).returning()), 'workflow')
}

const WORKFLOW_VERSION = statement('workflow-versions.find', ({ db, t }) => db.select().from(t.workflowVersions).where(eq(t.workflowVersions.id, sql.placeholder('id'))))

export function findWorkflowVersion(versionId: number) {
  return WORKFLOW_VERSION.row({ id: versionId })
}

/** The highest version number a workflow has published; 0 when none. */
export function* latestWorkflowVersion(workflowId: number): Op<number> {
  const latest = yield* row(({ db, t }) =>
    db
      .select({ version: t.workflowVersions.version })
      .from(t.workflowVersions)
      .where(eq(t.workflowVersions.workflowId, workflowId))
      .orderBy(desc(t.workflowVersions.version))
      .limit(constantLimit(1)),
  )
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
export function* publishWorkflowVersion(input: NewWorkflowVersion): Op<number> {
  const { workflowId, version, definition, definitionHash, publishedBy, collectionId, now } = input
  const { id } = yield* inserted(
    row(({ db, t }) =>
      db.insert(t.workflowVersions).values({ workflowId, version, definition, definitionHash, publishedBy, createdAt: now }).returning({ id: t.workflowVersions.id }),
    ),
    'workflow version',
  )
  yield* exec(({ db, t }) =>
    db
      .update(t.workflows)
      .set({ activeVersionId: id, collectionId, concurrencyLimit: input.concurrencyLimit ?? null, updatedAt: now })
      .where(eq(t.workflows.id, workflowId)),
  )
  return id
}

const VERSION_PAGE = statement('workflow-versions.page', ({ db, t }) =>
  db
    .select({ id: t.workflowVersions.id })
    .from(t.workflowVersions)
    .where(and(eq(t.workflowVersions.workflowId, sql.placeholder('workflowId')), lt(t.workflowVersions.version, sql.placeholder('beforeVersion'))))
    .orderBy(desc(t.workflowVersions.version))
    .limit(sql.placeholder('limit')),
)

/**
 * One page of a workflow's version ids, newest first (limit + 1 of them); with `beforeVersion`, only older versions.
 * Walks the (workflow, version) unique index: no sort, however many versions.
 */
export function* pageWorkflowVersionIds(workflowId: number, beforeVersion: number | undefined, limit: number): Op<number[]> {
  const page = yield* VERSION_PAGE.rows({ workflowId, beforeVersion: beforeVersion ?? Number.MAX_SAFE_INTEGER, limit: limit + 1 })
  return page.map((r) => r.id)
}

const VERSIONS_TO_RENDER = statement('workflow-versions.render', ({ db, t, inJsonArray }) =>
  db
    .select({
      id: t.workflowVersions.id,
      version: t.workflowVersions.version,
      createdAt: t.workflowVersions.createdAt,
      userId: t.users.id,
      username: t.users.username,
      email: t.users.email,
    })
    .from(t.workflowVersions)
    .leftJoin(t.users, eq(t.users.id, t.workflowVersions.publishedBy))
    .where(inJsonArray(t.workflowVersions.id, 'ids', 'integer'))
    .orderBy(desc(t.workflowVersions.id)),
)

/** The versions `ids` with who published them (null: `trellis apply`), newest first; not their definitions. */
export function loadWorkflowVersions(ids: number[]) {
  return VERSIONS_TO_RENDER.rows({ ids: JSON.stringify(ids) })
}

const VERSION_NUMBERED = statement('workflow-versions.by-number', ({ db, t }) =>
  db
    .select({ id: t.workflowVersions.id, definition: t.workflowVersions.definition })
    .from(t.workflowVersions)
    .where(and(eq(t.workflowVersions.workflowId, sql.placeholder('workflowId')), eq(t.workflowVersions.version, sql.placeholder('version')))),
)

/** The id and definition (canonical JSON) of a workflow's version numbered `version`, if it was published. */
export function findNumberedWorkflowVersion(workflowId: number, version: number) {
  return VERSION_NUMBERED.row({ workflowId, version })
}

const workflowPlaces = (by: 'ids' | 'environment') =>
  statement(`workflows.places.${by}`, ({ db, t, inJsonArray }) =>
    joinWorkflowPlace(
      t,
      db
        .select({ id: t.workflows.id, name: t.workflows.name, project: t.projects.name, environment: t.environments.name, team: t.teams.name, collection: t.collections.name })
        .from(t.workflows)
        .innerJoin(t.collections, eq(t.collections.id, t.workflows.collectionId))
        .$dynamic(),
    )
      .innerJoin(t.projects, eq(t.projects.id, t.environments.projectId))
      .where(by === 'ids' ? inJsonArray(t.workflows.id, 'ids', 'integer') : eq(t.environments.id, sql.placeholder('environmentId'))),
  )
const WORKFLOW_PLACES = { ids: workflowPlaces('ids'), environment: workflowPlaces('environment') }

export type WorkflowPlaceRow = { id: number; name: string; project: string; environment: string; team: string; collection: string }

/** Where workflows live, by names (project, environment, team, their collection): these ones, or an environment's. */
export function listWorkflowPlaces(which: { ids: number[] } | { environmentId: number }): Op<WorkflowPlaceRow[]> {
  return 'ids' in which ? WORKFLOW_PLACES.ids.rows({ ids: JSON.stringify(which.ids) }) : WORKFLOW_PLACES.environment.rows({ environmentId: which.environmentId })
}

/**
 * Issue 18: workflows' storage as PostgreSQL twins of src/db/workflows.ts — where a workflow lives, its trigger
 * target, renderings and the versions a publication writes. SQLite caches the trigger target per connection
 * (src/db/lookup-cache.ts); here it is a plain query, so a webhook change made through any instance applies to every
 * instance's next call. Lists order as SQLite's plans do (names byte-wise: ./byte-order.ts).
 *
 * Two instances publishing the same new workflow (or a new version of one) at once: the second's insert meets the
 * first's row in a unique index (23505) and its whole transaction runs again (./op-runner.ts), now finding the row,
 * as SQLite's single writer would have had it.
 */
import { and, asc, desc, eq, type SQL, sql } from 'drizzle-orm'
import type { PgSelect } from 'drizzle-orm/pg-core'
import {
  ensureRendering,
  findTriggerTarget,
  findWorkflowIdByNames,
  findWorkflowIdsNamed,
  findWorkflowInRendering,
  findWorkflowVersion,
  insertWorkflow,
  latestWorkflowVersion,
  type NewWorkflowVersion,
  listProjectWorkflowPlaces,
  listRenderingWorkflows,
  publishWorkflowVersion,
  type TriggerTarget,
  type WorkflowRow,
  type WorkflowVersionRow,
} from '../workflows.ts'
import { byteOrder } from './byte-order.ts'
import { collections, environments, renderings, teams, webhookTriggers, workflows, workflowVersions } from './schema.ts'
import { preparedOn } from './prepared.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

/** The join workflow → rendering → environment and team (src/db/workflows.ts `joinWorkflowPlace`), on PostgreSQL. */
function joinWorkflowPlaceOnPostgres<T extends PgSelect>(query: T) {
  return query
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(environments, eq(environments.id, renderings.environmentId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
}

/**
 * The ids of workflows in their place (joined as above) matching `where` (compiled once under `key`, its
 * placeholders filled from `values`), in SQLite's plan order (rendering's team).
 */
async function workflowIdsWhere(db: PgDb, key: string, where: () => SQL | undefined, values: Record<string, unknown>): Promise<number[]> {
  const query = preparedOn(db, key, (db) =>
    joinWorkflowPlaceOnPostgres(db.select({ id: workflows.id }).from(workflows).$dynamic())
      .where(where())
      .orderBy(asc(renderings.teamId)),
  )
  return (await query.execute(values)).map((r) => r.id)
}

async function findTriggerTargetOnPostgres(db: PgDb, workflowId: number): Promise<TriggerTarget | undefined> {
  const [row] = await preparedOn(db, 'workflows.trigger-target', (db) => db
    .select({
      workflowId: workflows.id,
      workflowName: workflows.name,
      activeVersionId: workflows.activeVersionId,
      renderingId: workflows.renderingId,
      environmentId: renderings.environmentId,
      teamId: renderings.teamId,
      projectId: teams.projectId,
      collectionId: workflows.collectionId,
      webhookEnabled: webhookTriggers.enabled,
      webhookGeneration: webhookTriggers.generation,
      webhookRatePerMinute: webhookTriggers.ratePerMinute,
    })
    .from(workflows)
    .innerJoin(webhookTriggers, eq(webhookTriggers.workflowId, workflows.id))
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(teams, eq(teams.id, renderings.teamId))
    .where(eq(workflows.id, sql.placeholder('workflowId'))),
  ).execute({ workflowId })
  return row
}

async function findWorkflowIdByNamesOnPostgres(
  db: PgDb,
  names: { projectId: number; environment: string; team: string; workflow: string },
): Promise<number | undefined> {
  const where = () =>
    and(
      eq(environments.projectId, sql.placeholder('projectId')),
      eq(environments.name, sql.placeholder('environment')),
      eq(teams.name, sql.placeholder('team')),
      eq(workflows.name, sql.placeholder('workflow')),
    )
  return (await workflowIdsWhere(db, 'workflows.id-by-names', where, names))[0]
}

function findWorkflowIdsNamedOnPostgres(db: PgDb, environmentId: number, name: string, teamName?: string): Promise<number[]> {
  const where = () =>
    and(
      eq(renderings.environmentId, sql.placeholder('environmentId')),
      eq(workflows.name, sql.placeholder('name')),
      teamName === undefined ? undefined : eq(teams.name, sql.placeholder('teamName')),
    )
  return workflowIdsWhere(db, `workflows.ids-named${teamName === undefined ? '' : '.in-team'}`, where, { environmentId, name, teamName })
}

function listRenderingWorkflowsOnPostgres(db: PgDb, environmentId: number, teamId: number): Promise<ReturnType<typeof listRenderingWorkflows>> {
  return joinWorkflowPlaceOnPostgres(
    db
      .select({ id: workflows.id, name: workflows.name, collectionId: workflows.collectionId, collectionName: collections.name, activeVersionId: workflows.activeVersionId })
      .from(workflows)
      .innerJoin(collections, eq(collections.id, workflows.collectionId))
      .$dynamic(),
  )
    .where(and(eq(renderings.environmentId, environmentId), eq(renderings.teamId, teamId)))
    .orderBy(byteOrder(workflows.name))
}

/** In SQLite's plan order: by environment name, then the rendering's team, then workflow name. */
function listProjectWorkflowPlacesOnPostgres(db: PgDb, projectId: number): Promise<{ name: string; environment: string; team: string }[]> {
  return joinWorkflowPlaceOnPostgres(db.select({ name: workflows.name, environment: environments.name, team: teams.name }).from(workflows).$dynamic())
    .where(eq(environments.projectId, projectId))
    .orderBy(byteOrder(environments.name), asc(renderings.teamId), byteOrder(workflows.name))
}

/**
 * The rendering (environment, team), created on first use. Looked up first (a conflicting insert would use up an id
 * of the sequence); an insert that meets a rendering another transaction just made waits for it and then finds it.
 */
async function ensureRenderingOnPostgres(db: PgDb, environmentId: number, teamId: number): Promise<number> {
  const existing = async () =>
    (await db.select({ id: renderings.id }).from(renderings).where(and(eq(renderings.environmentId, environmentId), eq(renderings.teamId, teamId))))[0]?.id
  const found = await existing()
  if (found !== undefined) return found
  const [inserted] = await db.insert(renderings).values({ environmentId, teamId }).onConflictDoNothing().returning({ id: renderings.id })
  return inserted?.id ?? (await existing())!
}

async function findWorkflowInRenderingOnPostgres(db: PgDb, renderingId: number, name: string): Promise<WorkflowRow | undefined> {
  return (await db.select().from(workflows).where(and(eq(workflows.renderingId, renderingId), eq(workflows.name, name))))[0]
}

async function insertWorkflowOnPostgres(db: PgDb, input: { renderingId: number; name: string; collectionId: number; now: number }): Promise<WorkflowRow> {
  const [row] = await db
    .insert(workflows)
    .values({ renderingId: input.renderingId, name: input.name, collectionId: input.collectionId, createdAt: input.now, updatedAt: input.now })
    .returning()
  return row!
}

async function findWorkflowVersionOnPostgres(db: PgDb, versionId: number): Promise<WorkflowVersionRow | undefined> {
  const query = preparedOn(db, 'workflow-versions.find', (db) => db.select().from(workflowVersions).where(eq(workflowVersions.id, sql.placeholder('id'))))
  return (await query.execute({ id: versionId }))[0]
}

async function latestWorkflowVersionOnPostgres(db: PgDb, workflowId: number): Promise<number> {
  const [latest] = await db
    .select({ version: workflowVersions.version })
    .from(workflowVersions)
    .where(eq(workflowVersions.workflowId, workflowId))
    .orderBy(desc(workflowVersions.version))
    .limit(1)
  return latest?.version ?? 0
}

async function publishWorkflowVersionOnPostgres(db: PgDb, input: NewWorkflowVersion): Promise<number> {
  const [row] = await db
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
  await db
    .update(workflows)
    .set({ activeVersionId: row!.id, collectionId: input.collectionId, concurrencyLimit: input.concurrencyLimit ?? null, updatedAt: input.now })
    .where(eq(workflows.id, input.workflowId))
  return row!.id
}

/** The twins of the workflows' storage, by the SQLite function they stand for. */
export const WORKFLOWS_TWINS = twins(
  twin(findTriggerTarget, findTriggerTargetOnPostgres),
  twin(findWorkflowIdByNames, findWorkflowIdByNamesOnPostgres),
  twin(findWorkflowIdsNamed, findWorkflowIdsNamedOnPostgres),
  twin(listRenderingWorkflows, listRenderingWorkflowsOnPostgres),
  twin(listProjectWorkflowPlaces, listProjectWorkflowPlacesOnPostgres),
  twin(ensureRendering, ensureRenderingOnPostgres),
  twin(findWorkflowInRendering, findWorkflowInRenderingOnPostgres),
  twin(insertWorkflow, insertWorkflowOnPostgres),
  twin(findWorkflowVersion, findWorkflowVersionOnPostgres),
  twin(latestWorkflowVersion, latestWorkflowVersionOnPostgres),
  twin(publishWorkflowVersion, publishWorkflowVersionOnPostgres),
)

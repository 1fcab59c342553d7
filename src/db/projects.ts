/**
 * The projects domain's storage: projects and their parts (environments, teams, collections) found by their
 * case-sensitive names, created and renamed, and the collection permissions of teams. The lookups every request
 * makes (`findProjectByName` — the CLI's too —, `findEnvironmentByName`, `findCollectionPermission`) are
 * statements; the first two are also cached (lookup-cache.ts: per connection on SQLite, per instance on PostgreSQL),
 * and a rename made through another instance is seen at once. Lists ordered by a name sort in byte order on
 * both stores (`d.byteOrder`). Name rules, conflicts and admin log entries stay in the projects services.
 */
import { and, eq, exists, sql } from 'drizzle-orm'
import type { Tables } from './dialect.ts'
import { cached } from './lookup-cache.ts'
import type { Op } from './op.ts'
import { constantLimit, exec, inserted, row, rows, statement } from './query.ts'
import type { collectionPermissions, collections, environments, projects, teams } from './schema.ts'

export type Project = typeof projects.$inferSelect
export type Environment = typeof environments.$inferSelect
export type Team = typeof teams.$inferSelect
export type Collection = typeof collections.$inferSelect
export type CollectionPermission = typeof collectionPermissions.$inferSelect

/** The parts of a project that have a name of their own within it. */
export type ProjectPart = 'environment' | 'team' | 'collection'
const partTable = (t: Tables, part: ProjectPart) => ({ environment: t.environments, team: t.teams, collection: t.collections })[part]

/** The project's part in `table` with this exact name, as placeholders `projectId` and `name`. */
const named = (table: ReturnType<typeof partTable>) => and(eq(table.projectId, sql.placeholder('projectId')), eq(table.name, sql.placeholder('name')))

const PROJECT_BY_NAME = statement('projects.by-name', ({ db, t }) => db.select().from(t.projects).where(eq(t.projects.name, sql.placeholder('name'))).limit(constantLimit(1)))

/** The project with this exact (case-sensitive) name; cached per SQLite connection (lookup-cache.ts). */
export function findProjectByName(name: string): Op<Project | undefined> {
  return cached('project-by-name', name, PROJECT_BY_NAME.row({ name }))
}

const ENVIRONMENT_BY_NAME = statement('environments.by-name', ({ db, t }) => db.select().from(t.environments).where(named(t.environments)).limit(constantLimit(1)))

/** The project's environment with this exact name; cached per SQLite connection (lookup-cache.ts). */
export function findEnvironmentByName(projectId: number, name: string): Op<Environment | undefined> {
  return cached('environment-by-name', `${projectId}/${name}`, ENVIRONMENT_BY_NAME.row({ projectId, name }))
}

const TEAM_BY_NAME = statement('teams.by-name', ({ db, t }) => db.select().from(t.teams).where(named(t.teams)).limit(constantLimit(1)))

/** The project's team with this exact name (a statement: note writes ask). */
export function findTeamByName(projectId: number, name: string) {
  return TEAM_BY_NAME.row({ projectId, name })
}

const COLLECTION_BY_NAME = statement('collections.by-name', ({ db, t }) => db.select().from(t.collections).where(named(t.collections)).limit(constantLimit(1)))

/** The project's collection with this exact name (a statement: note writes ask). */
export function findCollectionByName(projectId: number, name: string) {
  return COLLECTION_BY_NAME.row({ projectId, name })
}

/** Every project, by name. */
export function allProjectsByName() {
  return rows(({ db, t, byteOrder }) => db.select().from(t.projects).orderBy(byteOrder(t.projects.name)))
}

export function* anyProjectExists(): Op<boolean> {
  return (yield* row(({ db, t }) => db.select({ id: t.projects.id }).from(t.projects).limit(constantLimit(1)))) !== undefined
}

/** Whether some project has an environment, a team and a collection (the console's first-start checklist). */
export function* anyProjectWithParts(): Op<boolean> {
  const found = yield* row(({ db, t }) => {
    const some = (table: typeof t.environments | typeof t.teams | typeof t.collections) =>
      exists(db.select({ one: sql`1` }).from(table).where(eq(table.projectId, t.projects.id)))
    return db
      .select({ id: t.projects.id })
      .from(t.projects)
      .where(and(some(t.environments), some(t.teams), some(t.collections)))
      .limit(constantLimit(1))
  })
  return found !== undefined
}

export function insertProject(project: { name: string; sso: boolean; createdAt: number }) {
  return inserted(
    row(({ db, t }) => db.insert(t.projects).values(project).returning()),
    'project',
  )
}

export function updateProject(projectId: number, change: Partial<Pick<Project, 'name' | 'sso'>>) {
  return exec(({ db, t }) => db.update(t.projects).set(change).where(eq(t.projects.id, projectId)))
}

const partByName = (part: ProjectPart) =>
  statement(`${part}.part-by-name`, ({ db, t }) => {
    const table = partTable(t, part)
    return db.select({ id: table.id, name: table.name }).from(table).where(named(table)).limit(constantLimit(1))
  })
const PART_BY_NAME = { environment: partByName('environment'), team: partByName('team'), collection: partByName('collection') }

export function findPartByName(part: ProjectPart, projectId: number, name: string) {
  return PART_BY_NAME[part].row({ projectId, name })
}

/** Adds a part; returns its id. */
export function* insertPart(part: ProjectPart, values: { projectId: number; name: string; createdAt: number }): Op<number> {
  const added = yield* inserted(
    row(({ db, t }) => {
      const table = partTable(t, part)
      return db.insert(table).values(values).returning({ id: table.id })
    }),
    part,
  )
  return added.id
}

export function renamePart(part: ProjectPart, id: number, name: string) {
  return exec(({ db, t }) => {
    const table = partTable(t, part)
    return db.update(table).set({ name }).where(eq(table.id, id))
  })
}

const COLLECTION_PERMISSION = statement('collection-permissions.of-team', ({ db, t }) =>
  db
    .select()
    .from(t.collectionPermissions)
    .where(and(eq(t.collectionPermissions.collectionId, sql.placeholder('collectionId')), eq(t.collectionPermissions.teamId, sql.placeholder('teamId'))))
    .limit(constantLimit(1)),
)

/** The team's stored permission on the collection (none: the default). A statement: record access asks per request. */
export function findCollectionPermission(collectionId: number, teamId: number) {
  return COLLECTION_PERMISSION.row({ collectionId, teamId })
}

/** Stores the team's permission on the collection (a new row, or the existing one changed). */
export function writeCollectionPermission(permission: { collectionId: number; teamId: number; canRead: boolean; canEdit: boolean }, exists: boolean) {
  const { collectionId, teamId, ...change } = permission
  return exec(({ db, t }) =>
    exists
      ? db
          .update(t.collectionPermissions)
          .set(change)
          .where(and(eq(t.collectionPermissions.collectionId, collectionId), eq(t.collectionPermissions.teamId, teamId)))
      : db.insert(t.collectionPermissions).values(permission),
  )
}

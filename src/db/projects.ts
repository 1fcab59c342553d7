/**
 * The projects domain's storage: projects and their parts (environments, teams, collections) found by their
 * case-sensitive names, created and renamed, and the collection permissions of teams. The lookups every request
 * makes (`findProjectByName` — the CLI's too —, `findEnvironmentByName`, `findCollectionPermission`) are
 * prepared once per connection. Name rules, conflicts and admin log entries stay in the projects services.
 */
import { and, asc, eq, sql } from 'drizzle-orm'
import type { Db } from './open.ts'
import { cachedLookup } from './lookup-cache.ts'
import { prepared } from './prepared.ts'
import { collectionPermissions, collections, environments, projects, teams } from './schema.ts'

export type Project = typeof projects.$inferSelect
export type Environment = typeof environments.$inferSelect
export type Team = typeof teams.$inferSelect
export type Collection = typeof collections.$inferSelect
export type CollectionPermission = typeof collectionPermissions.$inferSelect

/** The project with this exact (case-sensitive) name; cached per connection (lookup-cache.ts). */
export function findProjectByName(db: Db, name: string): Project | undefined {
  return cachedLookup(db, 'project-by-name', name, () =>
    prepared(db, 'projects.by-name', () => db.select().from(projects).where(eq(projects.name, sql.placeholder('name'))).prepare()).all({ name })[0],
  )
}

/** The project's environment with this exact name; cached per connection (lookup-cache.ts). */
export function findEnvironmentByName(db: Db, projectId: number, name: string): Environment | undefined {
  return cachedLookup(db, 'environment-by-name', `${projectId}/${name}`, () =>
    prepared(db, 'environments.by-name', () =>
      db
        .select()
        .from(environments)
        .where(and(eq(environments.projectId, sql.placeholder('projectId')), eq(environments.name, sql.placeholder('name'))))
        .prepare(),
    ).all({ projectId, name })[0],
  )
}

/** The project's team with this exact name (prepared: note writes ask). */
export function findTeamByName(db: Db, projectId: number, name: string): Team | undefined {
  return prepared(db, 'teams.by-name', () =>
    db.select().from(teams).where(and(eq(teams.projectId, sql.placeholder('projectId')), eq(teams.name, sql.placeholder('name')))).prepare(),
  ).all({ projectId, name })[0]
}

/** The project's collection with this exact name (prepared: note writes ask). */
export function findCollectionByName(db: Db, projectId: number, name: string): Collection | undefined {
  return prepared(db, 'collections.by-name', () =>
    db
      .select()
      .from(collections)
      .where(and(eq(collections.projectId, sql.placeholder('projectId')), eq(collections.name, sql.placeholder('name'))))
      .prepare(),
  ).all({ projectId, name })[0]
}

/** Every project, by name. */
export function allProjectsByName(db: Db): Project[] {
  return db.select().from(projects).orderBy(asc(projects.name)).all()
}

export function anyProjectExists(db: Db): boolean {
  return db.select({ id: projects.id }).from(projects).limit(1).all().length > 0
}

export function insertProject(db: Db, row: { name: string; sso: boolean; createdAt: number }): Project {
  const [project] = db.insert(projects).values(row).returning().all()
  if (!project) throw new Error('project insert returned no row')
  return project
}

export function updateProject(db: Db, projectId: number, change: Partial<Pick<Project, 'name' | 'sso'>>): void {
  db.update(projects).set(change).where(eq(projects.id, projectId)).run()
}

/** The parts of a project that have a name of their own within it. */
export type ProjectPart = 'environment' | 'team' | 'collection'
const PART_TABLES = { environment: environments, team: teams, collection: collections } as const

export function findPartByName(db: Db, part: ProjectPart, projectId: number, name: string): { id: number; name: string } | undefined {
  const table = PART_TABLES[part]
  return db.select({ id: table.id, name: table.name }).from(table).where(and(eq(table.projectId, projectId), eq(table.name, name))).get()
}

/** Adds a part; returns its id. */
export function insertPart(db: Db, part: ProjectPart, row: { projectId: number; name: string; createdAt: number }): number {
  const table = PART_TABLES[part]
  const [inserted] = db.insert(table).values(row).returning({ id: table.id }).all()
  if (!inserted) throw new Error(`${part} insert returned no row`)
  return inserted.id
}

export function renamePart(db: Db, part: ProjectPart, id: number, name: string): void {
  const table = PART_TABLES[part]
  db.update(table).set({ name }).where(eq(table.id, id)).run()
}

/** The team's stored permission on the collection (none: the default). Prepared: record access asks per request. */
export function findCollectionPermission(db: Db, collectionId: number, teamId: number): CollectionPermission | undefined {
  return prepared(db, 'collection-permissions.of-team', () =>
    db
      .select()
      .from(collectionPermissions)
      .where(and(eq(collectionPermissions.collectionId, sql.placeholder('collectionId')), eq(collectionPermissions.teamId, sql.placeholder('teamId'))))
      .prepare(),
  ).all({ collectionId, teamId })[0]
}

/** Stores the team's permission on the collection (a new row, or the existing one changed). */
export function writeCollectionPermission(
  db: Db,
  row: { collectionId: number; teamId: number; canRead: boolean; canEdit: boolean },
  exists: boolean,
): void {
  const { collectionId, teamId, ...permission } = row
  if (exists) {
    db.update(collectionPermissions)
      .set(permission)
      .where(and(eq(collectionPermissions.collectionId, collectionId), eq(collectionPermissions.teamId, teamId)))
      .run()
  } else {
    db.insert(collectionPermissions).values(row).run()
  }
}

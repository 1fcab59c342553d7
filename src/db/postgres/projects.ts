/**
 * Issue 18: the projects domain's storage (src/db/projects.ts) as PostgreSQL twins — projects and their parts found
 * by their case-sensitive names, created and renamed, and the collection permissions of teams. The SQLite lookups'
 * per-connection cache (src/db/lookup-cache.ts) has no twin: every instance asks the database, so a rename made by
 * another instance is seen at once. Lists ordered by a name sort in byte order (`byteOrder`), as SQLite's BINARY
 * collation does, whatever the cluster's locale.
 */
import { and, eq, sql } from 'drizzle-orm'
import {
  allProjectsByName,
  anyProjectExists,
  type CollectionPermission,
  findCollectionByName,
  findCollectionPermission,
  findEnvironmentByName,
  findPartByName,
  findProjectByName,
  findTeamByName,
  insertPart,
  insertProject,
  type Project,
  type ProjectPart,
  renamePart,
  updateProject,
  writeCollectionPermission,
} from '../projects.ts'
import { byteOrder } from './byte-order.ts'
import { preparedOn } from './prepared.ts'
import { firstRow, insertedRow } from './rows.ts'
import { collectionPermissions, collections, environments, projects, teams } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const PART_TABLES = { environment: environments, team: teams, collection: collections } as const

const findProjectByNameOnPostgres = (db: PgDb, name: string) =>
  firstRow(preparedOn(db, 'projects.by-name', (db) => db.select().from(projects).where(eq(projects.name, sql.placeholder('name'))).limit(1)).execute({ name }))

/** The project's part in `table` with this exact name (placeholders `projectId`, `name`). */
const named = (table: (typeof PART_TABLES)[ProjectPart]) => and(eq(table.projectId, sql.placeholder('projectId')), eq(table.name, sql.placeholder('name')))

const findEnvironmentByNameOnPostgres = (db: PgDb, projectId: number, name: string) =>
  firstRow(preparedOn(db, 'environments.by-name', (db) => db.select().from(environments).where(named(environments)).limit(1)).execute({ projectId, name }))

const findTeamByNameOnPostgres = (db: PgDb, projectId: number, name: string) =>
  firstRow(preparedOn(db, 'teams.by-name', (db) => db.select().from(teams).where(named(teams)).limit(1)).execute({ projectId, name }))

const findCollectionByNameOnPostgres = (db: PgDb, projectId: number, name: string) =>
  firstRow(preparedOn(db, 'collections.by-name', (db) => db.select().from(collections).where(named(collections)).limit(1)).execute({ projectId, name }))

const allProjectsByNameOnPostgres = (db: PgDb) => db.select().from(projects).orderBy(byteOrder(projects.name))

const anyProjectExistsOnPostgres = async (db: PgDb) => (await db.select({ id: projects.id }).from(projects).limit(1)).length > 0

const insertProjectOnPostgres = (db: PgDb, row: { name: string; sso: boolean; createdAt: number }): Promise<Project> =>
  insertedRow(db.insert(projects).values(row).returning(), 'project')

const updateProjectOnPostgres = async (db: PgDb, projectId: number, change: Partial<Pick<Project, 'name' | 'sso'>>) => {
  await db.update(projects).set(change).where(eq(projects.id, projectId))
}

const findPartByNameOnPostgres = (db: PgDb, part: ProjectPart, projectId: number, name: string) => {
  const table = PART_TABLES[part]
  return firstRow(
    preparedOn(db, `${part}.part-by-name`, (db) => db.select({ id: table.id, name: table.name }).from(table).where(named(table)).limit(1)).execute({ projectId, name }),
  )
}

const insertPartOnPostgres = async (db: PgDb, part: ProjectPart, row: { projectId: number; name: string; createdAt: number }) => {
  const table = PART_TABLES[part]
  return (await insertedRow(db.insert(table).values(row).returning({ id: table.id }), part)).id
}

const renamePartOnPostgres = async (db: PgDb, part: ProjectPart, id: number, name: string) => {
  const table = PART_TABLES[part]
  await db.update(table).set({ name }).where(eq(table.id, id))
}

const permissionOf = (collectionId: number, teamId: number) =>
  and(eq(collectionPermissions.collectionId, collectionId), eq(collectionPermissions.teamId, teamId))

const findCollectionPermissionOnPostgres = (db: PgDb, collectionId: number, teamId: number): Promise<CollectionPermission | undefined> =>
  firstRow(
    preparedOn(db, 'collection-permissions.find', (db) =>
      db
        .select()
        .from(collectionPermissions)
        .where(and(eq(collectionPermissions.collectionId, sql.placeholder('collectionId')), eq(collectionPermissions.teamId, sql.placeholder('teamId'))))
        .limit(1),
    ).execute({ collectionId, teamId }),
  )

const writeCollectionPermissionOnPostgres = async (
  db: PgDb,
  row: { collectionId: number; teamId: number; canRead: boolean; canEdit: boolean },
  exists: boolean,
) => {
  const { collectionId, teamId, ...permission } = row
  if (exists) await db.update(collectionPermissions).set(permission).where(permissionOf(collectionId, teamId))
  else await db.insert(collectionPermissions).values(row)
}

/** The twins of the projects domain's storage, by the SQLite function they stand for. */
export const PROJECTS_TWINS = twins(
  twin(findProjectByName, findProjectByNameOnPostgres),
  twin(findEnvironmentByName, findEnvironmentByNameOnPostgres),
  twin(findTeamByName, findTeamByNameOnPostgres),
  twin(findCollectionByName, findCollectionByNameOnPostgres),
  twin(allProjectsByName, allProjectsByNameOnPostgres),
  twin(anyProjectExists, anyProjectExistsOnPostgres),
  twin(insertProject, insertProjectOnPostgres),
  twin(updateProject, updateProjectOnPostgres),
  twin(findPartByName, findPartByNameOnPostgres),
  twin(insertPart, insertPartOnPostgres),
  twin(renamePart, renamePartOnPostgres),
  twin(findCollectionPermission, findCollectionPermissionOnPostgres),
  twin(writeCollectionPermission, writeCollectionPermissionOnPostgres),
)

/** Looking up projects and environments by their case-sensitive names (404 `not_found` after authentication). */
import { and, asc, eq, sql } from 'drizzle-orm'
import type { Db } from '../../db/open.ts'
import { prepared } from '../../db/prepared.ts'
import { collectionPermissions, collections, environments, type PermissionLevel, projectMembers, projects, teamMembers, teams, users } from '../../db/schema.ts'
import { normalizeEmail } from '../users/view.ts'
import { notFound } from '../../http/errors.ts'

export type Project = typeof projects.$inferSelect
export type Environment = typeof environments.$inferSelect

/** The project with this exact (case-sensitive) name: the one lookup of a project by name (API, apply, CLI). */
export function findProjectByName(db: Db, name: string): Project | undefined {
  return prepared(db, 'projects.by-name', () =>
    db.select().from(projects).where(eq(projects.name, sql.placeholder('name'))).prepare(),
  ).all({ name })[0]
}

/** The project with this name, else 404 `not_found`. */
export function requireProject(db: Db, name: string): Project {
  const project = findProjectByName(db, name)
  if (!project) throw notFound(`Project ${name} not found`)
  return project
}

export function requireEnvironment(db: Db, projectName: string, environmentName: string): { project: Project; environment: Environment } {
  const project = requireProject(db, projectName)
  const environment = prepared(db, 'environments.by-name', () =>
    db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, sql.placeholder('projectId')), eq(environments.name, sql.placeholder('name'))))
      .prepare(),
  ).all({ projectId: project.id, name: environmentName })[0]
  if (!environment) throw notFound(`Environment ${environmentName} not found in project ${projectName}`)
  return { project, environment }
}

export function findTeam(db: Db, projectId: number, name: string) {
  return db.select().from(teams).where(and(eq(teams.projectId, projectId), eq(teams.name, name))).get()
}

export function findCollection(db: Db, projectId: number, name: string) {
  return db.select().from(collections).where(and(eq(collections.projectId, projectId), eq(collections.name, name))).get()
}

/**
 * What a user may do with a collection's records as seen by a team (the rendering), read at call time:
 * project admins may do everything; other members need to belong to the team, whose collection
 * permissions apply (default: read and edit). Deactivated users and non-members may do nothing.
 */
export function collectionAccess(
  db: Db,
  input: { userId: number; projectId: number; teamId: number; collectionId: number },
): { read: boolean; edit: boolean } {
  const none = { read: false, edit: false }
  const user = prepared(db, 'users.disabled-at', () =>
    db.select({ disabledAt: users.disabledAt }).from(users).where(eq(users.id, sql.placeholder('id'))).prepare(),
  ).all({ id: input.userId })[0]
  if (!user || user.disabledAt !== null) return none
  const role = roleIn(db, input.projectId, input.userId)
  if (role === 'admin') return { read: true, edit: true }
  if (!role || !isTeamMember(db, input.teamId, input.userId)) return none
  const permission = prepared(db, 'collection-permissions.of-team', () =>
    db
      .select()
      .from(collectionPermissions)
      .where(and(eq(collectionPermissions.collectionId, sql.placeholder('collectionId')), eq(collectionPermissions.teamId, sql.placeholder('teamId'))))
      .prepare(),
  ).all({ collectionId: input.collectionId, teamId: input.teamId })[0]
  const read = permission?.canRead ?? true
  return { read, edit: read && (permission?.canEdit ?? true) }
}

/** A user can reach a rendering when they are a project admin or a member of its team. */
export function canReachRendering(db: Db, input: { userId: number; projectId: number; teamId: number }): boolean {
  const role = roleIn(db, input.projectId, input.userId)
  return role === 'admin' || (role !== null && isTeamMember(db, input.teamId, input.userId))
}

/** The projects a user is a member of, by name, with the user's permission level in each. */
export function projectsOf(db: Db, userId: number): { name: string; role: PermissionLevel }[] {
  return db
    .select({ name: projects.name, role: projectMembers.role })
    .from(projectMembers)
    .innerJoin(projects, eq(projects.id, projectMembers.projectId))
    .where(eq(projectMembers.userId, userId))
    .orderBy(asc(projects.name))
    .all()
}

/** The user's permission level in the project now, or null when not a member. */
export function roleIn(db: Db, projectId: number, userId: number): PermissionLevel | null {
  const statement = prepared(db, 'project-members.role', () =>
    db
      .select({ role: projectMembers.role })
      .from(projectMembers)
      .where(and(eq(projectMembers.projectId, sql.placeholder('projectId')), eq(projectMembers.userId, sql.placeholder('userId'))))
      .prepare(),
  )
  return statement.all({ projectId, userId })[0]?.role ?? null
}

function isTeamMember(db: Db, teamId: number, userId: number): boolean {
  const statement = prepared(db, 'team-members.exists', () =>
    db
      .select({ teamId: teamMembers.teamId })
      .from(teamMembers)
      .where(and(eq(teamMembers.teamId, sql.placeholder('teamId')), eq(teamMembers.userId, sql.placeholder('userId'))))
      .prepare(),
  )
  return statement.all({ teamId, userId }).length > 0
}

/**
 * The name filters shared by the notes and activity-log lists, resolved to ids. Returns null when a name
 * matches nothing (the page is then empty, not an error — as for any filter that matches no row).
 */
export function resolveNameFilters(
  db: Db,
  projectId: number,
  filters: { userEmail?: string; userId?: number; teamName?: string; collectionName?: string },
): { userId?: number; teamId?: number; collectionId?: number } | null {
  let userId = filters.userId
  if (filters.userEmail !== undefined) {
    const user = db.select({ id: users.id }).from(users).where(eq(users.email, normalizeEmail(filters.userEmail))).get()
    if (!user || (userId !== undefined && userId !== user.id)) return null
    userId = user.id
  }
  const team = filters.teamName === undefined ? undefined : findTeam(db, projectId, filters.teamName)
  if (filters.teamName !== undefined && !team) return null
  const collection = filters.collectionName === undefined ? undefined : findCollection(db, projectId, filters.collectionName)
  if (filters.collectionName !== undefined && !collection) return null
  return { userId, teamId: team?.id, collectionId: collection?.id }
}

/** Every project of the instance, by name (the instance administrators' page). */
export function listProjects(db: Db): Project[] {
  return db.select().from(projects).orderBy(asc(projects.name)).all()
}

/** A project's members with their permission level and teams, by email (the settings page). */
export function projectPeople(db: Db, projectId: number): { id: number; email: string; role: PermissionLevel; teams: string[] }[] {
  const members = db
    .select({ id: users.id, email: users.email, role: projectMembers.role })
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(eq(projectMembers.projectId, projectId))
    .orderBy(asc(users.email))
    .all()
  const memberships = db
    .select({ userId: teamMembers.userId, team: teams.name })
    .from(teamMembers)
    .innerJoin(teams, eq(teams.id, teamMembers.teamId))
    .where(eq(teams.projectId, projectId))
    .orderBy(asc(teams.name))
    .all()
  return members.map((m) => ({ ...m, teams: memberships.filter((t) => t.userId === m.id).map((t) => t.team) }))
}

/** Whether the instance has any project (an empty one shows the first-start checklist). */
export function hasProjects(db: Db): boolean {
  return db.select({ id: projects.id }).from(projects).limit(1).all().length > 0
}

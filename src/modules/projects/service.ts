/** Looking up projects and environments by their case-sensitive names (404 `not_found` after authentication). */
import { findMemberRole, isTeamMember, membersOfProject, projectsOfMember, teamMembershipsOfProject } from '../../db/members.ts'
import type { Db } from '../../db/open.ts'
import {
  allProjectsByName,
  anyProjectExists,
  type Environment,
  findCollectionByName,
  findCollectionPermission,
  findEnvironmentByName,
  findProjectByName,
  findTeamByName,
  type Project,
} from '../../db/projects.ts'
import { findUserByStoredEmail, findUserDisabledAt } from '../../db/users.ts'
import type { PermissionLevel } from '../../lib/access.ts'
import { normalizeEmail } from '../users/view.ts'
import { notFound } from '../../http/errors.ts'

export type { Environment, Project } from '../../db/projects.ts'

/** The project with this exact (case-sensitive) name: the one lookup of a project by name (API, apply, CLI). */
export { findProjectByName } from '../../db/projects.ts'

/** The project with this name, else 404 `not_found`. */
export function requireProject(db: Db, name: string): Project {
  const project = findProjectByName(db, name)
  if (!project) throw notFound(`Project ${name} not found`)
  return project
}

export function requireEnvironment(db: Db, projectName: string, environmentName: string): { project: Project; environment: Environment } {
  const project = requireProject(db, projectName)
  const environment = findEnvironmentByName(db, project.id, environmentName)
  if (!environment) throw notFound(`Environment ${environmentName} not found in project ${projectName}`)
  return { project, environment }
}

export function findTeam(db: Db, projectId: number, name: string) {
  return findTeamByName(db, projectId, name)
}

export function findCollection(db: Db, projectId: number, name: string) {
  return findCollectionByName(db, projectId, name)
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
  const user = findUserDisabledAt(db, input.userId)
  if (!user || user.disabledAt !== null) return none
  const role = roleIn(db, input.projectId, input.userId)
  if (role === 'admin') return { read: true, edit: true }
  if (!role || !isTeamMember(db, input.teamId, input.userId)) return none
  const permission = findCollectionPermission(db, input.collectionId, input.teamId)
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
  return projectsOfMember(db, userId)
}

/** The user's permission level in the project now, or null when not a member. */
export function roleIn(db: Db, projectId: number, userId: number): PermissionLevel | null {
  return findMemberRole(db, projectId, userId) ?? null
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
    const user = findUserByStoredEmail(db, normalizeEmail(filters.userEmail))
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
  return allProjectsByName(db)
}

/** A project's members with their permission level and teams, by email (the settings page). */
export function projectPeople(db: Db, projectId: number): { id: number; email: string; role: PermissionLevel; teams: string[] }[] {
  const members = membersOfProject(db, projectId)
  const memberships = teamMembershipsOfProject(db, projectId)
  return members.map((m) => ({ ...m, teams: memberships.filter((t) => t.userId === m.id).map((t) => t.team) }))
}

/** Whether the instance has any project (an empty one shows the first-start checklist). */
export function hasProjects(db: Db): boolean {
  return anyProjectExists(db)
}

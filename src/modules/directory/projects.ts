/** Looking up projects and environments by their case-sensitive names (404 `not_found` after authentication). */
import {
  type CollectionAccessFacts,
  collectionAccessFacts,
  collectionGrantFacts,
  findMemberRole,
  membersOfProject,
  reachesRendering,
  projectsOfMember,
  teamMembershipsOfProject,
} from '../../db/members.ts'
import {
  allProjectsByName,
  anyProjectExists,
  anyProjectWithParts,
  type Environment,
  findCollectionByName,
  findEnvironmentByName,
  findProjectByName as findProjectByNameRow,
  findTeamByName,
  type Project,
} from '../../db/projects.ts'
import { listProjectParts } from '../../db/records.ts'
import { findUserByStoredEmail } from '../../db/users.ts'
import type { Store } from '../../db/store.ts'
import { read } from '../../db/read.ts'
import type { PermissionLevel } from '../../lib/access.ts'
import { normalizeEmail } from './users.ts'
import { notFound } from '../../lib/errors.ts'
import type { Op } from '../../db/op.ts'
import { someHoldUnstorableText } from '../../lib/storable-text.ts'

export type { Environment, Project } from '../../db/projects.ts'

/** The project with this exact (case-sensitive) name: the one lookup of a project by name (API, apply, CLI). */
export const findProjectByName = findProjectByNameRow

/** The project with this name, else 404 `not_found`. */
export function* requireProject(name: string): Op<Project> {
  const project = yield* findProjectByName(name)
  if (!project) throw notFound(`Project ${name} not found`)
  return project
}

export function* requireEnvironment(projectName: string, environmentName: string): Op<{ project: Project; environment: Environment }> {
  const project = yield* requireProject(projectName)
  const environment = yield* findEnvironmentByName(project.id, environmentName)
  if (!environment) throw notFound(`Environment ${environmentName} not found in project ${projectName}`)
  return { project, environment }
}

/** A list route's environment: the project and environment its path names, read now (404 when unknown). */
export function environmentOf(store: Store) {
  return (params: { projectName: string; environmentName: string }) => read(store, requireEnvironment(params.projectName, params.environmentName))
}

export function* findTeam(projectId: number, name: string) {
  return yield* findTeamByName(projectId, name)
}

export function* findCollection(projectId: number, name: string) {
  return yield* findCollectionByName(projectId, name)
}

/**
 * What a user may do with a collection's records as seen by a team (the rendering), read at call time:
 * project admins may do everything; other members need to belong to the team, whose collection
 * permissions apply (default: read and edit). Deactivated users and non-members may do nothing.
 */
export function* collectionAccess(
  input: { userId: number; projectId: number; teamId: number; collectionId: number },
): Op<{ read: boolean; edit: boolean }> {
  return accessOf(yield* collectionAccessFacts(input))
}

/** The rule of `collectionAccess`, over the facts one statement reads (undefined: no such user). */
function accessOf(facts: CollectionAccessFacts | undefined): { read: boolean; edit: boolean } {
  const none = { read: false, edit: false }
  if (!facts || facts.disabledAt !== null) return none
  if (facts.role === 'admin') return { read: true, edit: true }
  if (!facts.role || facts.teamMember === null) return none
  const read = facts.canRead ?? true
  return { read, edit: read && (facts.canEdit ?? true) }
}

/**
 * A user may read a collection's records outside any one team's view (the records API) when some team of theirs may
 * (`collectionAccess`): project admins always, other members through any of their teams' collection permissions.
 */
export function* mayReadCollection(input: { userId: number; projectId: number; collectionId: number }): Op<boolean> {
  return (yield* teamGranting(input, 'read')) !== null
}

/**
 * Whether a user may write a collection's records outside any one team's view (the records API, a CSV import), and the
 * team their writes are logged under: `teamName` when given (a team of theirs that may edit it; any team of the
 * project for a project admin), else the first of their teams whose permissions let it edit; a project admin (who may
 * always) under their first team, or the project's first team by name when they belong to none. Null: they may not
 * write (as `teamName`, an unknown team or not theirs included).
 */
export function* collectionWriter(input: { userId: number; projectId: number; collectionId: number; teamName?: string }): Op<{ teamId: number | null } | null> {
  if (input.teamName !== undefined) {
    const team = yield* findTeamByName(input.projectId, input.teamName)
    return team && (yield* collectionAccess({ ...input, teamId: team.id })).edit ? { teamId: team.id } : null
  }
  const granted = yield* teamGranting(input, 'edit')
  if (granted === null || granted.teamId !== null) return granted
  return { teamId: (yield* listProjectParts('team', input.projectId))[0]?.id ?? null }
}

/**
 * The first team of the user's through which `need` is granted on the collection (`collectionAccess`), null when none
 * is; a project admin's access does not depend on the team (their first team, or teamId null when they have none).
 */
function* teamGranting(input: { userId: number; projectId: number; collectionId: number }, need: 'read' | 'edit'): Op<{ teamId: number | null } | null> {
  const byTeam = yield* collectionGrantFacts(input)
  if (byTeam[0]?.role === 'admin') return accessOf(byTeam[0])[need] ? { teamId: byTeam[0].teamMember } : null
  const granting = byTeam.find((facts) => accessOf(facts)[need])
  return granting ? { teamId: granting.teamMember } : null
}

/** A user can reach a rendering when they are a project admin or a member of its team. */
export function canReachRendering(input: { userId: number; projectId: number; teamId: number }): Op<boolean> {
  return reachesRendering(input.projectId, input.teamId, input.userId)
}

/** The projects a user is a member of, by name, with the user's permission level in each. */
export function* projectsOf(userId: number): Op<{ name: string; role: PermissionLevel }[]> {
  return yield* projectsOfMember(userId)
}

/** The user's permission level in the project now, or null when not a member. */
export function* roleIn(projectId: number, userId: number): Op<PermissionLevel | null> {
  return (yield* findMemberRole(projectId, userId)) ?? null
}

export function* isAdminOf(userId: number, projectId: number): Op<boolean> {
  return (yield* roleIn(projectId, userId)) === 'admin'
}

export function* isMemberOf(userId: number, projectId: number): Op<boolean> {
  return (yield* roleIn(projectId, userId)) !== null
}

/**
 * The name filters shared by the notes and activity-log lists, resolved to ids. Returns null when a name
 * matches nothing (the page is then empty, not an error — as for any filter that matches no row).
 */
export function* resolveNameFilters(
  projectId: number,
  filters: { userEmail?: string; userId?: number; teamName?: string; collectionName?: string },
): Op<{ userId?: number; teamId?: number; collectionId?: number } | null> {
  // Any text filter of the list (these names, a record id…) holding U+0000 or a lone surrogate equals no stored text (src/lib/storable-text.ts).
  if (someHoldUnstorableText(filters)) return null
  let userId = filters.userId
  if (filters.userEmail !== undefined) {
    const user = yield* findUserByStoredEmail(normalizeEmail(filters.userEmail))
    if (!user || (userId !== undefined && userId !== user.id)) return null
    userId = user.id
  }
  const team = filters.teamName === undefined ? undefined : (yield* findTeam(projectId, filters.teamName))
  if (filters.teamName !== undefined && !team) return null
  const collection = filters.collectionName === undefined ? undefined : (yield* findCollection(projectId, filters.collectionName))
  if (filters.collectionName !== undefined && !collection) return null
  return { userId, teamId: team?.id, collectionId: collection?.id }
}

/** Every project of the instance, by name (the instance administrators' page). */
export function* listProjects(): Op<Project[]> {
  return yield* allProjectsByName()
}

/** A project's members with their permission level and teams, by email (the settings page). */
export function* projectPeople(projectId: number): Op<{ id: number; email: string; role: PermissionLevel; teams: string[] }[]> {
  const members = yield* membersOfProject(projectId)
  const memberships = yield* teamMembershipsOfProject(projectId)
  return members.map((m) => ({ ...m, teams: memberships.filter((t) => t.userId === m.id).map((t) => t.team) }))
}

/** Whether the instance has any project (an empty one shows the first-start checklist). */
export function* hasProjects(): Op<boolean> {
  return yield* anyProjectExists()
}

/** Whether some project has an environment, a team and a collection (the console's first-start checklist). */
export function* hasCompleteProject(): Op<boolean> {
  return yield* anyProjectWithParts()
}

/** A project's collection by name (404 naming it otherwise). */
export function* requireCollection(projectId: number, name: string) {
  const collection = yield* findCollection(projectId, name)
  if (!collection) throw notFound(`Collection ${name} not found`)
  return collection
}

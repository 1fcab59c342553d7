/** Project membership (permission level per user per project) and team membership, with their admin log. */
import {
  countOtherProjectAdmins,
  deleteMemberFromProjectTeams,
  deleteProjectMember,
  deleteTeamMember,
  findProjectMember,
  insertProjectMember,
  insertTeamMember,
  isTeamMember,
  projectIdsOfMember,
  teamNamesOfMember,
  updateProjectMemberRole,
} from '../../db/members.ts'
import type { Db } from '../../db/open.ts'
import { findUserById } from '../../db/users.ts'
import type { PermissionLevel } from '../../lib/access.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict } from '../../http/errors.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { requireAnotherInstanceAdmin, setUserDisabled, userObject } from '../users/service.ts'

/** The permission levels a project member can hold (the CLI's `--role`). */
export { PERMISSION_LEVELS, type PermissionLevel } from '../../lib/access.ts'

export type Outcome = 'created' | 'updated' | 'unchanged'

/** The compatibility document's `user-project` value: the user, their permission level and teams. */
export function userProjectValue(db: Db, projectId: number, userId: number) {
  const user = findUserById(db, userId)
  if (!user) throw new Error(`user ${userId} not found`)
  const member = findProjectMember(db, projectId, userId)
  return {
    user: userObject(user),
    ...(member ? { permissionLevel: member.role } : {}),
    teams: teamNamesOfMember(db, projectId, userId).map((name) => ({ object: 'team' as const, name })),
  }
}

/**
 * 409 `last_project_admin` when the user is the project's only `admin` member: demoting or removing them would
 * leave the project with nobody to manage it (instance administrators still could, but a project keeps its own).
 */
function requireAnotherProjectAdmin(db: Db, projectId: number, userId: number, role: PermissionLevel | undefined): void {
  if (role !== 'admin') return
  if (countOtherProjectAdmins(db, projectId, userId) === 0) throw conflict('last_project_admin', 'This is the last admin of the project: make another member admin first')
}

/** Sets a member's permission level (adding them to the project); never demotes the last admin (409). */
export function setProjectMember(
  db: Db,
  clock: Clock,
  input: { projectId: number; userId: number; role: PermissionLevel; actorId: number | null },
): Outcome {
  const existing = findProjectMember(db, input.projectId, input.userId)
  if (existing?.role === input.role) return 'unchanged'
  if (input.role !== 'admin') requireAnotherProjectAdmin(db, input.projectId, input.userId, existing?.role)
  const before = userProjectValue(db, input.projectId, input.userId)
  const now = clock.now()
  if (existing) updateProjectMemberRole(db, input.projectId, input.userId, input.role, now)
  else insertProjectMember(db, { projectId: input.projectId, userId: input.userId, role: input.role, now })
  appendAdminLog(db, clock, {
    projectId: input.projectId,
    type: existing ? 'update' : 'add',
    resource: 'user-project',
    actorId: input.actorId,
    subjectUserId: input.userId,
    previousValue: existing ? before : undefined,
    newValue: userProjectValue(db, input.projectId, input.userId),
  })
  return existing ? 'updated' : 'created'
}

export function addTeamMember(
  db: Db,
  clock: Clock,
  input: { projectId: number; teamId: number; userId: number; actorId: number | null },
): Outcome {
  if (isTeamMember(db, input.teamId, input.userId)) return 'unchanged'
  changeTeams(db, clock, input, () => insertTeamMember(db, input.teamId, input.userId, clock.now()))
  return 'created'
}

/** A change to a member's teams and its `update` `user-project` entry (their value before and after). */
function changeTeams(db: Db, clock: Clock, input: { projectId: number; userId: number; actorId: number | null }, change: () => void): void {
  const before = userProjectValue(db, input.projectId, input.userId)
  change()
  appendAdminLog(db, clock, {
    projectId: input.projectId,
    type: 'update',
    resource: 'user-project',
    actorId: input.actorId,
    subjectUserId: input.userId,
    previousValue: before,
    newValue: userProjectValue(db, input.projectId, input.userId),
  })
}

/** Takes a user out of one of the project's teams; false when they were not in it. */
export function removeTeamMember(
  db: Db,
  clock: Clock,
  input: { projectId: number; teamId: number; userId: number; actorId: number | null },
): boolean {
  if (!isTeamMember(db, input.teamId, input.userId)) return false
  changeTeams(db, clock, input, () => deleteTeamMember(db, input.teamId, input.userId))
  return true
}

/**
 * Deactivates or reactivates a user (sessions end on deactivation) and writes an admin log entry in every
 * project the user belongs to — resource `user` (extension), values `{name}` describing the state.
 * Returns false when the user was already in that state.
 */
export function setUserDeactivated(db: Db, clock: Clock, userId: number, deactivated: boolean, actorId: number | null): boolean {
  const user = findUserById(db, userId)
  if (!user || (user.disabledAt !== null) === deactivated) return false
  if (deactivated) requireAnotherInstanceAdmin(db, user)
  setUserDisabled(db, clock, userId, deactivated)
  const state = (off: boolean) => ({ name: `${user.email} ${off ? 'deactivated' : 'active'}` })
  for (const projectId of projectIdsOfMember(db, userId)) {
    appendAdminLog(db, clock, {
      projectId,
      type: 'update',
      resource: 'user',
      actorId,
      subjectUserId: userId,
      previousValue: state(!deactivated),
      newValue: state(deactivated),
    })
  }
  return true
}

/**
 * Removes a user from a project: their permission level and their memberships of the project's teams. Their
 * tokens for the project stay but are refused (no role) — revoke them to tidy up. Returns false when the user
 * was not a member. One `remove` admin log entry with the previous `user-project` value.
 */
export function removeProjectMember(db: Db, clock: Clock, input: { projectId: number; userId: number; actorId: number | null }): boolean {
  const existing = findProjectMember(db, input.projectId, input.userId)
  if (!existing) return false
  requireAnotherProjectAdmin(db, input.projectId, input.userId, existing.role)
  const before = userProjectValue(db, input.projectId, input.userId)
  deleteMemberFromProjectTeams(db, input.projectId, input.userId)
  deleteProjectMember(db, input.projectId, input.userId)
  appendAdminLog(db, clock, {
    projectId: input.projectId,
    type: 'remove',
    resource: 'user-project',
    actorId: input.actorId,
    subjectUserId: input.userId,
    previousValue: before,
  })
  return true
}

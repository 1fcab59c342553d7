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
  lockProjectAdmins,
  projectIdsOfMember,
  teamNamesOfMember,
  updateProjectMemberRole,
} from '../../db/members.ts'
import { findUserById } from '../../db/users.ts'
import type { PermissionLevel } from '../../lib/access.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict } from '../../lib/errors.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { requireAnotherInstanceAdmin, setUserDisabled, userObject } from '../users/service.ts'
import type { Op } from '../../db/op.ts'

/** The permission levels a project member can hold (the CLI's `--role`). */
export { PERMISSION_LEVELS, type PermissionLevel } from '../../lib/access.ts'

export type Outcome = 'created' | 'updated' | 'unchanged'

/** The compatibility document's `user-project` value: the user, their permission level and teams. */
export function* userProjectValue(projectId: number, userId: number) {
  const user = yield* findUserById(userId)
  if (!user) throw new Error(`user ${userId} not found`)
  const member = yield* findProjectMember(projectId, userId)
  return {
    user: userObject(user),
    ...(member ? { permissionLevel: member.role } : {}),
    teams: (yield* teamNamesOfMember(projectId, userId)).map((name) => ({ object: 'team' as const, name })),
  }
}

/**
 * The project's admin rule: never a project without an `admin` member. A write that may demote or remove one reads
 * the member through this: it takes the project's rule lock first (PostgreSQL: an advisory lock per project held to
 * commit; SQLite's one writer holds it already), so such writes of one project check and act one at a time, each
 * reading what the one before it committed. Deactivating a user leaves their roles, so it does not touch the rule.
 */
function* memberUnderAdminRule(projectId: number, userId: number) {
  yield* lockProjectAdmins(projectId)
  return yield* findProjectMember(projectId, userId)
}

/**
 * 409 `last_project_admin` when the user is the project's only `admin` member: demoting or removing them would
 * leave the project with nobody to manage it (instance administrators still could, but a project keeps its own).
 * `role` is read under the rule's lock (`memberUnderAdminRule`).
 */
function* requireAnotherProjectAdmin(projectId: number, userId: number, role: PermissionLevel | undefined): Op<void> {
  if (role !== 'admin') return
  if ((yield* countOtherProjectAdmins(projectId, userId)) === 0) throw conflict('last_project_admin', 'This is the last admin of the project: make another member admin first')
}

/** Sets a member's permission level (adding them to the project); never demotes the last admin (409). */
export function* setProjectMember(
  clock: Clock,
  input: { projectId: number; userId: number; role: PermissionLevel; actorId: number | null },
): Op<Outcome> {
  // Making someone admin never breaks the rule: only a change away from admin reads under its lock.
  const existing = input.role === 'admin' ? yield* findProjectMember(input.projectId, input.userId) : yield* memberUnderAdminRule(input.projectId, input.userId)
  if (existing?.role === input.role) return 'unchanged'
  if (input.role !== 'admin') yield* requireAnotherProjectAdmin(input.projectId, input.userId, existing?.role)
  const before = yield* userProjectValue(input.projectId, input.userId)
  const now = clock.now()
  if (existing) yield* updateProjectMemberRole(input.projectId, input.userId, input.role, now)
  else yield* insertProjectMember({ projectId: input.projectId, userId: input.userId, role: input.role, now })
  yield* appendAdminLog(clock, {
    projectId: input.projectId,
    type: existing ? 'update' : 'add',
    resource: 'user-project',
    actorId: input.actorId,
    subjectUserId: input.userId,
    previousValue: existing ? before : undefined,
    newValue: (yield* userProjectValue(input.projectId, input.userId)),
  })
  return existing ? 'updated' : 'created'
}

export function* addTeamMember(
  clock: Clock,
  input: { projectId: number; teamId: number; userId: number; actorId: number | null },
): Op<Outcome> {
  if ((yield* isTeamMember(input.teamId, input.userId))) return 'unchanged'
  yield* changeTeams(clock, input, insertTeamMember(input.teamId, input.userId, clock.now()))
  return 'created'
}

/** A change to a member's teams and its `update` `user-project` entry (their value before and after). */
function* changeTeams(clock: Clock, input: { projectId: number; userId: number; actorId: number | null }, change: Op<unknown>): Op<void> {
  const before = yield* userProjectValue(input.projectId, input.userId)
  yield* change
  yield* appendAdminLog(clock, {
    projectId: input.projectId,
    type: 'update',
    resource: 'user-project',
    actorId: input.actorId,
    subjectUserId: input.userId,
    previousValue: before,
    newValue: (yield* userProjectValue(input.projectId, input.userId)),
  })
}

/** Takes a user out of one of the project's teams; false when they were not in it. */
export function* removeTeamMember(
  clock: Clock,
  input: { projectId: number; teamId: number; userId: number; actorId: number | null },
): Op<boolean> {
  if (!(yield* isTeamMember(input.teamId, input.userId))) return false
  yield* changeTeams(clock, input, deleteTeamMember(input.teamId, input.userId))
  return true
}

/**
 * Deactivates or reactivates a user (sessions end on deactivation) and writes an admin log entry in every
 * project the user belongs to — resource `user` (extension), values `{name}` describing the state.
 * Returns false when the user was already in that state.
 */
export function* setUserDeactivated(clock: Clock, userId: number, deactivated: boolean, actorId: number | null): Op<boolean> {
  // Deactivating reads the user under the instance administrators' rule (409 for the last active one).
  const user = deactivated ? yield* requireAnotherInstanceAdmin(userId) : yield* findUserById(userId)
  if (!user || (user.disabledAt !== null) === deactivated) return false
  yield* setUserDisabled(clock, userId, deactivated)
  const state = (off: boolean) => ({ name: `${user.email} ${off ? 'deactivated' : 'active'}` })
  for (const projectId of (yield* projectIdsOfMember(userId))) {
    yield* appendAdminLog(clock, {
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
export function* removeProjectMember(clock: Clock, input: { projectId: number; userId: number; actorId: number | null }): Op<boolean> {
  const existing = yield* memberUnderAdminRule(input.projectId, input.userId)
  if (!existing) return false
  yield* requireAnotherProjectAdmin(input.projectId, input.userId, existing.role)
  const before = yield* userProjectValue(input.projectId, input.userId)
  yield* deleteMemberFromProjectTeams(input.projectId, input.userId)
  yield* deleteProjectMember(input.projectId, input.userId)
  yield* appendAdminLog(clock, {
    projectId: input.projectId,
    type: 'remove',
    resource: 'user-project',
    actorId: input.actorId,
    subjectUserId: input.userId,
    previousValue: before,
  })
  return true
}

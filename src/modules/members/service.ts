/** Project membership (permission level per user per project) and team membership, with their admin log. */
import { and, count, eq, ne } from 'drizzle-orm'
import type { Db } from '../../db/open.ts'
import { type PermissionLevel, projectMembers, teamMembers, teams, users } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict } from '../../http/errors.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { requireAnotherInstanceAdmin, setUserDisabled, userObject } from '../users/service.ts'

/** The permission levels a project member can hold (the CLI's `--role`). */
export { PERMISSION_LEVELS, type PermissionLevel } from '../../db/schema.ts'

export type Outcome = 'created' | 'updated' | 'unchanged'

/** The compatibility document's `user-project` value: the user, their permission level and teams. */
export function userProjectValue(db: Db, projectId: number, userId: number) {
  const user = db.select().from(users).where(eq(users.id, userId)).get()
  if (!user) throw new Error(`user ${userId} not found`)
  const member = db
    .select({ role: projectMembers.role })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId)))
    .get()
  const teamNames = db
    .select({ name: teams.name })
    .from(teamMembers)
    .innerJoin(teams, eq(teams.id, teamMembers.teamId))
    .where(and(eq(teams.projectId, projectId), eq(teamMembers.userId, userId)))
    .orderBy(teams.name)
    .all()
  return {
    user: userObject(user),
    ...(member ? { permissionLevel: member.role } : {}),
    teams: teamNames.map((t) => ({ object: 'team' as const, name: t.name })),
  }
}

/**
 * 409 `last_project_admin` when the user is the project's only `admin` member: demoting or removing them would
 * leave the project with nobody to manage it (instance administrators still could, but a project keeps its own).
 */
function requireAnotherProjectAdmin(db: Db, projectId: number, userId: number, role: PermissionLevel | undefined): void {
  if (role !== 'admin') return
  const others = db
    .select({ n: count() })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.role, 'admin'), ne(projectMembers.userId, userId)))
    .get()?.n ?? 0
  if (others === 0) throw conflict('last_project_admin', 'This is the last admin of the project: make another member admin first')
}

/** Sets a member's permission level (adding them to the project); never demotes the last admin (409). */
export function setProjectMember(
  db: Db,
  clock: Clock,
  input: { projectId: number; userId: number; role: PermissionLevel; actorId: number | null },
): Outcome {
  const where = and(eq(projectMembers.projectId, input.projectId), eq(projectMembers.userId, input.userId))
  const existing = db.select().from(projectMembers).where(where).get()
  if (existing?.role === input.role) return 'unchanged'
  if (input.role !== 'admin') requireAnotherProjectAdmin(db, input.projectId, input.userId, existing?.role)
  const before = userProjectValue(db, input.projectId, input.userId)
  const now = clock.now()
  if (existing) {
    db.update(projectMembers).set({ role: input.role, updatedAt: now }).where(where).run()
  } else {
    db.insert(projectMembers)
      .values({ projectId: input.projectId, userId: input.userId, role: input.role, createdAt: now, updatedAt: now })
      .run()
  }
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
  const existing = db
    .select()
    .from(teamMembers)
    .where(and(eq(teamMembers.teamId, input.teamId), eq(teamMembers.userId, input.userId)))
    .get()
  if (existing) return 'unchanged'
  changeTeams(db, clock, input, () => db.insert(teamMembers).values({ teamId: input.teamId, userId: input.userId, createdAt: clock.now() }).run())
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
  const where = and(eq(teamMembers.teamId, input.teamId), eq(teamMembers.userId, input.userId))
  if (!db.select().from(teamMembers).where(where).get()) return false
  changeTeams(db, clock, input, () => db.delete(teamMembers).where(where).run())
  return true
}

/**
 * Deactivates or reactivates a user (sessions end on deactivation) and writes an admin log entry in every
 * project the user belongs to — resource `user` (extension), values `{name}` describing the state.
 * Returns false when the user was already in that state.
 */
export function setUserDeactivated(db: Db, clock: Clock, userId: number, deactivated: boolean, actorId: number | null): boolean {
  const user = db.select().from(users).where(eq(users.id, userId)).get()
  if (!user || (user.disabledAt !== null) === deactivated) return false
  if (deactivated) requireAnotherInstanceAdmin(db, user)
  setUserDisabled(db, clock, userId, deactivated)
  const state = (off: boolean) => ({ name: `${user.email} ${off ? 'deactivated' : 'active'}` })
  for (const { projectId } of db.select({ projectId: projectMembers.projectId }).from(projectMembers).where(eq(projectMembers.userId, userId)).all()) {
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
  const where = and(eq(projectMembers.projectId, input.projectId), eq(projectMembers.userId, input.userId))
  const existing = db.select().from(projectMembers).where(where).get()
  if (!existing) return false
  requireAnotherProjectAdmin(db, input.projectId, input.userId, existing.role)
  const before = userProjectValue(db, input.projectId, input.userId)
  const projectTeams = db.select({ id: teams.id }).from(teams).where(eq(teams.projectId, input.projectId)).all()
  for (const team of projectTeams) {
    db.delete(teamMembers).where(and(eq(teamMembers.teamId, team.id), eq(teamMembers.userId, input.userId))).run()
  }
  db.delete(projectMembers).where(where).run()
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

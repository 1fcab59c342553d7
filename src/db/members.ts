/**
 * The members domain's storage: who holds which permission level in a project (`project_members`) and who
 * belongs to which team (`team_members`). The per-request checks (`findMemberRole`, `isTeamMember`) are
 * prepared once per connection; the last-admin rules and the admin log stay in the members service.
 */
import { and, asc, count, eq, ne, sql } from 'drizzle-orm'
import type { PermissionLevel } from '../lib/access.ts'
import type { Db } from './open.ts'
import { prepared } from './prepared.ts'
import { projectMembers, projects, teamMembers, teams, users } from './schema.ts'

export type ProjectMember = typeof projectMembers.$inferSelect

/** The user's permission level in the project now, or undefined when not a member. Prepared: every request asks. */
export function findMemberRole(db: Db, projectId: number, userId: number): PermissionLevel | undefined {
  const statement = prepared(db, 'project-members.role', () =>
    db
      .select({ role: projectMembers.role })
      .from(projectMembers)
      .where(and(eq(projectMembers.projectId, sql.placeholder('projectId')), eq(projectMembers.userId, sql.placeholder('userId'))))
      .prepare(),
  )
  return statement.all({ projectId, userId })[0]?.role
}

/** Whether the user belongs to the team. Prepared: rendering access asks per request. */
export function isTeamMember(db: Db, teamId: number, userId: number): boolean {
  const statement = prepared(db, 'team-members.exists', () =>
    db
      .select({ teamId: teamMembers.teamId })
      .from(teamMembers)
      .where(and(eq(teamMembers.teamId, sql.placeholder('teamId')), eq(teamMembers.userId, sql.placeholder('userId'))))
      .prepare(),
  )
  return statement.all({ teamId, userId }).length > 0
}

const memberIs = (projectId: number, userId: number) => and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId))

export function findProjectMember(db: Db, projectId: number, userId: number): ProjectMember | undefined {
  return db.select().from(projectMembers).where(memberIs(projectId, userId)).get()
}

export function insertProjectMember(db: Db, row: { projectId: number; userId: number; role: PermissionLevel; now: number }): void {
  db.insert(projectMembers).values({ projectId: row.projectId, userId: row.userId, role: row.role, createdAt: row.now, updatedAt: row.now }).run()
}

export function updateProjectMemberRole(db: Db, projectId: number, userId: number, role: PermissionLevel, now: number): void {
  db.update(projectMembers).set({ role, updatedAt: now }).where(memberIs(projectId, userId)).run()
}

export function deleteProjectMember(db: Db, projectId: number, userId: number): void {
  db.delete(projectMembers).where(memberIs(projectId, userId)).run()
}

/**
 * Holds the project's admin rule for the rest of the write transaction: a write that may leave the project without an
 * `admin` member (a role change away from admin, a removal) takes it before it reads the member it changes. SQLite's
 * one writer already runs every write transaction alone: nothing to take. The PostgreSQL twin is an advisory lock
 * per project.
 */
export function lockProjectAdmins(_db: Db, _projectId: number): void {}

/** How many `admin` members the project has besides this user. */
export function countOtherProjectAdmins(db: Db, projectId: number, userId: number): number {
  return (
    db
      .select({ n: count() })
      .from(projectMembers)
      .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.role, 'admin'), ne(projectMembers.userId, userId)))
      .get()?.n ?? 0
  )
}

/** The ids of the projects a user is a member of, ascending (a defined order: the PostgreSQL twin answers the same). */
export function projectIdsOfMember(db: Db, userId: number): number[] {
  return db
    .select({ projectId: projectMembers.projectId })
    .from(projectMembers)
    .where(eq(projectMembers.userId, userId))
    .orderBy(projectMembers.projectId)
    .all()
    .map((r) => r.projectId)
}

/** The projects a user is a member of, by name, with their permission level in each (prepared: the console's home). */
export function projectsOfMember(db: Db, userId: number): { name: string; role: PermissionLevel }[] {
  return prepared(db, 'project-members.projects-of', () =>
    db
      .select({ name: projects.name, role: projectMembers.role })
      .from(projectMembers)
      .innerJoin(projects, eq(projects.id, projectMembers.projectId))
      .where(eq(projectMembers.userId, sql.placeholder('userId')))
      .orderBy(asc(projects.name))
      .prepare(),
  ).all({ userId })
}

/** A project's members (id, email, permission level), by email. */
export function membersOfProject(db: Db, projectId: number): { id: number; email: string; role: PermissionLevel }[] {
  return db
    .select({ id: users.id, email: users.email, role: projectMembers.role })
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(eq(projectMembers.projectId, projectId))
    .orderBy(asc(users.email))
    .all()
}

/** Every team membership in the project (user id, team name), by team name, then user id (the index's own order). */
export function teamMembershipsOfProject(db: Db, projectId: number): { userId: number; team: string }[] {
  return db
    .select({ userId: teamMembers.userId, team: teams.name })
    .from(teamMembers)
    .innerJoin(teams, eq(teams.id, teamMembers.teamId))
    .where(eq(teams.projectId, projectId))
    .orderBy(asc(teams.name), asc(teamMembers.userId))
    .all()
}

/** The names of the project's teams the user belongs to, by name. */
export function teamNamesOfMember(db: Db, projectId: number, userId: number): string[] {
  return db
    .select({ name: teams.name })
    .from(teamMembers)
    .innerJoin(teams, eq(teams.id, teamMembers.teamId))
    .where(and(eq(teams.projectId, projectId), eq(teamMembers.userId, userId)))
    .orderBy(teams.name)
    .all()
    .map((t) => t.name)
}

export function insertTeamMember(db: Db, teamId: number, userId: number, now: number): void {
  db.insert(teamMembers).values({ teamId, userId, createdAt: now }).run()
}

export function deleteTeamMember(db: Db, teamId: number, userId: number): void {
  db.delete(teamMembers).where(and(eq(teamMembers.teamId, teamId), eq(teamMembers.userId, userId))).run()
}

/** Takes the user out of every team of the project. */
export function deleteMemberFromProjectTeams(db: Db, projectId: number, userId: number): void {
  const projectTeams = db.select({ id: teams.id }).from(teams).where(eq(teams.projectId, projectId)).all()
  for (const team of projectTeams) deleteTeamMember(db, team.id, userId)
}

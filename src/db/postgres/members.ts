/**
 * Issue 18: the members domain's storage (src/db/members.ts) as PostgreSQL twins — who holds which permission level
 * in a project and who belongs to which team. Lists sort names and emails in byte order, as SQLite does.
 */
import { and, asc, count, eq, inArray, ne, type SQL, sql } from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import {
  countOtherProjectAdmins,
  deleteMemberFromProjectTeams,
  deleteProjectMember,
  deleteTeamMember,
  findMemberRole,
  findProjectMember,
  insertProjectMember,
  insertTeamMember,
  isTeamMember,
  lockProjectAdmins,
  membersOfProject,
  projectIdsOfMember,
  projectsOfMember,
  teamMembershipsOfProject,
  teamNamesOfMember,
  updateProjectMemberRole,
} from '../members.ts'
import type { PermissionLevel } from '../../lib/access.ts'
import { byteOrder } from './byte-order.ts'
import { preparedOn } from './prepared.ts'
import { lockRule } from './rule-locks.ts'
import { firstRow } from './rows.ts'
import { projectMembers, projects, teamMembers, teams, users } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const memberIs = (projectId: number, userId: number) => and(eq(projectMembers.projectId, projectId), eq(projectMembers.userId, userId))
const inTeam = (teamId: number, userId: number) => and(eq(teamMembers.teamId, teamId), eq(teamMembers.userId, userId))

/** `memberIs` with placeholders `projectId`, `userId`: the compiled lookups' condition. */
const memberIsPlaced = () => and(eq(projectMembers.projectId, sql.placeholder('projectId')), eq(projectMembers.userId, sql.placeholder('userId')))

const findMemberRoleOnPostgres = async (db: PgDb, projectId: number, userId: number) =>
  (
    await firstRow(
      preparedOn(db, 'members.role', (db) => db.select({ role: projectMembers.role }).from(projectMembers).where(memberIsPlaced()).limit(1)).execute({ projectId, userId }),
    )
  )?.role

const isTeamMemberOnPostgres = async (db: PgDb, teamId: number, userId: number) =>
  (
    await preparedOn(db, 'team-members.is', (db) =>
      db
        .select({ teamId: teamMembers.teamId })
        .from(teamMembers)
        .where(and(eq(teamMembers.teamId, sql.placeholder('teamId')), eq(teamMembers.userId, sql.placeholder('userId'))))
        .limit(1),
    ).execute({ teamId, userId })
  ).length > 0

const findProjectMemberOnPostgres = (db: PgDb, projectId: number, userId: number) =>
  firstRow(preparedOn(db, 'members.find', (db) => db.select().from(projectMembers).where(memberIsPlaced()).limit(1)).execute({ projectId, userId }))

const insertProjectMemberOnPostgres = async (db: PgDb, row: { projectId: number; userId: number; role: PermissionLevel; now: number }) => {
  await db.insert(projectMembers).values({ projectId: row.projectId, userId: row.userId, role: row.role, createdAt: row.now, updatedAt: row.now })
}

const updateProjectMemberRoleOnPostgres = async (db: PgDb, projectId: number, userId: number, role: PermissionLevel, now: number) => {
  await db.update(projectMembers).set({ role, updatedAt: now }).where(memberIs(projectId, userId))
}

const deleteProjectMemberOnPostgres = async (db: PgDb, projectId: number, userId: number) => {
  await db.delete(projectMembers).where(memberIs(projectId, userId))
}

const lockProjectAdminsOnPostgres = (db: PgDb, projectId: number) => lockRule(db, 'projectAdmins', projectId)

const countOtherProjectAdminsOnPostgres = async (db: PgDb, projectId: number, userId: number) =>
  (
    await firstRow(
      db
        .select({ n: count() })
        .from(projectMembers)
        .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.role, 'admin'), ne(projectMembers.userId, userId))),
    )
  )?.n ?? 0

const projectIdsOfMemberOnPostgres = async (db: PgDb, userId: number) => {
  const rows = await db.select({ projectId: projectMembers.projectId }).from(projectMembers).where(eq(projectMembers.userId, userId)).orderBy(asc(projectMembers.projectId))
  return rows.map((r) => r.projectId)
}

const projectsOfMemberOnPostgres = (db: PgDb, userId: number) =>
  db
    .select({ name: projects.name, role: projectMembers.role })
    .from(projectMembers)
    .innerJoin(projects, eq(projects.id, projectMembers.projectId))
    .where(eq(projectMembers.userId, userId))
    .orderBy(byteOrder(projects.name))

const membersOfProjectOnPostgres = (db: PgDb, projectId: number) =>
  db
    .select({ id: users.id, email: users.email, role: projectMembers.role })
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(eq(projectMembers.projectId, projectId))
    .orderBy(byteOrder(users.email))

/** The team memberships `where` picks, as `columns`, by team name then user id (`& {}`: Drizzle's select typing of a generic). */
const teamMembershipsWhere = <C extends Record<string, PgColumn>>(db: PgDb, columns: C, where: SQL | undefined) =>
  db
    .select(columns as C & {})
    .from(teamMembers)
    .innerJoin(teams, eq(teams.id, teamMembers.teamId))
    .where(where)
    .orderBy(byteOrder(teams.name), asc(teamMembers.userId))

const teamMembershipsOfProjectOnPostgres = (db: PgDb, projectId: number) =>
  teamMembershipsWhere(db, { userId: teamMembers.userId, team: teams.name }, eq(teams.projectId, projectId))

const teamNamesOfMemberOnPostgres = async (db: PgDb, projectId: number, userId: number) =>
  (await teamMembershipsWhere(db, { name: teams.name }, and(eq(teams.projectId, projectId), eq(teamMembers.userId, userId)))).map((t) => t.name)

const insertTeamMemberOnPostgres = async (db: PgDb, teamId: number, userId: number, now: number) => {
  await db.insert(teamMembers).values({ teamId, userId, createdAt: now })
}

const deleteTeamMemberOnPostgres = async (db: PgDb, teamId: number, userId: number) => {
  await db.delete(teamMembers).where(inTeam(teamId, userId))
}

/** Takes the user out of every team of the project: one statement. */
const deleteMemberFromProjectTeamsOnPostgres = async (db: PgDb, projectId: number, userId: number) => {
  await db
    .delete(teamMembers)
    .where(and(eq(teamMembers.userId, userId), inArray(teamMembers.teamId, db.select({ id: teams.id }).from(teams).where(eq(teams.projectId, projectId)))))
}

/** The twins of the members domain's storage, by the SQLite function they stand for. */
export const MEMBERS_TWINS = twins(
  twin(findMemberRole, findMemberRoleOnPostgres),
  twin(isTeamMember, isTeamMemberOnPostgres),
  twin(findProjectMember, findProjectMemberOnPostgres),
  twin(insertProjectMember, insertProjectMemberOnPostgres),
  twin(updateProjectMemberRole, updateProjectMemberRoleOnPostgres),
  twin(deleteProjectMember, deleteProjectMemberOnPostgres),
  twin(lockProjectAdmins, lockProjectAdminsOnPostgres),
  twin(countOtherProjectAdmins, countOtherProjectAdminsOnPostgres),
  twin(projectIdsOfMember, projectIdsOfMemberOnPostgres),
  twin(projectsOfMember, projectsOfMemberOnPostgres),
  twin(membersOfProject, membersOfProjectOnPostgres),
  twin(teamMembershipsOfProject, teamMembershipsOfProjectOnPostgres),
  twin(teamNamesOfMember, teamNamesOfMemberOnPostgres),
  twin(insertTeamMember, insertTeamMemberOnPostgres),
  twin(deleteTeamMember, deleteTeamMemberOnPostgres),
  twin(deleteMemberFromProjectTeams, deleteMemberFromProjectTeamsOnPostgres),
)

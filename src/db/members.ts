/**
 * The members domain's storage: who holds which permission level in a project (`project_members`) and who
 * belongs to which team (`team_members`). The per-request checks (`findMemberRole`, `isTeamMember`,
 * `collectionAccessFacts`) are statements; the last-admin rules and the admin log stay in the members service. Lists
 * sort names and emails in byte order on both stores (`d.byteOrder`).
 */
import { and, asc, count, eq, inArray, ne, type SQL, sql } from 'drizzle-orm'
import type { SQLiteColumn } from 'drizzle-orm/sqlite-core'
import type { PermissionLevel } from '../lib/access.ts'
import type { Dialect } from './dialect.ts'
import type { Op } from './op.ts'
import { constantLimit, exec, row, rows, statement } from './query.ts'
import { cached } from './lookup-cache.ts'
import { lockRule } from './rule-locks.ts'
import type { projectMembers } from './schema.ts'

export type ProjectMember = typeof projectMembers.$inferSelect

/** The project's member, as placeholders `projectId` and `userId`. */
const memberPlaced = ({ t }: Dialect) =>
  and(eq(t.projectMembers.projectId, sql.placeholder('projectId')), eq(t.projectMembers.userId, sql.placeholder('userId')))

const MEMBER_ROLE = statement('project-members.role', (d) => d.db.select({ role: d.t.projectMembers.role }).from(d.t.projectMembers).where(memberPlaced(d)).limit(constantLimit(1)))

/** The user's permission level in the project now, or undefined when not a member. A statement: every request asks. */
export function* findMemberRole(projectId: number, userId: number): Op<PermissionLevel | undefined> {
  return (yield* MEMBER_ROLE.row({ projectId, userId }))?.role
}

/**
 * A user's role in the project and whether they belong to the team, in one statement (a project admin reaches every
 * team's renderings; a member only their teams').
 */
const RENDERING_REACH = statement('members.rendering-reach', ({ db, t }) =>
  db
    .select({ role: t.projectMembers.role, teamId: t.teamMembers.teamId })
    .from(t.projectMembers)
    .leftJoin(t.teamMembers, and(eq(t.teamMembers.teamId, sql.placeholder('teamId')), eq(t.teamMembers.userId, t.projectMembers.userId)))
    .where(and(eq(t.projectMembers.projectId, sql.placeholder('projectId')), eq(t.projectMembers.userId, sql.placeholder('userId'))))
    .limit(constantLimit(1)),
)

function* readRenderingReach(projectId: number, teamId: number, userId: number): Op<boolean> {
  const reach = yield* RENDERING_REACH.row({ projectId, teamId, userId })
  return reach !== undefined && (reach.role === 'admin' || reach.teamId !== null)
}

/**
 * What decides a user's access to a collection's records as seen by a team, in one statement: whether the user is
 * deactivated, their role in the project, whether they belong to the team, and the team's permission row on the
 * collection (null columns: none). Every record read or write by a person or a run asks (the rule: the records
 * service's `collectionAccess`). Undefined: no such user.
 */
const COLLECTION_ACCESS = statement('members.collection-access', ({ db, t }) =>
  db
    .select({
      disabledAt: t.users.disabledAt,
      role: t.projectMembers.role,
      teamMember: t.teamMembers.teamId,
      canRead: t.collectionPermissions.canRead,
      canEdit: t.collectionPermissions.canEdit,
    })
    .from(t.users)
    .leftJoin(t.projectMembers, and(eq(t.projectMembers.projectId, sql.placeholder('projectId')), eq(t.projectMembers.userId, t.users.id)))
    .leftJoin(t.teamMembers, and(eq(t.teamMembers.teamId, sql.placeholder('teamId')), eq(t.teamMembers.userId, t.users.id)))
    .leftJoin(t.collectionPermissions, and(eq(t.collectionPermissions.collectionId, sql.placeholder('collectionId')), eq(t.collectionPermissions.teamId, sql.placeholder('teamId'))))
    .where(eq(t.users.id, sql.placeholder('userId')))
    .limit(constantLimit(1)),
)

export interface CollectionAccessFacts {
  disabledAt: number | null
  role: PermissionLevel | null
  /** The team's id when the user belongs to it, else null. */
  teamMember: number | null
  canRead: boolean | null
  canEdit: boolean | null
}

export function* collectionAccessFacts(input: { userId: number; projectId: number; teamId: number; collectionId: number }): Op<CollectionAccessFacts | undefined> {
  return yield* COLLECTION_ACCESS.row(input)
}

/**
 * The same facts for every team of the user's in the project at once, one row a team, by team name (a user of no
 * team there: one row, `teamMember` null; no such user: none). A records API call, which acts through
 * whichever of the user's teams may, asks once instead of once a team.
 */
const COLLECTION_GRANTS = statement('members.collection-grants', ({ db, t, byteOrder }) =>
  db
    .select({
      disabledAt: t.users.disabledAt,
      role: t.projectMembers.role,
      teamMember: t.teams.id,
      canRead: t.collectionPermissions.canRead,
      canEdit: t.collectionPermissions.canEdit,
    })
    .from(t.users)
    .leftJoin(t.projectMembers, and(eq(t.projectMembers.projectId, sql.placeholder('projectId')), eq(t.projectMembers.userId, t.users.id)))
    .leftJoin(
      t.teamMembers,
      and(eq(t.teamMembers.userId, t.users.id), inArray(t.teamMembers.teamId, db.select({ id: t.teams.id }).from(t.teams).where(eq(t.teams.projectId, sql.placeholder('projectId'))))),
    )
    .leftJoin(t.teams, eq(t.teams.id, t.teamMembers.teamId))
    .leftJoin(t.collectionPermissions, and(eq(t.collectionPermissions.collectionId, sql.placeholder('collectionId')), eq(t.collectionPermissions.teamId, t.teamMembers.teamId)))
    .where(eq(t.users.id, sql.placeholder('userId')))
    .orderBy(byteOrder(t.teams.name)),
)

export function* collectionGrantFacts(input: { userId: number; projectId: number; collectionId: number }): Op<CollectionAccessFacts[]> {
  return yield* COLLECTION_GRANTS.rows(input)
}

/**
 * Whether the user can reach the team's renderings in the project: a project admin, or a member of the team. Every
 * webhook call and manual start asks, so the answer is cached (lookup-cache.ts: per SQLite connection, per
 * PostgreSQL instance; both watch the membership tables: a change applies to the next call).
 */
export function* reachesRendering(projectId: number, teamId: number, userId: number): Op<boolean> {
  return (yield* cached('rendering-reach', `${projectId}/${teamId}/${userId}`, readRenderingReach(projectId, teamId, userId))) === true
}

const TEAM_MEMBER = statement('team-members.exists', ({ db, t }) =>
  db
    .select({ teamId: t.teamMembers.teamId })
    .from(t.teamMembers)
    .where(and(eq(t.teamMembers.teamId, sql.placeholder('teamId')), eq(t.teamMembers.userId, sql.placeholder('userId'))))
    .limit(constantLimit(1)),
)

/** Whether the user belongs to the team. A statement: rendering access asks per request. */
export function* isTeamMember(teamId: number, userId: number): Op<boolean> {
  return (yield* TEAM_MEMBER.row({ teamId, userId })) !== undefined
}

const TEAMS_OF_MEMBER_IN = statement('team-members.of-user-in-environment', ({ db, t }) =>
  db
    .select({ teamId: t.teamMembers.teamId })
    .from(t.teamMembers)
    .innerJoin(t.teams, eq(t.teams.id, t.teamMembers.teamId))
    .innerJoin(t.environments, eq(t.environments.projectId, t.teams.projectId))
    .where(and(eq(t.teamMembers.userId, sql.placeholder('userId')), eq(t.environments.id, sql.placeholder('environmentId')))),
)

/** The ids of the teams the user belongs to in the environment's project. A statement: a member's inbox asks per request. */
export function* teamIdsOfMemberIn(environmentId: number, userId: number): Op<number[]> {
  return (yield* TEAMS_OF_MEMBER_IN.rows({ environmentId, userId })).map((row) => row.teamId)
}

const PROJECT_MEMBER = statement('members.find', (d) => d.db.select().from(d.t.projectMembers).where(memberPlaced(d)).limit(constantLimit(1)))

export function findProjectMember(projectId: number, userId: number) {
  return PROJECT_MEMBER.row({ projectId, userId })
}

const memberIs = ({ t }: Dialect, projectId: number, userId: number) => and(eq(t.projectMembers.projectId, projectId), eq(t.projectMembers.userId, userId))

export function insertProjectMember(member: { projectId: number; userId: number; role: PermissionLevel; now: number }) {
  const { projectId, userId, role, now } = member
  return exec(({ db, t }) => db.insert(t.projectMembers).values({ projectId, userId, role, createdAt: now, updatedAt: now }))
}

export function updateProjectMemberRole(projectId: number, userId: number, role: PermissionLevel, now: number) {
  return exec((d) => d.db.update(d.t.projectMembers).set({ role, updatedAt: now }).where(memberIs(d, projectId, userId)))
}

export function deleteProjectMember(projectId: number, userId: number) {
  return exec((d) => d.db.delete(d.t.projectMembers).where(memberIs(d, projectId, userId)))
}

/**
 * Holds the project's admin rule for the rest of the write transaction: a write that may leave the project without an
 * `admin` member (a role change away from admin, a removal) takes it before it reads the member it changes
 * (./rule-locks.ts); other projects never wait.
 */
export function lockProjectAdmins(projectId: number): Op<void> {
  return lockRule('projectAdmins', projectId)
}

/** How many `admin` members the project has besides this user. */
export function* countOtherProjectAdmins(projectId: number, userId: number): Op<number> {
  const counted = yield* row(({ db, t }) =>
    db
      .select({ n: count() })
      .from(t.projectMembers)
      .where(and(eq(t.projectMembers.projectId, projectId), eq(t.projectMembers.role, 'admin'), ne(t.projectMembers.userId, userId))),
  )
  return counted?.n ?? 0
}

/** The ids of the projects a user is a member of, ascending (a defined order: both stores answer the same). */
export function* projectIdsOfMember(userId: number): Op<number[]> {
  const memberships = yield* rows(({ db, t }) =>
    db.select({ projectId: t.projectMembers.projectId }).from(t.projectMembers).where(eq(t.projectMembers.userId, userId)).orderBy(asc(t.projectMembers.projectId)),
  )
  return memberships.map((m) => m.projectId)
}

const PROJECTS_OF_MEMBER = statement('project-members.projects-of', ({ db, t, byteOrder }) =>
  db
    .select({ name: t.projects.name, role: t.projectMembers.role })
    .from(t.projectMembers)
    .innerJoin(t.projects, eq(t.projects.id, t.projectMembers.projectId))
    .where(eq(t.projectMembers.userId, sql.placeholder('userId')))
    .orderBy(byteOrder(t.projects.name)),
)

/** The projects a user is a member of, by name, with their permission level in each (a statement: the console's home). */
export function projectsOfMember(userId: number) {
  return PROJECTS_OF_MEMBER.rows({ userId })
}

/** A project's members (id, email, permission level), by email. */
export function membersOfProject(projectId: number) {
  return rows(({ db, t, byteOrder }) =>
    db
      .select({ id: t.users.id, email: t.users.email, role: t.projectMembers.role })
      .from(t.projectMembers)
      .innerJoin(t.users, eq(t.users.id, t.projectMembers.userId))
      .where(eq(t.projectMembers.projectId, projectId))
      .orderBy(byteOrder(t.users.email)),
  )
}

/** The team memberships `where` picks, as `columns`, by team name then user id (the index's own order). */
function teamMemberships<C extends Record<string, SQLiteColumn>>(columns: (t: Dialect['t']) => C, where: (t: Dialect['t']) => SQL | undefined) {
  return rows(({ db, t, byteOrder }) =>
    db
      // `& {}`: Drizzle's select typing of a generic.
      .select(columns(t) as C & {})
      .from(t.teamMembers)
      .innerJoin(t.teams, eq(t.teams.id, t.teamMembers.teamId))
      .where(where(t))
      .orderBy(byteOrder(t.teams.name), asc(t.teamMembers.userId)),
  )
}

/** Every team membership in the project (user id, team name), by team name, then user id. */
export function teamMembershipsOfProject(projectId: number) {
  return teamMemberships((t) => ({ userId: t.teamMembers.userId, team: t.teams.name }), (t) => eq(t.teams.projectId, projectId))
}

/** The names of the project's teams the user belongs to, by name. */
export function* teamNamesOfMember(projectId: number, userId: number): Op<string[]> {
  const teams = yield* teamMemberships(
    (t) => ({ name: t.teams.name }),
    (t) => and(eq(t.teams.projectId, projectId), eq(t.teamMembers.userId, userId)),
  )
  return teams.map((team) => team.name)
}

export function insertTeamMember(teamId: number, userId: number, now: number) {
  return exec(({ db, t }) => db.insert(t.teamMembers).values({ teamId, userId, createdAt: now }))
}

export function deleteTeamMember(teamId: number, userId: number) {
  return exec(({ db, t }) => db.delete(t.teamMembers).where(and(eq(t.teamMembers.teamId, teamId), eq(t.teamMembers.userId, userId))))
}

/** Takes the user out of every team of the project: one statement. */
export function deleteMemberFromProjectTeams(projectId: number, userId: number) {
  return exec(({ db, t }) =>
    db
      .delete(t.teamMembers)
      .where(and(eq(t.teamMembers.userId, userId), inArray(t.teamMembers.teamId, db.select({ id: t.teams.id }).from(t.teams).where(eq(t.teams.projectId, projectId))))),
  )
}

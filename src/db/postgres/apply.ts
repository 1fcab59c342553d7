/**
 * Issue 18: what `trellis apply` asks beyond the domains' services, as PostgreSQL twins of src/db/apply.ts. The
 * lists come in the order SQLite's plans give them (its unique indexes: emails and names byte-wise, members by user
 * id), so apply reports alike on both databases.
 */
import { and, asc, eq, isNull, or } from 'drizzle-orm'
import {
  firstEditingTeamId,
  firstProjectAdminId,
  hasImportedNote,
  listProjectMemberEmails,
  listProjectNames,
  listUserEmails,
  type ImportedNoteKey,
} from '../apply.ts'
import { byteOrder } from './byte-order.ts'
import { collectionPermissions, notes, projectMembers, projects, teams, users } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

async function listUserEmailsOnPostgres(db: PgDb): Promise<string[]> {
  return (await db.select({ email: users.email }).from(users).orderBy(byteOrder(users.email))).map((u) => u.email)
}

async function listProjectNamesOnPostgres(db: PgDb): Promise<string[]> {
  return (await db.select({ name: projects.name }).from(projects).orderBy(byteOrder(projects.name))).map((p) => p.name)
}

async function listProjectMemberEmailsOnPostgres(db: PgDb, projectId: number): Promise<string[]> {
  const members = await db
    .select({ email: users.email })
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(eq(projectMembers.projectId, projectId))
    .orderBy(asc(projectMembers.userId))
  return members.map((m) => m.email)
}

async function firstProjectAdminIdOnPostgres(db: PgDb, projectId: number): Promise<number | undefined> {
  const [admin] = await db
    .select({ id: projectMembers.userId })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.role, 'admin')))
    .orderBy(asc(projectMembers.userId))
    .limit(1)
  return admin?.id
}

async function firstEditingTeamIdOnPostgres(db: PgDb, projectId: number, collectionId: number): Promise<number | undefined> {
  const [team] = await db
    .select({ id: teams.id })
    .from(teams)
    .leftJoin(collectionPermissions, and(eq(collectionPermissions.teamId, teams.id), eq(collectionPermissions.collectionId, collectionId)))
    .where(and(eq(teams.projectId, projectId), or(isNull(collectionPermissions.canEdit), eq(collectionPermissions.canEdit, true))))
    .orderBy(asc(teams.id))
    .limit(1)
  return team?.id
}

async function hasImportedNoteOnPostgres(db: PgDb, key: ImportedNoteKey): Promise<boolean> {
  const found = await db
    .select({ id: notes.id })
    .from(notes)
    .where(
      and(
        eq(notes.environmentId, key.environmentId),
        eq(notes.recordId, key.recordId),
        eq(notes.userId, key.userId),
        eq(notes.title, key.title),
        key.createdAt === undefined ? undefined : eq(notes.createdAt, key.createdAt),
      ),
    )
    .limit(1)
  return found.length > 0
}

/** The twins of apply's own queries, by the SQLite function they stand for. */
export const APPLY_TWINS = twins(
  twin(listUserEmails, listUserEmailsOnPostgres),
  twin(listProjectNames, listProjectNamesOnPostgres),
  twin(listProjectMemberEmails, listProjectMemberEmailsOnPostgres),
  twin(firstProjectAdminId, firstProjectAdminIdOnPostgres),
  twin(firstEditingTeamId, firstEditingTeamIdOnPostgres),
  twin(hasImportedNote, hasImportedNoteOnPostgres),
)

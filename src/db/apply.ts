/**
 * What `trellis apply` asks the database beyond the other domains' services: every user's and project's name
 * (for the "not in file" report), a project's members, whom record writes are attributed to, and the notes it
 * imports. Called inside apply's one IMMEDIATE transaction.
 */
import { and, asc, eq, isNull, or } from 'drizzle-orm'
import type { Db } from './open.ts'
import { collectionPermissions, notes, projectMembers, projects, teams, users } from './schema.ts'
import type { Micros } from '../lib/time.ts'

/** Every user's email, in storage order. */
export function listUserEmails(db: Db): string[] {
  return db.select({ email: users.email }).from(users).all().map((u) => u.email)
}

/** Every project's name, in storage order. */
export function listProjectNames(db: Db): string[] {
  return db.select({ name: projects.name }).from(projects).all().map((p) => p.name)
}

/** The emails of a project's members, in storage order. */
export function listProjectMemberEmails(db: Db, projectId: number): string[] {
  return db
    .select({ email: users.email })
    .from(projectMembers)
    .innerJoin(users, eq(users.id, projectMembers.userId))
    .where(eq(projectMembers.projectId, projectId))
    .all()
    .map((m) => m.email)
}

/** The project's first admin (lowest user id); undefined when it has none. */
export function firstProjectAdminId(db: Db, projectId: number): number | undefined {
  return db
    .select({ id: projectMembers.userId })
    .from(projectMembers)
    .where(and(eq(projectMembers.projectId, projectId), eq(projectMembers.role, 'admin')))
    .orderBy(asc(projectMembers.userId))
    .limit(1)
    .get()?.id
}

/** The project's oldest team allowed to edit the collection (no permission row means allowed); undefined when none. */
export function firstEditingTeamId(db: Db, projectId: number, collectionId: number): number | undefined {
  return db
    .select({ id: teams.id })
    .from(teams)
    .leftJoin(collectionPermissions, and(eq(collectionPermissions.teamId, teams.id), eq(collectionPermissions.collectionId, collectionId)))
    .where(and(eq(teams.projectId, projectId), or(isNull(collectionPermissions.canEdit), eq(collectionPermissions.canEdit, true))))
    .orderBy(asc(teams.id))
    .limit(1)
    .get()?.id
}

/** An imported note's identity: (environment, record, user, title), and its creation time when the file gives one. */
export interface ImportedNoteKey {
  environmentId: number
  recordId: string
  userId: number
  title: string
  createdAt?: Micros
}

export function hasImportedNote(db: Db, key: ImportedNoteKey): boolean {
  const conditions = [eq(notes.environmentId, key.environmentId), eq(notes.recordId, key.recordId), eq(notes.userId, key.userId), eq(notes.title, key.title)]
  if (key.createdAt !== undefined) conditions.push(eq(notes.createdAt, key.createdAt))
  return db.select({ id: notes.id }).from(notes).where(and(...conditions)).limit(1).get() !== undefined
}


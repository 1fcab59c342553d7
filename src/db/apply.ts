/**
 * What `trellis apply` asks the database beyond the other domains' services: every user's and project's name
 * (for the "not in file" report), a project's members, whom record writes are attributed to, and the notes it
 * imports. Called inside apply's one write transaction. The lists come in the order of their unique indexes (emails
 * and names byte by byte, members by user id), so apply reports alike on both stores.
 */
import { and, asc, eq, isNull, or } from 'drizzle-orm'
import type { Op } from './op.ts'
import { constantLimit, row, rows } from './query.ts'
import type { Micros } from '../lib/time.ts'

/** Every user's email, byte-wise. */
export function* listUserEmails(): Op<string[]> {
  const found = yield* rows(({ db, t, byteOrder }) => db.select({ email: t.users.email }).from(t.users).orderBy(byteOrder(t.users.email)))
  return found.map((u) => u.email)
}

/** Every project's name, byte-wise. */
export function* listProjectNames(): Op<string[]> {
  const found = yield* rows(({ db, t, byteOrder }) => db.select({ name: t.projects.name }).from(t.projects).orderBy(byteOrder(t.projects.name)))
  return found.map((p) => p.name)
}

/** The emails of a project's members, by user id. */
export function* listProjectMemberEmails(projectId: number): Op<string[]> {
  const members = yield* rows(({ db, t }) =>
    db
      .select({ email: t.users.email })
      .from(t.projectMembers)
      .innerJoin(t.users, eq(t.users.id, t.projectMembers.userId))
      .where(eq(t.projectMembers.projectId, projectId))
      .orderBy(asc(t.projectMembers.userId)),
  )
  return members.map((m) => m.email)
}

/** The project's first admin (lowest user id); undefined when it has none. */
export function* firstProjectAdminId(projectId: number): Op<number | undefined> {
  const admin = yield* row(({ db, t }) =>
    db
      .select({ id: t.projectMembers.userId })
      .from(t.projectMembers)
      .where(and(eq(t.projectMembers.projectId, projectId), eq(t.projectMembers.role, 'admin')))
      .orderBy(asc(t.projectMembers.userId))
      .limit(constantLimit(1)),
  )
  return admin?.id
}

/** The project's oldest team allowed to edit the collection (no permission row means allowed); undefined when none. */
export function* firstEditingTeamId(projectId: number, collectionId: number): Op<number | undefined> {
  const team = yield* row(({ db, t }) =>
    db
      .select({ id: t.teams.id })
      .from(t.teams)
      .leftJoin(t.collectionPermissions, and(eq(t.collectionPermissions.teamId, t.teams.id), eq(t.collectionPermissions.collectionId, collectionId)))
      .where(and(eq(t.teams.projectId, projectId), or(isNull(t.collectionPermissions.canEdit), eq(t.collectionPermissions.canEdit, true))))
      .orderBy(asc(t.teams.id))
      .limit(constantLimit(1)),
  )
  return team?.id
}

/** An imported note's identity: (environment, record, user, title), and its creation time when the file gives one. */
export interface ImportedNoteKey {
  environmentId: number
  recordId: string
  userId: number
  title: string
  createdAt?: Micros
}

export function* hasImportedNote(key: ImportedNoteKey): Op<boolean> {
  const found = yield* row(({ db, t }) =>
    db
      .select({ id: t.notes.id })
      .from(t.notes)
      .where(
        and(
          eq(t.notes.environmentId, key.environmentId),
          eq(t.notes.recordId, key.recordId),
          eq(t.notes.userId, key.userId),
          eq(t.notes.title, key.title),
          key.createdAt === undefined ? undefined : eq(t.notes.createdAt, key.createdAt),
        ),
      )
      .limit(constantLimit(1)),
  )
  return found !== undefined
}

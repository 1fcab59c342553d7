/**
 * What the notes domain asks the database: a page of note ids, the notes and threads of a page, and the writes
 * (note, message, title / archive / updatedAt). The list and render statements and the note insert (the
 * executor's `note` step creates notes too) are prepared once per connection. Call the writes in a write transaction.
 */
import { asc, eq, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import type { Micros, Millis } from '../lib/time.ts'
import { latestCreatedAt, nextCreatedAt } from './monotonic.ts'
import type { Db } from './open.ts'
import { createdAtBounds, pageIds } from './pages.ts'
import { inJsonArray, prepared } from './prepared.ts'
import { collections, environments, noteMessages, notes, teams, users } from './schema.ts'
import { userColumns } from './users.ts'

/** The notes list of an environment: its createdAt order and id bounds. */
export const NOTE_TIMES = { name: 'notes', table: notes, id: notes.id, createdAt: notes.createdAt, scope: notes.environmentId }

export type NoteRow = typeof notes.$inferSelect

/** A notes page's `column = value` filters (names already resolved to ids); undefined ones are left out. */
export interface NotePageFilters {
  userId?: number
  teamId?: number
  collectionId?: number
  recordId?: string
}

/**
 * Ids of one page of an environment's notes (limit + 1 rows), newest first. `createdAt` filters become id bounds
 * while the environment's notes are in time order (environments.notesInTimeOrder), comparisons otherwise.
 */
export function pageNoteIds(db: Db, environmentId: number, filters: NotePageFilters, dates: DateFilter[], limit: number): number[] {
  const inTimeOrder = prepared(db, 'notes.in-time-order', () =>
    db.select({ ordered: environments.notesInTimeOrder }).from(environments).where(eq(environments.id, sql.placeholder('id'))).prepare(),
  ).all({ id: environmentId })[0]?.ordered
  const byId = inTimeOrder ? dates.filter((d) => d.field === 'createdAt') : []
  return pageIds(
    db,
    {
      name: 'notes',
      table: notes,
      id: notes.id,
      equal: {
        environmentId: [notes.environmentId, environmentId],
        userId: [notes.userId, filters.userId],
        teamId: [notes.teamId, filters.teamId],
        collectionId: [notes.collectionId, filters.collectionId],
        recordId: [notes.recordId, filters.recordId],
      },
      bounds: createdAtBounds(db, byId, NOTE_TIMES, environmentId),
      dates: {
        filters: dates.filter((d) => !byId.includes(d)),
        columns: { createdAt: notes.createdAt, updatedAt: notes.updatedAt, archivedAt: notes.archivedAt },
      },
    },
    limit,
  )
}

/** The notes with these ids (any order), each with its author and the names of its environment, team and collection. */
export function findNotesForRender(db: Db, ids: number[]) {
  return prepared(db, 'notes.render', () =>
    db
      .select({ note: notes, user: userColumns, environment: environments.name, team: teams.name, collection: collections.name })
      .from(notes)
      .innerJoin(users, eq(users.id, notes.userId))
      .innerJoin(environments, eq(environments.id, notes.environmentId))
      .innerJoin(teams, eq(teams.id, notes.teamId))
      .leftJoin(collections, eq(collections.id, notes.collectionId))
      .where(inJsonArray(notes.id, 'ids'))
      .prepare(),
  ).all({ ids: JSON.stringify(ids) })
}

/** The messages of these notes with their authors, by note then oldest first. */
export function findNoteMessagesForRender(db: Db, noteIds: number[]) {
  return prepared(db, 'notes.render.messages', () =>
    db
      .select({ noteId: noteMessages.noteId, content: noteMessages.content, createdAt: noteMessages.createdAt, user: userColumns })
      .from(noteMessages)
      .innerJoin(users, eq(users.id, noteMessages.userId))
      .where(inJsonArray(noteMessages.noteId, 'ids'))
      .orderBy(asc(noteMessages.noteId), asc(noteMessages.id))
      .prepare(),
  ).all({ ids: JSON.stringify(noteIds) })
}

/** `createdAt` for a new note of the environment: strictly after every earlier note there (DESIGN §3). */
export function nextNoteCreatedAt(db: Db, environmentId: number, now: Millis): Micros {
  return nextCreatedAt(db, NOTE_TIMES, environmentId, now)
}

/** The newest note's createdAt in the environment, or null when it has none. */
export function latestNoteCreatedAt(db: Db, environmentId: number): Micros | null {
  return latestCreatedAt(db, NOTE_TIMES, environmentId)
}

/** Records that the environment's notes are no longer in id/time order (lists take the exact slow path for good). */
export function markNotesOutOfTimeOrder(db: Db, environmentId: number): void {
  db.update(environments).set({ notesInTimeOrder: false }).where(eq(environments.id, environmentId)).run()
}

export interface NewNoteRow {
  environmentId: number
  teamId: number
  collectionId: number
  recordId: string
  title: string
  userId: number
  /** Also its `updatedAt`. */
  createdAt: Micros
}

const p = (name: string) => sql.placeholder(name)

/** Inserts a note (prepared); returns the row. */
export function insertNote(db: Db, note: NewNoteRow): NoteRow {
  const [row] = prepared(db, 'notes.insert', () =>
    db
      .insert(notes)
      .values({
        environmentId: p('environmentId'),
        teamId: p('teamId'),
        collectionId: p('collectionId'),
        recordId: p('recordId'),
        title: p('title'),
        userId: p('userId'),
        createdAt: p('createdAt'),
        updatedAt: p('createdAt'),
      })
      .returning()
      .prepare(),
  ).all({ ...note })
  return row!
}

/** Appends a message (already sanitised) to a note's thread (prepared). */
export function insertNoteMessage(db: Db, message: { noteId: number; userId: number; content: string; createdAt: Micros }): void {
  prepared(db, 'note-messages.insert', () =>
    db.insert(noteMessages).values({ noteId: p('noteId'), userId: p('userId'), content: p('content'), createdAt: p('createdAt') }).prepare(),
  ).run({ ...message })
}

/** The note with this id, in whatever environment; undefined when there is none. */
export function findNoteById(db: Db, id: number): NoteRow | undefined {
  return db.select().from(notes).where(eq(notes.id, id)).get()
}

/** Sets the given fields of a note. */
export function updateNoteRow(db: Db, id: number, fields: Partial<Pick<NoteRow, 'title' | 'archivedAt' | 'updatedAt'>>): void {
  db.update(notes).set(fields).where(eq(notes.id, id)).run()
}

/** A note with its messages, at the times given. */
export function insertImportedNote(
  db: Db,
  note: Omit<typeof notes.$inferInsert, 'id'>,
  messages: { userId: number; content: string; createdAt: Micros }[],
): void {
  const [row] = db.insert(notes).values(note).returning({ id: notes.id }).all()
  for (const message of messages) insertNoteMessage(db, { noteId: row!.id, ...message })
}

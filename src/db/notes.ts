/**
 * What the notes domain asks the database: a page of note ids, the notes and threads of a page, and the writes
 * (note, message, title / archive / updatedAt). Every statement a request or an executor step runs (the list,
 * render, read and write statements; the executor's `note` step creates notes too) is prepared once per connection,
 * the render rows shaped here. Call the writes in a write transaction.
 */
import { eq, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import type { Micros, Millis } from '../lib/time.ts'
import { latestCreatedAt, nextCreatedAt } from './monotonic.ts'
import type { Db } from './open.ts'
import { createdAtBounds, pageIds } from './pages.ts'
import { prepared, statementOn } from './prepared.ts'
import { environments, noteMessages, notes } from './schema.ts'

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

type UserColumns = { id: number; username: string; email: string }

const NOTES_TO_RENDER = `SELECT n.id, n.environment_id, n.team_id, n.collection_id, n.record_id, n.title, n.user_id, n.created_at,
    n.updated_at, n.archived_at, u.username, u.email, e.name, t.name, c.name
  FROM notes n
    JOIN users u ON u.id = n.user_id
    JOIN environments e ON e.id = n.environment_id
    JOIN teams t ON t.id = n.team_id
    LEFT JOIN collections c ON c.id = n.collection_id
  WHERE n.id IN (SELECT value FROM json_each(?))`

type N = NoteRow
/** A render row's values in NOTES_TO_RENDER's column order (the PostgreSQL twin selects the same). */
export type NoteRenderValues = [N['id'], N['environmentId'], N['teamId'], N['collectionId'], N['recordId'], N['title'], N['userId'], N['createdAt'], N['updatedAt'], N['archivedAt'], string, string, string, string, string | null]

/**
 * The notes with these ids (any order), each with its author and the names of its environment, team and collection.
 * Prepared once per connection; the rows are shaped here (Drizzle's nested row mapping cost twice the query).
 */
export function findNotesForRender(db: Db, ids: number[]): NoteToRender[] {
  return (statementOn(db, 'notes.render', NOTES_TO_RENDER).values(JSON.stringify(ids)) as NoteRenderValues[]).map(noteToRender)
}

export type NoteToRender = { note: NoteRow; user: UserColumns; environment: string; team: string; collection: string | null }

/** One render row as the notes service reads it. */
export function noteToRender([id, environmentId, teamId, collectionId, recordId, title, userId, createdAt, updatedAt, archivedAt, username, email, environment, team, collection]: NoteRenderValues): NoteToRender {
  return {
    note: { id, environmentId, teamId, collectionId, recordId, title, userId, createdAt, updatedAt, archivedAt },
    user: { id: userId, username, email },
    environment,
    team,
    collection,
  }
}

const MESSAGES_TO_RENDER = `SELECT m.note_id, m.content, m.created_at, u.id, u.username, u.email
  FROM note_messages m JOIN users u ON u.id = m.user_id
  WHERE m.note_id IN (SELECT value FROM json_each(?))
  ORDER BY m.note_id, m.id`

type MessageRow = typeof noteMessages.$inferSelect
/** A message render row's values in MESSAGES_TO_RENDER's column order (the PostgreSQL twin selects the same). */
export type MessageRenderValues = [number, string, MessageRow['createdAt'], number, string, string]
export type MessageToRender = { noteId: number; content: string; createdAt: MessageRow['createdAt']; user: UserColumns }

/** The messages of these notes with their authors, by note then oldest first (prepared; shaped here). */
export function findNoteMessagesForRender(db: Db, noteIds: number[]): MessageToRender[] {
  return (statementOn(db, 'notes.render.messages', MESSAGES_TO_RENDER).values(JSON.stringify(noteIds)) as MessageRenderValues[]).map(messageToRender)
}

export function messageToRender([noteId, content, createdAt, id, username, email]: MessageRenderValues): MessageToRender {
  return { noteId, content, createdAt, user: { id, username, email } }
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

/** The note with this id, in whatever environment; undefined when there is none (prepared: note writes and reads ask). */
export function findNoteById(db: Db, id: number): NoteRow | undefined {
  return prepared(db, 'notes.by-id', () => db.select().from(notes).where(eq(notes.id, sql.placeholder('id'))).prepare()).all({ id })[0]
}

/** Sets the given fields of a note (prepared once per set of fields). */
export function updateNoteRow(db: Db, id: number, fields: Partial<Pick<NoteRow, 'title' | 'archivedAt' | 'updatedAt'>>): void {
  const names = (['title', 'archivedAt', 'updatedAt'] as const).filter((name) => fields[name] !== undefined)
  prepared(db, `notes.update.${names.join(',')}`, () =>
    db
      .update(notes)
      .set(Object.fromEntries(names.map((name) => [name, sql.placeholder(name)])))
      .where(eq(notes.id, sql.placeholder('id')))
      .prepare(),
  ).run({ ...fields, id })
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

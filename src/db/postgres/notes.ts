/**
 * The notes domain's storage on PostgreSQL: twins of src/db/notes.ts. Pages and render rows answer exactly what the
 * SQLite functions answer (the render rows shaped by the same functions, ids in ascending order as SQLite's
 * `IN (json_each)` gives them). Times with several writers:
 * - a note's createdAt is the list rule under the environment's notes lock (./monotonic.ts), and the latest note time
 *   an import compares with is read under the same lock, so no note commits in between;
 * - a message's createdAt is what the service computed (the clock, never before the note's last update) or, when
 *   another writer of the same note committed a later update meanwhile, that update's time: messages are inserted
 *   under the note's message lock, so thread order (by id) and message times agree as on SQLite;
 * - a note's updatedAt never moves back (`greatest`): on SQLite the service always writes a time at or after the one
 *   it read in the same transaction, so this only differs when another instance committed in between.
 */
import { eq, sql } from 'drizzle-orm'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Micros, Millis } from '../../lib/time.ts'
import {
  findNoteById,
  findNoteMessagesForRender,
  findNotesForRender,
  insertImportedNote,
  insertNote,
  insertNoteMessage,
  latestNoteCreatedAt,
  markNotesOutOfTimeOrder,
  messageToRender,
  nextNoteCreatedAt,
  noteToRender,
  pageNoteIds,
  updateNoteRow,
  type MessageRenderValues,
  type NewNoteRow,
  type NotePageFilters,
  type NoteRenderValues,
  type NoteRow,
} from '../notes.ts'
import type { notes as sqliteNotes } from '../schema.ts'
import { latestCreatedAtOnPostgres, lockListScope, nextCreatedAtOnPostgres, PG_LISTS } from './monotonic.ts'
import { createdAtBoundsOnPostgres, pageIdsOnPostgres, valuesOf } from './pages.ts'
import { placeholders, preparedOn } from './prepared.ts'
import { environments, noteMessages, notes } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const NOTE_TIMES = { name: 'notes', table: notes, id: notes.id, createdAt: notes.createdAt, scope: notes.environmentId }

async function pageNoteIdsOnPostgres(db: PgDb, environmentId: number, filters: NotePageFilters, dates: DateFilter[], limit: number): Promise<number[]> {
  const [environment] = await preparedOn(db, 'notes.in-time-order', (db) =>
    db.select({ ordered: environments.notesInTimeOrder }).from(environments).where(eq(environments.id, sql.placeholder('id'))),
  ).execute({ id: environmentId })
  const byId = environment?.ordered ? dates.filter((d) => d.field === 'createdAt') : []
  return pageIdsOnPostgres(
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
      bounds: await createdAtBoundsOnPostgres(db, byId, NOTE_TIMES, environmentId),
      dates: {
        filters: dates.filter((d) => !byId.includes(d)),
        columns: { createdAt: notes.createdAt, updatedAt: notes.updatedAt, archivedAt: notes.archivedAt },
      },
    },
    limit,
  )
}

const NOTES_TO_RENDER = `SELECT n.id::float8, n.environment_id::float8, n.team_id::float8, n.collection_id::float8, n.record_id, n.title,
    n.user_id::float8, n.created_at::float8, n.updated_at::float8, n.archived_at::float8, u.username, u.email, e.name, t.name, c.name
  FROM notes n
    JOIN users u ON u.id = n.user_id
    JOIN environments e ON e.id = n.environment_id
    JOIN teams t ON t.id = n.team_id
    LEFT JOIN collections c ON c.id = n.collection_id
  WHERE n.id = ANY($1::int8[])
  ORDER BY n.id`

async function findNotesForRenderOnPostgres(db: PgDb, ids: number[]) {
  return (await valuesOf<NoteRenderValues>(db, NOTES_TO_RENDER, [ids])).map(noteToRender)
}

const MESSAGES_TO_RENDER = `SELECT m.note_id::float8, m.content, m.created_at::float8, u.id::float8, u.username, u.email
  FROM note_messages m JOIN users u ON u.id = m.user_id
  WHERE m.note_id = ANY($1::int8[])
  ORDER BY m.note_id, m.id`

async function findNoteMessagesForRenderOnPostgres(db: PgDb, noteIds: number[]) {
  return (await valuesOf<MessageRenderValues>(db, MESSAGES_TO_RENDER, [noteIds])).map(messageToRender)
}

const nextNoteCreatedAtOnPostgres = (db: PgDb, environmentId: number, now: Millis) => nextCreatedAtOnPostgres(db, PG_LISTS.notes, environmentId, now)

/** Under the environment's notes lock: an import compares its time with the latest, and inserts before anyone else. */
async function latestNoteCreatedAtOnPostgres(db: PgDb, environmentId: number): Promise<Micros | null> {
  await lockListScope(db, PG_LISTS.notes, environmentId)
  return latestCreatedAtOnPostgres(db, PG_LISTS.notes, environmentId)
}

async function markNotesOutOfTimeOrderOnPostgres(db: PgDb, environmentId: number): Promise<void> {
  await db.update(environments).set({ notesInTimeOrder: false }).where(eq(environments.id, environmentId))
}

async function insertNoteOnPostgres(db: PgDb, note: NewNoteRow): Promise<NoteRow> {
  const [row] = await preparedOn(db, 'notes.insert', (db) =>
    db
      .insert(notes)
      .values({ ...placeholders('environmentId', 'teamId', 'collectionId', 'recordId', 'title', 'userId', 'createdAt'), updatedAt: sql.placeholder('createdAt') })
      .returning(),
  ).execute({ ...note })
  return row!
}

/** The message at its time, or at the note's last update when another writer committed a later one (file comment). */
async function insertNoteMessageOnPostgres(db: PgDb, message: { noteId: number; userId: number; content: string; createdAt: Micros }): Promise<void> {
  await lockListScope(db, PG_LISTS.noteMessages, message.noteId)
  const [note] = await preparedOn(db, 'notes.updated-at', (db) => db.select({ updatedAt: notes.updatedAt }).from(notes).where(eq(notes.id, sql.placeholder('id')))).execute({
    id: message.noteId,
  })
  const createdAt = note !== undefined && note.updatedAt > message.createdAt ? note.updatedAt : message.createdAt
  await preparedOn(db, 'note-messages.insert', (db) => db.insert(noteMessages).values(placeholders('noteId', 'userId', 'content', 'createdAt'))).execute({ ...message, createdAt })
}

async function findNoteByIdOnPostgres(db: PgDb, id: number): Promise<NoteRow | undefined> {
  const [row] = await preparedOn(db, 'notes.by-id', (db) => db.select().from(notes).where(eq(notes.id, sql.placeholder('id')))).execute({ id })
  return row
}

async function updateNoteRowOnPostgres(db: PgDb, id: number, fields: Partial<Pick<NoteRow, 'title' | 'archivedAt' | 'updatedAt'>>): Promise<void> {
  const names = (['title', 'archivedAt', 'updatedAt'] as const).filter((name) => fields[name] !== undefined)
  await preparedOn(db, `notes.update.${names.join(',')}`, (db) =>
    db
      .update(notes)
      .set(
        Object.fromEntries(
          names.map((name) => [name, name === 'updatedAt' ? sql`greatest(${notes.updatedAt}, ${sql.placeholder(name)}::int8)` : sql.placeholder(name)]),
        ),
      )
      .where(eq(notes.id, sql.placeholder('id'))),
  ).execute({ ...fields, id })
}

/** An imported note and its messages at exactly the times given (the import already holds the notes lock). */
async function insertImportedNoteOnPostgres(
  db: PgDb,
  note: Omit<typeof sqliteNotes.$inferInsert, 'id'>,
  messages: { userId: number; content: string; createdAt: Micros }[],
): Promise<void> {
  const [row] = await db.insert(notes).values(note).returning({ id: notes.id })
  if (messages.length > 0) await db.insert(noteMessages).values(messages.map((m) => ({ noteId: row!.id, ...m })))
}

export const NOTES_TWINS = twins(
  twin(pageNoteIds, pageNoteIdsOnPostgres),
  twin(findNotesForRender, findNotesForRenderOnPostgres),
  twin(findNoteMessagesForRender, findNoteMessagesForRenderOnPostgres),
  twin(nextNoteCreatedAt, nextNoteCreatedAtOnPostgres),
  twin(latestNoteCreatedAt, latestNoteCreatedAtOnPostgres),
  twin(markNotesOutOfTimeOrder, markNotesOutOfTimeOrderOnPostgres),
  twin(insertNote, insertNoteOnPostgres),
  twin(insertNoteMessage, insertNoteMessageOnPostgres),
  twin(findNoteById, findNoteByIdOnPostgres),
  twin(updateNoteRow, updateNoteRowOnPostgres),
  twin(insertImportedNote, insertImportedNoteOnPostgres),
)

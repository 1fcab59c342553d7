/**
 * The notes domain's own PostgreSQL steps (twins of src/db/notes.ts; every other notes query is written once there):
 * - a message's createdAt is what the service computed (the clock, never before the note's last update) or, when
 *   another writer of the same note committed a later update meanwhile, that update's time: messages are inserted
 *   under the note's message lock, so thread order (by id) and message times agree as on SQLite;
 * - the render rows answer exactly what the SQLite functions answer (shaped by the same functions, ids in ascending
 *   order as SQLite's `IN (json_each)` gives them).
 */
import { eq, sql } from 'drizzle-orm'
import type { Micros } from '../../lib/time.ts'
import {
  findNoteMessagesForRender,
  findNotesForRender,
  messageToRender,
  noteMessageTime,
  noteToRender,
  type MessageRenderValues,
  type NoteRenderValues,
} from '../notes.ts'
import { lockListScope, PG_LISTS } from './monotonic.ts'
import { valuesOf } from './pages.ts'
import { preparedOn } from './prepared.ts'
import { notes } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

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

/** Under the note's message lock: the message's time, or the note's last update when another writer committed a later one. */
async function noteMessageTimeOnPostgres(db: PgDb, noteId: number, createdAt: Micros): Promise<Micros> {
  await lockListScope(db, PG_LISTS.noteMessages, noteId)
  const [note] = await preparedOn(db, 'notes.updated-at', (db) => db.select({ updatedAt: notes.updatedAt }).from(notes).where(eq(notes.id, sql.placeholder('id')))).execute({
    id: noteId,
  })
  return note !== undefined && note.updatedAt > createdAt ? note.updatedAt : createdAt
}

export const NOTES_TWINS = twins(
  // per-dialect: raw render rows as arrays (SQLite: json_each, no row mapping; PostgreSQL: = ANY, int8 as float8).
  twin(findNotesForRender, findNotesForRenderOnPostgres),
  // per-dialect: raw render rows as arrays (as above).
  twin(findNoteMessagesForRender, findNoteMessagesForRenderOnPostgres),
  // per-dialect: another instance may have moved the note's updatedAt; SQLite's one writer cannot, so it reads nothing.
  twin(noteMessageTime, noteMessageTimeOnPostgres),
)

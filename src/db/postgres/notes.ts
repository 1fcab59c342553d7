/**
 * The notes domain's own PostgreSQL step (the twin of src/db/notes.ts's `noteMessageTime`; every notes query is
 * written once there): a message's createdAt is what the service computed (the clock, never before the note's last
 * update) or, when another writer of the same note committed a later update meanwhile, that update's time: messages
 * are inserted under the note's message lock, so thread order (by id) and message times agree as on SQLite.
 */
import { eq, sql } from 'drizzle-orm'
import type { Micros } from '../../lib/time.ts'
import { noteMessageTime } from '../notes.ts'
import { lockListScope, PG_LISTS } from './monotonic.ts'
import { preparedOn } from './prepared.ts'
import { notes } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

/** Under the note's message lock: the message's time, or the note's last update when another writer committed a later one. */
async function noteMessageTimeOnPostgres(db: PgDb, noteId: number, createdAt: Micros): Promise<Micros> {
  await lockListScope(db, PG_LISTS.noteMessages, noteId)
  const [note] = await preparedOn(db, 'notes.updated-at', (db) => db.select({ updatedAt: notes.updatedAt }).from(notes).where(eq(notes.id, sql.placeholder('id')))).execute({
    id: noteId,
  })
  return note !== undefined && note.updatedAt > createdAt ? note.updatedAt : createdAt
}

export const NOTES_TWINS = twins(
  // per-dialect: another instance may have moved the note's updatedAt; SQLite's one writer cannot, so it reads nothing.
  twin(noteMessageTime, noteMessageTimeOnPostgres),
)

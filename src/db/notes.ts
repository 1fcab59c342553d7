/**
 * What the notes domain asks the database: a page of note ids, the notes and threads of a page, and the writes
 * (note, message, title / archive / updatedAt), written once for both stores (./query.ts). Every statement a request
 * or an executor step runs (the list, render, read and write statements; the executor's `note` step creates notes
 * too) is built once per dialect and connection, the render rows shaped here. Call the writes in a write transaction.
 */
import { eq, getTableColumns, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import { type Micros, type Millis, microsFromMillis } from '../lib/time.ts'
import { createdAtAfterLatest, holdListScopeToInsert, latestCreatedAt, listTimeWritten, nextCreatedAt } from './monotonic.ts'
import { type Op, plan, runPlan } from './op.ts'
import type { Db } from './dialect.ts'
import { lockListScope, PG_LISTS, sendRaw } from './postgres/monotonic.ts'
import { preparedOn } from './postgres/prepared.ts'
import { notes as pgNotes } from './postgres/schema.ts'
import { createdAtBounds, pageIds, rawNumber, statementOfShape, type TimeOrderedList } from './pages.ts'
import { exec, inserted, placeholders, row, setPlaceholders, statement } from './query.ts'
import type { noteMessages, notes } from './schema.ts'
import { type ChangeOrigin, recordWorkflowEvents, subscribersOf } from './workflow-events.ts'

/** The notes list of an environment: its createdAt order and id bounds. */
const NOTE_TIMES = { name: 'notes', table: 'notes', scope: 'environmentId', watermark: 'notes' } as const satisfies TimeOrderedList

export type NoteRow = typeof notes.$inferSelect

/** A notes page's `column = value` filters (names already resolved to ids); undefined ones are left out. */
export interface NotePageFilters {
  userId?: number
  teamId?: number
  collectionId?: number
  recordId?: string
}

const IN_TIME_ORDER = statement('notes.in-time-order', ({ db, t }) =>
  db.select({ ordered: t.environments.notesInTimeOrder }).from(t.environments).where(eq(t.environments.id, sql.placeholder('id'))),
)

/**
 * Ids of one page of an environment's notes (limit + 1 rows), newest first. `createdAt` filters become id bounds
 * while the environment's notes are in time order (environments.notesInTimeOrder), comparisons otherwise.
 */
export function* pageNoteIds(environmentId: number, filters: NotePageFilters, dates: DateFilter[], limit: number): Op<number[]> {
  const inTimeOrder = (yield* IN_TIME_ORDER.row({ id: environmentId }))?.ordered
  const byId = inTimeOrder ? dates.filter((d) => d.field === 'createdAt') : []
  const { userId, teamId, collectionId, recordId } = filters
  const equal = { environmentId, userId, teamId, collectionId, recordId }
  const bounds = yield* createdAtBounds(byId, NOTE_TIMES, environmentId)
  return yield* pageIds({ name: 'notes', table: 'notes', equal, bounds, dates: dates.filter((d) => !byId.includes(d)), watermark: NOTE_TIMES.watermark }, limit)
}

type UserColumns = { id: number; username: string; email: string }

/**
 * The notes are read by id before anything is joined to them (on PostgreSQL a materialized CTE, planned apart from the
 * joins: `Dialect.materialized`), so the read is a seek of each id whatever the statistics say. Planned as one join,
 * with no statistics PostgreSQL walked the environment's notes through another index (by team, by author), each
 * environment, team and user looking like one row.
 */
const NOTES_TO_RENDER = statement('notes.render', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`WITH n AS ${d.materialized} (SELECT * FROM notes WHERE ${d.inJsonArray(sql.raw('id'), 'ids', 'integer')})
  SELECT ${n('n.id')}, ${n('n.environment_id')}, ${n('n.team_id')}, ${n('n.collection_id')}, n.record_id, n.title, ${n('n.user_id')},
    ${n('n.created_at')}, ${n('n.updated_at')}, ${n('n.archived_at')}, u.username, u.email, e.name, t.name, c.name
  FROM n
    JOIN users u ON u.id = n.user_id
    JOIN environments e ON e.id = n.environment_id
    JOIN teams t ON t.id = n.team_id
    LEFT JOIN collections c ON c.id = n.collection_id
  ORDER BY n.id`)
})

type N = NoteRow
/** A render row's values in NOTES_TO_RENDER's column order. */
export type NoteRenderValues = [N['id'], N['environmentId'], N['teamId'], N['collectionId'], N['recordId'], N['title'], N['userId'], N['createdAt'], N['updatedAt'], N['archivedAt'], string, string, string, string, string | null]

/**
 * The notes with these ids (by id), each with its author and the names of its environment, team and collection.
 * Raw rows shaped here (Drizzle's nested row mapping cost twice the query).
 */
export function* findNotesForRender(ids: number[]): Op<NoteToRender[]> {
  return ((yield* NOTES_TO_RENDER.rows({ ids: JSON.stringify(ids) })) as NoteRenderValues[]).map(noteToRender)
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

const MESSAGES_TO_RENDER = statement('notes.render.messages', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT ${n('m.note_id')}, m.content, ${n('m.created_at')}, ${n('u.id')}, u.username, u.email
  FROM note_messages m JOIN users u ON u.id = m.user_id
  WHERE ${d.inJsonArray(sql.raw('m.note_id'), 'ids', 'integer')}
  ORDER BY m.note_id, m.id`)
})

type MessageRow = typeof noteMessages.$inferSelect
/** A message render row's values in MESSAGES_TO_RENDER's column order. */
export type MessageRenderValues = [number, string, MessageRow['createdAt'], number, string, string]
export type MessageToRender = { noteId: number; content: string; createdAt: MessageRow['createdAt']; user: UserColumns }

/** The messages of these notes with their authors, by note then oldest first (raw rows shaped here). */
export function* findNoteMessagesForRender(noteIds: number[]): Op<MessageToRender[]> {
  return ((yield* MESSAGES_TO_RENDER.rows({ ids: JSON.stringify(noteIds) })) as MessageRenderValues[]).map(messageToRender)
}

export function messageToRender([noteId, content, createdAt, id, username, email]: MessageRenderValues): MessageToRender {
  return { noteId, content, createdAt, user: { id, username, email } }
}

/** `createdAt` for a new note of the environment: strictly after every earlier note there (DESIGN §3). */
export function nextNoteCreatedAt(environmentId: number, now: Millis): Op<Micros> {
  return nextCreatedAt(NOTE_TIMES, environmentId, now)
}

/**
 * The newest note's createdAt in the environment, or null when it has none: an import compares its time with it. On
 * PostgreSQL a note committed meanwhile may still land before an imported one; the lists' pass then finds the import
 * out of order and says so (`keepImportedNoteTime`).
 */
export function latestNoteCreatedAt(environmentId: number): Op<Micros | null> {
  return latestCreatedAt(NOTE_TIMES, environmentId)
}

/** Records that the environment's notes are no longer in id/time order (lists take the exact slow path for good). */
export function markNotesOutOfTimeOrder(environmentId: number): Op<void> {
  return exec(({ db, t }) => db.update(t.environments).set({ notesInTimeOrder: false }).where(eq(t.environments.id, environmentId)))
}

/** A new note's columns (its `createdAt`, also its `updatedAt`, is dated by the insert). */
export interface NewNoteRow {
  environmentId: number
  teamId: number
  collectionId: number
  recordId: string
  title: string
  userId: number
}

const INSERT_NEW_NOTE = statement('notes.insert-new', (d) => {
  const at = createdAtAfterLatest(d, NOTE_TIMES, sql.placeholder('environmentId'), sql.placeholder('now'))
  return d.db
    .insert(d.t.notes)
    .values({ ...placeholders('environmentId', 'teamId', 'collectionId', 'recordId', 'title', 'userId'), createdAt: at, updatedAt: at })
    .returning({ ...getTableColumns(d.t.notes), subscribers: subscribersOf(d.t, d.t.notes) })
})

/**
 * Inserts a new note dated now (`max(now, the environment's newest + 1 µs)`, in the insert itself: ../monotonic.ts
 * `createdAtAfterLatest`), with its `noteAdded` event for the workflows subscribed (./workflow-events.ts; `byRun`: the
 * run whose step adds it); returns the row. On PostgreSQL that time is the note's proposal, under no lock: the lists'
 * pass moves it (and its first message) 1 µs past the note before it when another writer's commit put a later one
 * there, before anyone reads the note in a list (drizzle/postgres/0030_notes_dated_by_the_pass.sql).
 */
export function* insertNewNote(note: NewNoteRow, now: Millis, byRun: ChangeOrigin | null): Op<NoteRow> {
  yield* holdListScopeToInsert(NOTE_TIMES, note.environmentId)
  const { subscribers, ...row } = yield* inserted(INSERT_NEW_NOTE.row({ ...note, now: microsFromMillis(now) }), 'note')
  yield* listTimeWritten(NOTE_TIMES, note.environmentId, row.createdAt as Micros)
  if (subscribers > 0) yield* recordWorkflowEvents(note, [{ recordKey: note.recordId, event: 'noteAdded', noteId: row.id, byRun }], Math.floor(row.createdAt / 1000))
  return row
}

export interface NewNoteMessage {
  noteId: number
  userId: number
  /** Already sanitised. */
  content: string
  createdAt: Micros
}

const INSERT_MESSAGE = statement('note-messages.insert', ({ db, t }) => db.insert(t.noteMessages).values(placeholders('noteId', 'userId', 'content', 'createdAt')))

/** Appends a message to a note's thread, at its time or (another writer updated the note later) at that update's. */
export function* insertNoteMessage(message: NewNoteMessage): Op<void> {
  const createdAt = yield* runPlan(noteMessageTime, message.noteId, message.createdAt)
  yield* INSERT_MESSAGE.send({ ...message, createdAt })
}

/**
 * The first message of a note this transaction inserted, at the note's time: no other writer sees the note before
 * the commit, so nothing can have moved it (no lock, no re-read: on PostgreSQL two round trips fewer under the
 * environment's lock, which the note's insert took).
 */
export function* insertFirstNoteMessage(message: NewNoteMessage): Op<void> {
  yield* INSERT_MESSAGE.send({ ...message })
}

/**
 * A new message's time in the note's thread: what the service computed (the clock, never before the note's last
 * update, read in this transaction: with SQLite's one writer nothing has moved it since). PostgreSQL's, under the
 * note's message lock: the message's time, or the note's last update when another writer committed a later one.
 */
const noteMessageTime = plan({
  sqlite: (_db: Db, _noteId: number, createdAt: Micros): Micros => createdAt,
  postgres: async (db, noteId, createdAt) => {
    await lockListScope(db, PG_LISTS.noteMessages, noteId)
    const [note] = await preparedOn(db, 'notes.updated-at', (db) => db.select({ updatedAt: pgNotes.updatedAt }).from(pgNotes).where(eq(pgNotes.id, sql.placeholder('id')))).execute({
      id: noteId,
    })
    return note !== undefined && note.updatedAt > createdAt ? note.updatedAt : createdAt
  },
  why: "another instance may have moved the note's updatedAt: re-read under the note's lock; SQLite's one writer cannot",
})

const NOTE_BY_ID = statement('notes.by-id', ({ db, t }) => db.select().from(t.notes).where(eq(t.notes.id, sql.placeholder('id'))))

/** The note with this id, in whatever environment; undefined when there is none (a statement: note writes and reads ask). */
export function findNoteById(id: number): Op<NoteRow | undefined> {
  return NOTE_BY_ID.row({ id })
}

type NoteUpdate = Partial<Pick<NoteRow, 'title' | 'archivedAt' | 'updatedAt'>>

/**
 * Sets the given fields of a note (a statement per set of fields). Its updatedAt never moves back: SQLite's service
 * always writes a time at or after the one it read in the same transaction, so that only matters when another
 * instance (PostgreSQL) committed a later update in between.
 */
export function updateNoteRow(id: number, fields: NoteUpdate): Op<void> {
  const names = (['title', 'archivedAt', 'updatedAt'] as const).filter((name) => fields[name] !== undefined)
  const update = statementOfShape(`notes.update.${names.join(',')}`, ({ db, t }) => {
    const later = sql`CASE WHEN ${t.notes.updatedAt} > ${sql.placeholder('updatedAt')} THEN ${t.notes.updatedAt} ELSE ${sql.placeholder('updatedAt')} END`
    const set = { ...setPlaceholders(...names), ...(names.includes('updatedAt') ? { updatedAt: later } : {}) }
    return db.update(t.notes).set(set).where(eq(t.notes.id, sql.placeholder('id')))
  })
  return update.exec({ ...fields, id })
}

/**
 * An imported note keeps the time its file gives. PostgreSQL's pass dates the notes it lists, moving one that is not
 * after the notes before it, unless it is kept (drizzle/postgres/0030_notes_dated_by_the_pass.sql: then, when it is
 * older, the environment's notes are out of time order); SQLite dates nothing after the insert.
 */
const keepImportedNoteTime = plan({
  sqlite: (_db: Db, _noteId: number): void => {},
  postgres: (db, noteId) => sendRaw(db, 'INSERT INTO notes_kept_times (note_id) VALUES ($1)', [noteId]),
  why: "PostgreSQL's pass would date an imported note like any other; SQLite's insert is its date",
})

/** Rows per insert of an import's messages: far below either store's limit of bound values. */
const MESSAGES_PER_INSERT = 1000

/**
 * A note with its messages, at exactly the times given (an import). `keepTime`: the file gave the note's time, which
 * PostgreSQL's pass then keeps (`keepImportedNoteTime`); otherwise it dates the note as any other.
 */
export function* insertImportedNote(note: Omit<typeof notes.$inferInsert, 'id'>, messages: Omit<NewNoteMessage, 'noteId'>[], keepTime: boolean): Op<void> {
  const { id: noteId } = yield* inserted(row(({ db, t }) => db.insert(t.notes).values(note).returning({ id: t.notes.id })), 'note')
  if (keepTime) yield* runPlan(keepImportedNoteTime, noteId)
  for (let i = 0; i < messages.length; i += MESSAGES_PER_INSERT) {
    const batch = messages.slice(i, i + MESSAGES_PER_INSERT).map((m) => ({ noteId, ...m }))
    yield* exec(({ db, t }) => db.insert(t.noteMessages).values(batch))
  }
}

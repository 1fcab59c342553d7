/** Notes and their message threads (spec §2.1–2.4, §4.1; DESIGN §6). */
import { asc, eq, sql } from 'drizzle-orm'
import { latestCreatedAt, nextCreatedAt } from '../../db/monotonic.ts'
import type { Db } from '../../db/open.ts'
import { inJsonArray, prepared } from '../../db/prepared.ts'
import { collections, environments, noteMessages, notes, teams, users } from '../../db/schema.ts'
import { createdAtBounds, pageIds } from '../../db/pages.ts'
import { inIdOrder } from '../../http/list.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Clock } from '../../lib/clock.ts'
import { sanitizeNoteHtml } from '../../lib/html.ts'
import { toIso } from '../../lib/time.ts'
import { type ActivityAction, appendActivityLog } from '../activity-logs/service.ts'
import { resolveNameFilters } from '../projects/service.ts'
import { userColumns, userObject } from '../users/service.ts'

/** The notes list of an environment: its createdAt order and id bounds. */
export const NOTE_TIMES = { name: 'notes', table: notes, id: notes.id, createdAt: notes.createdAt, scope: notes.environmentId }

export type NoteRow = typeof notes.$inferSelect

export interface NoteFilters {
  userEmail?: string
  userId?: number
  teamName?: string
  collectionName?: string
  recordId?: string
}

/** Ids of one page (limit + 1 rows), newest first. Names that match nothing give an empty page. */
export function listNoteIds(db: Db, projectId: number, environmentId: number, filters: NoteFilters, dates: DateFilter[], limit: number): number[] {
  const names = resolveNameFilters(db, projectId, filters)
  if (!names) return []
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
        userId: [notes.userId, names.userId],
        teamId: [notes.teamId, names.teamId],
        collectionId: [notes.collectionId, names.collectionId],
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



/** The spec's note objects for the given ids, in the order given, messages oldest first. */
export function renderNotes(db: Db, ids: number[]) {
  if (ids.length === 0) return []
  const parameters = { ids: JSON.stringify(ids) }
  const rows = prepared(db, 'notes.render', () =>
    db
      .select({ note: notes, user: userColumns, environment: environments.name, team: teams.name, collection: collections.name })
      .from(notes)
      .innerJoin(users, eq(users.id, notes.userId))
      .innerJoin(environments, eq(environments.id, notes.environmentId))
      .innerJoin(teams, eq(teams.id, notes.teamId))
      .leftJoin(collections, eq(collections.id, notes.collectionId))
      .where(inJsonArray(notes.id, 'ids'))
      .prepare(),
  ).all(parameters)
  const messages = prepared(db, 'notes.render.messages', () =>
    db
      .select({ noteId: noteMessages.noteId, content: noteMessages.content, createdAt: noteMessages.createdAt, user: userColumns })
      .from(noteMessages)
      .innerJoin(users, eq(users.id, noteMessages.userId))
      .where(inJsonArray(noteMessages.noteId, 'ids'))
      .orderBy(asc(noteMessages.noteId), asc(noteMessages.id))
      .prepare(),
  ).all(parameters)
  const threads = new Map<number, ReturnType<typeof messageObject>[]>()
  for (const m of messages) {
    const thread = threads.get(m.noteId) ?? []
    thread.push(messageObject(m))
    threads.set(m.noteId, thread)
  }
  return inIdOrder(ids, rows, (r) => r.note.id).map((r) => {
    return {
      object: 'note' as const,
      id: r.note.id,
      title: r.note.title,
      recordId: r.note.recordId,
      createdAt: toIso(r.note.createdAt),
      updatedAt: toIso(r.note.updatedAt),
      ...(r.note.archivedAt !== null ? { archivedAt: toIso(r.note.archivedAt) } : {}),
      user: userObject(r.user),
      environment: { object: 'environment' as const, name: r.environment },
      team: { object: 'team' as const, name: r.team },
      ...(r.collection !== null ? { collection: { object: 'collection' as const, name: r.collection } } : {}),
      messages: threads.get(r.note.id) ?? [],
    }
  })
}

function messageObject(m: { content: string; createdAt: number; user: { id: number; username: string; email: string } }) {
  return { object: 'note-message' as const, content: m.content, createdAt: toIso(m.createdAt), user: userObject(m.user) }
}

/** Who makes a change through the API: the token's user and the token. */
export interface Actor {
  userId: number
  tokenId: number | null
  /** Set when a workflow run acts (DESIGN §7): entries carry `workflow {name, runId, stepName}`. */
  workflow?: { name: string; runId: string; stepName: string }
}

function logNote(db: Db, clock: Clock, note: NoteRow, actor: Actor, action: ActivityAction, label: string) {
  appendActivityLog(db, clock, {
    environmentId: note.environmentId,
    type: 'write',
    action,
    label,
    userId: actor.userId,
    teamId: note.teamId,
    collectionId: note.collectionId,
    tokenId: actor.tokenId,
    recordIds: [note.recordId],
    workflow: actor.workflow,
  })
}

export interface NewNote {
  environmentId: number
  teamId: number
  collectionId: number
  recordId: string
  title: string
  /** HTML of the first message; sanitised here. */
  content: string
}

/** Creates a note with its first message, `createdAt` strictly after every earlier note. Call in a write transaction. */
export function createNote(db: Db, clock: Clock, input: NewNote, actor: Actor): NoteRow {
  const createdAt = nextCreatedAt(db, NOTE_TIMES, input.environmentId, clock.now(), true)
  // Prepared: the executor's `note` step creates notes too, one per run.
  const p = (name: string) => sql.placeholder(name)
  const [note] = prepared(db, 'notes.insert', () =>
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
  ).all({
    environmentId: input.environmentId,
    teamId: input.teamId,
    collectionId: input.collectionId,
    recordId: input.recordId,
    title: input.title,
    userId: actor.userId,
    createdAt,
  })
  prepared(db, 'note-messages.insert', () =>
    db.insert(noteMessages).values({ noteId: p('noteId'), userId: p('userId'), content: p('content'), createdAt: p('createdAt') }).prepare(),
  ).run({ noteId: note!.id, userId: actor.userId, content: sanitizeNoteHtml(input.content), createdAt })
  logNote(db, clock, note!, actor, 'createNote', `created note "${input.title}"`)
  return note!
}

/**
 * Call before inserting a note with a given (imported) createdAt: one older than the environment's newest note
 * breaks id/time order there for good (environments.notesInTimeOrder), and lists switch to the exact slow path.
 */
export function recordImportedNoteTime(db: Db, environmentId: number, createdAt: number): void {
  const latest = latestCreatedAt(db, NOTE_TIMES, environmentId)
  if (latest !== null && createdAt < latest) {
    db.update(environments).set({ notesInTimeOrder: false }).where(eq(environments.id, environmentId)).run()
  }
}

export function findNote(db: Db, environmentId: number, id: number): NoteRow | undefined {
  const note = db.select().from(notes).where(eq(notes.id, id)).get()
  return note?.environmentId === environmentId ? note : undefined
}

/**
 * Appends a message; the note's `updatedAt` moves to the message's time. The time never goes back past the
 * note's last update, so thread order (by id) and message times agree even if the clock steps back.
 */
export function addMessage(db: Db, clock: Clock, note: NoteRow, content: string, actor: Actor): void {
  const createdAt = Math.max(clock.now(), note.updatedAt)
  db.insert(noteMessages).values({ noteId: note.id, userId: actor.userId, content: sanitizeNoteHtml(content), createdAt }).run()
  db.update(notes).set({ updatedAt: Math.max(note.updatedAt, createdAt) }).where(eq(notes.id, note.id)).run()
  logNote(db, clock, note, actor, 'createMessage', `added a message to note "${note.title}"`)
}

/** Title change and archive / unarchive; one activity entry per effective change. */
export function updateNote(db: Db, clock: Clock, note: NoteRow, patch: { title?: string; archived?: boolean }, actor: Actor): void {
  const now = Math.max(clock.now(), note.updatedAt)
  if (patch.title !== undefined && patch.title !== note.title) {
    db.update(notes).set({ title: patch.title, updatedAt: now }).where(eq(notes.id, note.id)).run()
    logNote(db, clock, note, actor, 'updateNote', `renamed note "${note.title}" to "${patch.title}"`)
  }
  if (patch.archived !== undefined && patch.archived !== (note.archivedAt !== null)) {
    db.update(notes)
      .set({ archivedAt: patch.archived ? now : null, updatedAt: now })
      .where(eq(notes.id, note.id))
      .run()
    logNote(db, clock, note, actor, patch.archived ? 'archiveNote' : 'unarchiveNote', `${patch.archived ? 'archived' : 'unarchived'} note "${patch.title ?? note.title}"`)
  }
}

/** Notes and their message threads (spec §2.1–2.4, §4.1; DESIGN §6). */
import {
  findNoteById,
  findNoteMessagesForRender,
  findNotesForRender,
  insertFirstNoteMessage,
  insertNewNote,
  insertNoteMessage,
  latestNoteCreatedAt,
  markNotesOutOfTimeOrder,
  type NoteRow,
  pageNoteIds,
  updateNoteRow,
} from '../../db/notes.ts'
import { inIdOrder } from '../../lib/id-order.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Clock } from '../../lib/clock.ts'
import { sanitizeNoteHtml } from '../../lib/html.ts'
import { latestMicros, type Micros, microsFromMillis, toIsoMicros } from '../../lib/time.ts'
import { type ActivityAction, appendActivityLog, type Channel } from '../activity-logs/service.ts'
import { invalidField, notFound } from '../../lib/errors.ts'
import { findCollection, findTeam, requireEnvironment, resolveNameFilters } from '../directory/projects.ts'
import { userObject } from '../directory/users.ts'
import type { Op } from '../../db/op.ts'

export interface NoteFilters {
  userEmail?: string
  userId?: number
  teamName?: string
  collectionName?: string
  recordId?: string
}

/** Ids of one page (limit + 1 rows), newest first. Names that match nothing give an empty page. */
export function* listNoteIds(projectId: number, environmentId: number, filters: NoteFilters, dates: DateFilter[], limit: number): Op<number[]> {
  const names = yield* resolveNameFilters(projectId, filters)
  if (!names) return []
  return yield* pageNoteIds(environmentId, { userId: names.userId, teamId: names.teamId, collectionId: names.collectionId, recordId: filters.recordId }, dates, limit)
}

/** The spec's note objects for the given ids, in the order given, messages oldest first. */
export function* renderNotes(ids: number[]) {
  if (ids.length === 0) return []
  const rows = yield* findNotesForRender(ids)
  const messages = yield* findNoteMessagesForRender(ids)
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
      createdAt: toIsoMicros(r.note.createdAt),
      updatedAt: toIsoMicros(r.note.updatedAt),
      ...(r.note.archivedAt !== null ? { archivedAt: toIsoMicros(r.note.archivedAt) } : {}),
      user: userObject(r.user),
      environment: { object: 'environment' as const, name: r.environment },
      team: { object: 'team' as const, name: r.team },
      ...(r.collection !== null ? { collection: { object: 'collection' as const, name: r.collection } } : {}),
      messages: threads.get(r.note.id) ?? [],
    }
  })
}

function messageObject(m: { content: string; createdAt: Micros; user: { id: number; username: string; email: string } }) {
  return { object: 'note-message' as const, content: m.content, createdAt: toIsoMicros(m.createdAt), user: userObject(m.user) }
}

/** Who makes a change through the API: the token's user and the token. */
export interface Actor {
  userId: number
  tokenId: number | null
  /** Set when a workflow run acts (DESIGN §7): entries carry `workflow {name, runId, stepName}`. */
  workflow?: { name: string; runId: string; stepName: string }
  /** The change came through the MCP endpoint (its entries are marked so). */
  via?: Channel
}

function* logNote(clock: Clock, note: NoteRow, actor: Actor, action: ActivityAction, label: string) {
  yield* appendActivityLog(clock, {
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
    via: actor.via,
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
export function* createNote(clock: Clock, input: NewNote, actor: Actor): Op<NoteRow> {
  const note = yield* insertNewNote({
    environmentId: input.environmentId,
    teamId: input.teamId,
    collectionId: input.collectionId,
    recordId: input.recordId,
    title: input.title,
    userId: actor.userId,
  }, clock.now(), actor.workflow ? { runId: actor.workflow.runId } : null)
  yield* insertFirstNoteMessage({ noteId: note.id, userId: actor.userId, content: sanitizeNoteHtml(input.content), createdAt: note.createdAt as Micros })
  yield* logNote(clock, note, actor, 'createNote', `created note "${input.title}"`)
  return note
}

/**
 * Call before inserting a note with a given (imported) createdAt: one older than the environment's newest note
 * breaks id/time order there for good (environments.notesInTimeOrder), and lists switch to the exact slow path.
 */
export function* recordImportedNoteTime(environmentId: number, createdAt: Micros): Op<void> {
  const latest = yield* latestNoteCreatedAt(environmentId)
  if (latest !== null && createdAt < latest) yield* markNotesOutOfTimeOrder(environmentId)
}

/** Where an API call addresses notes: the project and environment by name. */
export interface NotePlace {
  projectName: string
  environmentName: string
}

/**
 * The API's note creation (the REST route and the MCP tool): the environment (404), then its team and collection by
 * name (400 naming the field when unknown). Answers the note's id. Call in a write transaction.
 */
export function* createNoteNamed(
  clock: Clock,
  place: NotePlace,
  input: { teamName: string; collectionName: string; recordId: string; title: string; content: string },
  actor: Actor,
): Op<number> {
  const { project, environment } = yield* requireEnvironment(place.projectName, place.environmentName)
  const team = yield* findTeam(project.id, input.teamName)
  if (!team) throw invalidField('teamName', `unknown team "${input.teamName}"`)
  const collection = yield* findCollection(project.id, input.collectionName)
  if (!collection) throw invalidField('collectionName', `unknown collection "${input.collectionName}"`)
  const note = { environmentId: environment.id, teamId: team.id, collectionId: collection.id, recordId: input.recordId, title: input.title, content: input.content }
  return (yield* createNote(clock, note, actor)).id
}

/** The environment's note `id` (404 when the environment or the note is unknown there). */
export function* requireNote(place: NotePlace, id: number): Op<NoteRow> {
  const { environment } = yield* requireEnvironment(place.projectName, place.environmentName)
  const note = yield* findNote(environment.id, id)
  if (!note) throw notFound(`Note ${id} not found`)
  return note
}

export function* findNote(environmentId: number, id: number): Op<NoteRow | undefined> {
  const note = yield* findNoteById(id)
  return note?.environmentId === environmentId ? note : undefined
}

/** The API's new message (the REST route and the MCP tool): to the environment's note `id` (404 when unknown). */
export function* addMessageToNote(clock: Clock, place: NotePlace, id: number, content: string, actor: Actor): Op<void> {
  yield* addMessage(clock, yield* requireNote(place, id), content, actor)
}

/**
 * Appends a message; the note's `updatedAt` moves to the message's time. The time never goes back past the
 * note's last update, so thread order (by id) and message times agree even if the clock steps back.
 */
export function* addMessage(clock: Clock, note: NoteRow, content: string, actor: Actor): Op<void> {
  const createdAt = latestMicros(microsFromMillis(clock.now()), note.updatedAt)
  yield* insertNoteMessage({ noteId: note.id, userId: actor.userId, content: sanitizeNoteHtml(content), createdAt })
  yield* updateNoteRow(note.id, { updatedAt: createdAt })
  yield* logNote(clock, note, actor, 'createMessage', `added a message to note "${note.title}"`)
}

/** Title change and archive / unarchive; one activity entry per effective change. */
export function* updateNote(clock: Clock, note: NoteRow, patch: { title?: string; archived?: boolean }, actor: Actor): Op<void> {
  const now = latestMicros(microsFromMillis(clock.now()), note.updatedAt)
  if (patch.title !== undefined && patch.title !== note.title) {
    yield* updateNoteRow(note.id, { title: patch.title, updatedAt: now })
    yield* logNote(clock, note, actor, 'updateNote', `renamed note "${note.title}" to "${patch.title}"`)
  }
  if (patch.archived !== undefined && patch.archived !== (note.archivedAt !== null)) {
    yield* updateNoteRow(note.id, { archivedAt: patch.archived ? now : null, updatedAt: now })
    yield* logNote(clock, note, actor, patch.archived ? 'archiveNote' : 'unarchiveNote', `${patch.archived ? 'archived' : 'unarchived'} note "${patch.title ?? note.title}"`)
  }
}

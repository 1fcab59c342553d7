/**
 * Console: people leave notes on records. A member who can open a record as a team may start a note on it,
 * reply to the team's notes on it, and archive or unarchive them — the console's JSON actions, session only.
 * Messages are typed as plain text (escaped into paragraphs); every write has its activity entry (createNote,
 * createMessage, archiveNote, unarchiveNote) through the notes service, like the notes API's.
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { forbidden, invalidField, notFound } from '../../lib/errors.ts'
import { IdParam } from '../../http/params.ts'
import { textToNoteHtml } from '../../lib/html.ts'
import { addMessage, createNote, findNote, updateNote } from '../notes/service.ts'
import { NoteTitle, UpdateNoteBody } from '../notes/model.ts'
import { collectionAccess } from '../directory/projects.ts'
import { findRecord } from '../records/service.ts'
import { reachableRendering, readableCollection } from './access.ts'

/** Plain text; escaping can make it up to six times longer, which stays under the 64 KiB message limit. */
export const NoteText = t.String({ minLength: 1, maxLength: 10_000 })
const RenderingParams = { project: t.String(), environment: t.String(), team: t.String() }

/** A person signed in to the console: these actions are not part of the token API. */
export function person(caller: AccountCaller) {
  if (caller.token) throw forbidden('This is a console action: sign in instead of sending a token', 'session_required')
  return { ...caller.user, viaSso: caller.viaSso }
}

/** The text trimmed; 400 naming the field when nothing is left. */
export function nonBlank(field: string, value: string): string {
  if (value.trim() === '') throw invalidField(field, 'must not be blank')
  return value.trim()
}

/** One of the team's notes in the environment, on a collection the user may read as that team; 404 otherwise. */
function* teamNote(caller: AccountCaller, params: Record<string, string>, id: number) {
  const user = person(caller)
  const { project, environment, team } = yield* reachableRendering(user, params)
  const note = yield* findNote(environment.id, id)
  const readable =
    note &&
    note.teamId === team.id &&
    note.collectionId !== null &&
    (yield* collectionAccess({ userId: user.id, projectId: project.id, teamId: team.id, collectionId: note.collectionId })).read
  if (!readable) throw notFound(`Note ${id} not found`)
  return note
}

export function notePages(deps: AppDeps) {
  const actor = (caller: AccountCaller) => ({ userId: caller.user.id, tokenId: null })
  return new Elysia({ name: 'console-notes', detail: { hide: true } })
    .use(authPlugin(deps))
    .post(
      '/p/:project/e/:environment/t/:team/c/:collection/r/:record/notes',
      async ({ params, body, caller, set }) => {
        const title = nonBlank('title', body.title)
        const text = nonBlank('text', body.text)
        const id = await write(deps.store, function* () {
          const view = yield* readableCollection(person(caller), params)
          const scope = { environmentId: view.environment.id, collectionId: view.collection.id }
          if (!(yield* findRecord(scope, params.record))) throw notFound(`Record ${params.record} not found in ${view.collection.name}`)
          const input = { ...scope, teamId: view.team.id, recordId: params.record, title, content: textToNoteHtml(text) }
          return (yield* createNote(deps.clock, input, actor(caller))).id
        })
        set.status = 201
        return { id }
      },
      {
        userCall: true,
        params: t.Object({ ...RenderingParams, collection: t.String(), record: t.String() }),
        body: t.Object({ title: NoteTitle, text: NoteText }),
        response: { 201: t.Object({ id: t.Integer() }), ...errorResponses(400, 404) },
      },
    )
    .post(
      '/p/:project/e/:environment/t/:team/notes/:id/messages',
      async ({ params, body, caller, set }) => {
        const text = nonBlank('text', body.text)
        await write(deps.store, function* () {
          return yield* addMessage(deps.clock, (yield* teamNote(caller, params, Number(params.id))), textToNoteHtml(text), actor(caller))
        })
        set.status = 201
        return { id: Number(params.id) }
      },
      {
        userCall: true,
        params: t.Object({ ...RenderingParams, id: IdParam }),
        body: t.Object({ text: NoteText }),
        response: { 201: t.Object({ id: t.Integer() }), ...errorResponses(400, 404) },
      },
    )
    .patch(
      '/p/:project/e/:environment/t/:team/notes/:id',
      async ({ params, body, caller }) => {
        const patch = { ...body, ...(body.title === undefined ? {} : { title: nonBlank('title', body.title) }) }
        await write(deps.store, function* () {
          return yield* updateNote(deps.clock, (yield* teamNote(caller, params, Number(params.id))), patch, actor(caller))
        })
        return { id: Number(params.id) }
      },
      {
        userCall: true,
        params: t.Object({ ...RenderingParams, id: IdParam }),
        body: UpdateNoteBody,
        response: { 200: t.Object({ id: t.Integer() }), ...errorResponses(400, 404) },
      },
    )
}

/** The notes API: `GET …/notes` exactly as spec §4.1, plus the writes of DESIGN §6. Admin role throughout. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { queryOf } from '../../http/list.ts'
import { AddMessageBody, CreateNoteBody, Note, NotePage, NoteParams, UpdateNoteBody } from './model.ts'
import { NOTE_LIST_PARAMETERS, notesPage } from './query.ts'
import { addMessageToNote, createNoteNamed, renderNotes, requireNote, updateNote } from './service.ts'
import { read, readListed } from '../../db/read.ts'

const BASE = '/v1/project/:projectName/environment/:environmentName/notes'

export function notesModule(deps: AppDeps) {
  const readAccess = { projectCall: { scope: 'notes:read', role: 'admin' } } as const
  const writeAccess = { projectCall: { scope: 'notes:write', role: 'admin' } } as const

  // Read once listed (PostgreSQL's pass may still move a new note's createdAt): what a client is answered stays true.
  const renderOne = async (id: number) => (await readListed(deps.store, 'notes', renderNotes([id])))[0]!

  return new Elysia({ name: 'notes', tags: ['notes'] })
    .use(authPlugin(deps))
    .get(BASE, ({ params, request }) => notesPage(deps.store, params, queryOf(request)), {
      ...readAccess,
      response: { 200: NotePage, ...errorResponses(400, 404) },
      detail: { operationId: 'listNotes', summary: 'List notes', parameters: NOTE_LIST_PARAMETERS },
    })
    .get(`${BASE}/:id`, async ({ params }) => renderOne((await read(deps.store, requireNote(params, Number(params.id)))).id), {
      ...readAccess,
      params: NoteParams,
      response: { 200: Note, ...errorResponses(400, 404) },
      detail: { operationId: 'getNote', summary: 'Read one note' },
    })
    .post(
      BASE,
      async ({ params, body, identity, set }) => {
        const id = await write(deps.store, () => createNoteNamed(deps.clock, params, body, { userId: identity.userId, tokenId: identity.tokenId }))
        set.status = 201
        return renderOne(id)
      },
      {
        ...writeAccess,
        body: CreateNoteBody,
        response: { 201: Note, ...errorResponses(400, 404) },
        detail: { operationId: 'createNote', summary: 'Create a note on a record (its first message is the content)' },
      },
    )
    .post(
      `${BASE}/:id/messages`,
      async ({ params, body, identity, set }) => {
        await write(deps.store, () => addMessageToNote(deps.clock, params, Number(params.id), body.content, { userId: identity.userId, tokenId: identity.tokenId }))
        set.status = 201
        return renderOne(Number(params.id))
      },
      {
        ...writeAccess,
        params: NoteParams,
        body: AddMessageBody,
        response: { 201: Note, ...errorResponses(400, 404) },
        detail: { operationId: 'addNoteMessage', summary: 'Add a message to a note' },
      },
    )
    .patch(
      `${BASE}/:id`,
      async ({ params, body, identity }) => {
        await write(deps.store, function* () {
          yield* updateNote(deps.clock, yield* requireNote(params, Number(params.id)), body, { userId: identity.userId, tokenId: identity.tokenId })
        })
        return renderOne(Number(params.id))
      },
      {
        ...writeAccess,
        params: NoteParams,
        body: UpdateNoteBody,
        response: { 200: Note, ...errorResponses(400, 404) },
        detail: { operationId: 'updateNote', summary: 'Rename, archive or unarchive a note' },
      },
    )
}

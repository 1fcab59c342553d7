/** The notes API: `GET …/notes` exactly as spec §4.1, plus the writes of DESIGN §6. Admin role throughout. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { invalidField, notFound } from '../../lib/errors.ts'
import { environmentPage, parseDateFilters, parseRecordFilters } from '../../http/list.ts'
import { listParameters, PEOPLE_AND_PLACES } from '../../http/list-schema.ts'
import { environmentOf, findCollection, findTeam, requireEnvironment } from '../directory/projects.ts'
import { AddMessageBody, CreateNoteBody, Note, NOTE_DATE_FIELDS, NotePage, NoteParams, UpdateNoteBody } from './model.ts'
import { addMessage, createNote, findNote, listNoteIds, renderNotes, updateNote } from './service.ts'
import { read } from '../../db/read.ts'

const BASE = '/v1/project/:projectName/environment/:environmentName/notes'

export function notesModule(deps: AppDeps) {
  const readAccess = { projectCall: { scope: 'notes:read', role: 'admin' } } as const
  const writeAccess = { projectCall: { scope: 'notes:write', role: 'admin' } } as const

  const renderOne = async (id: number) => (await read(deps.store, renderNotes([id])))[0]!

  return new Elysia({ name: 'notes', tags: ['notes'] })
    .use(authPlugin(deps))
    .get(
      BASE,
      ({ params, request }) =>
        environmentPage(request, params, {
          filters: parseRecordFilters,
          where: environmentOf(deps.store),
          ids: ({ project, environment }, filters, query, limit) =>
            read(deps.store, listNoteIds(project.id, environment.id, filters, parseDateFilters(query, NOTE_DATE_FIELDS), limit)),
          render: (ids) => read(deps.store, renderNotes(ids)),
        }),
      {
        ...readAccess,
        response: { 200: NotePage, ...errorResponses(400, 404) },
        detail: {
          operationId: 'listNotes',
          summary: 'List notes',
          parameters: listParameters(PEOPLE_AND_PLACES, NOTE_DATE_FIELDS),
        },
      },
    )
    .get(
      `${BASE}/:id`,
      async ({ params }) => {
        const { environment } = await read(deps.store, requireEnvironment(params.projectName, params.environmentName))
        const note = await read(deps.store, findNote(environment.id, Number(params.id)))
        if (!note) throw notFound(`Note ${params.id} not found`)
        return renderOne(note.id)
      },
      {
        ...readAccess,
        params: NoteParams,
        response: { 200: Note, ...errorResponses(400, 404) },
        detail: { operationId: 'getNote', summary: 'Read one note' },
      },
    )
    .post(
      BASE,
      async ({ params, body, identity, set }) => {
        const id = await write(deps.store, function* () {
          const { project, environment } = yield* requireEnvironment(params.projectName, params.environmentName)
          const team = yield* findTeam(project.id, body.teamName)
          if (!team) throw invalidField('teamName', `unknown team "${body.teamName}"`)
          const collection = yield* findCollection(project.id, body.collectionName)
          if (!collection) throw invalidField('collectionName', `unknown collection "${body.collectionName}"`)
          return (yield* createNote(deps.clock, { environmentId: environment.id, teamId: team.id, collectionId: collection.id, recordId: body.recordId, title: body.title, content: body.content }, { userId: identity.userId, tokenId: identity.tokenId })).id
        })
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
        await write(deps.store, function* () {
          const { environment } = yield* requireEnvironment(params.projectName, params.environmentName)
          const note = yield* findNote(environment.id, Number(params.id))
          if (!note) throw notFound(`Note ${params.id} not found`)
          yield* addMessage(deps.clock, note, body.content, { userId: identity.userId, tokenId: identity.tokenId })
        })
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
          const { environment } = yield* requireEnvironment(params.projectName, params.environmentName)
          const note = yield* findNote(environment.id, Number(params.id))
          if (!note) throw notFound(`Note ${params.id} not found`)
          yield* updateNote(deps.clock, note, body, { userId: identity.userId, tokenId: identity.tokenId })
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

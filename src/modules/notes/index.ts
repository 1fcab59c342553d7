/** The notes API: `GET …/notes` exactly as spec §4.1, plus the writes of DESIGN §6. Admin role throughout. */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../app.ts'
import { writeTransaction } from '../../db/open.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { HttpError, notFound } from '../../http/errors.ts'
import { IdParam } from '../../http/params.ts'
import { page, parseIdParameter, parseLimit, parseStringParameter, queryOf } from '../../http/list.ts'
import { findCollection, findTeam, requireEnvironment } from '../projects/service.ts'
import { addMessage, createNote, findNote, listNoteIds, renderNotes, updateNote } from './service.ts'

const BASE = '/v1/project/:projectName/environment/:environmentName/notes'
const Html = t.String({ minLength: 1, maxLength: 65_536 })
const Title = t.String({ minLength: 1, maxLength: 500 })
/**
 * The note id as a plain positive integer (at most 15 digits, so always a safe integer). Not `t.Numeric`: it
 * accepts `1.5` and `1e3`, and Elysia reports its range errors without the parameter's name.
 */
const NoteParams = t.Object({
  projectName: t.String(),
  environmentName: t.String(),
  id: IdParam,
})

/** DESIGN §5: the message names the field, like the schema validation messages do. */
function unknownName(field: string, message: string) {
  return new HttpError(400, 'validation_failed', `Invalid field '${field}': ${message}`, { details: [{ field, message }] })
}

export function notesModule(deps: AppDeps) {
  const { db } = deps.store
  const read = { projectCall: { scope: 'notes:read', role: 'admin' } } as const
  const write = { projectCall: { scope: 'notes:write', role: 'admin' } } as const

  const renderOne = (id: number) => renderNotes(db, [id])[0]

  return new Elysia({ name: 'notes' })
    .use(authPlugin(deps))
    .get(
      BASE,
      ({ params, request }) => {
        const query = queryOf(request)
        const limit = parseLimit(query.limit)
        const filters = {
          userEmail: parseStringParameter(query, 'userEmail', 320),
          userId: parseIdParameter(query, 'userId'),
          teamName: parseStringParameter(query, 'teamName', 200),
          collectionName: parseStringParameter(query, 'collectionName', 200),
          recordId: parseStringParameter(query, 'recordId'),
        }
        const { project, environment } = requireEnvironment(db, params.projectName, params.environmentName)
        const ids = listNoteIds(db, project.id, environment.id, filters, query, limit)
        return page(ids, limit, (pageIds) => renderNotes(db, pageIds), {
          projectName: params.projectName,
          environmentName: params.environmentName,
          limit,
        })
      },
      read,
    )
    .get(
      `${BASE}/:id`,
      ({ params }) => {
        const { environment } = requireEnvironment(db, params.projectName, params.environmentName)
        const note = findNote(db, environment.id, Number(params.id))
        if (!note) throw notFound(`Note ${params.id} not found`)
        return renderOne(note.id)
      },
      { ...read, params: NoteParams },
    )
    .post(
      BASE,
      ({ params, body, identity, set }) => {
        const id = writeTransaction(deps.store, (tx) => {
          const { project, environment } = requireEnvironment(tx, params.projectName, params.environmentName)
          const team = findTeam(tx, project.id, body.teamName)
          if (!team) throw unknownName('teamName', `unknown team "${body.teamName}"`)
          const collection = findCollection(tx, project.id, body.collectionName)
          if (!collection) throw unknownName('collectionName', `unknown collection "${body.collectionName}"`)
          return createNote(
            tx,
            deps.clock,
            { environmentId: environment.id, teamId: team.id, collectionId: collection.id, recordId: body.recordId, title: body.title, content: body.content },
            { userId: identity.userId, tokenId: identity.tokenId },
          ).id
        })
        set.status = 201
        return renderOne(id)
      },
      {
        ...write,
        body: t.Object({
          recordId: t.String({ minLength: 1, maxLength: 1024 }),
          collectionName: t.String({ minLength: 1, maxLength: 200 }),
          teamName: t.String({ minLength: 1, maxLength: 200 }),
          title: Title,
          content: Html,
        }),
      },
    )
    .post(
      `${BASE}/:id/messages`,
      ({ params, body, identity, set }) => {
        writeTransaction(deps.store, (tx) => {
          const { environment } = requireEnvironment(tx, params.projectName, params.environmentName)
          const note = findNote(tx, environment.id, Number(params.id))
          if (!note) throw notFound(`Note ${params.id} not found`)
          addMessage(tx, deps.clock, note, body.content, { userId: identity.userId, tokenId: identity.tokenId })
        })
        set.status = 201
        return renderOne(Number(params.id))
      },
      { ...write, params: NoteParams, body: t.Object({ content: Html }) },
    )
    .patch(
      `${BASE}/:id`,
      ({ params, body, identity }) => {
        writeTransaction(deps.store, (tx) => {
          const { environment } = requireEnvironment(tx, params.projectName, params.environmentName)
          const note = findNote(tx, environment.id, Number(params.id))
          if (!note) throw notFound(`Note ${params.id} not found`)
          updateNote(tx, deps.clock, note, body, { userId: identity.userId, tokenId: identity.tokenId })
        })
        return renderOne(Number(params.id))
      },
      {
        ...write,
        params: NoteParams,
        body: t.Object({ title: t.Optional(Title), archived: t.Optional(t.Boolean()) }, { minProperties: 1 }),
      },
    )
}

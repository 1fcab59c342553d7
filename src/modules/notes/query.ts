/** The notes list as the API route and the MCP tool run it: its query parameters, parsed and documented. */
import type { Store } from '../../db/store.ts'
import { read, readListed } from '../../db/read.ts'
import { listParameters, PEOPLE_AND_PLACES } from '../../http/list-schema.ts'
import { environmentList, environmentPage, parseDateFilters, parseRecordFilters, type Query } from '../../http/list.ts'
import { environmentOf } from '../directory/projects.ts'
import { NOTE_DATE_FIELDS } from './model.ts'
import { listNoteIds, renderNotes } from './service.ts'

/** The list's documented query parameters (/openapi.json, and the MCP tool's arguments). */
export const NOTE_LIST_PARAMETERS = listParameters(PEOPLE_AND_PLACES, NOTE_DATE_FIELDS)

/** One page of an environment's notes, newest first, as `query` asks (400 naming a bad parameter, 404 an unknown environment). */
export function notesPage(store: Store, place: { projectName: string; environmentName: string }, query: Query) {
  return environmentPage(query, place, notesList(store))
}

function notesList(store: Store) {
  return environmentList({
    filters: parseRecordFilters,
    where: environmentOf(store),
    ids: ({ project, environment }, filters, query, limit) =>
      readListed(store, 'notes', listNoteIds(project.id, environment.id, filters, parseDateFilters(query, NOTE_DATE_FIELDS), limit)),
    render: (ids: number[]) => read(store, renderNotes(ids)),
  })
}

/**
 * The activity log list's query string, parsed (the API route, the MCP tool and the console page), and the list
 * itself as the route and the tool run it; the service takes the parsed filters.
 */
import type { Store } from '../../db/store.ts'
import { read, readListed } from '../../db/read.ts'
import { enumQuery, extensibleEnumQuery, EXTENSIONS_QUERY, listParameters, PEOPLE_AND_PLACES } from '../../http/list-schema.ts'
import { environmentList, parseDateFilters, parseEnumParameter, parseExtensibleEnumParameter, parseExtensionsParameter, parseRecordFilters, type Query, environmentPage } from '../../http/list.ts'
import { environmentOf } from '../directory/projects.ts'
import { type ActivityFilters, DOCUMENTED_ACTIVITY_ACTIONS, EXTENSION_ACTIVITY_ACTIONS, listActivityLogIds, renderActivityLogs } from './service.ts'

/** The list's date filters (`createdAt.lt=…`). */
export const ACTIVITY_DATE_FIELDS = ['createdAt'] as const

/**
 * The filters of `GET …/activity-logs` (and the console's activity page) from the query string; 400 names a bad
 * one. `extensions` comes from the query unless the caller decides (the console shows everything).
 */
export function parseActivityFilters(query: Query, options: { extensions?: boolean } = {}): ActivityFilters {
  const extensions = options.extensions ?? parseExtensionsParameter(query)
  return {
    ...parseRecordFilters(query),
    action: parseExtensibleEnumParameter(query, 'action', { documented: DOCUMENTED_ACTIVITY_ACTIONS, extensions: EXTENSION_ACTIVITY_ACTIONS }, extensions),
    type: parseEnumParameter(query, 'type', ['read', 'write'] as const),
    extensions,
  }
}

/** The list's documented query parameters (/openapi.json, and the MCP tool's arguments). */
export const ACTIVITY_LOG_PARAMETERS = listParameters(
  {
    ...PEOPLE_AND_PLACES,
    action: extensibleEnumQuery('Only entries of this action', { documented: DOCUMENTED_ACTIVITY_ACTIONS, extensions: EXTENSION_ACTIVITY_ACTIONS }),
    type: enumQuery('Only read or only write entries', ['read', 'write']),
    extensions: EXTENSIONS_QUERY,
  },
  ACTIVITY_DATE_FIELDS,
)

/** One page of an environment's activity log, newest first, as `query` asks (400 naming a bad parameter, 404 an unknown environment). */
export function activityLogsPage(store: Store, place: { projectName: string; environmentName: string }, query: Query) {
  return environmentPage(query, place, activityLogsList(store))
}

function activityLogsList(store: Store) {
  return environmentList({
    filters: (query: Query) => parseActivityFilters(query),
    where: environmentOf(store),
    ids: ({ project, environment }, filters, query, limit) =>
      readListed(store, 'activity_logs', listActivityLogIds(project.id, environment.id, filters, parseDateFilters(query, ACTIVITY_DATE_FIELDS), limit)),
    render: (ids: number[], filters) => read(store, renderActivityLogs(ids, { chain: filters.extensions })),
  })
}

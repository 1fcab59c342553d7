/**
 * The admin log list's query string, parsed (the API route, the MCP tool and the console page), and the list itself
 * as the route and the tool run it; the service takes the parsed filters.
 */
import type { Store } from '../../db/store.ts'
import { read } from '../../db/read.ts'
import { enumQuery, extensibleEnumQuery, EXTENSIONS_QUERY, listParameters, textFilter } from '../../http/list-schema.ts'
import {
  MAX_EMAIL_LENGTH,
  page,
  parseDateFilters,
  parseEnumParameter,
  parseExtensibleEnumParameter,
  parseExtensionsParameter,
  parseIdParameter,
  parseLimit,
  parseStringParameter,
  type Query,
} from '../../http/list.ts'
import { ID_SCHEMA } from '../../http/params.ts'
import { requireProject } from '../directory/projects.ts'
import {
  ADMIN_LOG_TYPES,
  type AdminLogFilters,
  DOCUMENTED_ADMIN_LOG_INITIATORS,
  DOCUMENTED_ADMIN_LOG_RESOURCES,
  EXTENSION_ADMIN_LOG_INITIATORS,
  EXTENSION_ADMIN_LOG_RESOURCES,
  listAdminLogIds,
  renderAdminLogs,
} from './service.ts'

/** The list's date filters (`createdAt.lt=…`). */
export const ADMIN_LOG_DATE_FIELDS = ['createdAt'] as const

/**
 * The filters of `GET …/admin-logs` (and the console's admin log page) from the query string; 400 names a bad
 * one. `extensions` comes from the query unless the caller decides (the console shows everything).
 */
export function parseAdminLogFilters(query: Query, options: { extensions?: boolean } = {}): AdminLogFilters {
  const extensions = options.extensions ?? parseExtensionsParameter(query)
  return {
    userEmail: parseStringParameter(query, 'userEmail', MAX_EMAIL_LENGTH),
    userId: parseIdParameter(query, 'userId'),
    type: parseEnumParameter(query, 'type', ADMIN_LOG_TYPES),
    initiator: parseExtensibleEnumParameter(query, 'initiator', { documented: DOCUMENTED_ADMIN_LOG_INITIATORS, extensions: EXTENSION_ADMIN_LOG_INITIATORS }, extensions),
    resource: parseExtensibleEnumParameter(query, 'resource', { documented: DOCUMENTED_ADMIN_LOG_RESOURCES, extensions: EXTENSION_ADMIN_LOG_RESOURCES }, extensions),
    extensions,
  }
}

/** The list's documented query parameters (/openapi.json, and the MCP tool's arguments). */
export const ADMIN_LOG_PARAMETERS = listParameters(
  {
    userEmail: { description: 'Only changes made by the user with this email', schema: textFilter(MAX_EMAIL_LENGTH) },
    userId: { description: 'Only changes made by the user with this id', schema: ID_SCHEMA },
    type: enumQuery('Only changes of this type', ADMIN_LOG_TYPES),
    initiator: extensibleEnumQuery('Only changes from this initiator', { documented: DOCUMENTED_ADMIN_LOG_INITIATORS, extensions: EXTENSION_ADMIN_LOG_INITIATORS }),
    resource: extensibleEnumQuery('Only changes to this resource', { documented: DOCUMENTED_ADMIN_LOG_RESOURCES, extensions: EXTENSION_ADMIN_LOG_RESOURCES }),
    extensions: EXTENSIONS_QUERY,
  },
  ADMIN_LOG_DATE_FIELDS,
)

/** One page of a project's admin log, newest first: a bad parameter is a 400 before the project's 404. */
export async function adminLogsPage(store: Store, projectName: string, query: Query) {
  const limit = parseLimit(query.limit)
  const filters = parseAdminLogFilters(query)
  const project = await read(store, requireProject(projectName))
  const ids = await read(store, listAdminLogIds(project.id, filters, parseDateFilters(query, ADMIN_LOG_DATE_FIELDS), limit))
  return page(ids, limit, (pageIds) => read(store, renderAdminLogs(pageIds, { chain: filters.extensions })), { projectName, limit })
}

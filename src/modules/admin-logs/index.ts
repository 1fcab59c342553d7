/** `GET /v1/project/{p}/admin-logs` (scope admin_logs:read, Admin) — shapes of `listAdminLogs`. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { enumQuery, extensibleEnumQuery, EXTENSIONS_QUERY, listParameters, textFilter } from '../../http/list-schema.ts'
import { MAX_EMAIL_LENGTH, page, parseDateFilters, parseLimit, queryOf } from '../../http/list.ts'
import { ID_SCHEMA } from '../../http/params.ts'
import { requireProject } from '../directory/projects.ts'
import { AdminLogPage } from './model.ts'
import {
  ADMIN_LOG_TYPES,
  DOCUMENTED_ADMIN_LOG_INITIATORS,
  DOCUMENTED_ADMIN_LOG_RESOURCES,
  EXTENSION_ADMIN_LOG_INITIATORS,
  EXTENSION_ADMIN_LOG_RESOURCES,
  listAdminLogIds,
  renderAdminLogs,
} from './service.ts'
import { ADMIN_LOG_DATE_FIELDS, parseAdminLogFilters } from './query.ts'
import { read } from '../../db/read.ts'

export function adminLogsModule(deps: AppDeps) {
  return new Elysia({ name: 'admin-logs', tags: ['admin-logs'] })
    .use(authPlugin(deps))
    .get(
      '/v1/project/:projectName/admin-logs',
      async ({ params, request }) => {
        const query = queryOf(request)
        const limit = parseLimit(query.limit)
        const filters = parseAdminLogFilters(query)
        const project = await read(deps.store, requireProject(params.projectName))
        const ids = await read(deps.store, listAdminLogIds(project.id, filters, parseDateFilters(query, ADMIN_LOG_DATE_FIELDS), limit))
        return page(ids, limit, (pageIds) => read(deps.store, renderAdminLogs(pageIds)), { projectName: params.projectName, limit })
      },
      {
        projectCall: { scope: 'admin_logs:read', role: 'admin' },
        response: { 200: AdminLogPage, ...errorResponses(400, 404) },
        detail: {
          operationId: 'listAdminLogs',
          summary: 'List admin log entries',
          parameters: listParameters(
            {
              userEmail: { description: 'Only changes made by the user with this email', schema: textFilter(MAX_EMAIL_LENGTH) },
              userId: { description: 'Only changes made by the user with this id', schema: ID_SCHEMA },
              type: enumQuery('Only changes of this type', ADMIN_LOG_TYPES),
              initiator: extensibleEnumQuery('Only changes from this initiator', { documented: DOCUMENTED_ADMIN_LOG_INITIATORS, extensions: EXTENSION_ADMIN_LOG_INITIATORS }),
              resource: extensibleEnumQuery('Only changes to this resource', { documented: DOCUMENTED_ADMIN_LOG_RESOURCES, extensions: EXTENSION_ADMIN_LOG_RESOURCES }),
              extensions: EXTENSIONS_QUERY,
            },
            ['createdAt'],
          ),
        },
      },
    )
}

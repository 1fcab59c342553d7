/** `GET /v1/project/{p}/environment/{e}/activity-logs` (scope activity_logs:read, Admin) — shapes of `listActivityLogs`. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { enumQuery, extensibleEnumQuery, EXTENSIONS_QUERY, listParameters, PEOPLE_AND_PLACES } from '../../http/list-schema.ts'
import { environmentPage, parseDateFilters } from '../../http/list.ts'
import { environmentOf } from '../directory/projects.ts'
import { ActivityLogPage } from './model.ts'
import { ACTIVITY_DATE_FIELDS, parseActivityFilters } from './query.ts'
import { DOCUMENTED_ACTIVITY_ACTIONS, EXTENSION_ACTIVITY_ACTIONS, listActivityLogIds, renderActivityLogs } from './service.ts'
import { read } from '../../db/read.ts'

export function activityLogsModule(deps: AppDeps) {
  return new Elysia({ name: 'activity-logs', tags: ['activity-logs'] })
    .use(authPlugin(deps))
    .get(
      '/v1/project/:projectName/environment/:environmentName/activity-logs',
      ({ params, request }) =>
        environmentPage(request, params, {
          filters: parseActivityFilters,
          where: environmentOf(deps.store),
          ids: ({ project, environment }, filters, query, limit) =>
            read(deps.store, listActivityLogIds(project.id, environment.id, filters, parseDateFilters(query, ACTIVITY_DATE_FIELDS), limit)),
          render: (ids) => read(deps.store, renderActivityLogs(ids)),
        }),
      {
        projectCall: { scope: 'activity_logs:read', role: 'admin' },
        response: { 200: ActivityLogPage, ...errorResponses(400, 404) },
        detail: {
          operationId: 'listActivityLogs',
          summary: 'List activity log entries',
          parameters: listParameters(
            {
              ...PEOPLE_AND_PLACES,
              action: extensibleEnumQuery('Only entries of this action', { documented: DOCUMENTED_ACTIVITY_ACTIONS, extensions: EXTENSION_ACTIVITY_ACTIONS }),
              type: enumQuery('Only read or only write entries', ['read', 'write']),
              extensions: EXTENSIONS_QUERY,
            },
            ['createdAt'],
          ),
        },
      },
    )
}

/** `GET /v1/project/{p}/environment/{e}/activity-logs` (scope activity_logs:read, Admin) — shapes of `listActivityLogs`. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { queryOf } from '../../http/list.ts'
import { ActivityLogPage } from './model.ts'
import { ACTIVITY_LOG_PARAMETERS, activityLogsPage } from './query.ts'

export function activityLogsModule(deps: AppDeps) {
  return new Elysia({ name: 'activity-logs', tags: ['activity-logs'] })
    .use(authPlugin(deps))
    .get(
      '/v1/project/:projectName/environment/:environmentName/activity-logs',
      ({ params, request }) => activityLogsPage(deps.store, params, queryOf(request)),
      {
        projectCall: { scope: 'activity_logs:read', role: 'admin' },
        response: { 200: ActivityLogPage, ...errorResponses(400, 404) },
        detail: { operationId: 'listActivityLogs', summary: 'List activity log entries', parameters: ACTIVITY_LOG_PARAMETERS },
      },
    )
}

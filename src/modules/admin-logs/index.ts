/** `GET /v1/project/{p}/admin-logs` (scope admin_logs:read, Admin) — shapes of `listAdminLogs`. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { queryOf } from '../../http/list.ts'
import { AdminLogPage } from './model.ts'
import { ADMIN_LOG_PARAMETERS, adminLogsPage } from './query.ts'

export function adminLogsModule(deps: AppDeps) {
  return new Elysia({ name: 'admin-logs', tags: ['admin-logs'] })
    .use(authPlugin(deps))
    .get('/v1/project/:projectName/admin-logs', ({ params, request }) => adminLogsPage(deps.store, params.projectName, queryOf(request)), {
      projectCall: { scope: 'admin_logs:read', role: 'admin' },
      response: { 200: AdminLogPage, ...errorResponses(400, 404) },
      detail: { operationId: 'listAdminLogs', summary: 'List admin log entries', parameters: ADMIN_LOG_PARAMETERS },
    })
}

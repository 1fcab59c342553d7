/** `GET /v1/project/{p}/admin-logs` (scope admin_logs:read, Admin) — shapes of `listAdminLogs`. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../app.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { page, parseEnumParameter, parseIdParameter, parseLimit, parseStringParameter, queryOf } from '../../http/list.ts'
import { requireProject } from '../projects/service.ts'
import { ADMIN_LOG_INITIATORS, ADMIN_LOG_RESOURCES, ADMIN_LOG_TYPES, listAdminLogIds, renderAdminLogs } from './service.ts'

export function adminLogsModule(deps: AppDeps) {
  const { db } = deps.store
  return new Elysia({ name: 'admin-logs' })
    .use(authPlugin(deps))
    .get(
      '/v1/project/:projectName/admin-logs',
      ({ params, request }) => {
        const query = queryOf(request)
        const limit = parseLimit(query.limit)
        const filters = {
          userEmail: parseStringParameter(query, 'userEmail', 320),
          userId: parseIdParameter(query, 'userId'),
          type: parseEnumParameter(query, 'type', ADMIN_LOG_TYPES),
          initiator: parseEnumParameter(query, 'initiator', ADMIN_LOG_INITIATORS),
          resource: parseEnumParameter(query, 'resource', ADMIN_LOG_RESOURCES),
        }
        const project = requireProject(db, params.projectName)
        const ids = listAdminLogIds(db, project.id, filters, query, limit)
        return page(ids, limit, (pageIds) => renderAdminLogs(db, pageIds), { projectName: params.projectName, limit })
      },
      { projectCall: { scope: 'admin_logs:read', role: 'admin' } },
    )
}

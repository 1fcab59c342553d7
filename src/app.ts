/** createApp(deps): the Elysia root — metrics, request head and body rules, errors, modules. No listen(): `serve` and tests call it. */
import { Elysia } from 'elysia'
import type { AppDeps } from './deps.ts'
import { allowedMethods } from './http/allowed-methods.ts'
import { rejectOversizedBody, parseBody } from './http/body.ts'
import { renderError, withHeaders } from './http/error-handler.ts'
import { rejectOversizedHead } from './http/request-head.ts'
import { requestMetrics } from './http/request-metrics.ts'
import { noSniffing } from './http/response-headers.ts'
import { requestRouteSpan } from './http/request-route-span.ts'
import { authModule } from './modules/auth/index.ts'
import { ssoModule } from './modules/auth/oidc-routes.ts'
import { tokensModule } from './modules/tokens/index.ts'
import { activityLogsModule } from './modules/activity-logs/index.ts'
import { adminLogsModule } from './modules/admin-logs/index.ts'
import { notesModule } from './modules/notes/index.ts'
import { runsModule } from './modules/runs/index.ts'
import { recordsModule } from './modules/records/index.ts'
import { tasksModule } from './modules/tasks/index.ts'
import { callbacksModule } from './modules/callbacks/index.ts'
import { runEventsModule } from './modules/run-events/index.ts'
import { schedulesModule } from './modules/schedules/index.ts'
import { workflowHealthModule } from './modules/workflow-health/index.ts'
import { workflowEventsModule } from './modules/workflow-events/index.ts'
import { webhooksModule } from './modules/webhooks/index.ts'
import { workflowsModule } from './modules/workflows/index.ts'
import { docsModule } from './modules/docs/index.ts'
import { healthModule } from './modules/health/index.ts'
import { setupModule } from './modules/setup/index.ts'
import { consoleModule } from './modules/console/index.ts'
import { instanceModule } from './modules/instance/index.ts'
import { projectAdminModule } from './modules/projects/index.ts'
import { mcpModule } from './modules/mcp/index.ts'
import { auditModule } from './modules/audit/index.ts'

export function createApp(deps: AppDeps) {
  const allowedFor = allowedMethods(() => app.routes)
  // normalize off: a body field the route's schema does not name is a 400 `unknown field`, never dropped silently
  // (a typo'd optional field would otherwise look accepted). /openapi.json says so (additionalProperties: false).
  const app = new Elysia({ normalize: false })
    .use(requestMetrics(deps.metrics))
    .use(requestRouteSpan())
    .onRequest(noSniffing)
    .onRequest(rejectOversizedHead)
    .onRequest(rejectOversizedBody(deps.config.maxBodyBytes))
    .onParse(parseBody(deps.config.maxBodyBytes))
    .onError(({ code, error, request, set }) => {
      // A driver error no write() translated (a read during a lock's rare exclusive moments) is a storage fault too.
      const response = withHeaders(renderError(code, deps.store.storageErrorOf(error) ?? error, request, deps.logger, allowedFor), set.headers)
      set.status = response.status // what the after-response hooks (metrics) read
      return response
    })
    .use(healthModule(deps))
    .use(docsModule(deps))
    .use(setupModule(deps))
    .use(authModule(deps))
    .use(ssoModule(deps))
    .use(tokensModule(deps))
    .use(notesModule(deps))
    .use(workflowsModule(deps))
    .use(webhooksModule(deps))
    .use(schedulesModule(deps))
    .use(workflowHealthModule(deps))
    .use(workflowEventsModule(deps))
    .use(runsModule(deps))
    .use(tasksModule(deps))
    .use(recordsModule(deps))
    .use(callbacksModule(deps))
    .use(runEventsModule(deps))
    .use(activityLogsModule(deps))
    .use(adminLogsModule(deps))
    .use(auditModule(deps))
    .use(instanceModule(deps))
    .use(projectAdminModule(deps))
    .use(mcpModule(deps))
    .use(consoleModule(deps))
  return app
}

export type App = ReturnType<typeof createApp>

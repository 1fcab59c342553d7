/** Workflow health through the API (project admins): a workflow's figures, and an environment's with a row per workflow. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { enumQuery } from '../../http/list-schema.ts'
import { queryOf } from '../../http/list.ts'
import { requireProjectAdmin } from '../auth/service.ts'
import { requireEnvironment } from '../directory/projects.ts'
import { WorkflowPathParams } from '../webhooks/model.ts'
import { requireWorkflow } from '../workflows/service.ts'
import { EnvironmentHealth, EnvironmentPathParams, WorkflowHealth } from './model.ts'
import { parseHealthWindow } from './query.ts'
import { environmentHealth, HEALTH_WINDOW_NAMES, workflowHealth } from './service.ts'

const ENVIRONMENT = '/v1/project/:projectName/environment/:environmentName'

/** `window` as /openapi.json states it (the handlers parse it with list.ts: a bad one is a 400 naming it). */
const WINDOW_PARAMETER = [
  { name: 'window', in: 'query' as const, required: false, ...enumQuery('day (the default): the last 24 hours, hourly; week: the last 7 days, daily', HEALTH_WINDOW_NAMES) },
]

export function workflowHealthModule(deps: AppDeps) {
  return new Elysia({ name: 'workflow-health', tags: ['workflows'] })
    .use(authPlugin(deps))
    .get(
      `${ENVIRONMENT}/team/:teamName/workflows/:workflowName/health`,
      ({ params, request, caller }) =>
        read(
          deps.store,
          (function* () {
            const project = yield* requireProjectAdmin(caller, params.projectName)
            const window = parseHealthWindow(queryOf(request))
            const target = yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
            return yield* workflowHealth(target, params.teamName, window, deps.clock.now())
          })(),
        ),
      {
        accountCall: true,
        params: WorkflowPathParams,
        response: { 200: WorkflowHealth, ...errorResponses(400, 404) },
        detail: {
          operationId: 'getWorkflowHealth',
          summary: "A workflow's health over the last day or week (project admins): runs per status, failure rate, duration percentiles, slowest and most failing steps, open tasks",
          parameters: WINDOW_PARAMETER,
        },
      },
    )
    .get(
      `${ENVIRONMENT}/health`,
      ({ params, request, caller }) =>
        read(
          deps.store,
          (function* () {
            yield* requireProjectAdmin(caller, params.projectName)
            const window = parseHealthWindow(queryOf(request))
            const { environment } = yield* requireEnvironment(params.projectName, params.environmentName)
            return yield* environmentHealth(environment, window, deps.clock.now())
          })(),
        ),
      {
        accountCall: true,
        params: EnvironmentPathParams,
        response: { 200: EnvironmentHealth, ...errorResponses(400, 404) },
        detail: {
          operationId: 'getEnvironmentHealth',
          summary: "An environment's workflow health over the last day or week (project admins): the figures of its workflows together, and a row per workflow",
          parameters: WINDOW_PARAMETER,
        },
      },
    )
}

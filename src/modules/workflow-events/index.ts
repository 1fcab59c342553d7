/** `GET`/`PUT`/`DELETE …/workflows/{name}/events`: the record and note events that start a workflow (project admins). */
import { Elysia, t } from 'elysia'
import { read } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { requireProjectAdmin } from '../auth/service.ts'
import { WorkflowPathParams } from '../webhooks/model.ts'
import { requireWorkflow } from '../workflows/service.ts'
import { WorkflowEvents } from './model.ts'
import { readEvents, removeEvents, setEvents } from './service.ts'

const EVENTS = '/v1/project/:projectName/environment/:environmentName/team/:teamName/workflows/:workflowName/events'

type Params = { projectName: string; environmentName: string; teamName: string; workflowName: string }
type Caller = Parameters<typeof requireProjectAdmin>[0]

/** The workflow named by the path, for a project admin (403 for others, 404 for an unknown one). */
function* adminWorkflow(caller: Caller, params: Params) {
  const project = yield* requireProjectAdmin(caller, params.projectName)
  return yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
}

export function workflowEventsModule(deps: AppDeps) {
  return new Elysia({ name: 'workflow-events', tags: ['workflows'] })
    .use(authPlugin(deps))
    .get(EVENTS, async ({ params, caller }) => read(deps.store, (function* () {
      return yield* readEvents(yield* adminWorkflow(caller, params))
    })()), {
      accountCall: true,
      params: WorkflowPathParams,
      response: { 200: WorkflowEvents, ...errorResponses(404) },
      detail: { operationId: 'getWorkflowEvents', summary: 'The record and note events that start a workflow (project admins); 404 when it has none' },
    })
    .put(EVENTS, async ({ params, body, caller }) => {
      const { changed: _changed, ...settings } = await write(deps.store, function* () {
        return yield* setEvents(deps.clock, yield* adminWorkflow(caller, params), body, caller.user.id)
      })
      return settings
    }, {
      accountCall: true,
      params: WorkflowPathParams,
      body: WorkflowEvents,
      response: { 200: WorkflowEvents, ...errorResponses(400, 404) },
      detail: {
        operationId: 'setWorkflowEvents',
        summary: 'Set the record and note events that start a workflow (project admins)',
        description: 'Each event is recorded in the transaction of the change and starts one run (trigger `event`) once dispatched; a record with an active run of the workflow is skipped. See docs/workflows.md "Events".',
      },
    })
    .delete(EVENTS, async ({ params, caller, set }) => {
      await write(deps.store, function* () {
        yield* removeEvents(deps.clock, yield* adminWorkflow(caller, params), caller.user.id)
      })
      set.status = 204
    }, {
      accountCall: true,
      params: WorkflowPathParams,
      response: { 204: t.Void(), ...errorResponses(404) },
      detail: { operationId: 'removeWorkflowEvents', summary: 'Stop a workflow starting on events, and drop its events not yet dispatched (project admins)' },
    })
}

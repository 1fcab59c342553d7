/** A workflow's schedule: `GET`/`PUT`/`DELETE …/workflows/{name}/schedule` and its preview (project admins). */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { requireProjectAdmin } from '../auth/service.ts'
import { requireWorkflow } from '../workflows/service.ts'
import { WorkflowPathParams } from '../webhooks/model.ts'
import { ScheduleAnswer, ScheduleBody, SchedulePreview, SchedulePreviewBody } from './model.ts'
import { cronOf, nextFireTimes, putSchedule, removeSchedule, requireSchedule, scheduleView } from './service.ts'

const SCHEDULE = '/v1/project/:projectName/environment/:environmentName/team/:teamName/workflows/:workflowName/schedule'

type Caller = Parameters<typeof requireProjectAdmin>[0]
type Params = { projectName: string; environmentName: string; teamName: string; workflowName: string }

/** The workflow the path names, for a project admin (404 for an unknown project, environment, team or workflow). */
function* adminWorkflow(caller: Caller, params: Params) {
  const project = yield* requireProjectAdmin(caller, params.projectName)
  return yield* requireWorkflow(project.id, params.environmentName, params.teamName, params.workflowName)
}

export function schedulesModule(deps: AppDeps) {
  const view = (place: Params & { caller: Caller }) =>
    read(
      deps.store,
      (function* () {
        const target = yield* adminWorkflow(place.caller, place)
        return yield* scheduleView(yield* requireSchedule(target), deps.clock.now())
      })(),
    )
  return new Elysia({ name: 'schedules', tags: ['workflows'] })
    .use(authPlugin(deps))
    .get(SCHEDULE, ({ params, caller }) => view({ ...params, caller }), {
      accountCall: true,
      params: WorkflowPathParams,
      response: { 200: ScheduleAnswer, ...errorResponses(400, 404) },
      detail: {
        operationId: 'getSchedule',
        summary: "A workflow's schedule, its next five fire times and its last tick (project admins); 404 schedule_not_found when it has none",
      },
    })
    .put(
      SCHEDULE,
      async ({ params, body, caller }) => {
        await write(deps.store, function* () {
          yield* putSchedule(deps.clock, yield* adminWorkflow(caller, params), body, caller.user.id)
        })
        deps.executor?.notifySchedules()
        return view({ ...params, caller })
      },
      {
        accountCall: true,
        params: WorkflowPathParams,
        body: ScheduleBody,
        response: { 200: ScheduleAnswer, ...errorResponses(400, 404) },
        detail: {
          operationId: 'putSchedule',
          summary: "Set a workflow's schedule (project admins)",
          description:
            'Each tick starts one run per record of the workflow’s collection matching `records.where` (at most `records.limit`), as the `runAs` user, ' +
            'with trigger `schedule` and `scheduledFor` the tick’s fire time; a record with an active run of the workflow is skipped and counted. ' +
            'A tick fires once across every instance and restart. 400 naming the field for a bad cron, time zone, filter, limit, or a runAs user who cannot run the workflow.',
        },
      },
    )
    .delete(
      SCHEDULE,
      async ({ params, caller, set }) => {
        await write(deps.store, function* () {
          yield* removeSchedule(deps.clock, yield* adminWorkflow(caller, params), caller.user.id)
        })
        set.status = 204
      },
      {
        accountCall: true,
        params: WorkflowPathParams,
        response: { 204: t.Void(), ...errorResponses(400, 404) },
        detail: { operationId: 'deleteSchedule', summary: "Remove a workflow's schedule (project admins); a tick under way finishes" },
      },
    )
    .post(
      `${SCHEDULE}/preview`,
      async ({ params, body, caller }) => {
        await read(deps.store, adminWorkflow(caller, params))
        const timezone = body.timezone ?? 'UTC'
        return { nextAt: nextFireTimes(cronOf(body.cron, timezone), timezone, deps.clock.now()) }
      },
      {
        accountCall: true,
        params: WorkflowPathParams,
        body: SchedulePreviewBody,
        response: { 200: SchedulePreview, ...errorResponses(400, 404) },
        detail: { operationId: 'previewSchedule', summary: 'The next five fire times of a cron in a time zone, checked as a PUT checks them (project admins)' },
      },
    )
}

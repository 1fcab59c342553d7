/**
 * Runs through the API: read and cancel by runId (the triggering user or a project admin), the manual trigger
 * used by the console, and the per-environment list (project admins; same envelope and paging as notes).
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { RUN_STATUSES } from '../../lib/run-statuses.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { idempotencyDocs, idempotencyKeyOf, runAccepted } from '../../http/idempotency-key.ts'
import { forbidden, notFound } from '../../lib/errors.ts'
import { environmentPage, MAX_NAME_LENGTH, parseDateFilters, parseEnumParameter, parseStringParameter } from '../../http/list.ts'
import { enumQuery, listParameters, textFilter } from '../../http/list-schema.ts'
import { callerProject, requireCallerScope, requireProjectAdmin } from '../auth/service.ts'
import { canReachRendering, environmentOf, requireEnvironment } from '../directory/projects.ts'
import { isAdminOf } from '../directory/projects.ts'
import { requireWorkflow } from '../workflows/service.ts'
import { Run, RunAccepted, RunIdParams, RunPage, StartRunBody } from './model.ts'
import { cancelRun, findRun, listRunIds, renderRuns, workflowIdsNamed } from './service.ts'
import { canonicalStartBody, idempotentCall, startRunOnce } from './idempotency.ts'
import { read } from '../../db/read.ts'

/** A run the caller may see: theirs, or any run of a project they administer. Others are 404, never 403. */
function* visibleRun(caller: AccountCaller, runId: string) {
  const found = yield* findRun(runId)
  const visible =
    found &&
    (caller.tokenProjectId === null || caller.tokenProjectId === found.projectId) &&
    (found.run.userId === caller.user.id || (yield* isAdminOf(caller.user.id, found.projectId)))
  if (!visible) throw notFound(`Run ${runId} not found`)
  return found
}

/** The runs list's date filters (`createdAt.lt=…`). */
const RUN_DATE_FIELDS = ['createdAt'] as const

export function runsModule(deps: AppDeps) {
  return new Elysia({ name: 'runs', tags: ['runs'] })
    .use(authPlugin(deps))
    .get('/v1/workflow-runs/:runId', async ({ params, caller }) => (await read(deps.store, renderRuns([(await read(deps.store, visibleRun(caller, params.runId))).run.id], deps.clock.now())))[0]!, {
      userCall: true,
      params: RunIdParams,
      response: { 200: Run, ...errorResponses(400, 404) },
      detail: { operationId: 'getRun', summary: 'Read a run: status, version, steps, error (the triggering user or a project admin)' },
    })
    .post(
      '/v1/workflow-runs/:runId/cancel',
      async ({ params, caller }) => {
        requireCallerScope(caller, 'workflows:trigger')
        await write(deps.store, function* () {
          yield* visibleRun(caller, params.runId)
          yield* cancelRun(deps.clock, params.runId, { userId: caller.user.id, tokenId: caller.token?.tokenId ?? null })
        })
        deps.executor?.abortRun(params.runId)
        return (await read(deps.store, renderRuns([params.runId], deps.clock.now())))[0]!
      },
      {
        userCall: true,
        params: RunIdParams,
        response: { 200: Run, ...errorResponses(400, 404, 409) },
        detail: { operationId: 'cancelRun', summary: 'Cancel an active run (409 once it has finished)' },
      },
    )
    .post(
      '/v1/project/:projectName/environment/:environmentName/workflow-runs',
      async ({ params, body, caller, request, set }) => {
        requireCallerScope(caller, 'workflows:trigger')
        const project = await read(deps.store, callerProject(caller, params.projectName))
        await read(deps.store, requireEnvironment(params.projectName, params.environmentName))
        const target = await read(deps.store, requireWorkflow(project.id, params.environmentName, body.teamName, body.workflowName))
        if (target.activeVersionId === null) throw notFound(`Workflow ${body.workflowName} has no active version`)
        if (!(await read(deps.store, canReachRendering({ userId: caller.user.id, projectId: project.id, teamId: target.teamId })))) {
          throw forbidden('You cannot reach this workflow\'s team', 'rendering_forbidden')
        }
        const call = idempotentCall(idempotencyKeyOf(request), canonicalStartBody(body), deps.config.idempotencyKeyWindowMs)
        const started = await startRunOnce(deps.store, deps.clock, {
          target,
          versionId: target.activeVersionId,
          recordId: body.recordId,
          userId: caller.user.id,
          tokenId: caller.token?.tokenId ?? null,
          trigger: 'manual',
        }, call)
        if (!started.replayed) deps.executor?.notify()
        return runAccepted(set, started)
      },
      {
        userCall: true,
        body: StartRunBody,
        response: { 202: RunAccepted, ...errorResponses(400, 404, 409, 422) },
        detail: {
          operationId: 'startRun',
          summary: 'Start a run by hand (409 run_in_progress while the record has an active run)',
          description:
            'With an Idempotency-Key, checked once the caller may start the workflow: an invalid key is 400; a replay is answered before the 409; ' +
            'the same key with another workflowName, teamName or recordId is 422 idempotency_key_reused.',
          ...idempotencyDocs('the same workflowName, teamName and recordId'),
        },
      },
    )
    .get(
      '/v1/project/:projectName/environment/:environmentName/workflow-runs',
      ({ params, request, caller }) =>
        environmentPage(request, params, {
          filters: (query) => ({
            status: parseEnumParameter(query, 'status', RUN_STATUSES),
            recordId: parseStringParameter(query, 'recordId'),
            workflowName: parseStringParameter(query, 'workflowName', MAX_NAME_LENGTH),
            teamName: parseStringParameter(query, 'teamName', MAX_NAME_LENGTH),
          }),
          authorize: async () => {
            await read(deps.store, requireProjectAdmin(caller, params.projectName))
          },
          where: environmentOf(deps.store),
          ids: async ({ environment }, { workflowName, teamName, ...filters }, query, limit) => {
            const workflowIds = workflowName === undefined ? undefined : await read(deps.store, workflowIdsNamed(environment.id, workflowName, teamName))
            return read(deps.store, listRunIds(environment.id, { ...filters, workflowIds }, parseDateFilters(query, RUN_DATE_FIELDS), limit))
          },
          render: (ids) => read(deps.store, renderRuns(ids, deps.clock.now())),
        }),
      {
        userCall: true,
        response: { 200: RunPage, ...errorResponses(400, 404) },
        detail: {
          operationId: 'listRuns',
          summary: 'List runs of an environment (project admins)',
          parameters: listParameters(
            {
              workflowName: { description: 'Only runs of this workflow', schema: textFilter(MAX_NAME_LENGTH) },
              teamName: { description: 'With workflowName: the team of the workflow', schema: textFilter(MAX_NAME_LENGTH) },
              recordId: { description: 'Only runs on this record' },
              status: enumQuery('Only runs in this status', RUN_STATUSES),
            },
            RUN_DATE_FIELDS,
          ),
        },
      },
    )
}

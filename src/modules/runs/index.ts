/**
 * Runs through the API: read, cancel and retry by runId (the triggering user or a project admin), the manual trigger
 * used by the console, the per-environment list (project admins; same envelope and paging as notes) and the bulk
 * retry of its failed runs (project admins).
 */
import { Elysia, type Static } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { write } from '../../db/write.ts'
import { RUN_STATUSES } from '../../lib/run-statuses.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { idempotencyDocs, idempotencyKeyOf, runAccepted } from '../../http/idempotency-key.ts'
import { invalidField } from '../../lib/errors.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import { parseIsoMicros } from '../../lib/time.ts'
import { environmentPage, queryOf, MAX_NAME_LENGTH, parseDateFilters, parseEnumParameter, parseStringParameter } from '../../http/list.ts'
import { enumQuery, listParameters, textFilter } from '../../http/list-schema.ts'
import { requireCallerScope, requireProjectAdmin } from '../auth/service.ts'
import { environmentOf, requireEnvironment } from '../directory/projects.ts'
import { BulkRetryAnswer, BulkRetryBody, RetryAccepted, Run, RunAccepted, RunIdParams, RunPage, StartRunBody } from './model.ts'
import { BULK_RETRY_CALLS_PER_MINUTE, BULK_RETRY_MAX_RUNS, type BulkRetryFilter, retryFailedRuns, takeBulkRetryCall } from './retry.ts'
import { listRunIds, renderRuns, workflowIdsNamed } from './service.ts'
import { actorOf, cancelRunAs, readRunAs, retryRunAs, startRunAs } from './calls.ts'
import { read, readListed } from '../../db/read.ts'

/** The bulk retry's filter from its body: each time a `createdAt` comparison; a bad one is a 400 naming its field. */
function bulkRetryFilter(body: Static<typeof BulkRetryBody>): BulkRetryFilter {
  const dates: DateFilter[] = []
  for (const [field, op] of [['createdAfter', 'gte'], ['createdBefore', 'lt']] as const) {
    const raw = body[field]
    if (raw === undefined) continue
    const at = parseIsoMicros(raw)
    if (at === null) throw invalidField(field, `"${raw}" is not an ISO 8601 date-time (e.g. 2026-11-21T12:00:00Z)`)
    dates.push({ field: 'createdAt', op, at })
  }
  return { workflowName: body.workflowName, teamName: body.teamName, dates }
}

/** The runs list's date filters (`createdAt.lt=…`). */
const RUN_DATE_FIELDS = ['createdAt'] as const

export function runsModule(deps: AppDeps) {
  return new Elysia({ name: 'runs', tags: ['runs'] })
    .use(authPlugin(deps))
    .get('/v1/workflow-runs/:runId', ({ params, caller }) => readRunAs(deps, caller, params.runId), {
      userCall: true,
      params: RunIdParams,
      response: { 200: Run, ...errorResponses(400, 404) },
      detail: { operationId: 'getRun', summary: 'Read a run: status, version, steps, error (the triggering user or a project admin)' },
    })
    .post('/v1/workflow-runs/:runId/cancel', ({ params, caller }) => cancelRunAs(deps, caller, params.runId), {
      userCall: true,
      params: RunIdParams,
      response: { 200: Run, ...errorResponses(400, 404, 409) },
      detail: { operationId: 'cancelRun', summary: 'Cancel an active run (409 once it has finished)' },
    })
    .post(
      '/v1/workflow-runs/:runId/retry',
      async ({ params, caller, set }) => {
        const answer = await retryRunAs(deps, caller, params.runId)
        set.status = 202
        return answer
      },
      {
        userCall: true,
        params: RunIdParams,
        response: { 202: RetryAccepted, ...errorResponses(400, 404, 409) },
        detail: {
          operationId: 'retryRun',
          summary: 'Retry a failed or cancelled run from the step it stopped at (the triggering user or a project admin)',
          description:
            'Queues a new run of the same workflow version on the same record, acting as the caller, that resumes at the step the run failed at ' +
            '(for a cancelled run: the first step it had not done); the steps before it are not run again but carried over as recorded (`carriedFrom`). ' +
            'A run is retried at most once: 409 `already_retried` names the run that retries it. 409 `run_not_retryable` while the run is active or once it ' +
            'succeeded, `run_in_progress` while the record has an active run of the workflow, `workflow_withdrawn` when the workflow has no active version; ' +
            '403 `rendering_forbidden` when the caller cannot reach the workflow\'s team. Scope `workflows:trigger`.',
        },
      },
    )
    .post(
      '/v1/project/:projectName/environment/:environmentName/workflow-runs/retry',
      async ({ params, body, caller }) => {
        requireCallerScope(caller, 'workflows:trigger')
        const filter = bulkRetryFilter(body)
        const project = await read(deps.store, requireProjectAdmin(caller, params.projectName))
        const { environment } = await read(deps.store, requireEnvironment(params.projectName, params.environmentName))
        await takeBulkRetryCall(deps.rateCounters, deps.clock, project.id)
        await deps.store.awaitListed('runs') // the failed runs it picks are the list's
        const answer = await write(deps.store, () => retryFailedRuns(deps.clock, environment.id, filter, body.limit ?? BULK_RETRY_MAX_RUNS, actorOf(caller)))
        if (answer.retried.length > 0) deps.executor?.notify()
        return answer
      },
      {
        userCall: true,
        body: BulkRetryBody,
        response: { 200: BulkRetryAnswer, ...errorResponses(400, 404, 429) },
        detail: {
          operationId: 'retryFailedRuns',
          summary: 'Retry the failed runs of a workflow, newest first, at most 100 per call (project admins)',
          description:
            `Retries (as POST /v1/workflow-runs/{runId}/retry does, acting as the caller) the environment's newest failed runs of the workflow that no run ` +
            `retries yet, created in [createdAfter, createdBefore): at most \`limit\` (1–${BULK_RETRY_MAX_RUNS}, default ${BULK_RETRY_MAX_RUNS}) per call, ` +
            `in one transaction. A run the rules refuse is skipped with its code (\`run_in_progress\`: the record has an active run of the workflow). ` +
            `\`more\`: further matching runs are left. At most ${BULK_RETRY_CALLS_PER_MINUTE} calls per project per minute (429 with Retry-After), ` +
            'and a token\'s calls count against its API budget. Scope `workflows:trigger`.',
        },
      },
    )
    .post(
      '/v1/project/:projectName/environment/:environmentName/workflow-runs',
      async ({ params, body, caller, request, set }) => runAccepted(set, await startRunAs(deps, caller, params, body, () => idempotencyKeyOf(request))),
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
        environmentPage(queryOf(request), params, {
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
            return readListed(deps.store, 'runs', listRunIds(environment.id, { ...filters, workflowIds }, parseDateFilters(query, RUN_DATE_FIELDS), limit))
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

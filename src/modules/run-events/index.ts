/**
 * Run events as Server-Sent Events (docs/workflows.md "Run events (SSE)"): one run's (`GET /v1/workflow-runs/{runId}/events`)
 * and an environment's (`GET …/workflow-runs/events`), each resumable with `Last-Event-ID`. Authenticated and counted
 * once, as the run API's calls are; the stream itself is ./hub.ts's, written here as `text/event-stream`.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import type { Logger } from '../../lib/logger.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { type ChunkSource, eventStreamDocs, eventStreamResponse, HEARTBEAT, lastEventIdOf, sseEvent } from '../../http/event-stream.ts'
import { MAX_FILTER_LENGTH, MAX_NAME_LENGTH, parseStringParameter, queryOf } from '../../http/list.ts'
import { RunIdParams } from '../runs/model.ts'
import type { Stream } from './hub.ts'
import { RunEvent } from './model.ts'
import { renderRunEvent, streamableEnvironment, streamableRun } from './service.ts'

/** What the hub's stream delivers, as event-stream text; a stream that fails ends (its client reconnects and resumes). */
function chunksOf(stream: Stream, logger: Logger): ChunkSource {
  return {
    next: async () => {
      try {
        const delivery = await stream.next()
        if (delivery === null) return null
        if (delivery === 'heartbeat') return HEARTBEAT
        return delivery.events.map((event) => sseEvent(event.id, event.type, renderRunEvent(event))).join('')
      } catch (error) {
        logger.warn('an event stream ended on an error', { error: (error as Error).message })
        stream.close()
        return null
      }
    },
    close: () => stream.close(),
  }
}

const LIMITS =
  'On each instance: at most TRELLIS_EVENT_STREAMS_PER_USER streams (50 by default) per user, all their tokens and console sessions together (429 `rate_limited` beyond); ' +
  'at most half of TRELLIS_EVENT_STREAMS_MAX (5,000) per project, rounded up, and TRELLIS_EVENT_STREAMS_MAX in all (503 `too_many_streams` beyond); each with Retry-After. ' +
  'A heartbeat comment every TRELLIS_EVENT_HEARTBEAT_SECONDS (15) while quiet; the caller is authorized again every four heartbeats, reading the database as of then, and the stream ends once it may no longer read.'

export function runEventsModule(deps: AppDeps) {
  const stream = (request: Request, open: () => Stream) => eventStreamResponse(request, () => chunksOf(open(), deps.logger))
  return new Elysia({ name: 'run-events', tags: ['runs'] })
    .use(authPlugin(deps))
    .get(
      '/v1/workflow-runs/:runId/events',
      async ({ params, caller, request }) => {
        const after = lastEventIdOf(request)
        const run = await read(deps.store, streamableRun(caller, params.runId))
        return stream(request, () =>
          deps.runEvents.open({
            userId: caller.user.id,
            projectId: run.projectId,
            environmentId: run.environmentId,
            after,
            run: { id: params.runId, finished: run.finished },
            recheck: async () => {
              await read(deps.store, streamableRun(await deps.auth.confirmCaller(request, { runId: params.runId }), params.runId))
              return {}
            },
          }),
        )
      },
      {
        userCall: true,
        params: RunIdParams,
        response: errorResponses(400, 404),
        detail: {
          operationId: 'streamRunEvents',
          summary: 'Follow a run: its events so far, then live ones, as Server-Sent Events (the triggering user or a project admin)',
          description:
            'Every transition and step outcome of the run in order (`run.started`, `step.succeeded`, `step.waiting`, `run.resumed`, `step.failed`, ' +
            '`run.succeeded`, `run.failed`, `run.cancelled`, `run.requeued`), first those so far (after `Last-Event-ID` when sent), then each as it commits; ' +
            `the stream ends after the run's last event (at once for a finished run read to its end). ${LIMITS}`,
          ...eventStreamDocs('The run’s events', RunEvent),
        },
      },
    )
    .get(
      '/v1/project/:projectName/environment/:environmentName/workflow-runs/events',
      async ({ params, caller, request }) => {
        const query = queryOf(request)
        const wanted = {
          workflowName: parseStringParameter(query, 'workflowName', MAX_NAME_LENGTH),
          teamName: parseStringParameter(query, 'teamName', MAX_NAME_LENGTH),
          recordId: parseStringParameter(query, 'recordId'),
        }
        const after = lastEventIdOf(request)
        const { projectName, environmentName } = params
        const scope = await read(deps.store, streamableEnvironment(caller, projectName, environmentName, wanted))
        return stream(request, () =>
          deps.runEvents.open({
            userId: caller.user.id,
            projectId: scope.projectId,
            environmentId: scope.environmentId,
            after,
            filter: scope.filter,
            recheck: async () => (await read(deps.store, streamableEnvironment(await deps.auth.confirmCaller(request, { projectName }), projectName, environmentName, wanted))).filter,
          }),
        )
      },
      {
        userCall: true,
        response: errorResponses(400, 404),
        detail: {
          operationId: 'streamEnvironmentRunEvents',
          summary: 'Follow every run of an environment the caller may see, as Server-Sent Events (project members)',
          description:
            'The events of the environment’s runs, as they commit: a project admin’s stream carries every run, another member’s the runs acting as them ' +
            '(those they started or retried) and the task events (`task.opened`, `task.decided`, `task.escalated`, `task.closed`) of the tasks assigned to them ' +
            'or to one of their teams. Without `Last-Event-ID` it starts now; with it, it resumes after that event and loses none. ' +
            `It never ends by itself. ${LIMITS}`,
          ...eventStreamDocs('The environment’s run events', RunEvent, [
            { name: 'workflowName', in: 'query', required: false, description: 'Only runs of this workflow', schema: { type: 'string', maxLength: MAX_NAME_LENGTH } },
            { name: 'teamName', in: 'query', required: false, description: 'With workflowName: the team of the workflow', schema: { type: 'string', maxLength: MAX_NAME_LENGTH } },
            { name: 'recordId', in: 'query', required: false, description: 'Only runs on this record', schema: { type: 'string', maxLength: MAX_FILTER_LENGTH } },
          ]),
        },
      },
    )
}

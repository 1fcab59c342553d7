/**
 * The request metrics, recorded in one place: every answer of the app, errors included, counted by method,
 * route template and status, with its latency. Labelled by Elysia's route template (`/v1/hooks/:token`), never
 * by the path: webhook URLs are credentials, and raw paths would make a series per id.
 */
import { Elysia } from 'elysia'
import type { Metrics } from '../lib/metrics.ts'

/** The label of requests that matched no route (404s, and bodies refused before routing). */
export const UNMATCHED_ROUTE = 'unmatched'

export function requestMetrics(metrics: Metrics) {
  const started = new WeakMap<Request, number>()
  return new Elysia({ name: 'request-metrics' })
    .onRequest(({ request }) => {
      started.set(request, performance.now())
    })
    .onAfterResponse({ as: 'global' }, ({ request, route, set, responseValue }) => {
      const start = started.get(request)
      const status = responseValue instanceof Response ? responseValue.status : typeof set.status === 'number' ? set.status : 200
      const labels = { method: request.method, route: route || UNMATCHED_ROUTE }
      metrics.httpRequests.inc({ ...labels, status: String(status) })
      if (start !== undefined) metrics.httpDuration.observe(labels, (performance.now() - start) / 1000)
    })
}

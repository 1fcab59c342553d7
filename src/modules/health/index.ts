/**
 * Operations: /healthz (the process answers), /readyz (the database answers, every migration is applied, the
 * executor runs) and /metrics (Prometheus text; the run gauges are read from the database at scrape time).
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../app.ts'
import { pendingMigrations } from '../../db/migrate.ts'
import { queueStats } from '../../db/queue.ts'
import { errorBody, errorResponses, jsonResponse } from '../../http/errors.ts'

/** Why the instance is not ready, or null when it is. */
function notReadyReason(deps: AppDeps): string | null {
  let pending: string[]
  try {
    pending = pendingMigrations(deps.store.sqlite)
  } catch (error) {
    return `Database unavailable: ${(error as Error).message}`
  }
  if (pending.length > 0) return `Pending migrations: ${pending.join(', ')}`
  if (deps.executor?.enabled && !deps.executor.alive) return 'The workflow executor is not running'
  return null
}

export function healthModule(deps: AppDeps) {
  deps.metrics.observeRuns(() => {
    const now = deps.clock.now()
    const stats = queueStats(deps.store.sqlite, now)
    return {
      byStatus: stats.byStatus,
      queueDepth: stats.due,
      oldestQueuedAgeSeconds: stats.oldestDueAt === null ? 0 : Math.max(0, (now - stats.oldestDueAt) / 1000),
      busyWorkers: deps.executor?.busyWorkers ?? 0,
    }
  })

  return new Elysia({ name: 'health', tags: ['operations'] })
    .get('/healthz', () => ({ status: 'ok' as const }), {
      response: { 200: t.Object({ status: t.Literal('ok') }) },
      detail: { operationId: 'healthz', summary: 'Liveness: the process answers' },
    })
    .get(
      '/readyz',
      () => {
        const reason = notReadyReason(deps)
        return reason === null ? { status: 'ready' as const } : jsonResponse(503, errorBody(503, 'not_ready', reason))
      },
      {
        response: { 200: t.Object({ status: t.Literal('ready') }), ...errorResponses(503) },
        detail: {
          operationId: 'readyz',
          summary: 'Readiness: the database answers, every migration is applied, the executor runs (503 with the reason otherwise)',
        },
      },
    )
    .get('/metrics', async () => new Response(await deps.metrics.registry.metrics(), { headers: { 'content-type': deps.metrics.registry.contentType } }), {
      detail: {
        operationId: 'metrics',
        summary: 'Prometheus metrics (text exposition format)',
        responses: { 200: { description: 'The metrics', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    })
}

/**
 * Operations: /healthz (the process answers), /readyz (the database answers, every migration is applied, the
 * disk has TRELLIS_READY_MIN_FREE_MB free and is writable, the executor runs) and /metrics (Prometheus text; the run gauges are read from the database at scrape time).
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { runQueueStats } from '../../db/maintenance.ts'
import { read } from '../../db/read.ts'
import { listEventCounters } from '../../db/workflow-events.ts'
import { errorBody, errorResponses, jsonResponse } from '../../http/errors.ts'

/** Why the instance is not ready (`code` `not_ready`, `storage_full` or `storage_read_only`), or null when it is. */
async function notReadyReason(deps: AppDeps): Promise<{ code: string; message: string } | null> {
  const notReady = (message: string) => ({ code: 'not_ready', message })
  let pending: string[]
  try {
    pending = await deps.store.pendingMigrations()
  } catch (error) {
    return notReady(`Database unavailable: ${(error as Error).message}`)
  }
  if (pending.length > 0) return notReady(`Pending migrations: ${pending.join(', ')}`)
  if (deps.store.storageReadOnlyNow()) {
    return { code: 'storage_read_only', message: 'The database files cannot be written (a read-only file system or files): writes fail until they are writable again' }
  }
  if (deps.store.storageFullNow(deps.config.readyMinFreeBytes)) {
    const floor = `${deps.config.readyMinFreeBytes / (1024 * 1024)} MiB`
    return { code: 'storage_full', message: `The disk holding the database has less than ${floor} free (TRELLIS_READY_MIN_FREE_MB): writes fail, or soon will, until space is freed` }
  }
  if (deps.executor?.enabled && !deps.executor.alive) return notReady('The workflow executor is not running')
  return null
}

/**
 * Why a serving instance is degraded — a PostgreSQL transaction open past its limit (vacuum is held back), or a list
 * lagging past its limit (new rows are not listed or streamed) — or null. The transaction first: it is the cause.
 */
function degradedReason(deps: AppDeps): { status: 'degraded'; code: 'long_transaction' | 'listing_delayed'; message: string } | null {
  const held = deps.store.longTransactionSeconds()
  if (held !== null) {
    return {
      status: 'degraded',
      code: 'long_transaction',
      message: `A PostgreSQL transaction has been open for ${Math.round(held)} s, past TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS (${deps.config.databaseLongTransactionSeconds} s): vacuum keeps every row version since it began (the log names its session)`,
    }
  }
  const lagging = deps.store.listingDelay()
  if (lagging === null) return null
  return {
    status: 'degraded',
    code: 'listing_delayed',
    message: `The newest ${lagging.list.replaceAll('_', ' ')} have waited ${Math.round(lagging.seconds)} s to be listed, past TRELLIS_LISTING_DELAY_SECONDS (${deps.config.listingDelaySeconds} s): a transaction open in the PostgreSQL cluster holds them back (the log names its session)`,
  }
}

export function healthModule(deps: AppDeps) {
  deps.metrics.observeRuns(async () => {
    const now = deps.clock.now()
    const executor = deps.executor ? { owner: deps.executor.owner, concurrency: deps.executor.concurrency } : null
    const stats = await runQueueStats(deps.store, now, executor)
    return {
      byStatus: stats.byStatus,
      queueDepth: stats.due,
      oldestQueuedAgeSeconds: stats.oldestDueAt === null ? 0 : Math.max(0, (now - stats.oldestDueAt) / 1000),
      busyWorkers: deps.executor?.busyWorkers ?? 0,
      runningByProject: stats.runningByProject,
      deferred: stats.deferred,
      workflowEvents: await read(deps.store, listEventCounters()),
    }
  })

  deps.metrics.observeWrites(() => deps.store.writeCounts())
  deps.metrics.observeEventStreams(() => deps.runEvents.openStreams)

  return new Elysia({ name: 'health', tags: ['operations'] })
    .get('/healthz', () => ({ status: 'ok' as const }), {
      response: { 200: t.Object({ status: t.Literal('ok') }) },
      detail: { operationId: 'healthz', summary: 'Liveness: the process answers' },
    })
    .get(
      '/readyz',
      async () => {
        const reason = await notReadyReason(deps)
        if (reason !== null) return jsonResponse(503, errorBody(503, reason.code, reason.message)) as never
        // Serving, but something outside the instance holds the database back: every instance sees the same, so a
        // load balancer keeps them all (200); the operator reads why.
        return degradedReason(deps) ?? { status: 'ready' as const }
      },
      {
        response: {
          200: t.Union([
            t.Object({ status: t.Literal('ready') }),
            t.Object({ status: t.Literal('degraded'), code: t.Union([t.Literal('long_transaction'), t.Literal('listing_delayed')]), message: t.String() }),
          ]),
          ...errorResponses(503),
        },
        detail: {
          operationId: 'readyz',
          summary:
            'Readiness: the database answers, every migration is applied, the disk has room (TRELLIS_READY_MIN_FREE_MB), the files are writable, the executor runs (503 with the reason otherwise: `not_ready`, `storage_full` or `storage_read_only`); 200 `degraded` while a PostgreSQL transaction has been open past TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS (`long_transaction`) or has held a list\'s newest rows unlisted past TRELLIS_LISTING_DELAY_SECONDS (`listing_delayed`)',
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

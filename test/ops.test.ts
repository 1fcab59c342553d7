/**
 * Operations (DESIGN §11): /readyz, /metrics, and the graceful shutdown of a real `trellis serve` process —
 * an in-flight request completes, exit 0, the WAL is checkpointed, a run parked in a `wait` survives the restart.
 */
import { Database } from 'bun:sqlite'
import { afterEach, describe, expect, test } from 'bun:test'
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Executor } from '../src/executor/executor.ts'
import { manualClock, systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createMetrics } from '../src/lib/metrics.ts'
import { bearer, execute, request, SQLITE_ONLY, sqliteOnlyTest, startServe, testApp, testEnv, type TestEnv, until } from './helpers.ts'
import { acmeDocument, applyAcme, ordersWorkflow, reportHook, seedDataDir, tokenFor } from './support/acme.ts'

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})

function env(): TestEnv {
  const e = testEnv()
  cleanups.push(e.cleanup)
  return e
}



describe('/readyz', () => {
  test('ready: the database answers and every migration is applied', async () => {
    const response = await testApp(env()).handle(request('/readyz'))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ready' })
  })

  test('a pending migration → 503 with the error body naming it', async () => {
    const e = env()
    execute(e.store, "DELETE FROM trellis_migrations WHERE name = '0001_append_only_logs'")
    const response = await testApp(e).handle(request('/readyz'))
    expect(response.status).toBe(503)
    expect(await response.json()).toEqual({
      error: 'Service Unavailable',
      code: 'not_ready',
      message: 'Pending migrations: 0001_append_only_logs',
    })
  })

  test('a database that does not answer → 503', async () => {
    const e = testEnv()
    const app = testApp(e)
    e.cleanup() // closes the connection (PostgreSQL: the pool, and drops the database)
    const response = await app.handle(request('/readyz'))
    expect(response.status).toBe(503)
    expect(await response.json()).toMatchObject({ code: 'not_ready', message: expect.stringContaining('Database unavailable') })
  })

  test('with an executor: 503 until it runs and after it stopped; a disabled executor (concurrency 0) does not block', async () => {
    const e = env()
    const executor = new Executor({ store: e.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 30_000 })
    const app = testApp(e, { executor })
    expect((await app.handle(request('/readyz'))).status).toBe(503)
    expect(await (await app.handle(request('/readyz'))).json()).toMatchObject({ message: 'The workflow executor is not running' })
    executor.start()
    try {
      expect((await app.handle(request('/readyz'))).status).toBe(200)
    } finally {
      await executor.stop()
    }
    expect((await app.handle(request('/readyz'))).status).toBe(503)

    const disabled = new Executor({ store: e.store, clock: systemClock, logger: silentLogger, concurrency: 0, leaseMs: 30_000 })
    disabled.start()
    expect((await testApp(e, { executor: disabled }).handle(request('/readyz'))).status).toBe(200)
  })
})

describe('/metrics', () => {
  /** One sample line's value, e.g. `trellis_queue_depth 2`. */
  function sample(text: string, series: string): number | undefined {
    const line = text.split('\n').find((l) => l.startsWith(`${series} `))
    return line === undefined ? undefined : Number(line.slice(series.length + 1))
  }

  test("the server's process metrics: prom-client's defaults without nodejs_heap_space_size_* (Bun walks the whole heap for them)", async () => {
    const text = await createMetrics({ processMetrics: true }).registry.metrics()
    for (const series of ['process_cpu_user_seconds_total', 'process_start_time_seconds', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_total_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_version_info']) {
      expect(text).toContain(`\n${series}`)
    }
    expect(text).not.toContain('nodejs_heap_space_size')
  })

  test('requests by route template and status, latency, runs by status, queue depth and age, busy workers, login failures', async () => {
    const e = env()
    const report = await applyAcme({ store: e.store, clock: e.clock, secret: e.secret, baseUrl: 'http://trellis.test' }, acmeDocument())
    const hook = reportHook(report, 'Refund order')
    const token = (await tokenFor(e.store, e.clock, 'bob', ['workflows:trigger'])).value
    const metrics = createMetrics()
    const app = testApp(e, { metrics })

    for (let i = 0; i < 3; i++) expect((await app.handle(request('/healthz'))).status).toBe(200)
    expect((await app.handle(request('/nowhere/at/all'))).status).toBe(404)
    const trigger = await app.handle(request(hook, { method: 'POST', headers: bearer(token), json: { record_id: 'ord_1001' } }))
    expect(trigger.status).toBe(202)
    const again = await app.handle(request(hook, { method: 'POST', headers: bearer(token), json: { record_id: 'ord_1001' } }))
    expect(again.status).toBe(409)
    const tooBig = await app.handle(
      request('/auth/login', { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '999999999' }, body: '{}' }),
    )
    expect(tooBig.status).toBe(413)
    expect((await app.handle(request('/auth/login', { method: 'POST', json: { email: 'nobody@example.com', password: 'wrong password' } }))).status).toBe(401)
    e.clock.advance(7_500) // the queued run has now been due for 7.5 s

    await Bun.sleep(10) // after-response hooks run once the answer is out
    const response = await app.handle(request('/metrics'))
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toStartWith('text/plain')
    const text = await response.text()

    expect(sample(text, 'trellis_http_requests_total{method="GET",route="/healthz",status="200"}')).toBe(3)
    expect(sample(text, 'trellis_http_requests_total{method="GET",route="unmatched",status="404"}')).toBe(1)
    expect(sample(text, 'trellis_http_requests_total{method="POST",route="/v1/hooks/:token",status="202"}')).toBe(1)
    expect(sample(text, 'trellis_http_requests_total{method="POST",route="/v1/hooks/:token",status="409"}')).toBe(1)
    expect(sample(text, 'trellis_http_requests_total{method="POST",route="unmatched",status="413"}')).toBe(1)
    expect(sample(text, 'trellis_http_requests_total{method="POST",route="/auth/login",status="401"}')).toBe(1)
    expect(sample(text, 'trellis_http_request_duration_seconds_count{method="GET",route="/healthz"}')).toBe(3)
    expect(sample(text, 'trellis_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/healthz"}')).toBe(3)
    // Labels are route templates: no raw path, so neither ids nor the webhook URL's credential.
    expect(text).not.toContain(hook.split('/').pop()!)
    expect(text).not.toContain('/nowhere')

    expect(sample(text, 'trellis_runs{status="queued"}')).toBe(1)
    for (const status of ['running', 'waiting', 'succeeded', 'failed', 'cancelled']) expect(sample(text, `trellis_runs{status="${status}"}`)).toBe(0)
    expect(sample(text, 'trellis_queue_depth')).toBe(1)
    expect(sample(text, 'trellis_queue_oldest_age_seconds')).toBe(7.5)
    expect(sample(text, 'trellis_executor_busy_workers')).toBe(0)
    expect(sample(text, 'trellis_login_failures_total{reason="unknown_user"}')).toBe(1)
  })

  test('a waiting run counts in the queue only once its wait is over; one registry per app', async () => {
    const e = env()
    const report = await applyAcme({ store: e.store, clock: e.clock, secret: e.secret, baseUrl: 'http://trellis.test' }, acmeDocument())
    const token = (await tokenFor(e.store, e.clock, 'bob', ['workflows:trigger'])).value
    const app = testApp(e)
    const trigger = await app.handle(request(reportHook(report, 'Refund order'), { method: 'POST', headers: bearer(token), json: { record_id: 'ord_1003' } }))
    const { runId } = (await trigger.json()) as { runId: string }
    execute(e.store, "UPDATE runs SET status = 'waiting', available_at = ? WHERE id = ?", e.clock.now() + 60_000, runId)

    const scrape = async (target = app) => (await target.handle(request('/metrics'))).text()
    let text = await scrape()
    expect(sample(text, 'trellis_runs{status="waiting"}')).toBe(1)
    expect(sample(text, 'trellis_queue_depth')).toBe(0)
    expect(sample(text, 'trellis_queue_oldest_age_seconds')).toBe(0)
    e.clock.advance(61_000)
    text = await scrape()
    expect(sample(text, 'trellis_queue_depth')).toBe(1)
    expect(sample(text, 'trellis_queue_oldest_age_seconds')).toBe(1)
    // Another app has its own counters.
    expect(sample(await scrape(testApp(e)), 'trellis_http_requests_total{method="POST",route="/v1/hooks/:token",status="202"}')).toBeUndefined()
  })
})

describe('graceful shutdown (a real `trellis serve`)', () => {
  sqliteOnlyTest(SQLITE_ONLY.ownDataDir, 'SIGTERM: the listener closes, an in-flight webhook call completes, exit 0, WAL checkpointed; a waiting run resumes after the restart', async () => {
    const pause = ordersWorkflow('Pause', [
      { type: 'load' },
      { type: 'wait', name: 'pause', seconds: 2 },
      { type: 'update', name: 'after', set: { trail: 'resumed' } },
    ])
    const { dataDir, cwd: workDir, hook, token } = await seedDataDir('shutdown', [pause], cleanups, async (store, report) => ({
      hook: reportHook(report, 'Pause'),
      token: (await tokenFor(store, systemClock, 'bob', ['workflows:trigger'])).value,
    }))
    const data = { path: dataDir }
    const cwd = { path: workDir }

    const run = async (url: string, id: string) =>
      (await (await fetch(`${url}/v1/workflow-runs/${id}`, { headers: bearer(token) })).json()) as { status: string; steps: { name: string }[] }

    let server = await startServe({ dataDir: data.path, cwd: cwd.path, env: { TRELLIS_LOG_LEVEL: 'info' } })
    let parkedId: string
    let inFlight: Promise<Response>
    let code: number
    try {
      // 1. A run parks in its wait step.
      const first = await fetch(`${server.url}${hook}`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify({ record_id: 'ord_1001' }),
      })
      expect(first.status).toBe(202)
      parkedId = ((await first.json()) as { runId: string }).runId
      await until('the run to wait', async () => ((await run(server.url, parkedId)).status === 'waiting' ? true : null))

      // 2. A webhook call whose body is still arriving when SIGTERM comes.
      let sendRest!: () => void
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"record_id":'))
          sendRest = () => {
            controller.enqueue(new TextEncoder().encode('"ord_1003"}'))
            controller.close()
          }
        },
      })
      inFlight = fetch(`${server.url}${hook}`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit)
      await Bun.sleep(300)
      server.proc.kill('SIGTERM')
      await server.waitForOutput('"msg":"shutting down"')
      await Bun.sleep(200)
      // No longer accepting: a new connection is refused while the old request is still open.
      expect(await fetch(`${server.url}/healthz`).then(() => 'answered', () => 'refused')).toBe('refused')
      expect(server.proc.exitCode).toBeNull()
      sendRest()
      const late = await inFlight
      expect(late.status).toBe(202)
      expect((await late.json()) as { runId: string }).toMatchObject({ runId: expect.any(String) })
    } finally {
      code = await server.stop('SIGTERM')
    }
    expect({ code, stderr: server.stderr() }).toEqual({ code: 0, stderr: '' })
    expect(server.stdout()).toContain('"msg":"stopped","walCheckpointed":true')

    // 3. The database file alone is complete: no WAL content left behind.
    const wal = join(data.path, 'trellis.db-wal')
    expect(existsSync(wal) ? statSync(wal).size : 0).toBe(0)
    const db = new Database(join(data.path, 'trellis.db'), { readonly: true })
    try {
      const runs = db.prepare('SELECT record_id, status, next_step, lease_owner FROM runs ORDER BY created_at').all()
      expect(runs).toEqual([
        { record_id: 'ord_1001', status: 'waiting', next_step: 2, lease_owner: null },
        { record_id: 'ord_1003', status: expect.stringMatching(/^(queued|waiting)$/), next_step: expect.any(Number), lease_owner: null },
      ])
    } finally {
      db.close()
    }

    // 4. After a restart the parked run resumes once due, and finishes; so does the late one.
    server = await startServe({ dataDir: data.path, cwd: cwd.path, env: { TRELLIS_LOG_LEVEL: 'warn' } })
    try {
      const done = await until('the parked run to finish', async () => {
        const seen = await run(server.url, parkedId)
        return seen.status === 'succeeded' || seen.status === 'failed' ? seen : null
      })
      expect(done.status).toBe('succeeded')
      expect(done.steps.map((s) => s.name)).toEqual(['1-load', 'pause', 'after'])
    } finally {
      code = await server.stop('SIGTERM')
    }
    expect(code).toBe(0)
  }, 45_000)
})

describe('the daily jobs of a real `trellis serve`', () => {
  sqliteOnlyTest(
    SQLITE_ONLY.ownDataDir,
    'run once at start: a log entry past TRELLIS_LOG_RETENTION_DAYS is pruned as the server starts',
    async () => {
      // The apply's log entries written ten days before now, whatever the date the test runs on.
      const { dataDir, cwd } = await seedDataDir('daily-jobs', [], cleanups, () => ({}), { clock: manualClock(Date.now() - 10 * 86_400_000) })
      const server = await startServe({ dataDir, cwd, env: { TRELLIS_LOG_LEVEL: 'info', TRELLIS_LOG_RETENTION_DAYS: '1' } })
      try {
        const out = await server.waitForOutput('"msg":"pruned logs"', 5_000)
        expect(out).toContain('"msg":"pruned logs"')
        expect(out).toMatch(/"msg":"pruned logs".*"adminLogs":[1-9]/)
      } finally {
        expect(await server.stop()).toBe(0)
      }
    },
    20_000,
  )
})

/**
 * The executor shares the event loop with the HTTP server: a deep queue must not keep the server from answering.
 * A real Bun.serve socket (not app.handle, which bypasses the event loop's I/O turn) is asked for /healthz while
 * the executor works through a backlog of runs.
 */
import { afterAll, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, userId } from './support/acme.ts'
import { insertRun } from '../src/db/queue.ts'
import { writeNow } from '../src/db/write.ts'
import { queryOne, testApp, testEnv } from './helpers.ts'

const env = testEnv()
afterAll(() => env.cleanup())

test('HTTP answers within a second while 600 queued runs execute', async () => {
  const document = acmeDocument()
  const steps = [{ type: 'load' }, { type: 'update', set: { touched: '{{now}}' } }, { type: 'note', title: 'Touched', content: '<p>{{run.id}}</p>' }]
  const { webhook: _noWebhook, ...touch } = ordersWorkflow('Touch', steps) // runs are queued directly: no webhook block
  acmeProject(document).workflows!.push(touch)
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  const workflow = queryOne<{ id: number; version: number }>(env.store, "SELECT id, active_version_id AS version FROM workflows WHERE name = 'Touch'")!
  const environment = queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE name = 'production'")!
  const bob = userId(env.store, 'bob')
  // A backlog on distinct records (the partial unique index allows one active run per record); the records do
  // not exist, so each run is a claim, a failing load and a finish: real transactions, fast.
  await writeNow(env.store, function* () {
    for (let i = 0; i < 600; i++) {
      yield* insertRun({ id: randomUUIDv7(), workflowId: workflow.id, workflowVersionId: workflow.version, environmentId: environment.id, recordId: `missing-${i}`, userId: bob, tokenId: null, trigger: 'manual', createdAt: Date.now() })
    }
  })

  const executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 20 })
  const app = testApp(env, { clock: systemClock, executor })
  const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (request) => app.handle(request) })
  try {
    executor.start()
    await Bun.sleep(20)
    const waits: number[] = []
    for (let i = 0; i < 5; i++) {
      const started = performance.now()
      const response = await fetch(`http://127.0.0.1:${server.port}/healthz`, { signal: AbortSignal.timeout(5_000) })
      expect(response.status).toBe(200)
      waits.push(performance.now() - started)
    }
    const remaining = queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running')")!.n
    expect(remaining).toBeGreaterThan(0) // the backlog was still being worked on while HTTP answered
    expect(Math.max(...waits)).toBeLessThan(1_000)
  } finally {
    await executor.stop(5_000)
    server.stop(true)
  }
}, 30_000)

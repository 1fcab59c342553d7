/**
 * One project must not starve the others' runs, and a workflow may declare a concurrency limit.
 * The real executor (4 workers) on the test store (a real SQLite file, or PostgreSQL with TRELLIS_TEST_STORE=postgres),
 * `http` steps against a local server on 127.0.0.1 whose answers drip a byte every 50 ms until the test lets them
 * end — so the test, not the clock, decides when a worker frees — and the app's /metrics, /openapi.json and workflow
 * routes through `app.handle`.
 * - Fair share: Acme queues six such runs, Globex one. Oldest first, the four oldest (all Acme's) would take every
 *   worker and Globex's run would wait for one of them to end, as would a Globex run queued while Acme's slow runs go
 *   on. Globex gets a worker at once, and while both projects have workflows Acme never holds more than three of four
 *   (a quarter is kept for the other projects), so a Globex run queued later starts at once too.
 * - Workflow limit: `concurrency: 1` keeps a workflow to one run running (sampled all along), the others queued, not
 *   failed, each starting when the one before ends, while the project's other workflows go on.
 * - The field through the API and the apply file: published, read back, in /openapi.json, refused out of bounds.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import type { Elysia } from 'elysia'
import { insertRun, type NewRun } from '../src/db/queue.ts'
import { write } from '../src/db/write.ts'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { parseAllowList } from '../src/lib/outbound/policy.ts'
import { applyNow, bearer, queryAll, request, testApp, testEnv, type TestEnv, until } from './helpers.ts'
import { type AcmeDocument, acmeProject, acmeWithGlobex, applyAcme, ordersWorkflow, runBaseOf, tokenFor } from './support/acme.ts'
import { expectError } from './support/scenarios.ts'

// ── The remote: GET /drip/<key> answers 200 and drips until the test releases <key> (at most a minute) ──
const released = new Set<string>()
const calls = new Map<string, number>()
const remote = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  fetch(req) {
    const key = decodeURIComponent(new URL(req.url).pathname.replace(/^\/drip\//, ''))
    calls.set(key, (calls.get(key) ?? 0) + 1)
    const deadline = Date.now() + 60_000
    return new Response(
      new ReadableStream({
        async pull(controller) {
          if (released.has(key) || req.signal.aborted || Date.now() > deadline) return controller.close()
          await Bun.sleep(50)
          controller.enqueue(new TextEncoder().encode('.'))
        },
      }),
      { headers: { 'content-type': 'text/plain' } },
    )
  },
})
afterAll(() => remote.stop(true))

const dripStep = { type: 'http', name: 'call', method: 'GET', url: `http://127.0.0.1:${remote.port}/drip/{{record.id}}`, timeoutSeconds: 120, retries: 0 }
const ACME_SLOW = 'Slow call'
const ACME_SERIAL = 'Serial call'
const GLOBEX_CALL = 'Globex call'

/** Acme with Globex; Acme's slow workflow and one limited to one run at a time, Globex's slow workflow. */
function document(): AcmeDocument {
  const document = acmeWithGlobex()
  acmeProject(document).workflows!.push(ordersWorkflow(ACME_SLOW, [dripStep]), ordersWorkflow(ACME_SERIAL, [dripStep], { concurrency: 1 }))
  const globex = document.projects.find((p) => p.name === 'Globex')!
  globex.collections = [{ name: 'tickets' }]
  globex.workflows = [{ name: GLOBEX_CALL, environment: 'production', team: 'Ops', collection: 'tickets', steps: [dripStep] }]
  return document
}

/** A test env with `document()` applied, an executor of 4 workers on it (not started), and the app over both. */
function executorFixture() {
  const fixture = {} as {
    env: TestEnv
    executor: Executor
    app: Elysia
    /** Run ids by record id. */
    runIds: Map<string, string>
    queue(workflow: string, recordId: string): Promise<void>
    /** Each run's status by its record id (on PostgreSQL through the store's pool: psql would stop the event loop). */
    statuses(): Promise<Record<string, string>>
    /** The record ids of the runs in `status`, sorted. */
    withStatus(status: string): Promise<string[]>
    /** The values of the metric's series on /metrics, by their label's value. */
    metric(name: string, label: string): Promise<Record<string, number>>
  }
  const bases: Record<string, Omit<NewRun, 'id' | 'recordId' | 'createdAt'>> = {}
  fixture.runIds = new Map()
  fixture.queue = async (workflow, recordId) => {
    const answer = await write(fixture.env.store, () => insertRun({ ...bases[workflow]!, id: randomUUIDv7(), recordId, createdAt: Date.now() }))
    if (!answer.inserted) throw new Error(`${recordId} not queued`)
    fixture.runIds.set(recordId, answer.id)
  }
  fixture.statuses = async () => {
    const { store } = fixture.env
    const text = 'SELECT record_id, status FROM runs'
    const rows = (store.kind === 'postgres' ? [...(await store.sql.unsafe(text))] : store.sqlite.prepare(text).all()) as { record_id: string; status: string }[]
    return Object.fromEntries(rows.map((r) => [r.record_id, r.status]))
  }
  fixture.withStatus = async (status) => Object.entries(await fixture.statuses()).filter(([, s]) => s === status).map(([record]) => record).sort()
  fixture.metric = async (name, label) => {
    const text = await (await fixture.app.handle(request('/metrics'))).text()
    const series = [...text.matchAll(new RegExp(`^${name}\\{${label}="([^"]*)"\\} (\\S+)$`, 'gm'))]
    return Object.fromEntries(series.map((m) => [m[1]!, Number(m[2])]))
  }

  beforeAll(async () => {
    fixture.env = testEnv()
    const { env } = fixture
    await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document())
    for (const workflow of [ACME_SLOW, ACME_SERIAL, GLOBEX_CALL]) bases[workflow] = runBaseOf(env.store, workflow)
    fixture.executor = new Executor({
      store: env.store,
      clock: systemClock,
      logger: silentLogger,
      concurrency: 4,
      leaseMs: 30_000,
      pollMs: 50,
      outbound: new OutboundClient({ allow: parseAllowList('127.0.0.1') }),
    })
    // The real clock: the runs are queued at the real time, and /metrics compares their due time with it.
    fixture.app = testApp(env, { clock: systemClock, executor: fixture.executor }) as unknown as Elysia
  }, 60_000)

  afterAll(async () => {
    for (const key of fixture.runIds.keys()) released.add(key)
    await fixture.executor?.stop(5_000)
    fixture.env?.cleanup()
  })
  return fixture
}

describe('fair share: every project gets workers while another holds them all', () => {
  const fixture = executorFixture()
  const { queue, statuses, withStatus } = fixture

  test('six slow runs of Acme and one of Globex: Globex gets a worker at once; Acme never holds more than three of four, so a later Globex run starts at once too', async () => {
    // Queued before the executor starts, Globex's run the newest: oldest first, Acme's four oldest took every worker.
    for (let i = 1; i <= 6; i++) await queue(ACME_SLOW, `slow_${i}`)
    await queue(GLOBEX_CALL, 'globex_1')
    fixture.executor.start()
    await until('four runs calling out', async () => (await withStatus('running')).length === 4 && [...fixture.runIds.keys()].filter((key) => calls.has(key)).length === 4, 10_000)
    expect(await withStatus('running')).toEqual(['globex_1', 'slow_1', 'slow_2', 'slow_3'])
    expect(await withStatus('queued')).toEqual(['slow_4', 'slow_5', 'slow_6'])

    // Globex's call ends: Acme, alone with due runs now, still holds three workers, not four — while Globex has a
    // published workflow, a quarter of the workers is kept for it (projectCap: 4 − ceil(4 / 4) = 3).
    released.add('globex_1')
    await until('Globex\'s run to end', async () => (await statuses()).globex_1 === 'succeeded', 10_000)
    await Bun.sleep(300) // several claims (every 50 ms) find Acme's three due runs held back
    expect(await withStatus('running')).toEqual(['slow_1', 'slow_2', 'slow_3'])
    expect(await withStatus('queued')).toEqual(['slow_4', 'slow_5', 'slow_6'])
    expect(await fixture.metric('trellis_executor_running_runs', 'project')).toEqual({ Acme: 3, Globex: 0 })
    expect(await fixture.metric('trellis_executor_deferred_runs', 'reason')).toEqual({ workflow_limit: 0, fair_share: 3 })

    // Globex queues again while Acme's slow runs go on (without a worker kept back, it would wait for one of them to
    // end): it starts on the worker kept for it, without any of Acme's runs ending.
    const queuedAt = performance.now()
    await queue(GLOBEX_CALL, 'globex_2')
    await until('Globex to start on the kept worker', async () => (await statuses()).globex_2 === 'running', 10_000)
    console.log(`fair share: Globex's run started ${(performance.now() - queuedAt).toFixed(0)} ms after it was queued, beside Acme's three slow runs`)
    expect(await withStatus('running')).toEqual(['globex_2', 'slow_1', 'slow_2', 'slow_3'])
    expect(await withStatus('queued')).toEqual(['slow_4', 'slow_5', 'slow_6'])
    expect(await fixture.metric('trellis_executor_running_runs', 'project')).toEqual({ Acme: 3, Globex: 1 })

    // An Acme run ends: the freed worker is Acme's again (it holds two, under its cap), its oldest due run first.
    released.add('slow_1')
    await until('Acme\'s next run on the freed worker', async () => (await statuses()).slow_4 === 'running', 10_000)
    expect(await withStatus('running')).toEqual(['globex_2', 'slow_2', 'slow_3', 'slow_4'])
    expect(await withStatus('queued')).toEqual(['slow_5', 'slow_6'])
    expect(await fixture.metric('trellis_executor_deferred_runs', 'reason')).toEqual({ workflow_limit: 0, fair_share: 2 })

    // Everything lets go: every run finishes, each call made once.
    for (const key of fixture.runIds.keys()) released.add(key)
    await until('every run to finish', async () => (await withStatus('succeeded')).length === fixture.runIds.size, 30_000)
    for (const key of fixture.runIds.keys()) expect({ key, calls: calls.get(key) }).toEqual({ key, calls: 1 })
    expect(await fixture.metric('trellis_executor_running_runs', 'project')).toEqual({ Acme: 0, Globex: 0 })
  }, 90_000)
})

describe('a workflow\'s concurrency limit', () => {
  const fixture = executorFixture()

  test('concurrency: 1 — one run running at a time (sampled all along), the others queued and each started as the one before ends; other workflows go on', async () => {
    const serial = ['serial_1', 'serial_2', 'serial_3', 'serial_4']
    for (const record of serial) await fixture.queue(ACME_SERIAL, record)
    await fixture.queue(ACME_SLOW, 'other_1')
    // Sample the limited workflow's running runs while it all happens (on PostgreSQL each sample is a psql call).
    const seen: number[] = []
    let sampling = true
    const sampler = (async () => {
      while (sampling) {
        const now = await fixture.statuses()
        seen.push(serial.filter((record) => now[record] === 'running').length)
        await Bun.sleep(10)
      }
    })()
    try {
      fixture.executor.start()
      await until('the first serial run and the other workflow\'s to call out', () => calls.has('serial_1') && calls.has('other_1'), 10_000)
      // Free workers are left, yet the limit keeps the other three queued (not failed), and says so on /metrics.
      expect(await fixture.withStatus('running')).toEqual(['other_1', 'serial_1'])
      expect(await fixture.withStatus('queued')).toEqual(['serial_2', 'serial_3', 'serial_4'])
      expect(await fixture.metric('trellis_executor_deferred_runs', 'reason')).toEqual({ workflow_limit: 3, fair_share: 0 })
      for (const [i, record] of serial.entries()) {
        const next = serial[i + 1]
        released.add(record)
        if (!next) break
        const now = await until(`${next} to start once ${record} ended`, async () => {
          const now = await fixture.statuses()
          return now[next] === 'running' && now[record] === 'succeeded' && now
        }, 10_000)
        expect(serial.slice(i + 2).map((later) => now[later])).toEqual(serial.slice(i + 2).map(() => 'queued'))
      }
      released.add('other_1')
      await until('every run to finish', async () => (await fixture.withStatus('succeeded')).length === 5, 30_000)
    } finally {
      sampling = false
      await sampler
    }
    expect(seen.length).toBeGreaterThan(3)
    expect(Math.max(...seen)).toBe(1)
    expect(await fixture.metric('trellis_executor_deferred_runs', 'reason')).toEqual({ workflow_limit: 0, fair_share: 0 })
  }, 90_000)

  test('the field through the API: published as a new version, read back, in /openapi.json; refused out of bounds naming it', async () => {
    const { env, app } = fixture
    const alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    const path = '/v1/project/Acme/environment/production/team/Support/workflows/Throttled'
    const send = async (init: Parameters<typeof request>[1] = {}) => {
      const response = await app.handle(request(path, { headers: bearer(alice), ...init }))
      return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> }
    }
    const definition = { collection: 'orders', steps: [{ type: 'load' }] }
    expect((await send({ method: 'PUT', json: { ...definition, concurrency: 3 } })).body).toMatchObject({ version: 1, outcome: 'created' })
    expect((await send()).body).toMatchObject({ name: 'Throttled', collection: 'orders', version: 1, concurrency: 3, steps: [{ type: 'load' }], webhook: { enabled: false } })
    // A changed limit is a new version; without the field there is no limit.
    expect((await send({ method: 'PUT', json: { ...definition, concurrency: 5 } })).body).toMatchObject({ version: 2, outcome: 'published' })
    expect((await send()).body).toMatchObject({ version: 2, concurrency: 5 })
    expect((await send({ method: 'PUT', json: definition })).body).toMatchObject({ version: 3, outcome: 'published' })
    expect((await send()).body).toMatchObject({ version: 3, concurrency: null })
    expect(queryAll(env.store, "SELECT concurrency_limit FROM workflows WHERE name = 'Throttled'")).toEqual([{ concurrency_limit: null }])
    for (const concurrency of [0, -1, 1001, 1.5, 'two', null]) {
      expectError(await send({ method: 'PUT', json: { ...definition, concurrency } }), 400, 'validation_failed', 'concurrency')
    }
    expect((await send()).body).toMatchObject({ version: 3 })
    // A workflow nobody published: 404; a member who is not a project admin: 403.
    const missing = await app.handle(request(`${path}-not-there`, { headers: bearer(alice) }))
    expect(missing.status).toBe(404)
    const bob = (await tokenFor(env.store, env.clock, 'bob', ['all'])).value
    expect((await app.handle(request(path, { headers: bearer(bob) }))).status).toBe(403)

    const openapi = (await (await app.handle(request('/openapi.json'))).json()) as { paths: Record<string, Record<string, any>> }
    const operations = openapi.paths['/v1/project/{projectName}/environment/{environmentName}/team/{teamName}/workflows/{workflowName}']!
    expect(operations.put.requestBody.content['application/json'].schema.properties.concurrency).toMatchObject({ type: 'integer', minimum: 1, maximum: 1000 })
    const answer = operations.get.responses['200'].content['application/json'].schema
    expect(answer.properties.concurrency).toMatchObject({ type: ['integer', 'null'], minimum: 1, maximum: 1000 })
    expect(answer.required).toEqual(expect.arrayContaining(['version', 'concurrency', 'steps', 'webhook']))
  })

  test('the field in the apply file: applied, and refused out of bounds with its path', async () => {
    const { env } = fixture
    const ctx = { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }
    const applied = document()
    acmeProject(applied).workflows!.push(ordersWorkflow('Applied limit', [{ type: 'load' }], { concurrency: 2 }))
    await applyNow(applied, ctx)
    expect(queryAll(env.store, "SELECT concurrency_limit FROM workflows WHERE name = 'Applied limit'")).toEqual([{ concurrency_limit: 2 }])
    const refused = document()
    acmeProject(refused).workflows!.push(ordersWorkflow('Too wide', [{ type: 'load' }], { concurrency: 5000 }))
    const index = acmeProject(refused).workflows!.length - 1
    await expect(applyNow(refused, ctx)).rejects.toThrow(`projects[0].workflows[${index}].concurrency`)
    expect(queryAll(env.store, "SELECT name FROM workflows WHERE name = 'Too wide'")).toEqual([])
  })
})

/**
 * The executor (DESIGN §8; spec §2.5, §3, §4.2 behaviours 3–5): runs executed in-process on the real clock
 * against the test store (a real SQLite file, or PostgreSQL with TRELLIS_TEST_STORE=postgres), HTTP steps against a
 * local server on 127.0.0.1, crash recovery with the real `trellis serve` process killed with SIGKILL, and unit tests
 * of templates, conditions and backoff; the queue's own operations driven directly on SQLite only.
 */
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { advanceRun, insertRun, LeaseLostError, type NewRun, recoverExpiredRuns, type RunRow, runWorkflow } from '../src/db/queue.ts'
import { Executor, STEP_RUNNERS } from '../src/executor/executor.ts'
import { StepFailure, type StepContext, type StepResult, type StepRunner } from '../src/executor/step.ts'
import { backoffMs } from '../src/executor/steps/http.ts'
import { renderTemplate, renderUrl, type TemplateVariables, UrlTemplateError } from '../src/lib/template.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { loadInstanceSecret } from '../src/lib/secret.ts'
import type { Step } from '../src/modules/workflows/definition.ts'
import { publishWorkflow } from '../src/modules/workflows/service.ts'
import { anotherStore, bearer, execute, processEnv, queryAll, queryOne, repoRoot, request, runNow, SQLITE_ONLY, sqliteOnlyTest, startServe, tempDir, testApp, type TestEnv, testEnv, type TestStore, until } from './helpers.ts'
import { queueOn } from './support/queue.ts'
import {
  type AcmeDocument,
  acmeDocument,
  acmeProject,
  acmeWorkflow,
  applyAcme,
  hookPath,
  ordersWorkflow,
  refundRunBase,
  reportHook,
  tokenFor,
  userId,
  UUID,
} from './support/acme.ts'

// ── A local HTTP server for `http` steps ────────────────────────────────────

interface Hit {
  path: string
  runId: string | null
  method: string
  body: string
}
const hits: Hit[] = []
/** What `/huge` offers (300 MB) and what it has handed to the socket so far. */
const HUGE_BYTES = 300 * 1024 * 1024
/**
 * The heartbeat test's lease, and its slow call: two and a half leases long. Renewed every third of it, the lease
 * leaves its worker 1.3 s of slack, and the test's recovery checks may be up to a lease apart: margins for a process
 * that a loaded 2-core machine holds up now and then (the test is about the order of events, not the milliseconds).
 */
const HEARTBEAT_LEASE_MS = 2_000
const SLOW_CALL_MS = 5_000
let hugeSent = 0
const hitsOf = (path: string, runId: string) => hits.filter((h) => h.path === path && h.runId === runId)
let firstHang: () => void = () => {}
let hangStarted = new Promise<void>((resolve) => (firstHang = resolve))

const remote = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(req) {
    const url = new URL(req.url)
    const runId = req.headers.get('x-trellis-run-id')
    const hit: Hit = { path: url.pathname, runId, method: req.method, body: await req.text() }
    hits.push(hit)
    const seen = runId === null ? 0 : hitsOf(url.pathname, runId).length
    switch (url.pathname) {
      case '/flaky':
        return seen <= 2 ? new Response('busy', { status: 503 }) : Response.json({ ok: true })
      case '/broken':
        return new Response('boom', { status: 500 })
      case '/missing':
        return new Response('no such thing', { status: 404 })
      case '/echo':
        return Response.json({ ok: true })
      case '/redirect':
        return new Response(null, { status: 302, headers: { location: new URL('/echo', url).href } })
      case '/reflect':
        // An API that echoes what it was sent in its refusal (many do): the step's credentials come back in the body.
        return Response.json({ authorization: req.headers.get('authorization'), apiKey: req.headers.get('x-api-key'), url: req.url }, { status: 401 })
      case '/huge':
        // Produced as it is read: an honest client that stops reading stops the stream.
        hugeSent = 0
        return new Response(
          new ReadableStream({
            pull(controller) {
              if (hugeSent >= HUGE_BYTES) return controller.close()
              controller.enqueue(new Uint8Array(64 * 1024).fill(120))
              hugeSent += 64 * 1024
            },
          }),
          { headers: { 'content-type': 'text/plain' } },
        )
      case '/slow':
        await Bun.sleep(SLOW_CALL_MS)
        return Response.json({ ok: true })
      case '/hang':
        // The first call of a run never answers in time: its caller is killed meanwhile.
        if (seen === 1) {
          firstHang()
          await Promise.race([Bun.sleep(20_000), new Promise((resolve) => req.signal.addEventListener('abort', resolve))])
        }
        return Response.json({ ok: true })
      default:
        if (url.pathname.startsWith('/records/')) return Response.json({ path: url.pathname, query: url.search })
        return new Response('?', { status: 400 })
    }
  },
})
const remoteUrl = `http://127.0.0.1:${remote.port}`
afterAll(() => remote.stop(true))

// ── Shared helpers ──────────────────────────────────────────────────────────

/** How often these tests look at a run: the executor polls every 20 ms, so every 10 ms sees each state. */
const POLL_MS = 10

function http(name: string, method: string, path: string, extra: Record<string, unknown> = {}) {
  return {
    name,
    environment: 'production',
    team: 'Support',
    collection: 'orders',
    webhook: { enabled: true, ratePerMinute: 1000 },
    steps: [{ type: 'http', method, url: `${remoteUrl}${path}`, ...extra }],
  }
}

/** Credentials written into http steps: none may reach a run's answer. */
const STEP_SECRETS = { query: 'QuerySecret-4711', bearer: 'BearerSecret-4711', apiKey: 'ApiKeySecret-4711', password: 'PassSecret-4711', fragment: 'FragmentSecret-4711' }
/** Every spelling of them an answer could carry: as written, and the Basic credentials fetch makes of the URL's user. */
const SECRET_SPELLINGS = [...Object.values(STEP_SECRETS), btoa(`svc:${STEP_SECRETS.password}`)]

/** Triggers a run through its webhook (202) and waits until it has succeeded or failed: its id and its row. */
async function runToEnd(app: ReturnType<typeof testApp>, env: TestEnv, hook: string, token: string, recordId: string): Promise<{ runId: string; done: RunRow }> {
  const response = await app.handle(request(hook, { method: 'POST', headers: bearer(token), json: { record_id: recordId } }))
  expect(response.status).toBe(202)
  const { runId } = (await response.json()) as { runId: string }
  const done = await until(`run ${runId} to finish`, () => {
    const row = queryOne(env.store, 'SELECT * FROM runs WHERE id = ?', runId) as RunRow
    return ['succeeded', 'failed'].includes(row.status) ? row : null
  }, 5_000, POLL_MS)
  return { runId, done }
}

/** Acme for the executor tests: Refund order waits 1 s instead of 5, plus the workflows the tests need. */
function executorDocument(): AcmeDocument {
  const document = acmeDocument({ passwords: true })
  const acme = acmeProject(document)
  const refund = acmeWorkflow(document, 'Refund order')
  refund.steps[4]!.seconds = 1
  refund.webhook = { enabled: true, ratePerMinute: 1000 }
  acme.collections!.push({ name: 'ledger', permissions: { Support: { read: false, edit: false } } })
  acme.records!.push({ environment: 'production', collection: 'ledger', id: 'led_1', data: { balance: 10 } })
  for (let i = 1; i <= 9; i++) {
    acme.records!.push({ environment: 'production', collection: 'orders', id: `ord_200${i}`, data: { status: 'paid', amount: i } })
  }
  for (const id of ['../../admin?x=', '..']) acme.records!.push({ environment: 'production', collection: 'orders', id, data: { status: 'paid' } })
  const onOrders = { environment: 'production', team: 'Support', collection: 'orders', webhook: { enabled: true, ratePerMinute: 1000 } }
  acme.workflows!.push(
    { ...onOrders, name: 'Ledger check', collection: 'ledger', steps: [{ type: 'load' }] },
    { ...onOrders, name: 'Billing touch', team: 'Billing', steps: [{ type: 'load' }, { type: 'update', set: { touched: 'billing' } }] },
    { ...onOrders, name: 'Long hold', steps: [{ type: 'load' }, { type: 'wait', name: 'pause', seconds: 600 }, { type: 'update', set: { held: 'long' } }] },
    // The bench's three-step run (load, update, note).
    { ...onOrders, name: 'Three steps', steps: [{ type: 'load' }, { type: 'update', set: { touched: 'three' } }, { type: 'note', title: 'Three', content: '<p>done</p>' }] },
    // Fields named like Object.prototype members: the record has none of them.
    {
      ...onOrders,
      name: 'Prototype fields',
      steps: [
        { type: 'load' },
        { type: 'update', set: { echoed: '{{record.constructor}}|{{record.toString}}|{{record.__proto__}}|{{record.status.length}}' } },
        { type: 'condition', if: { field: 'constructor', exists: false }, else: 'fail' },
        { type: 'condition', if: { field: 'hasOwnProperty', exists: false }, else: 'fail' },
      ],
    },
    { ...onOrders, name: 'Versioned', steps: [{ type: 'load' }, { type: 'wait', seconds: 1 }, { type: 'update', name: 'mark', set: { version: 'v1' } }] },
    http('Call flaky', 'POST', '/flaky', { retries: 3, body: { order: '{{record.id}}', run: '{{run.id}}' } }),
    http('Call broken', 'GET', '/broken', { retries: 1 }),
    http('Call missing', 'GET', '/missing', { retries: 3 }),
    http('Call hang', 'POST', '/hang', { retries: 2, timeoutSeconds: 30 }),
    http('Call path', 'GET', '/records/{{record.id}}/view?order={{record.id}}', { retries: 0 }),
    http('Call huge', 'GET', '/huge', { retries: 0, timeoutSeconds: 30 }),
    http('Call redirect', 'GET', '/redirect', { retries: 0 }),
    // Credentials in the URL's user, password and query, and in headers.
    {
      ...onOrders,
      name: 'Call secrets',
      steps: [
        {
          type: 'http',
          name: 'call',
          method: 'POST',
          url: `${remoteUrl}/reflect?api_key=${STEP_SECRETS.query}&order={{record.id}}`,
          headers: { authorization: `Bearer ${STEP_SECRETS.bearer}`, 'x-api-key': STEP_SECRETS.apiKey, accept: 'application/json' },
          retries: 0,
        },
      ],
    },
    { ...onOrders, name: 'Call basic', steps: [{ type: 'http', name: 'call', method: 'GET', url: `http://svc:${STEP_SECRETS.password}@127.0.0.1:${remote.port}/reflect`, retries: 0 }] },
    { ...onOrders, name: 'Call secret 5xx', steps: [{ type: 'http', name: 'call', method: 'GET', url: `http://svc:${STEP_SECRETS.password}@127.0.0.1:${remote.port}/broken?token=${STEP_SECRETS.query}#${STEP_SECRETS.fragment}`, retries: 0 }] },
    {
      ...onOrders,
      name: 'Wait then call',
      steps: [
        { type: 'load' },
        { type: 'wait', seconds: 1 },
        { type: 'http', name: 'call', method: 'POST', url: `${remoteUrl}/echo`, body: { id: '{{record.id}}', status: '{{record.status}}', amount: '{{record.amount}}' } },
      ],
    },
  )
  return document
}

// ── In-process executor ─────────────────────────────────────────────────────

describe('executor (in-process, real clock)', () => {
  let env: TestEnv
  let app: ReturnType<typeof testApp>
  let executor: Executor
  const hooks: Record<string, string> = {}
  const tokens = {} as Record<'bob' | 'alice' | 'carol' | 'dave' | 'daveRead', string>
  let aliceCookie = ''

  const run = (id: string) => queryOne(env.store, 'SELECT * FROM runs WHERE id = ?', id) as RunRow
  const steps = (id: string) =>
    queryAll(env.store, 'SELECT * FROM run_steps WHERE run_id = ? ORDER BY step_index', id) as {
      step_index: number
      name: string
      type: string
      status: string
      output: string | null
      error: string | null
    }[]
  const activity = (id: string) =>
    queryAll(env.store, 'SELECT * FROM activity_logs WHERE run_id = ? ORDER BY id', id) as {
      action: string
      label: string
      user_id: number
      token_id: number | null
      workflow_name: string
      run_id: string
      step_name: string | null
    }[]
  const recordData = (id: string, collection = 'orders') =>
    JSON.parse(
      (
        queryOne(env.store, 'SELECT r.data FROM records r JOIN collections c ON c.id = r.collection_id JOIN environments e ON e.id = r.environment_id WHERE r.record_key = ? AND c.name = ? AND e.name = ?', id, collection, 'production') as { data: string }
      ).data,
    ) as Record<string, unknown>

  async function send(req: Request) {
    const response = await app.handle(req)
    const text = await response.text()
    return { status: response.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> }
  }
  const trigger = (workflow: string, token: string, recordId: string) =>
    send(request(hooks[workflow]!, { method: 'POST', headers: bearer(token), json: { record_id: recordId } }))
  async function start(workflow: string, recordId: string, token = tokens.bob): Promise<string> {
    const sent = await trigger(workflow, token, recordId)
    expect({ status: sent.status, body: sent.body }).toMatchObject({ status: 202 })
    expect(sent.body.runId).toMatch(UUID)
    return sent.body.runId as string
  }
  const getRun = (id: string, headers: Record<string, string>) => send(request(`/v1/workflow-runs/${id}`, { headers }))
  const finished = (id: string, timeoutMs = 5_000) =>
    until(`run ${id} to finish`, () => (['succeeded', 'failed', 'cancelled'].includes(run(id).status) ? run(id) : null), timeoutMs, POLL_MS)
  const inStatus = (id: string, status: RunRow['status'], timeoutMs = 5_000) =>
    until(`run ${id} to be ${status}`, () => (run(id).status === status ? run(id) : null), timeoutMs, POLL_MS)
  /**
   * The parked run's worker is free while the run still waits. The worker lets go once its commit is answered: a
   * poll from another connection (PostgreSQL: psql) may see the commit a moment before that, hence the short wait.
   */
  async function parkedWithoutWorker(id: string): Promise<void> {
    await until(`the worker to let go of run ${id}`, () => executor.busyWorkers === 0, 1_000, 1)
    expect(run(id).status).toBe('waiting')
  }
  /** A fresh executor (and the app that wakes it) calling out through the operator's allow-list. */
  function startExecutor(): void {
    executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20, outbound: new OutboundClient({ allow: env.config.httpAllow }) })
    app = testApp(env, { clock: systemClock, executor })
    executor.start()
  }

  beforeAll(async () => {
    // The operator opens the local test server; everything else stays refused.
    env = testEnv({ TRELLIS_HTTP_ALLOW: '127.0.0.1' })
    const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, executorDocument())
    for (const workflow of report.workflows) if (workflow.webhook.url) hooks[workflow.name] = hookPath(workflow.webhook.url)
    startExecutor()
    tokens.bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    tokens.alice = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
    tokens.carol = (await tokenFor(env.store, systemClock, 'carol', ['all'])).value
    tokens.dave = (await tokenFor(env.store, systemClock, 'dave', ['workflows:trigger'])).value
    tokens.daveRead = (await tokenFor(env.store, systemClock, 'dave', ['notes:read'])).value
    // A console session for alice, and the `Hold` workflow published with it.
    const login = await app.handle(request('/auth/login', { method: 'POST', json: { email: 'alice@example.com', password: 'alice-demo-pass-2026' } }))
    expect(login.status).toBe(200)
    aliceCookie = login.headers.get('set-cookie')!.split(';')[0]!
    const hold = await send(
      request('/v1/project/Acme/environment/production/team/Support/workflows/Hold', {
        method: 'PUT',
        headers: { cookie: aliceCookie },
        json: {
          collection: 'orders',
          webhook: { enabled: true, ratePerMinute: 1000 },
          steps: [{ type: 'load' }, { type: 'wait', name: 'pause', seconds: 1 }, { type: 'update', name: 'hold', set: { held: 'yes' } }],
        },
      }),
    )
    expect(hold.body).toMatchObject({ version: 1, outcome: 'created', webhook: { enabled: true } })
    hooks.Hold = hookPath((hold.body.webhook as { url: string }).url)
  }, 60_000) // the first block of the file: on PostgreSQL it starts the shared cluster, seconds on a busy machine

  afterAll(async () => {
    await executor.stop(2_000)
    env.cleanup()
  })

  test('Refund order on a paid order: queued → running → waiting → succeeded, as the token user', async () => {
    const bob = userId(env.store, 'bob')
    const runId = await start('Refund order', 'ord_1001')

    const parked = await inStatus(runId, 'waiting')
    expect(parked.next_step).toBe(5)
    expect(parked.lease_owner).toBeNull()
    expect(parked.available_at).toBeGreaterThan(Date.now())
    expect(parked.available_at).toBeLessThanOrEqual(Date.now() + 1_000)
    await parkedWithoutWorker(runId)
    // Data effects are already there while it waits.
    expect(recordData('ord_1001').status).toBe('refunded')
    // The record is held while the run waits.
    const conflict = await trigger('Refund order', tokens.bob, 'ord_1001')
    expect(conflict).toMatchObject({ status: 409, body: { code: 'run_in_progress', runId } })

    const done = await finished(runId)
    expect(done.status).toBe('succeeded')
    expect(done.error).toBeNull()
    expect(done.started_at).toBeGreaterThan(0)
    expect(done.finished_at).toBeGreaterThanOrEqual(done.started_at!)
    expect(done.lease_owner).toBeNull()

    expect(steps(runId).map((s) => [s.step_index, s.name, s.type, s.status])).toEqual([
      [0, '1-load', 'load', 'succeeded'],
      [1, '2-condition', 'condition', 'succeeded'],
      [2, '3-update', 'update', 'succeeded'],
      [3, '4-note', 'note', 'succeeded'],
      [4, '5-wait', 'wait', 'succeeded'],
    ])
    expect(JSON.parse(steps(runId)[1]!.output!)).toEqual({ matched: true })

    // The note, created by the run's user.
    const notes = queryAll(env.store, "SELECT * FROM notes WHERE record_id = 'ord_1001' AND title = 'Refund'") as { id: number; user_id: number }[]
    expect(notes).toHaveLength(1)
    expect(notes[0]!.user_id).toBe(bob)
    const message = queryOne(env.store, 'SELECT content, user_id FROM note_messages WHERE note_id = ?', notes[0]!.id)
    expect(message).toEqual({ content: '<p>Refunded by Refund order</p>', user_id: bob })
    expect(JSON.parse(steps(runId)[3]!.output!)).toEqual({ noteId: notes[0]!.id })

    // Activity: the trigger, what the run did to the record (read it, changed it — with the step that did) and its
    // end — exactly those; the steps that did nothing to it (condition, wait) are the run's steps above. Every entry
    // carries the user and the workflow {name, runId, stepName}.
    const entries = activity(runId)
    expect(entries.every((e) => e.user_id === bob && e.workflow_name === 'Refund order' && e.run_id === runId)).toBe(true)
    expect(entries.map((e) => [e.action, e.step_name])).toEqual([
      ['triggerWorkflow', null],
      ['read', '1-load'],
      ['update', '3-update'],
      ['createNote', '4-note'],
      ['completeWorkflow', null],
    ])
    expect(new Set(entries.map((e) => e.token_id))).toEqual(new Set([run(runId).token_id]))

    // Observable through its runId by the triggering user.
    const seen = await getRun(runId, bearer(tokens.bob))
    expect(seen.status).toBe(200)
    // Once its time has passed, the wait reads `succeeded` like the steps before it.
    expect((seen.body.steps as { status: string }[]).map((s) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded'])
    const workflowId = (queryOne(env.store, "SELECT id FROM workflows WHERE name = 'Refund order'") as { id: number }).id
    expect(seen.body).toMatchObject({
      object: 'workflow-run',
      id: runId,
      status: 'succeeded',
      trigger: 'webhook',
      workflow: { id: workflowId, name: 'Refund order', version: 1 },
      recordId: 'ord_1001',
      environment: { object: 'environment', name: 'production' },
      team: { object: 'team', name: 'Support' },
      user: { object: 'user', id: bob, username: 'bob', email: 'bob@example.com' },
    })
    expect(seen.body.error).toBeUndefined()
    // createdAt orders the runs list (µs, like notes and log entries); the run's other times are milliseconds.
    expect(seen.body.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
    for (const field of ['startedAt', 'finishedAt']) expect(seen.body[field]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    const shownSteps = seen.body.steps as { index: number; name: string; type: string; status: string; output?: unknown }[]
    expect(shownSteps.map((s) => [s.index, s.name, s.type, s.status])).toEqual(steps(runId).map((s) => [s.step_index, s.name, s.type, s.status]))
    expect(shownSteps[1]!.output).toEqual({ matched: true })

    // Finished: a new request on the record starts a fresh run. The order is refunded now: the condition ends it early.
    const again = await start('Refund order', 'ord_1001')
    expect(again).not.toBe(runId)
    expect((await finished(again)).status).toBe('succeeded')
    expect(steps(again).map((s) => s.name)).toEqual(['1-load', '2-condition'])
    expect(JSON.parse(steps(again)[1]!.output!)).toEqual({ matched: false })
    expect(queryOne(env.store, "SELECT count(*) AS n FROM notes WHERE record_id = 'ord_1001' AND title = 'Refund'")).toEqual({ n: 1 })
  })

  test('a false condition (pending order) ends the run succeeded at once: nothing updated, no note', async () => {
    const before = recordData('ord_1002')
    const notesBefore = queryOne(env.store, "SELECT count(*) AS n FROM notes WHERE record_id = 'ord_1002'")
    const runId = await start('Refund order', 'ord_1002')
    const done = await finished(runId)
    expect(done.status).toBe('succeeded')
    expect(done.error).toBeNull()
    expect(steps(runId).map((s) => [s.name, s.status])).toEqual([
      ['1-load', 'succeeded'],
      ['2-condition', 'succeeded'],
    ])
    expect(recordData('ord_1002')).toEqual(before)
    expect(queryOne(env.store, "SELECT count(*) AS n FROM notes WHERE record_id = 'ord_1002'")).toEqual(notesBefore)
    expect(activity(runId).map((e) => e.action)).toEqual(['triggerWorkflow', 'read', 'completeWorkflow'])
  })

  test('record fields named like Object.prototype members (constructor, toString, __proto__) are absent in templates and conditions', async () => {
    const runId = await start('Prototype fields', 'ord_2009')
    const done = await finished(runId)
    expect({ status: done.status, error: done.error }).toEqual({ status: 'succeeded', error: null })
    expect(recordData('ord_2009').echoed).toBe('|||')
  })

  test('a record that does not exist: 202, then failed with record_not_found at the first data step', async () => {
    const runId = await start('Refund order', 'ord_missing')
    const done = await finished(runId)
    expect(done.status).toBe('failed')
    expect(JSON.parse(done.error!)).toMatchObject({ code: 'record_not_found', step: '1-load' })
    expect(steps(runId).map((s) => [s.name, s.status, JSON.parse(s.error!).code])).toEqual([['1-load', 'failed', 'record_not_found']])
    expect(activity(runId).map((e) => [e.action, e.label])).toEqual([
      ['triggerWorkflow', 'triggered via webhook'],
      ['failWorkflow', 'workflow run failed: record_not_found'],
    ])
    const seen = await getRun(runId, bearer(tokens.bob))
    expect(seen.body).toMatchObject({ status: 'failed', error: { code: 'record_not_found', step: '1-load' } })
    // A failed run is finished: the record is free.
    const next = await start('Refund order', 'ord_missing')
    expect((await finished(next)).status).toBe('failed')
  })

  test('a user who may not read the collection: 202, then failed with record_forbidden; an admin may', async () => {
    const runId = await start('Ledger check', 'led_1')
    const done = await finished(runId)
    expect(done.status).toBe('failed')
    expect(JSON.parse(done.error!)).toMatchObject({ code: 'record_forbidden', step: '1-load' })
    // Forbidden before not-found: the user learns nothing about which records exist.
    const ghost = await start('Ledger check', 'led_nope')
    expect(JSON.parse((await finished(ghost)).error!).code).toBe('record_forbidden')

    // The manual trigger by alice (project admin): she reads everything.
    const manual = await send(
      request('/v1/project/Acme/environment/production/workflow-runs', {
        method: 'POST',
        headers: bearer(tokens.alice),
        json: { workflowName: 'Ledger check', teamName: 'Support', recordId: 'led_1' },
      }),
    )
    expect(manual.status).toBe(202)
    const manualId = manual.body.runId as string
    expect((await finished(manualId)).status).toBe('succeeded')
    expect(run(manualId)).toMatchObject({ trigger: 'manual', user_id: userId(env.store, 'alice') })
    expect(activity(manualId)[0]).toMatchObject({ action: 'triggerWorkflow', label: 'triggered manually' })
  })

  test('a user who may read but not edit fails at the first writing step, with nothing written', async () => {
    const before = recordData('ord_1003')
    const runId = await start('Billing touch', 'ord_1003', tokens.dave)
    const done = await finished(runId)
    expect(done.status).toBe('failed')
    expect(JSON.parse(done.error!)).toMatchObject({ code: 'record_forbidden', step: '2-update' })
    expect(steps(runId).map((s) => [s.name, s.status])).toEqual([
      ['1-load', 'succeeded'],
      ['2-update', 'failed'],
    ])
    expect(recordData('ord_1003')).toEqual(before)
    expect(activity(runId).filter((e) => e.action === 'update')).toEqual([])
  })

  test('permissions are those at execution time: read access revoked or the user deactivated after the trigger → record_forbidden', async () => {
    await executor.stop(2_000)
    try {
      const runId = await start('Refund order', 'ord_2009')
      const support = queryOne(env.store, "SELECT id FROM teams WHERE name = 'Support'") as { id: number }
      const orders = queryOne(env.store, "SELECT id FROM collections WHERE name = 'orders'") as { id: number }
      execute(env.store, 'UPDATE collection_permissions SET can_read = FALSE WHERE team_id = ? AND collection_id = ?', support.id, orders.id)
      try {
        startExecutor()
        expect(JSON.parse((await finished(runId)).error!).code).toBe('record_forbidden')
      } finally {
        execute(env.store, 'UPDATE collection_permissions SET can_read = TRUE WHERE team_id = ? AND collection_id = ?', support.id, orders.id)
      }
      // A user deactivated after the trigger: the run does not act for them.
      await executor.stop(2_000)
      const bob = userId(env.store, 'bob')
      const second = await start('Refund order', 'ord_2009')
      execute(env.store, 'UPDATE users SET disabled_at = ? WHERE id = ?', Date.now(), bob)
      try {
        startExecutor()
        expect(JSON.parse((await finished(second)).error!).code).toBe('record_forbidden')
      } finally {
        execute(env.store, 'UPDATE users SET disabled_at = NULL WHERE id = ?', bob)
      }
      expect(recordData('ord_2009').status).toBe('paid')
    } finally {
      if (!executor.alive) executor.start()
    }
  })

  test('wait parks the run without a worker and holds the record until it ends; then a fresh run is accepted', async () => {
    const runId = await start('Hold', 'ord_2001')
    const parked = await inStatus(runId, 'waiting')
    expect(parked).toMatchObject({ next_step: 2, lease_owner: null, lease_expires_at: null })
    await parkedWithoutWorker(runId)
    expect(steps(runId).map((s) => s.name)).toEqual(['1-load', 'pause'])
    expect(JSON.parse(steps(runId)[1]!.output!).until).toBe(new Date(parked.available_at).toISOString())
    expect(await trigger('Hold', tokens.bob, 'ord_2001')).toMatchObject({ status: 409, body: { runId } })
    expect(recordData('ord_2001').held).toBeUndefined()

    const done = await finished(runId)
    expect(done.status).toBe('succeeded')
    expect(done.finished_at! - parked.available_at).toBeGreaterThanOrEqual(0)
    expect(recordData('ord_2001').held).toBe('yes')
    expect(steps(runId).map((s) => s.name)).toEqual(['1-load', 'pause', 'hold'])
    // A finished wait shows when it finished (its `until`), not when it began waiting.
    const shown = (await getRun(runId, bearer(tokens.bob))).body.steps as { name: string; startedAt: string; finishedAt: string }[]
    const pause = shown.find((s) => s.name === 'pause')!
    expect(pause.finishedAt).toBe(new Date(parked.available_at).toISOString())
    expect(Date.parse(pause.finishedAt) - Date.parse(pause.startedAt)).toBeGreaterThanOrEqual(1_000)

    const fresh = await start('Hold', 'ord_2001')
    expect(fresh).not.toBe(runId)
    await inStatus(fresh, 'waiting')
    expect((await send(request(`/v1/workflow-runs/${fresh}/cancel`, { method: 'POST', headers: bearer(tokens.bob) }))).status).toBe(200)
  })

  test('GET /v1/workflow-runs/{id}: the triggering user and project admins see it; other users get 404', async () => {
    const runId = await start('Long hold', 'ord_2002')
    await inStatus(runId, 'waiting')
    const byBob = await getRun(runId, bearer(tokens.bob))
    expect(byBob.body).toMatchObject({ status: 'waiting', workflow: { name: 'Long hold', version: 1 }, user: { username: 'bob' } })
    expect((byBob.body.steps as { name: string }[]).map((s) => s.name)).toEqual(['1-load', 'pause'])
    // The wait reads `waiting`, with no finish time, until its time has passed (not `succeeded` while the run waits).
    expect(byBob.body.steps).toMatchObject([{ status: 'succeeded' }, { name: 'pause', status: 'waiting', finishedAt: null }])
    expect((await getRun(runId, bearer(tokens.carol))).status).toBe(200)
    expect((await getRun(runId, { cookie: aliceCookie })).status).toBe(200)
    expect((await getRun(runId, bearer(tokens.dave))).status).toBe(404)
    expect((await getRun(runId, bearer(tokens.daveRead))).status).toBe(404)
    expect((await getRun(runId, {})).status).toBe(401)
    expect((await getRun(crypto.randomUUID(), bearer(tokens.bob))).status).toBe(404)

    // Cancel: others cannot (404), the triggering user can (200 cancelled), a second cancel is 409 run_finished.
    const cancel = (headers: Record<string, string>) => send(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers }))
    expect((await cancel(bearer(tokens.dave))).status).toBe(404)
    expect(run(runId).status).toBe('waiting')
    const cancelled = await cancel(bearer(tokens.bob))
    expect(cancelled).toMatchObject({ status: 200, body: { object: 'workflow-run', id: runId, status: 'cancelled' } })
    expect(cancelled.body.finishedAt).toMatch(/Z$/)
    // A wait cut short by the cancel says so, and when.
    expect(cancelled.body.steps).toMatchObject([{ status: 'succeeded' }, { name: 'pause', status: 'cancelled', finishedAt: cancelled.body.finishedAt }])
    expect(run(runId)).toMatchObject({ status: 'cancelled', lease_owner: null })
    const twice = await cancel(bearer(tokens.bob))
    expect(twice).toMatchObject({ status: 409, body: { code: 'run_finished' } })
    expect(activity(runId).map((e) => e.action)).toContain('abortWorkflow')
    // The record is free again; the cancelled run never resumes.
    const fresh = await start('Long hold', 'ord_2002')
    await inStatus(fresh, 'waiting')
    expect(steps(runId).map((s) => s.name)).toEqual(['1-load', 'pause'])
    expect((await cancel(bearer(tokens.carol))).status).toBe(409)
    expect((await send(request(`/v1/workflow-runs/${fresh}/cancel`, { method: 'POST', headers: bearer(tokens.carol) }))).body.status).toBe('cancelled')
  })

  test('a new version is used by new runs; a run started on v1 finishes on v1', async () => {
    const first = await start('Versioned', 'ord_2003')
    await inStatus(first, 'waiting')
    const published = await send(
      request('/v1/project/Acme/environment/production/team/Support/workflows/Versioned', {
        method: 'PUT',
        headers: bearer(tokens.alice),
        json: { collection: 'orders', steps: [{ type: 'load' }, { type: 'wait', seconds: 1 }, { type: 'update', name: 'mark', set: { version: 'v2' } }] },
      }),
    )
    expect(published.body).toMatchObject({ version: 2, outcome: 'published', webhook: { url: `http://trellis.test${hooks.Versioned}` } })
    const second = await start('Versioned', 'ord_2004')
    expect(run(second).workflow_version_id).not.toBe(run(first).workflow_version_id)
    expect((await finished(first)).status).toBe('succeeded')
    expect((await finished(second)).status).toBe('succeeded')
    expect(recordData('ord_2003').version).toBe('v1')
    expect(recordData('ord_2004').version).toBe('v2')
    expect((await getRun(first, bearer(tokens.bob))).body).toMatchObject({ workflow: { name: 'Versioned', version: 1 } })
    expect((await getRun(second, bearer(tokens.bob))).body).toMatchObject({ workflow: { name: 'Versioned', version: 2 } })
  })

  test('http: 503 twice then 200 with retries 3 → succeeded with output.attempts 3; templates and the run id are sent', async () => {
    const started = Date.now()
    const runId = await start('Call flaky', 'ord_2005')
    const done = await finished(runId)
    expect(done.status).toBe('succeeded')
    const [step] = steps(runId)
    expect(JSON.parse(step!.output!)).toMatchObject({ status: 200, attempts: 3 })
    const calls = hitsOf('/flaky', runId)
    expect(calls).toHaveLength(3)
    expect(calls.every((c) => c.method === 'POST')).toBe(true)
    expect(JSON.parse(calls[0]!.body)).toEqual({ order: 'ord_2005', run: runId })
    // Two backoffs: at most 0.5 s + 1 s; the bound leaves a loaded 2-core machine room for the three calls and the
    // run's transactions (what it rules out is a backoff of several seconds).
    expect(Date.now() - started).toBeLessThan(1_500 + 4_000)
  })

  test('http: always 500 with retries 1 → failed http_failed after 2 attempts', async () => {
    const runId = await start('Call broken', 'ord_2006')
    const done = await finished(runId)
    expect(done.status).toBe('failed')
    expect(JSON.parse(done.error!)).toMatchObject({ code: 'http_failed', step: '1-http' })
    expect(hitsOf('/broken', runId)).toHaveLength(2)
    const [step] = steps(runId)
    expect(step!.status).toBe('failed')
    expect(JSON.parse(step!.output!)).toEqual({ attempts: 2 })
    expect(JSON.parse(step!.error!).message).toContain('answered 500 after 2 attempts')
  })

  test('http: a 404 answer fails at once, without retries', async () => {
    const started = Date.now()
    const runId = await start('Call missing', 'ord_2007')
    const done = await finished(runId)
    expect(done.status).toBe('failed')
    expect(JSON.parse(done.error!)).toMatchObject({ code: 'http_failed' })
    expect(hitsOf('/missing', runId)).toHaveLength(1)
    expect(JSON.parse(steps(runId)[0]!.output!)).toMatchObject({ status: 404, attempts: 1, body: 'no such thing' })
    // One call is the proof of no retry; the time only rules out waiting for a backoff (up to 0.5 + 1 + 2 s for three
    // retries), with room for a busy host.
    expect(Date.now() - started).toBeLessThan(3_000)
  })

  test('http: template values are percent-encoded into the URL: a record id of ../../admin?x= changes neither path nor query', async () => {
    const recordId = '../../admin?x='
    const runId = await start('Call path', recordId)
    expect((await finished(runId)).status).toBe('succeeded')
    const encoded = '..%2F..%2Fadmin%3Fx%3D'
    expect(hitsOf(`/records/${encoded}/view`, runId)).toHaveLength(1)
    expect(hits.some((h) => h.runId === runId && h.path.startsWith('/admin'))).toBe(false)
    expect(JSON.parse(JSON.parse(steps(runId)[0]!.output!).body)).toEqual({ path: `/records/${encoded}/view`, query: `?order=${encoded}` })
  })

  test('http: a value that would make a "." or ".." path segment fails the step with http_invalid_url and calls nothing', async () => {
    const runId = await start('Call path', '..')
    const done = await finished(runId)
    expect(done.status).toBe('failed')
    const error = JSON.parse(done.error!)
    expect(error).toMatchObject({ code: 'http_invalid_url', step: '1-http' })
    expect(error.message).toContain('..')
    expect(hits.filter((h) => h.runId === runId)).toEqual([])
  })

  test('http: a 300 MB answer is read up to the stored 2,000 characters and no further (the process does not grow)', async () => {
    Bun.gc(true)
    const rssBefore = process.memoryUsage.rss()
    let rssPeak = rssBefore
    const runId = await start('Call huge', 'ord_2009')
    const done = await until(`run ${runId} to finish`, () => {
      rssPeak = Math.max(rssPeak, process.memoryUsage.rss())
      return ['succeeded', 'failed'].includes(run(runId).status) ? run(runId) : null
    }, 20_000, POLL_MS)
    expect(done.status).toBe('succeeded')
    const output = JSON.parse(steps(runId)[0]!.output!)
    expect(output).toEqual({ status: 200, attempts: 1, body: 'x'.repeat(2000), bodyTruncated: true })
    // The connection was dropped after the limit: the server handed over a few buffers, not 300 MB.
    await Bun.sleep(100)
    expect(hugeSent).toBeLessThan(16 * 1024 * 1024)
    expect(rssPeak - rssBefore).toBeLessThan(48 * 1024 * 1024)
  }, 30_000)

  test('http: a redirect is not followed (it could lead anywhere): the 3xx answer is the step\'s outcome', async () => {
    const runId = await start('Call redirect', 'ord_2001')
    expect((await finished(runId)).status).toBe('succeeded')
    expect(JSON.parse(steps(runId)[0]!.output!)).toMatchObject({ status: 302, attempts: 1 })
    expect(hitsOf('/redirect', runId)).toHaveLength(1)
    expect(hitsOf('/echo', runId)).toHaveLength(0)
  })

  test('http: the step\'s credentials stay out of the run — its URL shows no user, password or query, its secret values are [redacted] in the stored answer', async () => {
    const runId = await start('Call secrets', 'ord_2001')
    expect((await finished(runId)).status).toBe('failed')
    expect(hitsOf('/reflect', runId)).toHaveLength(1)
    // As the triggering member (no admin) reads it through the API…
    const shown = await getRun(runId, bearer(tokens.bob))
    expect(shown.status).toBe(200)
    for (const secret of SECRET_SPELLINGS) expect(JSON.stringify(shown.body)).not.toContain(secret)
    expect(shown.body.error).toEqual({ code: 'http_failed', step: 'call', message: `POST ${remoteUrl}/reflect?[redacted] answered 401` })
    const [step] = shown.body.steps as { error: unknown; output: { status: number; attempts: number; body: string } }[]
    expect(step!.error).toEqual({ code: 'http_failed', message: `POST ${remoteUrl}/reflect?[redacted] answered 401` })
    expect(step!.output).toMatchObject({ status: 401, attempts: 1 })
    // …the record's own value in the query is no secret of the step: only what the step wrote is taken out.
    expect(JSON.parse(step!.output.body)).toEqual({ authorization: '[redacted]', apiKey: '[redacted]', url: `${remoteUrl}/reflect?api_key=[redacted]&order=ord_2001` })
    // …and in the console's run page, and in what is stored.
    const page = await app.handle(request(`/runs/${runId}`, { headers: { cookie: aliceCookie } }))
    expect(page.status).toBe(200)
    const html = await page.text()
    expect(html).toContain('reflect?[redacted] answered 401')
    for (const secret of SECRET_SPELLINGS) expect(html).not.toContain(secret)
    const stored = JSON.stringify([run(runId), steps(runId), activity(runId)])
    for (const secret of SECRET_SPELLINGS) expect(stored).not.toContain(secret)
  })

  test('http: the URL\'s user and password are never shown, nor the Basic credentials made of them; a failed call\'s URL loses its query and fragment', async () => {
    const basic = await start('Call basic', 'ord_2001')
    expect((await finished(basic)).status).toBe('failed')
    const basicRun = await getRun(basic, bearer(tokens.bob))
    for (const secret of SECRET_SPELLINGS) expect(JSON.stringify(basicRun.body)).not.toContain(secret)
    expect(basicRun.body.error).toMatchObject({ message: `GET ${remoteUrl}/reflect answered 401` })
    expect(JSON.parse((basicRun.body.steps as { output: { body: string } }[])[0]!.output.body)).toMatchObject({ authorization: 'Basic [redacted]' })

    const failing = await start('Call secret 5xx', 'ord_2001')
    expect((await finished(failing)).status).toBe('failed')
    const failed = await getRun(failing, bearer(tokens.bob))
    for (const secret of SECRET_SPELLINGS) expect(JSON.stringify(failed.body)).not.toContain(secret)
    expect(failed.body.error).toMatchObject({ code: 'http_failed', message: `GET ${remoteUrl}/broken?[redacted] answered 500 after 1 attempts` })
  })

  test('a run error stored before redaction (a URL with its credentials) is shown redacted all the same', async () => {
    const runId = await start('Call basic', 'ord_2002')
    expect((await finished(runId)).status).toBe('failed')
    const raw = `GET http://svc:${STEP_SECRETS.password}@127.0.0.1/x?token=${STEP_SECRETS.query} answered 401`
    execute(env.store, 'UPDATE runs SET error = ? WHERE id = ?', JSON.stringify({ code: 'http_failed', message: raw, step: 'call' }), runId)
    execute(env.store, 'UPDATE run_steps SET error = ? WHERE run_id = ?', JSON.stringify({ code: 'http_failed', message: raw }), runId)
    const shown = await getRun(runId, bearer(tokens.bob))
    for (const secret of SECRET_SPELLINGS) expect(JSON.stringify(shown.body)).not.toContain(secret)
    expect(shown.body.error).toEqual({ code: 'http_failed', step: 'call', message: 'GET http://127.0.0.1/x?[redacted] answered 401' })
    expect((shown.body.steps as { error: unknown }[])[0]!.error).toEqual({ code: 'http_failed', message: 'GET http://127.0.0.1/x?[redacted] answered 401' })
  })

  test('cancelling a run during an http call aborts the call, frees the worker and records nothing more', async () => {
    hangStarted = new Promise<void>((resolve) => (firstHang = resolve))
    const runId = await start('Call hang', 'ord_2008')
    await hangStarted
    expect(run(runId).status).toBe('running')
    expect(executor.busyWorkers).toBe(1)
    const cancelled = await send(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: bearer(tokens.bob) }))
    expect(cancelled.body).toMatchObject({ status: 'cancelled' })
    await until('the worker to be free', () => executor.busyWorkers === 0, 2_000, POLL_MS)
    await Bun.sleep(100)
    expect(run(runId)).toMatchObject({ status: 'cancelled', error: null, lease_owner: null })
    expect(steps(runId)).toEqual([])
    expect(hitsOf('/hang', runId)).toHaveLength(1) // no retry after the abort
    expect(activity(runId).map((e) => e.action)).toEqual(['triggerWorkflow', 'abortWorkflow'])
  })

  test('templates after a wait still see the record (the run resumes with its data)', async () => {
    const runId = await start('Wait then call', 'ord_1003')
    await inStatus(runId, 'waiting')
    expect((await finished(runId)).status).toBe('succeeded')
    const [call] = hitsOf('/echo', runId)
    expect(JSON.parse(call!.body)).toEqual({ id: 'ord_1003', status: 'paid', amount: '1210' })
  })

  /** Rows a run wrote to the activity log (entries and their record rows) and to run_steps. */
  const rowsOf = (runId: string) => ({
    entries: activity(runId).map((e) => [e.action, e.step_name]),
    recordRows: (queryAll(env.store, 'SELECT r.record_id FROM activity_log_records r JOIN activity_logs l ON l.id = r.log_id WHERE l.run_id = ? ORDER BY l.id', runId) as { record_id: string }[]).map((r) => r.record_id),
    steps: steps(runId).map((s) => [s.name, s.status]),
  })

  // Exactly the entries of what a run did to its record (docs/api.md "Activity and admin logs"), each with its record row.
  const entryCases: [name: string, workflow: string, recordId: string, entries: [string, string | null][], steps: string[]][] = [
    ['a three-step run (load, update, note): trigger, its read, its two changes, its end', 'Three steps', 'ord_2001',
      [['triggerWorkflow', null], ['read', '1-load'], ['update', '2-update'], ['createNote', '3-note'], ['completeWorkflow', null]], ['1-load', '2-update', '3-note']],
    ['a run whose steps change nothing (load, wait, http): trigger, its read, its end', 'Wait then call', 'ord_2002',
      [['triggerWorkflow', null], ['read', '1-load'], ['completeWorkflow', null]], ['1-load', '2-wait', 'call']],
  ]
  test.each(entryCases)('%s', async (_, workflow, recordId, entries, stepNames) => {
    const runId = await start(workflow, recordId)
    expect((await finished(runId)).status).toBe('succeeded')
    expect(rowsOf(runId)).toEqual({
      entries,
      recordRows: entries.map(() => recordId),
      steps: stepNames.map((name) => [name, 'succeeded']),
    })
  })

  test('the executor is idle at the end: no run is left active', async () => {
    expect(queryOne(env.store, "SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running')")).toEqual({ n: 0 })
    // A worker frees its slot just after the commit that ended its run: on a busy machine the test may look between.
    await until('every worker free', () => executor.busyWorkers === 0)
  })
})

// ── Outbound requests: safe by default ──────────────────────────────────────

describe('http steps with no TRELLIS_HTTP_ALLOW: local and private destinations are refused in every spelling', () => {
  const port = remote.port
  /** Each spelling reaches the local test server (or a private address) when nothing refuses it. */
  const destinations: [name: string, url: string, host: string, why: string][] = [
    ['Loopback literal', `http://127.0.0.1:${port}/echo`, '127.0.0.1', 'loopback'],
    ['Loopback name', `http://localhost:${port}/echo`, 'localhost', 'resolves to a loopback address'],
    ['Decimal', `http://2130706433:${port}/echo`, '127.0.0.1', 'loopback'],
    ['Octal', `http://0177.0.0.1:${port}/echo`, '127.0.0.1', 'loopback'],
    ['Hex short', `http://0x7f.1:${port}/echo`, '127.0.0.1', 'loopback'],
    ['Short', `http://127.1:${port}/echo`, '127.0.0.1', 'loopback'],
    ['Mapped IPv6', `http://[::ffff:127.0.0.1]:${port}/echo`, '[::ffff:7f00:1]', 'loopback'],
    ['Unspecified', `http://0.0.0.0:${port}/echo`, '0.0.0.0', 'unspecified'],
    ['IPv6 loopback', `http://[::1]:${port}/echo`, '[::1]', 'loopback'],
    ['Metadata', 'http://169.254.169.254/latest/meta-data/', '169.254.169.254', 'link-local'],
    ['Private', 'http://10.0.0.1/', '10.0.0.1', 'private'],
    // IPv6 forms carrying an IPv4 address are judged by it.
    ['IPv4-compatible', `http://[::127.0.0.1]:${port}/echo`, '[::7f00:1]', 'loopback'],
    ['IPv4-translated', `http://[::ffff:0:127.0.0.1]:${port}/echo`, '[::ffff:0:7f00:1]', 'loopback'],
    ['NAT64', 'http://[64:ff9b::169.254.169.254]/latest/meta-data/', '[64:ff9b::a9fe:a9fe]', 'link-local'],
    ['6to4', 'http://[2002:a00:1::1]/', '[2002:a00:1::1]', 'private'],
    ['Teredo', 'http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/', '[2001:0:4136:e378:8000:63bf:f5ff:fffe]', 'private'],
  ]
  let env: TestEnv
  let app: ReturnType<typeof testApp>
  let executor: Executor
  let token: string
  let hooks: Record<string, string>

  beforeAll(async () => {
    env = testEnv()
    const document = acmeDocument()
    acmeProject(document).workflows!.push(
      ...destinations.map(([name, url]) =>
        ordersWorkflow(name, [{ type: 'load' }, { type: 'http', method: 'GET', url, retries: 3, timeoutSeconds: 1 }], { webhook: { enabled: true, ratePerMinute: 1000 } }),
      ),
    )
    const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    hooks = Object.fromEntries(report.workflows.filter((w) => w.webhook.url).map((w) => [w.name, hookPath(w.webhook.url)]))
    token = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    // No `outbound` given: the executor's client opens nothing.
    executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 20 })
    app = testApp(env, { clock: systemClock, executor })
    executor.start()
  })
  afterAll(async () => {
    await executor.stop(2_000)
    env.cleanup()
  })

  test.each(destinations)('%s (%s) fails the run at once with http_destination_refused, without calling or retrying', async (name, _url, host, why) => {
    const { runId, done } = await runToEnd(app, env, hooks[name]!, token, 'ord_1001')
    expect(done.status).toBe('failed')
    // Read back through the run API, as whoever wrote the workflow would: the reason, never an answer.
    const shown = (await (await app.handle(request(`/v1/workflow-runs/${runId}`, { headers: bearer(token) }))).json()) as {
      error: { code: string; message: string; step: string }
      steps: { name: string; status: string; output?: unknown }[]
    }
    expect(shown.error).toMatchObject({ code: 'http_destination_refused', step: '2-http' })
    expect(shown.error.message).toContain(host)
    expect(shown.error.message).toContain(why)
    expect(shown.error.message).toContain('TRELLIS_HTTP_ALLOW')
    expect(shown.steps.map((s) => [s.name, s.status])).toEqual([['1-load', 'succeeded'], ['2-http', 'failed']])
    expect(hits.filter((h) => h.runId === runId)).toEqual([])
    // No timeout waited, no backoff: the step's own recorded time (the test's polling is no part of it).
    const step = queryOne(env.store, "SELECT finished_at - started_at AS ms FROM run_steps WHERE run_id = ? AND name = '2-http'", runId) as { ms: number }
    expect(step.ms).toBeLessThan(1_000)
  })
})

// ── URL templates: the path and query only ──────────────────────────────────

describe('URL templates fill the path and query only', () => {
  /** Where `http://127.0.0{{record.id}}:PORT/` lands for a record id `.5`: a server on another loopback address. */
  const elsewhere: { path: string; authorization: string | null }[] = []
  const other = Bun.serve({
    hostname: '127.0.0.5',
    port: 0,
    fetch: (req) => (elsewhere.push({ path: new URL(req.url).pathname, authorization: req.headers.get('authorization') }), Response.json({ reached: '127.0.0.5' })),
  })
  const hostTemplate = `http://127.0.0{{record.id}}:${other.port}/hook`
  const put = (app: ReturnType<typeof testApp>, token: string, name: string, url: string) =>
    app.handle(
      request(`/v1/project/Acme/environment/production/team/Support/workflows/${name}`, {
        method: 'PUT',
        headers: bearer(token),
        json: { collection: 'orders', webhook: { enabled: true, ratePerMinute: 1000 }, steps: [{ type: 'http', name: 'call', method: 'POST', url, headers: { authorization: 'Bearer s3cret-step-token' } }] },
      }),
    )
  let env: TestEnv
  let app: ReturnType<typeof testApp>
  let executor: Executor
  let admin: string
  let bob: string

  beforeAll(async () => {
    // The operator opened all of 127/8: only the template rule keeps the call on the host the author wrote.
    env = testEnv({ TRELLIS_HTTP_ALLOW: '127.0.0.0/8' })
    await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
    admin = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
    bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20, outbound: new OutboundClient({ allow: env.config.httpAllow }) })
    app = testApp(env, { clock: systemClock, executor })
    executor.start()
  })
  afterAll(async () => {
    await executor.stop(2_000)
    env.cleanup()
    other.stop(true)
  })

  test.each([
    ['next to the host', hostTemplate],
    ['the whole host', 'https://{{record.tenant}}/'],
    ['a label of the host', 'https://{{record.tenant}}.example.com/orders'],
    ['the port', 'https://api.example.com:{{record.port}}/'],
    ['the user', 'https://{{record.user}}@api.example.com/'],
    ['right after the host, before any path', 'https://api.example.com{{record.path}}'],
  ])('PUT a workflow with a template %s in an http URL → 400 naming the step\'s url; nothing published', async (_, url) => {
    const response = await put(app, admin, 'Templated host', url)
    expect(response.status).toBe(400)
    const body = (await response.json()) as { error: string; code: string; message: string; details: { field: string; message: string }[] }
    expect(body).toMatchObject({ error: 'Bad Request', code: 'validation_failed' })
    expect(body.details).toEqual([{ field: 'steps[0] (call).url', message: expect.stringContaining("is in the URL's scheme or host") }])
    expect(body.message).toContain('steps[0] (call).url')
    expect(queryOne(env.store, "SELECT count(*) AS n FROM workflows WHERE name = 'Templated host'")).toEqual({ n: 0 })
  })

  test('templates in the path and query are accepted', async () => {
    const response = await put(app, admin, 'Templated path', `http://127.0.0.1:${remote.port}/records/{{record.id}}/view?order={{record.id}}#{{run.id}}`)
    expect(response.status).toBe(200)
  })

  test('a definition saved before the rule (published unchecked) fails the step at run time with http_invalid_url, and calls nothing', async () => {
    // Published as it could be before this rule: the service itself, without the API's or the apply file's check.
    const project = queryOne<{ id: number }>(env.store, "SELECT id FROM projects WHERE name = 'Acme'")!
    const collection = queryOne<{ id: number }>(env.store, "SELECT id FROM collections WHERE name = 'orders' AND project_id = ?", project.id)!
    const environment = queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE name = 'production' AND project_id = ?", project.id)!
    const team = queryOne<{ id: number }>(env.store, "SELECT id FROM teams WHERE name = 'Support' AND project_id = ?", project.id)!
    const definition = {
      name: 'Legacy host template',
      environment: 'production',
      team: 'Support',
      collection: 'orders',
      webhook: { enabled: true, ratePerMinute: 1000 },
      steps: [{ type: 'http' as const, name: 'call', method: 'POST', url: hostTemplate, headers: { authorization: 'Bearer s3cret-step-token' }, retries: 0 }],
    }
    const target = { projectId: project.id, environmentId: environment.id, teamId: team.id, collectionId: collection.id }
    await runNow(env.store, publishWorkflow(systemClock, target, definition, null))
    const hook = hookPath(
      (await (await app.handle(request('/v1/project/Acme/environment/production/team/Support/workflows/Legacy%20host%20template/webhook', { headers: bearer(admin) }))).json() as { url: string }).url,
    )
    const { runId, done } = await runToEnd(app, env, hook, bob, '.5')
    expect(elsewhere).toEqual([])
    expect(done.status).toBe('failed')
    const shown = (await (await app.handle(request(`/v1/workflow-runs/${runId}`, { headers: bearer(bob) }))).json()) as { error: { code: string; message: string; step: string } }
    expect(shown.error).toMatchObject({ code: 'http_invalid_url', step: 'call' })
    expect(shown.error.message).toContain('scheme or host')
  })
})

// ── Leases and several executors ────────────────────────────────────────────

describe('leases and several executors on one database', () => {
  let env: TestEnv
  let hooks: Record<string, string>
  let token: string
  const executors: Executor[] = []
  const stores: TestStore[] = []

  beforeAll(async () => {
    env = testEnv({ TRELLIS_HTTP_ALLOW: '127.0.0.1' })
    const document = acmeDocument()
    const acme = acmeProject(document)
    for (let i = 1; i <= 20; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `multi_${i}`, data: { n: '' } })
    for (let i = 1; i <= 20; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `handed_${i}`, data: { n: '' } })
    const fast = { webhook: { enabled: true, ratePerMinute: 1000 } }
    acme.workflows!.push(
      ordersWorkflow('Slow call', [{ type: 'load' }, { type: 'http', method: 'GET', url: `${remoteUrl}/slow`, retries: 0 }, { type: 'update', set: { slow: 'done' } }], fast),
      ordersWorkflow('Append', [{ type: 'load' }, { type: 'update', set: { n: '{{record.n}}x' } }, { type: 'note', title: 'Appended', content: '<p>{{record.n}}</p>' }], fast),
    )
    const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    hooks = Object.fromEntries(report.workflows.filter((w) => w.webhook.url).map((w) => [w.name, hookPath(w.webhook.url)]))
    token = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
  })
  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop(2_000)))
    await Promise.all(stores.map((store) => store.close()))
    env.cleanup()
  })

  async function trigger(app: ReturnType<typeof testApp>, workflow: string, recordId: string): Promise<string> {
    const response = await app.handle(request(hooks[workflow]!, { method: 'POST', headers: bearer(token), json: { record_id: recordId } }))
    expect(response.status).toBe(202)
    return ((await response.json()) as { runId: string }).runId
  }
  const status = (id: string) => (queryOne(env.store, 'SELECT status FROM runs WHERE id = ?', id) as { status: string }).status

  test('the heartbeat keeps the lease of a step that outlives it: the run is never recovered from under its worker', async () => {
    // The lease is renewed every third of it: a busy host may hold the event loop for most of a renewal's slack
    // (two thirds of the lease) without the run being recovered — the point is the order of events, not the timing.
    const executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 1, leaseMs: HEARTBEAT_LEASE_MS, pollMs: 20, outbound: new OutboundClient({ allow: env.config.httpAllow }) })
    executors.push(executor)
    const app = testApp(env, { clock: systemClock, executor })
    executor.start()
    const runId = await trigger(app, 'Slow call', 'ord_1001')
    // Recovery is tried while the run is in flight (over twice the lease), never a lease's length apart.
    const checkedAt: number[] = []
    while (['queued', 'running'].includes(status(runId))) {
      expect(await runNow(env.store, recoverExpiredRuns(Date.now()))).toBe(0)
      checkedAt.push(Date.now())
      await Bun.sleep(25)
    }
    expect(checkedAt.at(-1)! - checkedAt[0]!).toBeGreaterThan(2 * HEARTBEAT_LEASE_MS)
    expect(Math.max(...checkedAt.slice(1).map((at, i) => at - checkedAt[i]!))).toBeLessThan(HEARTBEAT_LEASE_MS)
    const row = queryOne(env.store, 'SELECT status, attempts FROM runs WHERE id = ?', runId)
    expect(row).toEqual({ status: 'succeeded', attempts: 1 })
    expect(hitsOf('/slow', runId)).toHaveLength(1)
    await executor.stop(2_000)
  }, 30_000)

  test('two executors on two connections (as two processes) run each of 20 runs exactly once', async () => {
    const apps = [0, 1].map(() => {
      const store = anotherStore(env)
      stores.push(store)
      const executor = new Executor({ store, clock: systemClock, logger: silentLogger, concurrency: 3, leaseMs: 5_000, pollMs: 20 })
      executors.push(executor)
      return { app: testApp(env, { store, clock: systemClock, executor }), executor }
    })
    for (const { executor } of apps) executor.start()
    const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => trigger(apps[i % 2]!.app, 'Append', `multi_${i + 1}`)))
    const among = `(${ids.map(() => '?').join(',')})`
    // One read per poll for all 20 (on PostgreSQL each read is a psql process).
    const statuses = () => queryAll<{ status: string }>(env.store, `SELECT status FROM runs WHERE id IN ${among}`, ...ids).map((r) => r.status)
    await until('all runs to finish', () => statuses().every((s) => ['succeeded', 'failed'].includes(s)), undefined, POLL_MS)
    expect(statuses()).toEqual(ids.map(() => 'succeeded'))
    const records = queryAll<{ data: string }>(env.store, "SELECT data FROM records WHERE record_key LIKE 'multi%'")
    expect(records.map((r) => JSON.parse(r.data))).toEqual(ids.map(() => ({ n: 'x' })))
    expect(queryOne(env.store, "SELECT count(*) AS n FROM notes WHERE title = 'Appended'")).toEqual({ n: 20 })
    expect(queryOne(env.store, `SELECT count(*) AS n FROM run_steps WHERE run_id IN ${among}`, ...ids)).toEqual({ n: 60 })
    const updates = queryOne(env.store, `SELECT count(*) AS n FROM activity_logs WHERE action = 'update' AND run_id IN ${among}`, ...ids)
    expect(updates).toEqual({ n: 20 })
    const owners = queryOne(env.store, `SELECT max(attempts) AS most FROM runs WHERE id IN ${among}`, ...ids)
    expect(owners).toEqual({ most: 1 })
    await Promise.all(apps.map(({ executor }) => executor.stop(2_000)))
  }, 60_000)

  test('a run that ends hands its slot to the next due run in its own transaction (SQLite): a claim commits no write of its own', async () => {
    const executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 30_000, pollMs: 20 })
    executors.push(executor)
    const app = testApp(env, { clock: systemClock, executor })
    // Queued before the executor starts: its first claim takes two, and every later run is taken over by a run ending.
    const ids: string[] = []
    for (let i = 1; i <= 20; i++) ids.push(await trigger(app, 'Append', `handed_${i}`))
    const among = `(${ids.map(() => '?').join(',')})`
    const writesBefore = env.store.kind === 'sqlite' ? env.store.committed.writes : 0
    executor.start()
    const statuses = () => queryAll<{ status: string }>(env.store, `SELECT status FROM runs WHERE id IN ${among}`, ...ids).map((r) => r.status)
    await until('all runs to finish', () => statuses().every((s) => ['succeeded', 'failed'].includes(s)), undefined, POLL_MS)
    await executor.stop(2_000)
    expect(statuses()).toEqual(ids.map(() => 'succeeded'))
    expect(queryOne(env.store, `SELECT max(attempts) AS most FROM runs WHERE id IN ${among}`, ...ids)).toEqual({ most: 1 })
    const started = queryAll<{ n: number }>(env.store, `SELECT count(*) AS n FROM run_events WHERE type = 'run.started' AND run_id IN ${among} GROUP BY run_id`, ...ids)
    expect(started.map((row) => row.n)).toEqual(ids.map(() => 1))
    if (env.store.kind === 'sqlite') {
      // One step group's write a run; besides: the recovery at start, the first claim, the claims that found none at
      // the end and the give-back at stop, and the event dispatcher's take-back at start and hand-back at stop (its
      // polls read, and write only when an event is due). A claim of its own per run (as on PostgreSQL) would add 18.
      expect(env.store.committed.writes - writesBefore).toBeLessThanOrEqual(20 + 8)
    }
  }, 60_000)
})

// ── Crash recovery with the real process ────────────────────────────────────

describe('crash recovery (trellis serve, SIGKILL)', () => {
  sqliteOnlyTest(SQLITE_ONLY.ownDataDir, 'a run killed mid-step and killed while waiting resumes and applies every step exactly once', async () => {
    const data = tempDir()
    const cwd = tempDir()
    try {
      const store = openStore(data.path)
      migrate(store.sqlite)
      const document = acmeDocument()
      acmeProject(document).workflows!.push(
        ordersWorkflow('Crashy', [
          { type: 'load' },
          { type: 'update', name: 'first', set: { trail: '{{record.trail}}1' } },
          { type: 'http', name: 'call', method: 'POST', url: `${remoteUrl}/hang`, body: { order: '{{record.id}}', trail: '{{record.trail}}' }, retries: 0, timeoutSeconds: 30 },
          { type: 'wait', name: 'pause', seconds: 1 },
          { type: 'update', name: 'second', set: { trail: '{{record.trail}}2' } },
          { type: 'note', name: 'note', title: 'Crash-safe', content: '<p>trail {{record.trail}}</p>' },
        ]),
      )
      const report = await applyAcme({ store, clock: systemClock, secret: loadInstanceSecret(data.path), baseUrl: 'http://127.0.0.1' }, document)
      const hook = reportHook(report, 'Crashy')
      const token = (await tokenFor(store, systemClock, 'bob', ['workflows:trigger'])).value
      store.close()

      // The test polls the run through the API every few ms: the token's rate limit is not what this test is about.
      const env = { TRELLIS_EXECUTOR_LEASE_SECONDS: '1', TRELLIS_LOG_LEVEL: 'warn', TRELLIS_HTTP_ALLOW: '127.0.0.1', TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_API_RATE_PER_HOUR: '1000000' }
      const getRun = async (url: string, id: string) =>
        (await (await fetch(`${url}/v1/workflow-runs/${id}`, { headers: bearer(token) })).json()) as { status: string; steps: { name: string }[] }

      // 1. Trigger; kill -9 while the http step is in flight (load and first recorded, the lease held).
      let server = await startServe({ dataDir: data.path, cwd: cwd.path, env })
      hangStarted = new Promise<void>((resolve) => (firstHang = resolve))
      const response = await fetch(`${server.url}${hook}`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify({ record_id: 'ord_1001' }),
      })
      expect(response.status).toBe(202)
      const { runId } = (await response.json()) as { runId: string }
      await Promise.race([hangStarted, Bun.sleep(10_000).then(() => Promise.reject(new Error('the http step never called')))])
      const midStep = await getRun(server.url, runId)
      expect(midStep.status).toBe('running')
      expect(midStep.steps.map((s) => s.name)).toEqual(['1-load', 'first'])
      expect(await server.stop('SIGKILL')).not.toBe(0)

      // 2. Restart once the lease expired: the run is recovered, resumes at the http step, then parks in its wait.
      await Bun.sleep(1_300)
      server = await startServe({ dataDir: data.path, cwd: cwd.path, env })
      const parked = await until('the run to wait', async () => {
        const seen = await getRun(server.url, runId)
        return seen.status === 'waiting' || seen.status === 'succeeded' || seen.status === 'failed' ? seen : null
      }, 15_000, POLL_MS)
      expect(parked.status).toBe('waiting')
      expect(parked.steps.map((s) => s.name)).toEqual(['1-load', 'first', 'call', 'pause'])
      expect(await server.stop('SIGKILL')).not.toBe(0)

      // 3. Restart at once: the waiting run is taken up when due and finishes.
      server = await startServe({ dataDir: data.path, cwd: cwd.path, env })
      const done = await until('the run to finish', async () => {
        const seen = await getRun(server.url, runId)
        return seen.status === 'succeeded' || seen.status === 'failed' ? seen : null
      }, 20_000, POLL_MS)
      expect(done.status).toBe('succeeded')
      expect(await server.stop('SIGTERM')).toBe(0)

      const db = new Database(join(data.path, 'trellis.db'), { readonly: true })
      try {
        const rows = db.prepare('SELECT step_index, name, status FROM run_steps WHERE run_id = ? ORDER BY step_index').all(runId)
        expect(rows).toEqual([
          { step_index: 0, name: '1-load', status: 'succeeded' },
          { step_index: 1, name: 'first', status: 'succeeded' },
          { step_index: 2, name: 'call', status: 'succeeded' },
          { step_index: 3, name: 'pause', status: 'succeeded' },
          { step_index: 4, name: 'second', status: 'succeeded' },
          { step_index: 5, name: 'note', status: 'succeeded' },
        ])
        const actions = db
          .prepare('SELECT action, step_name AS step, count(*) AS n FROM activity_logs WHERE run_id = ? GROUP BY action, step_name ORDER BY action, step_name')
          .all(runId)
        expect(actions).toEqual([
          { action: 'completeWorkflow', step: null, n: 1 },
          { action: 'createNote', step: 'note', n: 1 },
          { action: 'read', step: '1-load', n: 1 },
          { action: 'triggerWorkflow', step: null, n: 1 },
          { action: 'update', step: 'first', n: 1 },
          { action: 'update', step: 'second', n: 1 },
        ])
        // Each update applied once: '1' then '2', never '11' or '122'.
        const record = db.prepare("SELECT data FROM records WHERE record_key = 'ord_1001'").get() as { data: string }
        expect(JSON.parse(record.data)).toMatchObject({ status: 'paid', trail: '12' })
        const notes = db.prepare("SELECT n.id, m.content FROM notes n JOIN note_messages m ON m.note_id = n.id WHERE n.title = 'Crash-safe'").all()
        expect(notes).toHaveLength(1)
        expect(notes[0]).toMatchObject({ content: '<p>trail 12</p>' })
        const final = db.prepare('SELECT status, attempts, lease_owner FROM runs WHERE id = ?').get(runId) as { status: string; attempts: number; lease_owner: null }
        expect(final).toMatchObject({ status: 'succeeded', lease_owner: null })
        expect(final.attempts).toBeGreaterThanOrEqual(3)
      } finally {
        db.close()
      }
      // The http call was in flight when the process died: it is repeated (at-least-once, keyed by the run id).
      expect(hitsOf('/hang', runId)).toHaveLength(2)
      // … with the same body: the resumed run still sees the record's data.
      expect(hitsOf('/hang', runId).map((h) => JSON.parse(h.body))).toEqual([
        { order: 'ord_1001', trail: '1' },
        { order: 'ord_1001', trail: '1' },
      ])
    } finally {
      data.cleanup()
      cwd.cleanup()
    }
  }, 45_000)
})

// ── Units ───────────────────────────────────────────────────────────────────

describe('renderTemplate', () => {
  const vars: TemplateVariables = {
    recordId: 'ord_1|2',
    record: { status: 'paid', amount: 129.9, items: 3, flag: false, none: null, customer: { country: 'DE', tags: ['a', 'b'] } },
    workflowName: 'Refund order',
    runId: '0190-run',
    now: '2026-11-21T12:00:00.000Z',
    tasks: new Map(),
  }

  test('known variables, with or without spaces inside the braces', () => {
    expect(renderTemplate('{{record.id}}/{{ workflow.name }}/{{run.id}}/{{now}}', vars)).toBe('ord_1|2/Refund order/0190-run/2026-11-21T12:00:00.000Z')
    expect(renderTemplate('<p>{{record.status}} {{record.amount}} × {{record.items}}</p>', vars)).toBe('<p>paid 129.9 × 3</p>')
  })

  test('nested fields, objects as JSON, false kept, missing and null as empty', () => {
    expect(renderTemplate('{{record.customer.country}}', vars)).toBe('DE')
    expect(renderTemplate('{{record.customer}}', vars)).toBe('{"country":"DE","tags":["a","b"]}')
    expect(renderTemplate('{{record.customer.tags}}', vars)).toBe('["a","b"]')
    expect(renderTemplate('[{{record.flag}}]', vars)).toBe('[false]')
    expect(renderTemplate('[{{record.none}}][{{record.nope}}][{{record.status.deeper}}]', vars)).toBe('[][][]')
    expect(renderTemplate('[{{record.status}}]', { ...vars, record: null })).toBe('[]')
    expect(renderTemplate('[{{unknown}}]', vars)).toBe('[]')
  })

  test('deep in objects and arrays; non-strings untouched; no recursion into rendered values', () => {
    const value = { order: '{{record.id}}', list: ['{{record.status}}', 5, true, null, { n: '{{record.items}}' }], count: 7 }
    expect(renderTemplate(value, vars)).toEqual({ order: 'ord_1|2', list: ['paid', 5, true, null, { n: '3' }], count: 7 })
    expect(renderTemplate(value.order, vars)).toBe('ord_1|2')
    expect(renderTemplate('{{record.x}}', { ...vars, record: { x: '{{run.id}}' } })).toBe('{{run.id}}')
    expect(renderTemplate('no placeholders {here}', vars)).toBe('no placeholders {here}')
  })
})

describe('renderUrl', () => {
  const vars = (recordId: string, record: Record<string, unknown> = {}): TemplateVariables => ({ recordId, record, workflowName: 'W', runId: 'r', now: 'n', tasks: new Map() })
  const url = (template: string, recordId: string, record?: Record<string, unknown>) => renderUrl(template, vars(recordId, record)).href

  test('every value is one encoded component: it cannot add a segment, a query, a parameter or a fragment', () => {
    const template = 'https://api.example.com/orders/{{record.id}}/view?ref={{record.id}}&x=1'
    expect(url(template, '../../admin?x=')).toBe('https://api.example.com/orders/..%2F..%2Fadmin%3Fx%3D/view?ref=..%2F..%2Fadmin%3Fx%3D&x=1')
    expect(url(template, 'a&x=2#frag')).toBe('https://api.example.com/orders/a%26x%3D2%23frag/view?ref=a%26x%3D2%23frag&x=1')
    expect(url(template, 'a\\b c%2F')).toBe('https://api.example.com/orders/a%5Cb%20c%252F/view?ref=a%5Cb%20c%252F&x=1')
    expect(url(template, 'Zürich')).toBe('https://api.example.com/orders/Z%C3%BCrich/view?ref=Z%C3%BCrich&x=1')
    expect(url('https://api.example.com/{{record.id}}', 'ord_1')).toBe('https://api.example.com/ord_1')
  })

  test('a value in the scheme or host is refused, whatever it is (templates fill the path and query only)', () => {
    expect(() => url('https://{{record.tenant}}.example.com/', 'x', { tenant: 'acme' })).toThrow(/scheme or host/)
    expect(() => url('https://{{record.tenant}}.example.com/', 'x', { tenant: 'evil.test:80@127.0.0.1' })).toThrow(UrlTemplateError)
    expect(() => url('http://{{record.target}}', 'x', { target: 'http://127.0.0.1/' })).toThrow(UrlTemplateError)
    expect(() => url('http://127.0.0{{record.id}}:19192/', '.5')).toThrow(/scheme or host/)
    expect(() => url('https://api.example.com{{record.id}}', '.evil.test')).toThrow(/scheme or host/)
    expect(() => url('https://api.example.com:{{record.id}}/', '8443')).toThrow(/scheme or host/)
    expect(() => url('https://{{record.id}}@api.example.com/', 'user')).toThrow(/scheme or host/)
  })

  test('a value in the path or query cannot reach the authority: the origin after rendering is the template\'s own', () => {
    for (const value of ['/@evil.test', '//evil.test', '@evil.test', '\\\\evil.test', '/\\evil.test/x', ':80@evil.test', '%2F%2Fevil.test']) {
      const rendered = new URL(url('https://api.example.com/{{record.id}}?next={{record.id}}', value))
      expect(rendered.origin).toBe('https://api.example.com')
      expect(rendered.username + rendered.password).toBe('')
      expect(rendered.pathname.split('/')).toHaveLength(2)
    }
    expect(url('https://api.example.com/{{record.id}}', '//evil.test')).toBe('https://api.example.com/%2F%2Fevil.test')
    expect(url('https://api.example.com/{{record.id}}', '@evil.test')).toBe('https://api.example.com/%40evil.test')
  })

  test('an invalid URL\'s message shows neither its user and password nor its query', () => {
    const message = (template: string, id: string) => {
      try {
        url(template, id)
      } catch (error) {
        return (error as Error).message
      }
      throw new Error('expected the URL to be refused')
    }
    const dots = message('https://svc:pw-4711@api.example.com/a/{{record.id}}?key=key-4711#frag-4711', '..')
    expect(dots).toBe('the URL https://api.example.com/a/..?[redacted] has a ".." path segment, which would change its path')
    expect(message('https://svc:pw-4711@api.example.com:99999/?key=key-4711', 'x')).toBe('https://api.example.com:99999 is not a valid URL')
  })

  test('a "." or ".." path segment, from a value or an encoded spelling, is refused (URL parsers would resolve it)', () => {
    for (const id of ['..', '.']) expect(() => url('https://api.example.com/orders/{{record.id}}/view', id)).toThrow(UrlTemplateError)
    expect(() => url('https://api.example.com/orders/{{record.id}}{{record.id}}', '.')).toThrow(/"\.\." path segment/)
    expect(() => url('https://api.example.com/a/%2E%2e/b', 'x')).toThrow(UrlTemplateError)
    // Dots inside a segment or in the query are only dots.
    expect(url('https://api.example.com/files/{{record.id}}?up={{record.id}}', '..x')).toBe('https://api.example.com/files/..x?up=..x')
    expect(url('https://api.example.com/files?up={{record.id}}', '..')).toBe('https://api.example.com/files?up=..')
  })
})

describe('backoffMs', () => {
  test('full jitter up to 0.5 s × 2^(attempt − 1), capped at 30 s', () => {
    for (let attempt = 1; attempt <= 12; attempt++) {
      const cap = Math.min(30_000, 500 * 2 ** (attempt - 1))
      expect(backoffMs(attempt, () => 0)).toBe(0)
      expect(backoffMs(attempt, () => 0.999_999)).toBe(Math.round(0.999_999 * cap))
      expect(backoffMs(attempt, () => 0.5)).toBe(Math.round(cap / 2))
      for (let i = 0; i < 50; i++) {
        const ms = backoffMs(attempt)
        expect(Number.isInteger(ms)).toBe(true)
        expect(ms).toBeGreaterThanOrEqual(0)
        expect(ms).toBeLessThanOrEqual(cap)
      }
    }
    expect(backoffMs(1, () => 0.999_999)).toBeLessThanOrEqual(500)
    expect(backoffMs(2, () => 0.999_999)).toBeLessThanOrEqual(1_000)
    expect(backoffMs(20, () => 0.999_999)).toBeLessThanOrEqual(30_000)
  })
})

/** Leaves no run of `store` claimable or holding a record (each test starts from an empty queue). */
const drainRuns = (store: TestStore) => execute(store, "UPDATE runs SET status = 'cancelled' WHERE status IN ('queued', 'running', 'waiting')")
const queueNow = Date.UTC(2026, 10, 21, 12, 0, 0)

describe('queue (no executor running)', () => {
  let env: TestEnv
  let queue: ReturnType<typeof queueOn>
  let base: Omit<NewRun, 'id' | 'recordId' | 'createdAt'>
  let counter = 0
  const now = queueNow

  beforeAll(async () => {
    env = testEnv()
    await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
    queue = queueOn(env.store)
    base = refundRunBase(env.store)
  })
  afterAll(() => env.cleanup())

  /** Queued runs due at `availableAt`, inserted one after another (ids in insertion order). */
  async function insertMany(count: number, availableAt: number): Promise<string[]> {
    const ids: string[] = []
    for (let i = 0; i < count; i++) ids.push(await insert(availableAt))
    return ids
  }
  /** Inserts a queued run due at `availableAt`. */
  async function insert(availableAt: number, recordId = `q-${++counter}`, extra: Partial<NewRun> = {}): Promise<string> {
    const id = randomUUIDv7() // time-ordered, as the app's run ids are: PostgreSQL stores a run after its newest by id
    expect(await queue.insert({ ...base, id, recordId, createdAt: availableAt, ...extra })).toEqual({ inserted: true, id })
    return id
  }
  const row = (id: string) => queryOne(env.store, 'SELECT * FROM runs WHERE id = ?', id) as RunRow
  /** Each leased run's owner, in one query. */
  const leaseOwners = () =>
    new Map(queryAll<{ id: string; owner: string }>(env.store, 'SELECT id, lease_owner AS owner FROM runs WHERE lease_owner IS NOT NULL').map((r) => [r.id, r.owner]))
  const setStatus = (id: string, status: string, availableAt?: number) =>
    execute(env.store, 'UPDATE runs SET status = ?, available_at = coalesce(?, available_at) WHERE id = ?', status, availableAt ?? null, id)
  const drain = () => drainRuns(env.store)

  test('insert: one active run per workflow and record, the conflict names it; a finished run frees the record', async () => {
    drain()
    const first = await insert(now, 'dup-1')
    const id = randomUUIDv7()
    expect(await queue.insert({ ...base, id, recordId: 'dup-1', createdAt: now })).toEqual({ inserted: false, activeRunId: first })
    for (const status of ['running', 'waiting']) {
      setStatus(first, status)
      expect(await queue.insert({ ...base, id, recordId: 'dup-1', createdAt: now })).toEqual({ inserted: false, activeRunId: first })
    }
    setStatus(first, 'succeeded')
    expect(await queue.insert({ ...base, id, recordId: 'dup-1', createdAt: now })).toEqual({ inserted: true, id })
  })

  test('claim returns only due runs, oldest first, under a lease; never finished, running or future ones', async () => {
    drain()
    const late = await insert(now - 1_000)
    const early = await insert(now - 5_000)
    const exactlyNow = await insert(now)
    const future = await insert(now + 1)
    const waitingDue = await insert(now - 2_000)
    setStatus(waitingDue, 'waiting')
    const waitingLater = await insert(now)
    setStatus(waitingLater, 'waiting', now + 60_000)
    const done = await insert(now - 9_000)
    setStatus(done, 'succeeded')
    const failed = await insert(now - 9_000)
    setStatus(failed, 'failed')
    const cancelled = await insert(now - 9_000)
    setStatus(cancelled, 'cancelled')

    const order: string[] = []
    for (let claimed = await queue.claim('A', now, 30_000); claimed; claimed = await queue.claim('A', now, 30_000)) {
      expect(claimed).toMatchObject({ status: 'running', lease_owner: 'A', lease_expires_at: now + 30_000, started_at: now, attempts: 1 })
      order.push(claimed.id)
    }
    expect(order).toEqual([early, waitingDue, late, exactlyNow])
    expect(row(future).status).toBe('queued')
    expect(row(waitingLater).status).toBe('waiting')
    expect([row(done).status, row(failed).status, row(cancelled).status]).toEqual(['succeeded', 'failed', 'cancelled'])
    expect(await queue.nextAvailableAt()).toBe(now + 1)
    // Time passes: the future ones become due.
    expect((await queue.claim('B', now + 1, 30_000))!.id).toBe(future)
    expect(await queue.claim('B', now + 59_999, 30_000)).toBeNull()
    expect((await queue.claim('B', now + 60_000, 30_000))!.id).toBe(waitingLater)
    expect(await queue.nextAvailableAt()).toBeNull()
  })

  test('claim never hands the same run to two owners (two connections, then four processes)', async () => {
    drain()
    const ids = await insertMany(40, now - 1)
    const otherStore = anotherStore(env)
    const other = queueOn(otherStore)
    const byOwner: Record<string, string[]> = { A: [], B: [] }
    for (let i = 0; i < 100; i++) {
      const owner = i % 2 === 0 ? 'A' : 'B'
      const claimed = await (owner === 'A' ? queue : other).claim(owner, now, 30_000)
      if (claimed) byOwner[owner]!.push(claimed.id)
    }
    expect(byOwner.A!.length + byOwner.B!.length).toBe(40)
    expect(new Set([...byOwner.A!, ...byOwner.B!])).toEqual(new Set(ids))
    const ownerOf = leaseOwners()
    for (const [owner, claimed] of Object.entries(byOwner)) for (const id of claimed) expect(ownerOf.get(id)).toBe(owner)
    await otherStore.close()

    // Real concurrency: four processes claim from the same database until the queue is empty.
    const many = await insertMany(400, now - 1)
    const scriptDir = tempDir('trellis-claim-')
    const script = join(scriptDir.path, 'claim.ts')
    writeFileSync(
      script,
      `import { openConfiguredStore } from ${JSON.stringify(join(repoRoot, 'src/db/connect.ts'))}
import { queueOn } from ${JSON.stringify(join(repoRoot, 'test/support/queue.ts'))}
const [dataDir, owner, now] = process.argv.slice(2)
const store = await openConfiguredStore({ dataDir, databaseUrl: process.env.TRELLIS_DATABASE_URL ?? null, databaseListenUrl: process.env.TRELLIS_DATABASE_LISTEN_URL ?? null, databasePoolSize: 1 })
const queue = queueOn(store)
const ids = []
for (let run = await queue.claim(owner, Number(now), 30000); run; run = await queue.claim(owner, Number(now), 30000)) ids.push(run.id)
await store.close()
console.log(JSON.stringify(ids))
`,
    )
    const results = await Promise.all(
      ['P1', 'P2', 'P3', 'P4'].map(async (owner) => {
        const proc = Bun.spawn([process.execPath, script, env.dataDir, owner, String(now)], { env: { ...process.env, ...processEnv(env) }, stdout: 'pipe', stderr: 'pipe' })
        const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
        expect({ code, err }).toEqual({ code: 0, err: '' })
        return { owner, ids: JSON.parse(out) as string[] }
      }),
    )
    scriptDir.cleanup()
    const all = results.flatMap((r) => r.ids)
    expect(all).toHaveLength(many.length)
    expect(new Set(all)).toEqual(new Set(many))
    const ownerOfMany = leaseOwners()
    for (const { owner, ids: claimed } of results) for (const id of claimed) expect(ownerOfMany.get(id)).toBe(owner)
  }, 30_000)

  test('recoverExpired: only running runs whose lease expired go back to the queue; the old owner has lost them', async () => {
    drain()
    const held = await insert(now)
    const parked = await insert(now)
    setStatus(parked, 'waiting', now + 100_000)
    expect((await queue.claim('A', now, 1_000))!.id).toBe(held)
    expect(await queue.recoverExpired(now + 500)).toBe(0)
    expect(await queue.heartbeat(held, 'A', now + 500, 1_000)).toBe(true) // lease now until now + 1500
    expect(await queue.recoverExpired(now + 1_200)).toBe(0)
    expect(await queue.recoverExpired(now + 1_500)).toBe(0) // expires strictly after
    expect(await queue.recoverExpired(now + 1_501)).toBe(1)
    expect(row(held)).toMatchObject({ status: 'queued', lease_owner: null, lease_expires_at: null, available_at: now + 1_501, next_step: 0 })
    expect(row(parked)).toMatchObject({ status: 'waiting', available_at: now + 100_000 })

    const again = (await queue.claim('B', now + 1_501, 1_000))!
    expect(again).toMatchObject({ id: held, lease_owner: 'B', attempts: 2, started_at: now })
    expect(await queue.heartbeat(held, 'A', now + 1_600, 1_000)).toBe(false)
    // The lease-guarded transitions: only the new owner may move the run on.
    await expect(runNow(env.store, advanceRun(held, 'A', 1))).rejects.toBeInstanceOf(LeaseLostError)
    await runNow(env.store, advanceRun(held, 'B', 1))
    // A cancelled run is nobody's.
    setStatus(held, 'cancelled')
    await expect(runNow(env.store, advanceRun(held, 'B', 1))).rejects.toBeInstanceOf(LeaseLostError)
    expect(await queue.recoverExpired(now + 1_000_000)).toBe(0)
  })

  test('releaseOwned gives back only what the owner holds', async () => {
    drain()
    const a = await insert(now)
    const b = await insert(now)
    expect((await queue.claim('A', now, 30_000))!.id).toBe(a)
    expect((await queue.claim('B', now, 30_000))!.id).toBe(b)
    expect(await queue.releaseOwned('A', now + 10)).toBe(1)
    expect(row(a)).toMatchObject({ status: 'queued', lease_owner: null, available_at: now + 10 })
    expect(row(b)).toMatchObject({ status: 'running', lease_owner: 'B' })
  })

})

// ── The condition step's operators (the step reads the record afresh, as the run's user), on either store ──

describe('condition step (no executor running)', () => {
  let env: TestEnv
  let base: Omit<NewRun, 'id' | 'recordId' | 'createdAt'>

  beforeAll(async () => {
    env = testEnv()
    const document = acmeDocument()
    acmeProject(document).records!.push({
      environment: 'production',
      collection: 'orders',
      id: 'cond_1',
      data: { status: 'paid', amount: 129.9, items: 3, flag: false, none: null, customer: { country: 'DE', tier: 'gold' } },
    })
    await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    base = refundRunBase(env.store)
  })
  afterAll(() => env.cleanup())

  /** `step` (its data part) in a run of Refund order on `recordId` as `user`, queued and read back as the executor reads it. */
  async function applyStep(step: Step, options: { recordId?: string; user?: string } = {}): Promise<StepResult> {
    drainRuns(env.store)
    const recordId = options.recordId ?? 'cond_1'
    const queued = await runNow(env.store, insertRun({ ...base, id: crypto.randomUUID(), recordId, createdAt: queueNow, userId: userId(env.store, options.user ?? 'bob') }))
    if (!queued.inserted) throw new Error(`run on ${recordId} not queued`)
    const run = queryOne(env.store, 'SELECT * FROM runs WHERE id = ?', queued.id) as RunRow
    const target = (await runNow(env.store, runWorkflow(run)))!
    const ctx: StepContext = {
      target: { run, workflowName: target.workflowName, projectId: target.projectId, teamId: target.teamId, environmentId: target.environmentId, collectionId: target.collectionId },
      stepName: 'check',
      stepIndex: 0,
      tasks: new Map(),
      clock: env.clock,
      record: { status: 'stale' },
      heartbeat: () => {},
      signal: new AbortController().signal,
      outbound: new OutboundClient(),
      mail: null,
    }
    const apply = await (STEP_RUNNERS[step.type] as StepRunner)(ctx, step)
    return await runNow(env.store, apply({}))
  }
  /** The condition step (see `applyStep`). */
  const condition = (ifClause: Extract<Step, { type: 'condition' }>['if'], options: { else?: 'end' | 'fail'; recordId?: string; user?: string } = {}) =>
    applyStep({ type: 'condition', if: ifClause, ...(options.else ? { else: options.else } : {}) }, options)
  const matches = async (ifClause: Parameters<typeof condition>[0]) => {
    const result = await condition(ifClause)
    expect(result.next === 'continue').toBe((result.output as { matched: boolean }).matched)
    return (result.output as { matched: boolean }).matched
  }

  test('equals / notEquals compare strictly (types matter), on fresh data', async () => {
    expect(await matches({ field: 'status', equals: 'paid' })).toBe(true) // ctx.record says 'stale': ignored
    expect(await matches({ field: 'status', equals: 'pending' })).toBe(false)
    expect(await matches({ field: 'amount', equals: 129.9 })).toBe(true)
    expect(await matches({ field: 'amount', equals: '129.9' })).toBe(false)
    expect(await matches({ field: 'flag', equals: false })).toBe(true)
    expect(await matches({ field: 'none', equals: null })).toBe(true)
    expect(await matches({ field: 'missing', equals: null })).toBe(false)
    expect(await matches({ field: 'status', notEquals: 'refunded' })).toBe(true)
    expect(await matches({ field: 'status', notEquals: 'paid' })).toBe(false)
    expect(await matches({ field: 'missing', notEquals: 'paid' })).toBe(true)
  })

  test('in, exists, nested fields, and all clauses together (AND)', async () => {
    expect(await matches({ field: 'status', in: ['pending', 'paid'] })).toBe(true)
    expect(await matches({ field: 'status', in: ['refunded'] })).toBe(false)
    expect(await matches({ field: 'items', in: [1, 3] })).toBe(true)
    expect(await matches({ field: 'items', in: ['3'] })).toBe(false)
    expect(await matches({ field: 'status', in: [] })).toBe(false)
    expect(await matches({ field: 'status', exists: true })).toBe(true)
    expect(await matches({ field: 'flag', exists: true })).toBe(true)
    expect(await matches({ field: 'none', exists: true })).toBe(false)
    expect(await matches({ field: 'missing', exists: false })).toBe(true)
    expect(await matches({ field: 'missing', exists: true })).toBe(false)
    expect(await matches({ field: 'customer.country', equals: 'DE' })).toBe(true)
    expect(await matches({ field: 'customer.zip', exists: false })).toBe(true)
    expect(await matches({ field: 'status.length', exists: true })).toBe(false)
    expect(await matches({ field: 'status', equals: 'paid', notEquals: 'refunded', in: ['paid'], exists: true })).toBe(true)
    expect(await matches({ field: 'status', equals: 'paid', in: ['pending'] })).toBe(false)
  })

  test('else: end (default) ends the run; fail fails it with condition_failed; the data is returned when true', async () => {
    const ended = await condition({ field: 'status', equals: 'pending' })
    expect(ended).toEqual({ next: 'end', output: { matched: false } })
    const passed = await condition({ field: 'status', equals: 'paid' })
    expect(passed.record).toMatchObject({ status: 'paid', amount: 129.9 })
    const failure = await condition({ field: 'status', equals: 'pending' }, { else: 'fail' }).catch((e: unknown) => e)
    expect(failure).toBeInstanceOf(StepFailure)
    expect(failure).toMatchObject({ code: 'condition_failed', output: { matched: false } })
    expect(await condition({ field: 'status', equals: 'paid' }, { else: 'fail' })).toMatchObject({ next: 'continue' })
  })

  test('a missing record or a user who cannot read it fails the condition like a data step', async () => {
    expect(await condition({ field: 'status', equals: 'paid' }, { recordId: 'nope' }).catch((e: unknown) => e)).toMatchObject({ code: 'record_not_found' })
    expect(await condition({ field: 'status', equals: 'paid' }, { user: 'dave' }).catch((e: unknown) => e)).toMatchObject({ code: 'record_forbidden' })
    expect(await condition({ field: 'status', equals: 'paid' }, { user: 'carol' })).toMatchObject({ next: 'continue' })
  })

  test('every step type fails only in its checks, before its first write: the executor records steps without a savepoint (src/executor/step.ts)', async () => {
    // Every row a step's data part can write: the records, their notes, the activity log.
    const written = () => ({
      records: queryAll(env.store, 'SELECT * FROM records ORDER BY id'),
      notes: queryAll(env.store, 'SELECT * FROM notes ORDER BY id'),
      activity: queryAll(env.store, 'SELECT * FROM activity_logs ORDER BY id'),
    })
    // A missing record, a user outside the workflow's team (dave), an unmet condition that fails the run.
    const failing: [Step, { recordId?: string; user?: string }][] = [
      [{ type: 'load' }, { recordId: 'nope' }],
      [{ type: 'load' }, { user: 'dave' }],
      [{ type: 'condition', if: { field: 'status', equals: 'paid' } }, { recordId: 'nope' }],
      [{ type: 'condition', if: { field: 'status', equals: 'pending' }, else: 'fail' }, {}],
      [{ type: 'update', set: { status: 'touched' } }, { recordId: 'nope' }],
      [{ type: 'update', set: { status: 'touched' } }, { user: 'dave' }],
      [{ type: 'note', title: 'Checked', content: 'by {{run.id}}' }, { recordId: 'nope' }],
      [{ type: 'note', title: 'Checked', content: 'by {{run.id}}' }, { user: 'dave' }],
      [{ type: 'task', name: 'ask', title: 'Approve?', assignees: { teams: ['Nobody'] } }, {}],
    ]
    // The types whose data part can fail; `http` fails in its call, outside the transaction, and `wait` cannot.
    expect(new Set<string>(failing.map(([step]) => step.type))).toEqual(new Set(Object.keys(STEP_RUNNERS).filter((type) => type !== 'http' && type !== 'wait')))
    for (const [step, options] of failing) {
      const before = written()
      const failure = await applyStep(step, options).catch((error: unknown) => error)
      expect(failure, `${step.type} ${JSON.stringify(options)}`).toBeInstanceOf(StepFailure)
      expect(written(), `${step.type} ${JSON.stringify(options)} wrote before failing`).toEqual(before)
    }
    // The same steps on a record the user may edit write (the check above is not vacuous).
    const before = written()
    expect(await applyStep({ type: 'note', title: 'Checked', content: 'ok' })).toMatchObject({ next: 'continue' })
    expect(written().notes.length).toBe(before.notes.length + 1)
  })
})

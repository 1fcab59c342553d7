/**
 * Signed completion callbacks from a durable outbox, through a real server (Bun.serve on 127.0.0.1)
 * with the executor and the delivery worker running, on the test store (SQLite, or PostgreSQL with
 * TRELLIS_TEST_STORE=postgres). A real local receiver verifies every POST with the `standardwebhooks` package.
 * Endpoints: add (secret once), list, remove, every refusal; deliveries of succeeded, failed and cancelled runs,
 * the events filter, retries until the receiver answers (500s, then a closed port), the attempts listed, resend,
 * refused destinations, the attempts spent; the apply file; then `kill -9` of a real `serve` between the run's end
 * and the delivery (both stores), and two PostgreSQL instances never sending one attempt twice at once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Webhook } from 'standardwebhooks'
import { CallbackDelivery } from '../src/executor/callback-delivery.ts'
import { Executor } from '../src/executor/executor.ts'
import { CALLBACK_MAX_ATTEMPTS, callbackRetryDelayMs, callbackSecret } from '../src/lib/callbacks.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { NOTHING_ALLOWED } from '../src/lib/outbound/policy.ts'
import { ApplyError, type ApplyReport, applyDocument } from '../src/modules/apply/service.ts'
import { callWithToken, execute, freePort, postgresOnlyTest, POSTGRES_ONLY, queryAll, SQLITE_ONLY, sqliteOnlyTest, queryOne, type ServeProcess, startServe, TEST_STORE, tempDir, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, seedDataDir, tokenFor, tokensFor, UUID } from './support/acme.ts'
import { startInstances } from './support/instances.ts'
import { freshDatabase } from './support/postgres-cluster.ts'

// ── The receiver ────────────────────────────────────────────────────────────

interface Received {
  /** The endpoint: the first segment of the path. */
  key: string
  id: string
  timestamp: number
  body: { type: string; timestamp: string; data: Record<string, unknown> }
  raw: string
  status: number
}

/** Every POST the receiver verified, in order of arrival. */
const received: Received[] = []
/** Every POST whose signature did not verify (must stay empty). */
const unverified: string[] = []
/** Each endpoint's secret, by its path key. */
const secrets = new Map<string, string>()
/** The status an endpoint answers to the nth POST of one webhook-id (default 204). */
const answers = new Map<string, (nth: number) => number>()

const receiver = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(request) {
    const key = new URL(request.url).pathname.split('/')[1]!
    const raw = await request.text()
    const headers = Object.fromEntries(request.headers)
    let body: Received['body']
    try {
      body = new Webhook(secrets.get(key) ?? 'whsec_AAAA').verify(raw, headers) as Received['body']
    } catch (error) {
      unverified.push(`${key}: ${(error as Error).message}`)
      return new Response('signature', { status: 401 })
    }
    const id = headers['webhook-id']!
    const nth = received.filter((r) => r.id === id).length + 1
    const status = (answers.get(key) ?? (() => 204))(nth)
    received.push({ key, id, timestamp: Number(headers['webhook-timestamp']), body, raw, status })
    const open = (inFlight.get(id) ?? 0) + 1
    inFlight.set(id, open)
    mostInFlight.set(id, Math.max(open, mostInFlight.get(id) ?? 0))
    await Bun.sleep(delays.get(key) ?? 0)
    inFlight.set(id, inFlight.get(id)! - 1)
    // `stall`: the status, headers and a first chunk at once, then a body that never ends.
    const stalled = () => new ReadableStream({ start: (controller) => controller.enqueue(new TextEncoder().encode('{"ok"')), pull: () => new Promise(() => {}) })
    return new Response(key === 'stall' ? stalled() : null, { status })
  },
})
/** How long an endpoint takes to answer (ms; default at once). */
const delays = new Map<string, number>()
/** POSTs of each webhook-id being answered now, and the most there ever were at once. */
const inFlight = new Map<string, number>()
const mostInFlight = new Map<string, number>()
afterAll(() => receiver.stop(true))
const receiverUrl = `http://127.0.0.1:${receiver.port}`
const receivedBy = (key: string) => received.filter((r) => r.key === key)

// ── The app, its executor and delivery worker, a real server ────────────────

const NO_API_LIMIT = { TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' }
const PRODUCTION = '/v1/project/Acme/environment/production'
const FINISHED = ['succeeded', 'failed', 'cancelled']

const stamp = { type: 'update', name: 'stamp', set: { stamped: '{{run.id}}' } }
const WORKFLOWS = ['CB apply', 'CB basic', 'CB filter', 'CB retry', 'CB down', 'CB resend', 'CB refused', 'CB spent', 'CB crud', 'CB gone', 'CB stall']

let env: TestEnv
let executor: Executor
let delivery: CallbackDelivery
let server: ReturnType<typeof Bun.serve>
let base: string
let tokens: Record<'bob' | 'bobRead' | 'alice' | 'aliceRead' | 'carol' | 'dave', string>

beforeAll(async () => {
  env = testEnv({ TRELLIS_HTTP_ALLOW: '127.0.0.1', TRELLIS_CALLBACK_RETRY_MS: '30', ...NO_API_LIMIT })
  const document = acmeDocument()
  const acme = acmeProject(document)
  for (const id of ['cb-1', 'cb-2', 'cb-3', 'cb-4', 'cb-5', 'cb-6', 'cb-7', 'cb-8', 'cb-9']) acme.records!.push({ environment: 'production', collection: 'orders', id, data: {} })
  for (const name of WORKFLOWS) acme.workflows!.push(ordersWorkflow(name, [stamp]))
  acme.workflows!.push(ordersWorkflow('CB hold', [stamp, { type: 'wait', name: 'hold', seconds: 600 }]))
  const refundForm = { type: 'object', properties: { amount: { type: 'number', minimum: 0 } }, required: ['amount'] }
  acme.workflows!.push(ordersWorkflow('CB task', [{ type: 'task', name: 'approve', title: 'Refund {{record.id}}?', assignees: { teams: ['Billing'] }, approvals: 2, form: refundForm }, stamp]))
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  const outbound = new OutboundClient({ allow: env.config.httpAllow })
  executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 20, outbound })
  delivery = new CallbackDelivery({ store: env.store, clock: systemClock, logger: silentLogger, secret: env.secret, outbound, retryBaseMs: env.config.callbackRetryMs, pollMs: 50 })
  const app = testApp(env, { clock: systemClock, executor })
  executor.start()
  delivery.start()
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (request) => app.handle(request) })
  base = `http://127.0.0.1:${server.port}`
  tokens = await tokensFor(env.store, systemClock, {
    bob: ['bob', ['workflows:trigger']],
    bobRead: ['bob', ['notes:read']],
    alice: ['alice', ['all']],
    aliceRead: ['alice', ['notes:read']],
    carol: ['carol', ['all']],
    dave: ['dave', ['all']],
  })
}, 60_000) // on PostgreSQL the first block starts the shared cluster: seconds on a busy machine

afterAll(async () => {
  await Promise.all([executor.stop(2_000), delivery.stop(2_000)])
  await server.stop(true)
  env.cleanup()
})

type Sent = Awaited<ReturnType<typeof callWithToken>>

const call = (path: string, token: string, init: { method?: string; json?: unknown } = {}) => callWithToken(base, path, token, init)

const callbacksOf = (workflow: string) => `${PRODUCTION}/team/Support/workflows/${encodeURIComponent(workflow)}/callbacks`
const expectError = (sent: Sent, status: number, code: string) => expect({ status: sent.status, code: sent.body.code }).toEqual({ status, code })

interface Endpoint {
  id: string
  url: string
  events: string[]
  createdAt: string
  secret: string
}

/** Adds an endpoint at the receiver's `/{key}/hook` (as alice, a project admin); its secret is the receiver's for the key. */
async function addEndpoint(workflow: string, key: string, events?: string[]): Promise<Endpoint> {
  const sent = await call(callbacksOf(workflow), tokens.alice, { method: 'POST', json: { url: `${receiverUrl}/${key}/hook`, ...(events ? { events } : {}) } })
  expect(sent.status, JSON.stringify(sent.body)).toBe(201)
  const endpoint = sent.body as unknown as Endpoint
  secrets.set(key, endpoint.secret)
  return endpoint
}

async function startRun(workflowName: string, recordId: string): Promise<string> {
  const sent = await call(`${PRODUCTION}/workflow-runs`, tokens.bob, { method: 'POST', json: { workflowName, teamName: 'Support', recordId } })
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  return sent.body.runId as string
}

async function finished(runId: string): Promise<{ status: string; finishedAt: string; createdAt: string; startedAt: string | null }> {
  return until(`run ${runId} to end`, async () => {
    const run = (await call(`/v1/workflow-runs/${runId}`, tokens.alice)).body as { status: string; finishedAt: string; createdAt: string; startedAt: string | null }
    return FINISHED.includes(run.status) ? run : null
  })
}

interface DeliveryBody {
  id: string
  endpoint: { id: string; url: string }
  type: string
  status: string
  nextAttemptAt: string | null
  createdAt: string
  finishedAt: string | null
  attempts: { attempt: number; startedAt: string; durationMs: number; statusCode: number | null; error: string | null }[]
}

async function deliveriesOf(runId: string, token = tokens.alice): Promise<DeliveryBody[]> {
  const sent = await call(`/v1/workflow-runs/${runId}/callbacks`, token)
  expect(sent.status).toBe(200)
  return sent.body.data as DeliveryBody[]
}

/** The run's deliveries once none is pending. */
const settled = (runId: string, timeoutMs = 10_000) =>
  until(`the callbacks of run ${runId} to settle`, async () => {
    const deliveries = await deliveriesOf(runId)
    return deliveries.length > 0 && deliveries.every((d) => d.status !== 'pending') ? deliveries : null
  }, timeoutMs)

// ── Endpoints ───────────────────────────────────────────────────────────────

describe('callback endpoints', () => {
  test('add → 201 with the secret and the whole URL once; list without either (the URL without its query); remove → 204; each an admin log entry', async () => {
    const url = `${receiverUrl}/crud/hook?source=trellis&key=receiver-credential`
    const added = await call(callbacksOf('CB crud'), tokens.alice, { method: 'POST', json: { url } })
    expect(added.status).toBe(201)
    expect(Object.keys(added.body).sort()).toEqual(['createdAt', 'events', 'id', 'secret', 'url'])
    expect(added.body).toMatchObject({ url, events: ['workflow_run.succeeded', 'workflow_run.failed', 'workflow_run.cancelled'] })
    expect(added.body.id).toMatch(UUID)
    expect(added.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    // Derived, never stored: the instance secret, the endpoint's id and its salt.
    const row = queryOne<{ secret_salt: string }>(env.store, 'SELECT secret_salt FROM callback_endpoints WHERE id = ?', added.body.id as string)!
    expect(added.body.secret).toBe(callbackSecret(env.secret, added.body.id as string, row.secret_salt))
    expect(JSON.stringify(queryAll(env.store, 'SELECT * FROM callback_endpoints'))).not.toContain((added.body.secret as string).slice(6))

    const second = await call(callbacksOf('CB crud'), tokens.alice, { method: 'POST', json: { url: `${receiverUrl}/crud/other`, events: ['workflow_run.failed', 'workflow_run.failed'] } })
    expect(second.status).toBe(201)
    expect(second.body.events).toEqual(['workflow_run.failed'])

    const listed = await call(callbacksOf('CB crud'), tokens.alice)
    expect(listed.status).toBe(200)
    expect(listed.body.data).toEqual([
      { id: added.body.id, url: `${receiverUrl}/crud/hook?[redacted]`, events: added.body.events, createdAt: added.body.createdAt },
      { id: second.body.id, url: `${receiverUrl}/crud/other`, events: ['workflow_run.failed'], createdAt: second.body.createdAt },
    ])

    const removed = await fetch(`${base}${callbacksOf('CB crud')}/${second.body.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${tokens.alice}` } })
    expect(removed.status).toBe(204)
    expect(((await call(callbacksOf('CB crud'), tokens.alice)).body.data as { id: string }[]).map((e) => e.id)).toEqual([added.body.id as string])
    expectError(await call(`${callbacksOf('CB crud')}/${second.body.id}`, tokens.alice, { method: 'DELETE' }), 404, 'not_found')

    const log = await call('/v1/project/Acme/admin-logs?resource=workflow-callback&extensions=true&limit=10', tokens.alice)
    expect((log.body.data as { type: string; previousValue: unknown; newValue: unknown; user: { username: string } }[]).map((e) => [e.type, e.previousValue ?? null, e.newValue ?? null, e.user.username])).toEqual([
      ['remove', { name: `CB crud: callback ${receiverUrl}/crud/other (failed)` }, null, 'alice'],
      ['add', null, { name: `CB crud: callback ${receiverUrl}/crud/other (failed)` }, 'alice'],
      ['add', null, { name: `CB crud: callback ${receiverUrl}/crud/hook?[redacted] (succeeded, failed, cancelled)` }, 'alice'],
    ])
    // Nothing a project admin reads again shows the query: the list, the admin log.
    expect(JSON.stringify([(await call(callbacksOf('CB crud'), tokens.alice)).body, log.body])).not.toContain('receiver-credential')
  })

  test('400 naming the field: no URL, not http(s), credentials, too long, a private address, bad events, unknown fields', async () => {
    const bad = async (json: unknown, field: string) => {
      const sent = await call(callbacksOf('CB crud'), tokens.alice, { method: 'POST', json })
      expect({ status: sent.status, code: sent.body.code, field: (sent.body.details as { field: string }[] | undefined)?.[0]?.field }).toEqual({ status: 400, code: 'validation_failed', field })
      return sent.body.message as string
    }
    expect(await bad({}, 'url')).toContain('is required')
    expect(await bad({ url: '' }, 'url')).toContain('non-empty')
    expect(await bad({ url: 'not a url' }, 'url')).toContain('absolute http or https URL')
    expect(await bad({ url: 'ftp://files.example.com/x' }, 'url')).toContain('not ftp')
    expect(await bad({ url: 'https://user:pw@hooks.example.com/x' }, 'url')).toContain('user name or password')
    expect(await bad({ url: `https://hooks.example.com/${'x'.repeat(2000)}` }, 'url')).toContain('2000')
    for (const url of ['http://10.0.0.7/hook', 'http://169.254.169.254/latest', 'http://[::1]:8080/x', 'http://0x7f000002/', 'https://192.168.1.1/']) {
      expect(await bad({ url }, 'url')).toContain('TRELLIS_HTTP_ALLOW')
    }
    expect(await bad({ url: 'https://hooks.example.com/x', events: [] }, 'events')).toContain('1 to 6 items')
    expect(await bad({ url: 'https://hooks.example.com/x', events: ['workflow_run.started'] }, 'events[0]')).toContain('one of workflow_run.succeeded')
    expect(await bad({ url: 'https://hooks.example.com/x', secret: 'mine' }, 'secret')).toContain('unknown field')
    // 127.0.0.1 is opened by TRELLIS_HTTP_ALLOW here; a name is judged when it is resolved, at each delivery.
    expect((await call(callbacksOf('CB crud'), tokens.alice, { method: 'POST', json: { url: 'https://hooks.example.com/x' } })).status).toBe(201)
  })

  test('409 for a URL the workflow has already and past 10 endpoints; 404 for unknown names; 403 for non-admins; 401', async () => {
    const url = `${receiverUrl}/crud/dup`
    const first = await call(callbacksOf('CB gone'), tokens.alice, { method: 'POST', json: { url } })
    expect(first.status).toBe(201)
    const dup = await call(callbacksOf('CB gone'), tokens.alice, { method: 'POST', json: { url, events: ['workflow_run.failed'] } })
    expectError(dup, 409, 'callback_exists')
    expect(dup.body.id).toBe(first.body.id)
    for (let i = 1; i < 10; i++) expect((await call(callbacksOf('CB gone'), tokens.alice, { method: 'POST', json: { url: `${url}/${i}` } })).status).toBe(201)
    expectError(await call(callbacksOf('CB gone'), tokens.alice, { method: 'POST', json: { url: `${url}/10` } }), 409, 'too_many_callbacks')

    expectError(await call(callbacksOf('Nope'), tokens.alice), 404, 'not_found')
    expectError(await call(`${PRODUCTION.replace('production', 'nowhere')}/team/Support/workflows/CB%20gone/callbacks`, tokens.alice), 404, 'not_found')
    expectError(await call(`${callbacksOf('CB gone')}/0190d1a4-0000-7000-8000-000000000000`, tokens.alice, { method: 'DELETE' }), 404, 'not_found')
    expectError(await call(`${callbacksOf('CB gone')}/not-a-uuid`, tokens.alice, { method: 'DELETE' }), 400, 'invalid_parameter')
    // dave is a plain user of Acme, bob an editor: neither administers it (a management call's token must be an admin's).
    expectError(await call(callbacksOf('CB gone'), tokens.dave), 403, 'insufficient_scope')
    expectError(await call(callbacksOf('CB gone'), tokens.dave, { method: 'POST', json: { url: `${url}/dave` } }), 403, 'insufficient_scope')
    expectError(await call(`${callbacksOf('CB gone')}/${first.body.id}`, tokens.dave, { method: 'DELETE' }), 403, 'insufficient_scope')
    expect((await call(callbacksOf('CB gone'), tokens.bob)).status).toBe(403)
    expect((await call(callbacksOf('CB gone'), 'trl_nope')).status).toBe(401)
    // carol administers Acme too.
    expect(((await call(callbacksOf('CB gone'), tokens.carol)).body.data as unknown[]).length).toBe(10)
  })
})

// ── Deliveries ──────────────────────────────────────────────────────────────

describe('deliveries', () => {
  test('a succeeded run: one POST, verified with standardwebhooks, its webhook-id the delivery\'s, the body as documented', async () => {
    const endpoint = await addEndpoint('CB basic', 'basic')
    const runId = await startRun('CB basic', 'cb-1')
    const run = await finished(runId)
    expect(run.status).toBe('succeeded')
    const [sent] = await settled(runId)
    expect(sent).toMatchObject({ endpoint: { id: endpoint.id, url: endpoint.url }, type: 'workflow_run.succeeded', status: 'succeeded', nextAttemptAt: null })
    expect(sent!.id).toMatch(/^msg_[0-9a-f]{32}$/)
    expect(sent!.attempts).toHaveLength(1)
    expect(sent!.attempts[0]).toMatchObject({ attempt: 1, statusCode: 204, error: null })
    const got = receivedBy('basic')
    expect(got).toHaveLength(1)
    expect(got[0]!.id).toBe(sent!.id)
    expect(Math.abs(got[0]!.timestamp - Date.now() / 1000)).toBeLessThan(60)
    expect(got[0]!.body).toEqual({
      type: 'workflow_run.succeeded',
      timestamp: run.finishedAt,
      data: {
        runId, workflow: 'CB basic', workflowVersion: 1, project: 'Acme', environment: 'production', team: 'Support', recordId: 'cb-1',
        status: 'succeeded', trigger: 'manual', error: null, retryOf: null, createdAt: run.createdAt, startedAt: run.startedAt, finishedAt: run.finishedAt,
      },
    })
    expect(unverified).toEqual([])
  })

  test('a failed run and a cancelled one: workflow_run.failed with the error, workflow_run.cancelled', async () => {
    const failedRun = await startRun('CB basic', 'no-such-order')
    expect((await finished(failedRun)).status).toBe('failed')
    const [failed] = await settled(failedRun)
    const body = receivedBy('basic').find((r) => r.id === failed!.id)!.body
    expect(body).toMatchObject({ type: 'workflow_run.failed', data: { runId: failedRun, status: 'failed', recordId: 'no-such-order', error: { code: 'record_not_found', step: 'stamp' } } })

    await addEndpoint('CB hold', 'hold')
    const holding = await startRun('CB hold', 'cb-1')
    await until('the run to wait', async () => (await call(`/v1/workflow-runs/${holding}`, tokens.alice)).body.status === 'waiting')
    expect(await deliveriesOf(holding)).toEqual([])
    expect((await call(`/v1/workflow-runs/${holding}/cancel`, tokens.bob, { method: 'POST' })).status).toBe(200)
    const [cancelled] = await settled(holding)
    expect(cancelled!.type).toBe('workflow_run.cancelled')
    expect(receivedBy('hold').map((r) => [r.id, r.body.type, r.body.data.status])).toEqual([[cancelled!.id, 'workflow_run.cancelled', 'cancelled']])
  })

  test('events: an endpoint is sent only the ends it chose', async () => {
    await addEndpoint('CB filter', 'only-failed', ['workflow_run.failed'])
    await addEndpoint('CB filter', 'all-ends')
    const ok = await startRun('CB filter', 'cb-2')
    const ko = await startRun('CB filter', 'missing-2')
    expect((await finished(ok)).status).toBe('succeeded')
    expect((await finished(ko)).status).toBe('failed')
    expect((await settled(ok)).map((d) => d.endpoint.url)).toEqual([`${receiverUrl}/all-ends/hook`])
    expect((await settled(ko)).map((d) => d.endpoint.url).sort()).toEqual([`${receiverUrl}/all-ends/hook`, `${receiverUrl}/only-failed/hook`])
    expect(receivedBy('only-failed').map((r) => r.body.data.runId)).toEqual([ko])
    expect(receivedBy('all-ends').map((r) => r.body.data.runId).sort()).toEqual([ok, ko].sort())
  })
})

describe('task events', () => {
  interface TaskEventBody {
    id: string
    status: string
    approvals: number
    decisions: { user: { username: string }; decision: string; input: unknown }[]
  }
  const ORDER = ['task.opened', 'task.decided', 'task.closed']
  /** The task events of the run the receiver got at `key`, in the order they happened (deliveries queued together may arrive in any order). */
  const taskEvents = (key: string, runId: string) =>
    receivedBy(key)
      .filter((r) => (r.body.data as { run?: { id: string } }).run?.id === runId)
      .map((r) => ({ id: r.id, type: r.body.type, timestamp: r.body.timestamp, task: r.body.data as unknown as TaskEventBody }))
      .sort((a, b) => a.task.decisions.length - b.task.decisions.length || ORDER.indexOf(a.type) - ORDER.indexOf(b.type))

  test('task.opened, task.decided, task.closed: sent only to the endpoints that chose them, each body the task as GET /v1/tasks/{id} showed it then', async () => {
    await addEndpoint('CB task', 'task-all', ['task.opened', 'task.decided', 'task.closed', 'workflow_run.succeeded'])
    await addEndpoint('CB task', 'task-closed', ['task.closed'])
    const runEnds = await addEndpoint('CB task', 'task-run-ends')
    expect(runEnds.events).toEqual(['workflow_run.succeeded', 'workflow_run.failed', 'workflow_run.cancelled'])

    const runId = await startRun('CB task', 'cb-7')
    const [opened] = await until('task.opened to arrive', async () => ((events) => events.length === 1 && events)(taskEvents('task-all', runId)))
    expect(opened!.type).toBe('task.opened')
    const taskId = opened!.task.id
    const asOpened = (await call(`/v1/tasks/${taskId}`, tokens.alice)).body
    expect(opened!.task).toEqual(asOpened as unknown as TaskEventBody)
    expect(opened!.task).toMatchObject({ status: 'open', approvals: 0, decisions: [] })
    expect(Date.parse(opened!.timestamp)).toBeGreaterThanOrEqual(Date.parse(asOpened.createdAt as string) - 1)

    const decided = await call(`/v1/tasks/${taskId}/decisions`, tokens.dave, { method: 'POST', json: { decision: 'approve', input: { amount: 12 } } })
    expect(decided.status, JSON.stringify(decided.body)).toBe(200)
    const closing = await call(`/v1/tasks/${taskId}/decisions`, tokens.carol, { method: 'POST', json: { decision: 'approve', input: { amount: 10 } } })
    expect(closing.status, JSON.stringify(closing.body)).toBe(200)
    expect((await finished(runId)).status).toBe('succeeded')

    const deliveries = await settled(runId)
    expect(deliveries.map((d) => [d.endpoint.url.split('/')[3], d.type, d.status]).sort()).toEqual(
      [
        ['task-all', 'task.opened'], ['task-all', 'task.decided'], ['task-all', 'task.decided'], ['task-all', 'task.closed'], ['task-all', 'workflow_run.succeeded'],
        ['task-closed', 'task.closed'], ['task-run-ends', 'workflow_run.succeeded'],
      ].map(([key, type]) => [key, type, 'succeeded']).sort(),
    )
    const events = taskEvents('task-all', runId)
    expect(events.map((e) => [e.type, e.task.status, e.task.approvals, e.task.decisions.map((d) => d.user.username)])).toEqual([
      ['task.opened', 'open', 0, []],
      ['task.decided', 'open', 1, ['dave']],
      ['task.decided', 'approved', 2, ['dave', 'carol']],
      ['task.closed', 'approved', 2, ['dave', 'carol']],
    ])
    // Each delivery its own webhook-id; the last body is the task as it now is.
    expect(new Set(events.map((e) => e.id)).size).toBe(4)
    expect(events.at(-1)!.task).toEqual((await call(`/v1/tasks/${taskId}`, tokens.alice)).body as unknown as TaskEventBody)
    expect(taskEvents('task-closed', runId).map((e) => [e.type, e.task.status])).toEqual([['task.closed', 'approved']])
    expect(receivedBy('task-run-ends').map((r) => r.body.type)).toEqual(['workflow_run.succeeded'])
    expect(unverified).toEqual([])
  })

  test('a cancelled run closes its task: task.closed with status cancelled, then workflow_run.cancelled', async () => {
    const runId = await startRun('CB task', 'cb-8')
    await until('task.opened to arrive', async () => taskEvents('task-all', runId).length === 1)
    expect((await call(`/v1/workflow-runs/${runId}/cancel`, tokens.bob, { method: 'POST' })).status).toBe(200)
    await settled(runId)
    expect(taskEvents('task-all', runId).map((e) => [e.type, e.task.status])).toEqual([['task.opened', 'open'], ['task.closed', 'cancelled']])
    expect(taskEvents('task-closed', runId).map((e) => [e.type, e.task.status])).toEqual([['task.closed', 'cancelled']])
    expect(receivedBy('task-run-ends').filter((r) => r.body.data.runId === runId).map((r) => r.body.type)).toEqual(['workflow_run.cancelled'])
  })
})

describe('retries, attempts, resend', () => {
  test('500, 500, then 204: three attempts with one webhook-id, each listed with its answer; backoff between them', async () => {
    answers.set('retry', (nth) => (nth <= 2 ? 500 : 204))
    await addEndpoint('CB retry', 'retry')
    const runId = await startRun('CB retry', 'cb-3')
    const [sent] = await settled(runId)
    expect(sent!.status).toBe('succeeded')
    expect(sent!.attempts.map((a) => [a.attempt, a.statusCode, a.error])).toEqual([[1, 500, null], [2, 500, null], [3, 204, null]])
    const got = receivedBy('retry')
    expect(got.map((r) => [r.id, r.status])).toEqual([[sent!.id, 500], [sent!.id, 500], [sent!.id, 204]])
    // The same bytes every time; only the signature's timestamp moves.
    expect(new Set(got.map((r) => r.raw)).size).toBe(1)
    const started = sent!.attempts.map((a) => Date.parse(a.startedAt))
    // 30 ms ±25 %, then 60 ms ±25 %: the waits come after each attempt's answer.
    expect(started[1]! - started[0]!).toBeGreaterThanOrEqual(22)
    expect(started[2]! - started[1]!).toBeGreaterThanOrEqual(45)
  })

  test('a 2xx counts once its status line arrives: a body that never ends is not waited for', async () => {
    answers.set('stall', () => 200)
    await addEndpoint('CB stall', 'stall')
    const runId = await startRun('CB stall', 'cb-9')
    const [sent] = await settled(runId, 5_000)
    expect(sent!.status).toBe('succeeded')
    expect(sent!.attempts.map((a) => [a.statusCode, a.error])).toEqual([[200, null]])
    expect(sent!.attempts[0]!.durationMs).toBeLessThan(5_000)
  })

  test('a closed port: connection errors are attempts too, retried until a receiver listens there', async () => {
    const port = freePort()
    const secret = (await call(callbacksOf('CB down'), tokens.alice, { method: 'POST', json: { url: `http://127.0.0.1:${port}/down/hook` } })).body.secret as string
    const runId = await startRun('CB down', 'cb-4')
    expect((await finished(runId)).status).toBe('succeeded')
    const failing = await until('two failed attempts', async () => {
      const [d] = await deliveriesOf(runId)
      return d && d.attempts.length >= 2 ? d : null
    })
    expect(failing.status).toBe('pending')
    expect(failing.nextAttemptAt).not.toBeNull()
    expect(failing.attempts[0]).toMatchObject({ statusCode: null })
    expect(failing.attempts[0]!.error).toBeTruthy()
    const got: string[] = []
    const late = Bun.serve({
      hostname: '127.0.0.1',
      port,
      async fetch(request) {
        new Webhook(secret).verify(await request.text(), Object.fromEntries(request.headers))
        got.push(request.headers.get('webhook-id')!)
        return new Response('ok')
      },
    })
    try {
      const [done] = await settled(runId)
      expect(done!.status).toBe('succeeded')
      expect(done!.attempts.at(-1)).toMatchObject({ statusCode: 200, error: null })
      expect(got).toEqual([done!.id])
    } finally {
      late.stop(true)
    }
  })

  test('resend: a sent delivery again (same webhook-id, attempts numbered on); 404, 403, 400; who may see a run\'s deliveries', async () => {
    await addEndpoint('CB resend', 'resend')
    const runId = await startRun('CB resend', 'cb-5')
    const [first] = await settled(runId)
    const resent = await call(`/v1/workflow-runs/${runId}/callbacks/${first!.id}/resend`, tokens.bob, { method: 'POST' })
    expect(resent.status).toBe(202)
    expect(resent.body).toMatchObject({ id: first!.id, status: 'pending', finishedAt: null, attempts: first!.attempts })
    const [again] = await settled(runId)
    expect(again!.attempts.map((a) => [a.attempt, a.statusCode])).toEqual([[1, 204], [2, 204]])
    expect(receivedBy('resend').map((r) => r.id)).toEqual([first!.id, first!.id])

    const other = await startRun('CB basic', 'cb-5')
    const [otherDelivery] = await settled(other)
    expectError(await call(`/v1/workflow-runs/${runId}/callbacks/${otherDelivery!.id}/resend`, tokens.bob, { method: 'POST' }), 404, 'not_found')
    expectError(await call(`/v1/workflow-runs/${runId}/callbacks/msg_${'0'.repeat(32)}/resend`, tokens.bob, { method: 'POST' }), 404, 'not_found')
    expectError(await call(`/v1/workflow-runs/${runId}/callbacks/nope/resend`, tokens.bob, { method: 'POST' }), 400, 'invalid_parameter')
    expectError(await call(`/v1/workflow-runs/${runId}/callbacks/${first!.id}/resend`, tokens.bobRead, { method: 'POST' }), 403, 'insufficient_scope')
    // dave neither started the run nor administers Acme: not his to see.
    expectError(await call(`/v1/workflow-runs/${runId}/callbacks/${first!.id}/resend`, tokens.dave, { method: 'POST' }), 404, 'not_found')
    expectError(await call(`/v1/workflow-runs/${runId}/callbacks`, tokens.dave), 404, 'not_found')
    expectError(await call('/v1/workflow-runs/0190d1a4-0000-7000-8000-000000000000/callbacks', tokens.alice), 404, 'not_found')
    expectError(await call('/v1/workflow-runs/nope/callbacks', tokens.alice), 400, 'invalid_parameter')
    expect((await deliveriesOf(runId, tokens.bob)).map((d) => d.id)).toEqual([first!.id])
    expect((await deliveriesOf(runId, tokens.aliceRead)).map((d) => d.id)).toEqual([first!.id])

    // Removing the endpoint removes its deliveries and their attempts.
    const endpointId = first!.endpoint.id
    expect((await fetch(`${base}${callbacksOf('CB resend')}/${endpointId}`, { method: 'DELETE', headers: { authorization: `Bearer ${tokens.alice}` } })).status).toBe(204)
    expect(await deliveriesOf(runId)).toEqual([])
    expect(queryAll(env.store, 'SELECT * FROM callback_attempts WHERE delivery_id = ?', first!.id)).toEqual([])
  })
})

describe('while no worker runs, and with another outbound policy', () => {
  /** Stops the shared worker for `body`, then starts `next` (by default one like it) in its place. */
  async function withoutWorker(body: () => Promise<void>, next: (outbound: OutboundClient) => CallbackDelivery = newWorker) {
    await delivery.stop(2_000)
    try {
      await body()
    } finally {
      delivery = next(new OutboundClient({ allow: env.config.httpAllow }))
      delivery.start()
    }
  }
  const newWorker = (outbound: OutboundClient) =>
    new CallbackDelivery({ store: env.store, clock: systemClock, logger: silentLogger, secret: env.secret, outbound, retryBaseMs: env.config.callbackRetryMs, pollMs: 50 })

  test('the outbox keeps what no worker sends; 409 delivery_pending; the last of 33 attempts failing marks it failed', async () => {
    answers.set('spent', () => 503)
    await addEndpoint('CB spent', 'spent')
    let runId = ''
    let deliveryId = ''
    await withoutWorker(async () => {
      runId = await startRun('CB spent', 'cb-6')
      expect((await finished(runId)).status).toBe('succeeded')
      const [pending] = await deliveriesOf(runId)
      expect(pending).toMatchObject({ status: 'pending', attempts: [] })
      deliveryId = pending!.id
      expectError(await call(`/v1/workflow-runs/${runId}/callbacks/${deliveryId}/resend`, tokens.bob, { method: 'POST' }), 409, 'delivery_pending')
      // The series has 32 failed attempts behind it (as after about 23 hours at the default base).
      execute(env.store, 'UPDATE callback_deliveries SET attempts = ? WHERE id = ?', CALLBACK_MAX_ATTEMPTS - 1, deliveryId)
    })
    const [spent] = await settled(runId)
    expect(spent).toMatchObject({ id: deliveryId, status: 'failed', nextAttemptAt: null })
    expect(spent!.attempts.map((a) => a.statusCode)).toEqual([503])
    expect(spent!.finishedAt).not.toBeNull()
    // Resent, it starts a new series of attempts (33 again); the receiver answers now.
    answers.set('spent', () => 204)
    expect((await call(`/v1/workflow-runs/${runId}/callbacks/${deliveryId}/resend`, tokens.bob, { method: 'POST' })).status).toBe(202)
    const [back] = await settled(runId)
    expect(back!.attempts.map((a) => [a.attempt, a.statusCode])).toEqual([[1, 503], [2, 204]])
    expect(back!.status).toBe('succeeded')
  })

  test('a destination refused when sending (the outbound rules now say no) fails the delivery at once, not retried', async () => {
    await addEndpoint('CB refused', 'refused')
    let runId = ''
    await withoutWorker(
      async () => {
        runId = await startRun('CB refused', 'cb-7')
        expect((await finished(runId)).status).toBe('succeeded')
      },
      () => newWorker(new OutboundClient({ allow: NOTHING_ALLOWED })),
    )
    const [refused] = await settled(runId)
    expect(refused!.status).toBe('failed')
    expect(refused!.attempts).toHaveLength(1)
    expect(refused!.attempts[0]!.statusCode).toBeNull()
    expect(refused!.attempts[0]!.error).toBe('destination 127.0.0.1 refused: it is a loopback address; the outbound allow-list opens hosts and ranges (instance administrators: /admin/outbound; TRELLIS_HTTP_ALLOW when set)')
    expect(receivedBy('refused')).toEqual([])
    // Back to the usual policy for the tests after this one.
    await delivery.stop(2_000)
    delivery = newWorker(new OutboundClient({ allow: env.config.httpAllow }))
    delivery.start()
  })
})

test('the retry schedule: the base doubling to 720 times it, ±25 %', () => {
  const at = (failed: number, random: number) => callbackRetryDelayMs(failed, 5_000, () => random)
  expect([1, 2, 3, 10, 11, 32].map((n) => at(n, 0.5))).toEqual([5_000, 10_000, 20_000, 2_560_000, 3_600_000, 3_600_000])
  expect([at(1, 0), at(1, 1)]).toEqual([3_750, 6_250])
  let nominal = 0
  for (let failed = 1; failed < CALLBACK_MAX_ATTEMPTS; failed++) nominal += at(failed, 0.5)
  expect(nominal).toBe((23 * 3600 + 25 * 60 + 15) * 1000) // the 33rd attempt about 23 h 25 min after the first
})

describe('the apply file', () => {
  const applied = `${receiverUrl}/applied/hook`
  const document = (callbacks: unknown) => {
    const file = acmeDocument()
    acmeProject(file).workflows = [{ ...ordersWorkflow('CB apply', [stamp]), callbacks }]
    return file
  }
  const apply = (file: unknown, allow = env.config.httpAllow) => applyDocument(file, { store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl, httpAllow: allow })
  const reported = (report: ApplyReport) => report.workflows.find((w) => w.name === 'CB apply')!
  const adminEntries = () => queryAll(env.store, "SELECT type, user_id FROM admin_logs WHERE resource = 'workflow-callback' AND (new_value LIKE '%CB apply%' OR previous_value LIKE '%CB apply%') ORDER BY id")

  test('workflows[].callbacks: added with the secret in the report once, matched by URL after, never part of the version; others kept', async () => {
    const first = await apply(document([{ url: applied }, { url: 'https://hooks.example.com/cb', events: ['workflow_run.failed'] }]))
    const callbacks = reported(first).callbacks!
    expect(callbacks.map((c) => [c.url, c.events, typeof c.secret])).toEqual([
      [applied, ['workflow_run.succeeded', 'workflow_run.failed', 'workflow_run.cancelled'], 'string'],
      ['https://hooks.example.com/cb', ['workflow_run.failed'], 'string'],
    ])
    expect(first.changes.filter((c) => c.kind === 'callback').map((c) => [c.action, c.name])).toEqual([
      ['created', `Acme/production/Support/CB apply → ${applied}`],
      ['created', 'Acme/production/Support/CB apply → https://hooks.example.com/cb'],
    ])
    expect(adminEntries()).toEqual([{ type: 'add', user_id: null }, { type: 'add', user_id: null }])
    secrets.set('applied', callbacks[0]!.secret!)

    // The same file again: nothing new, no secret.
    const again = await apply(document([{ url: applied }, { url: 'https://hooks.example.com/cb', events: ['workflow_run.failed'] }]))
    expect(reported(again)).toMatchObject({ version: 1 })
    expect(reported(again).callbacks!.map((c) => [c.id, c.secret])).toEqual(callbacks.map((c) => [c.id, undefined]))
    expect(again.changes.filter((c) => c.kind === 'callback' || c.kind === 'workflow')).toEqual([])

    // Events changed in place; an endpoint left out of the file is kept and reported.
    const third = await apply(document([{ url: 'https://hooks.example.com/cb', events: ['workflow_run.failed', 'workflow_run.cancelled'] }]))
    expect(third.changes.filter((c) => c.kind === 'callback').map((c) => c.action)).toEqual(['updated'])
    expect(third.notInFile).toContainEqual({ kind: 'callback', name: `Acme/production/Support/CB apply → ${applied}` })
    expect(reported(third)).toMatchObject({ version: 1 })
    const listed = (await call(callbacksOf('CB apply'), tokens.alice)).body.data as { url: string; events: string[] }[]
    expect(listed.map((e) => [e.url, e.events])).toEqual([
      [applied, ['workflow_run.succeeded', 'workflow_run.failed', 'workflow_run.cancelled']],
      ['https://hooks.example.com/cb', ['workflow_run.failed', 'workflow_run.cancelled']],
    ])
    expect(adminEntries().map((e) => e.type)).toEqual(['add', 'add', 'update'])

    // The secret the report showed signs the deliveries.
    const runId = await startRun('CB apply', 'cb-8')
    await settled(runId)
    expect(receivedBy('applied').map((r) => r.body.data.runId)).toEqual([runId])
    expect(unverified).toEqual([])
  })

  test('a callback URL is whole in the report of the apply that creates it; after, as every read shows it (without its query)', async () => {
    const url = 'https://hooks.example.com/query?token=apply-credential'
    const shownOnce = 'https://hooks.example.com/query?[redacted]'
    const created = await apply(document([{ url }]))
    expect(created.changes.filter((c) => c.kind === 'callback')).toEqual([{ action: 'created', kind: 'callback', name: `Acme/production/Support/CB apply → ${url}` }])
    expect(reported(created).callbacks!.map((c) => [c.url, typeof c.secret])).toEqual([[url, 'string']])

    const updated = await apply(document([{ url, events: ['workflow_run.failed'] }]))
    expect(updated.changes.filter((c) => c.kind === 'callback')).toEqual([{ action: 'updated', kind: 'callback', name: `Acme/production/Support/CB apply → ${shownOnce}` }])
    expect(reported(updated).callbacks!.map((c) => [c.url, c.secret])).toEqual([[shownOnce, undefined]])
    const left = await apply(document([{ url: 'https://hooks.example.com/cb', events: ['workflow_run.failed', 'workflow_run.cancelled'] }]))
    expect(left.notInFile).toContainEqual({ kind: 'callback', name: `Acme/production/Support/CB apply → ${shownOnce}` })
    expect(JSON.stringify([updated, left, (await call(callbacksOf('CB apply'), tokens.alice)).body])).not.toContain('apply-credential')
  })

  test('bad callbacks are refused with their path, and nothing is written', async () => {
    const before = queryAll(env.store, 'SELECT id FROM callback_endpoints ORDER BY id')
    const problems = async (callbacks: unknown, allow = env.config.httpAllow) => {
      try {
        await apply(document(callbacks), allow)
      } catch (error) {
        if (!(error instanceof ApplyError)) throw error
        return error.problems.filter((p) => p.path.includes('callbacks')).map((p) => `${p.path.replace(/^projects\[0\]\.workflows\[0\]\./, '')}: ${p.message}`)
      }
      throw new Error('applied')
    }
    expect(await problems([{ url: 'http://10.1.1.1/x' }])).toEqual([
      'callbacks[0].url: points to a private address (10.1.1.1), which outbound requests may not reach: the outbound allow-list opens hosts and ranges (instance administrators: /admin/outbound; TRELLIS_HTTP_ALLOW when set)',
    ])
    expect(await problems([{ url: applied }], NOTHING_ALLOWED)).toEqual([expect.stringContaining('callbacks[0].url: points to a loopback address') as unknown as string])
    expect(await problems([{ url: 'https://a.example.com/' }, { url: 'https://a.example.com/' }])).toEqual(['callbacks[1].url: duplicate callback https://a.example.com/'])
    expect(await problems([{ url: 'https://a.example.com/', events: ['workflow_run.started'] }])).toEqual([expect.stringMatching(/^callbacks\[0\]\.events\[0\]: must be one of/) as unknown as string])
    expect(await problems([{ url: 'https://a.example.com/', secret: 'x' }])).toEqual(['callbacks[0].secret: unknown field'])
    expect(await problems('https://a.example.com/')).toEqual([expect.stringMatching(/^callbacks: must be a list/) as unknown as string])
    expect(queryAll(env.store, 'SELECT id FROM callback_endpoints ORDER BY id')).toEqual(before)
  })
})

// ── Real servers: kill -9, and two instances on PostgreSQL ───────────────────

const cleanups: (() => void)[] = []
const servers: ServeProcess[] = []
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop('SIGKILL')))
  for (const cleanup of cleanups) cleanup()
})

/** A real `serve` (or several on PostgreSQL) with Acme and the `CB crash` workflow, tokens, and how to start another. */
async function realServers(settings: Record<string, string>, count = 1) {
  const workflow = ordersWorkflow('CB crash', [stamp])
  const env = { TRELLIS_HTTP_ALLOW: '127.0.0.1', ...NO_API_LIMIT, ...settings }
  if (TEST_STORE === 'sqlite') {
    const seeded = await seedDataDir('callbacks', [workflow], cleanups, async (store) => ({
      alice: (await tokenFor(store, systemClock, 'alice', ['all'])).value,
      bob: (await tokenFor(store, systemClock, 'bob', ['workflows:trigger'])).value,
    }))
    const serve = async () => {
      const server = await startServe({ dataDir: seeded.dataDir, cwd: seeded.cwd, env: { ...env, TRELLIS_LOG_LEVEL: 'warn' }, timeoutMs: 20_000 })
      servers.push(server)
      return server
    }
    return { alice: seeded.alice, bob: seeded.bob, instances: [await serve()], serve }
  }
  const document = acmeDocument()
  acmeProject(document).workflows!.push(workflow)
  const set = await startInstances({ url: await freshDatabase(), document, count, env })
  cleanups.push(() => void set.close())
  const serve = async () => {
    const dir = tempDir('trellis-callbacks-pg-')
    cleanups.push(dir.cleanup)
    const server = await startServe({ dataDir: dir.path, cwd: dir.path, env: set.env, timeoutMs: 20_000 })
    servers.push(server)
    return server
  }
  return { alice: await set.token('alice@example.com', 'cb-admin', 'all'), bob: await set.token('bob@example.com', 'cb-erp', 'workflows:trigger'), instances: set.instances, serve }
}

/** A call to a real server: GET, or POST with `json`. */
const sendTo = (server: ServeProcess, path: string, token: string, json?: unknown) =>
  callWithToken(server.url, path, token, json === undefined ? {} : { method: 'POST', json })

test("kill -9 between the run's end and the delivery: after the restart the callback arrives, with the same webhook-id", async () => {
  answers.set('crash', () => 503)
  const real = await realServers({ TRELLIS_CALLBACK_RETRY_MS: '1000' })
  const first = real.instances[0]!
  const added = await sendTo(first, callbacksOf('CB crash'), real.alice, { url: `${receiverUrl}/crash/hook` })
  expect(added.status).toBe(201)
  secrets.set('crash', added.body.secret as string)
  const started = await sendTo(first, `${PRODUCTION}/workflow-runs`, real.bob, { workflowName: 'CB crash', teamName: 'Support', recordId: 'ord_1001' })
  expect(started.status).toBe(202)
  const runId = started.body.runId as string
  // The run has ended and its callback was tried (the receiver is down: 503); the next attempt is a second away.
  const before = await until('a first attempt', async () => {
    const [d] = (await sendTo(first, `/v1/workflow-runs/${runId}/callbacks`, real.alice)).body.data as DeliveryBody[]
    return d && d.attempts.length > 0 ? d : null
  }, 15_000)
  expect(before.status).toBe('pending')
  expect(await first.stop('SIGKILL')).not.toBe(0)
  const triedBefore = receivedBy('crash').length

  answers.set('crash', () => 204)
  const restarted = await real.serve()
  await until('the callback to arrive', () => receivedBy('crash').some((r) => r.status === 204), 20_000)
  const got = receivedBy('crash')
  expect(got.length).toBeGreaterThan(triedBefore)
  expect(new Set(got.map((r) => r.id))).toEqual(new Set([before.id]))
  expect(got.at(-1)!.body.data).toMatchObject({ runId, status: 'succeeded', workflow: 'CB crash' })
  const after = await until('the delivery to show succeeded', async () => {
    const [d] = (await sendTo(restarted, `/v1/workflow-runs/${runId}/callbacks`, real.alice)).body.data as DeliveryBody[]
    return d?.status === 'succeeded' ? d : null
  })
  expect(after.id).toBe(before.id)
  expect(after.attempts.at(-1)!.statusCode).toBe(204)
  expect(after.attempts.slice(0, -1).every((a) => a.statusCode === 503)).toBe(true)
  expect(unverified).toEqual([])
}, 90_000)

sqliteOnlyTest(SQLITE_ONLY.ownDataDir, 'kill -9 while an attempt waits for its answer: the next serve of the data directory takes its lease back at once, same webhook-id', async () => {
  delays.set('midway', 120_000)
  const real = await realServers({})
  const first = real.instances[0]!
  const added = await sendTo(first, callbacksOf('CB crash'), real.alice, { url: `${receiverUrl}/midway/hook` })
  secrets.set('midway', added.body.secret as string)
  const started = await sendTo(first, `${PRODUCTION}/workflow-runs`, real.bob, { workflowName: 'CB crash', teamName: 'Support', recordId: 'ord_1002' })
  await until('the attempt to reach the receiver', () => receivedBy('midway').length === 1, 15_000)
  expect(await first.stop('SIGKILL')).not.toBe(0)
  delays.set('midway', 0)
  const restartedAt = performance.now()
  const restarted = await real.serve()
  await until('the callback to be sent again', () => receivedBy('midway').length === 2, 20_000)
  // Well inside the 30 s lease the dead process held: taken back at start, not when it ran out.
  expect(performance.now() - restartedAt).toBeLessThan(15_000)
  const got = receivedBy('midway')
  expect(got[1]!.id).toBe(got[0]!.id)
  expect(got[1]!.body.data.runId).toBe(started.body.runId)
  expect(restarted.stdout() + restarted.stderr()).toContain('took back callbacks no live process holds')
  // The receiver has the request; the serve records the attempt once its answer is back.
  const after = await until('the delivery to show succeeded', async () => {
    const [d] = (await sendTo(restarted, `/v1/workflow-runs/${started.body.runId}/callbacks`, real.alice)).body.data as DeliveryBody[]
    return d?.status === 'succeeded' ? d : null
  })
  // The attempt cut short by the kill was never recorded: the one listed is the restarted serve's.
  expect(after.attempts.map((a) => [a.attempt, a.statusCode])).toEqual([[1, 204]])
}, 90_000)

postgresOnlyTest(POSTGRES_ONLY.severalInstances, 'two instances share the outbox: each attempt is made by one of them, never twice at once', async () => {
  answers.set('pair', (nth) => (nth === 1 ? 500 : 204))
  delays.set('pair', 100)
  const real = await realServers({ TRELLIS_CALLBACK_RETRY_MS: '50' }, 2)
  const [a, b] = real.instances as [ServeProcess, ServeProcess]
  const added = await sendTo(a, callbacksOf('CB crash'), real.alice, { url: `${receiverUrl}/pair/hook` })
  secrets.set('pair', added.body.secret as string)
  // Runs on records that do not exist: each fails at once, and its end is sent (to whichever instance claims it).
  const runs = await Promise.all(
    Array.from({ length: 24 }, async (_, i) => {
      const sent = await sendTo(i % 2 === 0 ? a : b, `${PRODUCTION}/workflow-runs`, real.bob, { workflowName: 'CB crash', teamName: 'Support', recordId: `pair-${i}` })
      expect(sent.status).toBe(202)
      return sent.body.runId as string
    }),
  )
  await until('every callback to be answered 204', () => new Set(receivedBy('pair').filter((r) => r.status === 204).map((r) => r.body.data.runId)).size === runs.length, 30_000)
  await Bun.sleep(500) // a second attempt made by mistake would arrive by now
  const got = receivedBy('pair')
  const ids = [...new Set(got.map((r) => r.id))]
  expect(ids).toHaveLength(runs.length)
  for (const id of ids) {
    expect(got.filter((r) => r.id === id).map((r) => r.status)).toEqual([500, 204])
    expect(mostInFlight.get(id)).toBe(1)
  }
  for (const runId of runs) {
    const [d] = (await sendTo(b, `/v1/workflow-runs/${runId}/callbacks`, real.alice)).body.data as DeliveryBody[]
    expect(d!.attempts.map((x) => [x.attempt, x.statusCode])).toEqual([[1, 500], [2, 204]])
  }
}, 120_000)

/**
 * Run events, durable, and their Server-Sent Events streams, on the test store (SQLite, or
 * PostgreSQL with TRELLIS_TEST_STORE=postgres). Through a real `trellis serve` process: a subscriber sees every
 * transition of a run in order (a wait, a resumption and a failing step among them) and the stream ends after the
 * last; a client that disconnects and resumes with `Last-Event-ID` gets every later event once; the environment's
 * stream filters, shows a member only their own runs and beats while quiet; the refusals. Through `app.handle`: the
 * bounds on open streams, a cancel ending the stream, a member's stream carrying the task events of the tasks
 * assigned to them (named or through a team) and no one else's, live and caught up; a revoked token's stream ended by the next check, the events
 * in the transitions' own transactions. On PostgreSQL: two instances each stream the other's events at once. And
 * 1,000 idle streams held open on one server.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7, SQL } from 'bun'
import { readFileSync } from 'node:fs'
import { Executor } from '../src/executor/executor.ts'
import type { Store } from '../src/db/store.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { revokeToken } from '../src/modules/tokens/service.ts'
import {
  anotherStore,
  bearer,
  POSTGRES_ONLY,
  postgresOnlyTest,
  processEnv,
  queryAll,
  request,
  runNow,
  runEventsReadable,
  type ServeProcess,
  startServe,
  testApp,
  type TestEnv,
  testEnv,
  until,
} from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, tokenFor } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'
import { startInstances } from './support/instances.ts'
import { directUrlOf, freshDatabase } from './support/postgres-cluster.ts'
import { isEvent, type RawStream, rawStream, type SseEvent, SseReader } from './support/sse.ts'

// ── A receiver that refuses every call: the failing `http` step ─────────────

const receiver = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('no', { status: 500 }) })
afterAll(() => receiver.stop(true))

const PRODUCTION = '/v1/project/Acme/environment/production'
/** What 1,000 idle streams may add to the server's resident memory (docs/workflows.md "Run events (SSE)"). */
const MANY_STREAMS_MAX_MIB = 64
const ENVIRONMENT_EVENTS = `${PRODUCTION}/workflow-runs/events`
const FINISHED = ['succeeded', 'failed', 'cancelled']

/** The workflows of these tests, on Support's orders in production. */
function workflows() {
  return [
    // load, update, wait 1 s, update, a failing http call: eight events, a wait and a resumption among them.
    ordersWorkflow('Eventful', [
      { type: 'load', name: 'read' },
      { type: 'update', name: 'mark', set: { seen: 'yes' } },
      { type: 'wait', name: 'pause', seconds: 1 },
      { type: 'update', name: 'again', set: { seen: 'twice' } },
      { type: 'http', name: 'tell', method: 'POST', url: `http://127.0.0.1:${receiver.port}/fail`, retries: 0 },
    ]),
    // Two waits: a stream to leave and resume in the middle.
    ordersWorkflow('Paced', [
      { type: 'update', name: 'one', set: { paced: '1' } },
      { type: 'wait', name: 'first', seconds: 1 },
      { type: 'update', name: 'two', set: { paced: '2' } },
      { type: 'wait', name: 'second', seconds: 1 },
      { type: 'update', name: 'three', set: { paced: '3' } },
    ]),
    ordersWorkflow('Quick', [{ type: 'update', name: 'touch', set: { quick: 'yes' } }]),
    ordersWorkflow('Hold', [{ type: 'wait', name: 'hold', seconds: 600 }]),
    // A task for a team (Billing: carol, an admin, and dave, a plain member), and one for dave by name.
    ordersWorkflow('Ask Billing', [{ type: 'task', name: 'approve', title: 'Billing: {{record.id}}?', assignees: { teams: ['Billing'] } }, { type: 'update', name: 'done', set: { asked: 'billing' } }]),
    ordersWorkflow('Ask Dave', [{ type: 'task', name: 'approve', title: 'Dave: {{record.id}}?', assignees: { users: ['dave@example.com'] } }, { type: 'update', name: 'done', set: { asked: 'dave' } }]),
  ]
}

const closeStore = async (store: Store) => {
  await store.close()
}

/** Acme with these tests' workflows, and empty orders in production under the ids `records`. */
function acmeWith(records: string[]) {
  const document = acmeDocument()
  const acme = acmeProject(document)
  for (const id of records) acme.records!.push({ environment: 'production', collection: 'orders', id, data: {} })
  acme.workflows!.push(...workflows())
  return document
}

/** A test env (`settings` its environment variables) with `acmeWith(records)` applied. */
async function seededEnv(records: string[], settings: Record<string, string> = {}): Promise<TestEnv> {
  const env = testEnv(settings)
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeWith(records))
  return env
}

/** A real `trellis serve` on the env's database, API budgets out of the way, `settings` added. */
const serveOn = (env: TestEnv, settings: Record<string, string>) =>
  startServe({ dataDir: env.dataDir, cwd: env.dataDir, env: { ...processEnv(env), ...HIGH_API_BUDGETS, TRELLIS_LOG_LEVEL: 'warn', ...settings }, timeoutMs: 20_000 })

/** Events of a whole run as a stream carries them: `[type, status, stepIndex, stepName]`. */
const shapeOf = (events: SseEvent[]) => events.map((e) => [e.event, e.data.status, e.data.stepIndex, e.data.stepName])

const EVENTFUL = [
  ['run.started', 'running', null, null],
  ['step.succeeded', 'running', 0, 'read'],
  ['step.succeeded', 'running', 1, 'mark'],
  ['step.waiting', 'waiting', 2, 'pause'],
  ['run.resumed', 'running', null, null],
  ['step.succeeded', 'running', 3, 'again'],
  ['step.failed', 'failed', 4, 'tell'],
  ['run.failed', 'failed', null, null],
]

/** Each event of a run: the SSE id and type are the data's; ids increase; sequences are 1, 2, 3… of that run. */
function expectWellFormed(events: SseEvent[], runId: string): void {
  events.forEach((e, i) => {
    expect(e.id).toBe(String(e.data.id))
    expect(e.event).toBe(e.data.type as string)
    expect(e.data.runId).toBe(runId)
    expect(e.data.sequence).toBe(i + 1)
    if (i > 0) expect(e.data.id as number).toBeGreaterThan(events[i - 1]!.data.id as number)
    expect(e.data.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
  })
}

// ── Through a real server ───────────────────────────────────────────────────

describe('run events through a real server', () => {
  let env: TestEnv
  let server: ServeProcess
  const tokens = {} as Record<'alice' | 'bob' | 'dave' | 'bobNotes', string>

  beforeAll(async () => {
    env = await seededEnv(['ev-1', 'ev-2', 'ev-3', 'ev-4', 'ev-5'])
    tokens.alice = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
    tokens.bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    tokens.bobNotes = (await tokenFor(env.store, systemClock, 'bob', ['notes:read'])).value
    tokens.dave = (await tokenFor(env.store, systemClock, 'dave', ['all'])).value
    server = await serveOn(env, { TRELLIS_HTTP_ALLOW: '127.0.0.1', TRELLIS_EVENT_HEARTBEAT_SECONDS: '1' })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    env?.cleanup()
  })

  const get = (path: string, token: string, headers: Record<string, string> = {}) => fetch(`${server.url}${path}`, { headers: { ...bearer(token), ...headers } })

  async function startRun(workflowName: string, recordId: string, token = tokens.bob): Promise<string> {
    const response = await fetch(`${server.url}${PRODUCTION}/workflow-runs`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json' },
      body: JSON.stringify({ workflowName, teamName: 'Support', recordId }),
    })
    const body = (await response.json()) as { runId: string }
    expect(response.status, JSON.stringify(body)).toBe(202)
    return body.runId
  }

  const finished = (runId: string) =>
    until(`run ${runId} to finish`, async () => {
      const run = (await (await get(`/v1/workflow-runs/${runId}`, tokens.alice)).json()) as { status: string }
      return FINISHED.includes(run.status) ? run : null
    })

  async function stream(path: string, token: string, lastEventId?: number | string): Promise<SseReader> {
    const response = await get(path, token, lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) })
    expect(response.status, response.status === 200 ? '' : await response.clone().text()).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
    expect(response.headers.get('cache-control')).toBe('no-cache')
    return new SseReader(response)
  }

  test('a subscriber sees every transition of a run in order, then the stream ends; read again, the same events', async () => {
    const runId = await startRun('Eventful', 'ev-1')
    const live = await stream(`/v1/workflow-runs/${runId}/events`, tokens.bob)
    expect(await live.next()).toEqual({ retry: 2000 })
    const events = await live.rest(20_000)
    expect(shapeOf(events)).toEqual(EVENTFUL)
    expectWellFormed(events, runId)
    const [started, read, , waiting, resumed, again, failed, ended] = events.map((e) => e.data)
    expect(started).toMatchObject({ attempt: 1, nextStep: 0, trigger: 'manual', retryOf: null, workflow: { name: 'Eventful' }, recordId: 'ev-1' })
    expect(read).toMatchObject({ stepType: 'load' })
    expect(Date.parse(read!.finishedAt as string)).toBeGreaterThanOrEqual(Date.parse(read!.startedAt as string))
    expect(Date.parse(waiting!.until as string) - Date.parse(waiting!.startedAt as string)).toBeGreaterThanOrEqual(1000)
    expect(resumed).toMatchObject({ attempt: 2, nextStep: 3 })
    expect(again).toMatchObject({ stepType: 'update' })
    expect(failed).toMatchObject({ stepType: 'http', error: { code: 'http_failed' } })
    expect(ended).toMatchObject({ error: { code: 'http_failed', step: 'tell' } })
    // The run's answer agrees with its last event.
    expect(await finished(runId)).toMatchObject({ status: 'failed' })

    // A finished run's stream: every event at once, then the end.
    const again2 = await stream(`/v1/workflow-runs/${runId}/events`, tokens.alice)
    expect((await again2.rest()).map((e) => e.data)).toEqual(events.map((e) => e.data))
    // Resumed after its last event: nothing, then the end.
    const after = await stream(`/v1/workflow-runs/${runId}/events`, tokens.alice, events.at(-1)!.id!)
    expect(await after.rest()).toEqual([])
  }, 30_000)

  test('disconnect in the middle and resume with Last-Event-ID: every later event once, none lost (twice, then after the end)', async () => {
    const runId = await startRun('Paced', 'ev-2')
    const first = await stream(`/v1/workflow-runs/${runId}/events`, tokens.bob)
    const before = await first.eventsUntil((e) => e.event === 'step.waiting')
    await first.close()
    // Resumed while the run goes on: from where it left, live again, left again at the second wait.
    const second = await stream(`/v1/workflow-runs/${runId}/events`, tokens.bob, before.at(-1)!.id!)
    const middle = await second.eventsUntil((e) => e.event === 'step.waiting')
    await second.close()
    await finished(runId)
    // Resumed once the run is over: the rest, then the end.
    const third = await stream(`/v1/workflow-runs/${runId}/events`, tokens.bob, middle.at(-1)!.id!)
    const rest = await third.rest()
    const all = [...before, ...middle, ...rest]
    expect(all.map((e) => [e.event, e.data.stepName])).toEqual([
      ['run.started', null],
      ['step.succeeded', 'one'],
      ['step.waiting', 'first'],
      ['run.resumed', null],
      ['step.succeeded', 'two'],
      ['step.waiting', 'second'],
      ['run.resumed', null],
      ['step.succeeded', 'three'],
      ['run.succeeded', null],
    ])
    expectWellFormed(all, runId)
    // What the table holds for the run, in order: exactly what the three streams delivered.
    const stored = queryAll<{ id: number; type: string }>(env.store, 'SELECT id, type FROM run_events WHERE run_id = ? ORDER BY sequence', runId)
    expect(stored.map((e) => [Number(e.id), e.type])).toEqual(all.map((e) => [Number(e.id), e.event]))
  }, 30_000)

  test('the environment stream: filters, a member sees only their own runs, heartbeats while quiet, resumes with Last-Event-ID', async () => {
    const everything = await stream(ENVIRONMENT_EVENTS, tokens.alice)
    const filtered = await stream(`${ENVIRONMENT_EVENTS}?workflowName=Quick&recordId=ev-3`, tokens.alice)
    const bobs = await stream(ENVIRONMENT_EVENTS, tokens.bob)
    // Quiet: a heartbeat comment within the interval (1 s here), the stream still open.
    expect(await everything.next(3_000)).toEqual({ retry: 2000 })
    expect(await everything.next(3_000)).toEqual({ comment: 'heartbeat' })

    const bobOn3 = await startRun('Quick', 'ev-3', tokens.bob)
    await finished(bobOn3)
    const bobOn4 = await startRun('Quick', 'ev-4', tokens.bob)
    await finished(bobOn4)
    const aliceOn3 = await startRun('Quick', 'ev-3', tokens.alice)
    await finished(aliceOn3)
    const aliceOther = await startRun('Paced', 'ev-3', tokens.alice)
    await finished(aliceOther)

    const runsOf = (events: SseEvent[]) => [...new Set(events.map((e) => e.data.runId))]
    const all = await everything.eventsUntil((e) => e.data.runId === aliceOther && e.event === 'run.succeeded')
    expect(runsOf(all)).toEqual([bobOn3, bobOn4, aliceOn3, aliceOther])
    expect(all.filter((e) => e.data.runId === bobOn3).map((e) => e.event)).toEqual(['run.started', 'step.succeeded', 'run.succeeded'])
    // Every event of the environment, once, in id order.
    const ids = all.map((e) => Number(e.id))
    expect(ids).toEqual([...ids].sort((a, b) => a - b))
    expect(new Set(ids).size).toBe(ids.length)

    const only = await filtered.eventsUntil((e) => e.data.runId === aliceOn3 && e.event === 'run.succeeded')
    expect(runsOf(only)).toEqual([bobOn3, aliceOn3])
    expect(only.every((e) => e.data.recordId === 'ev-3' && (e.data.workflow as { name: string }).name === 'Quick')).toBe(true)

    // bob is an editor, not an admin: his own runs only (alice's Quick on ev-3 and Paced never reach him).
    const his = await bobs.eventsUntil((e) => e.data.runId === bobOn4 && e.event === 'run.succeeded')
    expect(runsOf(his)).toEqual([bobOn3, bobOn4])
    const bobLater = await startRun('Quick', 'ev-4', tokens.bob)
    const next = await bobs.eventsUntil((e) => e.data.runId === bobLater && e.event === 'run.succeeded')
    expect(runsOf(next)).toEqual([bobLater])

    // Resumed after the first of alice's events: the same events as the live stream from there on.
    const resumed = await stream(ENVIRONMENT_EVENTS, tokens.alice, all[0]!.id!)
    const again = await resumed.eventsUntil((e) => e.data.runId === aliceOther && e.event === 'run.succeeded')
    expect(again.map((e) => e.id)).toEqual(all.slice(1).map((e) => e.id))
    for (const reader of [everything, filtered, bobs, resumed]) await reader.close()
  }, 60_000)

  test('refusals: 401 without a token, 400 for a bad run id or Last-Event-ID, 404 for a run or environment the caller may not see, 403 for another project', async () => {
    const runId = await startRun('Quick', 'ev-5', tokens.bob)
    await finished(runId)
    const status = async (path: string, token: string | null, headers: Record<string, string> = {}) => {
      const response = await fetch(`${server.url}${path}`, { headers: { ...(token ? bearer(token) : {}), ...headers } })
      const body = (await response.json()) as { code: string }
      return [response.status, body.code]
    }
    expect(await status(`/v1/workflow-runs/${runId}/events`, null)).toEqual([401, 'unauthorized'])
    expect(await status(ENVIRONMENT_EVENTS, null)).toEqual([401, 'unauthorized'])
    expect(await status('/v1/workflow-runs/not-a-uuid/events', tokens.bob)).toEqual([400, 'invalid_parameter'])
    for (const bad of ['-1', 'abc', '1.5', '99999999999999999']) {
      expect(await status(`/v1/workflow-runs/${runId}/events`, tokens.bob, { 'last-event-id': bad })).toEqual([400, 'invalid_last_event_id'])
      expect(await status(ENVIRONMENT_EVENTS, tokens.bob, { 'last-event-id': bad })).toEqual([400, 'invalid_last_event_id'])
    }
    expect(await status(`/v1/workflow-runs/${randomUUIDv7()}/events`, tokens.bob)).toEqual([404, 'not_found'])
    // dave is no admin and the run is bob's.
    expect(await status(`/v1/workflow-runs/${runId}/events`, tokens.dave)).toEqual([404, 'not_found'])
    expect(await status('/v1/project/Acme/environment/nowhere/workflow-runs/events', tokens.alice)).toEqual([404, 'not_found'])
    expect(await status('/v1/project/Globex/environment/production/workflow-runs/events', tokens.alice)).toEqual([403, 'wrong_project'])
    expect(await status(`${ENVIRONMENT_EVENTS}?workflowName=${'x'.repeat(201)}`, tokens.alice)).toEqual([400, 'invalid_parameter'])
    // HEAD: the head alone, no stream opened.
    const head = await fetch(`${server.url}/v1/workflow-runs/${runId}/events`, { method: 'HEAD', headers: bearer(tokens.bob) })
    expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([200, 'text/event-stream; charset=utf-8', ''])
    // A scope is not needed to read one's runs (as GET /v1/workflow-runs/{runId}): a notes-only token of bob's.
    const reader = await stream(`/v1/workflow-runs/${runId}/events`, tokens.bobNotes)
    expect((await reader.rest()).map((e) => e.event)).toEqual(['run.started', 'step.succeeded', 'run.succeeded'])
  }, 30_000)
})

// ── Through app.handle ─────────────────────────────────────────────────────

describe('run event streams through the app', () => {
  let env: TestEnv
  let executor: Executor
  let app: ReturnType<typeof testApp>
  const tokens = {} as Record<'alice' | 'bob' | 'carol' | 'dave', { value: string; token: Parameters<typeof revokeToken>[1] }>

  beforeAll(async () => {
    env = await seededEnv(['in-1', 'in-2', 'in-3', 'in-4', 'in-5', 'in-6', 'in-7'], { ...HIGH_API_BUDGETS, TRELLIS_EVENT_STREAMS_PER_USER: '2', TRELLIS_EVENT_STREAMS_MAX: '6', TRELLIS_EVENT_HEARTBEAT_SECONDS: '1' })
    executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20, outbound: new OutboundClient({ allow: env.config.httpAllow }) })
    app = testApp(env, { clock: systemClock, executor })
    executor.start()
    tokens.alice = await tokenFor(env.store, systemClock, 'alice', ['all'])
    tokens.bob = await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])
    tokens.carol = await tokenFor(env.store, systemClock, 'carol', ['all'])
    tokens.dave = await tokenFor(env.store, systemClock, 'dave', ['all'])
  }, 60_000)

  afterAll(async () => {
    await executor?.stop(2_000)
    env?.cleanup()
  })

  const open = (path: string, token: string) => app.handle(request(path, { headers: bearer(token) }))

  async function startRun(workflowName: string, recordId: string, token = tokens.bob.value): Promise<string> {
    const response = await app.handle(request(`${PRODUCTION}/workflow-runs`, { method: 'POST', headers: bearer(token), json: { workflowName, teamName: 'Support', recordId } }))
    expect(response.status).toBe(202)
    executor.notify()
    return ((await response.json()) as { runId: string }).runId
  }

  test('bounded: 429 past a user’s streams, 503 past the project’s share (half the instance’s), each with Retry-After; a closed stream frees its place', async () => {
    const bobs = [await open(ENVIRONMENT_EVENTS, tokens.bob.value), await open(ENVIRONMENT_EVENTS, tokens.bob.value)]
    expect(bobs.map((r) => r.status)).toEqual([200, 200])
    const third = await open(ENVIRONMENT_EVENTS, tokens.bob.value)
    expect(third.status).toBe(429)
    expect(third.headers.get('retry-after')).toBe('5')
    expect(await third.json()).toMatchObject({ code: 'rate_limited', retry_after: 5 })
    const others = [await open(ENVIRONMENT_EVENTS, tokens.alice.value)]
    expect(others.map((r) => r.status)).toEqual([200])
    const metrics = await (await app.handle(request('/metrics'))).text()
    expect(metrics).toContain('\ntrellis_event_streams 3\n')
    const full = await open(ENVIRONMENT_EVENTS, tokens.carol.value)
    expect(full.status).toBe(503)
    expect(full.headers.get('retry-after')).toBe('5')
    expect(await full.json()).toMatchObject({ code: 'too_many_streams' })
    await bobs[0]!.body!.cancel()
    const again = await open(ENVIRONMENT_EVENTS, tokens.bob.value)
    expect(again.status).toBe(200)
    for (const response of [bobs[1]!, again, ...others]) await response.body!.cancel()
  })

  test('a cancel ends the run’s stream with run.cancelled; a refused start leaves no event', async () => {
    const runId = await startRun('Hold', 'in-1')
    const reader = new SseReader(await open(`/v1/workflow-runs/${runId}/events`, tokens.bob.value))
    await reader.eventsUntil((e) => e.event === 'step.waiting')
    // A second start on the busy record is refused (409): no event of it anywhere.
    const refused = await app.handle(request(`${PRODUCTION}/workflow-runs`, { method: 'POST', headers: bearer(tokens.bob.value), json: { workflowName: 'Hold', teamName: 'Support', recordId: 'in-1' } }))
    expect(refused.status).toBe(409)
    expect((await app.handle(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: bearer(tokens.bob.value) }))).status).toBe(200)
    const rest = await reader.rest()
    expect(rest.map((e) => [e.event, e.data.status])).toEqual([['run.cancelled', 'cancelled']])
    const stored = queryAll<{ run_id: string; type: string }>(env.store, "SELECT run_id, type FROM run_events WHERE record_id = 'in-1' ORDER BY id")
    expect(stored.map((e) => [e.run_id, e.type])).toEqual(['run.started', 'step.waiting', 'run.cancelled'].map((type) => [runId, type]))
  })

  test('a member’s environment stream carries the task events of the tasks assigned to them (through a team, by name) and of no other task; live and caught up', async () => {
    // dave (a plain member of Billing) and bob (a plain member elsewhere) follow production; alice starts two runs that ask dave.
    const daves = new SseReader(await open(ENVIRONMENT_EVENTS, tokens.dave.value))
    const bobs = new SseReader(await open(ENVIRONMENT_EVENTS, tokens.bob.value))
    // Each stream's first heartbeat: it reads from now on (a stream starts where the environment is at its first read).
    for (const reader of [daves, bobs]) expect([await reader.next(), await reader.next(3_000)]).toEqual([{ retry: 2000 }, { comment: 'heartbeat' }])
    const asked = [await startRun('Ask Billing', 'in-5', tokens.alice.value), await startRun('Ask Dave', 'in-6', tokens.alice.value)]
    /** Reads on until `type` was seen for both runs (they run at once, in either order). */
    const forBoth = (type: string) => {
      const seen = new Set<unknown>()
      return (e: SseEvent) => (e.event === type && seen.add(e.data.runId) && seen.size === 2) || false
    }
    const opened = await daves.eventsUntil(forBoth('task.opened'))
    const taskIds = asked.map((runId) => opened.find((e) => e.event === 'task.opened' && e.data.runId === runId)!.data.taskId as string)
    for (const taskId of taskIds) {
      const decided = await app.handle(request(`/v1/tasks/${taskId}/decisions`, { method: 'POST', headers: bearer(tokens.dave.value), json: { decision: 'approve' } }))
      expect(decided.status, await decided.clone().text()).toBe(200)
    }
    executor.notify()
    const live = [...opened, ...(await daves.eventsUntil(forBoth('task.closed')))]
    // Each task's three events, and nothing else of alice's runs (dave may not read them: no run.* or step.*).
    const perRun = (events: SseEvent[]) => asked.map((runId) => events.filter((e) => e.data.runId === runId).map((e) => [e.event, e.data.taskId]))
    const expected = taskIds.map((taskId) => ['task.opened', 'task.decided', 'task.closed'].map((type) => [type, taskId]))
    expect(perRun(live)).toEqual(expected)
    expect(live.every((e) => asked.includes(e.data.runId as string))).toBe(true)
    await until('both runs to succeed', async () => asked.every((runId) => queryAll<{ status: string }>(env.store, 'SELECT status FROM runs WHERE id = ?', runId)[0]?.status === 'succeeded') || null)

    // bob is neither an assignee nor the runs' user: his stream carries his own next run, and nothing of alice's.
    const his = await startRun('Quick', 'in-7')
    const bobSaw = await bobs.eventsUntil((e) => e.data.runId === his && e.event === 'run.succeeded')
    expect(bobSaw.filter((e) => asked.includes(e.data.runId as string))).toEqual([])
    expect([...new Set(bobSaw.map((e) => e.data.runId))]).toEqual([his])
    for (const reader of [daves, bobs]) await reader.close()

    // Caught up from the start (a filtered read of the table, not the feed): the same events for dave, none for bob.
    const resumed = new SseReader(await app.handle(request(ENVIRONMENT_EVENTS, { headers: { ...bearer(tokens.dave.value), 'last-event-id': '0' } })))
    const again = await resumed.eventsUntil(forBoth('task.closed'))
    expect(perRun(again)).toEqual(expected)
    expect(again.map((e) => e.id)).toEqual(live.map((e) => e.id))
    await resumed.close()
    const bobResumed = new SseReader(await app.handle(request(ENVIRONMENT_EVENTS, { headers: { ...bearer(tokens.bob.value), 'last-event-id': '0' } })))
    const bobAgain = await bobResumed.eventsUntil((e) => e.data.runId === his && e.event === 'run.succeeded')
    expect(bobAgain.filter((e) => asked.includes(e.data.runId as string) || e.event.startsWith('task.'))).toEqual([])
    await bobResumed.close()
  }, 30_000)

  test('a retry’s run.started names the run it retries and the step it resumes at', async () => {
    const failed = await startRun('Eventful', 'in-3')
    const first = new SseReader(await open(`/v1/workflow-runs/${failed}/events`, tokens.bob.value))
    expect((await first.rest(20_000)).at(-1)!.event).toBe('run.failed')
    const retried = await app.handle(request(`/v1/workflow-runs/${failed}/retry`, { method: 'POST', headers: bearer(tokens.bob.value) }))
    expect(retried.status).toBe(202)
    executor.notify()
    const { runId } = (await retried.json()) as { runId: string }
    const events = await new SseReader(await open(`/v1/workflow-runs/${runId}/events`, tokens.bob.value)).rest(20_000)
    expect(events.map((e) => [e.event, e.data.stepIndex])).toEqual([['run.started', null], ['step.failed', 4], ['run.failed', null]])
    expect(events[0]!.data).toMatchObject({ trigger: 'manual', retryOf: failed, nextStep: 4, attempt: 1, sequence: 1 })
  }, 30_000)

  test('the stream of a revoked token ends at its next check (every four heartbeats); another caller’s goes on', async () => {
    const revoked = await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])
    const doomed = new SseReader(await open(ENVIRONMENT_EVENTS, revoked.value))
    const kept = new SseReader(await open(ENVIRONMENT_EVENTS, tokens.alice.value))
    expect(await runNow(env.store, revokeToken(systemClock, revoked.token, null))).toBe(true)
    const started = Date.now()
    for (let item = await doomed.next(8_000); item !== null; item = await doomed.next(8_000)) expect(isEvent(item)).toBe(false)
    expect(Date.now() - started).toBeLessThan(6_500)
    expect(await kept.next(3_000)).not.toBeNull()
    await kept.close()
  }, 15_000)

  test('appenders of one environment commit at once: a reader following "id > last" while 40 writes to one run commit misses none, and the run\'s sequences follow its ids', async () => {
    const { appendRunEvents, environmentEventsAfter } = await import('../src/db/run-events.ts')
    const { read } = await import('../src/db/read.ts')
    const { write } = await import('../src/db/write.ts')
    const { rows } = await import('../src/db/query.ts')
    const { sql } = await import('drizzle-orm')
    const runId = await startRun('Quick', 'in-2')
    // Ended first: events appended to a run its executor has not claimed yet would take the sequence its start takes.
    await until(`run ${runId} to succeed`, async () => queryAll<{ status: string }>(env.store, 'SELECT status FROM runs WHERE id = ?', runId)[0]?.status === 'succeeded' || null)
    const run = queryAll<{ environment_id: number; workflow_id: number }>(env.store, 'SELECT environment_id, workflow_id FROM runs WHERE id = ?', runId)[0]!
    const environmentId = Number(run.environment_id)
    // The reader on a connection of its own, as another instance's would be.
    const reader = anotherStore(env)
    await runEventsReadable(reader)
    const start = (await read(reader, environmentEventsAfter(environmentId, 0))).at(-1)!.id
    // Each write appends its event, then (PostgreSQL) waits a random while before it commits: ids are taken in one
    // order, commits happen in another. The reader reads as the SSE feed does, after the events committed before it
    // asked are readable (PostgreSQL: their watermark; without it this test saw events lost).
    const pause = env.store.kind === 'postgres' ? () => rows((d) => d.valueRows(sql`SELECT pg_sleep(${Math.random() * 0.02})`)) : function* () {}
    const append = () =>
      write(env.store, function* () {
        yield* appendRunEvents([{ runId, environmentId, workflowId: Number(run.workflow_id), recordId: 'in-2', type: 'run.requeued', status: 'queued', data: { reason: 'released' }, at: Date.now() }])
        yield* pause()
      })
    let done = false
    void (async () => {
      const writes: Promise<void>[] = []
      for (let i = 0; i < 40; i++, await Bun.sleep(2)) writes.push(append())
      await Promise.all(writes)
      done = true
    })()
    const seen: number[] = []
    let cursor = start
    for (;;) {
      const finishedBefore = done
      await runEventsReadable(reader)
      const page = await read(reader, environmentEventsAfter(environmentId, cursor))
      for (const event of page) if (event.type === 'run.requeued' && event.runId === runId) seen.push(event.id)
      if (page.length > 0) cursor = page.at(-1)!.id
      else if (finishedBefore) break
      await Bun.sleep(1) // SQLite's reads answer at once: the writes' commits need the turns
    }
    await closeStore(reader)
    const stored = queryAll<{ id: number }>(env.store, "SELECT id FROM run_events WHERE run_id = ? AND type = 'run.requeued' ORDER BY id", runId).map((e) => Number(e.id))
    expect(stored).toHaveLength(40)
    expect(seen).toEqual(stored)
    const sequences = queryAll<{ sequence: number }>(env.store, 'SELECT sequence FROM run_events WHERE run_id = ? ORDER BY id', runId).map((e) => Number(e.sequence))
    expect(sequences).toEqual(sequences.map((_, i) => i + 1))
  }, 30_000)

  test('an append writes events at the sequences they carry (ten at once: more than one SQLite statement holds), in order; one without reads the run’s newest', async () => {
    const { appendRunEvents, runEventsAfter } = await import('../src/db/run-events.ts')
    const { read } = await import('../src/db/read.ts')
    const { write } = await import('../src/db/write.ts')
    const runId = await startRun('Quick', 'in-4')
    await until(`run ${runId} to succeed`, async () => queryAll<{ status: string }>(env.store, 'SELECT status FROM runs WHERE id = ?', runId)[0]?.status === 'succeeded' || null)
    const run = queryAll<{ environment_id: number; workflow_id: number }>(env.store, 'SELECT environment_id, workflow_id FROM runs WHERE id = ?', runId)[0]!
    // Read as the streams read: after what committed is readable (PostgreSQL: the events' watermark).
    await runEventsReadable(env.store)
    const before = await read(env.store, runEventsAfter(runId, 0))
    const subject = { runId, environmentId: Number(run.environment_id), workflowId: Number(run.workflow_id), recordId: 'in-4' }
    const requeued = (step: number, sequence?: number) => ({ ...subject, type: 'run.requeued' as const, status: 'queued' as const, data: { step }, at: Date.now(), ...(sequence === undefined ? {} : { sequence }) })
    await write(env.store, () => appendRunEvents(Array.from({ length: 10 }, (_, i) => requeued(i, before.length + 1 + i))))
    await write(env.store, () => appendRunEvents([requeued(10), requeued(11)]))
    await runEventsReadable(env.store)
    const events = await read(env.store, runEventsAfter(runId, 0))
    expect(events.slice(before.length).map((e) => [e.sequence, (JSON.parse(e.data!) as { step: number }).step])).toEqual(Array.from({ length: 12 }, (_, i) => [before.length + 1 + i, i]))
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1))
    expect(events.map((e) => e.id)).toEqual(events.map((e) => e.id).sort((a, b) => a - b))
  }, 30_000)
})

// ── Several instances, many streams ────────────────────────────────────────

describe('run events across PostgreSQL instances', () => {
  postgresOnlyTest(
    POSTGRES_ONLY.severalInstances,
    'two instances on one database: each streams the events committed through the other at once (NOTIFY, not the periodic read: heartbeats every 60 s)',
    async () => {
      const set = await startInstances({ url: await freshDatabase(), document: acmeWith(['pg-1', 'pg-2']), count: 2, env: { TRELLIS_EVENT_HEARTBEAT_SECONDS: '60' } })
      try {
        const alice = await set.token('alice@example.com', 'watch', 'all')
        const bob = await set.token('bob@example.com', 'erp', 'workflows:trigger')
        const [a, b] = set.instances as [ServeProcess, ServeProcess]
        const watch = async (instance: ServeProcess) => new SseReader(await fetch(`${instance.url}${ENVIRONMENT_EVENTS}`, { headers: bearer(alice) }))
        const [onA, onB] = [await watch(a), await watch(b)]
        for (const reader of [onA, onB]) expect(await reader.next()).toEqual({ retry: 2000 })
        const start = async (instance: ServeProcess, recordId: string) => {
          const response = await fetch(`${instance.url}${PRODUCTION}/workflow-runs`, {
            method: 'POST',
            headers: { ...bearer(bob), 'content-type': 'application/json' },
            body: JSON.stringify({ workflowName: 'Quick', teamName: 'Support', recordId }),
          })
          expect(response.status).toBe(202)
          return ((await response.json()) as { runId: string }).runId
        }
        const began = Date.now()
        const throughA = await start(a, 'pg-1')
        const throughB = await start(b, 'pg-2')
        const bothDone = (seen: Set<unknown>) => (e: SseEvent) => (e.event === 'run.succeeded' && seen.add(e.data.runId) && seen.size === 2) || false
        const [fromA, fromB] = await Promise.all([onA.eventsUntil(bothDone(new Set()), 10_000), onB.eventsUntil(bothDone(new Set()), 10_000)])
        expect(Date.now() - began).toBeLessThan(10_000)
        // The same events, in the same order, on both: each run's three, whichever instance queued or ran it.
        expect(fromB.map((e) => e.id)).toEqual(fromA.map((e) => e.id))
        for (const runId of [throughA, throughB]) {
          expect(fromA.filter((e) => e.data.runId === runId).map((e) => e.event)).toEqual(['run.started', 'step.succeeded', 'run.succeeded'])
        }
        // A run's stream on the instance that did not queue it: all of it, then the end.
        const run = new SseReader(await fetch(`${b.url}/v1/workflow-runs/${throughA}/events`, { headers: bearer(bob) }))
        expect((await run.rest()).map((e) => e.id)).toEqual(fromA.filter((e) => e.data.runId === throughA).map((e) => e.id))
        await onA.close()
        await onB.close()
      } finally {
        await set.close()
      }
    },
    90_000,
  )

  postgresOnlyTest(
    POSTGRES_ONLY.concurrentWriters,
    'a transaction holding an id holds the events committed after it back (their watermark); once it ends they come within a second, no wake-up needed (heartbeats every 60 s)',
    async () => {
      const url = await freshDatabase()
      const set = await startInstances({ url, document: acmeWith(['held-1']), count: 1, env: { TRELLIS_EVENT_HEARTBEAT_SECONDS: '60' } })
      const other = new SQL({ url: directUrlOf(url), max: 1 })
      try {
        const alice = await set.token('alice@example.com', 'watch', 'all')
        const bob = await set.token('bob@example.com', 'erp', 'workflows:trigger')
        const [instance] = set.instances as [ServeProcess]
        const events = new SseReader(await fetch(`${instance.url}${ENVIRONMENT_EVENTS}`, { headers: bearer(alice) }))
        expect(await events.next()).toEqual({ retry: 2000 })
        let release!: () => void
        const released = new Promise<void>((resolve) => (release = resolve))
        let held!: () => void
        const holding = new Promise<void>((resolve) => (held = resolve))
        // A write left open (it took a transaction id), as a report or a bulk import would.
        const transaction = other.begin(async (tx) => {
          await tx`SELECT pg_current_xact_id()`
          held()
          await released
        })
        await holding
        const response = await fetch(`${instance.url}${PRODUCTION}/workflow-runs`, {
          method: 'POST',
          headers: { ...bearer(bob), 'content-type': 'application/json' },
          body: JSON.stringify({ workflowName: 'Quick', teamName: 'Support', recordId: 'held-1' }),
        })
        expect(response.status).toBe(202)
        const { runId } = (await response.json()) as { runId: string }
        await until(`run ${runId} to succeed`, async () => {
          const run = (await (await fetch(`${instance.url}/v1/workflow-runs/${runId}`, { headers: bearer(alice) })).json()) as { status: string }
          return run.status === 'succeeded' || null
        })
        // Committed, and held back: nothing on the stream while the transaction is open.
        const first = events.eventsUntil(() => true, 20_000).then((got) => ({ got, at: Date.now() }))
        await Bun.sleep(2_000)
        const releasedAt = Date.now()
        release()
        await transaction
        const { got, at } = await first
        expect(at).toBeGreaterThanOrEqual(releasedAt)
        expect(at - releasedAt).toBeLessThan(2_000)
        const rest = await events.eventsUntil((e) => e.event === 'run.succeeded', 5_000)
        expect([...got, ...rest].map((e) => e.event)).toEqual(['run.started', 'step.succeeded', 'run.succeeded'])
        await events.close()
      } finally {
        await other.close()
        await set.close()
      }
    },
    60_000,
  )
})

describe('many streams', () => {
  let env: TestEnv
  let server: ServeProcess
  let alice: string
  let bob: string

  beforeAll(async () => {
    env = await seededEnv([])
    alice = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
    bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    server = await serveOn(env, { TRELLIS_EVENT_STREAMS_PER_USER: '2000', TRELLIS_EVENT_HEARTBEAT_SECONDS: '2' })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    env?.cleanup()
  })

  /** The server process's resident memory (KiB), from /proc. */
  const rssKiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.proc.pid}/status`, 'utf8'))![1])

  test(`1,000 idle streams held open: the server answers at once, keeps beating, streams what happens, and holds them in under ${MANY_STREAMS_MAX_MIB} MiB more`, async () => {
    // Warm: a few streams opened and closed, so that what is measured is the streams, not the first request's code.
    for (let i = 0; i < 20; i++) await (await fetch(`${server.url}${ENVIRONMENT_EVENTS}`, { headers: bearer(alice) })).body!.cancel()
    await Bun.sleep(200)
    const before = rssKiB()
    const streams: RawStream[] = []
    for (let batch = 0; batch < 10; batch++) streams.push(...(await Promise.all(Array.from({ length: 100 }, () => rawStream(server.url, ENVIRONMENT_EVENTS, alice)))))
    // Every stream open and beating: each one's first heartbeat (every 2 s here; up to 30 s on a loaded machine, where
    // a thousand streams' timers and reads queue behind other work).
    await Promise.all(streams.map((stream) => stream.until(': heartbeat', 30_000)))
    for (const stream of streams) expect(stream.text()).toStartWith('HTTP/1.1 200 OK')
    const grown = (rssKiB() - before) / 1024
    console.log(`1,000 idle streams: server RSS +${grown.toFixed(1)} MiB`)
    expect(grown).toBeLessThan(MANY_STREAMS_MAX_MIB)
    // The server answers at once meanwhile.
    const asked = performance.now()
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(performance.now() - asked).toBeLessThan(500)
    // A run's events reach every stream.
    const response = await fetch(`${server.url}${PRODUCTION}/workflow-runs`, {
      method: 'POST',
      headers: { ...bearer(bob), 'content-type': 'application/json' },
      body: JSON.stringify({ workflowName: 'Quick', teamName: 'Support', recordId: 'ord_1002' }),
    })
    const { runId } = (await response.json()) as { runId: string }
    await Promise.all(streams.map((stream) => stream.until('event: run.succeeded', 15_000)))
    for (const stream of streams) {
      const types = [...stream.text().matchAll(/event: (\S+)\ndata: (.*)\n/g)].map(([, type, data]) => [type, (JSON.parse(data!) as { runId: string }).runId])
      expect(types).toEqual(['run.started', 'step.succeeded', 'run.succeeded'].map((type) => [type, runId]))
    }
    for (const stream of streams) stream.close()
  }, 90_000)

  test('a stopping server ends its open streams first (their clients resume elsewhere) and exits at once', async () => {
    const reader = new SseReader(await fetch(`${server.url}${ENVIRONMENT_EVENTS}`, { headers: bearer(alice) }))
    expect(await reader.next()).toEqual({ retry: 2000 })
    const stopping = performance.now()
    const exited = server.stop('SIGTERM')
    expect(await reader.rest(5_000)).toEqual([])
    expect(await exited).toBe(0)
    expect(performance.now() - stopping).toBeLessThan(3_000)
  }, 30_000)
})

/**
 * Workflow health through the API (docs/workflows.md "Workflow health"), on the store the pass gives: a workflow's
 * and an environment's figures over a known set of runs, written at chosen times and outcomes on the env's manual
 * clock (never the real one), for both windows; then the errors: a bad window (400 naming it), a member who is not an
 * admin (403), unknown names (404), no credentials (401).
 *
 * Acme: alice is an admin of Acme, bob an editor in team Support; the workflows below are Support's, on `orders` in
 * production.
 */
import { beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { insertRun } from '../src/db/queue.ts'
import { writeNow } from '../src/db/write.ts'
import { bearer, execute, request, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, openTaskOnRun, ordersWorkflow, runBaseOf, tokenFor, userId } from './support/acme.ts'
import { HIGH_API_BUDGETS, sessionCookie } from './support/api-fixture.ts'
import { expectError, sendTo } from './support/scenarios.ts'

type Body = Record<string, any>

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR
/** The time of every read: Wednesday 10 June 2026, 12:00 UTC. */
const NOW = Date.UTC(2026, 5, 10, 12, 0)

const PLACE = '/v1/project/Acme/environment/production'
const healthOf = (workflow: string, window?: string) =>
  `${PLACE}/team/Support/workflows/${encodeURIComponent(workflow)}/health${window === undefined ? '' : `?window=${window}`}`
const environmentHealth = (window?: string) => `${PLACE}/health${window === undefined ? '' : `?window=${window}`}`

interface SeededStep {
  name: string
  status: 'succeeded' | 'failed' | 'skipped'
  ms: number
}
interface SeededRun {
  workflow: string
  /** How long before NOW it was created. */
  ago: number
  status: 'queued' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled'
  /** finished − started; absent: never started. */
  ms?: number
  steps?: SeededStep[]
}

const load = (ms: number): SeededStep => ({ name: 'load', status: 'succeeded', ms })
const notify = (ms: number, status: SeededStep['status'] = 'succeeded'): SeededStep => ({ name: 'notify', status, ms })

/** Health A's and Health B's runs, oldest first (an insert's createdAt follows the environment's newest run). */
const RUNS: SeededRun[] = [
  { workflow: 'Health A', ago: 8 * DAY, status: 'failed', ms: 50 },
  { workflow: 'Health A', ago: 30 * HOUR, status: 'succeeded', ms: 1000, steps: [load(5), notify(995)] },
  { workflow: 'Health A', ago: 23.5 * HOUR, status: 'succeeded', ms: 100, steps: [load(10), notify(90)] },
  { workflow: 'Health A', ago: 5.5 * HOUR, status: 'failed', ms: 300, steps: [load(20), notify(280, 'failed')] },
  { workflow: 'Health A', ago: 5 * HOUR + 10 * MINUTE, status: 'failed', ms: 500, steps: [load(30), notify(470, 'failed'), { name: 'stamp', status: 'skipped', ms: 0 }] },
  { workflow: 'Health B', ago: 2 * HOUR, status: 'failed', ms: 1000, steps: [{ name: 'call', status: 'failed', ms: 1000 }] },
  { workflow: 'Health A', ago: 1 * HOUR, status: 'succeeded', ms: 200, steps: [load(40), notify(160)] },
  { workflow: 'Health A', ago: 30 * MINUTE, status: 'cancelled' },
  { workflow: 'Health A', ago: 10 * MINUTE, status: 'running' },
  { workflow: 'Health A', ago: 5 * MINUTE, status: 'queued' },
  { workflow: 'Health A', ago: 1 * MINUTE, status: 'waiting' },
]

const counts = (c: Partial<Record<string, number>>) => ({ queued: 0, running: 0, waiting: 0, succeeded: 0, failed: 0, cancelled: 0, ...c })

let env: TestEnv
let app: ReturnType<typeof testApp>
const tokens = {} as Record<'alice' | 'bob', string>
const runIds: string[] = []

const get = (path: string, token = tokens.alice) => sendTo(app, request(path, { headers: bearer(token) }))

beforeAll(async () => {
  env = testEnv(HIGH_API_BUDGETS)
  env.clock.set(NOW)
  const document = acmeDocument()
  const workflow = (name: string) => {
    const { webhook: _none, ...rest } = ordersWorkflow(name, [{ type: 'load' }, { type: 'update', set: { status: 'seen' } }])
    return rest
  }
  acmeProject(document).workflows!.push(workflow('Health A'), workflow('Health B'))
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  tokens.alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
  tokens.bob = (await tokenFor(env.store, env.clock, 'bob', ['all'])).value
  for (const [i, run] of RUNS.entries()) {
    const id = randomUUIDv7()
    const createdAt = NOW - run.ago
    await writeNow(env.store, () => insertRun({ ...runBaseOf(env.store, run.workflow), id, recordId: `health-${i}`, createdAt }))
    const finished = ['succeeded', 'failed', 'cancelled'].includes(run.status)
    const started = run.ms === undefined ? (run.status === 'running' || run.status === 'waiting' ? createdAt + 1 : null) : createdAt + 1
    execute(env.store, 'UPDATE runs SET status = ?, started_at = ?, finished_at = ? WHERE id = ?', run.status, started, finished ? (started ?? createdAt) + (run.ms ?? 0) : null, id)
    let at = createdAt + 1
    for (const [index, step] of (run.steps ?? []).entries()) {
      execute(
        env.store,
        'INSERT INTO run_steps (run_id, step_index, name, type, status, attempts, started_at, finished_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)',
        id, index, step.name, 'load', step.status, at, at + step.ms,
      )
      at += step.ms
    }
    runIds.push(id)
  }
  // Two open tasks: on the running run (open 2 minutes) and on the waiting one (1 minute); a third, decided, is not counted.
  await openTaskOnRun(env.store, { now: () => NOW - 2 * MINUTE }, runIds[8]!, { title: 'Check the refund' })
  await openTaskOnRun(env.store, { now: () => NOW - MINUTE }, runIds[10]!, { title: 'Approve the refund' })
  const closed = await openTaskOnRun(env.store, { now: () => NOW - 3 * HOUR }, runIds[3]!, { title: 'Closed' })
  execute(env.store, "UPDATE tasks SET status = 'approved', closed_at = ? WHERE id = ?", NOW - 2 * HOUR, closed)
}, 60_000)

describe('a workflow', () => {
  test('the last day (the default window): counts per hour and status, failure rate, percentiles, steps, open tasks', async () => {
    const sent = await get(healthOf('Health A'))
    expect(sent.status, JSON.stringify(sent.body)).toBe(200)
    const body = sent.body as Body
    expect(body).toMatchObject({ workflowName: 'Health A', teamName: 'Support', window: 'day', bucketSeconds: 3600 })
    expect(body.from).toBe(new Date(NOW - DAY).toISOString())
    expect(body.to).toBe(new Date(NOW).toISOString())
    expect(body.counts).toEqual(counts({ succeeded: 2, failed: 2, cancelled: 1, running: 1, queued: 1, waiting: 1 }))
    expect(body.total).toBe(8)
    expect(body.failureRate).toBeCloseTo(2 / 5, 10)
    // Durations 100, 200, 300, 500: the median is the 2nd (nearest rank), the 95th percentile the 4th.
    expect(body.duration).toEqual({ runs: 4, p50Ms: 200, p95Ms: 500 })
    expect(body.buckets).toHaveLength(24)
    expect(body.buckets[0]).toEqual({ from: new Date(NOW - DAY).toISOString(), to: new Date(NOW - 23 * HOUR).toISOString(), counts: counts({ succeeded: 1 }), total: 1 })
    expect(body.buckets[18].counts).toEqual(counts({ failed: 2 }))
    expect(body.buckets[23].counts).toEqual(counts({ succeeded: 1, cancelled: 1, running: 1, queued: 1, waiting: 1 }))
    expect(body.buckets.reduce((sum: number, b: Body) => sum + b.total, 0)).toBe(8)
    const step = (stepName: string, count: number, failures: number, meanMs: number, maxMs: number) => ({ workflowName: 'Health A', teamName: 'Support', stepName, count, failures, meanMs, maxMs })
    expect(body.slowestSteps).toEqual([step('notify', 4, 2, 250, 470), step('load', 4, 0, 25, 40)])
    expect(body.failingSteps).toEqual([step('notify', 4, 2, 250, 470)])
    expect(body.openTasks.count).toBe(2)
    expect(body.openTasks.oldestWaitMs).toBe(2 * MINUTE)
    expect(body.openTasks.longestWaiting.map((t: Body) => [t.title, t.stepName, t.workflowName, t.waitMs])).toEqual([
      ['Check the refund', 'approve', 'Health A', 2 * MINUTE],
      ['Approve the refund', 'approve', 'Health A', MINUTE],
    ])
  })

  test('the last week: daily buckets reach the run of yesterday, not the one of eight days ago', async () => {
    const body = (await get(healthOf('Health A', 'week'))).body as Body
    expect(body).toMatchObject({ window: 'week', bucketSeconds: 86400, total: 9, from: new Date(NOW - 7 * DAY).toISOString() })
    expect(body.buckets).toHaveLength(7)
    expect(body.buckets[5].counts).toEqual(counts({ succeeded: 1 }))
    expect(body.buckets[6].total).toBe(8)
    expect(body.counts).toEqual(counts({ succeeded: 3, failed: 2, cancelled: 1, running: 1, queued: 1, waiting: 1 }))
    expect(body.failureRate).toBeCloseTo(2 / 6, 10)
    expect(body.duration).toEqual({ runs: 5, p50Ms: 300, p95Ms: 1000 })
    expect(body.slowestSteps.map((s: Body) => [s.stepName, s.count, s.meanMs])).toEqual([['notify', 5, 399], ['load', 5, 21]])
  })

  test('a workflow without runs: zeros, and nulls where nothing is there to measure', async () => {
    const body = (await get(healthOf('Refund order'))).body as Body
    expect(body).toMatchObject({ total: 0, failureRate: null, duration: { runs: 0, p50Ms: null, p95Ms: null }, slowestSteps: [], failingSteps: [] })
    expect(body.openTasks).toEqual({ count: 0, oldestWaitMs: null, longestWaiting: [] })
    expect(body.buckets.every((b: Body) => b.total === 0)).toBe(true)
  })

  test('the figures move with the clock: an hour later the oldest run of the day has left it', async () => {
    env.clock.set(NOW + HOUR)
    try {
      const body = (await get(healthOf('Health A'))).body as Body
      expect(body.total).toBe(7)
      expect(body.openTasks.oldestWaitMs).toBe(HOUR + 2 * MINUTE)
    } finally {
      env.clock.set(NOW)
    }
  })
})

describe('an environment', () => {
  test('its workflows together, and a row per workflow', async () => {
    const sent = await get(environmentHealth())
    expect(sent.status, JSON.stringify(sent.body)).toBe(200)
    const body = sent.body as Body
    expect(body).toMatchObject({ environmentName: 'production', window: 'day', total: 9 })
    expect(body.counts).toEqual(counts({ succeeded: 2, failed: 3, cancelled: 1, running: 1, queued: 1, waiting: 1 }))
    expect(body.failureRate).toBeCloseTo(3 / 6, 10)
    expect(body.duration).toEqual({ runs: 5, p50Ms: 300, p95Ms: 1000 })
    expect(body.slowestSteps.map((s: Body) => `${s.workflowName}/${s.stepName}`)).toEqual(['Health B/call', 'Health A/notify', 'Health A/load'])
    expect(body.failingSteps.map((s: Body) => [`${s.workflowName}/${s.stepName}`, s.failures])).toEqual([['Health A/notify', 2], ['Health B/call', 1]])
    expect(body.openTasks.count).toBe(2)
    const rows = new Map(body.workflows.map((w: Body) => [`${w.teamName}/${w.workflowName}`, w]))
    expect(rows.get('Support/Health A')).toEqual({ workflowName: 'Health A', teamName: 'Support', counts: counts({ succeeded: 2, failed: 2, cancelled: 1, running: 1, queued: 1, waiting: 1 }), total: 8, failureRate: 0.4, openTasks: 2 })
    expect(rows.get('Support/Health B')).toMatchObject({ total: 1, failureRate: 1, openTasks: 0 })
    expect(rows.get('Support/Refund order')).toMatchObject({ total: 0, failureRate: null, openTasks: 0 })
    expect(body.workflows.reduce((sum: number, w: Body) => sum + w.total, 0)).toBe(body.total)
  })

  test('the week', async () => {
    const body = (await get(environmentHealth('week'))).body as Body
    expect(body).toMatchObject({ window: 'week', total: 10 })
  })

  test('another environment has none of these runs', async () => {
    const body = (await get('/v1/project/Acme/environment/staging/health')).body as Body
    expect(body).toMatchObject({ environmentName: 'staging', total: 0, openTasks: { count: 0 } })
  })
})

describe('errors', () => {
  for (const [name, path] of [['workflow', healthOf('Health A', 'month')], ['environment', environmentHealth('DAY')]] as const) {
    test(`${name}: a bad window is a 400 naming it`, async () => {
      expectError(await get(path), 400, 'invalid_parameter', 'window')
    })
  }

  test('an empty window is the default', async () => {
    expect(((await get(`${healthOf('Health A')}?window=`)).body as Body).window).toBe('day')
  })

  test('a member who is not a project admin: 403 (signed in, or with a token)', async () => {
    const cookie = await sessionCookie(env, userId(env.store, 'bob'))
    for (const path of [healthOf('Health A'), environmentHealth()]) {
      expectError(await sendTo(app, request(path, { headers: { cookie } })), 403, 'insufficient_role')
      expect((await get(path, tokens.bob)).status).toBe(403)
    }
  })

  test('unknown names: 404', async () => {
    expectError(await get(healthOf('No such workflow')), 404, 'not_found')
    expectError(await get('/v1/project/Acme/environment/production/team/Nobody/workflows/Health%20A/health'), 404, 'not_found')
    expectError(await get('/v1/project/Acme/environment/nowhere/health'), 404, 'not_found')
    const cookie = await sessionCookie(env, userId(env.store, 'alice'))
    expectError(await sendTo(app, request('/v1/project/Nope/environment/production/health', { headers: { cookie } })), 404, 'not_found')
  })

  test('no credentials: 401', async () => {
    expect((await sendTo(app, request(healthOf('Health A')))).status).toBe(401)
    expect((await sendTo(app, request(environmentHealth()))).status).toBe(401)
  })
})

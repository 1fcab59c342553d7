/**
 * Record and note events that start workflows (docs/workflows.md "Events"), through the real app on both stores: the
 * `…/workflows/{name}/events` endpoints and their errors, each event kind, the `fields` filter, `where`, debounce (the
 * clock moved), a rolled-back change starting nothing, a record with an active run skipped, `runAs` losing its rights,
 * the loop bound, and on PostgreSQL two dispatchers on one database starting each event's run once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { rows } from '../src/db/query.ts'
import { claimWorkflowEvents, subscribersOf } from '../src/db/workflow-events.ts'
import { writeNow } from '../src/db/write.ts'
import { EventDispatch, MAX_DISPATCH_ATTEMPTS } from '../src/executor/event-dispatch.ts'
import { Executor } from '../src/executor/executor.ts'
import { createLogger, silentLogger } from '../src/lib/logger.ts'
import { patchRecord } from '../src/modules/records/service.ts'
import { setUserDisabled } from '../src/modules/users/service.ts'
import { anotherStore, applyNow, bearer, execute, POSTGRES_ONLY, postgresOnlyTest, queryAll, queryOne, request, runNow, testApp, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, tokenFor, userId } from './support/acme.ts'
import { HIGH_API_BUDGETS, sessionCookie } from './support/api-fixture.ts'

// Every test calls the API as alice: the per-token budgets are out of the way.
const env = testEnv(HIGH_API_BUDGETS)
let app: ReturnType<typeof testApp>
let token = ''
let bobToken = ''
let dispatch: EventDispatch

const WORKFLOWS = ['On create', 'On status', 'On delete', 'On note', 'Debounced', 'As bob', 'Poisoned']
const BASE = '/v1/project/Acme/environment/production'
const eventsPath = (workflow: string, team = 'Support') => `${BASE}/team/${team}/workflows/${encodeURIComponent(workflow)}/events`
const recordsPath = `${BASE}/collection/tickets/records`

async function call(method: string, path: string, json?: unknown, auth: string | null = token) {
  const response = await app.handle(request(path, { method, ...(json === undefined ? {} : { json }), headers: auth === null ? {} : bearer(auth) }))
  const text = await response.text()
  return { status: response.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> }
}

interface RunRow {
  id: string
  recordId: string
  trigger: string
  userId: number
  cause: string | null
  status: string
}
const runsOf = (workflow: string) =>
  queryAll<RunRow>(
    env.store,
    'SELECT r.id, r.record_id AS "recordId", r.trigger, r.user_id AS "userId", r.cause, r.status FROM runs r JOIN workflows w ON w.id = r.workflow_id WHERE w.name = ? ORDER BY r.created_at',
    workflow,
  )
const counters = (workflow: string) =>
  queryOne<{ received: number; started: number; skipped: number }>(
    env.store,
    'SELECT e.received, e.started, e.skipped FROM workflow_event_triggers e JOIN workflows w ON w.id = e.workflow_id WHERE w.name = ?',
    workflow,
  )!
const pendingEvents = () => queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM workflow_events WHERE status = 'pending'")!.n

/** Dispatches every due event now (the loop's poll is short; this waits until none is due). */
async function dispatched() {
  dispatch.notify()
  await until('due events dispatched', () => queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM workflow_events WHERE status = 'pending' AND next_attempt_at <= ?", env.clock.now())!.n === 0, 20_000, 20)
}

async function newTicket(id: string, data: Record<string, unknown> = { status: 'open', priority: 1 }) {
  const created = await call('POST', recordsPath, { id, data })
  expect(created.status).toBe(201)
}

beforeAll(async () => {
  const document = acmeDocument()
  const acme = acmeProject(document)
  acme.collections!.push({
    name: 'tickets',
    schema: {
      fields: [
        { name: 'status', type: 'text' },
        { name: 'priority', type: 'number' },
        { name: 'hops', type: 'text' },
      ],
    },
  })
  for (const name of WORKFLOWS) acme.workflows!.push(ordersWorkflow(name, [{ type: 'load' }], { collection: 'tickets', webhook: { enabled: false } }))
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env, process.env.DEBUG_EVENTS ? { logger: createLogger('error') } : {})
  token = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
  bobToken = (await tokenFor(env.store, env.clock, 'bob', ['all'])).value
  dispatch = new EventDispatch({ store: env.store, clock: env.clock, logger: silentLogger, pollMs: 20, onRunQueued: () => {} })
  dispatch.start()
}, 60_000)

afterAll(async () => {
  await dispatch.stop()
  env.cleanup()
})

describe('the events endpoints', () => {
  test('PUT, GET, DELETE: the settings as saved, 404 once removed, an admin log entry each', async () => {
    expect((await call('GET', eventsPath('On create'))).status).toBe(404)
    const settings = { on: [{ event: 'recordUpdated', fields: ['status'] }, { event: 'recordCreated' }], where: { status: { in: ['open', 'disputed'] } }, runAs: 'alice@example.com', debounceSeconds: 5 }
    const put = await call('PUT', eventsPath('On create'), settings)
    expect(put).toEqual({ status: 200, body: settings })
    expect(await call('GET', eventsPath('On create'))).toEqual({ status: 200, body: settings })
    expect((await call('DELETE', eventsPath('On create'))).status).toBe(204)
    expect((await call('GET', eventsPath('On create'))).status).toBe(404)
    expect((await call('DELETE', eventsPath('On create'))).status).toBe(404)
    const entries = queryAll<{ type: string }>(env.store, "SELECT type FROM admin_logs WHERE resource = 'workflow-events' ORDER BY id")
    expect(entries.map((e) => e.type)).toEqual(['add', 'remove'])
  })

  const bad: [string, unknown, string][] = [
    ['no runAs', { on: [{ event: 'recordCreated' }] }, 'runAs'],
    ['an unknown event', { on: [{ event: 'recordMoved' }], runAs: 'alice@example.com' }, 'on'],
    ['no event', { on: [], runAs: 'alice@example.com' }, 'on'],
    ['fields on recordCreated', { on: [{ event: 'recordCreated', fields: ['status'] }], runAs: 'alice@example.com' }, 'on[0].fields'],
    ['an event twice', { on: [{ event: 'recordCreated' }, { event: 'recordCreated' }], runAs: 'alice@example.com' }, 'on[1].event'],
    ['a field not in the schema', { on: [{ event: 'recordUpdated', fields: ['nope'] }], runAs: 'alice@example.com' }, 'on[0].fields'],
    ['where on an unknown field', { on: [{ event: 'recordCreated' }], where: { nope: { eq: 'x' } }, runAs: 'alice@example.com' }, 'where.nope.eq'],
    ['where with an unknown operator', { on: [{ event: 'recordCreated' }], where: { status: { like: 'x' } }, runAs: 'alice@example.com' }, 'where.status.like'],
    ['where with a number that is not', { on: [{ event: 'recordCreated' }], where: { priority: { gt: 'high' } }, runAs: 'alice@example.com' }, 'where.priority.gt'],
    ['an unknown runAs', { on: [{ event: 'recordCreated' }], runAs: 'nobody@example.com' }, 'runAs'],
    ['a runAs who cannot reach the team', { on: [{ event: 'recordCreated' }], runAs: 'dave@example.com' }, 'runAs'],
    ['a debounce of 0', { on: [{ event: 'recordCreated' }], runAs: 'alice@example.com', debounceSeconds: 0 }, 'debounceSeconds'],
    ['an unknown key', { on: [{ event: 'recordCreated' }], runAs: 'alice@example.com', every: 'day' }, 'every'],
  ]
  test.each(bad)('400 naming the field: %s', async (_name, body, field) => {
    const answer = await call('PUT', eventsPath('On create'), body)
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ error: 'Bad Request' })
    expect(typeof answer.body.code).toBe('string')
    expect(answer.body.message as string).toContain(field)
  })

  test('401 without a token, 403 for a member who is not a project admin, 404 for an unknown workflow or place', async () => {
    const body = { on: [{ event: 'recordCreated' }], runAs: 'alice@example.com' }
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const json = method === 'PUT' ? body : undefined
      expect((await call(method, eventsPath('On create'), json, null)).status).toBe(401)
      const forbidden = await call(method, eventsPath('On create'), json, bobToken)
      expect(forbidden.status).toBe(403)
      expect(forbidden.body).toMatchObject({ error: 'Forbidden' })
      const unknown = await call(method, eventsPath('No such workflow'), json)
      expect(unknown.status).toBe(404)
      expect(unknown.body).toMatchObject({ error: 'Not Found', code: 'not_found' })
      expect((await call(method, eventsPath('On create', 'Nowhere'), json)).status).toBe(404)
    }
  })
})

describe('the apply file', () => {
  const withEvents = (events: unknown) => {
    const document = acmeDocument()
    const acme = acmeProject(document)
    acme.collections!.push({ name: 'tickets', schema: { fields: [{ name: 'status', type: 'text' }, { name: 'priority', type: 'number' }, { name: 'hops', type: 'text' }] } })
    for (const name of WORKFLOWS) acme.workflows!.push(ordersWorkflow(name, [{ type: 'load' }], { collection: 'tickets', webhook: { enabled: false }, ...(name === 'On note' ? { events } : {}) }))
    return document
  }
  const ctx = () => ({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl })

  test("a workflow's `events` key sets its events; the same file again changes nothing; a problem names its place", async () => {
    const events = { on: [{ event: 'noteAdded' }], where: { priority: { gte: 2 } }, runAs: 'bob@example.com' }
    const first = await applyNow(withEvents(events), ctx())
    expect(first.changes).toContainEqual({ action: 'updated', kind: 'workflow events', name: 'Acme/production/Support/On note' })
    expect(await call('GET', eventsPath('On note'))).toEqual({ status: 200, body: events })
    const again = await applyNow(withEvents(events), ctx())
    expect(again.changes).toEqual([])
    const at = `projects[0].workflows[${acmeProject(acmeDocument()).workflows!.length + WORKFLOWS.indexOf('On note')}].events`
    const refused = applyNow(withEvents({ ...events, runAs: 'dave@example.com' }), ctx())
    await expect(refused).rejects.toThrow(`${at}.runAs`)
    const badShape = applyNow(withEvents({ on: [{ event: 'recordMoved' }], runAs: 'bob@example.com' }), ctx())
    await expect(badShape).rejects.toThrow(`${at}.on`)
    expect((await call('DELETE', eventsPath('On note'))).status).toBe(204)
  })
})

describe('events start runs', () => {
  test('recordCreated: one run per new record, trigger event, as runAs, with its cause', async () => {
    expect((await call('PUT', eventsPath('On create'), { on: [{ event: 'recordCreated' }], runAs: 'alice@example.com' })).status).toBe(200)
    await newTicket('t_create')
    expect(pendingEvents()).toBeGreaterThan(0)
    await dispatched()
    const runs = runsOf('On create')
    expect(runs).toHaveLength(1)
    expect(runs[0]).toMatchObject({ recordId: 't_create', trigger: 'event', userId: userId(env.store, 'alice') })
    const shown = await call('GET', `/v1/workflow-runs/${runs[0]!.id}`)
    expect(shown.body).toMatchObject({ trigger: 'event', cause: { event: 'recordCreated', recordId: 't_create', chain: [] } })
    expect(counters('On create')).toEqual({ received: 1, started: 1, skipped: 0 })
  })

  test('recordUpdated with fields: a change of another field starts nothing; where: only a record that matches after the change', async () => {
    const settings = { on: [{ event: 'recordUpdated', fields: ['status'] }], where: { status: { eq: 'disputed' } }, runAs: 'alice@example.com' }
    expect((await call('PUT', eventsPath('On status'), settings)).status).toBe(200)
    await newTicket('t_status')
    expect((await call('PATCH', `${recordsPath}/t_status`, { data: { priority: 5 } })).status).toBe(200)
    await dispatched()
    expect(runsOf('On status')).toHaveLength(0)
    expect((await call('PATCH', `${recordsPath}/t_status`, { data: { status: 'waiting' } })).status).toBe(200)
    await dispatched()
    expect(runsOf('On status')).toHaveLength(0)
    expect((await call('PATCH', `${recordsPath}/t_status`, { data: { status: 'disputed', priority: 9 } })).status).toBe(200)
    await dispatched()
    const runs = runsOf('On status')
    expect(runs).toHaveLength(1)
    expect(JSON.parse(runs[0]!.cause!)).toEqual({ event: 'recordUpdated', recordId: 't_status', changedFields: ['priority', 'status'], chain: [] })
    // A PUT of the whole record is an update too.
    expect((await call('PUT', eventsPath('On status'), { ...settings, where: { priority: { gte: 10 } } })).status).toBe(200)
    expect((await call('PUT', `${recordsPath}/t_status`, { teamName: 'Support', data: { status: 'closed', priority: 10 } })).status).toBe(200)
    await dispatched()
    // The first run is still queued (no executor here): the record's second event is skipped and counted.
    expect(runsOf('On status')).toHaveLength(1)
    expect(counters('On status').skipped).toBe(1)
  })

  test('recordDeleted and noteAdded', async () => {
    expect((await call('PUT', eventsPath('On delete'), { on: [{ event: 'recordDeleted' }], runAs: 'alice@example.com' })).status).toBe(200)
    expect((await call('PUT', eventsPath('On note'), { on: [{ event: 'noteAdded' }], runAs: 'alice@example.com' })).status).toBe(200)
    await newTicket('t_gone')
    await newTicket('t_noted')
    expect((await call('DELETE', `${recordsPath}/t_gone`)).status).toBe(204)
    const note = await call('POST', `${BASE}/notes`, { recordId: 't_noted', collectionName: 'tickets', teamName: 'Support', title: 'Hello', content: '<p>hi</p>' })
    expect(note.status).toBe(201)
    await dispatched()
    expect(runsOf('On delete').map((r) => [r.recordId, JSON.parse(r.cause!).event])).toEqual([['t_gone', 'recordDeleted']])
    const noted = runsOf('On note')
    expect(noted.map((r) => r.recordId)).toEqual(['t_noted'])
    expect(JSON.parse(noted[0]!.cause!)).toMatchObject({ event: 'noteAdded', noteId: Number((note.body as { id: unknown }).id) })
  })

  test("a record's write and a new note count the subscribers of their own collection and environment, not another's", async () => {
    // Workflows subscribe to tickets in production (the tests above); none to orders, nor to anything in staging.
    const idOf = (environment: string, collection: string, key: string) =>
      queryOne<{ id: number }>(env.store, 'SELECT r.id FROM records r JOIN environments e ON e.id = r.environment_id JOIN collections c ON c.id = r.collection_id WHERE e.name = ? AND c.name = ? AND r.record_key = ?', environment, collection, key)!.id
    const counted = async (id: number) =>
      (await runNow(env.store, rows(({ db, t }) => db.update(t.records).set({ updatedAt: sql`${t.records.updatedAt}` }).where(eq(t.records.id, id)).returning({ n: subscribersOf(t, t.records) }))))[0]!.n
    const order = queryOne<{ record_key: string }>(env.store, "SELECT r.record_key FROM records r JOIN collections c ON c.id = r.collection_id JOIN environments e ON e.id = r.environment_id WHERE c.name = 'orders' AND e.name = 'production' LIMIT 1")!.record_key
    expect(await counted(idOf('production', 'tickets', 't_noted'))).toBeGreaterThan(0)
    expect(await counted(idOf('production', 'orders', order))).toBe(0)
    // A note on an order starts nothing and queues no event.
    const before = pendingEvents()
    expect((await call('POST', `${BASE}/notes`, { recordId: order, collectionName: 'orders', teamName: 'Support', title: 'Order', content: '<p>o</p>' })).status).toBe(201)
    expect(pendingEvents()).toBe(before)
  })

  test('debounce: changes of one record within the window start one run, after the last change', async () => {
    expect((await call('PUT', eventsPath('Debounced'), { on: [{ event: 'recordUpdated' }], runAs: 'alice@example.com', debounceSeconds: 60 })).status).toBe(200)
    await newTicket('t_debounce')
    for (const priority of [2, 3, 4]) {
      expect((await call('PATCH', `${recordsPath}/t_debounce`, { data: { priority } })).status).toBe(200)
      env.clock.advance(10_000)
    }
    await dispatched()
    expect(runsOf('Debounced')).toHaveLength(0)
    env.clock.advance(41_000) // 61 s after the first change, 41 s after the last: the first two are due, the last is not
    await dispatched()
    expect(runsOf('Debounced')).toHaveLength(0)
    env.clock.advance(20_000)
    await dispatched()
    expect(runsOf('Debounced')).toHaveLength(1)
    expect(pendingEvents()).toBe(0)
    expect(counters('Debounced')).toEqual({ received: 3, started: 1, skipped: 0 })
  })

  test('a rolled-back change starts nothing', async () => {
    await newTicket('t_rollback')
    await dispatched()
    const before = runsOf('Debounced').length
    const scope = queryOne<{ environmentId: number; collectionId: number }>(
      env.store,
      "SELECT environment_id AS \"environmentId\", collection_id AS \"collectionId\" FROM records WHERE record_key = 't_rollback'",
    )!
    const failing = writeNow(env.store, function* () {
      yield* patchRecord(env.clock, { ...scope, recordKey: 't_rollback', changes: { priority: 99 }, userId: userId(env.store, 'alice'), teamId: null, via: 'by test' })
      throw new Error('the transaction fails after the change and its event')
    })
    await expect(failing).rejects.toThrow('fails after the change')
    expect(pendingEvents()).toBe(0)
    env.clock.advance(120_000)
    await dispatched()
    expect(runsOf('Debounced')).toHaveLength(before)
  })

  test('a dispatcher that dies holding an event: another dispatches it, once', async () => {
    expect((await call('PUT', eventsPath('On create'), { on: [{ event: 'recordCreated' }], runAs: 'alice@example.com' })).status).toBe(200)
    await dispatch.stop()
    try {
      await newTicket('t_crash')
      // Claimed by a dispatcher that then dies before acting on it (its transaction never came).
      const [held] = await writeNow(env.store, () => claimWorkflowEvents('workflow-events-dead', env.clock.now(), 30_000, 10))
      expect(held?.recordKey).toBe('t_crash')
    } finally {
      dispatch = new EventDispatch({ store: env.store, clock: env.clock, logger: silentLogger, pollMs: 20, onRunQueued: () => {} })
      dispatch.start()
    }
    // On SQLite the new dispatcher takes back at once what a dead process held (one serve per data directory); on
    // PostgreSQL, once the lease has run out.
    env.clock.advance(31_000)
    await until('the event to be dispatched', () => pendingEvents() === 0, 20_000, 20)
    expect(runsOf('On create').filter((r) => r.recordId === 't_crash')).toHaveLength(1)
    expect(queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM workflow_events WHERE lease_owner = 'workflow-events-dead'")!.n).toBe(0)
  })

  test('an event whose dispatch throws is tried again with growing waits, then kept as failed and counted; others go on', async () => {
    expect((await call('PUT', eventsPath('Poisoned'), { on: [{ event: 'recordCreated' }], runAs: 'alice@example.com' })).status).toBe(200)
    await dispatch.stop()
    try {
      await newTicket('t_poison')
      // Someone with the database's access breaks the event's stored chain: its every dispatch throws.
      execute(env.store, "UPDATE workflow_events SET chain = '{not json' WHERE record_key = 't_poison'")
    } finally {
      dispatch = new EventDispatch({ store: env.store, clock: env.clock, logger: silentLogger, pollMs: 20, onRunQueued: () => {} })
      dispatch.start()
    }
    const poisoned = () =>
      queryOne<{ status: string; attempts: number; nextAttemptAt: number; leaseOwner: string | null }>(
        env.store,
        'SELECT e.status, e.attempts, e.next_attempt_at AS "nextAttemptAt", e.lease_owner AS "leaseOwner" FROM workflow_events e JOIN workflows w ON w.id = e.workflow_id WHERE w.name = ? AND e.record_key = ?',
        'Poisoned',
        't_poison',
      )!
    let wait = 30_000
    for (let attempt = 1; attempt < MAX_DISPATCH_ATTEMPTS; attempt++) {
      dispatch.notify()
      await until(`attempt ${attempt} settled`, () => poisoned().attempts === attempt, 20_000, 20)
      const settled = poisoned()
      expect(settled).toEqual({ status: 'pending', attempts: attempt, nextAttemptAt: env.clock.now() + wait, leaseOwner: null })
      env.clock.advance(wait)
      wait *= 2
    }
    dispatch.notify()
    await until('the last attempt settled', () => poisoned().status === 'failed', 20_000, 20)
    expect(poisoned().attempts).toBe(MAX_DISPATCH_ATTEMPTS)
    // Kept, not claimed again; the next events, of this workflow and another, start their runs.
    env.clock.advance(24 * 3600_000)
    await newTicket('t_after_poison')
    await dispatched()
    expect(poisoned().attempts).toBe(MAX_DISPATCH_ATTEMPTS)
    expect(runsOf('On create').filter((r) => r.recordId === 't_after_poison')).toHaveLength(1)
    expect(runsOf('Poisoned').map((r) => r.recordId)).toEqual(['t_after_poison'])
    const metrics = await (await app.handle(request('/metrics'))).text()
    expect(metrics).toContain('trellis_workflow_events_total{project="Acme",workflow="Poisoned",outcome="failed"} 1')
    expect((await call('DELETE', eventsPath('Poisoned'))).status).toBe(204)
  }, 60_000)

  test('runAs losing its rights: the event is skipped and counted', async () => {
    expect((await call('PUT', eventsPath('As bob'), { on: [{ event: 'recordCreated' }], runAs: 'bob@example.com' })).status).toBe(200)
    await writeNow(env.store, () => setUserDisabled(env.clock, userId(env.store, 'bob'), true))
    try {
      await newTicket('t_bob')
      await dispatched()
      expect(runsOf('As bob')).toHaveLength(0)
      expect(counters('As bob')).toEqual({ received: 1, started: 0, skipped: 1 })
    } finally {
      await writeNow(env.store, () => setUserDisabled(env.clock, userId(env.store, 'bob'), false))
    }
    await newTicket('t_bob_again')
    await dispatched()
    expect(runsOf('As bob').map((r) => r.userId)).toEqual([userId(env.store, 'bob')])
  })
})

describe('the console', () => {
  test("a run's page says what started it, for an event, a start from the console and one through the API; the trigger settings show the events", async () => {
    const cookie = await sessionCookie(env, userId(env.store, 'alice'))
    const page = async (path: string) => {
      const response = await app.handle(request(path, { headers: { cookie } }))
      expect(response.status).toBe(200)
      return await response.text()
    }
    const [eventRun] = runsOf('On create')
    expect(await page(`/runs/${eventRun!.id}`)).toContain('recordCreated: the creation of')
    const start = async (recordId: string, auth: Record<string, string>) => {
      const response = await app.handle(request(`${BASE}/workflow-runs`, { method: 'POST', headers: auth, json: { workflowName: 'On delete', teamName: 'Support', recordId } }))
      expect(response.status).toBe(202)
      return ((await response.json()) as { runId: string }).runId
    }
    await newTicket('t_by_hand')
    await newTicket('t_by_api')
    expect(await page(`/runs/${await start('t_by_hand', { cookie, origin: 'http://localhost' })}`)).toContain('the Run button in the console by alice@example.com')
    expect(await page(`/runs/${await start('t_by_api', bearer(token))}`)).toContain('the API (started by hand) by alice@example.com through token')
    expect((await call('PUT', eventsPath('On delete'), { on: [{ event: 'recordDeleted' }], runAs: 'alice@example.com' })).status).toBe(200)
    const settings = await page('/p/Acme/e/production/t/Support/w/On%20delete')
    expect(settings).toContain('id="events-form"')
    expect(settings).toContain('recordDeleted')
  })
})

test('/metrics counts each workflow’s events received, runs started and events skipped', async () => {
  const response = await app.handle(request('/metrics'))
  const text = await response.text()
  const { received, started, skipped } = counters('On create')
  expect(text).toContain(`trellis_workflow_events_total{project="Acme",workflow="On create",outcome="received"} ${received}`)
  expect(text).toContain(`trellis_workflow_events_total{project="Acme",workflow="On create",outcome="started"} ${started}`)
  expect(text).toContain(`trellis_workflow_events_total{project="Acme",workflow="On create",outcome="skipped"} ${skipped}`)
  expect(text).toContain('trellis_workflow_events_total{project="Acme",workflow="As bob",outcome="skipped"} 1')
})

describe('the loop bound', () => {
  test("A's update starts B, B's starts A … until the chain is 8 long; a workflow's own update never starts itself", async () => {
    for (const name of WORKFLOWS) await call('DELETE', eventsPath(name))
    // Two workflows that each append to `hops` on every update of a ticket.
    const document = acmeDocument()
    const acme = acmeProject(document)
    acme.collections!.push({ name: 'tickets', schema: { fields: [{ name: 'status', type: 'text' }, { name: 'priority', type: 'number' }, { name: 'hops', type: 'text' }] } })
    for (const name of WORKFLOWS) acme.workflows!.push(ordersWorkflow(name, [{ type: 'load' }], { collection: 'tickets', webhook: { enabled: false } }))
    for (const name of ['Ping', 'Pong']) {
      acme.workflows!.push(ordersWorkflow(name, [{ type: 'load' }, { type: 'update', set: { hops: `{{record.hops}}${name[1]}` } }], { collection: 'tickets', webhook: { enabled: false } }))
    }
    await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    for (const name of ['Ping', 'Pong']) expect((await call('PUT', eventsPath(name), { on: [{ event: 'recordUpdated' }], runAs: 'alice@example.com' })).status).toBe(200)
    await newTicket('t_loop', { status: 'open', hops: '' })
    const executor = new Executor({ store: env.store, clock: env.clock, logger: silentLogger, concurrency: 2, leaseMs: 10_000, pollMs: 20, eventPollMs: 20 })
    executor.start()
    try {
      expect((await call('PATCH', `${recordsPath}/t_loop`, { data: { status: 'go' } })).status).toBe(200)
      await until(
        'the loop to stop',
        () => pendingEvents() === 0 && queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running', 'waiting')")!.n === 0,
        30_000,
        50,
      )
    } finally {
      await executor.stop()
    }
    const runs = [...runsOf('Ping').map((r) => ({ ...r, workflow: 'Ping' })), ...runsOf('Pong').map((r) => ({ ...r, workflow: 'Pong' }))]
    expect(runs.every((r) => r.status === 'succeeded')).toBe(true)
    const chains = runs.map((r) => ({ workflow: r.workflow, chain: (JSON.parse(r.cause!) as { chain: { workflow: string }[] }).chain }))
    // The bound: no chain reaches 8; the longest ones are 7 long, and their next events were skipped.
    expect(Math.max(...chains.map((c) => c.chain.length))).toBe(7)
    expect(counters('Ping').skipped + counters('Pong').skipped).toBeGreaterThan(0)
    // Never the same workflow straight after itself.
    for (const { workflow, chain } of chains) if (chain.length > 0) expect(chain.at(-1)!.workflow).not.toBe(workflow)
    for (const { chain } of chains) for (let i = 1; i < chain.length; i++) expect(chain[i]!.workflow).not.toBe(chain[i - 1]!.workflow)
  }, 60_000)
})

postgresOnlyTest(POSTGRES_ONLY.severalInstances, 'two dispatchers on one database start each event’s run once', async () => {
  for (const name of ['Ping', 'Pong']) await call('DELETE', eventsPath(name))
  expect((await call('PUT', eventsPath('On create'), { on: [{ event: 'recordCreated' }], runAs: 'alice@example.com' })).status).toBe(200)
  await dispatch.stop()
  const other = anotherStore(env)
  const dispatchers = [env.store, other].map((store) => new EventDispatch({ store, clock: env.clock, logger: silentLogger, pollMs: 5, onRunQueued: () => {} }))
  const startedBefore = counters('On create').started
  try {
    for (const d of dispatchers) d.start()
    const COUNT = 40
    await Promise.all(Array.from({ length: COUNT }, (_, i) => newTicket(`t_twice_${i}`)))
    await until('every event dispatched', () => pendingEvents() === 0, 30_000, 20)
    const runs = runsOf('On create').filter((r) => r.recordId.startsWith('t_twice_'))
    expect(runs).toHaveLength(COUNT)
    expect(new Set(runs.map((r) => r.recordId)).size).toBe(COUNT)
    expect(counters('On create').started - startedBefore).toBe(COUNT)
  } finally {
    await Promise.all(dispatchers.map((d) => d.stop()))
    await other.close()
  }
}, 60_000)

/**
 * No statement is prepared on a per-request or per-step path once it has served its first request.
 * The test connection's `prepare` is wrapped; every kind of hot request (the public API's lists, reads and writes,
 * the webhook, runs, token and session authentication, the console's pages) is sent twice, then three more times
 * while counting, and the executor runs workflows of every data step (load, condition, update, note) while counting.
 * A Drizzle query built per call (`db.select()…all()`), a nested transaction or a per-call `prepare` shows up here
 * with the SQL and the source line that prepared it.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { runOp } from '../src/db/sqlite/op-runner.ts'
import { insertRecord } from '../src/db/records.ts'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { bearer, request, runNow, SQLITE_ONLY, sqliteOnlyDescribe, sqliteTestEnv, type SqliteTestEnv, testApp, until } from './helpers.ts'
import { acmeWithGlobex, applyAcme, ordersWorkflow, reportHook, tokenFor, userId } from './support/acme.ts'
import { HIGH_RATES } from './support/logs.ts'

let env: SqliteTestEnv
let app: ReturnType<typeof testApp>
let hook: string
let alice: string
let cookie: string
let counting = false
const prepared: string[] = []
let seq = 0

const NOTES = '/v1/project/Acme/environment/production/notes'
const RUNS = '/v1/project/Acme/environment/production/workflow-runs'

beforeAll(async () => {
  env = sqliteTestEnv(HIGH_RATES)
  const document = acmeWithGlobex()
  const steps = [
    { type: 'load' },
    { type: 'condition', if: { field: 'status', equals: 'paid' }, else: 'end' },
    { type: 'update', set: { status: 'seen' } },
    { type: 'note', title: 'Seen', content: '<p>seen by {{workflow.name}}</p>' },
  ]
  document.projects[0]!.workflows!.push(ordersWorkflow('Hot', steps, { webhook: { enabled: true, ratePerMinute: 100_000 } }))
  hook = reportHook(await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document), 'Hot')
  alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
  cookie = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, 'alice'), false))).id}`
  const scope = env.store.sqlite
    .prepare("SELECT e.id AS environmentId, c.id AS collectionId FROM environments e JOIN collections c ON c.project_id = e.project_id WHERE e.name = 'production' AND c.name = 'orders' AND e.project_id = (SELECT id FROM projects WHERE name = 'Acme')")
    .get() as { environmentId: number; collectionId: number }
  for (let i = 0; i < 8; i++) runOp(env.store.db, insertRecord({ ...scope, recordKey: `hot-${i}`, data: '{"status":"paid"}', now: env.clock.now() }))
  app = testApp(env)
  const connection = env.store.sqlite
  const prepare = connection.prepare.bind(connection)
  connection.prepare = ((text: string, ...rest: never[]) => {
    if (counting) {
      const where = (new Error().stack ?? '').split('\n').find((line) => line.includes('/src/') && !line.includes('/src/db/sqlite/prepared.ts'))?.trim() ?? '?'
      prepared.push(`${text.replace(/\s+/g, ' ').slice(0, 100)} — ${where}`)
    }
    return prepare(text, ...rest)
  }) as typeof connection.prepare
})
afterAll(() => env.cleanup())

/** Sends `make()` twice (its statements' first use), then three times counting what gets prepared. */
async function preparedWhileServing(make: () => Request): Promise<string[]> {
  for (let i = 0; i < 2; i++) {
    const response = await app.handle(make())
    expect(response.status).toBeLessThan(300)
    await response.arrayBuffer()
  }
  prepared.length = 0
  counting = true
  try {
    for (let i = 0; i < 3; i++) await (await app.handle(make())).arrayBuffer()
  } finally {
    counting = false
  }
  return [...prepared]
}

const api = (path: string, init: RequestInit & { json?: unknown } = {}) => () => request(path, { ...init, headers: bearer(alice) })
const page = (path: string) => () => request(path, { headers: { cookie } })

const HOT: [string, () => Request][] = [
  ['GET notes', api(NOTES)],
  ['GET notes, filtered', api(`${NOTES}?recordId=ord_1002&teamName=Support&createdAt.lt=2030-01-01T00:00:00.000Z`)],
  ['GET one note', api(`${NOTES}/1`)],
  ['POST a note', () => api(NOTES, { method: 'POST', json: { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Hot', content: '<p>x</p>' } })()],
  ['POST a message', api(`${NOTES}/1/messages`, { method: 'POST', json: { content: '<p>more</p>' } })],
  ['PATCH a note', () => api(`${NOTES}/1`, { method: 'PATCH', json: { title: `Renamed ${++seq}` } })()],
  ['GET activity logs', api('/v1/project/Acme/environment/production/activity-logs')],
  ['GET activity logs, filtered', api('/v1/project/Acme/environment/production/activity-logs?recordId=ord_1001&extensions=true')],
  ['GET admin logs', api('/v1/project/Acme/admin-logs')],
  ['POST the webhook', () => request(hook, { method: 'POST', headers: bearer(alice), json: { record_id: `webhook-${++seq}` } })],
  ['POST a manual run', () => api(RUNS, { method: 'POST', json: { teamName: 'Support', workflowName: 'Hot', recordId: `manual-${++seq}` } })()],
  ['GET runs', api(RUNS)],
  ['GET runs, filtered', api(`${RUNS}?workflowName=Hot&status=queued`)],
  ['GET the account (session)', page('/v1/account')],
  ['console: home', page('/')],
  ['console: project', page('/p/Acme')],
  ['console: team', page('/p/Acme/e/production/t/Support')],
  ['console: records', page('/p/Acme/e/production/t/Support/c/orders')],
  ['console: record', page('/p/Acme/e/production/t/Support/c/orders/r/ord_1001')],
  ['console: activity', page('/p/Acme/e/production/activity')],
  ['console: notes', page('/p/Acme/e/production/notes')],
  ['console: admin log', page('/p/Acme/admin-log')],
  ['console: runs', page('/p/Acme/e/production/runs')],
]

test('no query in src/db binds a constant LIMIT (constantLimit writes it into the SQL: a bound LIMIT costs ~5 µs a run)', async () => {
  const glob = new Bun.Glob('src/db/**/*.ts')
  const bound: string[] = []
  for await (const file of glob.scan('.')) {
    const text = await Bun.file(file).text()
    text.split('\n').forEach((line, i) => /\.limit\(\s*\d/.test(line) && bound.push(`${file}:${i + 1}: ${line.trim()}`))
  }
  expect(bound).toEqual([])
})

sqliteOnlyDescribe(SQLITE_ONLY.prepares, 'no statement is prepared on a hot path after its first request', () => {
  test.each(HOT)('%s', async (_, make) => {
    expect(await preparedWhileServing(make)).toEqual([])
  })

  test('GET one run (API and console)', async () => {
    const runId = ((await (await app.handle(request(hook, { method: 'POST', headers: bearer(alice), json: { record_id: `one-${++seq}` } }))).json()) as { runId: string }).runId
    expect(await preparedWhileServing(api(`/v1/workflow-runs/${runId}`))).toEqual([])
    expect(await preparedWhileServing(page(`/runs/${runId}`))).toEqual([])
  })

  test("the executor's claim, steps and finish", async () => {
    // The test's own questions, prepared before counting.
    const active = env.store.sqlite.prepare("SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running', 'waiting')")
    const done = env.store.sqlite.prepare("SELECT count(*) AS n FROM runs r JOIN workflows w ON w.id = r.workflow_id WHERE w.name = 'Hot' AND r.status = 'succeeded' AND r.record_id LIKE 'hot-%'")
    const finished = () => active.get() as { n: number }
    const succeeded = () => (done.get() as { n: number }).n
    const executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 1, leaseMs: 5_000, pollMs: 20 })
    const trigger = async (record: string) => expect((await app.handle(request(hook, { method: 'POST', headers: bearer(alice), json: { record_id: record } }))).status).toBe(202)
    executor.start()
    try {
      // Everything queued so far (runs on records that do not exist fail at `load`), then one run through every step.
      await trigger('hot-0')
      await until('the queue drained', () => finished().n === 0)
      expect(succeeded()).toBe(1)
      // The claiming loop's claim that finds nothing, and its idle read, come after the last run ended (its slot
      // handed over to none): a few polls later they have run.
      await Bun.sleep(100)
      prepared.length = 0
      counting = true
      for (let i = 1; i < 8; i++) await trigger(`hot-${i}`)
      await until('the runs finished', () => finished().n === 0)
      counting = false
      expect(succeeded()).toBe(8)
      expect(prepared).toEqual([])
    } finally {
      counting = false
      await executor.stop()
    }
  })
})

/**
 * Retrying a failed or cancelled run from the step it stopped at, through a real server (Bun.serve on
 * 127.0.0.1) with the executor running, on the test store (SQLite, or PostgreSQL with TRELLIS_TEST_STORE=postgres).
 * The fixture: a workflow whose first step appends the run's id to the record (`trail`) and whose second step calls a
 * local receiver that fails the first call for each record and answers every later one — the retry does not write
 * twice and succeeds. Then every refusal (succeeded, active, retried already — also by 20 retries at once — the record
 * busy, someone else's run, a token without the scope, a withdrawn workflow, a team out of reach), a retry of a retry,
 * and the bulk retry of a workflow's failed runs (project admins): filter, bound, bad input, rights and rate.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { callWithToken, execute, queryOne, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, tokenFor, userId, UUID } from './support/acme.ts'
import { assertValidWithExtensions } from './support/compat-schema.ts'

// ── The receiver of the `http` steps ───────────────────────────────────────

/** Calls the receiver got, by record id (the path's last segment), with the run each came from. */
const calls = new Map<string, string[]>()
/** Records whose calls wait until released (a run kept running at its `http` step). */
const held = new Map<string, () => void>()
const holds = new Map<string, Promise<void>>()

function hold(record: string): void {
  holds.set(record, new Promise((resolve) => held.set(record, resolve)))
}
function release(record: string): void {
  held.get(record)?.()
  holds.delete(record)
}

const receiver = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(request) {
    const record = decodeURIComponent(new URL(request.url).pathname.split('/').pop()!)
    const seen = calls.get(record) ?? []
    seen.push(request.headers.get('x-trellis-run-id') ?? '')
    calls.set(record, seen)
    await holds.get(record)
    // The first call for a record fails; `fail-…` records fail every time.
    if (seen.length === 1 || record.startsWith('fail-')) return new Response('not now', { status: 503 })
    return Response.json({ ok: true })
  },
})
afterAll(() => receiver.stop(true))
const receiverUrl = `http://127.0.0.1:${receiver.port}`

// ── The app, its executor, a real server ───────────────────────────────────

const NO_API_LIMIT = { TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' }
const PRODUCTION = '/v1/project/Acme/environment/production'
const FINISHED = ['succeeded', 'failed', 'cancelled']

const stamp = { type: 'update', name: 'stamp', set: { trail: '{{record.trail}} {{run.id}}' } }
const notify = { type: 'http', name: 'notify', method: 'POST', url: `${receiverUrl}/notify/{{record.id}}`, retries: 0 }

let env: TestEnv
let executor: Executor
let server: ReturnType<typeof Bun.serve>
let base: string
const tokens = {} as Record<'bob' | 'bobNotes' | 'alice' | 'aliceNotes' | 'carol' | 'dave', string>

beforeAll(async () => {
  env = testEnv({ TRELLIS_HTTP_ALLOW: '127.0.0.1', ...NO_API_LIMIT })
  const document = acmeDocument()
  const acme = acmeProject(document)
  for (const id of ['rt-1', 'rt-2', 'rt-3', 'rt-4', 'rt-5', 'rt-6', 'rt-7', 'fail-rt']) acme.records!.push({ environment: 'production', collection: 'orders', id, data: { trail: '' } })
  acme.workflows!.push(
    ordersWorkflow('Stamp and notify', [stamp, notify]),
    ordersWorkflow('Stamp and hold', [stamp, { type: 'wait', name: 'hold', seconds: 30 }, { type: 'update', name: 'done', set: { done: 'yes' } }]),
    ordersWorkflow('Notify', [notify]),
  )
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 20, outbound: new OutboundClient({ allow: env.config.httpAllow }) })
  const app = testApp(env, { clock: systemClock, executor })
  executor.start()
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (request) => app.handle(request) })
  base = `http://127.0.0.1:${server.port}`
  tokens.bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
  tokens.bobNotes = (await tokenFor(env.store, systemClock, 'bob', ['notes:read'])).value
  tokens.alice = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
  tokens.aliceNotes = (await tokenFor(env.store, systemClock, 'alice', ['notes:read'])).value
  tokens.carol = (await tokenFor(env.store, systemClock, 'carol', ['all'])).value
  tokens.dave = (await tokenFor(env.store, systemClock, 'dave', ['workflows:trigger'])).value
}, 60_000) // on PostgreSQL the first block starts the shared cluster: seconds on a busy machine

afterAll(async () => {
  await executor.stop(2_000)
  await server.stop(true)
  env.cleanup()
})

interface Sent {
  status: number
  headers: Headers
  body: Record<string, unknown>
}

interface RunBody {
  id: string
  status: string
  trigger: string
  workflow: { version: number }
  user: { username: string }
  createdAt: string
  retryOf: string | null
  retriedBy: string | null
  error?: { code: string; step?: string }
  steps: { index: number; name: string; status: string; startedAt: string; output?: unknown; carriedFrom?: string }[]
}

const call = (path: string, token: string, init: { method?: string; json?: unknown } = {}): Promise<Sent> => callWithToken(base, path, token, init)

async function startRun(workflowName: string, recordId: string, token = tokens.bob): Promise<string> {
  const sent = await call(`${PRODUCTION}/workflow-runs`, token, { method: 'POST', json: { workflowName, teamName: 'Support', recordId } })
  expect(sent.status).toBe(202)
  return sent.body.runId as string
}

const retry = (runId: string, token = tokens.bob) => call(`/v1/workflow-runs/${runId}/retry`, token, { method: 'POST' })

/** A retry answered 202: its body is exactly `{runId, retryOf}`; the new run's id. */
async function retried(runId: string, token = tokens.bob): Promise<string> {
  const sent = await retry(runId, token)
  expect({ status: sent.status, body: sent.body }).toMatchObject({ status: 202, body: { retryOf: runId } })
  expect(Object.keys(sent.body).sort()).toEqual(['retryOf', 'runId'])
  expect(sent.body.runId).toMatch(UUID)
  return sent.body.runId as string
}

async function getRun(id: string): Promise<RunBody> {
  const sent = await call(`/v1/workflow-runs/${id}`, tokens.alice)
  expect(sent.status).toBe(200)
  return sent.body as unknown as RunBody
}

const inStatus = (id: string, wanted: string[]) =>
  until(`run ${id} to be ${wanted.join(' or ')}`, async () => {
    const run = await getRun(id)
    return wanted.includes(run.status) ? run : null
  })
const finished = (id: string) => inStatus(id, FINISHED)

/** The run ids the `stamp` step appended to the record, in order. */
function trail(recordId: string): string[] {
  const row = queryOne<{ data: string }>(
    env.store,
    "SELECT r.data FROM records r JOIN environments e ON e.id = r.environment_id WHERE r.record_key = ? AND e.name = 'production'",
    recordId,
  )
  return String((JSON.parse(row!.data) as { trail?: string }).trail ?? '').split(' ').filter(Boolean)
}

/** A run of `workflow` on `record` that failed (the receiver's first call for the record fails). */
async function failedRun(workflow: string, record: string, token = tokens.bob): Promise<string> {
  const id = await startRun(workflow, record, token)
  expect((await finished(id)).status).toBe('failed')
  return id
}

const expectError = (sent: Sent, status: number, code: string) => expect({ status: sent.status, code: sent.body.code }).toEqual({ status, code })

describe('POST /v1/workflow-runs/{runId}/retry', () => {
  test('the fixture: the first step wrote, the second failed; the retry runs the same version from the failed step, does not write twice, and succeeds', async () => {
    const old = await failedRun('Stamp and notify', 'rt-1')
    const failed = await getRun(old)
    expect(failed.error).toMatchObject({ code: 'http_failed', step: 'notify' })
    expect(failed.steps.map((s) => [s.index, s.name, s.status])).toEqual([[0, 'stamp', 'succeeded'], [1, 'notify', 'failed']])
    expect(failed.retryOf).toBeNull()
    expect(failed.retriedBy).toBeNull()
    expect(trail('rt-1')).toEqual([old])

    // A newer version is published meanwhile: the retry still runs the version its run used.
    const published = await call(`${PRODUCTION}/team/Support/workflows/Stamp%20and%20notify`, tokens.alice, {
      method: 'PUT',
      json: { collection: 'orders', steps: [stamp, { ...notify, timeoutSeconds: 9 }] },
    })
    expect(published.body).toMatchObject({ version: 2 })

    const again = await retried(old)
    const done = await finished(again)
    expect(done).toMatchObject({ status: 'succeeded', trigger: 'manual', workflow: { version: 1 }, user: { username: 'bob' }, retryOf: old, retriedBy: null })
    expect(done.steps.map((s) => [s.index, s.name, s.status, s.carriedFrom ?? null])).toEqual([
      [0, 'stamp', 'succeeded', old],
      [1, 'notify', 'succeeded', null],
    ])
    // The carried step is the old run's record of it, as it was; it wrote once.
    expect(done.steps[0]).toEqual({ ...failed.steps[0]!, carriedFrom: old })
    expect(trail('rt-1')).toEqual([old])
    expect(calls.get('rt-1')).toEqual([old, again])
    expect((await getRun(old)).retriedBy).toBe(again)

    // The activity log records the retry: an extension entry (listed with extensions=true) by the retrying user.
    const activity = async (extensions: boolean) => {
      const page = await call(`${PRODUCTION}/activity-logs?recordId=rt-1&limit=100&extensions=${extensions}`, tokens.alice)
      expect(page.status).toBe(200)
      assertValidWithExtensions('listActivityLogs', page.body)
      return (page.body.data as { action: string; label?: string; user: { username: string }; workflow?: { runId: string } }[]).reverse()
    }
    const entries = await activity(true)
    expect(entries.filter((e) => e.workflow?.runId === again).map((e) => [e.action, e.user.username])).toEqual([['retryWorkflow', 'bob'], ['completeWorkflow', 'bob']])
    expect(entries.find((e) => e.action === 'retryWorkflow')!.label).toStartWith(`retry of run ${old} · token`)
    expect(entries.filter((e) => e.action === 'update')).toHaveLength(1)
    expect((await activity(false)).map((e) => e.action)).not.toContain('retryWorkflow')
  })

  test('409: a succeeded run (run_not_retryable), an active one, a run retried already (already_retried naming its retry)', async () => {
    const old = await failedRun('Stamp and notify', 'rt-2')
    const again = await retried(old)
    expect((await finished(again)).status).toBe('succeeded')
    const succeeded = await retry(again)
    expectError(succeeded, 409, 'run_not_retryable')
    expect(succeeded.body).toMatchObject({ status: 'succeeded' })
    const twice = await retry(old)
    expectError(twice, 409, 'already_retried')
    expect(twice.body.runId).toBe(again)

    const holding = await startRun('Stamp and hold', 'rt-3')
    await inStatus(holding, ['waiting'])
    const active = await retry(holding)
    expectError(active, 409, 'run_not_retryable')
    expect(active.body).toMatchObject({ status: 'waiting' })
    expect(trail('rt-3')).toEqual([holding])
  })

  test('a cancelled run resumes at its first step not done: the steps before are carried, not run again', async () => {
    const holding = await startRun('Stamp and hold', 'rt-4')
    await inStatus(holding, ['waiting'])
    expect((await call(`/v1/workflow-runs/${holding}/cancel`, tokens.bob, { method: 'POST' })).status).toBe(200)
    const again = await retried(holding)
    const done = await finished(again)
    expect(done.status).toBe('succeeded')
    expect(done.steps.map((s) => [s.name, s.status, s.carriedFrom ?? null])).toEqual([
      ['stamp', 'succeeded', holding],
      ['hold', 'succeeded', holding],
      ['done', 'succeeded', null],
    ])
    expect(trail('rt-4')).toEqual([holding])
  })

  test('409 run_in_progress while the record has an active run of the workflow; retried once it ends', async () => {
    const old = await failedRun('Stamp and notify', 'rt-5')
    hold('rt-5')
    const busy = await startRun('Stamp and notify', 'rt-5')
    await until('the second run to call the receiver', () => calls.get('rt-5')?.length === 2)
    const refused = await retry(old)
    expectError(refused, 409, 'run_in_progress')
    expect(refused.body.runId).toBe(busy)
    expect((await getRun(old)).retriedBy).toBeNull()
    release('rt-5')
    expect((await finished(busy)).status).toBe('succeeded')
    const again = await retried(old)
    expect((await finished(again)).status).toBe('succeeded')
    expect(trail('rt-5')).toEqual([old, busy])
  })

  test('20 retries of one run at once: exactly one 202, 19 × 409 already_retried naming it', async () => {
    const old = await failedRun('Stamp and notify', 'rt-6')
    const answers = await Promise.all(Array.from({ length: 20 }, () => retry(old)))
    const accepted = answers.filter((a) => a.status === 202)
    expect(accepted).toHaveLength(1)
    const winner = accepted[0]!.body.runId as string
    const others = answers.filter((a) => a.status !== 202)
    expect(others.map((a) => [a.status, a.body.code, a.body.runId])).toEqual(Array.from({ length: 19 }, () => [409, 'already_retried', winner]))
    expect(Number(queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM runs WHERE retry_of = ?', old)!.n)).toBe(1)
    expect((await finished(winner)).status).toBe('succeeded')
    expect(trail('rt-6')).toEqual([old])
  })

  test('a retry of a retry is allowed (a failed run of its own): it carries what its run carried, and writes nothing twice', async () => {
    const first = await failedRun('Stamp and notify', 'fail-rt') // the receiver fails every call for this record
    const second = await retried(first)
    expect((await finished(second)).status).toBe('failed')
    const third = await retried(second)
    const done = await finished(third)
    expect(done).toMatchObject({ status: 'failed', retryOf: second, error: { code: 'http_failed', step: 'notify' } })
    expect(done.steps.map((s) => [s.name, s.status, s.carriedFrom ?? null])).toEqual([['stamp', 'succeeded', second], ['notify', 'failed', null]])
    expect(await getRun(second)).toMatchObject({ retryOf: first, retriedBy: third })
    expect(calls.get('fail-rt')).toEqual([first, second, third])
    expect(trail('fail-rt')).toEqual([first])
  })

  test('who may retry: the triggering user or a project admin (then acting as the admin); 404, 403 and 400 otherwise', async () => {
    const old = await failedRun('Stamp and notify', 'rt-7')
    expectError(await retry('0190a000-0000-7000-8000-000000000000'), 404, 'not_found')
    expectError(await retry('not-a-run'), 400, 'invalid_parameter')
    expectError(await retry(old, tokens.dave), 404, 'not_found') // not his run, not an admin
    expectError(await retry(old, tokens.bobNotes), 403, 'insufficient_scope')
    expectError(await retry(old, tokens.aliceNotes), 403, 'insufficient_scope')
    expect((await call(`/v1/workflow-runs/${old}/retry`, 'trl_nonsense', { method: 'POST' })).status).toBe(401)

    // The workflow withdrawn (no active version): its runs are not retried.
    const workflow = queryOne<{ id: number; v: number }>(env.store, "SELECT id, active_version_id AS v FROM workflows WHERE name = 'Stamp and notify'")!
    execute(env.store, 'UPDATE workflows SET active_version_id = NULL WHERE id = ?', workflow.id)
    expectError(await retry(old), 409, 'workflow_withdrawn')
    execute(env.store, 'UPDATE workflows SET active_version_id = ? WHERE id = ?', workflow.v, workflow.id)

    // bob out of the workflow's team: the retry would act as him, who can no longer reach it.
    const bob = userId(env.store, 'bob')
    const support = queryOne<{ id: number }>(env.store, "SELECT id FROM teams WHERE name = 'Support'")!.id
    const membership = queryOne<{ created_at: number }>(env.store, 'SELECT created_at FROM team_members WHERE team_id = ? AND user_id = ?', support, bob)!
    execute(env.store, 'DELETE FROM team_members WHERE team_id = ? AND user_id = ?', support, bob)
    expectError(await retry(old), 403, 'rendering_forbidden')
    execute(env.store, 'INSERT INTO team_members (team_id, user_id, created_at) VALUES (?, ?, ?)', support, bob, membership.created_at)

    const again = await retried(old, tokens.carol) // an admin, member of Billing only
    expect(await finished(again)).toMatchObject({ status: 'succeeded', user: { username: 'carol' }, retryOf: old })
    expect(trail('rt-7')).toEqual([old])
  })
})

describe('POST /v1/project/{p}/environment/{e}/workflow-runs/retry (project admins)', () => {
  const BULK = `${PRODUCTION}/workflow-runs/retry`
  const bulk = (json: unknown, token = tokens.alice) => call(BULK, token, { method: 'POST', json })
  const retriedRuns = (sent: Sent) => sent.body.retried as { runId: string; retryOf: string }[]
  const retriedOf = (sent: Sent) => retriedRuns(sent).map((r) => r.retryOf)

  test('retries the newest failed runs not yet retried, at most `limit` a call; `more` until none is left', async () => {
    const failed: string[] = []
    for (let i = 1; i <= 5; i++) failed.push(await failedRun('Notify', `bulk-${i}`))
    const range = { createdAfter: (await getRun(failed[0]!)).createdAt, createdBefore: (await getRun(failed[4]!)).createdAt } // [first, fifth)

    const first = await bulk({ workflowName: 'Notify', ...range, limit: 2 })
    expect(first.status).toBe(200)
    expect(first.body).toMatchObject({ skipped: [], more: true })
    expect(retriedOf(first)).toEqual(failed.slice(2, 4).reverse())
    const second = await bulk({ workflowName: 'Notify', teamName: 'Support', ...range })
    expect({ retried: retriedOf(second), skipped: second.body.skipped, more: second.body.more }).toEqual({ retried: failed.slice(0, 2).reverse(), skipped: [], more: false })
    for (const r of [...retriedRuns(first), ...retriedRuns(second)]) {
      const done = await finished(r.runId)
      expect(done).toMatchObject({ status: 'succeeded', retryOf: r.retryOf, user: { username: 'alice' } })
    }
    // Outside the range, then nothing left.
    const last = await bulk({ workflowName: 'Notify', createdAfter: range.createdBefore })
    expect(retriedOf(last)).toEqual(failed.slice(4))
    await finished(retriedRuns(last)[0]!.runId)
    expect((await bulk({ workflowName: 'Notify', createdAfter: range.createdAfter })).body).toEqual({ retried: [], skipped: [], more: false })
    // Another team's workflow of that name, or an unknown one: nothing matches.
    expect((await bulk({ workflowName: 'Notify', teamName: 'Billing' })).body).toEqual({ retried: [], skipped: [], more: false })
    expect((await bulk({ workflowName: 'No such workflow' })).body).toEqual({ retried: [], skipped: [], more: false })
  })

  test('two failed runs on one record: the newest is retried, the other skipped (run_in_progress) while its retry is active', async () => {
    const older = await failedRun('Notify', 'fail-dup')
    const newer = await failedRun('Notify', 'fail-dup')
    const sent = await bulk({ workflowName: 'Notify', createdAfter: (await getRun(older)).createdAt })
    expect(sent.body).toMatchObject({ skipped: [{ runId: older, code: 'run_in_progress' }], more: false })
    expect(retriedOf(sent)).toEqual([newer])
    await finished(retriedRuns(sent)[0]!.runId)
  })

  test('bad input is a 400 naming the field; non-admins 403, unknown places 404, a token without workflows:trigger 403', async () => {
    const cases: [unknown, string][] = [
      [{}, 'workflowName'],
      [{ workflowName: '' }, 'workflowName'],
      [{ workflowName: 'Notify', limit: 0 }, 'limit'],
      [{ workflowName: 'Notify', limit: 101 }, 'limit'],
      [{ workflowName: 'Notify', limit: 'ten' }, 'limit'],
      [{ workflowName: 'Notify', createdAfter: 'yesterday' }, 'createdAfter'],
      [{ workflowName: 'Notify', createdBefore: '2026-02-30T00:00:00Z' }, 'createdBefore'],
      [{ workflowName: 'Notify', teamName: 7 }, 'teamName'],
    ]
    for (const [body, field] of cases) {
      const sent = await bulk(body)
      expect({ body, status: sent.status, named: String(sent.body.message).includes(field) }).toEqual({ body, status: 400, named: true })
    }
    const notJson = await fetch(`${base}${BULK}`, { method: 'POST', headers: { authorization: `Bearer ${tokens.alice}`, 'content-type': 'application/json' }, body: '{' })
    expect(notJson.status).toBe(400)

    expectError(await bulk({ workflowName: 'Notify' }, tokens.bob), 403, 'insufficient_role')
    expectError(await bulk({ workflowName: 'Notify' }, tokens.aliceNotes), 403, 'insufficient_scope')
    expectError(await call(`/v1/project/Acme/environment/nowhere/workflow-runs/retry`, tokens.alice, { method: 'POST', json: { workflowName: 'Notify' } }), 404, 'not_found')
    expectError(await call(`/v1/project/Nowhere/environment/production/workflow-runs/retry`, tokens.alice, { method: 'POST', json: { workflowName: 'Notify' } }), 403, 'wrong_project')
  })
})

describe('the bulk retry is rate-limited per project', () => {
  let rateEnv: TestEnv
  let app: ReturnType<typeof testApp>
  let admin = ''
  beforeAll(async () => {
    rateEnv = testEnv(NO_API_LIMIT)
    await applyAcme({ store: rateEnv.store, clock: rateEnv.clock, secret: rateEnv.secret, baseUrl: rateEnv.config.baseUrl }, acmeDocument())
    app = testApp(rateEnv)
    admin = (await tokenFor(rateEnv.store, rateEnv.clock, 'alice', ['all'])).value
  })
  afterAll(() => rateEnv.cleanup())

  test('10 calls a minute, whoever makes them; the 11th is 429 with Retry-After; a token\'s calls also count against its API budget', async () => {
    const other = (await tokenFor(rateEnv.store, rateEnv.clock, 'carol', ['all'])).value
    const send = (token: string) =>
      app.handle(new Request(`http://localhost${PRODUCTION}/workflow-runs/retry`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ workflowName: 'Refund order' }) }))
    for (let i = 0; i < 10; i++) {
      const response = await send(i % 2 === 0 ? admin : other)
      expect(response.status).toBe(200)
      expect(response.headers.get('x-ratelimit-limit')).toBe('1000000')
    }
    const refused = await send(admin)
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(((await refused.json()) as { code: string }).code).toBe('rate_limited')
    rateEnv.clock.advance(60_000)
    expect((await send(other)).status).toBe(200)
  })
})

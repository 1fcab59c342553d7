/**
 * `Idempotency-Key` on the run starts (the webhook and the manual start), Stripe's behaviour —
 * docs/workflows.md "Idempotency keys". Through the real app (`app.handle`) with the executor running, on the store the pass
 * gives (both passes: this file is in POSTGRES_PASS); then through real `trellis serve` processes: 200 concurrent
 * calls with one key start one run (on PostgreSQL spread over three instances), and the key outlives `kill -9`.
 *
 * Acme: bob is an editor in team Support, alice a project admin (and in Support), dave a user in Billing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { recordIdempotencyKey } from '../src/db/idempotency-keys.ts'
import { pruneIdempotencyKeys } from '../src/modules/runs/idempotency.ts'
import { bearer, execute, queryAll, queryOne, request, runNow, type ServeProcess, startServe, tempDir, TEST_STORE, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, hookPath, ordersWorkflow, seedDataDir, tokenFor, userId, UUID } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'
import { startInstances } from './support/instances.ts'
import { freshDatabase, psqlSync } from './support/postgres-cluster.ts'
import { expectError, type Sent, sendTo } from './support/scenarios.ts'

const RUNS = '/v1/project/Acme/environment/production/workflow-runs'
const FAST = { enabled: true, ratePerMinute: 100_000 }

/** The workflows of these tests, on Support's orders in production. */
const WORKFLOWS = [
  ordersWorkflow('Quick', [{ type: 'load' }], { webhook: FAST }), // succeeds on a record, fails (record_not_found) without one
  ordersWorkflow('Quick too', [{ type: 'load' }], { webhook: FAST }),
  ordersWorkflow('Hold', [{ type: 'wait', name: 'hold', seconds: 600 }], { webhook: FAST }), // active until cancelled
  ordersWorkflow('Once a minute', [{ type: 'load' }], { webhook: { enabled: true, ratePerMinute: 1 } }),
]

type App = ReturnType<typeof testApp>
type Answer = Sent<Record<string, unknown>>

const send = sendTo

/** A webhook call: `body` JSON-encoded unless `raw` is given; `key` as the Idempotency-Key when given. */
function hookCall(hook: string, token: string | null, options: { recordId?: string; raw?: string; key?: string } = {}): Request {
  const headers = new Headers({ 'content-type': 'application/json' })
  if (token !== null) headers.set('authorization', `Bearer ${token}`)
  if (options.key !== undefined) headers.set('idempotency-key', options.key)
  return new Request(`http://localhost${hook}`, { method: 'POST', headers, body: options.raw ?? JSON.stringify({ record_id: options.recordId ?? 'ord_1001' }) })
}

/** A manual start (`POST …/workflow-runs`) of `workflowName` on `recordId`. */
function manualCall(token: string, json: Record<string, unknown>, key?: string): Request {
  return request(RUNS, { method: 'POST', headers: { ...bearer(token), ...(key === undefined ? {} : { 'idempotency-key': key }) }, json })
}

/** A 202 with a run id; whether it was a replay (`Idempotent-Replayed: true`, else no such header). */
function accepted(sent: Answer, replayed: boolean): string {
  expect({ status: sent.status, body: sent.body }).toMatchObject({ status: 202 })
  expect(Object.keys(sent.body)).toEqual(['runId'])
  expect(sent.body.runId).toMatch(UUID)
  expect(sent.headers.get('idempotent-replayed')).toBe(replayed ? 'true' : null)
  return sent.body.runId as string
}

let keyCounter = 0
/** A key no other test uses. */
const newKey = (label = 'key') => `${label}-${++keyCounter}-${crypto.randomUUID()}`

describe('through the app, the executor running', () => {
  let env: TestEnv
  let app: App
  let executor: Executor
  const hooks: Record<string, string> = {}
  const tokens = {} as Record<'bob' | 'bob2' | 'alice' | 'dave' | 'bobNotes', string>

  const runStatus = (id: string) => queryOne<{ status: string }>(env.store, 'SELECT status FROM runs WHERE id = ?', id)?.status
  const runCount = () => Number(queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM runs')!.n)
  const keyRows = (key: string) => queryAll<{ run_id: string; user_id: number; workflow_id: number }>(env.store, 'SELECT run_id, user_id, workflow_id FROM idempotency_keys WHERE key = ? ORDER BY workflow_id, user_id', key)
  const finished = (id: string) =>
    until(`run ${id} to finish`, () => {
      const status = runStatus(id)
      return status === 'succeeded' || status === 'failed' || status === 'cancelled' ? status : null
    }, 10_000, 10)

  beforeAll(async () => {
    env = testEnv(HIGH_API_BUDGETS)
    const document = acmeDocument()
    acmeProject(document).workflows!.push(...WORKFLOWS)
    const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    for (const workflow of report.workflows) if (workflow.webhook.url) hooks[workflow.name] = hookPath(workflow.webhook.url)
    executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20 })
    app = testApp(env, { clock: systemClock, executor })
    executor.start()
    tokens.bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    tokens.bob2 = (await tokenFor(env.store, systemClock, 'bob', ['all'])).value
    tokens.alice = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
    tokens.dave = (await tokenFor(env.store, systemClock, 'dave', ['workflows:trigger'])).value
    tokens.bobNotes = (await tokenFor(env.store, systemClock, 'bob', ['notes:read'])).value
  }, 60_000) // on PostgreSQL the first block starts the shared cluster

  afterAll(async () => {
    await executor.stop(2_000)
    env.cleanup()
  })

  test('a repeat with the same key and body starts nothing and answers the first 202 with Idempotent-Replayed: true', async () => {
    const key = newKey()
    const runs = runCount()
    const first = accepted(await send(app, hookCall(hooks.Hold!, tokens.bob, { recordId: 'ord_1001', key })), false)
    // While the run is active, the repeat is a replay, not the record's 409.
    for (let i = 0; i < 3; i++) expect(accepted(await send(app, hookCall(hooks.Hold!, tokens.bob, { recordId: 'ord_1001', key })), true)).toBe(first)
    // Another token of the same user replays too: keys belong to the user.
    expect(accepted(await send(app, hookCall(hooks.Hold!, tokens.bob2, { recordId: 'ord_1001', key })), true)).toBe(first)
    expect(runCount()).toBe(runs + 1)
    expect(keyRows(key)).toEqual([{ run_id: first, user_id: userId(env.store, 'bob'), workflow_id: expect.any(Number) as unknown as number }])
    // A replay writes no activity entry: the one `triggerWorkflow` is the first call's.
    expect(queryAll(env.store, "SELECT action FROM activity_logs WHERE run_id = ? AND action = 'triggerWorkflow'", first)).toHaveLength(1)
    // Without the key the record's active run is a 409, as always.
    expectError(await send(app, hookCall(hooks.Hold!, tokens.bob, { recordId: 'ord_1001' })), 409, 'run_in_progress')
    // Cancelled: the repeat still answers that run.
    expect((await send(app, request(`/v1/workflow-runs/${first}/cancel`, { method: 'POST', headers: bearer(tokens.bob) }))).status).toBe(200)
    expect(runStatus(first)).toBe('cancelled')
    expect(accepted(await send(app, hookCall(hooks.Hold!, tokens.bob, { recordId: 'ord_1001', key })), true)).toBe(first)
    expect(runCount()).toBe(runs + 1)
  })

  test('replay after the run succeeded, and after it failed', async () => {
    const succeededKey = newKey('ok')
    const succeeded = accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'ord_1002', key: succeededKey })), false)
    expect(await finished(succeeded)).toBe('succeeded')
    expect(accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'ord_1002', key: succeededKey })), true)).toBe(succeeded)

    const failedKey = newKey('failed')
    const failed = accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'no_such_order', key: failedKey })), false)
    expect(await finished(failed)).toBe('failed')
    const runs = runCount()
    expect(accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'no_such_order', key: failedKey })), true)).toBe(failed)
    // The same body without the key starts a new run: only the key makes a repeat a replay.
    const fresh = accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'no_such_order' })), false)
    expect(fresh).not.toBe(failed)
    expect(runCount()).toBe(runs + 1)
  })

  test('the same key with another body is 422 idempotency_key_reused, and writes nothing', async () => {
    const key = newKey()
    const first = accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'ord_1003', key })), false)
    const runs = runCount()
    // Another record; the same record with other (ignored) fields; the same JSON spaced otherwise: the raw bytes differ.
    for (const raw of ['{"record_id":"ord_1002"}', '{"record_id":"ord_1003","note":"x"}', '{ "record_id": "ord_1003" }']) {
      const sent = expectError(await send(app, hookCall(hooks.Quick!, tokens.bob, { raw, key })), 422, 'idempotency_key_reused')
      expect(sent.message).toContain('Idempotency-Key')
    }
    // Also when the other body is not valid (the key is checked before the body).
    expectError(await send(app, hookCall(hooks.Quick!, tokens.bob, { raw: 'not json', key })), 422, 'idempotency_key_reused')
    expect(runCount()).toBe(runs)
    expect(keyRows(key).map((row) => row.run_id)).toEqual([first])
    // The byte-identical body is still a replay.
    expect(accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { raw: JSON.stringify({ record_id: 'ord_1003' }), key })), true)).toBe(first)
  })

  test('keys of two users, or of two workflows, never meet', async () => {
    const key = newKey('shared')
    const bobs = accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'ord_1001', key })), false)
    expect(await finished(bobs)).toBe('succeeded')
    // alice, the same key and body on the same workflow: a run of her own.
    const alices = accepted(await send(app, hookCall(hooks.Quick!, tokens.alice, { recordId: 'ord_1001', key })), false)
    // bob, the same key and body on another workflow: a run of its own.
    const other = accepted(await send(app, hookCall(hooks['Quick too']!, tokens.bob, { recordId: 'ord_1001', key })), false)
    expect(new Set([bobs, alices, other]).size).toBe(3)
    // Each replays its own (bob's although alice's run may hold the record now).
    expect(accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'ord_1001', key })), true)).toBe(bobs)
    expect(accepted(await send(app, hookCall(hooks.Quick!, tokens.alice, { recordId: 'ord_1001', key })), true)).toBe(alices)
    expect(accepted(await send(app, hookCall(hooks['Quick too']!, tokens.bob, { recordId: 'ord_1001', key })), true)).toBe(other)
    expect(keyRows(key).map((row) => row.run_id).sort()).toEqual([bobs, alices, other].sort())
    // Another user's key is no reason for a 422 either: dave's token may not run Support's workflows at all (403 first).
    expect((await send(app, hookCall(hooks.Quick!, tokens.dave, { recordId: 'ord_1002', key }))).status).toBe(403)
    await Promise.all([alices, other].map(finished))
  })

  test('an invalid key is 400 invalid_idempotency_key, after the URL, token and permission checks', async () => {
    const run = (key: string, token: string | null = tokens.bob, hook = hooks.Quick!) => send(app, hookCall(hook, token, { recordId: 'ord_1001', key }))
    for (const key of ['x'.repeat(256), 'tab\tinside', 'caf\u00e9', 'del\u007f']) {
      const body = expectError(await run(key), 400, 'invalid_idempotency_key')
      expect(body.message).toContain('Idempotency-Key')
    }
    // Empty (or only whitespace, which the header's parsing trims away).
    expectError(await send(app, hookCall(hooks.Quick!, tokens.bob, { key: '' })), 400, 'invalid_idempotency_key')
    expectError(await send(app, hookCall(hooks.Quick!, tokens.bob, { key: '   ' })), 400, 'invalid_idempotency_key')
    // The checks before it answer first: 401 (no token), 403 (scope; team), 404 (no such webhook).
    expect((await run('', null)).status).toBe(401)
    expectError(await run('', tokens.bobNotes), 403, 'insufficient_scope')
    expect((await run('', tokens.dave)).status).toBe(403)
    expectError(await send(app, hookCall(`${hooks.Quick!.slice(0, -3)}AAA`, tokens.bob, { key: '' })), 400, 'invalid_webhook_url')
    // 255 printable characters, spaces and punctuation included, are a key.
    const longest = ` ~!${'k'.repeat(250)}"# `.trim().padEnd(255, 'z')
    expect(longest).toHaveLength(255)
    const runId = accepted(await run(longest, tokens.bob, hooks['Quick too']), false)
    expect(accepted(await run(longest, tokens.bob, hooks['Quick too']), true)).toBe(runId)
  })

  test('a 4xx records nothing: a first call refused 409 leaves the key free for a later start', async () => {
    const blocker = accepted(await send(app, hookCall(hooks.Hold!, tokens.bob, { recordId: 'ord_1003' })), false)
    const key = newKey('after-409')
    const refused = expectError(await send(app, hookCall(hooks.Hold!, tokens.bob, { recordId: 'ord_1003', key })), 409, 'run_in_progress')
    expect(refused.runId).toBe(blocker)
    expect(keyRows(key)).toEqual([])
    // An invalid body is a 400 that records nothing either.
    expectError(await send(app, hookCall(hooks.Hold!, tokens.bob, { raw: '{}', key: `${key}-body` })), 400, 'missing_record_id')
    expect(keyRows(`${key}-body`)).toEqual([])
    expect((await send(app, request(`/v1/workflow-runs/${blocker}/cancel`, { method: 'POST', headers: bearer(tokens.bob) }))).status).toBe(200)
    const started = accepted(await send(app, hookCall(hooks.Hold!, tokens.bob, { recordId: 'ord_1003', key })), false)
    expect(started).not.toBe(blocker)
    expect(keyRows(key).map((row) => row.run_id)).toEqual([started])
    expect((await send(app, request(`/v1/workflow-runs/${started}/cancel`, { method: 'POST', headers: bearer(tokens.bob) }))).status).toBe(200)
  })

  test('a replay takes nothing from the webhook\'s rate and is never refused by it', async () => {
    const key = newKey('rate')
    // The rate is 1 a minute: the first call takes it.
    const first = accepted(await send(app, hookCall(hooks['Once a minute']!, tokens.bob, { recordId: 'ord_1001', key })), false)
    for (let i = 0; i < 3; i++) expect(accepted(await send(app, hookCall(hooks['Once a minute']!, tokens.bob, { recordId: 'ord_1001', key })), true)).toBe(first)
    // A new key is a new call: refused by the (empty) bucket, recording nothing.
    const other = newKey('rate-other')
    const refused = expectError(await send(app, hookCall(hooks['Once a minute']!, tokens.bob, { recordId: 'ord_1002', key: other })), 429, 'rate_limited')
    expect(refused.retry_after).toBeGreaterThan(0)
    expect(keyRows(other)).toEqual([])
    // The 422 is answered before the rate too.
    expectError(await send(app, hookCall(hooks['Once a minute']!, tokens.bob, { recordId: 'ord_1002', key })), 422, 'idempotency_key_reused')
  })

  test('the manual start: replay, its fields in any order, another field 422, the webhook\'s key not the manual one\'s', async () => {
    const key = newKey('manual')
    const body = { workflowName: 'Hold', teamName: 'Support', recordId: 'ord_1002' }
    const first = accepted(await send(app, manualCall(tokens.alice, body, key)), false)
    const reordered = { recordId: 'ord_1002', teamName: 'Support', workflowName: 'Hold' }
    expect(accepted(await send(app, manualCall(tokens.alice, reordered, key)), true)).toBe(first)
    expectError(await send(app, manualCall(tokens.alice, body)), 409, 'run_in_progress')
    expectError(await send(app, manualCall(tokens.alice, { ...body, recordId: 'ord_1001' }, key)), 422, 'idempotency_key_reused')
    // The same key on the webhook of the same workflow asks something else: 422 too.
    expectError(await send(app, hookCall(hooks.Hold!, tokens.alice, { recordId: 'ord_1002', key })), 422, 'idempotency_key_reused')
    // Another workflow named in the body is another scope: its own run.
    const quick = accepted(await send(app, manualCall(tokens.alice, { ...body, workflowName: 'Quick' }, key)), false)
    expect(quick).not.toBe(first)
    // Invalid: 400 (after the body's own validation and the caller's checks).
    expectError(await send(app, manualCall(tokens.alice, body, 'x'.repeat(256))), 400, 'invalid_idempotency_key')
    expectError(await send(app, manualCall(tokens.alice, { ...body, recordId: '' }, 'x'.repeat(256))), 400, 'validation_failed')
    expectError(await send(app, manualCall(tokens.bobNotes, body, 'x'.repeat(256))), 403, 'insufficient_scope')
    expect((await send(app, request(`/v1/workflow-runs/${first}/cancel`, { method: 'POST', headers: bearer(tokens.alice) }))).status).toBe(200)
    expect(accepted(await send(app, manualCall(tokens.alice, body, key)), true)).toBe(first)
  })

  test('a key goes with its run (the foreign key cascades)', async () => {
    const key = newKey('cascade')
    const runId = accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'ord_1003', key })), false)
    expect(await finished(runId)).toBe('succeeded')
    execute(env.store, 'DELETE FROM runs WHERE id = ?', runId)
    expect(keyRows(key)).toEqual([])
    const again = accepted(await send(app, hookCall(hooks.Quick!, tokens.bob, { recordId: 'ord_1003', key })), false)
    expect(again).not.toBe(runId)
  })
})

describe('the retention window (a manual clock)', () => {
  const HOUR = 3_600_000
  let env: TestEnv
  let app: App
  let hook: string
  let token: string

  beforeAll(async () => {
    env = testEnv({ ...HIGH_API_BUDGETS, TRELLIS_IDEMPOTENCY_KEY_HOURS: '2' })
    const document = acmeDocument()
    acmeProject(document).workflows!.push(...WORKFLOWS)
    const report = await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    hook = hookPath(report.workflows.find((w) => w.name === 'Hold')!.webhook.url)
    token = (await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])).value
    app = testApp(env) // no executor: every run stays queued, active
  }, 60_000)
  afterAll(() => env.cleanup())

  const keyCount = () => Number(queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM idempotency_keys')!.n)

  test('replayed until the window ends, to the millisecond; then the key is a new one, replaced by the next start', async () => {
    expect(env.config.idempotencyKeyWindowMs).toBe(2 * HOUR)
    const key = newKey('window')
    const first = accepted(await send(app, hookCall(hook, token, { recordId: 'ord_1001', key })), false)
    env.clock.advance(2 * HOUR - 1)
    expect(accepted(await send(app, hookCall(hook, token, { recordId: 'ord_1001', key })), true)).toBe(first)
    env.clock.advance(1)
    // Expired though not pruned: not replayed, so the record's active run answers 409, and the old key stays as it was.
    expectError(await send(app, hookCall(hook, token, { recordId: 'ord_1001', key })), 409, 'run_in_progress')
    // Nor is another body 422 any more: it starts a run, taking the key over.
    const second = accepted(await send(app, hookCall(hook, token, { recordId: 'ord_1002', key })), false)
    expect(queryAll(env.store, 'SELECT run_id FROM idempotency_keys WHERE key = ?', key)).toEqual([{ run_id: second }])
    expect(accepted(await send(app, hookCall(hook, token, { recordId: 'ord_1002', key })), true)).toBe(second)
    expectError(await send(app, hookCall(hook, token, { recordId: 'ord_1001', key })), 422, 'idempotency_key_reused')
  })

  test('pruning deletes the keys past the window in batches, and only those', async () => {
    const runId = accepted(await send(app, hookCall(hook, token, { recordId: 'ord_1003', key: newKey('prune') })), false)
    const scope = { workflowId: Number(queryOne<{ workflow_id: number }>(env.store, 'SELECT workflow_id FROM runs WHERE id = ?', runId)!.workflow_id), userId: userId(env.store, 'bob') }
    // 2,500 old keys, seven to a millisecond (so batches end amid keys of one time), then the live ones.
    const old = env.clock.now() - 3 * HOUR
    await runNow(env.store, (function* () {
      for (let i = 0; i < 2_500; i++) yield* recordIdempotencyKey(scope, `old-${i}`, { requestHash: 'h', runId }, old + Math.floor(i / 7), old - 2 * HOUR)
    })())
    const before = keyCount()
    const live = queryAll<{ key: string }>(env.store, 'SELECT key FROM idempotency_keys WHERE created_at > ? ORDER BY key', env.clock.now() - 2 * HOUR).map((row) => row.key)
    expect(before - live.length).toBeGreaterThanOrEqual(2_500)
    expect(await pruneIdempotencyKeys(env.store, env.clock, env.config.idempotencyKeyWindowMs)).toBe(before - live.length)
    expect(queryAll<{ key: string }>(env.store, 'SELECT key FROM idempotency_keys ORDER BY key').map((row) => row.key)).toEqual(live)
    expect(await pruneIdempotencyKeys(env.store, env.clock, env.config.idempotencyKeyWindowMs)).toBe(0)
  })
})

// ── Real servers ────────────────────────────────────────────────────────────

/** Calls fired at once with one key. */
const CONCURRENT = 200

const servers: ServeProcess[] = []
const cleanups: (() => void)[] = []
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop('SIGKILL')))
  for (const cleanup of cleanups) cleanup()
})

const postOnce = (url: string, hook: string, token: string, key: string, recordId: string) =>
  fetch(`${url}${hook}`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify({ record_id: recordId }) })

/**
 * Every call at once, each on `urls[i % urls.length]` with the key and the record `recordOf(i)`: their statuses, codes,
 * run ids and replay headers.
 */
async function fireAtOnce(urls: string[], hook: string, token: string, key: string, recordOf: (i: number) => string) {
  return Promise.all(
    Array.from({ length: CONCURRENT }, async (_, i) => {
      const response = await postOnce(urls[i % urls.length]!, hook, token, key, recordOf(i))
      const text = await response.text()
      const body = JSON.parse(text) as { runId?: string; code?: string }
      return { status: response.status, text, code: body.code, runId: body.runId ?? null, replayed: response.headers.get('idempotent-replayed') }
    }),
  )
}

/** The answers of `fireAtOnce`: all 202 with one run id; exactly one was not a replay. */
function oneRun(answers: Awaited<ReturnType<typeof fireAtOnce>>): string {
  expect(answers.filter((a) => a.status !== 202).map((a) => `${a.status} ${a.text}`)).toEqual([])
  const ids = new Set(answers.map((a) => a.runId))
  expect(ids.size).toBe(1)
  expect(answers.filter((a) => a.replayed === null)).toHaveLength(1)
  expect(answers.filter((a) => a.replayed === 'true')).toHaveLength(CONCURRENT - 1)
  return [...ids][0]!
}

/** How many runs `deployed` holds on these records. */
const runsOn = (deployed: Deployment, recordIds: string[]) => Number(deployed.sql(`SELECT count(*) FROM runs WHERE record_id IN (${recordIds.map((id) => `'${id}'`).join(', ')})`))

/** The deployment under test: one `serve` on a SQLite data directory, or three instances on one PostgreSQL database. */
interface Deployment {
  urls: string[]
  hook: string
  token: string
  /** SIGKILL of every process; `whileDown`; then one `serve` started again on the same data: its URL. */
  killAndRestart(whileDown: () => void): Promise<string>
  /** A statement on the deployment's database (portable SQL); the first column of its first row, as text. */
  sql(statement: string): string
  close(): Promise<void>
}

async function deployment(): Promise<Deployment> {
  if (TEST_STORE === 'postgres') {
    const url = await freshDatabase()
    const document = acmeDocument()
    acmeProject(document).workflows!.push(...WORKFLOWS)
    const set = await startInstances({ url, document, count: 3 })
    return {
      urls: set.instances.map((instance) => instance.url),
      hook: set.hooks.Hold!,
      token: await set.token('bob@example.com', 'erp', 'workflows:trigger'),
      killAndRestart: async (whileDown) => {
        for (const instance of [...set.instances]) expect(await set.kill(instance)).not.toBe(0)
        whileDown()
        const dir = tempDir('trellis-idempotency-')
        cleanups.push(dir.cleanup)
        const restarted = await startServe({ dataDir: dir.path, cwd: dir.path, env: set.env, timeoutMs: 20_000 })
        servers.push(restarted)
        return restarted.url
      },
      sql: (statement) => psqlSync(url, statement).trim(),
      close: () => set.close(),
    }
  }
  const seeded = await seedDataDir('idempotency', WORKFLOWS, cleanups, async (store, report) => ({
    hook: hookPath(report.workflows.find((w) => w.name === 'Hold')!.webhook.url),
    token: (await tokenFor(store, systemClock, 'bob', ['workflows:trigger'])).value,
  }))
  const serve = async () => {
    const server = await startServe({ dataDir: seeded.dataDir, cwd: seeded.cwd, env: { TRELLIS_LOG_LEVEL: 'warn' }, timeoutMs: 20_000 })
    servers.push(server)
    return server
  }
  let server = await serve()
  return {
    urls: [server.url],
    hook: seeded.hook,
    token: seeded.token,
    killAndRestart: async (whileDown) => {
      expect(await server.stop('SIGKILL')).not.toBe(0)
      whileDown()
      server = await serve()
      return server.url
    },
    sql: (statement) => {
      const db = new Database(join(seeded.dataDir, 'trellis.db'))
      try {
        const row = db.prepare(statement).values()[0]
        return row === undefined ? '' : String(row[0])
      } finally {
        db.close()
      }
    },
    close: async () => void (await server.stop('SIGTERM')),
  }
}

test(`real servers: ${CONCURRENT} concurrent calls with one key start one run (PostgreSQL: spread over three instances); the key outlives kill -9`, async () => {
  const deployed = await deployment()
  try {
    const key = newKey('concurrent')
    const runId = oneRun(await fireAtOnce(deployed.urls, deployed.hook, deployed.token, key, () => 'ord_1001'))
    // Another key on another record, the same way: each burst its own run.
    const otherRunId = oneRun(await fireAtOnce(deployed.urls, deployed.hook, deployed.token, newKey('concurrent'), () => 'ord_1002'))
    expect(otherRunId).not.toBe(runId)
    expect(runsOn(deployed, ['ord_1001', 'ord_1002'])).toBe(2)
    // One key, a different record in each call: no record's active run stands in the way, the key alone decides — one
    // call starts its run, every other is 422, and no other run is left behind.
    const records = Array.from({ length: CONCURRENT }, (_, i) => `burst_${i}`)
    const answers = await fireAtOnce(deployed.urls, deployed.hook, deployed.token, newKey('bodies'), (i) => records[i]!)
    const tally: Record<string, number> = {}
    for (const { status, code } of answers) {
      const label = code ? `${status} ${code}` : `${status}`
      tally[label] = (tally[label] ?? 0) + 1
    }
    expect(tally).toEqual({ 202: 1, '422 idempotency_key_reused': CONCURRENT - 1 })
    expect(runsOn(deployed, records)).toBe(1)

    // While nothing runs, a key of that run from 25 hours ago: the restarted serve prunes it (the default window, 24 h).
    const expiredKeys = () => deployed.sql("SELECT count(*) FROM idempotency_keys WHERE key = 'expired'")
    const restarted = await deployed.killAndRestart(() => {
      deployed.sql(`INSERT INTO idempotency_keys (workflow_id, user_id, key, request_hash, run_id, created_at)
        SELECT workflow_id, user_id, 'expired', 'h', id, ${Date.now() - 25 * 3_600_000} FROM runs WHERE id = '${runId}'`)
      expect(expiredKeys()).toBe('1')
    })
    const replay = await postOnce(restarted, deployed.hook, deployed.token, key, 'ord_1001')
    expect(replay.status).toBe(202)
    expect(replay.headers.get('idempotent-replayed')).toBe('true')
    expect(((await replay.json()) as { runId: string }).runId).toBe(runId)
    expect(runsOn(deployed, ['ord_1001', 'ord_1002'])).toBe(2)
    await until('the expired key to be pruned', () => expiredKeys() === '0', 10_000)
    expect(deployed.sql(`SELECT count(*) FROM idempotency_keys WHERE run_id = '${runId}'`)).toBe('1')
  } finally {
    await deployed.close()
  }
}, 180_000)

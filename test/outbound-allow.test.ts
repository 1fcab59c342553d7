/**
 * The outbound allow-list kept in the console (GET/PUT /v1/instance/outbound-allow): instance administrators only,
 * each entry read by TRELLIS_HTTP_ALLOW's parser (400 naming `entries[i]`), each change an instance admin log entry;
 * an `http` step, a callback URL and `trellis apply`'s callback to 127.0.0.1 refused, then allowed once the list opens
 * it — no restart; the staleness bound between instances; and TRELLIS_HTTP_ALLOW, when set, is the list (read-only, 409 on a change).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { OutboundAllowCache } from '../src/modules/instance/outbound-allow.ts'
import { bearer, processEnv, queryAll, queryOne, request, runCli, runNow, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, reportHook, tokenFor, userId } from './support/acme.ts'
import { expectError, scenarios, sendTo } from './support/scenarios.ts'

const NO_API_LIMIT = { TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' }
const ALLOW = '/v1/instance/outbound-allow'
const CALLBACKS = '/v1/project/Acme/environment/production/team/Support/workflows/Call%20local/callbacks'
const OPENED_BY = 'the outbound allow-list opens hosts and ranges (instance administrators: /admin/outbound; TRELLIS_HTTP_ALLOW when set)'

let env: TestEnv
let app: ReturnType<typeof testApp>
let executor: Executor
let allow: OutboundAllowCache
let receiver: ReturnType<typeof Bun.serve>
let hook = ''
const received: string[] = []
const cookies: Record<string, string> = {}

beforeAll(async () => {
  receiver = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch(req) {
      received.push(new URL(req.url).pathname)
      return Response.json({ ok: true })
    },
  })
  env = testEnv(NO_API_LIMIT)
  const document = acmeWithInstanceAdmin()
  acmeProject(document).workflows!.push(ordersWorkflow('Call local', [{ type: 'http', name: 'call', method: 'POST', url: `http://127.0.0.1:${receiver.port}/hook`, retries: 0 }], { webhook: { enabled: true, ratePerMinute: 1000 } }))
  const report = await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  hook = reportHook(report, 'Call local')
  // One list per app, shared by the routes and the executor's client, as `serve` builds them.
  allow = new OutboundAllowCache(env.store, env.config)
  executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20, outbound: new OutboundClient({ allow: () => allow.current() }) })
  app = testApp(env, { executor, outboundAllow: allow })
  executor.start()
  for (const name of ['alice', 'carol']) cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
}, 60_000) // on PostgreSQL the first block starts the shared cluster: seconds on a busy machine

afterAll(async () => {
  await executor.stop(2_000)
  await receiver.stop(true)
  env.cleanup()
})

/** The Acme fixture with alice an instance administrator (the apply key). */
function acmeWithInstanceAdmin() {
  const document = acmeDocument()
  ;(document.users.find((u) => u.email === 'alice@example.com') as unknown as Record<string, unknown>).instanceAdmin = true
  return document
}

const send = (req: Request) => sendTo(app, req)
const as = (name: string) => ({ cookie: cookies[name]! })
const put = (entries: unknown, who = 'alice') => send(request(ALLOW, { method: 'PUT', headers: as(who), json: { entries } }))
const outboundLog = () =>
  queryAll(env.store, "SELECT type, user_id AS \"userId\", previous_value AS \"previousValue\", new_value AS \"newValue\", project_id AS \"projectId\" FROM admin_logs WHERE resource = 'outbound-allow' ORDER BY id") as {
    type: string
    userId: number
    previousValue: string
    newValue: string
    projectId: number | null
  }[]

/** Starts a run of `Call local` by its webhook and waits for it to end; answers its row. */
async function runToEnd(recordId: string) {
  const token = await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])
  const started = await send(request(hook, { method: 'POST', headers: bearer(token.value), json: { record_id: recordId } }))
  expect(started.status).toBe(202)
  const runId = started.body.runId as string
  return until(
    `run ${runId} to end`,
    () => {
      const row = queryOne(env.store, 'SELECT status, error FROM runs WHERE id = ?', runId) as { status: string; error: string | null }
      const error = row.error === null ? null : (JSON.parse(row.error) as { code: string; message: string })
      return ['succeeded', 'failed', 'cancelled'].includes(row.status) ? { id: runId, status: row.status, errorCode: error?.code ?? null, errorMessage: error?.message ?? null } : null
    },
    10_000,
    10,
  )
}

describe('rights and validation', () => {
  scenarios(
    [
      { name: 'no caller → 401', request: { path: ALLOW }, status: 401, code: 'unauthorized' },
      { name: 'a project admin who is not an instance administrator → 403', request: () => ({ path: ALLOW, headers: as('carol') }), status: 403, code: 'instance_admin_required' },
      { name: 'PUT by a project admin → 403', request: () => ({ method: 'PUT', path: ALLOW, headers: as('carol'), body: { entries: ['127.0.0.1'] } }), status: 403, code: 'instance_admin_required' },
      {
        name: 'a token, even an instance administrator\'s → 403',
        request: async () => ({ path: ALLOW, headers: bearer((await tokenFor(env.store, env.clock, 'alice', ['all'])).value) }),
        status: 403,
        code: 'instance_admin_required',
      },
      { name: 'no entries → 400 naming entries', request: () => ({ method: 'PUT', path: ALLOW, headers: as('alice'), body: {} }), status: 400, code: 'validation_failed', field: 'entries' },
      { name: 'entries not a list → 400 naming entries', request: () => ({ method: 'PUT', path: ALLOW, headers: as('alice'), body: { entries: '127.0.0.1' } }), status: 400, code: 'validation_failed', field: 'entries' },
      {
        name: 'more than 200 entries → 400 naming entries',
        request: () => ({ method: 'PUT', path: ALLOW, headers: as('alice'), body: { entries: Array.from({ length: 201 }, (_, i) => `10.0.${i >> 8}.${i & 255}`) } }),
        status: 400,
        code: 'validation_failed',
        field: 'entries',
      },
      {
        name: 'an entry that is no host, address or range → 400 naming entries[1]',
        request: () => ({ method: 'PUT', path: ALLOW, headers: as('alice'), body: { entries: ['127.0.0.1', 'http://hooks.internal'] } }),
        status: 400,
        code: 'validation_failed',
        field: 'entries[1]',
        check: (body) => expect(body.message).toContain('entry 2: "http://hooks.internal" is neither a host name, an IP address nor a CIDR range'),
      },
      { name: 'a CIDR past /32 → 400 naming entries[0]', request: () => ({ method: 'PUT', path: ALLOW, headers: as('alice'), body: { entries: ['10.0.0.0/33'] } }), status: 400, code: 'validation_failed', field: 'entries[0]' },
      { name: 'a wildcard → 400 naming entries[0]', request: () => ({ method: 'PUT', path: ALLOW, headers: as('alice'), body: { entries: ['*.internal'] } }), status: 400, code: 'validation_failed', field: 'entries[0]' },
      {
        name: 'two entries on one line → 400 naming entries[0]',
        request: () => ({ method: 'PUT', path: ALLOW, headers: as('alice'), body: { entries: ['hooks.internal 10.0.0.1'] } }),
        status: 400,
        code: 'validation_failed',
        field: 'entries[0]',
      },
    ],
    (req) => send(req),
  )

  test('nothing was stored nor logged by the refused changes', async () => {
    expect((await send(request(ALLOW, { headers: as('alice') }))).body).toEqual({ entries: [], setByEnvironment: false, storedEntries: [] })
    expect(outboundLog()).toEqual([])
  })
})

describe('a local destination, refused and then opened without a restart', () => {
  let refusedRun: { id: string } | undefined
  test('an http step to 127.0.0.1 fails with http_destination_refused, the message pointing to the console page', async () => {
    const run = await runToEnd('ord_1001')
    expect(run).toMatchObject({ status: 'failed', errorCode: 'http_destination_refused' })
    expect(run.errorMessage).toBe(`destination 127.0.0.1 refused: it is a loopback address; ${OPENED_BY}`)
    expect(received).toEqual([])
  })

  test('a callback URL to 127.0.0.1 is refused: 400 naming url, pointing to the console page', async () => {
    const refused = expectError(await send(request(CALLBACKS, { method: 'POST', headers: as('alice'), json: { url: `http://127.0.0.1:${receiver.port}/done` } })), 400, 'validation_failed', 'url')
    expect(refused.message).toContain('/admin/outbound')
  })

  test('PUT opens 127.0.0.1: trimmed, blanks dropped, repeats kept once; one instance admin log entry with the old and new lists', async () => {
    const saved = await put([' 127.0.0.1 ', '', 'Hooks.Internal', '127.0.0.1', '10.1.0.0/16'])
    expect(saved.status).toBe(200)
    expect(saved.body).toEqual({ entries: ['127.0.0.1', 'Hooks.Internal', '10.1.0.0/16'], setByEnvironment: false, storedEntries: ['127.0.0.1', 'Hooks.Internal', '10.1.0.0/16'] })
    expect((await send(request(ALLOW, { headers: as('alice') }))).body).toEqual(saved.body)
    expect(outboundLog()).toEqual([
      { type: 'update', userId: userId(env.store, 'alice'), projectId: null, previousValue: '{"entries":[]}', newValue: '{"entries":["127.0.0.1","Hooks.Internal","10.1.0.0/16"]}' },
    ])
    // The same list again changes nothing: no entry.
    expect((await put(['127.0.0.1', 'Hooks.Internal', '10.1.0.0/16'])).status).toBe(200)
    expect(outboundLog()).toHaveLength(1)
  })

  test('the next run reaches 127.0.0.1, and the callback URL is accepted', async () => {
    const run = await runToEnd('ord_1002')
    expect(run).toMatchObject({ status: 'succeeded', errorCode: null })
    expect(received).toEqual(['/hook'])
    const added = await send(request(CALLBACKS, { method: 'POST', headers: as('alice'), json: { url: `http://127.0.0.1:${receiver.port}/done` } }))
    expect(added.status).toBe(201)
  })

  test('another instance (its own cache) sees the change within its staleness bound; emptying the list refuses again', async () => {
    const fresh = new OutboundAllowCache(env.store, env.config, 0)
    const late = new OutboundAllowCache(env.store, env.config, 60_000)
    expect((await late.current()).hosts).toEqual(new Set(['hooks.internal']))
    expect((await put([])).status).toBe(200)
    expect(outboundLog().at(-1)).toMatchObject({ previousValue: '{"entries":["127.0.0.1","Hooks.Internal","10.1.0.0/16"]}', newValue: '{"entries":[]}' })
    // Read anew by an instance past its bound (here: none); the other still uses what it read, until its bound passes.
    expect((await fresh.current()).ranges).toEqual([])
    expect((await late.current()).hosts).toEqual(new Set(['hooks.internal']))
    late.forget()
    expect((await late.current()).hosts).toEqual(new Set())
    // This app's own list was forgotten by the change: the next run is refused at once.
    refusedRun = await runToEnd('ord_1003')
    expect(refusedRun).toMatchObject({ status: 'failed', errorCode: 'http_destination_refused' })
  })

  test('`trellis apply` checks callback URLs against the same list: refused while it is empty, applied once it opens 127.0.0.1', async () => {
    const document = acmeWithInstanceAdmin()
    acmeProject(document).workflows!.push(ordersWorkflow('Applied callback', [{ type: 'load' }], { callbacks: [{ url: 'http://127.0.0.1:9/applied' }] }))
    const file = join(env.dataDir, 'acme-callback.json')
    writeFileSync(file, JSON.stringify(document))
    const apply = () => runCli(['apply', '-f', file, '--data', env.dataDir], { env: processEnv(env) })
    const refused = await apply()
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain('callbacks[0].url: points to a loopback address (127.0.0.1)')
    expect(refused.stderr).toContain('/admin/outbound')
    expect((await put(['127.0.0.1'])).status).toBe(200)
    const applied = await apply()
    expect({ code: applied.code, stderr: applied.stderr }).toEqual({ code: 0, stderr: '' })
    expect((await put([])).status).toBe(200)
  }, 60_000)

  test('the console page shows the list and its changes; a refused run links to it', async () => {
    const page = await app.handle(request('/admin/outbound', { headers: as('alice') }))
    expect(page.status).toBe(200)
    const text = await page.text()
    expect(text).toContain('<form id="outbound-allow"')
    expect(text).toContain('Entries: 127.0.0.1, Hooks.Internal, 10.1.0.0/16')
    expect((await app.handle(request('/admin/outbound', { headers: as('carol') }))).status).toBe(403)
    const runPage = await (await app.handle(request(`/runs/${refusedRun!.id}`, { headers: as('alice') }))).text()
    expect(runPage).toContain('<a class="allow-list-link" href="/admin/outbound">Open the outbound allow-list</a>')
  })
})

describe('TRELLIS_HTTP_ALLOW set: it is the list', () => {
  let fromEnv: TestEnv
  let envApp: ReturnType<typeof testApp>
  let cookie = ''
  beforeAll(async () => {
    fromEnv = testEnv({ ...NO_API_LIMIT, TRELLIS_HTTP_ALLOW: '10.0.0.0/8, hooks.internal' })
    await applyAcme({ store: fromEnv.store, clock: fromEnv.clock, secret: fromEnv.secret, baseUrl: fromEnv.config.baseUrl }, acmeWithInstanceAdmin())
    envApp = testApp(fromEnv)
    cookie = `trellis_session=${(await runNow(fromEnv.store, createSession(fromEnv.clock, userId(fromEnv.store, 'alice'), false))).id}`
  })
  afterAll(() => fromEnv.cleanup())

  test('GET shows its entries, read-only; PUT is 409 allow_list_set_by_environment and stores nothing', async () => {
    const shown = await sendTo(envApp, request(ALLOW, { headers: { cookie } }))
    expect(shown.body).toEqual({ entries: ['10.0.0.0/8', 'hooks.internal'], setByEnvironment: true, storedEntries: [] })
    expectError(await sendTo(envApp, request(ALLOW, { method: 'PUT', headers: { cookie }, json: { entries: ['127.0.0.1'] } })), 409, 'allow_list_set_by_environment')
    expect(queryAll(fromEnv.store, "SELECT name FROM instance_settings WHERE name = 'http-allow'")).toEqual([])
    const page = await (await envApp.handle(request('/admin/outbound', { headers: { cookie } }))).text()
    expect(page).toContain('id="allow-from-environment"')
    expect(page).not.toContain('<form id="outbound-allow"')
  })
})

/**
 * `POST <webhook_url>` (spec §2.5, §2.7, §4.2, §5.9–5.10, §7.2, §8; DESIGN §8) through the real app over a real
 * SQLite file with examples/acme.yaml applied. No executor runs here, so every accepted run stays `queued`:
 * the 202 never waits for execution.
 *
 * Acme: alice and carol are project admins, bob an editor in team Support, dave a user in Billing.
 * "Refund order" (production, Support, orders) has its webhook enabled.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { WEBHOOK_MAX_BODY_BYTES } from '../src/http/body.ts'
import { revokeToken, type Scope } from '../src/modules/tokens/service.ts'
import { verifyWebhookToken, webhookToken } from '../src/lib/webhook-url.ts'
import { bearer, execute, queryAll, queryOne, request, runNow, SQLITE_ONLY, sqliteOf, sqliteOnlyTest, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, applyAcme, hookPath, reportHook, tokenFor, userId, UUID } from './support/acme.ts'
import { expectError, type Scenario, scenarios, type Sent as ScenarioSent } from './support/scenarios.ts'

const WORKFLOW = '/v1/project/Acme/environment/production/team/Support/workflows'
const REFUND = `${WORKFLOW}/Refund%20order`
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

type Sent = ScenarioSent<Record<string, unknown> | null>

let env: TestEnv
let app: ReturnType<typeof testApp>
/** The current path of Refund order's webhook (changes when regenerated). */
let hook: string
/** A second webhook-enabled workflow on the same collection and team. */
let pingHook: string
const tokens = {} as Record<
  'bob' | 'bobAll' | 'bobNotes' | 'bobGlobex' | 'alice' | 'carol' | 'dave' | 'daveAll',
  string
>
let recordCounter = 0
const nextRecord = () => `rec-${++recordCounter}`


async function send(req: Request): Promise<Sent> {
  const response = await app.handle(req)
  const text = await response.text()
  let body: Record<string, unknown> | null = null
  if (text) {
    try {
      body = JSON.parse(text) as Record<string, unknown>
    } catch {
      throw new Error(`not JSON (${response.status}): ${text.slice(0, 200)}`)
    }
  }
  return { status: response.status, headers: response.headers, body }
}

/** POSTs on a webhook path. `body` is JSON-encoded unless `raw` is given; `token: null` sends no Authorization. */
function trigger(path: string, token: string | null, body: unknown = { record_id: nextRecord() }, raw?: string | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) {
  const h = new Headers({ 'content-type': 'application/json', ...headers })
  if (token !== null) h.set('authorization', `Bearer ${token}`)
  return send(new Request(`http://localhost${path}`, { method: 'POST', headers: h, body: raw ?? JSON.stringify(body) }))
}

/** Admin calls on the trigger settings (alice's `all` token). */
function settings(method: 'GET' | 'PATCH' | 'POST', suffix: string, json?: unknown) {
  return send(request(`${REFUND}/webhook${suffix}`, { method, headers: bearer(tokens.alice), json }))
}

function expectAccepted(sent: Sent): string {
  expect({ status: sent.status, body: sent.body }).toMatchObject({ status: 202 })
  expect(Object.keys(sent.body!)).toEqual(['runId'])
  expect(sent.body!.runId).toMatch(UUID)
  return sent.body!.runId as string
}

function runRow(id: string) {
  return queryOne(env.store, 'SELECT * FROM runs WHERE id = ?', id) as Record<string, unknown> | null
}

function count(sql: string, ...params: (string | number | null)[]): number {
  return (queryOne(env.store, sql, ...params) as { n: number }).n
}

/** Replaces the character at `index` with another base64url character whose 6 bits differ in the high bits. */
function flipChar(text: string, index: number): string {
  const value = B64URL.indexOf(text[index]!)
  return text.slice(0, index) + B64URL[(value + 16) % 64] + text.slice(index + 1)
}

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  document.projects.push({ name: 'Globex', environments: ['production'], members: [{ user: 'bob@example.com', role: 'admin' }] })
  const report = await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  hook = reportHook(report, 'Refund order')
  app = testApp(env)
  const make = async (user: string, scopes: Scope[], project?: string) => (await tokenFor(env.store, env.clock, user, scopes, { project })).value
  tokens.bob = await make('bob', ['workflows:trigger'])
  tokens.bobAll = await make('bob', ['all'])
  tokens.bobNotes = await make('bob', ['notes:read'])
  tokens.bobGlobex = await make('bob', ['all'], 'Globex')
  tokens.alice = await make('alice', ['all'])
  tokens.carol = await make('carol', ['workflows:trigger'])
  tokens.dave = await make('dave', ['workflows:trigger'])
  tokens.daveAll = await make('dave', ['all'])
  const published = await send(
    request(`${WORKFLOW}/Ping`, {
      method: 'PUT',
      headers: bearer(tokens.alice),
      json: { collection: 'orders', webhook: { enabled: true }, steps: [{ type: 'load' }] },
    }),
  )
  expect(published.status).toBe(200)
  pingHook = hookPath((published.body!.webhook as { url: string }).url)
})

afterAll(() => env.cleanup())

// The webhook bucket holds 60 per minute and the clock is manual: a minute passes between tests.
beforeEach(() => env.clock.advance(61_000))

describe('202: the run is created and queued, the response does not wait', () => {
  test('202 {runId} (UUID); the run is queued with the token user, the token and the active version', async () => {
    const started = performance.now()
    const runId = expectAccepted(await trigger(hook, tokens.bob, { record_id: 'ord_1001' }))
    expect(performance.now() - started).toBeLessThan(1000)
    const run = runRow(runId)!
    expect(run).toMatchObject({
      status: 'queued',
      record_id: 'ord_1001',
      user_id: userId(env.store, 'bob'),
      trigger: 'webhook',
      next_step: 0,
      attempts: 0,
      lease_owner: null,
      started_at: null,
      finished_at: null,
    })
    const workflow = queryOne(env.store, "SELECT id, active_version_id FROM workflows WHERE name = 'Refund order'") as {
      id: number
      active_version_id: number
    }
    expect(run.workflow_id).toBe(workflow.id)
    expect(run.workflow_version_id).toBe(workflow.active_version_id)
    const token = queryOne(env.store, 'SELECT token_id FROM runs WHERE id = ?', runId) as { token_id: number }
    expect(token.token_id).toBeGreaterThan(0)
    // The state is observable through the runId (§3): still queued, nobody executes it here.
    const seen = await send(request(`/v1/workflow-runs/${runId}`, { headers: bearer(tokens.bob) }))
    expect(seen.status).toBe(200)
    expect(seen.body).toMatchObject({
      object: 'workflow-run',
      id: runId,
      status: 'queued',
      recordId: 'ord_1001',
      trigger: 'webhook',
      workflow: { name: 'Refund order', version: 1 },
      user: { object: 'user', username: 'bob' },
      startedAt: null,
      finishedAt: null,
      steps: [],
    })
    // Only the triggering user (or a project admin) sees it, and only with a token of its project.
    expect((await send(request(`/v1/workflow-runs/${runId}`, { headers: bearer(tokens.dave) }))).status).toBe(404)
    expect((await send(request(`/v1/workflow-runs/${runId}`, { headers: bearer(tokens.bobGlobex) }))).status).toBe(404)
    expect((await send(request(`/v1/workflow-runs/${runId}`, { headers: bearer(tokens.alice) }))).status).toBe(200)
  })

  test('a token with `all` works as well as workflows:trigger; a project admin outside the team may trigger', async () => {
    expectAccepted(await trigger(hook, tokens.bobAll))
    expectAccepted(await trigger(hook, tokens.alice))
    expectAccepted(await trigger(hook, tokens.carol)) // admin, member of Billing only
  })

  test('record_id is not verified at creation: a record that does not exist → 202', async () => {
    const runId = expectAccepted(await trigger(hook, tokens.bob, { record_id: 'ord_does_not_exist' }))
    expect(runRow(runId)!.status).toBe('queued')
  })

  test('unknown body fields are ignored', async () => {
    const runId = expectAccepted(await trigger(hook, tokens.bob, { record_id: 'extra-fields', reason: 'x', nested: { a: [1, 2] }, record: 5 }))
    expect(runRow(runId)!.record_id).toBe('extra-fields')
  })

  test('a composite id in its packed form is stored as is', async () => {
    const runId = expectAccepted(await trigger(hook, tokens.bob, { record_id: 'a|b|c' }))
    expect(runRow(runId)!.record_id).toBe('a|b|c')
    const longest = 'k'.repeat(1024)
    expect(runRow(expectAccepted(await trigger(hook, tokens.bob, { record_id: longest })))!.record_id).toBe(longest)
    const unicode = 'ordre-é-ü-漢字'
    expect(runRow(expectAccepted(await trigger(hook, tokens.bob, { record_id: unicode })))!.record_id).toBe(unicode)
  })

  test('the Content-Type is not what decides: a JSON body is read from the raw text', async () => {
    expectAccepted(await trigger(hook, tokens.bob, undefined, JSON.stringify({ record_id: nextRecord() }), { 'content-type': 'text/plain' }))
  })
})

describe('400: the body', () => {
  /** A webhook call (alice's hook unless `path` says otherwise) with a JSON body, bob's workflows:trigger token unless `token` says otherwise. */
  const refused = (name: string, status: number, code: string, json: unknown, raw?: string): Scenario => ({
    name,
    request: () => ({ method: 'POST', path: hook, headers: { 'content-type': 'application/json', ...bearer(tokens.bob) }, ...(raw === undefined ? { body: json } : { raw }) }),
    status,
    code,
  })
  scenarios(
    [
      ...['{bad', '{"record_id": "x"', '', 'record_id=x'].map((raw) => refused(`invalid JSON ${JSON.stringify(raw)} → 400 invalid_json`, 400, 'invalid_json', undefined, raw)),
      ...[[], ['ord_1001'], 'ord_1001', 42, true, null].map((value) => refused(`a JSON ${JSON.stringify(value)} that is not an object → 400 invalid_body`, 400, 'invalid_body', value)),
      refused('missing record_id ({}) → 400 missing_record_id', 400, 'missing_record_id', {}),
      refused('missing record_id (recordId given) → 400 missing_record_id', 400, 'missing_record_id', { recordId: 'ord_1001' }),
      ...[42, null, true, ['a'], { id: 'a' }, '', 'k'.repeat(1025)].map((recordId) =>
        refused(`record_id ${JSON.stringify(recordId).slice(0, 30)} (not a non-empty string of at most 1024 characters) → 400 invalid_record_id`, 400, 'invalid_record_id', { record_id: recordId }),
      ),
      { name: 'no body at all → 400', request: () => ({ method: 'POST', path: hook, headers: bearer(tokens.bob) }), status: 400 },
    ],
    send,
  )

  test('a rejected body creates no run and no activity entry', async () => {
    const before = [count('SELECT count(*) AS n FROM runs'), count('SELECT count(*) AS n FROM activity_logs')]
    await trigger(hook, tokens.bob, { record_id: '' })
    await trigger(hook, tokens.bob, undefined, '{')
    expect([count('SELECT count(*) AS n FROM runs'), count('SELECT count(*) AS n FROM activity_logs')]).toEqual(before)
  })
})

describe('413: a webhook body over 64 KiB (DESIGN §8; TRELLIS_MAX_BODY_BYTES when lower)', () => {
  const limit = () => Math.min(env.config.maxBodyBytes, WEBHOOK_MAX_BODY_BYTES)
  test('the webhook keeps DESIGN §8\'s 64 KiB although the API takes 1 MiB bodies', () => {
    expect(WEBHOOK_MAX_BODY_BYTES).toBe(65_536)
    expect(env.config.maxBodyBytes).toBeGreaterThan(WEBHOOK_MAX_BODY_BYTES)
  })

  test('with a Content-Length → 413 payload_too_large, no run', async () => {
    const before = count('SELECT count(*) AS n FROM runs')
    const big = JSON.stringify({ record_id: 'big', pad: 'a'.repeat(limit()) })
    expectError(await trigger(hook, tokens.bob, undefined, big, { 'content-length': String(Buffer.byteLength(big)) }), 413, 'payload_too_large')
    expect(count('SELECT count(*) AS n FROM runs')).toBe(before)
  })

  test('streamed without a Content-Length → 413 as well', async () => {
    const chunk = new TextEncoder().encode('a'.repeat(16 * 1024))
    let sentChunks = 0
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"record_id":"big","pad":"'))
      },
      pull(controller) {
        if (sentChunks++ < limit() / chunk.byteLength) controller.enqueue(chunk)
        else {
          controller.enqueue(new TextEncoder().encode('"}'))
          controller.close()
        }
      },
    })
    expectError(await trigger(hook, tokens.bob, undefined, stream), 413, 'payload_too_large')
  })

  test('just under the limit is fine', async () => {
    const padded = JSON.stringify({ record_id: 'almost-at-the-limit', pad: 'a'.repeat(limit() - 100) })
    expectAccepted(await trigger(hook, tokens.bob, undefined, padded))
  })
})

describe('400: the URL (checked first)', () => {
  const parts = () => hook.slice('/v1/hooks/'.length).split('.') as [string, string]
  const tampered = (name: string, path: () => string, token: string | null = 'bob'): Scenario => ({
    name,
    request: () => ({
      method: 'POST',
      path: path(),
      headers: { 'content-type': 'application/json', ...(token === null ? {} : bearer(token === 'bob' ? tokens.bob : token)) },
      body: { record_id: nextRecord() },
    }),
    status: 400,
    code: 'invalid_webhook_url',
  })
  scenarios(
    [
      // One character changed in the payload part, or in the signature part.
      ...(['first', 'middle', 'last'] as const).map((where) =>
        tampered(`the ${where} character of the payload changed → 400 invalid_webhook_url`, () => {
          const [payload, signature] = parts()
          const index = { first: 0, middle: Math.floor(payload.length / 2), last: payload.length - 1 }[where]
          return `/v1/hooks/${flipChar(payload, index)}.${signature}`
        }),
      ),
      ...[0, 21, 41].map((index) =>
        tampered(`character ${index} of the signature changed → 400 invalid_webhook_url`, () => {
          const [payload, signature] = parts()
          return `/v1/hooks/${payload}.${flipChar(signature, index)}`
        }),
      ),
      // Malformed URLs.
      ...(
        [
          ['x', () => 'x'],
          ['the payload alone', () => parts()[0]],
          ['the payload and a dot', () => `${parts()[0]}.`],
          ['a dot and the signature', () => `.${parts()[1]}`],
          ['a third part', () => `${parts().join('.')}.x`],
          ['a signature one character short', () => `${parts()[0]}.${parts()[1].slice(0, 42)}`],
          ['a signature one character long', () => `${parts()[0]}.${parts()[1]}A`],
        ] as const
      ).map(([what, bad]) => tampered(`malformed: ${what} → 400 invalid_webhook_url`, () => `/v1/hooks/${bad()}`)),
      // Order: a tampered URL without a (valid) token → 400, not 401.
      tampered('a tampered URL without a token → 400, not 401', () => `/v1/hooks/${parts()[0]}.${flipChar(parts()[1], 3)}`, null),
      tampered('a tampered URL with a garbage token → 400, not 401', () => `/v1/hooks/${parts()[0]}.${flipChar(parts()[1], 3)}`, 'garbage'),
    ],
    send,
  )

  test('any other spelling of the signature is rejected, even one that decodes to the same bytes', async () => {
    const [payload, signature] = hook.slice('/v1/hooks/'.length).split('.') as [string, string]
    // 32 bytes are 43 base64url characters: the last one carries 4 bits and 2 unused ones.
    const last = B64URL.indexOf(signature[42]!)
    for (const unused of [1, 2, 3]) {
      const respelled = signature.slice(0, 42) + B64URL[last ^ unused]
      expect(Buffer.from(respelled, 'base64url').equals(Buffer.from(signature, 'base64url'))).toBe(true)
      expectError(await trigger(`/v1/hooks/${payload}.${respelled}`, tokens.bob), 400, 'invalid_webhook_url')
    }
    // and with padding or the standard alphabet
    expectError(await trigger(`/v1/hooks/${payload}.${signature}=`, tokens.bob), 400, 'invalid_webhook_url')
  })

  test('a URL signed with another secret, or a genuine payload reshaped, → 400 invalid_webhook_url', async () => {
    const payload = verifyWebhookToken(env.secret, hook.slice('/v1/hooks/'.length))!
    expect(payload.generation).toBe(1)
    const foreign = webhookToken(Buffer.from('some-other-secret-some-other-secret-0000'), payload)
    expectError(await trigger(`/v1/hooks/${foreign}`, tokens.bob), 400, 'invalid_webhook_url')
    // Correctly signed (only the server can), yet naming another rendering or a future generation.
    for (const reshaped of [{ ...payload, renderingId: payload.renderingId + 1 }, { ...payload, generation: payload.generation + 1 }]) {
      expectError(await trigger(`/v1/hooks/${webhookToken(env.secret, reshaped)}`, tokens.bob), 400, 'invalid_webhook_url')
    }
  })

})

describe('401: the token', () => {
  const call = (headers: Record<string, string> | null, json: unknown = undefined) => () => ({
    method: 'POST',
    path: hook,
    headers: { 'content-type': 'application/json', ...(headers ?? {}) },
    body: json ?? { record_id: nextRecord() },
  })
  scenarios(
    [
      // Missing, malformed, unknown → 401 with the §7.1 body.
      ...(
        [
          ['no Authorization header', () => null],
          ['Bearer without a value', () => ({ authorization: 'Bearer' })],
          ['Bearer garbage', () => ({ authorization: 'Bearer garbage' })],
          ['Basic credentials', () => ({ authorization: `Basic ${btoa('bob:pw')}` })],
          ['an unknown token', () => ({ authorization: `Bearer trl_${'A'.repeat(43)}` })],
          ["bob's token with a character more", () => ({ authorization: `Bearer ${tokens.bob}x` })],
        ] as const
      ).map(([what, headers]): Scenario => ({ name: `${what} → 401`, request: () => call(headers())(), status: 401, code: 'unauthorized', body: { error: 'Unauthorized' } })),
      // A token failure does not reveal the body problem.
      { name: 'no token and an empty record_id → 401', request: call(null, { record_id: '' }), status: 401, code: 'unauthorized' },
      { name: 'a garbage token and no record_id → 401', request: call({ authorization: 'Bearer garbage' }, {}), status: 401, code: 'unauthorized' },
    ],
    send,
  )

  test('a revoked token → 401 from the very next call', async () => {
    const { value, token } = await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])
    expectAccepted(await trigger(hook, value))
    expect((await runNow(env.store, revokeToken(env.clock, token, null)))).toBe(true)
    expect(expectError(await trigger(hook, value), 401, 'unauthorized').message).toContain('revoked')
  })

  test('an expired token → 401', async () => {
    const { value } = await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'], { expiresAt: env.clock.now() + 5_000 })
    expectAccepted(await trigger(hook, value))
    env.clock.advance(5_000)
    expect(expectError(await trigger(hook, value), 401, 'unauthorized').message).toContain('expired')
  })

})

describe('403: the token user may not run it', () => {
  const as = (token: () => string | Promise<string>, json: unknown = undefined) => async () => ({
    method: 'POST',
    path: hook,
    headers: { 'content-type': 'application/json', ...bearer(await token()) },
    body: json ?? { record_id: nextRecord() },
  })
  scenarios(
    [
      { name: 'a token of another project → 403 wrong_project', request: as(() => tokens.bobGlobex), status: 403, code: 'wrong_project' },
      { name: 'a token without workflows:trigger (notes:read only) → 403 insufficient_scope', request: as(() => tokens.bobNotes), status: 403, code: 'insufficient_scope' },
      ...([['notes:write'], ['activity_logs:read', 'admin_logs:read', 'notes:read', 'notes:write']] as Scope[][]).map(
        (scopes): Scenario => ({ name: `a token with ${scopes.join(' ')} → 403 insufficient_scope`, request: as(async () => (await tokenFor(env.store, env.clock, 'bob', scopes)).value), status: 403, code: 'insufficient_scope' }),
      ),
      // A user outside the team who is not a project admin (dave, Billing): even with workflows:trigger or all.
      { name: 'dave with workflows:trigger → 403 rendering_forbidden', request: as(() => tokens.dave), status: 403, code: 'rendering_forbidden' },
      { name: 'dave with all → 403 rendering_forbidden', request: as(() => tokens.daveAll), status: 403, code: 'rendering_forbidden' },
      { name: 'a 403 is decided before the body is looked at', request: as(() => tokens.dave, { record_id: '' }), status: 403, code: 'rendering_forbidden' },
    ],
    send,
  )

  test('a deactivated user → 403 user_deactivated', async () => {
    const bob = userId(env.store, 'bob')
    execute(env.store, 'UPDATE users SET disabled_at = ? WHERE id = ?', env.clock.now(), bob)
    try {
      expect(expectError(await trigger(hook, tokens.bob), 403, 'user_deactivated').error).toBe('Forbidden')
    } finally {
      execute(env.store, 'UPDATE users SET disabled_at = NULL WHERE id = ?', bob)
    }
    expectAccepted(await trigger(hook, tokens.bob))
  })

  test('`all` works', async () => {
    expectAccepted(await trigger(hook, tokens.bobAll))
  })

  test('a user removed from the team (not an admin) → 403', async () => {
    const { value } = await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])
    const bob = userId(env.store, 'bob')
    const membership = queryAll(env.store, 'SELECT * FROM team_members WHERE user_id = ?', bob) as { team_id: number; created_at: number }[]
    execute(env.store, 'DELETE FROM team_members WHERE user_id = ?', bob)
    try {
      expectError(await trigger(hook, value), 403, 'rendering_forbidden')
    } finally {
      for (const m of membership) {
        execute(env.store, 'INSERT INTO team_members (team_id, user_id, created_at) VALUES (?, ?, ?)', m.team_id, bob, m.created_at)
      }
    }
    expectAccepted(await trigger(hook, value))
  })

})

describe('404: nothing to trigger', () => {
  test('disabled trigger → 404 with URL and token unchanged; re-enabled → the same URL → 202', async () => {
    const before = await settings('GET', '')
    expect(before.body).toMatchObject({ enabled: true, url: `http://trellis.test${hook}` })
    const disabled = await settings('PATCH', '', { enabled: false })
    expect(disabled.body).toMatchObject({ enabled: false, url: null })

    expectError(await trigger(hook, tokens.bob), 404, 'not_found')
    // Order: the token is checked before the 404 …
    expectError(await trigger(hook, null), 401, 'unauthorized')
    // … and the 404 comes before the user's authorization (nothing to authorize).
    expectError(await trigger(hook, tokens.dave), 404, 'not_found')
    // The URL itself is still genuine, and not superseded.
    expect(verifyWebhookToken(env.secret, hook.slice('/v1/hooks/'.length))).not.toBeNull()

    const enabled = await settings('PATCH', '', { enabled: true })
    expect(enabled.body).toMatchObject({ enabled: true, url: `http://trellis.test${hook}` })
    expectAccepted(await trigger(hook, tokens.bob))
  })

  test('no active version → 404', async () => {
    const workflow = queryOne(env.store, "SELECT id, active_version_id FROM workflows WHERE name = 'Refund order'") as {
      id: number
      active_version_id: number
    }
    execute(env.store, 'UPDATE workflows SET active_version_id = NULL WHERE id = ?', workflow.id)
    try {
      expectError(await trigger(hook, tokens.bob), 404, 'not_found')
      expectError(await trigger(hook, null), 401, 'unauthorized')
    } finally {
      execute(env.store, 'UPDATE workflows SET active_version_id = ? WHERE id = ?', workflow.active_version_id, workflow.id)
    }
    expectAccepted(await trigger(hook, tokens.bob))
  })

  test('a genuine URL for a workflow that does not exist (deleted) → 404', async () => {
    const ghost = webhookToken(env.secret, { workflowId: 9_999, renderingId: 1, generation: 1 })
    expectError(await trigger(`/v1/hooks/${ghost}`, tokens.bob), 404, 'not_found')
    expectError(await trigger(`/v1/hooks/${ghost}`, null), 401, 'unauthorized')
  })

  test('a workflow whose webhook was never enabled → 404', async () => {
    const dunning = queryOne(env.store, "SELECT w.id, w.rendering_id AS r FROM workflows w WHERE w.name = 'Start dunning'") as { id: number; r: number }
    const path = `/v1/hooks/${webhookToken(env.secret, { workflowId: dunning.id, renderingId: dunning.r, generation: 1 })}`
    expectError(await trigger(path, tokens.alice), 404, 'not_found')
  })
})

describe('409: one active run per workflow and record', () => {
  test('a second request on a record with an active run → 409 {error, code: run_in_progress, runId}; nothing started or resumed', async () => {
    const record = nextRecord()
    const runId = expectAccepted(await trigger(hook, tokens.bob, { record_id: record }))
    const before = runRow(runId)
    const conflict = expectError(await trigger(hook, tokens.bob, { record_id: record }), 409, 'run_in_progress')
    expect(conflict).toMatchObject({ error: 'Conflict', runId })
    // Another user, another token: still the same active run.
    expect(expectError(await trigger(hook, tokens.alice, { record_id: record }), 409, 'run_in_progress').runId).toBe(runId)
    expect(runRow(runId)).toEqual(before)
    expect(count('SELECT count(*) AS n FROM runs WHERE record_id = ?', record)).toBe(1)
    // Another workflow on the same record is independent.
    expectAccepted(await trigger(pingHook, tokens.bob, { record_id: record }))
    // Once the active run finishes (here: cancelled), a new request starts a fresh run.
    const cancelled = await send(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: bearer(tokens.bob) }))
    expect(cancelled.body).toMatchObject({ status: 'cancelled' })
    const fresh = expectAccepted(await trigger(hook, tokens.bob, { record_id: record }))
    expect(fresh).not.toBe(runId)
    expect(expectError(await trigger(hook, tokens.bob, { record_id: record }), 409, 'run_in_progress').runId).toBe(fresh)
  })

  test('the race: 500 concurrent requests on one record → exactly one 202 and 499 × 409 naming it', async () => {
    expect((await settings('PATCH', '', { ratePerMinute: 100_000 })).body).toMatchObject({ effectiveRatePerMinute: 100_000 })
    try {
      const activityBefore = count("SELECT count(*) AS n FROM activity_logs WHERE action = 'triggerWorkflow'")
      const responses = await Promise.all(Array.from({ length: 500 }, () => trigger(hook, tokens.bob, { record_id: 'race-1' })))
      const accepted = responses.filter((r) => r.status === 202)
      const conflicts = responses.filter((r) => r.status === 409)
      expect({ accepted: accepted.length, conflicts: conflicts.length }).toEqual({ accepted: 1, conflicts: 499 })
      const runId = accepted[0]!.body!.runId as string
      expect(new Set(conflicts.map((r) => r.body!.runId))).toEqual(new Set([runId]))
      expect(conflicts.every((r) => r.body!.code === 'run_in_progress')).toBe(true)
      expect(count("SELECT count(*) AS n FROM runs WHERE record_id = 'race-1' AND status IN ('queued', 'running', 'waiting')")).toBe(1)
      expect(count("SELECT count(*) AS n FROM runs WHERE record_id = 'race-1'")).toBe(1)
      expect(count("SELECT count(*) AS n FROM activity_logs WHERE action = 'triggerWorkflow'")).toBe(activityBefore + 1)
    } finally {
      await settings('PATCH', '', { ratePerMinute: null })
    }
  })

  sqliteOnlyTest(SQLITE_ONLY.groupCommit, 'concurrent triggers on different records share group commits: every one answered 202 with its run and entry committed', async () => {
    expect((await settings('PATCH', '', { ratePerMinute: 100_000 })).body).toMatchObject({ effectiveRatePerMinute: 100_000 })
    try {
      const store = sqliteOf(env.store, SQLITE_ONLY.groupCommit)
      const before = { ...store.committed }
      const records = Array.from({ length: 100 }, (_, i) => `group-${i}`)
      const responses = await Promise.all(records.map((record) => trigger(hook, tokens.bob, { record_id: record })))
      expect(responses.map((r) => r.status)).toEqual(records.map(() => 202))
      const transactions = store.committed.transactions - before.transactions
      expect(transactions).toBeGreaterThanOrEqual(1)
      expect(transactions).toBeLessThan(records.length)
      for (const [i, record] of records.entries()) {
        const runId = responses[i]!.body!.runId as string
        expect(queryAll(env.store, 'SELECT record_id AS record FROM runs WHERE id = ?', runId)).toEqual([{ record }])
        expect(queryOne(env.store, "SELECT count(*) AS n FROM activity_logs WHERE run_id = ? AND action = 'triggerWorkflow'", runId)).toEqual({ n: 1 })
      }
    } finally {
      await settings('PATCH', '', { ratePerMinute: null })
    }
  })
})

describe('activity log', () => {
  test('one triggerWorkflow entry "triggered via webhook" with the token user, the token and the run; a 409 writes none', async () => {
    const { value, token } = await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])
    const runId = expectAccepted(await trigger(hook, value, { record_id: 'logged-1' }))
    const entries = queryAll(env.store, 'SELECT * FROM activity_logs WHERE run_id = ?', runId) as Record<string, unknown>[]
    expect(entries).toHaveLength(1)
    expect(entries[0]).toMatchObject({
      type: 'write',
      action: 'triggerWorkflow',
      label: 'triggered via webhook',
      user_id: userId(env.store, 'bob'),
      token_id: token.id,
      workflow_name: 'Refund order',
      run_id: runId,
      step_name: null,
    })
    const records = queryAll(env.store, 'SELECT record_id FROM activity_log_records WHERE log_id = ?', entries[0]!.id as number)
    expect(records).toEqual([{ record_id: 'logged-1' }])
    const total = count('SELECT count(*) AS n FROM activity_logs')
    expectError(await trigger(hook, value, { record_id: 'logged-1' }), 409, 'run_in_progress')
    expect(count('SELECT count(*) AS n FROM activity_logs')).toBe(total)
  })

  sqliteOnlyTest(SQLITE_ONLY.tempTrigger, 'the run and its entry are written in one transaction: when the entry cannot be written, no run exists', async () => {
    const runsBefore = count('SELECT count(*) AS n FROM runs')
    execute(env.store, "CREATE TEMP TRIGGER refuse_trigger_log BEFORE INSERT ON activity_logs WHEN NEW.action = 'triggerWorkflow' BEGIN SELECT RAISE(ABORT, 'no log today'); END",)
    try {
      const sent = await trigger(hook, tokens.bob, { record_id: 'atomic-1' })
      expect(sent.status).toBe(500)
    } finally {
      execute(env.store, 'DROP TRIGGER refuse_trigger_log')
    }
    expect(count('SELECT count(*) AS n FROM runs')).toBe(runsBefore)
    // The record is not blocked by a half-written run.
    expectAccepted(await trigger(hook, tokens.bob, { record_id: 'atomic-1' }))
  })
})

describe('429: the webhook rate', () => {
  test('ratePerMinute 3 → the 4th call is 429 with Retry-After in whole seconds; 20 s later one more is allowed', async () => {
    expect((await settings('PATCH', '', { ratePerMinute: 3 })).body).toMatchObject({ ratePerMinute: 3, effectiveRatePerMinute: 3 })
    try {
      for (let i = 0; i < 3; i++) expectAccepted(await trigger(hook, tokens.bob))
      const limited = await trigger(hook, tokens.bob)
      const body = expectError(limited, 429, 'rate_limited')
      const retryAfter = limited.headers.get('retry-after')!
      expect(retryAfter).toMatch(/^\d+$/)
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1)
      expect(Number(retryAfter)).toBe(20)
      expect(body.retry_after).toBe(20)
      // Failed authentication and bad URLs are answered as such (checked before the rate) and take nothing.
      expectError(await trigger(hook, null), 401, 'unauthorized')
      expectError(await trigger(hook, tokens.dave), 403, 'rendering_forbidden')
      // The rate is per webhook: the other workflow is not limited.
      expectAccepted(await trigger(pingHook, tokens.bob))
      // Half-way the wait shrinks.
      env.clock.advance(10_000)
      expect((await trigger(hook, tokens.bob)).headers.get('retry-after')).toBe('10')
      env.clock.advance(10_000)
      expectAccepted(await trigger(hook, tokens.bob))
      expectError(await trigger(hook, tokens.bob), 429, 'rate_limited')
      // A 429 is decided before the body.
      expectError(await trigger(hook, tokens.bob, { record_id: '' }), 429, 'rate_limited')
    } finally {
      expect((await settings('PATCH', '', { ratePerMinute: null })).body).toMatchObject({ ratePerMinute: null, effectiveRatePerMinute: 60 })
    }
  })

  test('the default is 60 per minute', async () => {
    let accepted = 0
    let limited: Sent | undefined
    for (let i = 0; i < 61 && !limited; i++) {
      const sent = await trigger(hook, tokens.bob)
      if (sent.status === 202) accepted++
      else limited = sent
    }
    expect(accepted).toBe(60)
    expect(limited!.status).toBe(429)
    expect(limited!.headers.get('retry-after')).toBe('1')
  })
})

describe('re-publication and regeneration', () => {
  test('publishing a new version keeps the URL; new runs use the latest active version', async () => {
    const published = await send(
      request(REFUND, {
        method: 'PUT',
        headers: bearer(tokens.alice),
        json: {
          collection: 'orders',
          steps: [{ type: 'load' }, { type: 'update', set: { status: 'refunded' } }],
        },
      }),
    )
    expect(published.body).toMatchObject({ version: 2, outcome: 'published', webhook: { enabled: true, url: `http://trellis.test${hook}` } })
    const runId = expectAccepted(await trigger(hook, tokens.bob))
    const seen = await send(request(`/v1/workflow-runs/${runId}`, { headers: bearer(tokens.bob) }))
    expect(seen.body).toMatchObject({ workflow: { name: 'Refund order', version: 2 } })
  })

  test('regenerate → the old URL is 400 webhook_url_superseded (even without a token), the new one works', async () => {
    const old = hook
    const regenerated = await settings('POST', '/regenerate')
    expect(regenerated.status).toBe(200)
    const fresh = hookPath(regenerated.body!.url as string)
    expect(fresh).not.toBe(old)
    expect(verifyWebhookToken(env.secret, fresh.slice('/v1/hooks/'.length))!.generation).toBe(2)
    expectError(await trigger(old, tokens.bob), 400, 'webhook_url_superseded')
    expectError(await trigger(old, null), 400, 'webhook_url_superseded')
    hook = fresh
    expectAccepted(await trigger(hook, tokens.bob))
    // Disable + enable restores this (new) URL, not the old one.
    await settings('PATCH', '', { enabled: false })
    expect((await settings('PATCH', '', { enabled: true })).body!.url).toBe(`http://trellis.test${hook}`)
    expectAccepted(await trigger(hook, tokens.bob))
    // Only project admins manage the trigger.
    const byEditor = await send(request(`${REFUND}/webhook/regenerate`, { method: 'POST', headers: bearer(tokens.bobAll) }))
    expect(byEditor.status).toBe(403)
    expectAccepted(await trigger(hook, tokens.bob))
  })
})

/** The HTTP shell: health, the one error body, body limits, the first-admin setup, the request log, a real `serve`. */
import { afterEach, describe, expect, test } from 'bun:test'
import { chmodSync, statSync } from 'node:fs'
import { createLogger } from '../src/lib/logger.ts'
import { withRequestLog } from '../src/http/request-log.ts'
import { SetupGate } from '../src/modules/setup/service.ts'
import { bearer, execute, queryAll, queryOne, request, SQLITE_ONLY, sqliteOnlyTest, startServe, tempDir, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, applyAcme, tokenFor } from './support/acme.ts'
import { expectErrorResponse } from './support/scenarios.ts'

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})

function env(vars: Record<string, string> = {}): TestEnv {
  const created = testEnv(vars)
  cleanups.push(created.cleanup)
  return created
}

/** A fresh instance with no users and an open setup gate. */
function setupInstance(vars: Record<string, string> = {}) {
  const e = env(vars)
  const { gate, token } = SetupGate.open()
  return { env: e, app: testApp(e, { setupGate: gate }), token }
}

/** The DESIGN §5 body: string `error`, `code`, `message` and nothing else but `details` (exactly on validation_failed). */
const expectError = (response: Response, status: number, code: string) => expectErrorResponse(response, status, code, code === 'validation_failed' ? ['details'] : [])

const admin = { email: 'ada@example.com', username: 'ada', password: 'correct horse battery staple' }

describe('health', () => {
  test('GET /healthz → 200 {status: ok}', async () => {
    const response = await testApp(env()).handle(request('/healthz'))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ok' })
  })

  test('GET /readyz → 200 when the database answers and every migration is applied', async () => {
    const response = await testApp(env()).handle(request('/readyz'))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ready' })
  })

  test('GET /readyz → 503 not_ready with pending migrations or a closed database', async () => {
    const e = env()
    execute(e.store, 'DELETE FROM trellis_migrations')
    const app = testApp(e)
    expect((await expectError(await app.handle(request('/readyz')), 503, 'not_ready')).message).toContain('Pending migrations')
    e.store.close()
    expect((await expectError(await app.handle(request('/readyz')), 503, 'not_ready')).message).toContain('Database unavailable')
  })
})

describe('error bodies', () => {
  test.each([
    ['GET', '/no-such-route'],
    ['GET', '/definitely/not/a/route/at/all/even/deeper'],
    ['POST', '/no-such-route'],
    ['POST', '/deep/unknown/path/with/segments'],
    ['PATCH', '/setup/extra'],
  ])('%s %s → 404 not_found', async (method, path) => {
    const init = method === 'GET' ? { method } : { method, json: { a: 1 } }
    const body = await expectError(await testApp(env()).handle(request(path, init)), 404, 'not_found')
    expect(body.error).toBe('Not Found')
    expect(body.message).toContain(path)
  })

  test.each([
    ['PUT', '/healthz', 'GET, HEAD'],
    ['DELETE', '/setup', 'GET, HEAD, POST'],
  ])('%s %s (a known path) → 405 method_not_allowed with Allow: %s', async (method, path, allow) => {
    const response = await testApp(env()).handle(request(path, { method, json: { a: 1 } }))
    expect(response.headers.get('allow')).toBe(allow)
    const body = await expectError(response, 405, 'method_not_allowed')
    expect(body.error).toBe('Method Not Allowed')
    expect(body.message).toContain(path)
  })

  test('a query string is not echoed into the 404 message', async () => {
    const body = await expectError(await testApp(env()).handle(request('/nothing?token=secret-value')), 404, 'not_found')
    expect(body.message).not.toContain('secret-value')
  })

  test('an unexpected exception → 500 internal_error without its detail; the log gets the detail', async () => {
    const lines: string[] = []
    const app = testApp(env(), { logger: createLogger('error', (line) => lines.push(line)) }).get('/boom', () => {
      throw new Error('database password is hunter2')
    })
    const body = await expectError(await app.handle(request('/boom')), 500, 'internal_error')
    expect(body.error).toBe('Internal Server Error')
    expect(JSON.stringify(body)).not.toContain('hunter2')
    expect(lines.length).toBe(1)
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'error', msg: 'unhandled error', method: 'GET', path: '/boom' })
    expect(lines[0]).toContain('hunter2')
  })
})

describe('every answer says nosniff', () => {
  test.each([
    ['GET', '/healthz', 200],
    ['GET', '/openapi.json', 200],
    ['GET', '/v1/account', 401],
    ['GET', '/no-such-route', 404],
    ['PUT', '/healthz', 405],
    ['POST', '/auth/login', 400],
    ['GET', '/login', 200],
  ])('%s %s → %d with X-Content-Type-Options: nosniff', async (method, path, status) => {
    const init = method === 'GET' ? { method } : { method, body: '{', headers: { 'content-type': 'application/json' } }
    const response = await testApp(env()).handle(request(path, init))
    expect(response.status).toBe(status)
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
  })
})

describe('request bodies', () => {
  /** Like a real client: a string body carries its Content-Length (a bare `new Request` has none). */
  const postSetup = (body: string | ReadableStream<Uint8Array>, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    typeof body === 'string'
      ? request('/setup', { method: 'POST', body, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } })
      : new Request('http://localhost/setup', { method: 'POST', body, headers, duplex: 'half' } as RequestInit)

  test.each(['{bad', '{"token": "x",}', "{'token': 'x'}", '[1, 2', 'nul', '\xff\xfe{}', ' '])('malformed JSON %p → 400 invalid_json', async (text) => {
    const body = await expectError(await testApp(env()).handle(postSetup(text)), 400, 'invalid_json')
    expect(body.error).toBe('Bad Request')
  })

  test('+json media types are parsed strictly too', async () => {
    await expectError(await testApp(env()).handle(postSetup('{', { 'content-type': 'application/merge-patch+json' })), 400, 'invalid_json')
  })

  test.each([
    ['token', { ...admin, token: 123 }],
    ['email', { ...admin, token: 't', email: ['ada@example.com'] }],
    ['username', { ...admin, token: 't', username: null }],
    ['password', { ...admin, token: 't', password: { value: 'x' } }],
    ['password', { token: 't', email: admin.email, username: admin.username }],
    ['token', { ...admin, token: 'x'.repeat(201) }],
    ['password', { ...admin, token: 't', password: 'p'.repeat(1025) }],
  ])('wrong type or size → 400 validation_failed naming %p', async (field, json) => {
    const body = await expectError(await testApp(env()).handle(request('/setup', { method: 'POST', json })), 400, 'validation_failed')
    expect(body.message).toContain(`'${field}'`)
    expect(body.details?.[0]?.field).toBe(field)
    for (const detail of body.details ?? []) {
      expect(typeof detail.field).toBe('string')
      expect(typeof detail.message).toBe('string')
    }
  })

  // An object whose `toString` is data has no text form, and Elysia writes the refused value into its error that way:
  // without `withTextForm` (src/http/body.ts) these would be 500s.
  test.each([
    ['email', `{"email":{"toString":1},"token":"t","username":"ada","password":"p"}`],
    ['email', `{"email":{"toStr\\u0069ng":"x","valueOf":2},"token":"t","username":"ada","password":"p"}`],
    ['username', `{"username":[{"toString":null}],"token":"t","email":"ada@example.com","password":"p"}`],
  ])('an object with a `toString` field where text belongs → 400 validation_failed naming %p', async (field, text) => {
    const body = await expectError(await testApp(env()).handle(postSetup(text)), 400, 'validation_failed')
    expect(body.details?.[0]?.field).toBe(field)
  })

  test('a record whose data has `toString` and `valueOf` fields is stored as sent', async () => {
    const e = env()
    await applyAcme({ store: e.store, clock: e.clock, secret: e.secret, baseUrl: e.config.baseUrl }, acmeDocument())
    const { value } = await tokenFor(e.store, e.clock, 'alice', ['all'])
    const data = '{"toString":"x","valueOf":{"toString":[1]},"toStr\\u0069ng2":2}'
    const response = await testApp(e).handle(
      request('/v1/project/Acme/environment/production/collection/orders/records/ord_9', { method: 'PUT', headers: { ...bearer(value), 'content-type': 'application/json' }, body: `{"teamName":"Support","data":${data}}` }),
    )
    expect(response.status).toBeLessThan(300)
    const stored = queryOne<{ data: string }>(e.store, 'SELECT data FROM records WHERE record_key = ?', 'ord_9')
    expect(JSON.parse(stored!.data)).toEqual(JSON.parse(data))
  })

  test.each([
    ['an array', [1]],
    ['null', null],
    ['a string', 'token'],
    ['a number', 42],
  ])('a JSON body that is %s → 400 validation_failed', async (_, json) => {
    await expectError(await testApp(env()).handle(request('/setup', { method: 'POST', json })), 400, 'validation_failed')
  })

  test('Content-Length over TRELLIS_MAX_BODY_BYTES → 413 payload_too_large', async () => {
    const e = env({ TRELLIS_MAX_BODY_BYTES: '2048' })
    expect(e.config.maxBodyBytes).toBe(2048)
    const app = testApp(e)
    const big = JSON.stringify({ ...admin, token: 't', pad: 'x'.repeat(3000) })
    const body = await expectError(await app.handle(postSetup(big)), 413, 'payload_too_large')
    expect(body.error).toBe('Payload Too Large')
    expect(body.message).toContain('2048')
    // Refused on the header alone, whatever the content type, on any path.
    await expectError(await app.handle(postSetup('x'.repeat(2049), { 'content-type': 'text/plain' })), 413, 'payload_too_large')
    await expectError(await app.handle(request('/no-such-route', { method: 'POST', body: 'x'.repeat(4096), headers: { 'content-length': '4096' } })), 413, 'payload_too_large')
    // A Content-Length that understates the body (a Request made in process: a real server reads only what it says).
    await expectError(await app.handle(postSetup(big, { 'content-length': '10' })), 413, 'payload_too_large')
  })

  test('a body of exactly the limit is read; one byte more is not', async () => {
    const app = testApp(env({ TRELLIS_MAX_BODY_BYTES: '1024' }))
    const exactly = (size: number) => {
      const base = JSON.stringify({ ...admin, token: 'wrong', password: '' })
      return JSON.stringify({ ...admin, token: 'wrong', password: 'x'.repeat(size - base.length) })
    }
    expect(exactly(1024).length).toBe(1024)
    await expectError(await app.handle(postSetup(exactly(1024))), 403, 'invalid_setup_token')
    await expectError(await app.handle(postSetup(exactly(1025))), 413, 'payload_too_large')
    await expectError(await app.handle(postSetup(streamOf(exactly(1024), 100))), 403, 'invalid_setup_token')
    await expectError(await app.handle(postSetup(streamOf(exactly(1025), 100))), 413, 'payload_too_large')
  })

  test('a streamed body without Content-Length over the limit → 413', async () => {
    const app = testApp(env({ TRELLIS_MAX_BODY_BYTES: '2048' }))
    const streamed = new Request('http://localhost/setup', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: streamOf(`"${'x'.repeat(10_000)}"`, 500),
      duplex: 'half',
    } as RequestInit)
    expect(streamed.headers.get('content-length')).toBeNull()
    await expectError(await app.handle(streamed), 413, 'payload_too_large')
  })

  test('a streamed body within the limit is parsed as usual', async () => {
    const { app, token } = setupInstance({ TRELLIS_MAX_BODY_BYTES: '2048' })
    const streamed = new Request('http://localhost/setup', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: streamOf(JSON.stringify({ ...admin, token }), 7),
      duplex: 'half',
    } as RequestInit)
    expect(streamed.headers.get('content-length')).toBeNull()
    expect((await app.handle(streamed)).status).toBe(201)
  })
})

/** The text as a ReadableStream in chunks of `size` bytes (a request body without Content-Length). */
function streamOf(text: string, size: number): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text)
  let offset = 0
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) return controller.close()
      controller.enqueue(bytes.slice(offset, offset + size))
      offset += size
    },
  })
}

describe('setup (first administrator)', () => {
  const postSetup = (json: unknown) => request('/setup', { method: 'POST', json })

  test('GET /setup with the link\'s token → 200 HTML page with the form, not cached; a used or unknown link → a page saying so, no form', async () => {
    const { app, token } = setupInstance()
    const response = await app.handle(request(`/setup?token=${token}`))
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toStartWith('text/html')
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(await response.text()).toContain('<form id="setup">')
    for (const [label, answer] of [
      ['wrong token', await app.handle(request(`/setup?token=${token}x`))],
      ['no token', await app.handle(request('/setup'))],
      ['set up already (no gate)', await testApp(env()).handle(request(`/setup?token=${token}`))],
    ] as const) {
      const page = await answer.text()
      expect({ label, status: answer.status, form: page.includes('<form') }).toEqual({ label, status: 200, form: false })
      expect(page).toContain('This setup link does not work')
      expect(answer.headers.get('cache-control')).toBe('no-store')
    }
  })

  test('without an open gate (instance already set up) every token → 403', async () => {
    await expectError(await testApp(env()).handle(postSetup({ ...admin, token: 'anything' })), 403, 'invalid_setup_token')
  })

  test('wrong token → 403 invalid_setup_token, checked before the fields', async () => {
    const { app, token } = setupInstance()
    const body = await expectError(await app.handle(postSetup({ ...admin, token: `${token}x` })), 403, 'invalid_setup_token')
    expect(body.error).toBe('Forbidden')
    await expectError(await app.handle(postSetup({ ...admin, password: 'short', token: 'nope' })), 403, 'invalid_setup_token')
    await expectError(await app.handle(postSetup({ ...admin, token: '' })), 403, 'invalid_setup_token')
  })

  test.each([
    ['password', { password: 'elevenchars' }],
    ['password', { password: '' }],
    ['email', { email: 'not-an-email' }],
    ['email', { email: 'ada@example' }],
    ['email', { email: 'a b@example.com' }],
    ['username', { username: '   ' }],
  ])('invalid %s → 400 validation_failed naming it; the token stays usable', async (field, change) => {
    const { env: e, app, token } = setupInstance()
    const body = await expectError(await app.handle(postSetup({ ...admin, ...change, token })), 400, 'validation_failed')
    expect(body.details).toEqual([{ field, message: expect.any(String) }])
    expect(body.message).toBe(`Invalid field '${field}': ${body.details![0]!.message}`)
    expect(queryOne(e.store, 'SELECT count(*) AS n FROM users')).toEqual({ n: 0 })
    expect((await app.handle(postSetup({ ...admin, token }))).status).toBe(201)
  })

  test('correct token → 201 user; instance admin with a hashed password; the token is then spent', async () => {
    const { env: e, app, token } = setupInstance()
    const response = await app.handle(postSetup({ ...admin, email: '  Ada@Example.COM ', token }))
    expect(response.status).toBe(201)
    const body = (await response.json()) as { user: Record<string, unknown> }
    expect(body).toEqual({ user: { object: 'user', id: expect.any(Number), username: 'ada', email: 'ada@example.com' } })

    const rows = queryAll(e.store, 'SELECT * FROM users') as Record<string, unknown>[]
    expect(rows.length).toBe(1)
    const row = rows[0]!
    expect(row.id).toBe(body.user.id)
    expect(row.is_instance_admin).toBe(1)
    expect(row.disabled_at).toBeNull()
    expect(row.created_at).toBe(e.clock.now())
    const hash = row.password_hash as string
    expect(hash).not.toBe(admin.password)
    expect(hash).not.toContain(admin.password)
    expect(hash).toStartWith('$argon2id$')
    expect(Bun.password.verifySync(admin.password, hash)).toBe(true)

    await expectError(await app.handle(postSetup({ ...admin, email: 'eve@example.com', token })), 403, 'invalid_setup_token')
    expect(queryOne(e.store, 'SELECT count(*) AS n FROM users')).toEqual({ n: 1 })
  })

  test('two requests racing with the same token create one user', async () => {
    const { env: e, app, token } = setupInstance()
    const responses = await Promise.all([
      app.handle(postSetup({ ...admin, token })),
      app.handle(postSetup({ ...admin, email: 'eve@example.com', token })),
    ])
    expect(responses.map((r) => r.status).sort()).toEqual([201, 403])
    expect(queryOne(e.store, 'SELECT count(*) AS n FROM users')).toEqual({ n: 1 })
  })

  test('a user created meanwhile (CLI) → 409 already_set_up, and nothing is written', async () => {
    const { env: e, app, token } = setupInstance()
    execute(e.store, "INSERT INTO users (email, username, created_at, updated_at) VALUES ('cli@example.com', 'cli', 1, 1)")
    await expectError(await app.handle(postSetup({ ...admin, token })), 409, 'already_set_up')
    expect(queryAll(e.store, 'SELECT email FROM users')).toEqual([{ email: 'cli@example.com' }])
  })

  const hostile = [
    "'; DROP TABLE users; --",
    "Robert'); DELETE FROM users WHERE ('1'='1",
    '" OR 1=1 --',
    'Zoë Ångström 日本語 🚀',
    'שלום\u202Eevil',
    '\u0000nul',
    '\ud800 lone surrogate',
    '%00%27',
    '<script>alert(1)</script>',
  ]

  test.each(hostile)('hostile text %p in any field never gives a 500', async (text) => {
    const { env: e, app, token } = setupInstance()
    await expectError(await app.handle(postSetup({ ...admin, token: text })), 403, 'invalid_setup_token')
    await expectError(await app.handle(postSetup({ token: text, email: text, username: text, password: text })), 403, 'invalid_setup_token')
    await expectError(await app.handle(postSetup({ ...admin, email: text, token })), 400, 'validation_failed')
    await expectError(await app.handle(postSetup({ email: text, username: text, password: text, token })), 400, 'validation_failed')
    // As a username and inside a password it is accepted and stored as given (control characters and lone
    // surrogates — no store holds one as sent — in a username are refused with a 400 naming it);
    // the users table is still there.
    const password = `${text} and long enough`
    if (/[\u0000-\u001f]/.test(text) || !text.isWellFormed()) {
      await expectError(await app.handle(postSetup({ ...admin, username: `x${text}`, password, token })), 400, 'validation_failed')
      return
    }
    const response = await app.handle(postSetup({ ...admin, username: `x${text}`, password, token }))
    expect(response.status).toBe(201)
    const stored = queryAll(e.store, 'SELECT username, password_hash FROM users') as { username: string; password_hash: string }[]
    expect(stored.length).toBe(1)
    expect(stored[0]!.username).toBe(`x${text}`.trim())
    expect(Bun.password.verifySync(password, stored[0]!.password_hash)).toBe(true)
  })

  test('hostile text as a unicode email local part is stored as sent (lower-cased)', async () => {
    const { env: e, app, token } = setupInstance()
    const response = await app.handle(postSetup({ ...admin, email: "O'Brien+Zoë@Example.com", token }))
    expect(response.status).toBe(201)
    expect(queryAll(e.store, 'SELECT email FROM users')).toEqual([{ email: "o'brien+zoë@example.com" }])
  })
})

describe('request log', () => {
  function capture() {
    const lines: { line: string; isError: boolean }[] = []
    return { lines, logger: createLogger('info', (line, isError) => lines.push({ line, isError })) }
  }

  test('withRequestLog writes exactly one JSON line: method, path without query, status, ms', async () => {
    const { lines, logger } = capture()
    const handle = withRequestLog((r) => testApp(env()).handle(r), logger)
    const response = await handle(request('/healthz?token=secret-token-value&x=1'))
    expect(response.status).toBe(200)
    expect(lines.length).toBe(1)
    expect(lines[0]!.isError).toBe(false)
    expect(lines[0]!.line).not.toContain('\n')
    expect(lines[0]!.line).not.toContain('secret-token-value')
    const entry = JSON.parse(lines[0]!.line)
    expect(entry).toEqual({ time: expect.any(String), level: 'info', msg: 'request', method: 'GET', path: '/healthz', status: 200, ms: expect.any(Number) })
    expect(entry.ms).toBeGreaterThanOrEqual(0)
    expect(new Date(entry.time).toISOString()).toBe(entry.time)
  })

  test('the logged status is the response status; the webhook signature never reaches the log', async () => {
    const { lines, logger } = capture()
    const handle = withRequestLog((r) => testApp(env()).handle(r), logger)
    await handle(request('/v1/hooks/eyJ2IjoxfQ.THE-SIGNATURE?x=THE-QUERY', { method: 'POST', json: { record_id: '1' } }))
    await handle(request('/setup', { method: 'POST', body: '{', headers: { 'content-type': 'application/json' } }))
    expect(lines.map((l) => JSON.parse(l.line))).toMatchObject([
      { method: 'POST', path: '/v1/hooks/eyJ2IjoxfQ.[redacted]', status: 400 },
      { method: 'POST', path: '/setup', status: 400 },
    ])
    expect(lines.map((l) => l.line).join('\n')).not.toMatch(/THE-SIGNATURE|THE-QUERY/)
  })

  test('whatever spelling the router accepts for a webhook token, the log never holds its signature', async () => {
    const { lines, logger } = capture()
    // The real webhook route answers these (forged) tokens with 400 invalid_webhook_url — after routing them.
    const handle = withRequestLog((r) => testApp(env()).handle(r), logger)
    for (const path of ['/v1/hooks/PAYLOAD.SIGNATURE', '/v1/hooks/PAYLOAD%2ESIGNATURE', '/v1/hooks/PAYLOAD%2eSIGNATURE', '/v1/hooks/PAYLOAD.SIGNATURE/', '/v1/./hooks/PAYLOAD.SIGNATURE']) {
      const response = await handle(request(path, { method: 'POST' }))
      expect(response.status).toBe(400)
      expect(((await response.json()) as { code: string }).code).toBe('invalid_webhook_url')
    }
    expect(lines.length).toBe(5)
    expect(lines.map((l) => l.line).join('\n')).not.toContain('SIGNATURE')
  })

  test('a slash instead of the dot (404) and a token the router cannot decode (`%eyJ…`) are answered and logged without the signature', async () => {
    const { lines, logger } = capture()
    const handle = withRequestLog((r) => testApp(env()).handle(r), logger)
    const slash = await handle(request('/v1/hooks/eyJ2IjoxfQ/SIGNATURE', { method: 'POST', json: { record_id: '1' } }))
    expect(slash.status).toBe(404)
    for (const path of ['/v1/hooks/%eyJ2IjoxfQ.SIGNATURE', '/v1/hooks/%E0%A4%A.SIGNATURE', '/v1/hooks/%']) {
      const response = await handle(request(path, { method: 'POST', json: { record_id: '1' } }))
      expect({ path, status: response.status, code: ((await response.json()) as { code: string }).code }).toEqual({ path, status: 400, code: 'invalid_webhook_url' })
    }
    expect(lines.map((l) => JSON.parse(l.line).path)).toEqual(['/v1/hooks/eyJ2IjoxfQ.[redacted]', '/v1/hooks/.[redacted]', '/v1/hooks/.[redacted]', '/v1/hooks/.[redacted]'])
    expect(lines.map((l) => l.line).join('\n')).not.toContain('SIGNATURE')
  })

  test('a handler that throws is logged once as 500 and the error still propagates', async () => {
    const { lines, logger } = capture()
    const handle = withRequestLog(() => {
      throw new Error('boom')
    }, logger)
    await expect(handle(request('/x'))).rejects.toThrow('boom')
    expect(lines.map((l) => JSON.parse(l.line))).toMatchObject([{ msg: 'request', path: '/x', status: 500 }])
  })

  test('log level above info writes nothing', async () => {
    const lines: string[] = []
    const handle = withRequestLog((r) => testApp(env()).handle(r), createLogger('warn', (line) => lines.push(line)))
    await handle(request('/healthz'))
    expect(lines).toEqual([])
  })
})

describe('a real `trellis serve` process', () => {
  sqliteOnlyTest(SQLITE_ONLY.ownDataDir, 'first start prints a one-time setup link; it creates the admin; a restart prints none; JSON request log; SIGTERM exits 0', async () => {
    const data = tempDir('trellis-serve-data-')
    const cwd = tempDir('trellis-serve-cwd-')
    cleanups.push(data.cleanup, cwd.cleanup)

    const first = await startServe({ dataDir: data.path, cwd: cwd.path })
    let code: number
    try {
      const stdout = await first.waitForOutput('/setup?token=')
      const link = stdout.match(/(http:\/\/\S+)\/setup\?token=([A-Za-z0-9_-]+)/)
      expect(link).not.toBeNull()
      expect(link![1]).toBe(first.url)
      const token = link![2]!

      const page = await fetch(`${first.url}/setup?token=${token}`)
      expect(page.status).toBe(200)
      expect(page.headers.get('content-type')).toStartWith('text/html')

      const wrong = await fetch(`${first.url}/setup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...admin, token: 'guess' }) })
      expect(wrong.status).toBe(403)

      // Chunked (no Content-Length) over the default 1 MiB limit: our JSON 413, not Bun's.
      const chunked = await fetch(`${first.url}/setup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: streamOf(`"${'x'.repeat(1_100_000)}"`, 65_536),
        duplex: 'half',
      } as RequestInit)
      expect(chunked.status).toBe(413)
      expect(await chunked.json()).toMatchObject({ code: 'payload_too_large' })

      const created = await fetch(`${first.url}/setup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...admin, token }) })
      expect(created.status).toBe(201)
      expect(await created.json()).toMatchObject({ user: { object: 'user', email: admin.email } })
      const again = await fetch(`${first.url}/setup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...admin, token }) })
      expect(again.status).toBe(403)

      expect((await fetch(`${first.url}/healthz?probe=1`)).status).toBe(200)
      const missing = await fetch(`${first.url}/nowhere`)
      expect(missing.status).toBe(404)
      expect(await missing.json()).toMatchObject({ error: 'Not Found', code: 'not_found' })
      await first.waitForOutput('"path":"/nowhere"')
    } finally {
      code = await first.stop('SIGTERM')
    }
    expect({ code, stderr: first.stderr() }).toEqual({ code: 0, stderr: '' })

    const logLines = first
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    const requests = logLines.filter((entry) => entry.msg === 'request')
    expect(requests.length).toBeGreaterThanOrEqual(8)
    for (const entry of requests) {
      expect([typeof entry.method, typeof entry.path, typeof entry.status, typeof entry.ms]).toEqual(['string', 'string', 'number', 'number'])
      expect(entry.level).toBe('info')
      expect(String(entry.path)).not.toContain('?')
    }
    expect(requests).toContainEqual(expect.objectContaining({ method: 'POST', path: '/setup', status: 201 }))
    expect(requests).toContainEqual(expect.objectContaining({ method: 'POST', path: '/setup', status: 413 }))
    expect(requests).toContainEqual(expect.objectContaining({ method: 'GET', path: '/healthz', status: 200 }))
    expect(requests).toContainEqual(expect.objectContaining({ method: 'GET', path: '/nowhere', status: 404 }))
    expect(logLines).toContainEqual(expect.objectContaining({ msg: 'shutting down', signal: 'SIGTERM' }))
    // The token was printed once, as the link; it is not in any log line.
    const token = first.stdout().match(/\/setup\?token=([A-Za-z0-9_-]+)/)![1]!
    expect(logLines.filter((entry) => JSON.stringify(entry).includes(token))).toEqual([])

    const second = await startServe({ dataDir: data.path, cwd: cwd.path })
    try {
      await second.waitForOutput('"msg":"listening"')
      const setup = await fetch(`${second.url}/setup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...admin, token }) })
      expect(setup.status).toBe(403)
    } finally {
      code = await second.stop('SIGTERM')
    }
    expect(code).toBe(0)
    expect(second.stdout()).not.toContain('/setup?token=')
    expect(second.stdout()).not.toContain('no users yet')
  }, 60_000)

  sqliteOnlyTest(SQLITE_ONLY.ownDataDir, 'a data directory that exists wider than 0700 is narrowed to 0700 at start, and the log says so; nosniff on the wire', async () => {
    const data = tempDir('trellis-serve-wide-')
    const cwd = tempDir('trellis-serve-cwd-')
    cleanups.push(data.cleanup, cwd.cleanup)
    chmodSync(data.path, 0o755)
    const server = await startServe({ dataDir: data.path, cwd: cwd.path })
    try {
      expect(statSync(data.path).mode & 0o777).toBe(0o700)
      expect((await fetch(`${server.url}/healthz`)).headers.get('x-content-type-options')).toBe('nosniff')
      await server.waitForOutput('"msg":"listening"')
    } finally {
      expect(await server.stop('SIGTERM')).toBe(0)
    }
    const narrowed = server.stdout().split('\n').filter((line) => line.includes('data directory narrowed'))
    expect(narrowed.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: 'info', msg: 'data directory narrowed to 0700 (its owner only)', dataDir: data.path, was: '0755' }),
    ])
  }, 60_000)
})

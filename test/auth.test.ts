/**
 * Authentication and authorisation (spec §2.6, §5, §7.1; DESIGN §4–5): the Bearer guard of the public API in
 * DESIGN §4's order, password login and its throttle, and the per-token rate limit. Real SQLite in temp dirs, the
 * real app. The token management API, lastUsedAt, token secrecy and the token CLI are test/tokens.test.ts.
 */
import { describe, expect, test } from 'bun:test'
import { writeNow } from '../src/db/write.ts'
import { bearerValue } from '../src/lib/callers.ts'
import { BLOCK_AFTER, WINDOW_MS } from '../src/modules/auth/throttle.ts'
import { setProjectMember } from '../src/modules/members/service.ts'
import type { Scope } from '../src/modules/tokens/service.ts'
import { hashPassword, setUserDisabled, usePasswordHashing } from '../src/modules/users/service.ts'
import { bearer, execute, processEnv, queryOne, request, runCli, testApp, testEnv } from './helpers.ts'
import {
  cookieFrom,
  expect401,
  expect403,
  fixture,
  getNotes,
  login,
  mint,
  NEW_NOTE,
  NOTES,
  PASSWORDS,
  postNote,
  projectId,
  READ_ONLY,
  sessionCookie,
  useFixtureCleanup,
  userId,
} from './support/auth-fixture.ts'
import { expectErrorResponse } from './support/scenarios.ts'

useFixtureCleanup()

// ── §7.1 401 rows ───────────────────────────────────────────────────────────

describe('401 Unauthorized: missing, invalid, revoked or expired token', () => {
  test('no Authorization header → 401 {error: Unauthorized, code, message}', async () => {
    const app = testApp(fixture())
    const body = await expect401(await getNotes(app))
    expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message'])
    expect(body.message).toMatch(/missing|Authorization/i)
    await expect401(await postNote(app))
  })

  test('wrong scheme → 401 even with a genuine token value; the scheme is case-insensitive', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    for (const authorization of [`Basic ${value}`, `Token ${value}`, `Basic ${btoa('alice:pw')}`, value, `Bearer`, `Bearer `, `Bearer ${value} extra`, '']) {
      await expect401(await getNotes(app, { authorization }))
    }
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      const response = await getNotes(app, { authorization: `${scheme} ${value}` })
      expect(response.status).toBe(200)
    }
  })

  test('bearerValue parses only the Bearer scheme', () => {
    expect(bearerValue('Bearer abc')).toBe('abc')
    expect(bearerValue('bearer\tabc ')).toBe('abc')
    expect(bearerValue('Basic abc')).toBeNull()
    expect(bearerValue('Bearerabc')).toBeNull()
    expect(bearerValue(undefined)).toBeNull()
  })

  test('garbage and well-formed but unknown tokens → 401 "Invalid token"', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    const unknown = `trl_${'A'.repeat(43)}`
    const flipped = value.slice(0, -1) + (value.endsWith('A') ? 'B' : 'A')
    for (const token of ['garbage', 'trl_short', `trl_${'!'.repeat(43)}`, unknown, flipped, value.toUpperCase(), `${value}x`]) {
      const body = await expect401(await getNotes(app, bearer(token)))
      expect(body.message).toBe('Invalid token')
    }
  })

  test('revoked by its owner (DELETE /v1/account/tokens/:id with a login session) → 401 on the very next request', async () => {
    const e = fixture()
    const app = testApp(e)
    const { token, value } = await mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    const loggedIn = await login(app, 'alice@example.com')
    expect(loggedIn.status).toBe(200)
    const cookie = cookieFrom(loggedIn)
    const revoked = await app.handle(request(`/v1/account/tokens/${token.id}`, { method: 'DELETE', headers: { cookie } }))
    expect(revoked.status).toBe(204)
    const body = await expect401(await getNotes(app, bearer(value)))
    expect(body.message).toMatch(/revoked/i)
    // Revoking twice: the token is gone from the owner's view.
    await expectErrorResponse(await app.handle(request(`/v1/account/tokens/${token.id}`, { method: 'DELETE', headers: { cookie } })), 404, 'not_found')
  })

  test('revoked by a project admin (DELETE /v1/project/Acme/api-tokens/:id) → 401', async () => {
    const e = fixture()
    const app = testApp(e)
    const { token, value } = await mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    const carol = await sessionCookie(e, 'carol@example.com')
    const listed = await app.handle(request('/v1/project/Acme/api-tokens', { headers: { cookie: carol } }))
    expect(listed.status).toBe(200)
    const list = (await listed.json()) as { data: { id: number; user: { email: string } }[] }
    expect(list.data.map((t) => [t.id, t.user.email])).toEqual([[token.id, 'alice@example.com']])
    const revoked = await app.handle(request(`/v1/project/Acme/api-tokens/${token.id}`, { method: 'DELETE', headers: { cookie: carol } }))
    expect(revoked.status).toBe(204)
    await expect401(await getNotes(app, bearer(value)))
    // A token of another project is not revocable through this project's settings.
    const beta = await mint(e, 'alice@example.com', { project: 'Beta' })
    await expectErrorResponse(
      await app.handle(request(`/v1/project/Acme/api-tokens/${beta.token.id}`, { method: 'DELETE', headers: { cookie: carol } })),
      404,
      'not_found',
    )
  })

  test('expired: expires_at set in the past directly in the database → 401 "expired"', async () => {
    const e = fixture()
    const app = testApp(e)
    const { token, value } = await mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    execute(e.store, 'UPDATE api_tokens SET expires_at = ? WHERE id = ?', e.clock.now() - 1, token.id)
    const body = await expect401(await getNotes(app, bearer(value)))
    expect(body.message).toMatch(/expired/i)
  })

  test('expired: created with expiresAt, then the clock passes it → 401 "expired" (valid until the instant before)', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com', { expiresAt: e.clock.now() + 3_600_000 })
    e.clock.advance(3_600_000 - 1)
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    e.clock.advance(1)
    const body = await expect401(await getNotes(app, bearer(value)))
    expect(body.message).toMatch(/expired/i)
  })
})

// ── §7.1 403 rows ───────────────────────────────────────────────────────────

describe('403 Forbidden: a genuine token without the permission', () => {
  test('a non-admin (bob, editor; dave, user) has no access to notes even with `all`', async () => {
    const e = fixture()
    const app = testApp(e)
    for (const email of ['bob@example.com', 'dave@example.com']) {
      const { value } = await mint(e, email, { scopes: ['all'] })
      await expect403(await getNotes(app, bearer(value)), 'insufficient_role')
      await expect403(await postNote(app, bearer(value)), 'insufficient_role')
    }
    // Scope is checked before role.
    const { value } = await mint(e, 'bob@example.com', { scopes: ['admin_logs:read'] })
    await expect403(await getNotes(app, bearer(value)), 'insufficient_scope')
  })

  test('an admin demoted with setProjectMember → 403 on the next request; promoted back → 200', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    const demote = (role: 'editor' | 'admin') =>
      writeNow(e.store, function* () {
        return yield* setProjectMember(e.clock, { projectId: projectId(e, 'Acme'), userId: userId(e, 'alice@example.com'), role, actorId: null })
      })
    expect(await demote('editor')).toBe('updated')
    const body = await expect403(await getNotes(app, bearer(value)), 'insufficient_role')
    expect(body.message).toContain('admin')
    await expect403(await postNote(app, bearer(value)), 'insufficient_role')
    await demote('admin')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
  })

  test('a member removed from the project → 403', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    execute(e.store, 'DELETE FROM project_members WHERE user_id = ? AND project_id = ?', userId(e, 'alice@example.com'), projectId(e, 'Acme'))
    await expect403(await getNotes(app, bearer(value)))
  })

  test('a deactivated user → 403 (never 401: the token is genuine); re-enabled → 200', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    const alice = userId(e, 'alice@example.com')
    await writeNow(e.store, function* () {
      return yield* setUserDisabled(e.clock, alice, true)
    })
    const body = await expect403(await getNotes(app, bearer(value)), 'user_deactivated')
    expect(body.message).toMatch(/organization/)
    await expect403(await postNote(app, bearer(value)), 'user_deactivated')
    // Deactivation is checked before the project: no more detail for another project either.
    await expect403(await getNotes(app, bearer(value), '/v1/project/Beta/environment/production/notes'), 'user_deactivated')
    await writeNow(e.store, function* () {
      return yield* setUserDisabled(e.clock, alice, false)
    })
    expect((await getNotes(app, bearer(value))).status).toBe(200)
  })

  test('a token of project A on project B → 403, the same 403 when B does not exist (nothing revealed)', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com', { project: 'Acme' })
    // alice is an admin of Beta too: only the token's project is wrong.
    const existing = await expect403(await getNotes(app, bearer(value), '/v1/project/Beta/environment/production/notes'), 'wrong_project')
    const missing = await expect403(await getNotes(app, bearer(value), '/v1/project/Nope/environment/production/notes'), 'wrong_project')
    expect(missing).toEqual(existing)
    const missingEnv = await expect403(await getNotes(app, bearer(value), '/v1/project/Nope/environment/nope/notes'))
    expect(missingEnv).toEqual(existing)
    // Project names are case-sensitive.
    await expect403(await getNotes(app, bearer(value), '/v1/project/acme/environment/production/notes'), 'wrong_project')
    await expect403(await postNote(app, bearer(value), NEW_NOTE, '/v1/project/Beta/environment/production/notes'), 'wrong_project')
    // The Beta token works on Beta.
    const beta = await mint(e, 'alice@example.com', { project: 'Beta' })
    expect((await getNotes(app, bearer(beta.value), '/v1/project/Beta/environment/production/notes')).status).toBe(200)
  })

  test('an SSO project accepts only tokens created from an SSO session', async () => {
    const e = fixture()
    const app = testApp(e)
    const path = '/v1/project/Secure/environment/production/notes'
    const plain = await mint(e, 'alice@example.com', { project: 'Secure', createdWithSso: false })
    await expect403(await getNotes(app, bearer(plain.value), path), 'sso_required')
    const sso = await mint(e, 'alice@example.com', { project: 'Secure', createdWithSso: true })
    expect((await getNotes(app, bearer(sso.value), path)).status).toBe(200)
    // A password session cannot create a token for it.
    const cookie = await sessionCookie(e, 'alice@example.com')
    await expect403(
      await app.handle(request('/v1/account/tokens', { method: 'POST', headers: { cookie }, json: { name: 'x', projectName: 'Secure' } })),
      'sso_required',
    )
  })

  describe('scope matrix on GET / POST notes (alice, admin)', () => {
    const cases: [Scope, number, number][] = [
      ['activity_logs:read', 403, 403],
      ['admin_logs:read', 403, 403],
      ['notes:read', 200, 403],
      ['notes:write', 403, 201],
      ['workflows:trigger', 403, 403],
      ['all', 200, 201],
    ]
    test.each(cases)('%s → GET %d, POST %d', async (scope, getStatus, postStatus) => {
      const e = fixture()
      const app = testApp(e)
      const { value } = await mint(e, 'alice@example.com', { scopes: [scope] })
      const got = await getNotes(app, bearer(value))
      if (getStatus === 200) {
        expect(got.status).toBe(200)
        const body = (await got.json()) as { data: unknown[]; parameters: unknown }
        expect(body.parameters).toEqual({ projectName: 'Acme', environmentName: 'production', limit: 10 })
      } else {
        expect((await expect403(got, 'insufficient_scope')).message).toContain('notes:read')
      }
      const posted = await postNote(app, bearer(value))
      if (postStatus === 201) {
        expect(posted.status).toBe(201)
        expect(((await posted.json()) as { title: string }).title).toBe('Checked')
      } else {
        expect((await expect403(posted, 'insufficient_scope')).message).toContain('notes:write')
      }
    })

    test('the read-only preset reads but cannot write; read + write scopes together do both', async () => {
      const e = fixture()
      const app = testApp(e)
      const ro = await mint(e, 'alice@example.com', { scopes: READ_ONLY as Scope[] })
      expect((await getNotes(app, bearer(ro.value))).status).toBe(200)
      await expect403(await postNote(app, bearer(ro.value)), 'insufficient_scope')
      const rw = await mint(e, 'alice@example.com', { scopes: ['notes:read', 'notes:write'] })
      expect((await postNote(app, bearer(rw.value))).status).toBe(201)
      expect((await getNotes(app, bearer(rw.value))).status).toBe(200)
    })
  })
})

describe('404 and validation only after authentication', () => {
  test('unknown environment: 404 not_found with a valid token, 401 without one', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    const path = '/v1/project/Acme/environment/nope/notes'
    const body = await expectErrorResponse(await getNotes(app, bearer(value), path), 404, 'not_found')
    expect(body.error).toBe('Not Found')
    expect(body.message).toContain('nope')
    await expect401(await getNotes(app, {}, path))
    await expect401(await getNotes(app, bearer(`trl_${'x'.repeat(43)}`), path))
    // Environment names are case-sensitive.
    await expectErrorResponse(await getNotes(app, bearer(value), '/v1/project/Acme/environment/Production/notes'), 404, 'not_found')
    await expectErrorResponse(await postNote(app, bearer(value), NEW_NOTE, path), 404, 'not_found')
  })

  test('POST notes with an invalid body: 401 without a token, 403 without the scope, 400 naming the field with one', async () => {
    const e = fixture()
    const app = testApp(e)
    const { title: _title, ...noTitle } = NEW_NOTE
    await expect401(await postNote(app, {}, noTitle))
    await expect401(await postNote(app, {}, { nonsense: true }))
    const ro = await mint(e, 'alice@example.com', { scopes: ['notes:read'] })
    await expect403(await postNote(app, bearer(ro.value), noTitle), 'insufficient_scope')
    const { value } = await mint(e, 'alice@example.com')
    const body = await expectErrorResponse(await postNote(app, bearer(value), noTitle), 400, 'validation_failed')
    expect(body.message).toContain('title')
    expect(body.details?.map((d) => d.field)).toContain('title')
    const wrongType = await expectErrorResponse(await postNote(app, bearer(value), { ...NEW_NOTE, recordId: 42 }), 400, 'validation_failed')
    expect(wrongType.message).toContain('recordId')
  })

  test('invalid query parameters: 401 before 400', async () => {
    const e = fixture()
    const app = testApp(e)
    await expect401(await getNotes(app, {}, `${NOTES}?limit=0`))
    const { value } = await mint(e, 'alice@example.com')
    const body = await expectErrorResponse(await getNotes(app, bearer(value), `${NOTES}?limit=0`), 400)
    expect(body.message).toContain('limit')
  })
})

// ── Login sessions and the throttle ─────────────────────────────────────────

describe('password hashes', () => {
  // The suite hashes at a test-only cost (test/helpers.ts); this is the cost every deployment hashes at.
  const PRODUCTION = /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/
  const WEAK = /^\$argon2id\$v=19\$m=1024,t=1,p=1\$/

  test('argon2id at 64 MiB and 2 passes: in the server, and in a `trellis` process unless the test suite says otherwise', async () => {
    usePasswordHashing('production')
    try {
      expect(await hashPassword('a-long-enough-password')).toMatch(PRODUCTION)
    } finally {
      usePasswordHashing('weak-for-tests')
    }
    expect(await hashPassword('a-long-enough-password')).toMatch(WEAK)
    const env = testEnv()
    try {
      const create = (email: string, vars: Record<string, string>) =>
        runCli(['user', 'create', '--email', email, '--username', email.split('@')[0]!, '--password-stdin', '--data', env.dataDir], { stdin: 'a-long-enough-password\n', env: { ...processEnv(env), ...vars } })
      const hashOf = (email: string) => queryOne<{ hash: string }>(env.store, 'SELECT password_hash AS hash FROM users WHERE email = ?', email)?.hash
      // Anything but `1` is the production cost (PRODUCTION_PASSWORD_HASHES says `0`); runCli's default says `1`.
      expect((await create('prod@example.com', { TRELLIS_TEST_WEAK_PASSWORD_HASHES: '' })).code).toBe(0)
      expect((await create('weak@example.com', {})).code).toBe(0)
      expect(hashOf('prod@example.com')).toMatch(PRODUCTION)
      expect(hashOf('weak@example.com')).toMatch(WEAK)
    } finally {
      env.cleanup()
    }
  }, 60_000)
})

describe('password login', () => {
  test('wrong password → 401 invalid_credentials; unknown user → the same', async () => {
    const app = testApp(fixture())
    const wrong = await expectErrorResponse(await login(app, 'alice@example.com', 'not-the-password'), 401, 'invalid_credentials')
    expect(wrong.error).toBe('Unauthorized')
    const unknown = await expectErrorResponse(await login(app, 'nobody@example.com', 'whatever-password'), 401, 'invalid_credentials')
    expect(unknown).toEqual(wrong)
  })

  test('correct → 200 and an HttpOnly SameSite=Lax cookie; logout clears it and the session no longer works', async () => {
    const app = testApp(fixture())
    const response = await login(app, 'Alice@Example.com', PASSWORDS['alice@example.com'])
    expect(response.status).toBe(200)
    const body = (await response.json()) as { user: { email: string } }
    expect(body.user).toMatchObject({ object: 'user', email: 'alice@example.com', username: 'alice' })
    const setCookie = response.headers.get('set-cookie') ?? ''
    expect(setCookie).toMatch(/^trellis_session=[A-Za-z0-9_-]{43};/)
    expect(setCookie).toContain('HttpOnly')
    expect(setCookie).toContain('SameSite=Lax')
    expect(setCookie).toContain('Path=/')
    expect(setCookie).not.toContain('Secure') // base URL is http://
    const cookie = cookieFrom(response)
    const me = await app.handle(request('/v1/account', { headers: { cookie } }))
    expect(me.status).toBe(200)
    expect(((await me.json()) as { user: { email: string } }).user.email).toBe('alice@example.com')

    const logout = await app.handle(request('/auth/logout', { method: 'POST', headers: { cookie } }))
    expect(logout.status).toBe(204)
    const cleared = logout.headers.get('set-cookie') ?? ''
    expect(cleared).toStartWith('trellis_session=;')
    expect(cleared).toContain('Max-Age=0')
    await expect401(await app.handle(request('/v1/account', { headers: { cookie } })))
    await expect401(await app.handle(request('/v1/account/tokens', { headers: { cookie } })))
  })

  test('behind HTTPS the cookie is Secure', async () => {
    const e = fixture({ TRELLIS_BASE_URL: 'https://trellis.example.com' })
    const app = testApp(e)
    const response = await login(app, 'dave@example.com')
    expect(response.status).toBe(200)
    expect(response.headers.get('set-cookie')).toContain('; Secure')
    const logout = await app.handle(request('/auth/logout', { method: 'POST', headers: { cookie: cookieFrom(response) } }))
    expect(logout.headers.get('set-cookie')).toContain('; Secure')
  })

  test('the session dies when the user is disabled; a disabled user cannot log in (403)', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = cookieFrom(await login(app, 'bob@example.com'))
    expect((await app.handle(request('/v1/account', { headers: { cookie } }))).status).toBe(200)
    await writeNow(e.store, function* () {
      return yield* setUserDisabled(e.clock, userId(e, 'bob@example.com'), true)
    })
    await expect401(await app.handle(request('/v1/account', { headers: { cookie } })))
    await expect403(await login(app, 'bob@example.com'), 'user_deactivated')
  })

  test('a session expires after its TTL', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = await sessionCookie(e, 'alice@example.com')
    expect((await app.handle(request('/v1/account', { headers: { cookie } }))).status).toBe(200)
    e.clock.advance(7 * 24 * 3600 * 1000)
    await expect401(await app.handle(request('/v1/account', { headers: { cookie } })))
  })

  test(
    `after ${BLOCK_AFTER} failures for one email from one address → 429 rate_limited with Retry-After, even with the right password`,
    async () => {
      const e = fixture()
      const app = testApp(e)
      // Concurrently, so the growing delays overlap instead of adding up (~10 password checks + one 2 s delay).
      const failures = await Promise.all(Array.from({ length: BLOCK_AFTER }, () => login(app, 'carol@example.com', 'wrong-password-here')))
      for (const failure of failures) await expectErrorResponse(failure, 401, 'invalid_credentials')
      const started = performance.now()
      const blocked = await login(app, 'carol@example.com')
      // At once: no password check, no delay (a delayed answer would wait the 2 s maximum delay and a check first).
      expect(performance.now() - started).toBeLessThan(2_000)
      const body = await expectErrorResponse(blocked, 429, 'rate_limited')
      expect(body.error).toBe('Too Many Requests')
      const retryAfter = Number(blocked.headers.get('retry-after'))
      expect(Number.isInteger(retryAfter)).toBe(true)
      expect(retryAfter).toBe(WINDOW_MS / 1000)
      expect(body.retry_after).toBe(retryAfter)
      expect(blocked.headers.get('set-cookie')).toBeNull()
      // The window passes: the right password works again.
      e.clock.advance(WINDOW_MS)
      expect((await login(app, 'carol@example.com')).status).toBe(200)
    },
    20_000,
  )
})

// ── Rate limit ──────────────────────────────────────────────────────────────

describe('per-token API rate limit', () => {
  test('TRELLIS_API_RATE_PER_MIN=3: 3 OK with headers, the 4th → 429 with Retry-After; a minute later it works again', async () => {
    const e = fixture({ TRELLIS_API_RATE_PER_MIN: '3' })
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    const reset = String(Math.ceil((e.clock.now() + 60_000) / 1000))
    for (const remaining of ['2', '1', '0']) {
      const response = await getNotes(app, bearer(value))
      expect(response.status).toBe(200)
      expect(response.headers.get('x-ratelimit-limit')).toBe('3')
      expect(response.headers.get('x-ratelimit-remaining')).toBe(remaining)
      expect(response.headers.get('x-ratelimit-reset')).toBe(reset)
      e.clock.advance(1000)
    }
    const limited = await getNotes(app, bearer(value))
    const body = await expectErrorResponse(limited, 429, 'rate_limited')
    expect(body.error).toBe('Too Many Requests')
    const retryAfter = limited.headers.get('retry-after')
    expect(retryAfter).toMatch(/^\d+$/)
    expect(Number(retryAfter)).toBe(57)
    expect(body.retry_after).toBe(57)
    expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message', 'retry_after'])
    expect(limited.headers.get('x-ratelimit-limit')).toBe('3')
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0')
    // Writes share the budget.
    await expectErrorResponse(await postNote(app, bearer(value)), 429, 'rate_limited')

    // A second token has its own budget.
    const other = await mint(e, 'carol@example.com')
    const otherResponse = await getNotes(app, bearer(other.value))
    expect(otherResponse.status).toBe(200)
    expect(otherResponse.headers.get('x-ratelimit-remaining')).toBe('2')

    e.clock.advance(57_000)
    const again = await getNotes(app, bearer(value))
    expect(again.status).toBe(200)
    expect(again.headers.get('x-ratelimit-remaining')).toBe('2')
  })

  test('Retry-After is whole seconds ≥ 1 right before the window ends; unauthenticated calls are not counted', async () => {
    const e = fixture({ TRELLIS_API_RATE_PER_MIN: '3' })
    const app = testApp(e)
    const { value } = await mint(e, 'alice@example.com')
    for (let i = 0; i < 5; i++) await expect401(await getNotes(app))
    for (let i = 0; i < 3; i++) expect((await getNotes(app, bearer(value))).status).toBe(200)
    e.clock.advance(59_999)
    const limited = await getNotes(app, bearer(value))
    expect(limited.status).toBe(429)
    expect(limited.headers.get('retry-after')).toBe('1')
    e.clock.advance(1)
    expect((await getNotes(app, bearer(value))).status).toBe(200)
  })

  test('403 responses count and carry the headers too', async () => {
    const e = fixture({ TRELLIS_API_RATE_PER_MIN: '3' })
    const app = testApp(e)
    const { value } = await mint(e, 'bob@example.com')
    for (const remaining of ['2', '1', '0']) {
      const response = await getNotes(app, bearer(value))
      expect(response.status).toBe(403)
      expect(response.headers.get('x-ratelimit-remaining')).toBe(remaining)
    }
    expect((await getNotes(app, bearer(value))).status).toBe(429)
  })
})

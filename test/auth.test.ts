/**
 * Authentication and authorisation (spec §2.6, §5, §7.1; DESIGN §4–5): the Bearer guard of the public API in
 * DESIGN §4's order, the token management API, password login and its throttle, lastUsedAt, the per-token rate
 * limit, secrecy of the token value, and the token CLI. Real SQLite in temp dirs, the real app.
 */
import { afterAll, afterEach, describe, expect, test } from 'bun:test'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { migrate } from '../src/db/migrate.ts'
import { openStore } from '../src/db/open.ts'
import { writeTransaction } from '../src/db/write.ts'
import { manualClock } from '../src/lib/clock.ts'
import { bearerValue } from '../src/http/auth.ts'
import { applyDocument, parseApplyText } from '../src/modules/apply/service.ts'
import { BLOCK_AFTER, WINDOW_MS } from '../src/modules/auth/throttle.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { setProjectMember } from '../src/modules/members/service.ts'
import { createToken, type Scope } from '../src/modules/tokens/service.ts'
import { setUserDisabled } from '../src/modules/users/service.ts'
import { bearer, repoRoot, request, runCli, tableContents, testApp, testEnv, type TestEnv } from './helpers.ts'
import type { ErrorObject } from './support/compat-schema.ts'

const ACME = join(repoRoot, 'examples/acme.yaml')
const PASSWORDS: Record<string, string> = {
  'alice@example.com': 'alice-demo-pass-2026',
  'bob@example.com': 'bob-demo-pass-2026',
  'carol@example.com': 'carol-demo-pass-2026',
  'dave@example.com': 'dave-demo-pass-2026',
}
/** A second project (Beta) where alice is also an admin, and an SSO project (Secure). */
const EXTRA_PROJECTS = `
projects:
  - name: Beta
    environments: [production]
    members: [{ user: alice@example.com, role: admin }]
  - name: Secure
    sso: true
    environments: [production]
    members: [{ user: alice@example.com, role: admin }]
`
const TOKEN_SHAPE = /^trl_[A-Za-z0-9_-]{43}$/
const NOTES = '/v1/project/Acme/environment/production/notes'
const NEW_NOTE = { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Checked', content: '<p>ok</p>' }
const READ_ONLY = ['activity_logs:read', 'admin_logs:read', 'notes:read']

// ── Fixture ─────────────────────────────────────────────────────────────────
// Applying the yaml hashes four argon2id passwords (~1 s): do it once, then give every test its own copy
// of the database file (VACUUM INTO) in its own temp dir.

let template: TestEnv | undefined
const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})
afterAll(() => template?.cleanup())

function templateEnv(): TestEnv {
  if (!template) {
    const e = testEnv()
    const ctx = { store: e.store, clock: e.clock, secret: e.secret, baseUrl: e.config.baseUrl }
    applyDocument(parseApplyText(readFileSync(ACME, 'utf8')), ctx)
    applyDocument(parseApplyText(EXTRA_PROJECTS), ctx)
    template = e
  }
  return template
}

/** Copies the applied fixture database into `path` (which must not exist yet). */
function copyFixtureTo(path: string): void {
  templateEnv().store.sqlite.prepare('VACUUM INTO ?').run(path)
}

/** A fresh data dir holding the applied Acme fixture (+ Beta, Secure), with its own manual clock. */
function fixture(vars: Record<string, string> = {}): TestEnv {
  const base = testEnv(vars)
  base.store.close()
  for (const suffix of ['', '-wal', '-shm']) rmSync(base.store.path + suffix, { force: true })
  copyFixtureTo(base.store.path)
  const store = openStore(base.dataDir)
  const e: TestEnv = {
    ...base,
    store,
    cleanup: () => {
      store.close()
      base.cleanup()
    },
  }
  cleanups.push(e.cleanup)
  return e
}

function userId(e: TestEnv, email: string): number {
  return (e.store.sqlite.prepare('SELECT id FROM users WHERE email = ?').get(email) as { id: number }).id
}

function projectId(e: TestEnv, name: string): number {
  return (e.store.sqlite.prepare('SELECT id FROM projects WHERE name = ?').get(name) as { id: number }).id
}

/** A token straight through the service (the API paths are tested separately). */
function mint(
  e: TestEnv,
  email: string,
  options: { project?: string; scopes?: Scope[]; expiresAt?: number | null; createdWithSso?: boolean; name?: string } = {},
) {
  return writeTransaction(e.store, (tx) =>
    createToken(tx, e.clock, {
      name: options.name ?? 'test',
      userId: userId(e, email),
      projectId: projectId(e, options.project ?? 'Acme'),
      scopes: options.scopes ?? ['all'],
      expiresAt: options.expiresAt ?? null,
      createdWithSso: options.createdWithSso ?? false,
      actorId: userId(e, email),
    }),
  )
}

/** A console session cookie without the cost of a password check (login itself is tested below). */
function sessionCookie(e: TestEnv, email: string): string {
  return `trellis_session=${createSession(e.store.db, e.clock, userId(e, email), false).id}`
}

async function login(app: ReturnType<typeof testApp>, email: string, password = PASSWORDS[email]!): Promise<Response> {
  return app.handle(request('/auth/login', { method: 'POST', json: { email, password } }))
}

function cookieFrom(response: Response): string {
  const header = response.headers.get('set-cookie') ?? ''
  return header.split(';')[0]!
}


function getNotes(app: ReturnType<typeof testApp>, headers: Record<string, string> = {}, path = NOTES) {
  return app.handle(request(path, { headers }))
}

function postNote(app: ReturnType<typeof testApp>, headers: Record<string, string> = {}, json: unknown = NEW_NOTE, path = NOTES) {
  return app.handle(request(path, { method: 'POST', headers, json }))
}


/** DESIGN §5: `{error: <reason>, code, message}` (+ details for validation, retry_after for 429). */
async function expectError(response: Response, status: number, code?: string): Promise<ErrorObject> {
  const text = await response.text()
  expect({ status: response.status, text }).toMatchObject({ status })
  expect(response.headers.get('content-type')).toStartWith('application/json')
  const body = JSON.parse(text) as ErrorObject
  expect(typeof body.error).toBe('string')
  expect(typeof body.code).toBe('string')
  expect(typeof body.message).toBe('string')
  expect(body.message.length).toBeGreaterThan(0)
  if (code !== undefined) expect(body.code).toBe(code)
  const allowed = ['error', 'code', 'message', 'details', 'retry_after']
  expect(Object.keys(body).filter((k) => !allowed.includes(k))).toEqual([])
  return body
}

async function expect401(response: Response): Promise<ErrorObject> {
  const body = await expectError(response, 401, 'unauthorized')
  expect(body.error).toBe('Unauthorized')
  return body
}

async function expect403(response: Response, code?: string): Promise<ErrorObject> {
  const body = await expectError(response, 403, code)
  expect(body.error).toBe('Forbidden')
  return body
}

function lastUsedAt(e: TestEnv, tokenId: number): number | null {
  return (e.store.sqlite.prepare('SELECT last_used_at FROM api_tokens WHERE id = ?').get(tokenId) as { last_used_at: number | null }).last_used_at
}

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
    const { value } = mint(e, 'alice@example.com')
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
    const { value } = mint(e, 'alice@example.com')
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
    const { token, value } = mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    const loggedIn = await login(app, 'alice@example.com')
    expect(loggedIn.status).toBe(200)
    const cookie = cookieFrom(loggedIn)
    const revoked = await app.handle(request(`/v1/account/tokens/${token.id}`, { method: 'DELETE', headers: { cookie } }))
    expect(revoked.status).toBe(204)
    const body = await expect401(await getNotes(app, bearer(value)))
    expect(body.message).toMatch(/revoked/i)
    // Revoking twice: the token is gone from the owner's view.
    await expectError(await app.handle(request(`/v1/account/tokens/${token.id}`, { method: 'DELETE', headers: { cookie } })), 404, 'not_found')
  })

  test('revoked by a project admin (DELETE /v1/project/Acme/api-tokens/:id) → 401', async () => {
    const e = fixture()
    const app = testApp(e)
    const { token, value } = mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    const carol = sessionCookie(e, 'carol@example.com')
    const listed = await app.handle(request('/v1/project/Acme/api-tokens', { headers: { cookie: carol } }))
    expect(listed.status).toBe(200)
    const list = (await listed.json()) as { data: { id: number; user: { email: string } }[] }
    expect(list.data.map((t) => [t.id, t.user.email])).toEqual([[token.id, 'alice@example.com']])
    const revoked = await app.handle(request(`/v1/project/Acme/api-tokens/${token.id}`, { method: 'DELETE', headers: { cookie: carol } }))
    expect(revoked.status).toBe(204)
    await expect401(await getNotes(app, bearer(value)))
    // A token of another project is not revocable through this project's settings.
    const beta = mint(e, 'alice@example.com', { project: 'Beta' })
    await expectError(
      await app.handle(request(`/v1/project/Acme/api-tokens/${beta.token.id}`, { method: 'DELETE', headers: { cookie: carol } })),
      404,
      'not_found',
    )
  })

  test('expired: expires_at set in the past directly in the database → 401 "expired"', async () => {
    const e = fixture()
    const app = testApp(e)
    const { token, value } = mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    e.store.sqlite.prepare('UPDATE api_tokens SET expires_at = ? WHERE id = ?').run(e.clock.now() - 1, token.id)
    const body = await expect401(await getNotes(app, bearer(value)))
    expect(body.message).toMatch(/expired/i)
  })

  test('expired: created with expiresAt, then the clock passes it → 401 "expired" (valid until the instant before)', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = mint(e, 'alice@example.com', { expiresAt: e.clock.now() + 3_600_000 })
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
      const { value } = mint(e, email, { scopes: ['all'] })
      await expect403(await getNotes(app, bearer(value)), 'insufficient_role')
      await expect403(await postNote(app, bearer(value)), 'insufficient_role')
    }
    // Scope is checked before role.
    const { value } = mint(e, 'bob@example.com', { scopes: ['admin_logs:read'] })
    await expect403(await getNotes(app, bearer(value)), 'insufficient_scope')
  })

  test('an admin demoted with setProjectMember → 403 on the next request; promoted back → 200', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = mint(e, 'alice@example.com')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    const demote = (role: 'editor' | 'admin') =>
      writeTransaction(e.store, (tx) => setProjectMember(tx, e.clock, { projectId: projectId(e, 'Acme'), userId: userId(e, 'alice@example.com'), role, actorId: null }))
    expect(demote('editor')).toBe('updated')
    const body = await expect403(await getNotes(app, bearer(value)), 'insufficient_role')
    expect(body.message).toContain('admin')
    await expect403(await postNote(app, bearer(value)), 'insufficient_role')
    demote('admin')
    expect((await getNotes(app, bearer(value))).status).toBe(200)
  })

  test('a member removed from the project → 403', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = mint(e, 'alice@example.com')
    e.store.sqlite.prepare('DELETE FROM project_members WHERE user_id = ? AND project_id = ?').run(userId(e, 'alice@example.com'), projectId(e, 'Acme'))
    await expect403(await getNotes(app, bearer(value)))
  })

  test('a deactivated user → 403 (never 401: the token is genuine); re-enabled → 200', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = mint(e, 'alice@example.com')
    const alice = userId(e, 'alice@example.com')
    writeTransaction(e.store, (tx) => setUserDisabled(tx, e.clock, alice, true))
    const body = await expect403(await getNotes(app, bearer(value)), 'user_deactivated')
    expect(body.message).toMatch(/organization/)
    await expect403(await postNote(app, bearer(value)), 'user_deactivated')
    // Deactivation is checked before the project: no more detail for another project either.
    await expect403(await getNotes(app, bearer(value), '/v1/project/Beta/environment/production/notes'), 'user_deactivated')
    writeTransaction(e.store, (tx) => setUserDisabled(tx, e.clock, alice, false))
    expect((await getNotes(app, bearer(value))).status).toBe(200)
  })

  test('a token of project A on project B → 403, the same 403 when B does not exist (nothing revealed)', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = mint(e, 'alice@example.com', { project: 'Acme' })
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
    const beta = mint(e, 'alice@example.com', { project: 'Beta' })
    expect((await getNotes(app, bearer(beta.value), '/v1/project/Beta/environment/production/notes')).status).toBe(200)
  })

  test('an SSO project accepts only tokens created from an SSO session', async () => {
    const e = fixture()
    const app = testApp(e)
    const path = '/v1/project/Secure/environment/production/notes'
    const plain = mint(e, 'alice@example.com', { project: 'Secure', createdWithSso: false })
    await expect403(await getNotes(app, bearer(plain.value), path), 'sso_required')
    const sso = mint(e, 'alice@example.com', { project: 'Secure', createdWithSso: true })
    expect((await getNotes(app, bearer(sso.value), path)).status).toBe(200)
    // A password session cannot create a token for it.
    const cookie = sessionCookie(e, 'alice@example.com')
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
      const { value } = mint(e, 'alice@example.com', { scopes: [scope] })
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
      const ro = mint(e, 'alice@example.com', { scopes: READ_ONLY as Scope[] })
      expect((await getNotes(app, bearer(ro.value))).status).toBe(200)
      await expect403(await postNote(app, bearer(ro.value)), 'insufficient_scope')
      const rw = mint(e, 'alice@example.com', { scopes: ['notes:read', 'notes:write'] })
      expect((await postNote(app, bearer(rw.value))).status).toBe(201)
      expect((await getNotes(app, bearer(rw.value))).status).toBe(200)
    })
  })
})

describe('404 and validation only after authentication', () => {
  test('unknown environment: 404 not_found with a valid token, 401 without one', async () => {
    const e = fixture()
    const app = testApp(e)
    const { value } = mint(e, 'alice@example.com')
    const path = '/v1/project/Acme/environment/nope/notes'
    const body = await expectError(await getNotes(app, bearer(value), path), 404, 'not_found')
    expect(body.error).toBe('Not Found')
    expect(body.message).toContain('nope')
    await expect401(await getNotes(app, {}, path))
    await expect401(await getNotes(app, bearer(`trl_${'x'.repeat(43)}`), path))
    // Environment names are case-sensitive.
    await expectError(await getNotes(app, bearer(value), '/v1/project/Acme/environment/Production/notes'), 404, 'not_found')
    await expectError(await postNote(app, bearer(value), NEW_NOTE, path), 404, 'not_found')
  })

  test('POST notes with an invalid body: 401 without a token, 403 without the scope, 400 naming the field with one', async () => {
    const e = fixture()
    const app = testApp(e)
    const { title: _title, ...noTitle } = NEW_NOTE
    await expect401(await postNote(app, {}, noTitle))
    await expect401(await postNote(app, {}, { nonsense: true }))
    const ro = mint(e, 'alice@example.com', { scopes: ['notes:read'] })
    await expect403(await postNote(app, bearer(ro.value), noTitle), 'insufficient_scope')
    const { value } = mint(e, 'alice@example.com')
    const body = await expectError(await postNote(app, bearer(value), noTitle), 400, 'validation_failed')
    expect(body.message).toContain('title')
    expect(body.details?.map((d) => d.field)).toContain('title')
    const wrongType = await expectError(await postNote(app, bearer(value), { ...NEW_NOTE, recordId: 42 }), 400, 'validation_failed')
    expect(wrongType.message).toContain('recordId')
  })

  test('invalid query parameters: 401 before 400', async () => {
    const e = fixture()
    const app = testApp(e)
    await expect401(await getNotes(app, {}, `${NOTES}?limit=0`))
    const { value } = mint(e, 'alice@example.com')
    const body = await expectError(await getNotes(app, bearer(value), `${NOTES}?limit=0`), 400)
    expect(body.message).toContain('limit')
  })
})

// ── Token management API ────────────────────────────────────────────────────

describe('token management API', () => {
  interface Created {
    id: number
    name: string
    token: string
    prefix: string
    projectName: string
    scopes: string[]
    createdAt: string
    expiresAt: string | null
  }

  function createVia(app: ReturnType<typeof testApp>, headers: Record<string, string>, json: Record<string, unknown>) {
    return app.handle(request('/v1/account/tokens', { method: 'POST', headers, json }))
  }

  test('POST /v1/account/tokens with a session → 201, the value shown once; default read-only preset; the token works', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = sessionCookie(e, 'alice@example.com')
    const response = await createVia(app, { cookie }, { name: ' ci ', projectName: 'Acme' })
    expect(response.status).toBe(201)
    const created = (await response.json()) as Created
    expect(created.token).toMatch(TOKEN_SHAPE)
    expect(created.prefix).toBe(created.token.slice(0, 12))
    expect(created.prefix).toStartWith('trl_')
    expect(created).toMatchObject({ name: 'ci', projectName: 'Acme', scopes: READ_ONLY, expiresAt: null, createdAt: new Date(e.clock.now()).toISOString() })
    expect(Object.keys(created).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'name', 'prefix', 'projectName', 'scopes', 'token'])
    expect((await getNotes(app, bearer(created.token))).status).toBe(200)
    // Another creation gives another value.
    const other = (await (await createVia(app, { cookie }, { name: 'ci', projectName: 'Acme' })).json()) as Created
    expect(other.token).not.toBe(created.token)
    expect(other.id).not.toBe(created.id)
  })

  test('presets, explicit scopes, unknown scope / preset → 400 naming it', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = sessionCookie(e, 'alice@example.com')
    const rw = (await (await createVia(app, { cookie }, { name: 'rw', projectName: 'Acme', preset: 'read-write' })).json()) as Created
    expect(rw.scopes).toEqual(['all'])
    const ro = (await (await createVia(app, { cookie }, { name: 'ro', projectName: 'Acme', preset: 'read-only' })).json()) as Created
    expect(ro.scopes).toEqual(READ_ONLY)
    const explicit = await createVia(app, { cookie }, { name: 'x', projectName: 'Acme', scopes: ['notes:write', 'workflows:trigger', 'notes:write'] })
    expect(explicit.status).toBe(201)
    expect(((await explicit.json()) as Created).scopes).toEqual(['notes:write', 'workflows:trigger'])

    const unknown = await expectError(await createVia(app, { cookie }, { name: 'x', projectName: 'Acme', scopes: ['notes:read', 'notes:delete'] }), 400, 'validation_failed')
    expect(unknown.message).toContain('notes:delete')
    expect(unknown.details).toEqual([{ field: 'scopes', message: expect.stringContaining('notes:delete') }])
    expect(unknown.message).toBe(`Invalid field 'scopes': ${unknown.details![0]!.message}`)
    const badPreset = await expectError(await createVia(app, { cookie }, { name: 'x', projectName: 'Acme', preset: 'god-mode' }), 400, 'validation_failed')
    expect(badPreset.message).toContain('god-mode')
    expect(badPreset.details?.[0]?.field).toBe('preset')
    await expectError(await createVia(app, { cookie }, { name: 'x', projectName: 'Acme', scopes: [] }), 400, 'validation_failed')
    await expectError(await createVia(app, { cookie }, { name: 'x', projectName: 'Acme', scopes: ['all'], preset: 'read-only' }), 400, 'validation_failed')
    const noName = await expectError(await createVia(app, { cookie }, { projectName: 'Acme' }), 400, 'validation_failed')
    expect(noName.message).toContain('name')
    for (const name of ['', '   ', '\t\n']) {
      const blank = await expectError(await createVia(app, { cookie }, { name, projectName: 'Acme' }), 400, 'validation_failed')
      expect(blank.details?.[0]?.field).toBe('name')
    }
    // Nothing was created by the refused requests.
    expect((e.store.sqlite.prepare('SELECT count(*) AS n FROM api_tokens').get() as { n: number }).n).toBe(3)
  })

  test('expiry: expiresInDays and expiresAt; past or invalid dates → 400 naming expiresAt', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = sessionCookie(e, 'alice@example.com')
    const now = e.clock.now()
    const inDays = (await (await createVia(app, { cookie }, { name: 'd', projectName: 'Acme', expiresInDays: 30 })).json()) as Created
    expect(inDays.expiresAt).toBe(new Date(now + 30 * 86_400_000).toISOString())
    const at = '2027-01-15T10:00:00.000Z'
    const atCreated = (await (await createVia(app, { cookie }, { name: 'a', projectName: 'Acme', expiresAt: at })).json()) as Created
    expect(atCreated.expiresAt).toBe(at)
    const offset = (await (await createVia(app, { cookie }, { name: 'o', projectName: 'Acme', expiresAt: '2027-01-15T11:00:00+01:00' })).json()) as Created
    expect(offset.expiresAt).toBe(at)

    for (const expiresAt of ['2026-11-21T11:59:59.000Z', new Date(now).toISOString(), '2000-01-01']) {
      const body = await expectError(await createVia(app, { cookie }, { name: 'p', projectName: 'Acme', expiresAt }), 400, 'validation_failed')
      expect(body.details?.[0]?.field).toBe('expiresAt')
    }
    for (const expiresAt of ['not-a-date', '2027-02-30T00:00:00Z', '2027-01-15T25:00', '']) {
      const body = await expectError(await createVia(app, { cookie }, { name: 'p', projectName: 'Acme', expiresAt }), 400, 'validation_failed')
      expect(body.message).toContain('expiresAt')
    }
    for (const expiresInDays of [0, -1, 100_000]) {
      const body = await expectError(await createVia(app, { cookie }, { name: 'p', projectName: 'Acme', expiresInDays }), 400, 'validation_failed')
      expect(body.message).toContain('expiresInDays')
    }
    await expectError(await createVia(app, { cookie }, { name: 'p', projectName: 'Acme', expiresInDays: 1.5 }), 400, 'validation_failed')
    await expectError(await createVia(app, { cookie }, { name: 'p', projectName: 'Acme', expiresInDays: 'soon' }), 400, 'validation_failed')
    await expectError(await createVia(app, { cookie }, { name: 'p', projectName: 'Acme', expiresInDays: 3, expiresAt: at }), 400, 'validation_failed')
  })

  test('a project the user is not a member of, or that does not exist → 404', async () => {
    const e = fixture()
    const app = testApp(e)
    const dave = sessionCookie(e, 'dave@example.com')
    const notMember = await expectError(await createVia(app, { cookie: dave }, { name: 'x', projectName: 'Beta' }), 404, 'not_found')
    const missing = await expectError(await createVia(app, { cookie: dave }, { name: 'x', projectName: 'Nope' }), 404, 'not_found')
    expect(notMember.message).toContain('Beta')
    expect(missing.message).toContain('Nope')
    // A member that is not an admin may create a token (it just cannot read notes with it).
    const created = await createVia(app, { cookie: dave }, { name: 'x', projectName: 'Acme' })
    expect(created.status).toBe(201)
    await expect403(await getNotes(app, bearer(((await created.json()) as Created).token)), 'insufficient_role')
  })

  test('GET /v1/account/tokens lists the caller\'s live tokens without the value or any hash', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = sessionCookie(e, 'alice@example.com')
    const a = (await (await createVia(app, { cookie }, { name: 'first', projectName: 'Acme' })).json()) as Created
    const b = (await (await createVia(app, { cookie }, { name: 'second', projectName: 'Beta', preset: 'read-write', expiresInDays: 7 })).json()) as Created
    const revoked = (await (await createVia(app, { cookie }, { name: 'gone', projectName: 'Acme' })).json()) as Created
    expect((await app.handle(request(`/v1/account/tokens/${revoked.id}`, { method: 'DELETE', headers: { cookie } }))).status).toBe(204)
    mint(e, 'carol@example.com', { name: 'carols' })
    const response = await app.handle(request('/v1/account/tokens', { headers: { cookie } }))
    expect(response.status).toBe(200)
    const text = await response.text()
    const body = JSON.parse(text) as { data: Record<string, unknown>[] }
    expect(body.data.map((t) => t.name)).toEqual(['second', 'first'])
    for (const row of body.data) {
      expect(Object.keys(row).sort()).toEqual(['createdAt', 'createdWithSso', 'expiresAt', 'id', 'lastUsedAt', 'name', 'prefix', 'projectName', 'scopes'])
      expect(row.createdWithSso).toBe(false)
    }
    expect(body.data[0]).toMatchObject({ id: b.id, prefix: b.prefix, projectName: 'Beta', scopes: ['all'], expiresAt: b.expiresAt, lastUsedAt: null })
    const hashes = e.store.sqlite.prepare('SELECT token_hash FROM api_tokens').all() as { token_hash: string }[]
    for (const secret of [a.token, b.token, revoked.token, ...hashes.map((h) => h.token_hash)]) expect(text).not.toContain(secret)
    expect(text).not.toMatch(/hash/i)
  })

  test('DELETE another user\'s token through /v1/account/tokens → 404, and it keeps working', async () => {
    const e = fixture()
    const app = testApp(e)
    const carols = mint(e, 'carol@example.com')
    const alice = sessionCookie(e, 'alice@example.com')
    await expectError(await app.handle(request(`/v1/account/tokens/${carols.token.id}`, { method: 'DELETE', headers: { cookie: alice } })), 404, 'not_found')
    await expectError(await app.handle(request('/v1/account/tokens/999999', { method: 'DELETE', headers: { cookie: alice } })), 404, 'not_found')
    await expectError(await app.handle(request('/v1/account/tokens/abc', { method: 'DELETE', headers: { cookie: alice } })), 400)
    expect((await getNotes(app, bearer(carols.value))).status).toBe(200)
  })

  test('project API access settings: admins only (non-admin session → 403)', async () => {
    const e = fixture()
    const app = testApp(e)
    const alices = mint(e, 'alice@example.com')
    for (const email of ['bob@example.com', 'dave@example.com']) {
      const cookie = sessionCookie(e, email)
      await expect403(await app.handle(request('/v1/project/Acme/api-tokens', { headers: { cookie } })), 'insufficient_role')
      await expect403(
        await app.handle(request(`/v1/project/Acme/api-tokens/${alices.token.id}`, { method: 'DELETE', headers: { cookie } })),
        'insufficient_role',
      )
    }
    expect((await getNotes(app, bearer(alices.value))).status).toBe(200)
    const carol = sessionCookie(e, 'carol@example.com')
    const list = (await (await app.handle(request('/v1/project/Acme/api-tokens', { headers: { cookie: carol } }))).json()) as { data: Record<string, unknown>[] }
    expect(list.data).toHaveLength(1)
    expect(Object.keys(list.data[0]!).sort()).toEqual(['createdAt', 'createdWithSso', 'expiresAt', 'id', 'lastUsedAt', 'name', 'prefix', 'projectName', 'scopes', 'user'])
    expect(JSON.stringify(list)).not.toContain(alices.value)
    await expectError(await app.handle(request('/v1/project/Nope/api-tokens', { headers: { cookie: carol } })), 404, 'not_found')
  })

  test('management with a Bearer token: `all` of an admin works (confined to its project); read-only or non-admin → 403', async () => {
    const e = fixture()
    const app = testApp(e)
    const admin = mint(e, 'alice@example.com', { scopes: ['all'] })
    const betaToken = mint(e, 'alice@example.com', { project: 'Beta', scopes: ['notes:read'] })
    const listed = await app.handle(request('/v1/account/tokens', { headers: bearer(admin.value) }))
    expect(listed.status).toBe(200)
    const ids = ((await listed.json()) as { data: { id: number }[] }).data.map((t) => t.id)
    expect(ids).toEqual([admin.token.id]) // the Beta token is outside this token's project
    const created = await createVia(app, bearer(admin.value), { name: 'from-token', projectName: 'Acme' })
    expect(created.status).toBe(201)
    await expect403(await createVia(app, bearer(admin.value), { name: 'elsewhere', projectName: 'Beta' }), 'wrong_project')
    await expectError(
      await app.handle(request(`/v1/account/tokens/${betaToken.token.id}`, { method: 'DELETE', headers: bearer(admin.value) })),
      404,
      'not_found',
    )
    expect((await app.handle(request('/v1/project/Acme/api-tokens', { headers: bearer(admin.value) }))).status).toBe(200)

    const readOnly = mint(e, 'alice@example.com', { scopes: READ_ONLY as Scope[] })
    await expect403(await app.handle(request('/v1/account/tokens', { headers: bearer(readOnly.value) })))
    await expect403(await createVia(app, bearer(readOnly.value), { name: 'x', projectName: 'Acme' }))
    const bobAll = mint(e, 'bob@example.com', { scopes: ['all'] })
    await expect403(await app.handle(request('/v1/account/tokens', { headers: bearer(bobAll.value) })))
    // An invalid Bearer header is a 401 even with a valid cookie next to it.
    const cookie = sessionCookie(e, 'alice@example.com')
    await expect401(await app.handle(request('/v1/account/tokens', { headers: { cookie, authorization: 'Bearer nope' } })))
  })

  test('without a cookie or a token → 401; an unknown cookie → 401', async () => {
    const e = fixture()
    const app = testApp(e)
    await expect401(await app.handle(request('/v1/account/tokens')))
    await expect401(await createVia(app, {}, { name: 'x', projectName: 'Acme' }))
    await expect401(await app.handle(request('/v1/account/tokens/1', { method: 'DELETE' })))
    await expect401(await app.handle(request('/v1/project/Acme/api-tokens')))
    await expect401(await app.handle(request('/v1/project/Acme/api-tokens/1', { method: 'DELETE' })))
    await expect401(await app.handle(request('/v1/account', { headers: { cookie: 'trellis_session=forged' } })))
    // Validation comes after authentication here too.
    await expect401(await createVia(app, {}, { bogus: 1 }))
  })
})

// ── Login sessions and the throttle ─────────────────────────────────────────

describe('password login', () => {
  test('wrong password → 401 invalid_credentials; unknown user → the same', async () => {
    const app = testApp(fixture())
    const wrong = await expectError(await login(app, 'alice@example.com', 'not-the-password'), 401, 'invalid_credentials')
    expect(wrong.error).toBe('Unauthorized')
    const unknown = await expectError(await login(app, 'nobody@example.com', 'whatever-password'), 401, 'invalid_credentials')
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
    writeTransaction(e.store, (tx) => setUserDisabled(tx, e.clock, userId(e, 'bob@example.com'), true))
    await expect401(await app.handle(request('/v1/account', { headers: { cookie } })))
    await expect403(await login(app, 'bob@example.com'), 'user_deactivated')
  })

  test('a session expires after its TTL', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = sessionCookie(e, 'alice@example.com')
    expect((await app.handle(request('/v1/account', { headers: { cookie } }))).status).toBe(200)
    e.clock.advance(7 * 24 * 3600 * 1000)
    await expect401(await app.handle(request('/v1/account', { headers: { cookie } })))
  })

  test(
    `after ${BLOCK_AFTER} failures for one email from one address → 429 rate_limited with Retry-After, even with the right password`,
    async () => {
      const e = fixture()
      const app = testApp(e)
      const started = performance.now()
      // Concurrently, so the growing delays overlap instead of adding up (~10 password checks + one 2 s delay).
      const failures = await Promise.all(Array.from({ length: BLOCK_AFTER }, () => login(app, 'carol@example.com', 'wrong-password-here')))
      for (const failure of failures) await expectError(failure, 401, 'invalid_credentials')
      const blocked = await login(app, 'carol@example.com')
      const body = await expectError(blocked, 429, 'rate_limited')
      expect(body.error).toBe('Too Many Requests')
      const retryAfter = Number(blocked.headers.get('retry-after'))
      expect(Number.isInteger(retryAfter)).toBe(true)
      expect(retryAfter).toBe(WINDOW_MS / 1000)
      expect(body.retry_after).toBe(retryAfter)
      expect(blocked.headers.get('set-cookie')).toBeNull()
      expect(performance.now() - started).toBeLessThan(12_000)
      // The window passes: the right password works again.
      e.clock.advance(WINDOW_MS)
      expect((await login(app, 'carol@example.com')).status).toBe(200)
    },
    20_000,
  )
})

// ── lastUsedAt ──────────────────────────────────────────────────────────────

describe('lastUsedAt', () => {
  test('set on first use, written at most once a minute', async () => {
    const e = fixture()
    const app = testApp(e)
    const { token, value } = mint(e, 'alice@example.com')
    expect(lastUsedAt(e, token.id)).toBeNull()
    const first = e.clock.now()
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    expect(lastUsedAt(e, token.id)).toBe(first)
    e.clock.advance(30_000)
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    expect(lastUsedAt(e, token.id)).toBe(first)
    e.clock.advance(31_000)
    expect((await getNotes(app, bearer(value))).status).toBe(200)
    expect(lastUsedAt(e, token.id)).toBe(first + 61_000)
    // Shown in the owner's list.
    const cookie = sessionCookie(e, 'alice@example.com')
    const list = (await (await app.handle(request('/v1/account/tokens', { headers: { cookie } }))).json()) as { data: { lastUsedAt: string }[] }
    expect(list.data[0]!.lastUsedAt).toBe(new Date(first + 61_000).toISOString())
  })

  test('a refused (403) call still counts as use; a revoked or expired token is not touched', async () => {
    const e = fixture()
    const app = testApp(e)
    const bobs = mint(e, 'bob@example.com')
    await expect403(await getNotes(app, bearer(bobs.value)))
    expect(lastUsedAt(e, bobs.token.id)).toBe(e.clock.now())
    const expiring = mint(e, 'alice@example.com', { expiresAt: e.clock.now() + 1000 })
    e.clock.advance(1000)
    await expect401(await getNotes(app, bearer(expiring.value)))
    expect(lastUsedAt(e, expiring.token.id)).toBeNull()
  })
})

// ── Rate limit ──────────────────────────────────────────────────────────────

describe('per-token API rate limit', () => {
  test('TRELLIS_API_RATE_PER_MIN=3: 3 OK with headers, the 4th → 429 with Retry-After; a minute later it works again', async () => {
    const e = fixture({ TRELLIS_API_RATE_PER_MIN: '3' })
    const app = testApp(e)
    const { value } = mint(e, 'alice@example.com')
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
    const body = await expectError(limited, 429, 'rate_limited')
    expect(body.error).toBe('Too Many Requests')
    const retryAfter = limited.headers.get('retry-after')
    expect(retryAfter).toMatch(/^\d+$/)
    expect(Number(retryAfter)).toBe(57)
    expect(body.retry_after).toBe(57)
    expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message', 'retry_after'])
    expect(limited.headers.get('x-ratelimit-limit')).toBe('3')
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0')
    // Writes share the budget.
    await expectError(await postNote(app, bearer(value)), 429, 'rate_limited')

    // A second token has its own budget.
    const other = mint(e, 'carol@example.com')
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
    const { value } = mint(e, 'alice@example.com')
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
    const { value } = mint(e, 'bob@example.com')
    for (const remaining of ['2', '1', '0']) {
      const response = await getNotes(app, bearer(value))
      expect(response.status).toBe(403)
      expect(response.headers.get('x-ratelimit-remaining')).toBe(remaining)
    }
    expect((await getNotes(app, bearer(value))).status).toBe(429)
  })
})

// ── The token value is never stored or logged ───────────────────────────────

describe('token secrecy', () => {
  test(
    'after creating tokens via API, CLI and service and using them, no table holds a value; admin logs carry only the prefix',
    async () => {
      const e = fixture()
      const app = testApp(e)
      const cookie = sessionCookie(e, 'alice@example.com')
      const apiCreated = (await (await app.handle(request('/v1/account/tokens', { method: 'POST', headers: { cookie }, json: { name: 'api', projectName: 'Acme', preset: 'read-write' } }))).json()) as {
        id: number
        token: string
        prefix: string
      }
      const cli = await runCli(['token', 'create', '--data', e.dataDir, '--user', 'carol@example.com', '--project', 'Acme', '--name', 'cli', '--scopes', 'notes:read,notes:write'])
      expect(cli.code).toBe(0)
      const cliValue = cli.stdout.trim()
      expect(cliValue).toMatch(TOKEN_SHAPE)
      const service = mint(e, 'alice@example.com', { name: 'service' })
      const values = [apiCreated.token, cliValue, service.value]
      for (const value of values) {
        expect((await getNotes(app, bearer(value))).status).toBe(200)
        expect((await postNote(app, bearer(value))).status).toBe(201)
      }
      expect((await app.handle(request(`/v1/account/tokens/${apiCreated.id}`, { method: 'DELETE', headers: { cookie } }))).status).toBe(204)
      await expect401(await getNotes(app, bearer(apiCreated.token)))

      const dump = JSON.stringify(tableContents(e.store))
      for (const value of values) {
        expect(dump).not.toContain(value)
        expect(dump).not.toContain(value.slice(12)) // not even the secret part after the display prefix
        expect(dump).not.toContain(value.slice(4))
      }
      const tokens = e.store.sqlite.prepare('SELECT id, prefix, token_hash FROM api_tokens ORDER BY id').all() as { id: number; prefix: string; token_hash: string }[]
      expect(tokens.map((t) => t.prefix).sort()).toEqual(values.map((v) => v.slice(0, 12)).sort())
      for (const t of tokens) expect(t.token_hash).toMatch(/^[0-9a-f]{64}$/)

      const logs = e.store.sqlite
        .prepare("SELECT type, resource, previous_value, new_value FROM admin_logs WHERE resource = 'api-token' ORDER BY id")
        .all() as { type: string; resource: string; previous_value: string | null; new_value: string | null }[]
      expect(logs.map((l) => l.type)).toEqual(['add', 'add', 'add', 'remove'])
      for (const log of logs) {
        const text = log.new_value ?? log.previous_value ?? ''
        expect(Object.keys(JSON.parse(text))).toEqual(['name'])
        expect(values.some((v) => text.includes(v.slice(0, 12)))).toBe(true)
        for (const t of tokens) expect(text).not.toContain(t.token_hash)
      }
      expect(logs[3]!.previous_value).toContain(apiCreated.prefix)
    },
    20_000,
  )
})

// ── CLI ─────────────────────────────────────────────────────────────────────

describe('trellis token (CLI, real processes)', () => {
  test(
    'create prints only the value; list --json; revoke applies to the next request of another process; errors exit 2 / 1',
    async () => {
      const e = fixture()
      const dir = e.dataDir
      // The CLI is another process: this test opens its own store on the directory, like `serve` would.
      e.store.close()
      const created = await runCli(['token', 'create', '--data', dir, '--user', 'alice@example.com', '--project', 'Acme', '--name', ' ci ', '--scopes', 'notes:read'])
      expect(created.stderr).toBe('')
      expect(created.code).toBe(0)
      expect(created.stdout).toMatch(/^trl_[A-Za-z0-9_-]{43}\n$/)
      const value = created.stdout.trim()

      const [list, badScope, unknownUser] = await Promise.all([
        runCli(['token', 'list', '--json', '--data', dir]),
        runCli(['token', 'create', '--data', dir, '--user', 'alice@example.com', '--project', 'Acme', '--name', 'x', '--scopes', 'notes:read,notes:frobnicate']),
        runCli(['token', 'create', '--data', dir, '--user', 'nobody@example.com', '--project', 'Acme', '--name', 'x']),
      ])
      expect(list.code).toBe(0)
      const rows = JSON.parse(list.stdout) as Record<string, unknown>[]
      expect(Array.isArray(rows)).toBe(true)
      expect(rows).toHaveLength(1)
      expect(Object.keys(rows[0]!).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'lastUsedAt', 'name', 'prefix', 'project', 'revokedAt', 'scopes', 'user'].sort())
      expect(rows[0]).toMatchObject({ name: 'ci', prefix: value.slice(0, 12), user: 'alice@example.com', project: 'Acme', scopes: ['notes:read'], lastUsedAt: null, expiresAt: null, revokedAt: null })
      expect(list.stdout).not.toContain(value)
      const id = rows[0]!.id as number

      expect(badScope.code).toBe(2)
      expect(badScope.stdout).toBe('')
      expect(badScope.stderr).toContain('notes:frobnicate')
      expect(unknownUser.code).toBe(1)
      expect(unknownUser.stdout).toBe('')
      expect(unknownUser.stderr).toContain('nobody@example.com')

      const store = openStore(dir)
      cleanups.push(() => store.close())
      migrate(store.sqlite)
      const clock = manualClock(Date.now())
      const app = testApp({ ...e, store, clock })
      expect((await getNotes(app, bearer(value))).status).toBe(200)

      const revoked = await runCli(['token', 'revoke', String(id), '--data', dir])
      expect(revoked.code).toBe(0)
      expect(revoked.stdout.trim()).toBe(`revoked token ${id}`)
      // The same app, the next request: revocation made by another process applies at once.
      const body = await expect401(await getNotes(app, bearer(value)))
      expect(body.message).toMatch(/revoked/i)
      const row = store.sqlite.prepare('SELECT revoked_at FROM api_tokens WHERE id = ?').get(id) as { revoked_at: number | null }
      expect(row.revoked_at).not.toBeNull()
    },
    30_000,
  )
})

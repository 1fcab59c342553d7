/**
 * API tokens (spec §2.6, §7.1; DESIGN §4–5): the token management API (create with presets, scopes and expiry;
 * list; revoke; the project's API access settings), lastUsedAt, secrecy of the token value, and the token CLI.
 * Real SQLite in temp dirs (test/support/auth-fixture.ts), the real app; the refusals are scenario tables.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { manualClock } from '../src/lib/clock.ts'
import type { Scope } from '../src/modules/tokens/service.ts'
import { processEnv, bearer, queryAll, queryOne, request, runCli, SQLITE_ONLY, sqliteOnlyTest, tableContents, testApp, type TestEnv, until } from './helpers.ts'
import {
  cleanups,
  expect401,
  expect403,
  fixture,
  getNotes,
  lastUsedAt,
  mint,
  postNote,
  READ_ONLY,
  sessionCookie,
  TOKEN_SHAPE,
  useFixtureCleanup,
} from './support/auth-fixture.ts'
import { expectErrorResponse, type Scenario, scenarios, type Sent } from './support/scenarios.ts'

useFixtureCleanup()

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
    const cookie = await sessionCookie(e, 'alice@example.com')
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

  test('presets and explicit scopes (repeats folded)', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = await sessionCookie(e, 'alice@example.com')
    const rw = (await (await createVia(app, { cookie }, { name: 'rw', projectName: 'Acme', preset: 'read-write' })).json()) as Created
    expect(rw.scopes).toEqual(['all'])
    const ro = (await (await createVia(app, { cookie }, { name: 'ro', projectName: 'Acme', preset: 'read-only' })).json()) as Created
    expect(ro.scopes).toEqual(READ_ONLY)
    const explicit = await createVia(app, { cookie }, { name: 'x', projectName: 'Acme', scopes: ['notes:write', 'workflows:trigger', 'notes:write'] })
    expect(explicit.status).toBe(201)
    expect(((await explicit.json()) as Created).scopes).toEqual(['notes:write', 'workflows:trigger'])

    // Nothing else was created.
    expect(queryOne<{ n: number }>(e.store, 'SELECT count(*) AS n FROM api_tokens')!.n).toBe(3)
  })

  test('expiry: expiresInDays and expiresAt', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = await sessionCookie(e, 'alice@example.com')
    const now = e.clock.now()
    const inDays = (await (await createVia(app, { cookie }, { name: 'd', projectName: 'Acme', expiresInDays: 30 })).json()) as Created
    expect(inDays.expiresAt).toBe(new Date(now + 30 * 86_400_000).toISOString())
    const at = '2027-01-15T10:00:00.000Z'
    const atCreated = (await (await createVia(app, { cookie }, { name: 'a', projectName: 'Acme', expiresAt: at })).json()) as Created
    expect(atCreated.expiresAt).toBe(at)
    const offset = (await (await createVia(app, { cookie }, { name: 'o', projectName: 'Acme', expiresAt: '2027-01-15T11:00:00+01:00' })).json()) as Created
    expect(offset.expiresAt).toBe(at)

  })

  test('a member that is not an admin may create a token (it just cannot read notes with it)', async () => {
    const e = fixture()
    const app = testApp(e)
    const dave = await sessionCookie(e, 'dave@example.com')
    const created = await createVia(app, { cookie: dave }, { name: 'x', projectName: 'Acme' })
    expect(created.status).toBe(201)
    await expect403(await getNotes(app, bearer(((await created.json()) as Created).token)), 'insufficient_role')
  })

  test('GET /v1/account/tokens lists the caller\'s live tokens without the value or any hash', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = await sessionCookie(e, 'alice@example.com')
    const a = (await (await createVia(app, { cookie }, { name: 'first', projectName: 'Acme' })).json()) as Created
    const b = (await (await createVia(app, { cookie }, { name: 'second', projectName: 'Beta', preset: 'read-write', expiresInDays: 7 })).json()) as Created
    const revoked = (await (await createVia(app, { cookie }, { name: 'gone', projectName: 'Acme' })).json()) as Created
    expect((await app.handle(request(`/v1/account/tokens/${revoked.id}`, { method: 'DELETE', headers: { cookie } }))).status).toBe(204)
    await mint(e, 'carol@example.com', { name: 'carols' })
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
    const hashes = queryAll<{ token_hash: string }>(e.store, 'SELECT token_hash FROM api_tokens')
    for (const secret of [a.token, b.token, revoked.token, ...hashes.map((h) => h.token_hash)]) expect(text).not.toContain(secret)
    expect(text).not.toMatch(/hash/i)
  })

  test('project API access settings: admins only (non-admin session → 403)', async () => {
    const e = fixture()
    const app = testApp(e)
    const alices = await mint(e, 'alice@example.com')
    for (const email of ['bob@example.com', 'dave@example.com']) {
      const cookie = await sessionCookie(e, email)
      await expect403(await app.handle(request('/v1/project/Acme/api-tokens', { headers: { cookie } })), 'insufficient_role')
      await expect403(
        await app.handle(request(`/v1/project/Acme/api-tokens/${alices.token.id}`, { method: 'DELETE', headers: { cookie } })),
        'insufficient_role',
      )
    }
    expect((await getNotes(app, bearer(alices.value))).status).toBe(200)
    const carol = await sessionCookie(e, 'carol@example.com')
    const list = (await (await app.handle(request('/v1/project/Acme/api-tokens', { headers: { cookie: carol } }))).json()) as { data: Record<string, unknown>[] }
    expect(list.data).toHaveLength(1)
    expect(Object.keys(list.data[0]!).sort()).toEqual(['createdAt', 'createdWithSso', 'expiresAt', 'id', 'lastUsedAt', 'name', 'prefix', 'projectName', 'scopes', 'user'])
    expect(JSON.stringify(list)).not.toContain(alices.value)
    await expectErrorResponse(await app.handle(request('/v1/project/Nope/api-tokens', { headers: { cookie: carol } })), 404, 'not_found')
  })

  test('management with a Bearer token: `all` of an admin works (confined to its project); read-only or non-admin → 403', async () => {
    const e = fixture()
    const app = testApp(e)
    const admin = await mint(e, 'alice@example.com', { scopes: ['all'] })
    const betaToken = await mint(e, 'alice@example.com', { project: 'Beta', scopes: ['notes:read'] })
    const listed = await app.handle(request('/v1/account/tokens', { headers: bearer(admin.value) }))
    expect(listed.status).toBe(200)
    const ids = ((await listed.json()) as { data: { id: number }[] }).data.map((t) => t.id)
    expect(ids).toEqual([admin.token.id]) // the Beta token is outside this token's project
    const created = await createVia(app, bearer(admin.value), { name: 'from-token', projectName: 'Acme' })
    expect(created.status).toBe(201)
    await expect403(await createVia(app, bearer(admin.value), { name: 'elsewhere', projectName: 'Beta' }), 'wrong_project')
    await expectErrorResponse(
      await app.handle(request(`/v1/account/tokens/${betaToken.token.id}`, { method: 'DELETE', headers: bearer(admin.value) })),
      404,
      'not_found',
    )
    expect((await app.handle(request('/v1/project/Acme/api-tokens', { headers: bearer(admin.value) }))).status).toBe(200)

    const readOnly = await mint(e, 'alice@example.com', { scopes: READ_ONLY as Scope[] })
    await expect403(await app.handle(request('/v1/account/tokens', { headers: bearer(readOnly.value) })))
    await expect403(await createVia(app, bearer(readOnly.value), { name: 'x', projectName: 'Acme' }))
    const bobAll = await mint(e, 'bob@example.com', { scopes: ['all'] })
    await expect403(await app.handle(request('/v1/account/tokens', { headers: bearer(bobAll.value) })))
    // An invalid Bearer header is a 401 even with a valid cookie next to it.
    const cookie = await sessionCookie(e, 'alice@example.com')
    await expect401(await app.handle(request('/v1/account/tokens', { headers: { cookie, authorization: 'Bearer nope' } })))
  })
})

// ── A token made by a token ─────────────────────────────────────────────────

describe('a token made by a token (POST /v1/account/tokens with a Bearer token): never outlives the token that made it', () => {
  const DAY = 86_400_000
  interface Made {
    id: number
    token: string
    expiresAt: string | null
  }

  const create = (app: ReturnType<typeof testApp>, value: string, json: Record<string, unknown> = {}) =>
    app.handle(request('/v1/account/tokens', { method: 'POST', headers: bearer(value), json: { name: 'child', projectName: 'Acme', preset: 'read-write', ...json } }))

  async function made(app: ReturnType<typeof testApp>, value: string, json: Record<string, unknown> = {}): Promise<Made> {
    const response = await create(app, value, json)
    expect(response.status).toBe(201)
    return (await response.json()) as Made
  }

  const parentOf = (e: TestEnv, id: number) => queryOne<{ parent_token_id: number | null }>(e.store, 'SELECT parent_token_id FROM api_tokens WHERE id = ?', id)!.parent_token_id
  const revokedAt = (e: TestEnv, id: number) => queryOne<{ revoked_at: number | null }>(e.store, 'SELECT revoked_at FROM api_tokens WHERE id = ?', id)!.revoked_at
  /** Live tokens whose maker is revoked: there must never be one. */
  const orphans = (e: TestEnv) =>
    queryOne<{ n: number }>(
      e.store,
      'SELECT count(*) AS n FROM api_tokens c JOIN api_tokens p ON p.id = c.parent_token_id WHERE p.revoked_at IS NOT NULL AND c.revoked_at IS NULL',
    )!.n

  test('no expiry asked: it inherits the expiry of the token that made it (none when that one has none); the maker is recorded', async () => {
    const e = fixture()
    const app = testApp(e)
    const expiresAt = e.clock.now() + 30 * DAY
    const parent = await mint(e, 'alice@example.com', { expiresAt })
    const child = await made(app, parent.value)
    expect(child.expiresAt).toBe(new Date(expiresAt).toISOString())
    expect(parentOf(e, child.id)).toBe(parent.token.id)
    // The grandchild inherits it from the child.
    const grandchild = await made(app, child.token, { name: 'grandchild' })
    expect(grandchild.expiresAt).toBe(new Date(expiresAt).toISOString())
    expect(parentOf(e, grandchild.id)).toBe(child.id)
    // A token without expiry makes tokens without expiry unless asked otherwise.
    const forever = await mint(e, 'alice@example.com')
    expect((await made(app, forever.value)).expiresAt).toBeNull()
    expect((await made(app, forever.value, { expiresInDays: 7 })).expiresAt).toBe(new Date(e.clock.now() + 7 * DAY).toISOString())
    // A session makes tokens of no maker.
    const cookie = await sessionCookie(e, 'alice@example.com')
    const bySession = (await (await app.handle(request('/v1/account/tokens', { method: 'POST', headers: { cookie }, json: { name: 's', projectName: 'Acme' } }))).json()) as Made
    expect(bySession.expiresAt).toBeNull()
    expect(parentOf(e, bySession.id)).toBeNull()
  })

  test('an expiry later than the maker\'s → 400 naming the field, nothing created; the same or an earlier one is accepted', async () => {
    const e = fixture()
    const app = testApp(e)
    const expiresAt = e.clock.now() + 30 * DAY
    const parent = await mint(e, 'alice@example.com', { expiresAt })
    const before = tokenCount(e)
    const later: [Record<string, unknown>, string][] = [
      [{ expiresInDays: 31 }, 'expiresInDays'],
      [{ expiresAt: new Date(expiresAt + 1000).toISOString() }, 'expiresAt'],
    ]
    for (const [json, field] of later) {
      const body = await expectErrorResponse(await create(app, parent.value, json), 400, 'validation_failed')
      expect(body.details).toEqual([{ field, message: expect.stringContaining(new Date(expiresAt).toISOString()) }])
      expect(body.message).toContain(field)
    }
    expect(tokenCount(e)).toBe(before)
    expect((await made(app, parent.value, { expiresAt: new Date(expiresAt).toISOString() })).expiresAt).toBe(new Date(expiresAt).toISOString())
    expect((await made(app, parent.value, { expiresInDays: 29 })).expiresAt).toBe(new Date(e.clock.now() + 29 * DAY).toISOString())
  })

  test('revoking a token revokes every token it made, transitively, in the same transaction; each gets its admin log entry', async () => {
    const e = fixture()
    const app = testApp(e)
    const parent = await mint(e, 'alice@example.com', { name: 'parent' })
    const child = await made(app, parent.value, { name: 'child' })
    const grandchild = await made(app, child.token, { name: 'grandchild' })
    const sibling = await made(app, parent.value, { name: 'sibling' })
    const unrelated = await mint(e, 'alice@example.com', { name: 'unrelated' })
    const cookie = await sessionCookie(e, 'alice@example.com')
    const logBefore = queryOne<{ n: number }>(e.store, "SELECT count(*) AS n FROM admin_logs WHERE type = 'remove' AND resource = 'api-token'")!.n

    // Revoking the child alone leaves its maker and sibling working, and takes the grandchild with it.
    expect((await app.handle(request(`/v1/account/tokens/${child.id}`, { method: 'DELETE', headers: { cookie } }))).status).toBe(204)
    await expect401(await getNotes(app, bearer(grandchild.token)))
    expect((await getNotes(app, bearer(parent.value))).status).toBe(200)
    expect((await getNotes(app, bearer(sibling.token))).status).toBe(200)
    expect(revokedAt(e, grandchild.id)).toBe(revokedAt(e, child.id))

    // Revoking the maker takes the sibling; the unrelated token stays.
    const again = await made(app, parent.value, { name: 'after' })
    const deeper = await made(app, again.token, { name: 'deeper' })
    expect((await app.handle(request(`/v1/project/Acme/api-tokens/${parent.token.id}`, { method: 'DELETE', headers: { cookie } }))).status).toBe(204)
    for (const value of [parent.value, sibling.token, again.token, deeper.token]) await expect401(await getNotes(app, bearer(value)))
    expect((await getNotes(app, bearer(unrelated.value))).status).toBe(200)
    expect(new Set([parent.token.id, sibling.id, again.id, deeper.id].map((id) => revokedAt(e, id))).size).toBe(1)
    expect(orphans(e)).toBe(0)

    const entries = queryAll<{ previous_value: string }>(
      e.store,
      "SELECT previous_value FROM admin_logs WHERE type = 'remove' AND resource = 'api-token' ORDER BY id",
    ).slice(logBefore)
    const names = entries.map((entry) => JSON.parse(entry.previous_value).name as string)
    expect(names).toHaveLength(6)
    const revokedWith = (name: string) => names.filter((n) => n.startsWith(`${name} (`)).map((n) => n.split(', revoked with ')[1] ?? null)
    expect(revokedWith('grandchild')).toEqual([`child (${child.token.slice(0, 12)}…), from which it was made`])
    for (const name of ['sibling', 'after', 'deeper']) expect(revokedWith(name)).toEqual([`parent (${parent.value.slice(0, 12)}…), from which it was made`])
    expect(revokedWith('child')).toEqual([null])
    expect(revokedWith('parent')).toEqual([null])
  })

  test('a token revoking itself revokes what it made; what the revoked token made can no longer make tokens', async () => {
    const e = fixture()
    const app = testApp(e)
    const parent = await mint(e, 'alice@example.com')
    const child = await made(app, parent.value)
    expect((await app.handle(request(`/v1/account/tokens/${parent.token.id}`, { method: 'DELETE', headers: bearer(parent.value) }))).status).toBe(204)
    await expect401(await create(app, child.token))
    await expect401(await getNotes(app, bearer(child.token)))
  })

  test('concurrent: tokens made while their maker is revoked are revoked with it or refused, never left live', async () => {
    const e = fixture()
    const app = testApp(e)
    const cookie = await sessionCookie(e, 'alice@example.com')
    for (let round = 0; round < 5; round++) {
      const parent = await mint(e, 'alice@example.com', { name: `parent ${round}` })
      const child = await made(app, parent.value, { name: `child ${round}` })
      const makes = Array.from({ length: 8 }, (_, i) => create(app, i % 2 === 0 ? parent.value : child.token, { name: `racer ${round}.${i}` }))
      const revoke = app.handle(request(`/v1/account/tokens/${parent.token.id}`, { method: 'DELETE', headers: { cookie } }))
      const answers = await Promise.all([...makes, revoke])
      expect(answers.at(-1)!.status).toBe(204)
      for (const answer of answers.slice(0, -1)) expect([201, 401]).toContain(answer.status)
      expect(orphans(e)).toBe(0)
      for (const answer of answers.slice(0, -1)) {
        if (answer.status === 201) await expect401(await getNotes(app, bearer(((await answer.json()) as Made).token)))
      }
    }
  }, 30_000) // on PostgreSQL each round waits on real row locks
})

// ── Token management API: refusals ──────────────────────────────────────────

/**
 * A fixture of its own for a table of refusals: `beforeAll` builds it, and `send` goes through its app checking
 * every error body as DESIGN §5 shapes it (JSON, `error` / `code` / `message`, nothing else but details / retry_after).
 */
function refusalFixture() {
  const state = {} as { e: TestEnv; app: ReturnType<typeof testApp>; tokensBefore: number }
  beforeAll(() => {
    state.e = fixture()
    cleanups.splice(cleanups.indexOf(state.e.cleanup), 1) // kept for the whole describe, not one test
    state.app = testApp(state.e)
    state.tokensBefore = tokenCount(state.e)
  })
  afterAll(() => state.e.cleanup())
  const send = async (req: Request): Promise<Sent> => {
    const response = await state.app.handle(req)
    if (response.status < 400) return { status: response.status, headers: response.headers, body: await response.json() }
    return { status: response.status, headers: response.headers, body: await expectErrorResponse(response, response.status) }
  }
  return { state, send }
}

const tokenCount = (e: TestEnv) => queryOne<{ n: number }>(e.store, 'SELECT count(*) AS n FROM api_tokens')!.n

describe('POST /v1/account/tokens: a refused body → 400 validation_failed naming the field, nothing created', () => {
  const { state, send } = refusalFixture()
  const create = (json: Record<string, unknown>) => async () => ({ method: 'POST', path: '/v1/account/tokens', headers: { cookie: await sessionCookie(state.e, 'alice@example.com') }, body: json })
  const refused = (name: string, json: Record<string, unknown>, check?: Scenario['check']): Scenario => ({ name, request: create(json), status: 400, code: 'validation_failed', check })
  const at = '2027-01-15T10:00:00.000Z'
  scenarios(
    [
      refused('an unknown scope', { name: 'x', projectName: 'Acme', scopes: ['notes:read', 'notes:delete'] }, (body) => {
        expect(body.message).toContain('notes:delete')
        expect(body.details).toEqual([{ field: 'scopes', message: expect.stringContaining('notes:delete') }])
        expect(body.message).toBe(`Invalid field 'scopes': ${body.details![0]!.message}`)
      }),
      refused('an unknown preset', { name: 'x', projectName: 'Acme', preset: 'god-mode' }, (body) => {
        expect(body.message).toContain('god-mode')
        expect(body.details?.[0]?.field).toBe('preset')
      }),
      refused('no scopes', { name: 'x', projectName: 'Acme', scopes: [] }),
      refused('scopes and a preset', { name: 'x', projectName: 'Acme', scopes: ['all'], preset: 'read-only' }),
      refused('no name', { projectName: 'Acme' }, (body) => expect(body.message).toContain('name')),
      ...['', '   ', '\t\n'].map((name) => refused(`a blank name ${JSON.stringify(name)}`, { name, projectName: 'Acme' }, (body) => expect(body.details?.[0]?.field).toBe('name'))),
      ...['2026-11-21T11:59:59.000Z', '2000-01-01'].map((expiresAt) =>
        refused(`expiresAt ${expiresAt} in the past`, { name: 'p', projectName: 'Acme', expiresAt }, (body) => expect(body.details?.[0]?.field).toBe('expiresAt')),
      ),
      {
        name: 'expiresAt now',
        request: () => create({ name: 'p', projectName: 'Acme', expiresAt: new Date(state.e.clock.now()).toISOString() })(),
        status: 400,
        code: 'validation_failed',
        check: (body) => expect(body.details?.[0]?.field).toBe('expiresAt'),
      },
      ...['not-a-date', '2027-02-30T00:00:00Z', '2027-01-15T25:00', ''].map((expiresAt) =>
        refused(`expiresAt ${JSON.stringify(expiresAt)}`, { name: 'p', projectName: 'Acme', expiresAt }, (body) => expect(body.message).toContain('expiresAt')),
      ),
      ...[0, -1, 100_000].map((expiresInDays) =>
        refused(`expiresInDays ${expiresInDays}`, { name: 'p', projectName: 'Acme', expiresInDays }, (body) => expect(body.message).toContain('expiresInDays')),
      ),
      refused('expiresInDays 1.5', { name: 'p', projectName: 'Acme', expiresInDays: 1.5 }),
      refused('expiresInDays "soon"', { name: 'p', projectName: 'Acme', expiresInDays: 'soon' }),
      refused('expiresInDays and expiresAt', { name: 'p', projectName: 'Acme', expiresInDays: 3, expiresAt: at }),
    ],
    send,
  )
  test('nothing was created by the refused requests', () => {
    expect(tokenCount(state.e)).toBe(state.tokensBefore)
  })
})

describe('POST /v1/account/tokens for a project the user is not a member of, or that does not exist → 404', () => {
  const { state, send } = refusalFixture()
  const create = (projectName: string) => async () => ({ method: 'POST', path: '/v1/account/tokens', headers: { cookie: await sessionCookie(state.e, 'dave@example.com') }, body: { name: 'x', projectName } })
  scenarios(
    [
      { name: 'not a member of Beta', request: create('Beta'), status: 404, code: 'not_found', check: (body) => expect(body.message).toContain('Beta') },
      { name: 'no project Nope', request: create('Nope'), status: 404, code: 'not_found', check: (body) => expect(body.message).toContain('Nope') },
    ],
    send,
  )
})

describe("DELETE another user's token through /v1/account/tokens → 404, and it keeps working", () => {
  const { state, send } = refusalFixture()
  let carols = { value: '', token: { id: 0 } }
  beforeAll(async () => {
    carols = await mint(state.e, 'carol@example.com')
  })
  const remove = (id: () => string) => async () => ({ method: 'DELETE', path: `/v1/account/tokens/${id()}`, headers: { cookie: await sessionCookie(state.e, 'alice@example.com') } })
  scenarios(
    [
      { name: "carol's token → 404", request: remove(() => String(carols.token.id)), status: 404, code: 'not_found' },
      { name: 'an unknown id → 404', request: remove(() => '999999'), status: 404, code: 'not_found' },
      { name: 'id abc → 400', request: remove(() => 'abc'), status: 400 },
    ],
    send,
  )
  test("carol's token still works", async () => {
    expect((await getNotes(state.app, bearer(carols.value))).status).toBe(200)
  })
})

describe('without a cookie or a token → 401; an unknown cookie → 401', () => {
  const { send } = refusalFixture()
  const unauthorized = (name: string, request: Scenario['request']): Scenario => ({ name, request, status: 401, code: 'unauthorized', body: { error: 'Unauthorized' } })
  scenarios(
    [
      unauthorized('GET /v1/account/tokens', { path: '/v1/account/tokens' }),
      unauthorized('POST /v1/account/tokens', { method: 'POST', path: '/v1/account/tokens', body: { name: 'x', projectName: 'Acme' } }),
      unauthorized('DELETE /v1/account/tokens/1', { method: 'DELETE', path: '/v1/account/tokens/1' }),
      unauthorized('GET /v1/project/Acme/api-tokens', { path: '/v1/project/Acme/api-tokens' }),
      unauthorized('DELETE /v1/project/Acme/api-tokens/1', { method: 'DELETE', path: '/v1/project/Acme/api-tokens/1' }),
      unauthorized('GET /v1/account with a forged session cookie', { path: '/v1/account', headers: { cookie: 'trellis_session=forged' } }),
      // Validation comes after authentication here too.
      unauthorized('POST /v1/account/tokens with a bogus body', { method: 'POST', path: '/v1/account/tokens', body: { bogus: 1 } }),
    ],
    send,
  )
})

// ── lastUsedAt ──────────────────────────────────────────────────────────────

describe('lastUsedAt', () => {
  test('set on first use, written at most once a minute', async () => {
    const e = fixture()
    const app = testApp(e)
    const { token, value } = await mint(e, 'alice@example.com')
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
    const cookie = await sessionCookie(e, 'alice@example.com')
    const list = (await (await app.handle(request('/v1/account/tokens', { headers: { cookie } }))).json()) as { data: { lastUsedAt: string }[] }
    expect(list.data[0]!.lastUsedAt).toBe(new Date(first + 61_000).toISOString())
  })

  test('a refused (403) call still counts as use; a revoked or expired token is not touched', async () => {
    const e = fixture()
    const app = testApp(e)
    const bobs = await mint(e, 'bob@example.com')
    await expect403(await getNotes(app, bearer(bobs.value)))
    // SQLite stamps before the answer; PostgreSQL commits the stamp right after it (never delaying the call).
    expect(await until('the lastUsedAt stamp', () => lastUsedAt(e, bobs.token.id) ?? false, 2_000, 20)).toBe(e.clock.now())
    const expiring = await mint(e, 'alice@example.com', { expiresAt: e.clock.now() + 1000 })
    e.clock.advance(1000)
    await expect401(await getNotes(app, bearer(expiring.value)))
    expect(lastUsedAt(e, expiring.token.id)).toBeNull()
  })
})

// ── The token value is never stored or logged ───────────────────────────────

describe('token secrecy', () => {
  test(
    'after creating tokens via API, CLI and service and using them, no table holds a value; admin logs carry only the prefix',
    async () => {
      const e = fixture()
      const app = testApp(e)
      const cookie = await sessionCookie(e, 'alice@example.com')
      const apiCreated = (await (await app.handle(request('/v1/account/tokens', { method: 'POST', headers: { cookie }, json: { name: 'api', projectName: 'Acme', preset: 'read-write' } }))).json()) as {
        id: number
        token: string
        prefix: string
      }
      const cli = await runCli(['token', 'create', '--data', e.dataDir, '--user', 'carol@example.com', '--project', 'Acme', '--name', 'cli', '--scopes', 'notes:read,notes:write'], { env: processEnv(e) })
      expect({ code: cli.code, stderr: cli.stderr }).toEqual({ code: 0, stderr: '' })
      const cliValue = cli.stdout.trim()
      expect(cliValue).toMatch(TOKEN_SHAPE)
      const service = await mint(e, 'alice@example.com', { name: 'service' })
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
      const tokens = queryAll<{ id: number; prefix: string; token_hash: string }>(e.store, 'SELECT id, prefix, token_hash FROM api_tokens ORDER BY id')
      expect(tokens.map((t) => t.prefix).sort()).toEqual(values.map((v) => v.slice(0, 12)).sort())
      for (const t of tokens) expect(t.token_hash).toMatch(/^[0-9a-f]{64}$/)

      const logs = queryAll<{ type: string; resource: string; previous_value: string | null; new_value: string | null }>(
        e.store,
        "SELECT type, resource, previous_value, new_value FROM admin_logs WHERE resource = 'api-token' ORDER BY id",
      )
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
  sqliteOnlyTest(
    SQLITE_ONLY.ownDataDir,
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

      const [list, badScope, unknownUser, ...prototypePresets] = await Promise.all([
        runCli(['token', 'list', '--json', '--data', dir]),
        runCli(['token', 'create', '--data', dir, '--user', 'alice@example.com', '--project', 'Acme', '--name', 'x', '--scopes', 'notes:read,notes:frobnicate']),
        runCli(['token', 'create', '--data', dir, '--user', 'nobody@example.com', '--project', 'Acme', '--name', 'x']),
        // Presets named like Object.prototype members are unknown presets, not a crash.
        ...['toString', 'constructor'].map((preset) => runCli(['token', 'create', '--data', dir, '--user', 'alice@example.com', '--project', 'Acme', '--name', 'x', '--preset', preset])),
      ])
      for (const [i, refused] of prototypePresets.entries()) {
        expect({ code: refused.code, stdout: refused.stdout }).toEqual({ code: 2, stdout: '' })
        expect(refused.stderr).toContain(`unknown preset "${['toString', 'constructor'][i]}" (one of read-only, read-write)`)
      }
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

/**
 * U+0000 (NUL) in anything a caller sends (docs/api.md "Text never holds U+0000"): PostgreSQL's text cannot hold it, so
 * Trellis stores no text holding it, on either store. A list filter holding it matches nothing (200, empty); a
 * path parameter or body field holding it is a 400 naming it, after authentication, and nothing is written; the
 * webhook's `record_id` and the apply file say the same. Runs on both stores (the PostgreSQL pass): the answers are the
 * same, and never a 500.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ApplyError } from '../src/modules/apply/service.ts'
import { bearer, handleJson, queryOne, request, tableContents, testApp, testEnv, TEST_STORE } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, reportHook, tokenFor } from './support/acme.ts'
import { cookieFrom, login } from './support/auth-fixture.ts'

const NUL = '\u0000'
const env = testEnv()
const app = testApp(env)
const ctx = { store: env.store, clock: env.clock, secret: env.secret, baseUrl: 'http://trellis.test' }
let admin: string
let hook: string
afterAll(() => env.cleanup())
beforeAll(async () => {
  hook = reportHook(await applyAcme(ctx, acmeDocument({ passwords: true })), 'Refund order')
  admin = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
})

interface ErrorBody {
  error: string
  code: string
  message: string
  details?: { field: string; message: string }[]
}

async function send(method: string, path: string, options: { json?: unknown; token?: string | null } = {}) {
  const token = options.token === undefined ? admin : options.token
  const { response, body } = await handleJson(app, request(path, { method, headers: token === null ? {} : bearer(token), ...(options.json === undefined ? {} : { json: options.json }) }))
  return { status: response.status, body: body as ErrorBody & { data?: unknown[]; hasMore?: boolean } }
}

/** Every row count of the store (a refused request must leave them all as they were). */
function counts(): Record<string, number> {
  const tables = ['notes', 'note_messages', 'records', 'activity_logs', 'admin_logs', 'runs', 'api_tokens', 'users', 'workflows']
  return Object.fromEntries(tables.map((table) => [table, queryOne<{ n: number }>(env.store, `SELECT count(*) AS n FROM ${table}`)!.n]))
}

const ENV = '/v1/project/Acme/environment/production'

/** `json` sent to `method path` is refused — 400 validation_failed naming `field`, its message saying `says` — and nothing is written. */
async function expectFieldRefused(method: string, path: string, json: unknown, field: string, says: string) {
  const before = counts()
  const { status, body } = await send(method, path, { json })
  expect({ status, code: body.code, field: body.details?.[0]?.field }).toEqual({ status: 400, code: 'validation_failed', field })
  expect(body.message).toContain(says)
  expect(counts()).toEqual(before)
}

describe('a list filter holding U+0000 matches nothing (200, empty), on every list', () => {
  const lists: [string, string[]][] = [
    [`${ENV}/notes`, ['userEmail', 'teamName', 'collectionName', 'recordId']],
    [`${ENV}/activity-logs`, ['userEmail', 'teamName', 'collectionName', 'recordId']],
    ['/v1/project/Acme/admin-logs', ['userEmail']],
    [`${ENV}/workflow-runs`, ['recordId', 'workflowName']],
  ]
  test.each(lists.flatMap(([path, names]) => names.flatMap((name) => [`${NUL}`, `a${NUL}b`].map((value) => [path, name, value] as const))))(
    '%s?%s=%p',
    async (path, name, value) => {
      const { status, body } = await send('GET', `${path}?${new URLSearchParams({ [name]: value })}`)
      expect({ status, hasMore: body.hasMore, data: body.data }).toEqual({ status: 200, hasMore: false, data: [] })
    },
  )

  test('workflowName with a teamName holding U+0000 → 200 empty', async () => {
    const { status, body } = await send('GET', `${ENV}/workflow-runs?${new URLSearchParams({ workflowName: 'Refund order', teamName: NUL })}`)
    expect({ status, data: body.data }).toEqual({ status: 200, data: [] })
  })

  test('the same lists with no filter are not empty (the filter, not the fixture, emptied them)', async () => {
    for (const path of [`${ENV}/activity-logs`, '/v1/project/Acme/admin-logs']) expect((await send('GET', path)).body.data!.length).toBeGreaterThan(0)
  })
})

describe('a path parameter holding U+0000 → 400 invalid_parameter naming it, after authentication', () => {
  const paths: [string, string, string][] = [
    ['GET', `/v1/project/Acme/environment/%00/notes`, 'environmentName'],
    ['GET', `/v1/project/Acme/environment/prod%00uction/activity-logs`, 'environmentName'],
    ['PUT', `${ENV}/collection/orders/records/ord%00`, 'recordId'],
    ['PUT', `${ENV}/collection/ord%00ers/records/ord_1`, 'collectionName'],
    ['PUT', `${ENV}/team/Support/workflows/Ref%00und`, 'workflowName'],
    ['GET', `${ENV}/team/Sup%00port/workflows/Refund%20order/webhook`, 'teamName'],
  ]
  const bodies: Record<string, unknown> = {
    PUT: { data: { total: 1 }, teamName: 'Support' },
  }
  test.each(paths)('%s %s → 400 naming %s', async (method, path, name) => {
    const before = counts()
    const json = path.includes('/workflows/') && method === 'PUT' ? { collection: 'orders', steps: [{ type: 'load' }] } : bodies[method]
    const { status, body } = await send(method, path, { json })
    expect({ status, code: body.code, field: body.details?.[0]?.field }).toEqual({ status: 400, code: 'invalid_parameter', field: name })
    expect(body.message).toContain('U+0000')
    expect(counts()).toEqual(before)
  })

  test('without a token: 401 first, as for every other refusal', async () => {
    expect((await send('GET', `/v1/project/Acme/environment/%00/notes`, { token: null })).status).toBe(401)
    expect((await send('PUT', `${ENV}/collection/orders/records/ord%00`, { token: null, json: bodies.PUT })).status).toBe(401)
  })

  test('a run id or a project name in the path: refused, never a 500', async () => {
    // A run id is a UUID (its own 400); a token is bound to its project, so another name is its 403 before anything.
    expect((await send('GET', '/v1/workflow-runs/%00')).status).toBe(400)
    expect((await send('GET', '/v1/project/Ac%00me/environment/production/notes')).status).toBe(403)
  })
})

describe('a body field holding U+0000 → 400 validation_failed naming it; nothing is written', () => {
  const note = { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Refund', content: '<p>ok</p>' }
  const cases: [string, string, string, Record<string, unknown>, string][] = [
    ['note title', 'POST', `${ENV}/notes`, { ...note, title: `Re${NUL}fund` }, 'title'],
    ['note content', 'POST', `${ENV}/notes`, { ...note, content: `<p>${NUL}</p>` }, 'content'],
    ['note recordId', 'POST', `${ENV}/notes`, { ...note, recordId: `ord${NUL}` }, 'recordId'],
    ['note teamName', 'POST', `${ENV}/notes`, { ...note, teamName: NUL }, 'teamName'],
    ['run recordId', 'POST', `${ENV}/workflow-runs`, { workflowName: 'Refund order', teamName: 'Support', recordId: `ord${NUL}` }, 'recordId'],
    ['record data value', 'PUT', `${ENV}/collection/orders/records/ord_nul`, { data: { note: `a${NUL}b` }, teamName: 'Support' }, 'data.note'],
    ['record data key', 'PUT', `${ENV}/collection/orders/records/ord_nul`, { data: { [`k${NUL}`]: 1 }, teamName: 'Support' }, 'data'],
    ['record data, deep', 'PUT', `${ENV}/collection/orders/records/ord_nul`, { data: { lines: [{ sku: 'a' }, { sku: NUL }] }, teamName: 'Support' }, 'data.lines[1].sku'],
    ['token name', 'POST', '/v1/account/tokens', { name: `ci${NUL}`, projectName: 'Acme', preset: 'read-only' }, 'name'],
    ['workflow step', 'PUT', `${ENV}/team/Support/workflows/Nul`, { collection: 'orders', steps: [{ type: 'load', name: `lo${NUL}ad` }] }, 'steps[0].name'],
    ['user email', 'POST', '/v1/instance/users', { email: `x${NUL}@example.com`, username: 'x', password: 'a long enough password' }, 'email'],
    ['project name', 'POST', '/v1/projects', { name: `P${NUL}` }, 'name'],
  ]
  test.each(cases)('%s (%s %s)', async (_what, method, path, json, field) => {
    await expectFieldRefused(method, path, json, field, 'U+0000')
  })

  test('a message and a new title holding U+0000: refused; the note keeps its thread and title', async () => {
    const created = await send('POST', `${ENV}/notes`, { json: note })
    expect(created.status).toBe(201)
    const id = (created.body as unknown as { id: number }).id
    const before = counts()
    const message = await send('POST', `${ENV}/notes/${id}/messages`, { json: { content: `a${NUL}` } })
    expect({ status: message.status, field: message.body.details?.[0]?.field }).toEqual({ status: 400, field: 'content' })
    const renamed = await send('PATCH', `${ENV}/notes/${id}`, { json: { title: NUL } })
    expect({ status: renamed.status, field: renamed.body.details?.[0]?.field }).toEqual({ status: 400, field: 'title' })
    expect(counts()).toEqual(before)
    const read = (await send('GET', `${ENV}/notes/${id}`)).body as unknown as { title: string; messages: unknown[] }
    expect({ title: read.title, messages: read.messages.length }).toEqual({ title: 'Refund', messages: 1 })
  })

  test('without a token: 401 first, as for every other refusal', async () => {
    expect((await send('POST', `${ENV}/notes`, { token: null, json: { ...note, title: NUL } })).status).toBe(401)
  })

  test('password login with an email holding U+0000 → 400 naming email, never a 500', async () => {
    const { status, body } = await send('POST', '/auth/login', { token: null, json: { email: `alice${NUL}@example.com`, password: 'whatever it is' } })
    expect({ status, field: body.details?.[0]?.field }).toEqual({ status: 400, field: 'email' })
  })
})

describe('the webhook and the apply file', () => {
  test('a webhook record_id holding U+0000 → 400 invalid_record_id; no run', async () => {
    const token = (await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])).value
    const before = counts()
    for (const recordId of [NUL, `ord_1001${NUL}`]) {
      const { status, body } = await send('POST', hook, { token, json: { record_id: recordId } })
      expect({ status, code: body.code }).toEqual({ status: 400, code: 'invalid_record_id' })
      expect(body.message).toContain('U+0000')
    }
    expect(counts()).toEqual(before)
  })

  test('an apply file with U+0000 in a record id or a note: refused naming the path; nothing written', async () => {
    const before = TEST_STORE === 'sqlite' ? JSON.stringify(tableContents(env.store)) : JSON.stringify(counts())
    const document = acmeDocument()
    const project = acmeProject(document) as unknown as { records?: { id: string }[] }
    expect(project.records?.length).toBeGreaterThan(0)
    project.records![0]!.id = `ord${NUL}`
    const error = await applyAcme(ctx, document).then(() => null, (e: unknown) => e)
    expect(error).toBeInstanceOf(ApplyError)
    expect((error as ApplyError).problems).toEqual([{ path: 'projects[0].records[0].id', message: 'must not contain U+0000 (NUL)' }])
    const after = TEST_STORE === 'sqlite' ? JSON.stringify(tableContents(env.store)) : JSON.stringify(counts())
    expect(after).toEqual(before)
  })
})

describe('with a console session (names looked up, not compared with a token)', () => {
  let cookie: string
  beforeAll(async () => {
    cookie = cookieFrom(await login(app, 'alice@example.com'))
  })
  const paths: [string, string, number][] = [
    ['GET', '/v1/project/Ac%00me/api-tokens', 400],
    ['PUT', '/v1/project/Ac%00me/environment/production/collection/orders/records/ord_1', 400],
    ['GET', `${ENV}/workflow-runs?recordId=%00`, 200],
    ['GET', '/p/Ac%00me', 400],
    ['GET', '/p/Acme/e/%00/activity', 400],
    ['GET', '/p/Acme/e/production/activity?recordId=%00&teamName=%00', 200],
    ['GET', '/p/Acme/e/production/notes?userEmail=%00', 200],
    ['GET', '/p/Acme/admin-log?userEmail=%00', 200],
    ['GET', '/p/Acme/e/production/runs?recordId=%00&before=%00', 200],
    ['GET', '/p/Acme/e/production/t/Support/c/orders/r/ord%00', 400],
  ]
  test('a console page is checked after the session: without one, the usual redirect to the login page', async () => {
    const response = await app.handle(request('/p/Ac%00me'))
    expect(response.status).toBe(303)
    expect(response.headers.get('location')).toStartWith('/login?next=')
  })

  test.each(paths)('%s %s → %d, never a 500', async (method, path, expected) => {
    const before = counts()
    const response = await app.handle(request(path, { method, headers: { cookie }, ...(method === 'PUT' ? { json: { data: {}, teamName: 'Support' } } : {}) }))
    expect(response.status).toBe(expected)
    if (method === 'PUT') expect(counts()).toEqual(before)
  })
})

describe('a lone surrogate (JSON\'s "\\ud800": no Unicode character, no UTF-8 form) is refused like U+0000, on both stores', () => {
  const LONE = ['\ud800', 'a\udc00b', 'x\udbff']
  const note = { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Refund', content: '<p>ok</p>' }

  test.each(LONE)('password login with an email holding %p → 400 naming email (was 429 on PostgreSQL), from any address, every time', async (lone) => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const { status, body } = await send('POST', '/auth/login', { token: null, json: { email: `alice${lone}@example.com`, password: 'whatever it is' } })
      expect({ status, code: body.code, field: body.details?.[0]?.field }).toEqual({ status: 400, code: 'validation_failed', field: 'email' })
      expect(body.message).toContain('lone surrogate')
    }
    // The throttle counted nothing: the right password still signs in.
    expect((await send('POST', '/auth/login', { token: null, json: { email: 'alice@example.com', password: 'alice-demo-pass-2026' } })).status).toBe(200)
  })

  const cases: [string, string, string, Record<string, unknown>, string][] = [
    ['note title', 'POST', `${ENV}/notes`, { ...note, title: `Re\ud800fund` }, 'title'],
    ['record data value, deep', 'PUT', `${ENV}/collection/orders/records/ord_lone`, { data: { lines: [{ sku: 'a\udfff' }] }, teamName: 'Support' }, 'data.lines[0].sku'],
    ['token name', 'POST', '/v1/account/tokens', { name: 'ci\udc00', projectName: 'Acme', preset: 'read-only' }, 'name'],
    ['user email', 'POST', '/v1/instance/users', { email: 'x\ud800@example.com', username: 'x', password: 'a long enough password' }, 'email'],
  ]
  test.each(cases)('%s (%s %s) → 400 validation_failed naming it; nothing written', async (_what, method, path, json, field) => {
    await expectFieldRefused(method, path, json, field, 'lone surrogate')
  })

  test('a webhook record_id holding one → 400 invalid_record_id; no run', async () => {
    const token = (await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])).value
    const before = counts()
    const { status, body } = await send('POST', hook, { token, json: { record_id: 'ord_1001\ud800' } })
    expect({ status, code: body.code }).toEqual({ status: 400, code: 'invalid_record_id' })
    expect(body.message).toContain('lone surrogate')
    expect(counts()).toEqual(before)
  })

  test('an apply file holding one: refused naming the path; nothing written', async () => {
    const before = JSON.stringify(counts())
    const document = acmeDocument()
    ;(acmeProject(document) as unknown as { records: { id: string }[] }).records[0]!.id = 'ord\ud800'
    const error = await applyAcme(ctx, document).then(() => null, (e: unknown) => e)
    expect((error as ApplyError).problems).toEqual([{ path: 'projects[0].records[0].id', message: expect.stringContaining('lone surrogate') }])
    expect(JSON.stringify(counts())).toEqual(before)
  })
})

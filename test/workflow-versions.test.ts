/**
 * A workflow's version history through the API: `GET …/workflows/{name}/versions` (newest first,
 * the shared list envelope, paged by `before`) and `GET …/workflows/{name}/versions/{version}` (a version's
 * definition as published), for project admins, over the real app on the test store (SQLite, or PostgreSQL with
 * TRELLIS_TEST_STORE=postgres). Publishing by PUT, then every answer: happy paths, each error status, bad input.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { bearer, handleJson, request, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, applyAcme, tokensFor } from './support/acme.ts'

let env: TestEnv
let app: ReturnType<typeof testApp>
let tokens: Record<'alice' | 'bob' | 'dave', string>

const WORKFLOW = '/v1/project/Acme/environment/production/team/Support/workflows/Versioned%20flow'
const STEPS_V1 = [{ type: 'load' }, { type: 'update', set: { status: 'checked' } }]
const STEPS_V2 = [{ type: 'load' }, { type: 'update', set: { status: 'checked', checkedBy: 'console' } }, { type: 'wait', seconds: 60 }]

async function call(path: string, token: string, init: { method?: string; json?: unknown } = {}) {
  const { response, body } = await handleJson(app, request(path, { method: init.method ?? 'GET', headers: bearer(token), json: init.json }))
  return { status: response.status, body: body as Record<string, unknown> & { data: Record<string, unknown>[] } }
}

function expectError(answer: { status: number; body: Record<string, unknown> }, status: number, code: string, field?: string) {
  expect({ status: answer.status, code: answer.body.code }).toEqual({ status, code })
  expect(typeof answer.body.message).toBe('string')
  if (field) expect((answer.body.details as { field: string }[]).map((d) => d.field)).toContain(field)
}

beforeAll(async () => {
  env = testEnv()
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
  app = testApp(env)
  tokens = await tokensFor(env.store, env.clock, { alice: ['alice', ['all']], bob: ['bob', ['all']], dave: ['dave', ['all']] })
  const publish = (steps: unknown[], concurrency?: number) => call(WORKFLOW, tokens.alice, { method: 'PUT', json: { collection: 'orders', steps, ...(concurrency ? { concurrency } : {}) } })
  expect((await publish(STEPS_V1)).body.outcome).toBe('created')
  expect((await publish(STEPS_V2, 3)).body).toMatchObject({ version: 2, outcome: 'published' })
  expect((await publish(STEPS_V2, 3)).body).toMatchObject({ version: 2, outcome: 'unchanged' })
})
afterAll(() => env.cleanup())

describe('the version list', () => {
  test('newest first: who published each and when, which one is active; the envelope echoes the path and limit', async () => {
    const { status, body } = await call(`${WORKFLOW}/versions`, tokens.alice)
    expect(status).toBe(200)
    expect(body.hasMore).toBe(false)
    expect(body.parameters).toEqual({ projectName: 'Acme', environmentName: 'production', teamName: 'Support', workflowName: 'Versioned flow', limit: 10 })
    expect(body.data.map((v) => [v.version, v.active, (v.publishedBy as { email: string }).email])).toEqual([
      [2, true, 'alice@example.com'],
      [1, false, 'alice@example.com'],
    ])
    for (const v of body.data) expect(Number.isNaN(Date.parse(v.createdAt as string))).toBe(false)
  })

  test('pages with limit and before: each version once', async () => {
    const first = await call(`${WORKFLOW}/versions?limit=1`, tokens.alice)
    expect([first.body.hasMore, first.body.data.map((v) => v.version)]).toEqual([true, [2]])
    const next = await call(`${WORKFLOW}/versions?limit=1&before=2`, tokens.alice)
    expect([next.body.hasMore, next.body.data.map((v) => v.version)]).toEqual([false, [1]])
    expect((await call(`${WORKFLOW}/versions?before=1`, tokens.alice)).body.data).toEqual([])
  })

  test('a version published by trellis apply has publishedBy null', async () => {
    const { body } = await call('/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/versions', tokens.alice)
    expect(body.data.map((v) => [v.version, v.publishedBy, v.active])).toEqual([[1, null, true]])
  })
})

describe('one version', () => {
  test('its steps, collection and concurrency as published; the active flag', async () => {
    const v1 = await call(`${WORKFLOW}/versions/1`, tokens.alice)
    expect(v1.status).toBe(200)
    expect(v1.body).toMatchObject({ name: 'Versioned flow', version: 1, active: false, collection: 'orders', concurrency: null, steps: STEPS_V1 })
    const v2 = await call(`${WORKFLOW}/versions/2`, tokens.alice)
    expect(v2.body).toMatchObject({ version: 2, active: true, concurrency: 3, steps: STEPS_V2 })
    expect((v2.body.publishedBy as { username: string }).username).toBe('alice')
  })
})

describe('key order', () => {
  test('a version keeps the keys in the order typed; the same steps with keys re-ordered are no new version', async () => {
    const path = '/v1/project/Acme/environment/production/team/Support/workflows/Ordered%20flow'
    const typed = [{ type: 'load' }, { type: 'condition', if: { field: 'status', equals: 'paid' }, else: 'end' }, { type: 'update', set: { status: 'checked' } }]
    const created = await call(path, tokens.alice, { method: 'PUT', json: { steps: typed, collection: 'orders' } })
    expect(created.body.outcome, JSON.stringify(created.body)).toBe('created')
    const v1 = await call(`${path}/versions/1`, tokens.alice)
    expect(JSON.stringify(v1.body.steps)).toBe(JSON.stringify(typed))
    const reordered = [{ type: 'load' }, { else: 'end', if: { equals: 'paid', field: 'status' }, type: 'condition' }, { set: { status: 'checked' }, type: 'update' }]
    expect((await call(path, tokens.alice, { method: 'PUT', json: { collection: 'orders', steps: reordered } })).body).toMatchObject({ version: 1, outcome: 'unchanged' })
  })
})

describe('refusals', () => {
  test('404 for an unknown version, workflow, team, environment or project', async () => {
    expectError(await call(`${WORKFLOW}/versions/3`, tokens.alice), 404, 'not_found')
    for (const path of [
      '/v1/project/Acme/environment/production/team/Support/workflows/Nope/versions',
      '/v1/project/Acme/environment/production/team/Nobody/workflows/Versioned%20flow/versions',
      '/v1/project/Acme/environment/nowhere/team/Support/workflows/Versioned%20flow/versions/1',
    ]) {
      expectError(await call(path, tokens.alice), 404, 'not_found')
    }
    expect((await call('/v1/project/Nope/environment/production/team/Support/workflows/Versioned%20flow/versions', tokens.alice)).status).toBeOneOf([403, 404])
  })

  test('403 for members who are not project admins (an editor, a user); 401 without credentials', async () => {
    for (const who of ['bob', 'dave'] as const) {
      expect((await call(`${WORKFLOW}/versions`, tokens[who])).status).toBe(403)
      expect((await call(`${WORKFLOW}/versions/1`, tokens[who])).status).toBe(403)
    }
    const anonymous = await app.handle(request(`${WORKFLOW}/versions`))
    expect(anonymous.status).toBe(401)
  })

  test('400 naming the parameter: limit, before, version', async () => {
    for (const limit of ['0', '101', 'abc', '1.5']) expectError(await call(`${WORKFLOW}/versions?limit=${limit}`, tokens.alice), 400, 'invalid_parameter', 'limit')
    for (const before of ['0', '-1', 'x', '1e3']) expectError(await call(`${WORKFLOW}/versions?before=${before}`, tokens.alice), 400, 'invalid_parameter', 'before')
    for (const version of ['0', 'x', '1.5', '99999999999999999999']) expectError(await call(`${WORKFLOW}/versions/${version}`, tokens.alice), 400, 'invalid_parameter', 'version')
  })
})

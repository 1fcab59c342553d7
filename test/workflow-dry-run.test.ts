/**
 * `POST …/workflows/{name}/dry-run` over the real app on the test store (SQLite, or PostgreSQL with
 * TRELLIS_TEST_STORE=postgres): what each step of a definition would do on one record — the fields an update would
 * set, the request an http step would send, who a task would ask, which way a condition goes — with every table
 * unchanged and a local HTTP server that counts requests still at 0. Then every refusal: a bad definition (400
 * naming the field), an unknown record, workflow or collection, a member who is not a project admin.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { bearer, handleJson, queryAll, request, tableContents, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, applyAcme, tokensFor } from './support/acme.ts'

let env: TestEnv
let app: ReturnType<typeof testApp>
let tokens: Record<'alice' | 'bob' | 'dave', string>
let receiver: ReturnType<typeof Bun.serve>
let received = 0

const WORKFLOW = '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order'
const DRY_RUN = `${WORKFLOW}/dry-run`

async function call(path: string, token: string, json?: unknown) {
  const { response, body } = await handleJson(app, request(path, { method: 'POST', headers: bearer(token), json }))
  return { status: response.status, body: body as Record<string, unknown> }
}

function expectError(answer: { status: number; body: Record<string, unknown> }, status: number, code: string, field?: string) {
  expect({ status: answer.status, code: answer.body.code }).toEqual({ status, code })
  expect(typeof answer.body.error).toBe('string')
  expect(typeof answer.body.message).toBe('string')
  if (field) expect((answer.body.details as { field: string }[]).map((d) => d.field)).toContain(field)
}

/** Four steps of every kind that would write or call: read, test, set, call out, ask. */
const fourSteps = () => [
  { type: 'load' },
  { type: 'condition', if: { field: 'status', equals: 'paid' }, else: 'end' },
  { type: 'update', set: { status: 'refunded', refundedFor: '{{record.customer}}' } },
  { type: 'http', method: 'POST', url: `http://127.0.0.1:${receiver.port}/hook/{{record.id}}`, headers: { authorization: 'Bearer secret-value' }, body: { order: '{{record.id}}', status: '{{record.status}}' } },
  { type: 'note', title: 'Refund of {{record.id}}', content: 'Refunded {{record.amount}} by {{workflow.name}}' },
  { type: 'task', name: 'approve', title: 'Approve the refund of {{record.id}}?', assignees: { teams: ['Support'], users: ['carol@example.com'] }, dueIn: { days: 2 }, form: { type: 'object', properties: { reason: { type: 'string' } } } },
  { type: 'wait', seconds: 60 },
]

/** Every table but the request counters of the rate limits (PostgreSQL keeps them in tables: every call counts). */
function storedData() {
  const { rate_limit_windows: _windows, rate_limit_buckets: _buckets, ...rest } = tableContents(env.store)
  return rest
}

beforeAll(async () => {
  receiver = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => (received++, new Response('ok')) })
  env = testEnv()
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
  app = testApp(env)
  tokens = await tokensFor(env.store, env.clock, { alice: ['alice', ['all']], bob: ['bob', ['all']], dave: ['dave', ['all']] })
})
afterAll(() => {
  receiver?.stop(true)
  env?.cleanup()
})

describe('a dry run', () => {
  test('says what each step would do on the record, writes nothing and calls nothing', async () => {
    // The token's last use is written by any call: one call first, so that only the dry run's own writes would show.
    // (The stamp is written beside the call, not awaited by it: wait for it.)
    await app.handle(request(WORKFLOW, { headers: bearer(tokens.alice) }))
    await until('the token stamped', () => queryAll<{ last_used_at: unknown }>(env.store, "SELECT last_used_at FROM api_tokens WHERE name LIKE 'alice-%'").every((t) => t.last_used_at !== null))
    const before = storedData()
    const { status, body } = await call(DRY_RUN, tokens.alice, { definition: { collection: 'orders', steps: fourSteps() }, recordId: 'ord_1003' })
    expect(status, JSON.stringify(body)).toBe(200)
    expect(body.recordId).toBe('ord_1003')
    expect(body.outcome).toBe('succeeded')
    expect(body.failure).toBeNull()
    const steps = body.steps as { index: number; name: string; type: string; outcome: string; summary: string; would: Record<string, unknown> }[]
    expect(steps.map((s) => [s.index, s.name, s.type, s.outcome])).toEqual([
      [0, '1-load', 'load', 'continue'],
      [1, '2-condition', 'condition', 'continue'],
      [2, '3-update', 'update', 'continue'],
      [3, '4-http', 'http', 'continue'],
      [4, '5-note', 'note', 'continue'],
      [5, 'approve', 'task', 'continue'],
      [6, '7-wait', 'wait', 'continue'],
    ])
    expect(steps[1]!.would).toEqual({ field: 'status', value: 'paid', matched: true })
    expect(steps[2]!.would).toEqual({ set: { status: 'refunded', refundedFor: 'cus_001' } })
    // The request as it would go: the record's values in place, header names only (their values may be credentials).
    expect(steps[3]!.would).toEqual({ method: 'POST', url: `http://127.0.0.1:${receiver.port}/hook/ord_1003`, headers: ['authorization'], body: { order: 'ord_1003', status: 'refunded' } })
    expect(steps[3]!.summary).toContain('(not called)')
    expect(JSON.stringify(body)).not.toContain('secret-value')
    expect(steps[4]!.would).toEqual({ title: 'Refund of ord_1003', content: 'Refunded 1210 by Refund order' })
    expect(steps[5]!.would).toMatchObject({ title: 'Approve the refund of ord_1003?', assignees: { teams: ['Support'], users: ['carol@example.com'] }, approvals: 1, formFields: ['reason'], dueInSeconds: 172_800 })
    expect(steps[6]!.would.seconds).toBe(60)
    expect(received).toBe(0)
    expect(storedData()).toEqual(before)
  })

  test('a condition that fails ends the run: the steps after it are not reached', async () => {
    const { status, body } = await call(DRY_RUN, tokens.alice, { definition: { collection: 'orders', steps: fourSteps() }, recordId: 'ord_1002' })
    expect(status).toBe(200)
    expect(body.outcome).toBe('ended')
    const steps = body.steps as { outcome: string; would: Record<string, unknown> }[]
    expect(steps.map((s) => s.outcome)).toEqual(['continue', 'end', 'skipped', 'skipped', 'skipped', 'skipped', 'skipped'])
    expect(steps[1]!.would).toEqual({ field: 'status', value: 'pending', matched: false })
    expect(received).toBe(0)
  })

  test('a step that would fail names its code; a task read later by a condition is taken as approved', async () => {
    const steps = [
      { type: 'task', name: 'approve', title: 'OK?', assignees: { users: ['nobody@example.com'] } },
      { type: 'condition', if: { field: 'tasks.approve.decision', equals: 'approved' }, else: 'fail' },
    ]
    const failed = await call(DRY_RUN, tokens.alice, { definition: { collection: 'orders', steps }, recordId: 'ord_1001' })
    expect(failed.status).toBe(200)
    expect(failed.body.outcome).toBe('failed')
    expect(failed.body.failure).toMatchObject({ step: 'approve', code: 'task_assignee_unknown' })
    const known = [{ ...steps[0], assignees: { teams: ['Billing'] } }, steps[1]]
    const approved = await call(DRY_RUN, tokens.alice, { definition: { collection: 'orders', steps: known }, recordId: 'ord_1001' })
    expect(approved.body.outcome).toBe('succeeded')
    expect((approved.body.steps as { would: unknown }[])[1]!.would).toEqual({ field: 'tasks.approve.decision', value: 'approved', matched: true })
  })

  test('the definition may name another collection of the project: the record is looked up there', async () => {
    const { status, body } = await call(DRY_RUN, tokens.alice, { definition: { collection: 'customers', steps: [{ type: 'load' }, { type: 'update', set: { status: 'dunned' } }] }, recordId: 'cus_002' })
    expect(status).toBe(200)
    expect((body.steps as { would: unknown }[])[1]!.would).toEqual({ set: { status: 'dunned' } })
  })
})

describe('a collection with a schema', () => {
  test("an update's values checked as a run checks them: a value the schema refuses fails the step, a field it lacks is a 400", async () => {
    const fields = [
      { name: 'name', type: 'text' },
      { name: 'email', type: 'email' },
      { name: 'country', type: 'text' },
      { name: 'status', type: 'select', options: ['active', 'overdue', 'dunned'] },
      { name: 'reminders', type: 'integer' },
    ]
    const { response } = await handleJson(app, request('/v1/project/Acme/collections/customers/schema', { method: 'PUT', headers: bearer(tokens.alice), json: { fields } }))
    expect(response.status).toBe(200)
    const dry = (set: Record<string, unknown>) => call(DRY_RUN, tokens.alice, { definition: { collection: 'customers', steps: [{ type: 'load' }, { type: 'update', set }] }, recordId: 'cus_002' })
    const typed = await dry({ country: '{{record.country}}-1', reminders: 3 })
    expect(typed.body.outcome).toBe('succeeded')
    expect((typed.body.steps as { would: unknown }[])[1]!.would).toEqual({ set: { country: 'AT-1', reminders: 3 } })
    const refused = await dry({ status: '{{record.country}}' })
    expect(refused.status).toBe(200)
    expect(refused.body.outcome).toBe('failed')
    expect(refused.body.failure).toMatchObject({ step: '2-update', code: 'invalid_field' })
    expectError(await dry({ nope: 'x' }), 400, 'validation_failed', 'definition.steps[1] (2-update).set.nope')
  })
})

describe('refusals', () => {
  test('400 naming the field: a bad step, an unknown template variable, a missing record id, an unknown collection', async () => {
    const bad = await call(DRY_RUN, tokens.alice, { definition: { collection: 'orders', steps: [{ type: 'load' }, { type: 'wait', seconds: 0 }] }, recordId: 'ord_1001' })
    expectError(bad, 400, bad.body.code as string)
    expect(JSON.stringify(bad.body.details)).toContain('steps[1]')
    expect(JSON.stringify(bad.body.details)).toContain('seconds')
    const template = await call(DRY_RUN, tokens.alice, { definition: { collection: 'orders', steps: [{ type: 'note', title: 'x', content: '{{record}}' }] }, recordId: 'ord_1001' })
    expectError(template, 400, template.body.code as string, 'definition.steps[0] (1-note).content')
    const noRecord = await call(DRY_RUN, tokens.alice, { definition: { collection: 'orders', steps: [{ type: 'load' }] } })
    expect(noRecord.status).toBe(400)
    expect(JSON.stringify(noRecord.body)).toContain('recordId')
    expectError(await call(DRY_RUN, tokens.alice, { definition: { collection: 'nope', steps: [{ type: 'load' }] }, recordId: 'ord_1001' }), 400, 'validation_failed', 'definition.collection')
    expect(received).toBe(0)
  })

  test('404 for an unknown record (or one of another environment) and an unknown workflow', async () => {
    const definition = { collection: 'orders', steps: [{ type: 'load' }] }
    expectError(await call(DRY_RUN, tokens.alice, { definition, recordId: 'ord_0000' }), 404, 'not_found')
    expectError(await call(DRY_RUN, tokens.alice, { definition, recordId: 'ord_9001' }), 404, 'not_found')
    expectError(await call('/v1/project/Acme/environment/production/team/Support/workflows/Nope/dry-run', tokens.alice, { definition, recordId: 'ord_1001' }), 404, 'not_found')
  })

  test('403 for members who are not project admins; 401 without credentials', async () => {
    const body = { definition: { collection: 'orders', steps: [{ type: 'load' }] }, recordId: 'ord_1001' }
    for (const who of ['bob', 'dave'] as const) expectError(await call(DRY_RUN, tokens[who], body), 403, (await call(DRY_RUN, tokens[who], body)).body.code as string)
    expect((await app.handle(request(DRY_RUN, { method: 'POST', json: body }))).status).toBe(401)
  })
})

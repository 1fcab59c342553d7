/**
 * Workflows and a collection's types (docs/records.md "Workflows and types"): an `update` step's constants and a
 * `condition`'s operators and operands checked at publish (the REST API and the apply file, 400 naming the step's
 * field), `gt`/`gte`/`lt`/`lte`/`contains` compared by type when runs run, and a templated update read as its field's
 * type (a number stays a number) or failing `invalid_field` with nothing written. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { insertRun } from '../src/db/queue.ts'
import { writeNow } from '../src/db/write.ts'
import { Executor } from '../src/executor/executor.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import type { StoredField } from '../src/modules/records/schema.ts'
import type { Step } from '../src/modules/workflows/definition.ts'
import { compareOrdered, containsValue, typedChanges, typedStepProblems } from '../src/modules/workflows/typed-steps.ts'
import { applyNow, queryOne, request, runNow, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, runBaseOf, userId } from './support/acme.ts'

type Body = Record<string, any>

const FIELDS: StoredField[] = [
  { name: 'amount', type: 'number', required: true },
  { name: 'items', type: 'integer' },
  { name: 'due', type: 'date' },
  { name: 'placedAt', type: 'datetime' },
  { name: 'status', type: 'select', options: ['new', 'paid'] },
  { name: 'tags', type: 'multiselect', options: ['vip', 'late'] },
  { name: 'note', type: 'text' },
  { name: 'paid', type: 'boolean' },
  { name: 'extra', type: 'json' },
]

describe('checked at publish (pure)', () => {
  const problems = (steps: Record<string, unknown>[]) => typedStepProblems(steps as Step[], FIELDS).map((p) => `${p.path}: ${p.message}`)

  test('update: unknown fields and constants the field refuses; templated values wait for the run', () => {
    expect(problems([{ type: 'update', set: { amount: 12.5, status: 'paid', tags: ['vip'], extra: { any: [1] }, note: '{{record.id}}' } }])).toEqual([])
    expect(problems([{ type: 'update', set: { amount: '{{record.note}}', items: 'x {{now}}' } }])).toEqual([])
    expect(problems([{ type: 'update', name: 'mark', set: { status: 'lost', amount: null, items: 1.5, colour: 'red', paid: 'yes' } }])).toEqual([
      'steps[0] (mark).set.status: must be one of new, paid',
      'steps[0] (mark).set.amount: is required: it cannot be set to null',
      'steps[0] (mark).set.items: must be an integer (no fraction)',
      "steps[0] (mark).set.colour: unknown field: the collection's schema has no such field",
      'steps[0] (mark).set.paid: must be true or false',
    ])
  })

  test('condition: the field, the operator its type takes, operands of its type', () => {
    const cond = (test: Record<string, unknown>) => problems([{ type: 'load' }, { type: 'condition', if: test }])
    expect(cond({ field: 'amount', gt: 10, lte: 1e6 })).toEqual([])
    expect(cond({ field: 'due', gte: '2026-01-01' })).toEqual([])
    expect(cond({ field: 'placedAt', lt: '2026-01-01T00:00:00Z' })).toEqual([])
    expect(cond({ field: 'items', gt: 2.5 })).toEqual([])
    expect(cond({ field: 'note', contains: 'urgent' })).toEqual([])
    expect(cond({ field: 'tags', contains: 'vip' })).toEqual([])
    expect(cond({ field: 'extra.deep.path', gt: 3 })).toEqual([])
    expect(cond({ field: 'tasks.approve.input.amount', gt: 3 })).toEqual([])
    expect(cond({ field: 'status', in: ['new', 'paid', null] })).toEqual([])
    expect(cond({ field: 'colour', equals: 'red' })).toEqual(["steps[1] (2-condition).if.field: the collection's schema has no field colour"])
    expect(cond({ field: 'note.first', exists: true })).toEqual(['steps[1] (2-condition).if.field: note is a text field: it has no parts to name'])
    expect(cond({ field: 'note', gt: '2026-01-01' })).toEqual(['steps[1] (2-condition).if.gt: a text field is not ordered (gt takes number, integer, date and datetime fields)'])
    expect(cond({ field: 'amount', gt: '2026-01-01' })).toEqual(['steps[1] (2-condition).if.gt: must be a number'])
    expect(cond({ field: 'due', lt: '2026-02-30' })).toEqual(['steps[1] (2-condition).if.lt: must be a date YYYY-MM-DD'])
    expect(cond({ field: 'amount', contains: '1' })).toEqual(['steps[1] (2-condition).if.contains: a number field takes no contains (text, email, url and multiselect fields do)'])
    expect(cond({ field: 'tags', contains: 'gold' })).toEqual(['steps[1] (2-condition).if.contains: must be one of vip, late'])
    expect(cond({ field: 'status', equals: 'lost', in: ['new', 'old'] })).toEqual(['steps[1] (2-condition).if.equals: must be one of new, paid', 'steps[1] (2-condition).if.in[1]: must be one of new, paid'])
    // No schema: anything goes.
    expect(typedStepProblems([{ type: 'update', set: { colour: 'red' } }] as Step[], [])).toEqual([])
  })

  test('compared by what the values are', () => {
    expect([compareOrdered('gt', 10, 9), compareOrdered('gt', 10, 10), compareOrdered('gte', 10, 10), compareOrdered('lt', -1, 0), compareOrdered('lte', 2, 1)]).toEqual([true, false, true, true, false])
    // Numbers as numbers, not as text ("10" < "9").
    expect(compareOrdered('gt', 10, 9)).toBe(true)
    // Dates and date-times as instants, whatever their offset.
    expect(compareOrdered('lt', '2026-01-02T01:00:00+02:00', '2026-01-01T23:30:00Z')).toBe(true)
    expect(compareOrdered('gte', '2026-03-01', '2026-02-28T23:59:59Z')).toBe(true)
    // Values of different kinds, or not dates, never match.
    expect([compareOrdered('gt', '10', 9), compareOrdered('lt', 'abc', 'abd'), compareOrdered('gt', null, 1), compareOrdered('lt', 5, '2026-01-01')]).toEqual([false, false, false, false])
    expect([containsValue('An URGENT order', 'urgent'), containsValue(['vip', 'late'], 'late'), containsValue(['vip'], 'vi'), containsValue(42, '4')]).toEqual([true, true, false, false])
  })

  test('templated values read as their field type', () => {
    const set = { amount: '{{record.x}}', items: '{{record.x}}', paid: '{{record.x}}', tags: '{{record.x}}', note: '{{record.x}}', status: 'new', due: '{{record.x}}' }
    const rendered = { amount: ' 12.5 ', items: '7', paid: 'true', tags: '["vip"]', note: '42', status: 'new', due: '' }
    expect(typedChanges(set, rendered, FIELDS)).toEqual({ amount: 12.5, items: 7, paid: true, tags: ['vip'], note: '42', status: 'new', due: null })
    expect(typedChanges(set, { ...rendered, amount: 'twelve' }, FIELDS).amount).toBe('twelve')
    expect(typedChanges(set, rendered, [])).toEqual(rendered)
  })
})

describe('through the server', () => {
  let env: TestEnv
  let app: ReturnType<typeof testApp>
  let cookie: string
  const applyContext = () => ({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl })
  const SCHEMA = [
    { name: 'amount', type: 'number', required: true },
    { name: 'total', type: 'number' },
    { name: 'due', type: 'date' },
    { name: 'note', type: 'text' },
    { name: 'status', type: 'select', options: ['new', 'big', 'small', 'urgent', 'overdue'] },
  ]
  const withInvoices = (workflows: Record<string, unknown>[] = []) => {
    const document = acmeDocument()
    const acme = acmeProject(document)
    acme.collections!.push({ name: 'invoices', schema: { fields: SCHEMA } } as never)
    for (const [id, data] of Object.entries({
      inv_big: { amount: 100, due: '2026-01-10', note: 'Please hurry, URGENT' },
      inv_small: { amount: 9.5, due: '2027-01-10', note: 'whenever' },
    })) acme.records!.push({ environment: 'production', collection: 'invoices', id, data })
    acme.workflows!.push(...(workflows as never[]))
    return document
  }
  const invoiceWorkflow = (name: string, steps: Record<string, unknown>[]) => {
    const { webhook: _none, ...rest } = ordersWorkflow(name, steps, { collection: 'invoices' })
    return rest
  }

  beforeAll(async () => {
    env = testEnv()
    await applyAcme(applyContext(), withInvoices())
    app = testApp(env)
    cookie = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, 'carol'), false))).id}`
  })
  afterAll(() => env.cleanup())

  async function publish(name: string, steps: Record<string, unknown>[]) {
    const path = `/v1/project/Acme/environment/production/team/Support/workflows/${encodeURIComponent(name)}`
    const response = await app.handle(request(path, { method: 'PUT', headers: { cookie }, json: { collection: 'invoices', steps } }))
    return { status: response.status, body: (await response.json()) as Body }
  }

  async function runOn(workflow: string, recordId: string) {
    const id = randomUUIDv7()
    await writeNow(env.store, () => insertRun({ ...runBaseOf(env.store, workflow), id, recordId, createdAt: env.clock.now() }))
    const executor = new Executor({ store: env.store, clock: env.clock, logger: silentLogger, concurrency: 1, leaseMs: 5_000, pollMs: 5 })
    executor.start()
    try {
      const run = await until('the run to end', () => queryOne<{ status: string; error: string | null }>(env.store, "SELECT status, error FROM runs WHERE id = ? AND status NOT IN ('queued', 'running')", id))
      return { status: run.status, error: run.error === null ? null : (JSON.parse(run.error) as Body) }
    } finally {
      await executor.stop()
    }
  }
  const dataOf = (id: string) => JSON.parse(queryOne<{ data: string }>(env.store, 'SELECT data FROM records WHERE record_key = ?', id)!.data) as Body

  test('publish refuses a constant the schema refuses and a condition its types do not take, naming each; nothing published', async () => {
    const refused = await publish('Bad', [{ type: 'load' }, { type: 'condition', if: { field: 'note', gt: 3 } }, { type: 'update', set: { status: 'lost', colour: 1 } }])
    expect(refused.status).toBe(400)
    expect(refused.body.code).toBe('validation_failed')
    expect(refused.body.details.map((d: Body) => d.field)).toEqual(['steps[1] (2-condition).if.gt', 'steps[2] (3-update).set.status', 'steps[2] (3-update).set.colour'])
    expect(queryOne(env.store, "SELECT id FROM workflows WHERE name = 'Bad'")).toBeNull()
    // A shape error (an operand that is neither a number nor a date) is TypeBox's, before any schema is read.
    const shape = await publish('Bad', [{ type: 'load' }, { type: 'condition', if: { field: 'amount', gt: true } }])
    expect(shape.status).toBe(400)
  })

  test('the apply file refuses it too, at the workflow\'s place in the file', async () => {
    const bad = withInvoices([invoiceWorkflow('Bad apply', [{ type: 'load' }, { type: 'update', set: { amount: 'ten' } }])])
    await expect(applyNow(bad, applyContext())).rejects.toThrow(/projects\[0\]\.workflows\[\d+\]\.steps\[1\] \(2-update\)\.set\.amount: must be a number/)
  })

  test('gt and contains route runs by type; a templated number lands as a number', async () => {
    const triage = [
      { type: 'load' },
      { type: 'update', set: { total: '{{record.amount}}' } },
      { type: 'condition', if: { field: 'amount', gte: 10 } },
      { type: 'update', set: { status: 'big' } },
      { type: 'condition', if: { field: 'due', lt: '2026-06-01' } },
      { type: 'update', set: { status: 'overdue' } },
      { type: 'condition', if: { field: 'note', contains: 'urgent' } },
      { type: 'update', set: { status: 'urgent' } },
    ]
    expect((await publish('Triage', triage)).status).toBe(200)
    expect(await runOn('Triage', 'inv_big')).toEqual({ status: 'succeeded', error: null })
    expect(dataOf('inv_big')).toMatchObject({ total: 100, status: 'urgent' })
    // 9.5 < 10: the run ends at the first condition, after the total was written as a number.
    expect(await runOn('Triage', 'inv_small')).toEqual({ status: 'succeeded', error: null })
    expect(dataOf('inv_small')).toEqual({ amount: 9.5, total: 9.5, due: '2027-01-10', note: 'whenever' })
  })

  test('a templated value the field refuses fails the run invalid_field; nothing written', async () => {
    expect((await publish('Note as amount', [{ type: 'load' }, { type: 'update', set: { amount: '{{record.note}}' } }])).status).toBe(200)
    const before = queryOne(env.store, "SELECT data, updated_at FROM records WHERE record_key = 'inv_small'")
    const run = await runOn('Note as amount', 'inv_small')
    expect(run.status).toBe('failed')
    expect(run.error).toMatchObject({ code: 'invalid_field', message: expect.stringContaining('/amount') })
    expect(queryOne(env.store, "SELECT data, updated_at FROM records WHERE record_key = 'inv_small'")).toEqual(before)
  })
})

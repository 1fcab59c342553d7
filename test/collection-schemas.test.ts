/**
 * Typed collections (docs/records.md): the validator's rule for each field type, `GET`/`PUT …/collections/{c}/schema`
 * (errors naming the field, the non-conforming report, the admin log entry, the field indexes, who may), record
 * writes refused with 422 `invalid_record` naming each field, the apply file's `schema` (idempotent) and records, and
 * the workflow `update` step failing `invalid_field` with nothing written. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { fieldIndexName } from '../src/db/records.ts'
import { insertRun } from '../src/db/queue.ts'
import { writeNow } from '../src/db/write.ts'
import { Executor } from '../src/executor/executor.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { checkRecord, type SchemaField, schemaFieldProblems, type StoredField, withDefaults } from '../src/modules/records/schema.ts'
import { applyNow, queryAll, queryOne, request, runNow, TEST_STORE, tableContents, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, runBaseOf, tokenFor, userId } from './support/acme.ts'

type Body = Record<string, any>

let env: TestEnv
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}
const applyContext = () => ({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl })

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  const { webhook: _none, ...setStatus } = ordersWorkflow('Set status', [{ type: 'load' }, { type: 'update', set: { status: 'lost' } }])
  acmeProject(document).workflows!.push(setStatus)
  await applyAcme(applyContext(), document)
  app = testApp(env)
  for (const name of ['bob', 'carol']) cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
})
afterAll(() => env.cleanup())

async function call(method: string, path: string, as: string | { bearer: string }, json?: unknown) {
  const headers: Record<string, string> = typeof as === 'string' ? { cookie: cookies[as]! } : { authorization: `Bearer ${as.bearer}` }
  const response = await app.handle(request(path, { method, headers, json }))
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as Body }
}

const SCHEMA = '/v1/project/Acme/collections/orders/schema'
const recordPath = (id: string, collection = 'orders', environment = 'production') =>
  `/v1/project/Acme/environment/${environment}/collection/${collection}/records/${encodeURIComponent(id)}`

describe('the validator', () => {
  const field = (type: SchemaField['type'], extra: Partial<StoredField> = {}): StoredField => ({ name: 'f', type, ...extra })
  const cases: [StoredField, unknown[], unknown[]][] = [
    [field('text'), ['', 'a', 'é ✓'], [1, true, [], {}]],
    [field('number'), [0, -1.5, 1e300, 7], ['1', true, [1]]],
    [field('integer'), [0, -3, 9007199254740991], [1.5, '2', 9007199254740992, true]],
    [field('boolean'), [true, false], [0, 'true', 'false']],
    [field('date'), ['2026-05-01', '2024-02-29', '0001-01-01'], ['2026-02-30', '2025-02-29', '2026-5-1', '2026-05-01T00:00:00Z', 20260501]],
    [field('datetime'), ['2026-05-01T09:30:00Z', '2026-05-01T09:30:00.123456+02:00', '2026-05-01T23:59:59-11:30'], ['2026-05-01T09:30:00', '2026-05-01', '2026-05-01T09:30Z', '2026-13-01T00:00:00Z', '2026-05-01T24:30:00Z', 1]],
    [field('email'), ['a@b.co', 'first.last+tag@example.com'], ['a@b', 'no at.example.com', 'a b@c.de', '@b.co', 5]],
    [field('url'), ['https://example.com', 'http://localhost:8080/x?y=1#z'], ['example.com', 'ftp://example.com/f', 'javascript:alert(1)', 'https://', 'https://a b.com', 3]],
    [field('select', { options: ['new', 'paid'] }), ['new', 'paid'], ['New', '', ['new'], 1]],
    [field('multiselect', { options: ['a', 'b', 'c'] }), [[], ['a'], ['c', 'a']], [['a', 'a'], ['d'], 'a', [1]]],
    [field('json'), [1, 'x', [1, { a: 2 }], { deep: { er: true } }, false], []],
    [field('relation', { collectionId: 1 }), ['cus_001', 'x'], ['', 1, ['cus_001']]],
  ]
  for (const [f, accepted, refused] of cases) {
    test(`${f.type}: accepts ${accepted.length}, refuses ${refused.length}`, () => {
      for (const value of accepted) expect({ value, problems: checkRecord([f], { f: value }).problems }).toEqual({ value, problems: [] })
      for (const value of refused) {
        const { problems } = checkRecord([f], { f: value })
        expect({ value, fields: problems.map((p) => p.field) }).toEqual({ value, fields: ['/f'] })
        expect(problems[0]!.message).toStartWith('must be ')
      }
    })
  }

  test('required, null, unknown keys (strict), an empty schema, relations handed back to check', () => {
    const fields: StoredField[] = [{ name: 'a', type: 'text', required: true }, { name: 'b', type: 'integer' }, { name: 'c', type: 'relation', collectionId: 4 }]
    expect(checkRecord(fields, { a: 'x' }).problems).toEqual([])
    expect(checkRecord(fields, { a: 'x', b: null }).problems).toEqual([])
    expect(checkRecord(fields, { a: null }).problems.map((p) => [p.field, p.message])).toEqual([['/a', 'is required (a string)']])
    expect(checkRecord(fields, { b: 1 }).problems.map((p) => p.field)).toEqual(['/a'])
    expect(checkRecord(fields, { a: 'x', 'x/y': 1, constructor: 2 }).problems.map((p) => p.field)).toEqual(['/x~1y', '/constructor'])
    expect(checkRecord(fields, { a: 'x', c: 'cus_1' }).relations).toEqual([{ field: '/c', collectionId: 4, id: 'cus_1' }])
    expect(checkRecord([], { anything: [1, 2] })).toEqual({ problems: [], relations: [] })
  })

  test('defaults fill absent fields only, as own properties (a field named __proto__ included)', () => {
    const fields: StoredField[] = [{ name: '__proto__', type: 'json', default: { polluted: true } }, { name: 'n', type: 'integer', default: 1 }]
    const filled = withDefaults(fields, { n: 2 })
    expect(Object.hasOwn(filled, '__proto__')).toBe(true)
    expect(Object.getPrototypeOf(filled)).toBe(Object.prototype)
    expect(JSON.stringify(filled)).toBe('{"n":2,"__proto__":{"polluted":true}}')
    expect(checkRecord(fields, filled).problems).toEqual([])
  })

  test('field lists: each problem at its field', () => {
    const problems = schemaFieldProblems(
      [
        { name: 'a', type: 'text' },
        { name: 'a', type: 'select' },
        { name: 'b', type: 'text', options: ['x'] },
        { name: 'c', type: 'multiselect', options: ['x', 'x'] },
        { name: 'd', type: 'relation' },
        { name: 'e', type: 'relation', collection: 'nope' },
        { name: 'f', type: 'integer', collection: 'orders' },
        { name: 'g', type: 'json', indexed: true },
        { name: 'h', type: 'integer', default: 1.5 },
        { name: 'i', type: 'select', options: ['x'], default: 'x' },
        { name: 'j', type: 'relation', collection: 'orders', default: 'o' },
      ],
      new Set(['orders']),
    )
    expect(problems.map((p) => p.path)).toEqual([
      'fields[1].name', 'fields[1].options', 'fields[2].options', 'fields[3].options', 'fields[4].collection', 'fields[5].collection',
      'fields[6].collection', 'fields[7].indexed', 'fields[8].default', 'fields[10].default',
    ])
  })
})

/** Whether the index of `field` on Acme's orders exists. */
function indexExists(field: string): boolean {
  const name = fieldIndexName(collectionId('orders'), field)
  const sql = TEST_STORE === 'postgres' ? 'SELECT indexname AS name FROM pg_indexes WHERE indexname = ?' : "SELECT name FROM sqlite_master WHERE type = 'index' AND name = ?"
  return queryOne(env.store, sql, name) !== null
}
const collectionId = (name: string) => queryOne<{ id: number }>(env.store, 'SELECT id FROM collections WHERE name = ?', name)!.id
const lastCollectionLog = () =>
  queryOne<{ previous: string; next: string; user_id: number | null }>(env.store, "SELECT previous_value AS previous, new_value AS next, user_id FROM admin_logs WHERE resource = 'collection' ORDER BY id DESC LIMIT 1")

const ORDER_FIELDS: SchemaField[] = [
  { name: 'status', type: 'select', options: ['pending', 'paid', 'refunded', 'lost'], required: true, indexed: true, label: 'Status' },
  { name: 'amount', type: 'number', required: true },
  { name: 'currency', type: 'select', options: ['EUR', 'USD'], default: 'EUR' },
  { name: 'customer', type: 'relation', collection: 'customers' },
  { name: 'items', type: 'integer' },
  { name: 'placedAt', type: 'datetime' },
  { name: 'refunded', type: 'boolean' },
  { name: 'prototypeField', type: 'json' },
]

describe('the schema API', () => {
  test('no schema: GET answers no fields, version 0', async () => {
    const { status, body } = await call('GET', SCHEMA, 'carol')
    expect(status).toBe(200)
    expect(body).toEqual({ fields: [], version: 0, updatedAt: null })
  })

  test('a bad body is 400 naming the field; nothing is written', async () => {
    const before = tableContents(env.store)
    const cases: [unknown, string][] = [
      [{ fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'txt' }] }, 'fields[1].type'],
      [{ fields: [{ name: '1a', type: 'text' }] }, 'fields[0].name'],
      [{ fields: [{ name: 'a', type: 'text', size: 3 }] }, 'fields[0].size'],
      [{ fields: [{ name: 'a', type: 'text' }, { name: 'a', type: 'number' }] }, 'fields[1].name'],
      [{ fields: [{ name: 'a', type: 'select' }] }, 'fields[0].options'],
      [{ fields: [{ name: 'a', type: 'select', options: [] }] }, 'fields[0].options'],
      [{ fields: [{ name: 'a', type: 'relation', collection: 'invoices' }] }, 'fields[0].collection'],
      [{ fields: [{ name: 'a', type: 'date', default: '2026-02-30' }] }, 'fields[0].default'],
      [{ fields: [{ name: 'a', type: 'multiselect', options: ['x'], indexed: true }] }, 'fields[0].indexed'],
      [{}, 'fields'],
    ]
    for (const [json, field] of cases) {
      const { status, body } = await call('PUT', SCHEMA, 'carol', json)
      expect({ json, status, code: body.code }).toEqual({ json, status: 400, code: 'validation_failed' })
      expect(body.message).toContain(field)
      expect(body.details.map((d: Body) => d.field)).toContain(field)
    }
    expect(tableContents(env.store)).toEqual(before)
  })

  test('who may: a member who is not an admin is 403, a token without `all` is 403, an admin token with `all` may; unknown collection 404', async () => {
    expect((await call('GET', SCHEMA, 'bob')).status).toBe(403)
    expect((await call('PUT', SCHEMA, 'bob', { fields: [] })).status).toBe(403)
    const readOnly = await tokenFor(env.store, env.clock, 'carol', ['notes:read', 'admin_logs:read'])
    expect((await call('GET', SCHEMA, { bearer: readOnly.value })).status).toBe(403)
    const bobAll = await tokenFor(env.store, env.clock, 'bob', ['all'])
    expect((await call('GET', SCHEMA, { bearer: bobAll.value })).status).toBe(403)
    const carolAll = await tokenFor(env.store, env.clock, 'carol', ['all'])
    expect((await call('GET', SCHEMA, { bearer: carolAll.value })).status).toBe(200)
    expect((await call('GET', '/v1/project/Acme/collections/invoices/schema', 'carol')).status).toBe(404)
  })

  test('PUT: 200 with the schema and the existing records it refuses (unchanged); one admin log entry; indexes', async () => {
    const dataBefore = queryAll(env.store, 'SELECT record_key, data FROM records ORDER BY id')
    const strict = ORDER_FIELDS.filter((f) => f.name !== 'placedAt')
    const { status, body } = await call('PUT', SCHEMA, 'carol', { fields: strict })
    expect(status).toBe(200)
    expect(body.fields).toEqual(strict)
    expect(body.version).toBe(1)
    expect(body.updatedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/)
    // Every Acme order has a placedAt: each is reported, none changed.
    const orders = queryAll<{ record_key: string }>(env.store, 'SELECT record_key FROM records WHERE collection_id = ?', collectionId('orders'))
    expect(body.nonConforming.count).toBeGreaterThanOrEqual(3)
    expect(body.nonConforming.count).toBeLessThanOrEqual(orders.length)
    expect(body.nonConforming.ids).toContain('ord_1001')
    expect(queryAll(env.store, 'SELECT record_key, data FROM records ORDER BY id')).toEqual(dataBefore)
    expect(indexExists('status')).toBe(true)
    const log = lastCollectionLog()!
    expect(JSON.parse(log.next).name).toStartWith('orders: schema version 1, 7 fields: status (select), amount (number)')
    expect(JSON.parse(log.previous).name).toBe('orders: no schema (any JSON object), version 0')
    expect(log.user_id).toBe(userId(env.store, 'carol'))

    // The same fields again change nothing: no version, no entry.
    const logs = queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM admin_logs')!.n
    expect((await call('PUT', SCHEMA, 'carol', { fields: strict })).body.version).toBe(1)
    expect(queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM admin_logs')!.n).toBe(logs)

    // With placedAt the Acme orders conform (but those whose placedAt or status does not); status no longer indexed, items indexed.
    const fields = ORDER_FIELDS.map((f) => (f.name === 'status' ? { ...f, indexed: undefined } : f.name === 'items' ? { ...f, indexed: true } : f))
    const next = await call('PUT', SCHEMA, 'carol', { fields })
    expect(next.body.version).toBe(2)
    expect(next.body.nonConforming.ids).not.toContain('ord_1001')
    expect(indexExists('status')).toBe(false)
    expect(indexExists('items')).toBe(true)
    expect((await call('GET', SCHEMA, 'carol')).body).toEqual({ fields: next.body.fields, version: 2, updatedAt: next.body.updatedAt })
    expect(next.body.fields.find((f: Body) => f.name === 'customer')).toEqual({ name: 'customer', type: 'relation', collection: 'customers' })
  })

  test('a field whose type changes to one compared otherwise is indexed again, as its new kind (PostgreSQL\'s index holds the kind)', async () => {
    const current = (await call('GET', SCHEMA, 'carol')).body.fields as SchemaField[]
    const withRefunded = (type: SchemaField['type']) => current.map((f) => (f.name === 'refunded' ? { name: 'refunded', type, indexed: true } : f))
    const definition = () => {
      const name = fieldIndexName(collectionId('orders'), 'refunded')
      const sql = TEST_STORE === 'postgres' ? 'SELECT indexdef AS def FROM pg_indexes WHERE indexname = ?' : "SELECT sql AS def FROM sqlite_master WHERE type = 'index' AND name = ?"
      return queryOne<{ def: string }>(env.store, sql, name)?.def ?? null
    }
    expect((await call('PUT', SCHEMA, 'carol', { fields: withRefunded('boolean') })).status).toBe(200)
    const asBoolean = definition()
    expect((await call('PUT', SCHEMA, 'carol', { fields: withRefunded('text') })).status).toBe(200)
    const asText = definition()
    if (TEST_STORE === 'postgres') {
      expect(asBoolean).toContain("= 'boolean'::text")
      expect(asText).toContain("= 'string'::text")
    } else {
      // SQLite's holds json_extract whatever the kind: built again, the same.
      expect(asText).toBe(asBoolean!)
    }
    // Back to the fields before, its index gone.
    expect((await call('PUT', SCHEMA, 'carol', { fields: current })).status).toBe(200)
    expect(indexExists('refunded')).toBe(false)
  })

  test('records PUT: 422 invalid_record naming each field; defaults filled; relations to existing records only', async () => {
    const bad = await call('PUT', recordPath('ord_t1'), 'carol', { teamName: 'Support', data: { status: 'maybe', amount: '12', items: 1.5, extra: 1, customer: 'cus_404' } })
    expect(bad.status).toBe(422)
    expect(bad.body).toMatchObject({ error: 'Unprocessable Entity', code: 'invalid_record' })
    expect(bad.body.message).toContain("'/")
    expect(bad.body.details.map((p: Body) => p.field).sort()).toEqual(['/amount', '/customer', '/extra', '/items', '/status'])
    expect(queryOne(env.store, "SELECT id FROM records WHERE record_key = 'ord_t1'")).toBeNull()
    const missing = await call('PUT', recordPath('ord_t1'), 'carol', { teamName: 'Support', data: {} })
    expect(missing.body.details.map((p: Body) => [p.field, p.message.split(' (')[0]])).toEqual([['/status', 'is required'], ['/amount', 'is required']])

    const good = await call('PUT', recordPath('ord_t1'), 'carol', { teamName: 'Support', data: { status: 'paid', amount: 12, customer: 'cus_001' } })
    expect(good.status).toBe(201)
    expect(good.body.data).toEqual({ status: 'paid', amount: 12, customer: 'cus_001', currency: 'EUR' })
    // cus_001 exists in production only.
    const staging = await call('PUT', recordPath('ord_t1', 'orders', 'staging'), 'carol', { teamName: 'Support', data: { status: 'paid', amount: 12, customer: 'cus_001' } })
    expect(staging.body.details).toEqual([{ field: '/customer', message: expect.stringContaining('no record cus_001') }])
    // Untyped collections take any object still.
    expect((await call('PUT', recordPath('anything', 'customers'), 'carol', { teamName: 'Support', data: { whatever: [1] } })).status).toBe(201)
  })

  test('the update step: a change the schema refuses fails the run invalid_field, naming the field; nothing written', async () => {
    // `Set status` sets status to "lost" (an option); take it away, then run it.
    const fields = ORDER_FIELDS.map((f) => (f.name === 'status' ? { ...f, options: ['pending', 'paid', 'refunded'] } : f))
    expect((await call('PUT', SCHEMA, 'carol', { fields })).status).toBe(200)
    const before = queryOne(env.store, "SELECT data, updated_at FROM records WHERE record_key = 'ord_t1'")
    const id = randomUUIDv7()
    await writeNow(env.store, () => insertRun({ ...runBaseOf(env.store, 'Set status'), id, recordId: 'ord_t1', createdAt: env.clock.now() }))
    const executor = new Executor({ store: env.store, clock: env.clock, logger: silentLogger, concurrency: 1, leaseMs: 5_000, pollMs: 5 })
    executor.start()
    try {
      const run = await until('the run to end', () => queryOne<{ status: string; error: string | null }>(env.store, "SELECT status, error FROM runs WHERE id = ? AND status NOT IN ('queued', 'running')", id))
      expect(run.status).toBe('failed')
      const error = JSON.parse(run.error!)
      expect(error.code).toBe('invalid_field')
      expect(error.message).toContain('/status')
    } finally {
      await executor.stop()
    }
    expect(queryOne(env.store, "SELECT data, updated_at FROM records WHERE record_key = 'ord_t1'")).toEqual(before)
  })

  test('{"fields": []} makes the collection untyped again and drops its indexes', async () => {
    const { body } = await call('PUT', SCHEMA, 'carol', { fields: [] })
    expect(body).toMatchObject({ fields: [], nonConforming: { count: 0, ids: [] } })
    expect(indexExists('items')).toBe(false)
    expect((await call('PUT', recordPath('ord_t2'), 'carol', { teamName: 'Support', data: { free: 'form' } })).status).toBe(201)
  })
})

describe('the apply file', () => {
  const withSchema = () => {
    const document = acmeDocument()
    const acme = acmeProject(document)
    // A relation to a collection listed after it.
    acme.collections!.push({ name: 'invoices', schema: { fields: [{ name: 'customer', type: 'relation', collection: 'suppliers', required: true }, { name: 'paid', type: 'boolean', default: false }] } } as never)
    acme.collections!.push({ name: 'suppliers' })
    acme.records!.push({ environment: 'production', collection: 'suppliers', id: 'sup_1', data: { name: 'Initrode' } })
    acme.records!.push({ environment: 'production', collection: 'invoices', id: 'inv_1', data: { customer: 'sup_1' } })
    return document
  }

  test('collections take `schema`; the records must conform; a re-apply writes nothing', async () => {
    const first = await applyNow(withSchema(), applyContext())
    expect(first.changes).toContainEqual({ action: 'updated', kind: 'collection schema', name: 'Acme/invoices' })
    expect(JSON.parse(queryOne<{ data: string }>(env.store, "SELECT data FROM records WHERE record_key = 'inv_1'")!.data)).toEqual({ customer: 'sup_1', paid: false })
    expect((await call('GET', '/v1/project/Acme/collections/invoices/schema', 'carol')).body.fields[0]).toEqual({ name: 'customer', type: 'relation', collection: 'suppliers', required: true })
    const before = tableContents(env.store)
    const again = await applyNow(withSchema(), applyContext())
    expect({ created: again.created, updated: again.updated }).toEqual({ created: 0, updated: 0 })
    expect(tableContents(env.store)).toEqual(before)
  })

  test('a record the schema refuses, or a bad schema, fails the whole file naming the path', async () => {
    const before = tableContents(env.store)
    const badRecord = withSchema()
    acmeProject(badRecord).records!.push({ environment: 'production', collection: 'invoices', id: 'inv_2', data: { customer: 'sup_9', paid: 'no' } })
    const refused = await applyNow(badRecord, applyContext()).then(() => null, (error: Error) => error.message)
    expect(refused).toMatch(/records\[\d+\]\.data\.customer: must be the id of an existing record/)
    expect(refused).toMatch(/records\[\d+\]\.data\.paid: must be true or false/)
    const badSchema = withSchema()
    ;(acmeProject(badSchema).collections!.find((c) => c.name === 'invoices') as Body).schema.fields.push({ name: 'kind', type: 'select' })
    await expect(applyNow(badSchema, applyContext())).rejects.toThrow(/collections\[2\]\.schema\.fields\[2\]\.options: is required/)
    expect(tableContents(env.store)).toEqual(before)
  })
})

/**
 * The records API's reads (docs/records.md "Reading records"): typed filters per field type, sort both ways, cursor
 * paging (a walk equals a full read; writes during a walk neither repeat nor skip a record), 400s naming the
 * parameter, who may read (scopes, the collection's team permissions), one record with its ETag; the writes (POST,
 * PATCH under If-Match and its race, soft DELETE, restore, purge), who may write, their activity entries. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { fillPlaceholders } from 'drizzle-orm/sql'
import type { QueryCall } from '../src/db/op.ts'
import { postgresDialect } from '../src/db/postgres/dialect.ts'
import { fieldIndexName, pageRecordList, RECORDS_BY_KEYS_ON_POSTGRES, type RecordListQuery } from '../src/db/records.ts'
import { updateProject } from '../src/db/projects.ts'
import { loadRecordAs } from '../src/executor/steps/data-access.ts'
import type { RunTarget } from '../src/executor/step.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { purgeDeletedRecords } from '../src/modules/runs/history.ts'
import { POSTGRES_ONLY, postgresOnlyTest, queryOne, request, runNow, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, projectId, tokensFor, userId } from './support/acme.ts'

type Body = Record<string, any>

let env: TestEnv
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}
let tokens: Record<'reader' | 'all' | 'notesOnly' | 'writer', string>

const KINDS = ['small', 'large'] as const
/** The typed records: some fields absent on purpose (nulls sort lowest). */
const ITEMS = Array.from({ length: 30 }, (_, i) => {
  const data: Record<string, unknown> = {
    name: `Item ${String.fromCharCode(65 + (i % 26))}${i}`,
    price: Math.round(((i * 37) % 101) * 1.5 * 100) / 100,
    qty: (i * 7) % 11,
    active: i % 3 === 0,
    kind: KINDS[i % 2],
    // Offsets differ: as instants these are i hours after midnight UTC, whatever their text.
    at: i % 2 === 0 ? `2026-05-01T${String(i % 24).padStart(2, '0')}:00:00Z` : `2026-05-01T${String((i + 2) % 24).padStart(2, '0')}:00:00+02:00`,
  }
  if (i % 5 !== 4) data.day = `2026-05-${String((i % 28) + 1).padStart(2, '0')}`
  return { id: `it_${String(i).padStart(3, '0')}`, data }
})
const instant = (at: unknown) => Date.parse(at as string)

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  const project = acmeProject(document) as any
  project.collections.push({
    name: 'items',
    permissions: { Billing: { read: false, edit: false } },
    schema: {
      fields: [
        { name: 'name', type: 'text', required: true },
        { name: 'price', type: 'number', indexed: true },
        { name: 'qty', type: 'integer' },
        { name: 'active', type: 'boolean' },
        { name: 'kind', type: 'select', options: [...KINDS], indexed: true },
        { name: 'day', type: 'date' },
        { name: 'at', type: 'datetime' },
        { name: 'tags', type: 'multiselect', options: ['a', 'b'] },
      ],
    },
  })
  for (const item of ITEMS) project.records.push({ environment: 'production', collection: 'items', id: item.id, data: item.data })
  // Written before its collection had a schema: a date-time's shape with no such day.
  project.collections.push({ name: 'legacy' })
  project.records.push({ environment: 'production', collection: 'legacy', id: 'old_1', data: { at: '2026-02-30T00:00:00Z' } }, { environment: 'production', collection: 'legacy', id: 'old_2', data: { at: '2026-03-01T00:00:00Z' } })
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  for (const name of ['alice', 'bob', 'carol', 'dave']) cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
  tokens = await tokensFor(env.store, env.clock, { reader: ['bob', ['records:read']], all: ['alice', ['all']], notesOnly: ['alice', ['notes:read']], writer: ['bob', ['records:write']] })
})
afterAll(() => env.cleanup())

async function get(path: string, as: string | { bearer: string } = 'bob') {
  const headers: Record<string, string> = typeof as === 'string' ? { cookie: cookies[as]! } : { authorization: `Bearer ${as.bearer}` }
  const response = await app.handle(request(path, { headers }))
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, body: JSON.parse(text) as Body, headers: response.headers }
}

const LIST = '/v1/project/Acme/environment/production/collection/items/records'
const list = (query: string, as?: string | { bearer: string }) => get(`${LIST}?${query}`, as)

/** Every record the list gives for `query`, page after page. */
async function walk(query: string, limit: number, between?: (page: number) => Promise<void>): Promise<Body[]> {
  const all: Body[] = []
  let cursor: string | undefined
  for (let page = 0; ; page++) {
    const { status, body } = await list(`${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
    expect(status, JSON.stringify(body)).toBe(200)
    all.push(...body.data)
    expect(body.hasMore).toBe(body.nextCursor !== undefined)
    if (!body.hasMore) return all
    cursor = body.nextCursor
    await between?.(page)
  }
}

const ids = (records: Body[]) => records.map((r) => r.id as string)
const matching = (test: (data: Record<string, any>) => boolean) => ITEMS.filter((i) => test(i.data)).map((i) => i.id).sort()

describe('filters, typed by the field', () => {
  const cases: [string, (d: Record<string, any>) => boolean][] = [
    ['price.gt=50', (d) => d.price > 50],
    ['price.lte=30&price.gte=3', (d) => d.price <= 30 && d.price >= 3],
    ['qty.eq=7', (d) => d.qty === 7],
    ['qty.ne=7', (d) => d.qty !== 7],
    ['qty.in=1,2,10', (d) => [1, 2, 10].includes(d.qty)],
    ['active.eq=true', (d) => d.active === true],
    ['active.ne=true', (d) => d.active === false],
    ['kind.eq=large', (d) => d.kind === 'large'],
    ['kind.in=small', (d) => d.kind === 'small'],
    ['name.contains=item%20b', (d) => d.name.toLowerCase().includes('item b')],
    ['name.lt=Item%20C', (d) => d.name < 'Item C'],
    ['day.gte=2026-05-10&day.lt=2026-05-20', (d) => d.day !== undefined && d.day >= '2026-05-10' && d.day < '2026-05-20'],
    ['at.lt=2026-05-01T05:00:00Z', (d) => instant(d.at) < Date.parse('2026-05-01T05:00:00Z')],
    ['at.eq=2026-05-01T03:00:00%2B02:00', (d) => instant(d.at) === Date.parse('2026-05-01T01:00:00Z')],
  ]
  for (const [query, expected] of cases) {
    test(query, async () => {
      expect(ids(await walk(query, 100)).sort()).toEqual(matching(expected))
    })
  }
})

test('createdAt and updatedAt filter every collection, typed or not; each refusal names its parameter', async () => {
  const listed = (await get(`${ORDERS}?limit=100`, 'alice')).body.data as { id: string; createdAt: string; updatedAt: string }[]
  expect(listed.length).toBeGreaterThan(1)
  const pivot = listed[Math.floor(listed.length / 2)]!
  const before = await get(`${ORDERS}?limit=100&createdAt.lt=${encodeURIComponent(pivot.createdAt)}`, 'alice')
  expect(before.status, JSON.stringify(before.body)).toBe(200)
  expect(ids(before.body.data).sort()).toEqual(listed.filter((r) => Date.parse(r.createdAt) < Date.parse(pivot.createdAt)).map((r) => r.id).sort())
  const since = await get(`${ORDERS}?limit=100&updatedAt.gte=${encodeURIComponent(pivot.updatedAt)}`, 'alice')
  expect(ids(since.body.data).sort()).toEqual(listed.filter((r) => Date.parse(r.updatedAt) >= Date.parse(pivot.updatedAt)).map((r) => r.id).sort())
  for (const [query, parameter] of [['createdAt.lt=yesterday', 'createdAt.lt'], ['updatedAt.contains=2026', 'updatedAt.contains']] as const) {
    const bad = await get(`${ORDERS}?${query}`, 'alice')
    expect([bad.status, bad.body.details?.[0]?.field], JSON.stringify(bad.body)).toEqual([400, parameter])
  }
})

test('a record older than the schema holding an impossible date-time: filters and sorts answer, it matches none', async () => {
  const put = await app.handle(
    request('/v1/project/Acme/collections/legacy/schema', { method: 'PUT', headers: { authorization: `Bearer ${tokens.all}` }, json: { fields: [{ name: 'at', type: 'datetime' }] } }),
  )
  expect(put.status).toBe(200)
  expect(((await put.json()) as Body).nonConforming).toEqual({ count: 1, ids: ['old_1'] })
  const legacy = (query: string) => get(`/v1/project/Acme/environment/production/collection/legacy/records?${query}`, { bearer: tokens.all })
  const after = await legacy('at.gt=2026-01-01T00:00:00Z')
  expect(after.status).toBe(200)
  expect(ids(after.body.data)).toEqual(['old_2'])
  const sorted = await legacy('sort=at')
  expect(sorted.status).toBe(200)
  expect(ids(sorted.body.data).sort()).toEqual(['old_1', 'old_2'])
})

describe('sort', () => {
  const byValue = (field: string, value: (v: unknown) => number | string = (v) => v as number) => (a: Body, b: Body) => {
    const [x, y] = [a.data[field], b.data[field]]
    if (x === undefined || y === undefined) return (x === undefined ? 0 : 1) - (y === undefined ? 0 : 1)
    return value(x) < value(y) ? -1 : value(x) > value(y) ? 1 : 0
  }
  for (const [sort, compare] of [
    ['price', byValue('price')],
    ['day', byValue('day')],
    ['at', byValue('at', instant)],
    ['name', byValue('name')],
  ] as const) {
    test(`${sort} ascending and descending, nulls lowest`, async () => {
      const up = await walk(`sort=${sort}`, 7)
      expect(up.length).toBe(ITEMS.length)
      expect([...up].sort(compare).map((r) => r.data[sort])).toEqual(up.map((r) => r.data[sort]))
      const down = await walk(`sort=-${sort}`, 7)
      expect(down.map((r) => r.data[sort])).toEqual([...up].reverse().map((r) => r.data[sort]))
    })
  }

  test('default: newest first by createdAt; a walk equals a full read', async () => {
    const { body } = await list('limit=100')
    expect(body.parameters).toEqual({ projectName: 'Acme', environmentName: 'production', collectionName: 'items', limit: 100, sort: '-createdAt' })
    expect(body.nextCursor).toBeUndefined()
    const times = body.data.map((r: Body) => r.createdAt)
    expect(times).toEqual([...times].sort().reverse())
    expect(ids(await walk('', 4))).toEqual(ids(body.data))
    expect(ids(await walk('sort=price&price.gt=10', 3))).toEqual(ids((await list('sort=price&price.gt=10&limit=100')).body.data))
  })
})

describe('paging while records are written', () => {
  test('inserts and updates between pages: no record is returned twice, none that stayed is skipped', async () => {
    const before = ids((await list('sort=price&limit=100')).body.data)
    let n = 0
    const seen = await walk('sort=price', 5, async () => {
      // New records on both sides of the cursor, with prices equal to ones already listed.
      for (const price of [0, 30, 150, ITEMS[3]!.data.price as number]) {
        const response = await app.handle(
          request(`${LIST}/new_${n++}`, { method: 'PUT', headers: { cookie: cookies.alice! }, json: { teamName: 'Support', data: { name: 'New', price } } }),
        )
        expect(response.status).toBe(201)
      }
    })
    expect(new Set(ids(seen)).size).toBe(seen.length)
    for (const id of before) expect(ids(seen)).toContain(id)
    const prices = seen.map((r) => r.data.price)
    expect(prices).toEqual([...prices].sort((a, b) => a - b))
  })
})

describe('paging while another client writes at the same time', () => {
  test('a writer running alongside a walk (newest first): the walk repeats nothing and misses none of the records it started with', async () => {
    const before = new Set(ids(await walk('', 100)))
    let writing = true
    const writer = (async () => {
      for (let n = 0; writing && n < 60; n++) {
        const response = await app.handle(
          request(`${LIST}/concurrent_${n}`, { method: 'PUT', headers: { cookie: cookies.alice! }, json: { teamName: 'Support', data: { name: 'C', price: n } } }),
        )
        expect(response.status).toBe(201)
      }
    })()
    const seen = ids(await walk('', 3))
    writing = false
    await writer
    expect(new Set(seen).size).toBe(seen.length)
    for (const id of before) expect(seen).toContain(id)
  })
})

describe('refusals name the parameter', () => {
  const cases: [string, string][] = [
    ['nope.eq=1', 'nope.eq'],
    ['price.contains=1', 'price.contains'],
    ['price.gt=abc', 'price.gt'],
    ['qty.eq=1.5', 'qty.eq'],
    ['active.eq=yes', 'active.eq'],
    ['day.lt=2026-02-30', 'day.lt'],
    ['at.gt=2026-05-01', 'at.gt'],
    ['kind.eq=medium', 'kind.eq'],
    ['price.like=1', 'price.like'],
    ['tags.eq=a', 'tags.eq'],
    ['sort=tags', 'sort'],
    ['sort=-nope', 'sort'],
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['cursor=garbage', 'cursor'],
  ]
  for (const [query, parameter] of cases) {
    test(query, async () => {
      const { status, body } = await list(query)
      expect(status).toBe(400)
      expect(body.code).toBe('invalid_parameter')
      expect(body.details[0].field).toBe(parameter)
      expect(body.message).toContain(`'${parameter}'`)
    })
  }

  test("a cursor of another sort is refused; a collection without a schema takes no filter", async () => {
    const { body } = await list('sort=price&limit=2')
    const other = await list(`sort=-price&cursor=${body.nextCursor}`)
    expect([other.status, other.body.details[0].field]).toEqual([400, 'cursor'])
    const untyped = await get('/v1/project/Acme/environment/production/collection/orders/records?status.eq=paid')
    expect([untyped.status, untyped.body.details[0].field]).toEqual([400, 'status.eq'])
    expect(untyped.body.message).toContain('no schema')
    const plain = await get('/v1/project/Acme/environment/production/collection/orders/records')
    expect(plain.status).toBe(200)
    expect(ids(plain.body.data).sort()).toEqual(['ord_1001', 'ord_1002', 'ord_1003'])
  })
})

describe('who may read', () => {
  test('members through a team that may read the collection, admins, and tokens with records:read or all', async () => {
    expect((await list('limit=1', 'bob')).status).toBe(200)
    expect((await list('limit=1', 'alice')).status).toBe(200)
    expect((await list('limit=1', { bearer: tokens.reader })).status).toBe(200)
    expect((await list('limit=1', { bearer: tokens.all })).status).toBe(200)
  })

  test("a member whose teams may not read it: 404, as an unknown collection; a token without the scope: 403", async () => {
    const hidden = await list('limit=1', 'dave')
    expect([hidden.status, hidden.body.code]).toEqual([404, 'not_found'])
    expect((await get(`${LIST}/it_001`, 'dave')).status).toBe(404)
    expect((await get('/v1/project/Acme/environment/production/collection/orders/records', 'dave')).status).toBe(200)
    const scopeless = await list('limit=1', { bearer: tokens.notesOnly })
    expect([scopeless.status, scopeless.body.code]).toEqual([403, 'insufficient_scope'])
    expect((await get(`${LIST}/it_001`, { bearer: tokens.notesOnly })).status).toBe(403)
    expect((await get('/v1/project/Acme/environment/production/collection/nope/records')).status).toBe(404)
  })
})

describe('one record', () => {
  test('its body and an ETag that changes with it; 404 for an unknown id', async () => {
    const first = await get(`${LIST}/it_002`)
    expect(first.status).toBe(200)
    expect(first.body).toEqual({ id: 'it_002', data: ITEMS[2]!.data, createdAt: expect.any(String), updatedAt: expect.any(String) })
    const etag = first.headers.get('etag')
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/)
    expect((await get(`${LIST}/it_002`, { bearer: tokens.reader })).headers.get('etag')).toBe(etag)
    const put = await app.handle(request(`${LIST}/it_002`, { method: 'PUT', headers: { cookie: cookies.alice! }, json: { teamName: 'Support', data: { ...ITEMS[2]!.data, qty: 99 } } }))
    expect(put.status).toBe(200)
    const after = await get(`${LIST}/it_002`)
    expect(after.body.data.qty).toBe(99)
    expect(after.headers.get('etag')).not.toBe(etag)
    const missing = await get(`${LIST}/nope`)
    expect([missing.status, missing.body.code]).toEqual([404, 'not_found'])
  })
})

// ── Writes ──────────────────────────────────────────────────────────────────

type As = string | { bearer: string }
const ORDERS = '/v1/project/Acme/environment/production/collection/orders/records'

/** One call as `as` (a user's session cookie, or a token), its JSON body parsed (none for a 204). */
async function call(method: string, path: string, as: As, json?: unknown, headers: Record<string, string> = {}) {
  const auth: Record<string, string> = typeof as === 'string' ? { cookie: cookies[as]! } : { authorization: `Bearer ${as.bearer}` }
  const response = await app.handle(request(path, { method, headers: { ...auth, ...headers }, json }))
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as Body, etag: response.headers.get('etag') }
}

/** The write entries of one record, newest first. */
async function activityOf(recordId: string): Promise<Body[]> {
  const { status, body } = await call('GET', `/v1/project/Acme/environment/production/activity-logs?recordId=${recordId}&type=write&limit=100&extensions=true`, { bearer: tokens.all })
  expect(status).toBe(200)
  return body.data
}

describe('POST …/records', () => {
  test('with an id: 201, the record with defaults filled and an ETag that GET gives too; one create entry naming the fields', async () => {
    const created = await call('POST', LIST, 'bob', { id: 'new_post', data: { name: 'Posted', price: 12 } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({ id: 'new_post', data: { name: 'Posted', price: 12 }, createdAt: expect.any(String), updatedAt: created.body.createdAt })
    expect(created.etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/)
    const read = await get(`${LIST}/new_post`)
    expect([read.body, read.headers.get('etag')]).toEqual([created.body, created.etag])
    const [entry] = await activityOf('new_post')
    expect(entry).toMatchObject({ type: 'write', action: 'create', user: { username: 'bob' }, team: { name: 'Support' }, collection: { name: 'items' }, recordIds: ['new_post'] })
    expect(entry!.label).toBe('created via the records API: name (none) → "Posted"; price (none) → 12')
  })

  test('without an id: a generated rec_ id; a token with records:write writes as its user', async () => {
    const created = await call('POST', LIST, { bearer: tokens.writer }, { data: { name: 'Generated' } })
    expect(created.status).toBe(201)
    expect(created.body.id).toMatch(/^rec_[a-z2-7]{20}$/)
    const [entry] = await activityOf(created.body.id)
    expect(entry!.label).toStartWith('created via the records API: name (none) → "Generated" · token "')
  })

  test('409 conflict for an id in use, a deleted record\'s too; 422 naming each field; 400 naming a bad body field', async () => {
    const taken = await call('POST', LIST, 'bob', { id: 'it_001', data: { name: 'x' } })
    expect([taken.status, taken.body.code]).toEqual([409, 'conflict'])
    expect((await call('POST', LIST, 'bob', { id: 'post_gone', data: { name: 'x' } })).status).toBe(201)
    expect((await call('DELETE', `${LIST}/post_gone`, 'bob')).status).toBe(204)
    const held = await call('POST', LIST, 'bob', { id: 'post_gone', data: { name: 'y' } })
    expect([held.status, held.body.code]).toEqual([409, 'conflict'])
    expect(held.body.message).toContain('restore')
    const invalid = await call('POST', LIST, 'bob', { data: { price: 'cheap', extra: 1 } })
    expect([invalid.status, invalid.body.code]).toEqual([422, 'invalid_record'])
    expect(invalid.body.details.map((d: Body) => d.field).sort()).toEqual(['/extra', '/name', '/price'])
    for (const [body, field] of [[{}, 'data'], [{ data: [] }, 'data'], [{ data: {}, id: '' }, 'id'], [{ data: {}, nope: 1 }, 'nope']] as const) {
      const bad = await call('POST', LIST, 'bob', body)
      expect([bad.status, bad.body.code, bad.body.details?.[0]?.field ?? bad.body.message], JSON.stringify(bad.body)).toEqual([400, 'validation_failed', field])
    }
  })

  test('ten concurrent POSTs of one new id: exactly one 201, nine 409, one create entry', async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, n) => call('POST', LIST, n % 2 === 0 ? 'bob' : { bearer: tokens.writer }, { id: 'it_race', data: { name: `Race ${n}`, qty: n } })),
    )
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409, 409, 409])
    expect(answers.filter((a) => a.status === 409).every((a) => a.body.code === 'conflict')).toBe(true)
    expect((await activityOf('it_race')).filter((e) => e.action === 'create').length).toBe(1)
  }, 30_000)
})

describe('PATCH …/records/{id}', () => {
  test('changes the fields given, null removes one; a new ETag; one update entry with each field before and after', async () => {
    const before = await get(`${LIST}/it_003`)
    const patched = await call('PATCH', `${LIST}/it_003`, 'bob', { data: { qty: 40, day: null } }, { 'if-match': before.headers.get('etag')! })
    expect(patched.status).toBe(200)
    const expected = { ...ITEMS[3]!.data, qty: 40 } as Record<string, unknown>
    delete expected.day
    expect(patched.body.data).toEqual(expected)
    expect(patched.etag).not.toBe(before.headers.get('etag'))
    expect((await get(`${LIST}/it_003`)).headers.get('etag')).toBe(patched.etag)
    const [entry] = await activityOf('it_003')
    expect([entry!.action, entry!.label]).toEqual(['update', `updated via the records API: day "${ITEMS[3]!.data.day}" → (none); qty ${ITEMS[3]!.data.qty} → 40`])
    // The same values again: nothing written, nothing logged, the same ETag.
    const again = await call('PATCH', `${LIST}/it_003`, 'bob', { data: { qty: 40 } })
    expect([again.status, again.etag]).toEqual([200, patched.etag])
    expect((await activityOf('it_003'))[0]!.id).toBe(entry!.id)
  })

  test('412 precondition_failed for a stale ETag; 404 unknown; 422 a required field removed, a bad value; 400 a bad body', async () => {
    const { headers } = await get(`${LIST}/it_005`)
    const etag = headers.get('etag')!
    expect((await call('PATCH', `${LIST}/it_005`, 'bob', { data: { qty: 1 } }, { 'if-match': etag })).status).toBe(200)
    const stale = await call('PATCH', `${LIST}/it_005`, 'bob', { data: { qty: 2 } }, { 'if-match': etag })
    expect([stale.status, stale.body.code]).toEqual([412, 'precondition_failed'])
    expect((await call('PATCH', `${LIST}/it_005`, 'bob', { data: { qty: 3 } }, { 'if-match': '*' })).status).toBe(200)
    expect((await call('PATCH', `${LIST}/nope`, 'bob', { data: { qty: 2 } })).status).toBe(404)
    const required = await call('PATCH', `${LIST}/it_005`, 'bob', { data: { name: null, qty: 1.5 } })
    expect([required.status, required.body.code, required.body.details.map((d: Body) => d.field)]).toEqual([422, 'invalid_record', ['/name', '/qty']])
    for (const [body, field] of [[{}, 'data'], [{ data: 'x' }, 'data'], [{ data: {}, id: 'x' }, 'id']] as const) {
      const bad = await call('PATCH', `${LIST}/it_005`, 'bob', body)
      expect([bad.status, bad.body.details?.[0]?.field], JSON.stringify(bad.body)).toEqual([400, field])
    }
  })

  test('ten concurrent PATCHes with one ETag: exactly one 200, nine 412', async () => {
    const { headers } = await get(`${LIST}/it_006`)
    const etag = headers.get('etag')!
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, n) => call('PATCH', `${LIST}/it_006`, n % 2 === 0 ? 'bob' : { bearer: tokens.writer }, { data: { qty: 100 + n } }, { 'if-match': etag })),
    )
    expect(answers.map((a) => a.status).sort()).toEqual([200, 412, 412, 412, 412, 412, 412, 412, 412, 412])
    const winner = answers.find((a) => a.status === 200)!
    expect((await get(`${LIST}/it_006`)).body.data.qty).toBe(winner.body.data.qty)
    expect((await activityOf('it_006')).filter((e) => e.action === 'update').length).toBe(1)
  }, 30_000)

  test('a field named __proto__ is a field like any other (untyped collection)', async () => {
    const patched = await call('PATCH', `${ORDERS}/ord_1003`, 'alice', { data: JSON.parse('{"__proto__": {"x": 1}}') })
    expect(patched.status).toBe(200)
    expect(Object.hasOwn(patched.body.data, '__proto__')).toBe(true)
    expect(JSON.stringify(patched.body.data)).toContain('"__proto__":{"x":1}')
  })

  test('PUT honours If-Match too and answers an ETag', async () => {
    const { headers, body } = await get(`${ORDERS}/ord_1002`, 'alice')
    const put = (ifMatch: string) =>
      call('PUT', `${ORDERS}/ord_1002`, 'alice', { teamName: 'Support', data: { ...body.data, items: 2 } }, { 'if-match': ifMatch })
    const stale = await put('"stale"')
    expect([stale.status, stale.body.code]).toEqual([412, 'precondition_failed'])
    const done = await put(headers.get('etag')!)
    expect(done.status).toBe(200)
    expect(done.etag).toBe((await get(`${ORDERS}/ord_1002`, 'alice')).headers.get('etag'))
  })
})

describe('DELETE, restore', () => {
  const target = (recordId: string): RunTarget => ({
    run: { user_id: userId(env.store, 'alice'), record_id: recordId } as RunTarget['run'],
    workflowName: 'w',
    projectId: projectId(env.store, 'Acme'),
    environmentId: queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE name = 'production' AND project_id = ?", projectId(env.store, 'Acme'))!.id,
    teamId: queryOne<{ id: number }>(env.store, "SELECT id FROM teams WHERE name = 'Support'")!.id,
    collectionId: queryOne<{ id: number }>(env.store, "SELECT id FROM collections WHERE name = 'items'")!.id,
  })

  test('a deleted record leaves the list, GET, a filter, the console and its search, and a data step; a project admin restores it as it was', async () => {
    const before = await get(`${LIST}/it_010`)
    const stale = await call('DELETE', `${LIST}/it_010`, 'bob', undefined, { 'if-match': '"stale"' })
    expect([stale.status, stale.body.code]).toEqual([412, 'precondition_failed'])
    expect((await call('DELETE', `${LIST}/it_010`, 'bob', undefined, { 'if-match': before.headers.get('etag')! })).status).toBe(204)
    expect((await get(`${LIST}/it_010`)).status).toBe(404)
    expect(ids(await walk('', 100))).not.toContain('it_010')
    expect(ids(await walk(`kind.eq=${ITEMS[10]!.data.kind}`, 100))).not.toContain('it_010')
    expect(ids(await walk('sort=price', 100))).not.toContain('it_010')
    const searched = async () => (await (await app.handle(request('/search?q=it_010', { headers: { cookie: cookies.alice! } }))).text()).includes('/r/it_010')
    expect(await searched()).toBe(false)
    const page = await app.handle(request('/p/Acme/e/production/t/Support/c/items/r/it_010', { headers: { cookie: cookies.alice! } }))
    expect(page.status).toBe(404)
    await expect(runNow(env.store, loadRecordAs(target('it_010'), 'read'))).rejects.toMatchObject({ code: 'record_not_found' })
    expect((await call('DELETE', `${LIST}/it_010`, 'bob')).status).toBe(404)
    expect((await call('PATCH', `${LIST}/it_010`, 'bob', { data: { qty: 1 } })).status).toBe(404)
    const [deleted] = await activityOf('it_010')
    expect([deleted!.action, deleted!.label]).toEqual(['delete', expect.stringMatching(/^deleted via the records API: active false → \(none\); .*; name "Item K10" → \(none\); /)])

    // Restore: project admins only (a member who may write: 403), then the record is back as it was.
    const member = await call('POST', `${LIST}/it_010/restore`, 'bob')
    expect([member.status, member.body.code]).toEqual([403, 'forbidden'])
    const restored = await call('POST', `${LIST}/it_010/restore`, 'alice')
    expect(restored.status).toBe(200)
    expect(restored.body).toEqual(before.body)
    expect(restored.etag).toBe(before.headers.get('etag'))
    expect((await get(`${LIST}/it_010`)).status).toBe(200)
    expect(await searched()).toBe(true)
    expect((await runNow(env.store, loadRecordAs(target('it_010'), 'read'))).data).toEqual(before.body.data)
    expect((await activityOf('it_010'))[0]!.label).toMatch(/^restored via the records API: active \(none\) → false; .*; name \(none\) → "Item K10"; /)
    // A live record, an unknown one: nothing to restore.
    expect((await call('POST', `${LIST}/it_010/restore`, 'alice')).status).toBe(404)
    expect((await call('POST', `${LIST}/nope/restore`, 'alice')).status).toBe(404)
  })
})

describe('who may write', () => {
  test('a member whose team may only read: 403; whose teams may not read: 404; read-only and scope-less tokens: 403', async () => {
    const readOnly = await call('PATCH', `${ORDERS}/ord_1001`, 'dave', { data: { items: 4 } })
    expect([readOnly.status, readOnly.body.code]).toEqual([403, 'forbidden'])
    expect((await call('POST', ORDERS, 'dave', { data: {} })).status).toBe(403)
    expect((await call('DELETE', `${ORDERS}/ord_1001`, 'dave')).status).toBe(403)
    expect((await call('PATCH', `${LIST}/it_001`, 'dave', { data: { qty: 1 } })).status).toBe(404)
    expect((await call('POST', LIST, 'dave', { data: { name: 'x' } })).status).toBe(404)
    for (const token of [tokens.reader, tokens.notesOnly]) {
      const refused = await call('PATCH', `${LIST}/it_001`, { bearer: token }, { data: { qty: 1 } })
      expect([refused.status, refused.body.code]).toEqual([403, 'insufficient_scope'])
      expect((await call('POST', LIST, { bearer: token }, { data: { name: 'x' } })).status).toBe(403)
      expect((await call('DELETE', `${LIST}/it_001`, { bearer: token })).status).toBe(403)
    }
    // A project admin writes any collection (carol belongs to Billing only, which may not read items).
    expect((await call('PATCH', `${LIST}/it_001`, 'carol', { data: { qty: 5 } })).status).toBe(200)
    expect((await activityOf('it_001'))[0]!.team.name).toBe('Billing')
  })

  test('on an SSO project a password session is refused (403 sso_required), as reads are', async () => {
    const acme = projectId(env.store, 'Acme')
    await runNow(env.store, updateProject(acme, { sso: true }))
    try {
      const refused = await call('PATCH', `${LIST}/it_001`, 'bob', { data: { qty: 1 } })
      expect([refused.status, refused.body.code]).toEqual([403, 'sso_required'])
      expect((await call('POST', `${LIST}/it_001/restore`, 'alice')).status).toBe(403)
    } finally {
      await runNow(env.store, updateProject(acme, { sso: false }))
    }
  })
})

describe('purge', () => {
  test('a record deleted longer ago than the retention cannot be restored and is purged; its notes stay', async () => {
    expect((await call('POST', LIST, 'bob', { id: 'purge_me', data: { name: 'Old' } })).status).toBe(201)
    const note = await call('POST', '/v1/project/Acme/environment/production/notes', { bearer: tokens.all }, {
      recordId: 'purge_me', collectionName: 'items', teamName: 'Support', title: 'Kept', content: '<p>history</p>',
    })
    expect(note.status).toBe(201)
    expect((await call('DELETE', `${LIST}/purge_me`, { bearer: tokens.writer })).status).toBe(204)
    expect((await call('DELETE', `${LIST}/it_011`, 'bob')).status).toBe(204)
    const count = (key: string) => queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM records WHERE record_key = ?', key)!.n
    const start = env.clock.now()
    try {
      env.clock.advance(29 * 86_400_000)
      expect(await purgeDeletedRecords(env.store, env.clock, env.config.recordRetentionDays)).toBe(0)
      expect(count('purge_me')).toBe(1)
      expect((await call('POST', `${LIST}/it_011/restore`, { bearer: tokens.all })).status).toBe(200)
      env.clock.advance(2 * 86_400_000)
      expect((await call('POST', `${LIST}/purge_me/restore`, { bearer: tokens.all })).status).toBe(404)
      expect(await purgeDeletedRecords(env.store, env.clock, env.config.recordRetentionDays)).toBeGreaterThanOrEqual(1)
      expect([count('purge_me'), count('it_011')]).toEqual([0, 1])
      const notes = await call('GET', '/v1/project/Acme/environment/production/notes?recordId=purge_me', { bearer: tokens.all })
      expect(notes.body.data.map((n: Body) => n.title)).toEqual(['Kept'])
      // The id is free again.
      expect((await call('POST', LIST, { bearer: tokens.all }, { id: 'purge_me', data: { name: 'New' } })).status).toBe(201)
    } finally {
      env.clock.set(start)
    }
  })
})

describe('plans on PostgreSQL (SQLite\'s: test/query-plans.test.ts)', () => {
  postgresOnlyTest(POSTGRES_ONLY.queryPlan, 'the default order walks its index; a page filtered or sorted by an indexed field walks the field\'s index', async () => {
    const store = env.store
    if (store.kind !== 'postgres') throw new Error('PostgreSQL only')
    const scope = {
      environmentId: queryOne<{ id: number }>(store, "SELECT id FROM environments WHERE name = 'production'")!.id,
      collectionId: queryOne<{ id: number }>(store, "SELECT id FROM collections WHERE name = 'items'")!.id,
    }
    // The statement as the store builds it, with its values; the table is small, so a sequential scan is priced out,
    // and a sort too: what is left is the plan that walks an index in the list's order, where one serves.
    const plan = async (q: RecordListQuery) => {
      const call = (pageRecordList(scope, q, 10).next().value as { query: QueryCall }).query
      const built = call.build(postgresDialect(store.db)).prepare('explained' as never) as unknown as { queryString: string; params: unknown[] }
      return store.sql.begin(async (tx) => {
        await tx.unsafe('SET LOCAL enable_seqscan = off')
        await tx.unsafe('SET LOCAL enable_sort = off')
        const rows = (await tx.unsafe(`EXPLAIN ${built.queryString}`, fillPlaceholders(built.params, call.values ?? {}) as never[])) as { 'QUERY PLAN': string }[]
        return rows.map((row) => row['QUERY PLAN']).join('\n')
      })
    }
    const newest = await plan({ filters: [], sort: null, direction: 'desc', after: { key: Number.MAX_SAFE_INTEGER, id: 9 }, literalCollection: false })
    expect(newest).toMatch(/Index Scan Backward using records_env_collection_created_idx on records/)
    expect(newest).not.toMatch(/Sort/)
    // Each field's index holds its values as its kind compares them (numbers as numeric, text in byte order) in the
    // list's order: a page filtered or sorted by a field walks that field's index, never sorting what it found.
    const priceIndex = fieldIndexName(scope.collectionId, 'price')
    const kindIndex = fieldIndexName(scope.collectionId, 'kind')
    const byKind = await plan({ filters: [{ field: 'kind', kind: 'text', op: 'eq', values: ['large'] }], sort: { field: 'kind', kind: 'text' }, direction: 'asc', literalCollection: true })
    expect(byKind).toMatch(/Index Cond: [^\n]*\(data\)::jsonb ->> 'kind'/)
    expect(byKind).toContain(`Index Scan using ${kindIndex} on records`)
    const byPrice = await plan({ filters: [{ field: 'price', kind: 'number', op: 'gt', values: [10] }], sort: { field: 'price', kind: 'number' }, direction: 'desc', literalCollection: true })
    expect(byPrice).toMatch(new RegExp(`Index Scan Backward using ${priceIndex} on records`))
    expect(byPrice).not.toMatch(/Sort/)
    const kindByPrice = await plan({ filters: [{ field: 'kind', kind: 'text', op: 'eq', values: ['large'] }], sort: { field: 'price', kind: 'number' }, direction: 'asc', literalCollection: true })
    expect(kindByPrice).toMatch(new RegExp(`Index Scan using ${priceIndex} on records`))
    expect(kindByPrice).not.toMatch(/Sort/)
  }, 60_000)

  postgresOnlyTest(POSTGRES_ONLY.queryPlan, 'a batch of an import into a collection the statistics have not seen probes the unique index once per id', async () => {
    const store = env.store
    if (store.kind !== 'postgres') throw new Error('PostgreSQL only')
    const environmentId = queryOne<{ id: number }>(store, "SELECT id FROM environments WHERE name = 'production'")!.id
    // A first import of 20,000 records in one transaction (all-or-nothing): the planner knows nothing of them. Joined
    // to the batch's ids as a set it hashes or walks the collection for each batch; each id must probe the unique index.
    let plan = ''
    const rolledBack = new Error('rolled back')
    const done = store.sql.begin(async (tx) => {
      const [{ id: collectionId }] = await tx.unsafe("INSERT INTO collections (project_id, name, created_at) SELECT project_id, 'unseen', 0 FROM environments WHERE id = $1 RETURNING id", [environmentId])
      await tx.unsafe("INSERT INTO records (environment_id, collection_id, record_key, data, created_at, updated_at) SELECT $1, $2, 'r' || g, '{}', 1, 1 FROM generate_series(1, 20000) g", [environmentId, collectionId])
      const keys = Array.from({ length: 1_000 }, (_, i) => `r${19_000 + i}`)
      const rows = (await tx.unsafe(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${RECORDS_BY_KEYS_ON_POSTGRES}`, [environmentId, collectionId, keys] as never[])) as { 'QUERY PLAN': string }[]
      plan = rows.map((row) => row['QUERY PLAN']).join('\n')
      throw rolledBack
    })
    expect(await done.catch((error: unknown) => error)).toBe(rolledBack)
    expect(plan).toMatch(/Index Scan using records_env_collection_key_unique on records[^\n]*\(actual rows=1 loops=1000\)/)
    expect(plan).not.toMatch(/Hash|Rows Removed by Filter/)
  }, 60_000)
})

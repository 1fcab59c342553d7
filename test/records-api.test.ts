/**
 * The records API's reads (docs/records.md "Reading records"): typed filters per field type, sort both ways, cursor
 * paging (a walk equals a full read; writes during a walk neither repeat nor skip a record), 400s naming the
 * parameter, who may read (scopes, the collection's team permissions), one record with its ETag. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { fillPlaceholders } from 'drizzle-orm/sql'
import type { QueryCall } from '../src/db/op.ts'
import { postgresDialect } from '../src/db/postgres/dialect.ts'
import { pageRecordList, type RecordListQuery } from '../src/db/records.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { POSTGRES_ONLY, postgresOnlyTest, queryOne, request, runNow, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, tokensFor, userId } from './support/acme.ts'

type Body = Record<string, any>

let env: TestEnv
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}
let tokens: Record<'reader' | 'all' | 'notesOnly', string>

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
  for (const name of ['alice', 'bob', 'dave']) cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
  tokens = await tokensFor(env.store, env.clock, { reader: ['bob', ['records:read']], all: ['alice', ['all']], notesOnly: ['alice', ['notes:read']] })
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

describe('plans on PostgreSQL (SQLite\'s: test/query-plans.test.ts)', () => {
  postgresOnlyTest(POSTGRES_ONLY.queryPlan, 'the default order walks its index; equality on an indexed text field uses the field\'s index', async () => {
    const store = env.store
    if (store.kind !== 'postgres') throw new Error('PostgreSQL only')
    const scope = {
      environmentId: queryOne<{ id: number }>(store, "SELECT id FROM environments WHERE name = 'production'")!.id,
      collectionId: queryOne<{ id: number }>(store, "SELECT id FROM collections WHERE name = 'items'")!.id,
    }
    // The statement as the store builds it, with its values; the table is small, so a sequential scan is priced out.
    const plan = async (q: RecordListQuery) => {
      const call = (pageRecordList(scope, q, 10).next().value as { query: QueryCall }).query
      const built = call.build(postgresDialect(store.db)).prepare('explained' as never) as unknown as { queryString: string; params: unknown[] }
      return store.sql.begin(async (tx) => {
        await tx.unsafe('SET LOCAL enable_seqscan = off')
        const rows = (await tx.unsafe(`EXPLAIN ${built.queryString}`, fillPlaceholders(built.params, call.values ?? {}) as never[])) as { 'QUERY PLAN': string }[]
        return rows.map((row) => row['QUERY PLAN']).join('\n')
      })
    }
    const newest = await plan({ filters: [], sort: null, direction: 'desc', after: { key: Number.MAX_SAFE_INTEGER, id: 9 }, literalCollection: false })
    expect(newest).toMatch(/Index Scan Backward using records_env_collection_created_idx on records/)
    expect(newest).not.toMatch(/Sort/)
    // Sorted on a value no index holds (numbers as numeric): the filter's index finds the rows to sort.
    const byKind = await plan({ filters: [{ field: 'kind', kind: 'text', op: 'eq', values: ['large'] }], sort: { field: 'price', kind: 'number' }, direction: 'asc', literalCollection: true })
    expect(byKind).toMatch(/Index Cond: [^\n]*\(data\)::jsonb ->> 'kind'/)
  }, 60_000)
})

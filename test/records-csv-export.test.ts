/**
 * The CSV export of a collection of 1,000,000 records (docs/records.md "CSV export and import") streams in bounded
 * memory: it reads pages of EXPORT_PAGE records as the client takes them, never the whole collection. The records
 * are seeded by one SQL statement per store (fast); the test prints the process's resident memory before and at its
 * peak while the export is read. Both stores.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { execute, queryOne, request, TEST_STORE, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, tokensFor } from './support/acme.ts'

const RECORDS = 1_000_000
/**
 * What the export may add: to the JavaScript heap, a small part of the CSV's 79 MB (held whole it would take more than
 * that: strings are UTF-16); to the resident size, which also counts what the allocator keeps after a collection, a
 * bound that a whole collection in memory would pass.
 */
const MAX_HEAP_GROWTH_MB = 16
const MAX_RSS_GROWTH_MB = 160

let env: TestEnv
let app: ReturnType<typeof testApp>
let token: string

/** One statement inserting `RECORDS` records `r0000001`… with data {label, n} into the collection. */
function seedRecords(environmentId: number, collectionId: number, createdAt: number) {
  const key = TEST_STORE === 'sqlite' ? "'r' || printf('%07d', i)" : "'r' || lpad(i::text, 7, '0')"
  const series = TEST_STORE === 'sqlite' ? `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${RECORDS}) ` : ''
  const from = TEST_STORE === 'sqlite' ? 'FROM s' : `FROM generate_series(1, ${RECORDS}) AS s(i)`
  execute(
    env.store,
    `${series}INSERT INTO records (environment_id, collection_id, record_key, data, created_at, updated_at)
     SELECT ?, ?, ${key}, '{"label":"item ' || i || '","n":' || i || '}', ? + i, ? + i ${from}`,
    environmentId, collectionId, createdAt, createdAt,
  )
  // The statistics a deployment's autovacuum keeps: a million rows inserted at once and read a moment later, before
  // its next round, leave PostgreSQL planning each page of the export as if the collection held a few rows (a sort of
  // every record past the cursor, 0.4 s a page) instead of a walk of the (collection, createdAt) index.
  if (TEST_STORE === 'postgres') execute(env.store, 'ANALYZE records')
}

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  acmeProject(document).collections!.push({ name: 'big', schema: { fields: [{ name: 'label', type: 'text' }, { name: 'n', type: 'integer' }] } } as never)
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  token = (await tokensFor(env.store, env.clock, { reader: ['bob', ['records:read']] })).reader
  const ids = queryOne<{ e: number; c: number }>(
    env.store,
    "SELECT e.id AS e, c.id AS c FROM environments e JOIN projects p ON p.id = e.project_id JOIN collections c ON c.project_id = p.id WHERE p.name = 'Acme' AND e.name = 'production' AND c.name = 'big'",
  )!
  seedRecords(Number(ids.e), Number(ids.c), Date.parse('2026-01-01T00:00:00Z'))
}, 300_000)
afterAll(() => env.cleanup())

test(`an export of ${RECORDS.toLocaleString('en-US')} records streams in bounded memory`, async () => {
  Bun.gc(true)
  const mb = (bytes: number) => Math.round(bytes / 1e6)
  const before = process.memoryUsage().rss
  const heapBefore = process.memoryUsage().heapUsed
  let peak = before
  let heapPeak = heapBefore
  const response = await app.handle(request('/v1/project/Acme/environment/production/collection/big/records.csv?sort=createdAt', { headers: { authorization: `Bearer ${token}` } }))
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let lines = 0
  let bytes = 0
  let head = ''
  let tail = ''
  for (let chunks = 0; ; chunks++) {
    const { done, value } = await reader.read()
    if (done) break
    bytes += value.byteLength
    const text = decoder.decode(value, { stream: true })
    if (head === '') head = text.slice(0, 200)
    tail = (tail + text).slice(-200)
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lines++
    // Collected now and then, so the resident size measures what the export holds, not garbage not yet collected.
    if (chunks % 25 === 24) Bun.gc(true)
    if (chunks % 20 === 0) {
      const now = process.memoryUsage()
      peak = Math.max(peak, now.rss)
      heapPeak = Math.max(heapPeak, now.heapUsed)
    }
  }
  peak = Math.max(peak, process.memoryUsage().rss)
  console.log(`CSV export of ${RECORDS} records on ${TEST_STORE}: ${mb(bytes)} MB of CSV; RSS ${mb(before)} MB before, ${mb(peak)} MB at the peak (+${mb(peak - before)} MB); JS heap +${mb(heapPeak - heapBefore)} MB at the peak`)
  expect(lines).toBe(RECORDS + 1)
  expect(head.split('\r\n')[0]).toBe('id,label,n,createdAt,updatedAt')
  expect(head.split('\r\n')[1]).toStartWith('r0000001,item 1,1,2026-01-01T00:00:00.001Z,')
  expect(tail.trimEnd().split('\r\n').at(-1)).toStartWith(`r${RECORDS},item ${RECORDS},${RECORDS},`)
  expect(mb(heapPeak - heapBefore)).toBeLessThan(MAX_HEAP_GROWTH_MB)
  expect(mb(peak - before)).toBeLessThan(MAX_RSS_GROWTH_MB)
}, 600_000)

/**
 * Records as CSV (docs/records.md "CSV export and import"): the export's header, cells of every type, quoting and the
 * formula guard, filters and sort as the list; the import's dry run (mapping, unknown columns, line errors), a
 * 100,000-line file with bad lines (exact report; nothing written all-or-nothing; the valid lines land without it;
 * re-import changes nothing), export → import round trip, who may (scopes, team permissions), the body rules.
 * Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { queryOne, request, runCli, tempDir, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, tokensFor } from './support/acme.ts'

type Body = Record<string, any>

let env: TestEnv
let app: ReturnType<typeof testApp>
let tokens: Record<'alice' | 'bob' | 'dave' | 'reader', string>

const FIELDS = [
  { name: 'name', type: 'text', required: true },
  { name: 'price', type: 'number' },
  { name: 'qty', type: 'integer' },
  { name: 'active', type: 'boolean' },
  { name: 'day', type: 'date' },
  { name: 'at', type: 'datetime' },
  { name: 'mail', type: 'email' },
  { name: 'site', type: 'url' },
  { name: 'kind', type: 'select', options: ['small', 'large'] },
  { name: 'tags', type: 'multiselect', options: ['a', 'b', 'c;d', '[x'] },
  { name: 'extra', type: 'json' },
  { name: 'customer', type: 'relation', collection: 'customers' },
]
const PLACE = '/v1/project/Acme/environment/production/collection'

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  const project = acmeProject(document) as any
  project.collections.push({ name: 'items', permissions: { Billing: { read: false, edit: false } }, schema: { fields: FIELDS } })
  project.collections.push({ name: 'bulk', permissions: { Billing: { read: false, edit: false } }, schema: { fields: [{ name: 'n', type: 'integer', required: true }, { name: 'label', type: 'text' }] } })
  project.collections.push({ name: 'loose' })
  project.collections.push({ name: 'viacli', schema: { fields: [{ name: 'n', type: 'integer', required: true }, { name: 'note', type: 'text' }] } })
  project.records.push({ environment: 'production', collection: 'customers', id: 'cus_1', data: { name: 'Ann' } })
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  tokens = await tokensFor(env.store, env.clock, { alice: ['alice', ['all']], bob: ['bob', ['records:read', 'records:write']], dave: ['dave', ['records:read', 'records:write']], reader: ['bob', ['records:read']] })
}, 120_000)
afterAll(() => env.cleanup())

async function exportCsv(collection: string, query = '', as: keyof typeof tokens = 'alice') {
  const response = await app.handle(request(`${PLACE}/${collection}/records.csv${query ? `?${query}` : ''}`, { headers: { authorization: `Bearer ${tokens[as]}` } }))
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() }
}

async function importCsv(collection: string, csv: string, query = '', as: keyof typeof tokens = 'alice', type = 'text/csv') {
  const response = await app.handle(
    request(`${PLACE}/${collection}/records.csv${query ? `?${query}` : ''}`, { method: 'POST', headers: { authorization: `Bearer ${tokens[as]}`, 'content-type': type }, body: csv }),
  )
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, body: JSON.parse(text) as Body }
}

const recordCount = (collection: string) =>
  Number(queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM records r JOIN collections c ON c.id = r.collection_id WHERE c.name = ?', collection)!.n)

describe('every type, quoting and the formula guard, round trip', () => {
  const header = 'id,name,price,qty,active,day,at,mail,site,kind,tags,extra,customer'
  const lines = [
    'it_1,"Widget, large",12.5,3,true,2026-05-01,2026-05-01T09:30:00Z,a@b.example,https://example.com/x,small,a;b,"{""k"":[1,2]}",cus_1',
    'it_2,"say ""hi""\nsecond line",-4,0,false,,,,,large,"[""c;d"",""[x""]",null,',
    "it_3,=SUM(A1:A2),,,,,,,,,,,",
    "it_4,'+already quoted,1e+21,,,,,,,,,\"\"\"text\"\"\",",
  ]
  const csv = [header, ...lines].join('\n')

  test('a dry run maps the columns and writes nothing', async () => {
    const { status, body } = await importCsv('items', `${csv}\n`, 'dryRun=true')
    expect(status).toBe(200)
    expect(body.errors).toEqual([])
    expect(body).toMatchObject({ dryRun: true, lines: 4, created: 4, updated: 0, unchanged: 0, invalid: 0, written: false, unknownColumns: [] })
    expect(body.columns[0]).toEqual({ column: 'id', field: 'id', type: null })
    expect(body.columns[10]).toEqual({ column: 'tags', field: 'tags', type: 'multiselect' })
    expect(recordCount('items')).toBe(0)
  })

  test('the import reads each cell as its type; the export writes them back the same', async () => {
    const { status, body } = await importCsv('items', csv)
    expect(status, JSON.stringify(body)).toBe(200)
    expect(body).toMatchObject({ created: 4, invalid: 0, written: true })
    const read = async (id: string) => (await (await app.handle(request(`${PLACE}/items/records/${id}`, { headers: { authorization: `Bearer ${tokens.alice}` } }))).json()) as Body
    expect((await read('it_1')).data).toEqual({ name: 'Widget, large', price: 12.5, qty: 3, active: true, day: '2026-05-01', at: '2026-05-01T09:30:00Z', mail: 'a@b.example', site: 'https://example.com/x', kind: 'small', tags: ['a', 'b'], extra: { k: [1, 2] }, customer: 'cus_1' })
    expect((await read('it_2')).data).toEqual({ name: 'say "hi"\nsecond line', price: -4, qty: 0, active: false, kind: 'large', tags: ['c;d', '[x'], extra: null })
    expect((await read('it_3')).data).toEqual({ name: '=SUM(A1:A2)' })
    expect((await read('it_4')).data).toEqual({ name: '+already quoted', price: 1e21, extra: 'text' })

    const exported = await exportCsv('items', 'sort=createdAt')
    expect(exported.status).toBe(200)
    expect(exported.type).toBe('text/csv; charset=utf-8')
    const rows = exported.text.split('\r\n')
    expect(rows[0]).toBe(`${header},createdAt,updatedAt`)
    expect(exported.text).toContain("it_3,'=SUM(A1:A2),")
    expect(exported.text).toContain("it_4,'+already quoted,1e+21,")
    expect(exported.text).toContain('"[""c;d"",""[x""]"')
    expect(exported.text).toContain('it_2,"say ""hi""\nsecond line",-4,0,false,')

    // The export imported again is the same records: nothing changes.
    const again = await importCsv('items', exported.text)
    expect(again.body).toMatchObject({ lines: 4, created: 0, updated: 0, unchanged: 4, invalid: 0, written: false })
  })

  test('the export takes the list filters and sort (400 naming a bad one)', async () => {
    const { text } = await exportCsv('items', 'kind.eq=large&sort=-price')
    expect(text.split('\r\n').filter(Boolean).map((l) => l.split(',')[0])).toEqual(['id', 'it_2'])
    const bad = await exportCsv('items', 'qty.eq=1.5')
    expect(bad.status).toBe(400)
    expect(JSON.parse(bad.text)).toMatchObject({ code: 'invalid_parameter', details: [{ field: 'qty.eq' }] })
  })

  test('an untyped collection: id, data as JSON', async () => {
    const { body } = await importCsv('loose', 'id,data\nx1,"{""a"":1,""b"":""=c""}"\nx2,[1]\n')
    expect(body).toMatchObject({ created: 1, invalid: 1, errors: [{ line: 3, field: 'data', reason: 'must be a JSON object' }] })
    const { text } = await exportCsv('loose')
    expect(text.split('\r\n')[0]).toBe('id,data,createdAt,updatedAt')
    expect(text).toContain('x1,"{""a"":1,""b"":""=c""}",')
  })
})

describe('bad files and bad lines', () => {
  test('unknown columns: a dry run lists them, an import refuses them', async () => {
    const csv = 'id,name,colour,createdAt\nz1,Zed,red,2020-01-01T00:00:00Z\n'
    const dry = await importCsv('items', csv, 'dryRun=true')
    expect(dry.body.unknownColumns).toEqual(['colour'])
    expect(dry.body.columns.slice(2)).toEqual([{ column: 'colour', field: null, type: null, ignored: 'unknown' }, { column: 'createdAt', field: null, type: null, ignored: 'read-only' }])
    const real = await importCsv('items', csv)
    expect(real.status).toBe(400)
    expect(real.body).toMatchObject({ error: 'Bad Request', code: 'invalid_csv', details: [{ field: 'colour' }] })
  })

  test('malformed CSV, no id column, a repeated column: 400 invalid_csv', async () => {
    for (const csv of ['id,name\n"z1,Zed\n', 'name\nZed\n', 'id,name,name\nz,a,b\n', '']) {
      const { status, body } = await importCsv('items', csv)
      expect(status, csv).toBe(400)
      expect(body.code, csv).toBe('invalid_csv')
      expect(typeof body.message).toBe('string')
    }
  })

  test('each bad cell and each schema problem is a line error naming the column', async () => {
    const csv = ['id,name,qty,active,kind,customer', 'b1,,1,true,small,', 'b2,Two,1.5,yes,medium,cus_nope', 'b3,Three,,,,', 'b3,Again,,,,', ',NoId,,,,'].join('\n')
    const { body } = await importCsv('items', csv, 'dryRun=true')
    expect(body.errors).toEqual([
      { line: 2, field: 'name', reason: 'is required (a string)' },
      { line: 3, field: 'qty', reason: 'must be an integer' },
      { line: 3, field: 'active', reason: 'must be true or false' },
      { line: 5, field: 'id', reason: 'repeats the id of line 4' },
      { line: 6, field: 'id', reason: 'is required (the record id)' },
    ])
    expect(body).toMatchObject({ lines: 5, created: 1, invalid: 4 })
    // A cell of the right shape then judged by the schema: the select's options, the relation's target.
    const judged = await importCsv('items', 'id,name,kind,customer\nb2,Two,medium,cus_nope\n', 'dryRun=true')
    expect(judged.body.errors).toEqual([
      { line: 2, field: 'kind', reason: 'must be one of small, large' },
      { line: 2, field: 'customer', reason: 'must be the id of an existing record of the related collection: there is no record cus_nope' },
    ])
  })

  test('line numbers count physical lines: CRLF, a CRLF inside a quoted cell, empty lines, a byte order mark', async () => {
    const csv = '\ufeffid,name,qty\r\nc1,"two\r\nlines",1\r\n\r\nc2,ok,x\r\nc3,"é\r\n\r\nthree",y\r\nc4,ok,z'
    const { body } = await importCsv('items', csv, 'dryRun=true')
    expect(body.errors.map((e: Body) => e.line)).toEqual([5, 6, 9])
  })

  test('a body that is not text/csv is 415; one over the limit 413', async () => {
    expect((await importCsv('items', 'id\n', '', 'alice', 'application/json')).status).toBe(415)
    const response = await app.handle(
      request(`${PLACE}/items/records.csv`, { method: 'POST', headers: { authorization: `Bearer ${tokens.alice}`, 'content-type': 'text/csv', 'content-length': String(33 * 1024 * 1024) }, body: 'id\n' }),
    )
    expect(response.status).toBe(413)
  })

  test('bad parameters: 400 naming them', async () => {
    const { status, body } = await importCsv('items', 'id,name\nq,Q\n', 'dryRun=yes')
    expect(status).toBe(400)
    expect(body.details[0].field).toBe('dryRun')
  })
})

describe('who may', () => {
  test('a token without records:write is 403; a member whose team may not read the collection 404; one who may read only 403', async () => {
    expect((await importCsv('items', 'id,name\nw1,W\n', '', 'reader')).body.code).toBe('insufficient_scope')
    const hidden = await importCsv('items', 'id,name\nw1,W\n', '', 'dave')
    expect(hidden.status).toBe(404)
    expect((await exportCsv('items', '', 'dave')).status).toBe(404)
    // Billing reads orders but may not edit them.
    const readOnly = await importCsv('orders', 'id,customer\nord_x,Zed\n', '', 'dave')
    expect(readOnly.status).toBe(403)
    expect(readOnly.body.code).toBe('forbidden')
    expect((await exportCsv('orders', '', 'dave')).status).toBe(200)
  })

  test('a member whose team may edit writes, as that team; a team not theirs is 403', async () => {
    const { status, body } = await importCsv('items', 'id,name\nw2,W\n', '', 'bob')
    expect(status, JSON.stringify(body)).toBe(200)
    expect(body.created).toBe(1)
    const entry = queryOne<{ team: string }>(env.store, "SELECT t.name AS team FROM activity_logs a JOIN teams t ON t.id = a.team_id WHERE a.label LIKE 'created by CSV import: %' AND a.user_id = (SELECT id FROM users WHERE username = 'bob')")
    expect(entry?.team).toBe('Support')
    expect((await importCsv('items', 'id,name\nw3,W\n', 'teamName=Billing', 'bob')).status).toBe(403)
  })
})

describe('a 100,000-line file with bad lines', () => {
  const LINES = 100_000
  const bad = new Set([7, 5_000, 31_337, 99_999])
  const csv = (version: string) =>
    `id,n,label\n${Array.from({ length: LINES }, (_, i) => `r${String(i).padStart(6, '0')},${bad.has(i) ? 'x' : i},${version}`).join('\n')}\n`
  const expectedErrors = [...bad].sort((a, b) => a - b).map((i) => ({ line: i + 2, field: 'n', reason: 'must be an integer' }))

  test('all-or-nothing: the exact report, nothing written', async () => {
    const { status, body } = await importCsv('bulk', csv('v1'), 'allOrNothing=true')
    expect(status).toBe(422)
    expect(body).toMatchObject({ error: 'Unprocessable Entity', code: 'import_refused', lines: LINES, invalid: bad.size, written: false })
    expect(body.errors).toEqual(expectedErrors)
    expect(recordCount('bulk')).toBe(0)
  }, 240_000)

  test('without: the valid lines land; the same file again changes nothing; a changed one updates', async () => {
    const first = await importCsv('bulk', csv('v1'))
    expect(first.body).toMatchObject({ lines: LINES, created: LINES - bad.size, updated: 0, unchanged: 0, invalid: bad.size, written: true })
    expect(first.body.errors).toEqual(expectedErrors)
    expect(recordCount('bulk')).toBe(LINES - bad.size)
    const again = await importCsv('bulk', csv('v1'))
    expect(again.body).toMatchObject({ created: 0, updated: 0, unchanged: LINES - bad.size, invalid: bad.size, written: false })
    const logged = () => Number(queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM activity_logs WHERE label LIKE 'updated by CSV import: %'")!.n)
    const before = logged()
    const changed = await importCsv('bulk', csv('v2').split('\n').slice(0, 11).join('\n'))
    expect(changed.body).toMatchObject({ lines: 10, updated: 9, invalid: 1 })
    // One entry per record changed, naming its changes before and after.
    expect(logged()).toBe(before + 9)
    const last = queryOne<{ label: string; n: number }>(env.store, "SELECT a.label, (SELECT count(*) FROM activity_log_records r WHERE r.log_id = a.id) AS n FROM activity_logs a WHERE a.label LIKE 'updated by CSV import: %' ORDER BY a.id DESC LIMIT 1")
    expect(Number(last!.n)).toBe(1)
    expect(last!.label).toMatch(/^updated by CSV import: \w+ .+ → .+/)
  }, 400_000)
})

describe('trellis records import|export against a running server', () => {
  const LINES = 12_000
  let server: ReturnType<typeof Bun.serve>
  let dir: ReturnType<typeof tempDir>
  beforeAll(() => {
    server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (r) => app.handle(r) })
    dir = tempDir()
  })
  afterAll(() => {
    server.stop(true)
    dir.cleanup()
  })
  const cli = (args: string[], token = tokens.alice) =>
    runCli(['records', ...args, '--project', 'Acme', '--environment', 'production', '--collection', 'viacli', '--url', server.url.href], { env: { TRELLIS_TOKEN: token } })

  /** Line 2 + i holds record i; record 5000 spans two lines (a quoted line break), so every later record is one line further. */
  function writeFile(name: string, bad: number[]): string {
    const lines = Array.from({ length: LINES }, (_, i) => `c${i},${bad.includes(i) ? 'nope' : i},${i === 5000 ? '"two\nlines, ""quoted"""' : `note ${i}`}`)
    const path = join(dir.path, name)
    writeFileSync(path, `id,n,note\n${lines.join('\n')}\n`)
    return path
  }

  test('chunks of whole records; errors at their line of the file; re-import changes nothing', async () => {
    const file = writeFile('some-bad.csv', [3, 7000])
    const first = await cli(['import', '--file', file])
    expect(first.stderr).toContain('records read')
    expect(first.stdout).toBe(`line 5: n: must be an integer\nline 7003: n: must be an integer\n${LINES} lines: ${LINES - 2} created, 0 updated, 0 unchanged, 2 invalid\n`)
    expect(first.code).toBe(1)
    expect(recordCount('viacli')).toBe(LINES - 2)
    const again = await cli(['import', '--file', writeFile('good.csv', [])])
    expect(again.stdout).toBe(`${LINES} lines: 2 created, 0 updated, ${LINES - 2} unchanged, 0 invalid\n`)
    expect(again.code).toBe(0)
  }, 120_000)

  test('--all-or-nothing writes nothing when a line is bad; --dry-run writes nothing', async () => {
    const refused = await cli(['import', '--file', writeFile('one-bad.csv', [11_999]), '--all-or-nothing', '--json'])
    expect(refused.code).toBe(1)
    expect(JSON.parse(refused.stdout)).toMatchObject({ refused: true, written: false, invalid: 1, errors: [{ line: 12_002, field: 'n' }] })
    const dry = await cli(['import', '--file', writeFile('same.csv', []), '--dry-run'])
    expect(dry.code).toBe(0)
    expect(dry.stdout).toContain(`${LINES} lines: 0 would be created, 0 would be updated, ${LINES} unchanged, 0 invalid`)
  }, 120_000)

  test("a refused token: the server's message, exit 1; export writes the file", async () => {
    const refused = await cli(['import', '--file', writeFile('x.csv', [])], tokens.reader)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('403')
    const out = join(dir.path, 'out.csv')
    const exported = await cli(['export', '--file', out, '--query', 'n.lt=10&sort=n'], tokens.reader)
    expect(exported.code, exported.stderr).toBe(0)
    const text = readFileSync(out, 'utf8')
    expect(text.split('\r\n').slice(0, 3).map((l) => l.split(',').slice(0, 3).join(','))).toEqual(['id,n,note', 'c0,0,note 0', 'c1,1,note 1'])
    expect(text.split('\r\n').filter(Boolean)).toHaveLength(11)
  }, 60_000)
})

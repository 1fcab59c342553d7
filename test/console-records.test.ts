/**
 * The console's typed records pages over the real app and a real store (no browser here:
 * test/console-records-browser.test.ts drives Chromium): a typed collection's list in columns with each type's
 * filter input and operators, filtered, sorted and paged by the records API's own list (plain GET links); a bad
 * filter said on the page; the record form with each type's input; the relation suggestions; the schema editor's
 * rows; and an untyped collection as it was (JSON preview, JSON textarea).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createSession } from '../src/modules/auth/sessions.ts'
import type { SchemaField } from '../src/modules/records/schema.ts'
import { queryAll, request, runNow, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, userId } from './support/acme.ts'

const FIELDS: SchemaField[] = [
  { name: 'title', type: 'text', required: true, label: 'Title', description: 'What the item is called' },
  { name: 'price', type: 'number' },
  { name: 'qty', type: 'integer', indexed: true },
  { name: 'active', type: 'boolean' },
  { name: 'since', type: 'date' },
  { name: 'seen', type: 'datetime' },
  { name: 'contact', type: 'email' },
  { name: 'site', type: 'url' },
  { name: 'size', type: 'select', options: ['S', 'M', 'L'] },
  { name: 'tags', type: 'multiselect', options: ['new', 'sale'] },
  { name: 'extra', type: 'json' },
  { name: 'customer', type: 'relation', collection: 'customers' },
]
/** More items than a page holds (50), `qty` 1…55. */
const ITEMS = 55

let env: TestEnv
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}
const LIST = '/p/Acme/e/production/t/Support/c/items'

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  const acme = acmeProject(document)
  // Billing only reads items: dave (a plain member of Billing) sees no form; bob (an editor in Support) writes.
  acme.collections!.push({ name: 'items', permissions: { Support: { read: true, edit: true }, Billing: { read: true, edit: false } }, schema: { fields: FIELDS } })
  for (let i = 1; i <= ITEMS; i++) {
    acme.records!.push({
      environment: 'production',
      collection: 'items',
      id: `item_${String(i).padStart(3, '0')}`,
      data: { title: `Item ${i}`, qty: i, price: i * 1.5, active: i % 2 === 0, size: ['S', 'M', 'L'][i % 3]!, tags: i % 5 === 0 ? ['sale'] : [], customer: 'cus_001', seen: '2026-11-02T08:41:00Z', since: '2026-01-15' },
    })
  }
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  for (const name of ['alice', 'bob', 'dave']) cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
}, 120_000)
afterAll(() => env.cleanup())

async function get(path: string, who = 'alice') {
  const response = await app.handle(request(path, { headers: { cookie: cookies[who]! } }))
  return { status: response.status, text: await response.text(), type: response.headers.get('content-type') }
}

/** The record ids a list page shows, in order. */
const idsOn = (page: string) => [...page.matchAll(/class="mono record-link" href="[^"]*">([^<]+)</g)].map((m) => m[1])

describe('a typed collection page', () => {
  test('columns from the schema, each sortable field a link, and the filter input and operators of each type', async () => {
    const page = await get(LIST)
    expect(page.status).toBe(200)
    expect(page.text).toContain('<th scope="col">Record id</th>')
    expect(page.text).toContain(`<th scope="col"><a class="sort" href="${LIST}?sort=qty">qty</a></th>`)
    expect(page.text).toContain('<a class="sort" href="/p/Acme/e/production/t/Support/c/items?sort=title">Title</a>')
    // A list or JSON field is neither sorted nor filtered.
    expect(page.text).toContain('<th scope="col">tags</th>')
    expect(page.text).toContain('<th scope="col">extra</th>')
    expect(page.text).not.toContain('name="f.tags"')
    expect(page.text).not.toContain('name="f.extra"')
    const input = (name: string) => page.text.match(new RegExp(`<(input|select)[^>]*name="f\\.${name}"[^>]*>`))?.[0] ?? ''
    expect(input('qty')).toContain('type="number" step="1"')
    expect(input('price')).toContain('type="number" step="any"')
    expect(input('since')).toContain('type="date"')
    expect(input('seen')).toContain('type="datetime-local"')
    expect(input('size')).toStartWith('<select')
    expect(page.text).toContain('<option>S</option><option>M</option><option>L</option>')
    expect(input('active')).toStartWith('<select')
    const operators = (name: string) => [...(page.text.match(new RegExp(`<select name="o\\.${name}"[^>]*>(.*?)</select>`))?.[1] ?? '').matchAll(/value="(\w+)"/g)].map((m) => m[1])
    expect(operators('qty')).toEqual(['eq', 'ne', 'lt', 'lte', 'gt', 'gte'])
    expect(operators('title')).toEqual(['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains'])
    expect(operators('size')).toEqual(['eq', 'ne'])
    expect(operators('active')).toEqual(['eq', 'ne'])
    // Cells: a relation links its record, a boolean reads yes or no, a list is joined.
    expect(page.text).toContain('<td><a class="mono" href="/p/Acme/e/production/t/Support/c/customers/r/cus_001">cus_001</a></td>')
    expect(page.text).toMatch(/<td>(yes|no)<\/td>/)
    // The default order: newest first, 50 shown, Next carries the cursor.
    expect(idsOn(page.text)).toHaveLength(50)
    expect(page.text).toMatch(/<a href="\/p\/Acme\/e\/production\/t\/Support\/c\/items\?cursor=[\w-]+">Next →<\/a>/)
  })

  test('a filter, a sort and the next page: the API list, carried in plain links', async () => {
    const page = await get(`${LIST}?o.qty=gt&f.qty=40&sort=-qty`)
    expect(idsOn(page.text)).toEqual(Array.from({ length: 15 }, (_, i) => `item_0${55 - i}`))
    expect(page.text).toContain('<th scope="col" aria-sort="descending"><a class="sort" href="/p/Acme/e/production/t/Support/c/items?f.qty=40&amp;o.qty=gt&amp;sort=qty">qty ▼</a></th>')
    expect(page.text).toContain('<option value="gt" selected>&gt;</option>')
    // Export CSV carries the page's filter and sort: the records shown, in that order, every page of them.
    expect(page.text).toContain('href="/v1/project/Acme/environment/production/collection/items/records.csv?sort=-qty&amp;qty.gt=40"')
    const sized = await get(`${LIST}?f.size=M&sort=qty`)
    expect(idsOn(sized.text)).toEqual(Array.from({ length: 19 }, (_, i) => `item_${String(3 * i + 1).padStart(3, '0')}`))
    // Paging: the second page follows the first, in the same sort.
    const first = await get(`${LIST}?sort=qty`)
    const next = first.text.match(/href="([^"]+)">Next →/)![1]!.replaceAll('&amp;', '&')
    expect(next).toContain('sort=qty')
    const second = await get(next)
    expect([...idsOn(first.text), ...idsOn(second.text)]).toEqual(Array.from({ length: ITEMS }, (_, i) => `item_${String(i + 1).padStart(3, '0')}`))
    expect(second.text).not.toContain('Next →')
    // A date-time filter from a datetime-local input is read as UTC.
    expect(idsOn((await get(`${LIST}?o.seen=gte&f.seen=2026-11-02T08:41`)).text).length).toBe(50)
    expect(idsOn((await get(`${LIST}?o.seen=gt&f.seen=2026-11-02T08:41:00`)).text)).toEqual([])
  })

  test('a filtered page is audited as any list: one index entry naming the records it showed', async () => {
    const last = () => queryAll<{ id: number; action: string; label: string }>(env.store, "SELECT id, action, label FROM activity_logs WHERE type = 'read' ORDER BY id DESC LIMIT 1")[0]
    const before = last()?.id ?? 0
    await get(`${LIST}?o.qty=gte&f.qty=54`)
    const entry = last()!
    expect(entry.id).toBeGreaterThan(before)
    expect([entry.action, entry.label]).toEqual(['index', 'listed 2 in the console'])
  })

  test('a bad filter is said on the page (the API\'s message), not a 500', async () => {
    const page = await get(`${LIST}?f.qty=1.5`)
    expect(page.status).toBe(200)
    expect(page.text).toContain('<p class="error" role="alert">')
    expect(page.text).toContain('qty.eq')
    expect(idsOn(page.text)).toEqual([])
    expect((await get(`${LIST}?o.qty=contains&f.qty=1`)).text).toContain('takes eq, ne, lt, lte, gt, gte, in')
  })

  test('admins get the new-record form with each type\'s input, and the restore form; a team that may edit the new-record form only; readers neither', async () => {
    const page = await get(LIST)
    const form = page.text.slice(page.text.indexOf('<form id="new-record"'), page.text.indexOf('</form>', page.text.indexOf('<form id="new-record"')))
    expect(form).toContain('data-method="PUT" action="/v1/project/Acme/environment/production/collection/items/records/{recordId}"')
    expect(form).toContain('novalidate')
    expect(form).toContain('<input data-path="recordId" required')
    expect(form).toContain('<label for="field-0">Title <span class="muted">(required)</span></label><input data-optional id="field-0" name="title" data-in="data" required aria-describedby="field-hint-0"')
    expect(form).toContain('<span class="hint" id="field-hint-0">What the item is called</span>')
    expect(form).toMatch(/<input type="number" step="any" data-type="number" id="field-1" name="price"/)
    expect(form).toMatch(/<input type="number" step="1" data-type="number" id="field-2" name="qty"/)
    expect(form).toMatch(/<input type="checkbox" id="field-3" name="active" data-in="data"/)
    expect(form).toMatch(/<input type="date" data-optional id="field-4" name="since"/)
    expect(form).toMatch(/<input type="datetime-local" step="1" data-type="utc-datetime" id="field-5" name="seen"/)
    expect(form).toMatch(/<input type="email" [^>]*name="contact"/)
    expect(form).toMatch(/<input type="url" [^>]*name="site"/)
    expect(form).toMatch(/<select data-optional id="field-8" name="size" data-in="data"><option value="">—<\/option><option>S<\/option>/)
    expect(form).toContain('<fieldset class="choices"><legend>tags</legend><label class="check"><input type="checkbox" name="tags" data-in="data" data-list value="new"> new</label>')
    expect(form).toMatch(/<textarea rows="4" data-type="json" id="field-10" name="extra"/)
    expect(form).toContain(`<input list="field-11-ids" autocomplete="off" maxlength="1024" data-optional data-ids="/p/Acme/e/production/t/Support/c/customers/ids" id="field-11" name="customer"`)
    expect(page.text).toContain('<form id="restore-record" data-api action="/v1/project/Acme/environment/production/collection/items/records/{recordId}/restore"')
    const writer = await get(LIST, 'bob')
    expect(writer.text).toContain('<form id="new-record"')
    expect(writer.text).not.toContain('restore-record')
    const member = await get('/p/Acme/e/production/t/Billing/c/items', 'dave')
    expect(member.status).toBe(200)
    expect(idsOn(member.text)).toHaveLength(50)
    expect(member.text).not.toContain('new-record')
    expect(member.text).not.toContain('restore-record')
  })

  test('an untyped collection keeps its view: JSON previews, the id search, the JSON textarea', async () => {
    const page = await get('/p/Acme/e/production/t/Support/c/orders')
    expect(page.text).toContain('<th>Record id</th><th>Data</th>')
    expect(page.text).toContain('id="record-search"')
    expect(page.text).toContain('data-type="json-object"')
    expect(page.text).not.toContain('id="record-filters"')
  })
})

describe('a typed record page', () => {
  test('its history is what changed it: no list views, no views of it', async () => {
    await get(LIST)
    await get(`${LIST}/r/item_007`)
    const page = await get(`${LIST}/r/item_007`)
    const history = page.text.slice(page.text.indexOf('<h2 id="history">'))
    expect(history).toContain('created by trellis apply')
    expect(history).not.toContain('in the console')
  })

  test('admins and writers edit it in the form, filled with its values; it is deleted from there; readers read its fields', async () => {
    const page = await get(`${LIST}/r/item_005`)
    expect(page.status).toBe(200)
    const form = page.text.slice(page.text.indexOf('<form id="edit-record"'), page.text.indexOf('</form>', page.text.indexOf('<form id="edit-record"')))
    expect(form).toContain('action="/v1/project/Acme/environment/production/collection/items/records/item_005"')
    expect(form).not.toContain('data-path="recordId"')
    expect(form).toContain('name="title" data-in="data" required aria-describedby="field-hint-0" value="Item 5"')
    expect(form).toContain('name="qty" data-in="data" value="5"')
    expect(form).toContain('name="seen" data-in="data" value="2026-11-02T08:41:00"')
    expect(form).toContain('<option selected>L</option>')
    expect(form).toContain('value="sale" checked')
    expect(form).toContain('name="customer" data-in="data" value="cus_001"')
    expect(page.text).toContain('<form id="delete-record" class="inline" data-api data-method="DELETE" action="/v1/project/Acme/environment/production/collection/items/records/item_005" data-next="/p/Acme/e/production/t/Support/c/items" data-confirm="Delete record item_005?')
    const writer = await get(`${LIST}/r/item_005`, 'bob')
    expect(writer.text).toContain('<form id="edit-record"')
    expect(writer.text).toContain('<form id="delete-record"')
    const member = await get('/p/Acme/e/production/t/Billing/c/items/r/item_005', 'dave')
    expect(member.text).toContain('<dl class="record-fields" id="record-data"><dt>Title</dt><dd>Item 5</dd><dt>price</dt><dd>7.5</dd><dt>qty</dt><dd>5</dd><dt>active</dt><dd>no</dd>')
    expect(member.text).toContain('<dt>tags</dt><dd>sale</dd>')
    expect(member.text).toContain('<dt>customer</dt><dd><a class="mono" href="/p/Acme/e/production/t/Billing/c/customers/r/cus_001">cus_001</a></dd>')
    expect(member.text).not.toContain('edit-record')
    expect(member.text).not.toContain('delete-record')
  })

  test('a relation input\'s suggestions: ids of the related collection containing what was typed, for a team that reads it', async () => {
    const ids = await get('/p/Acme/e/production/t/Support/c/customers/ids?q=002')
    expect(ids.type).toStartWith('application/json')
    expect(JSON.parse(ids.text)).toEqual({ ids: ['cus_002'] })
    expect(JSON.parse((await get('/p/Acme/e/production/t/Support/c/customers/ids')).text)).toEqual({ ids: ['cus_001', 'cus_002'] })
    expect((await get('/p/Acme/e/production/t/Support/c/nothing/ids?q=1')).status).toBe(404)
  })
})

describe('the schema editor', () => {
  test('a row per field with its settings, a template for a new one, linked from the settings page; project managers only', async () => {
    const settings = await get('/p/Acme/settings')
    expect(settings.text).toContain('<a href="/p/Acme/settings/collections/items">Schema of items</a>')
    const page = await get('/p/Acme/settings/collections/items')
    expect(page.status).toBe(200)
    expect(page.text).toContain('<form id="schema-editor" data-api data-method="PUT" action="/v1/project/Acme/collections/items/schema" data-show="#schema-report" data-show-field="nonConforming.count"')
    expect(page.text.match(/<fieldset class="schema-row" data-row>/g)).toHaveLength(FIELDS.length + 1)
    expect(page.text).toContain('<legend>Field size</legend>')
    expect(page.text).toContain('name="options" data-type="list" value="S, M, L"')
    expect(page.text).toContain('<option selected>customers</option>')
    expect(page.text).toContain('<input type="checkbox" name="indexed" checked> Indexed')
    expect(page.text).toContain('<template id="schema-row-template"><fieldset class="schema-row" data-row><legend>New field</legend>')
    expect((await get('/p/Acme/settings/collections/orders')).text).toContain('<div id="schema-fields" data-rows="fields" data-template="schema-row-template" data-refresh></div>')
    expect((await get('/p/Acme/settings/collections/items', 'dave')).status).toBe(403)
    expect((await get('/p/Acme/settings/collections/nothing')).status).toBe(404)
  })
})

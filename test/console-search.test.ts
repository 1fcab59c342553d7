/**
 * Console links and search over the real app and a real store (both: POSTGRES_PASS): a collection's
 * records by a part of the id and by a field's value (one query for both stores: src/db/records.ts), paged; the
 * header's `/search` — projects, records, workflows, people — only as far as the signed-in person may see them; a
 * run's page linked to its record, workflow, project and environment; record ids in lists as links, encoded. Hostile
 * input (`%`, `_`, quotes, backslashes, U+0000, too long) is a 4xx page naming the field or matches literally,
 * never a 500.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createSession } from '../src/modules/auth/sessions.ts'
import { bearer, request, runNow, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, startRefundWithSession, tokenFor, userId } from './support/acme.ts'

let env: TestEnv
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}

const ORDERS = '/p/Acme/e/production/t/Support/c/orders'
/** Record ids a person may type: every one is found by itself and matched literally. */
const ODD = ['50%_off', 'a_b', 'axb', `it's "quoted"`, 'back\\slash', 'a/b %c d']
const BULK = 60

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  const acme = acmeProject(document)
  document.users.push({ email: 'erin@example.com', username: 'erin' })
  for (const id of ODD) acme.records!.push({ environment: 'production', collection: 'orders', id, data: { status: 'odd', label: id } })
  acme.records!.push({ environment: 'production', collection: 'orders', id: 'flagged', data: { status: 'odd', flag: true, 'we"ird': 'x', nested: { a: 1 } } })
  for (let i = 0; i < BULK; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `bulk-${String(i).padStart(2, '0')}`, data: { kind: 'bulk' } })
  // Erin is an admin of Globex only: nothing of Acme may reach her, nor anything of Globex reach Acme's people.
  document.projects.push({
    name: 'Globex',
    environments: ['production'],
    teams: [{ name: 'Ops', members: ['erin@example.com'] }],
    collections: [{ name: 'orders' }],
    members: [{ user: 'erin@example.com', role: 'admin' }],
    records: [{ environment: 'production', collection: 'orders', id: 'ord_globex_1', data: { status: 'paid' } }],
  } as never)
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  for (const name of ['alice', 'bob', 'dave', 'erin']) {
    cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
  }
}, 60_000)
afterAll(() => env.cleanup())

async function get(path: string, who: string) {
  const response = await app.handle(request(path, { headers: { cookie: cookies[who]! } }))
  return { status: response.status, text: await response.text() }
}

/** 'Refund order' started on `recordId` from `who`'s console session; the run's id. */
const startRefund = (who: string, recordId: string) => startRefundWithSession(app, cookies[who]!, recordId)

/** The record ids a page lists as links (decoded from their hrefs' last segment). */
const unescape = (text: string) => text.replaceAll('&#x27;', "'").replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&')
const recordIds = (html: string) => [...html.matchAll(/<a class="mono record-link" href="[^"]*\/r\/([^"]*)">/g)].map((m) => decodeURIComponent(unescape(m[1]!)))
const search = (query: Record<string, string>, who = 'bob') => get(`${ORDERS}?${new URLSearchParams(query)}`, who)

describe('a collection page searches its records', () => {
  test('by a part of the id, ASCII letters in any case', async () => {
    expect(recordIds((await search({ q: '100' })).text)).toEqual(['ord_1001', 'ord_1002', 'ord_1003'])
    expect(recordIds((await search({ q: 'ORD_100' })).text)).toEqual(['ord_1001', 'ord_1002', 'ord_1003'])
    expect(recordIds((await search({ q: 'nothing-like-this' })).text)).toEqual([])
    expect((await search({ q: 'nothing-like-this' })).text).toContain('No records match this search.')
  })

  test('LIKE wildcards, quotes and backslashes in the text match themselves', async () => {
    expect(recordIds((await search({ q: '%' })).text)).toEqual(['50%_off', 'a/b %c d'])
    expect(recordIds((await search({ q: '%_' })).text)).toEqual(['50%_off'])
    expect(recordIds((await search({ q: 'a_b' })).text)).toEqual(['a_b'])
    expect(recordIds((await search({ q: `'s "q` })).text)).toEqual([`it's "quoted"`])
    expect(recordIds((await search({ q: 'k\\s' })).text)).toEqual(['back\\slash'])
    expect(recordIds((await search({ q: 'b %c' })).text)).toEqual(['a/b %c d'])
  })

  test('by a field equal to a value: text, numbers, booleans, odd field names', async () => {
    expect(recordIds((await search({ field: 'status', value: 'paid' })).text)).toEqual(['ord_1001', 'ord_1003'])
    expect(recordIds((await search({ field: 'amount', value: '129.9' })).text)).toEqual(['ord_1001'])
    expect(recordIds((await search({ field: 'items', value: '12' })).text)).toEqual(['ord_1003'])
    expect(recordIds((await search({ field: 'flag', value: 'true' })).text)).toEqual(['flagged'])
    expect(recordIds((await search({ field: 'we"ird', value: 'x' })).text)).toEqual(['flagged'])
    expect(recordIds((await search({ field: 'label', value: '50%_off' })).text)).toEqual(['50%_off'])
    expect(recordIds((await search({ field: 'status', value: 'PAID' })).text)).toEqual([]) // values are exact
    expect(recordIds((await search({ field: 'missing', value: 'x' })).text)).toEqual([])
    // Both at once: the id part and the field.
    expect(recordIds((await search({ q: '1003', field: 'status', value: 'paid' })).text)).toEqual(['ord_1003'])
  })

  test('pages of 50 by record id, the search kept in the Next link; each page logs the ids it showed', async () => {
    const first = await search({ field: 'kind', value: 'bulk' })
    const ids = recordIds(first.text)
    expect(ids).toHaveLength(50)
    const next = /<a href="([^"]+)">Next →<\/a>/.exec(first.text)![1]!.replaceAll('&amp;', '&')
    expect(new URL(next, 'http://x').searchParams.get('field')).toBe('kind')
    const second = recordIds((await get(next, 'bob')).text)
    expect(second).toHaveLength(BULK - 50)
    expect(new Set([...ids, ...second]).size).toBe(BULK)
  })

  test('bad input is a 400 page naming the parameter, never a 500', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ field: 'status' }, 'value'],
      [{ value: 'paid' }, 'field'],
      [{ q: 'x'.repeat(201) }, 'q'],
      [{ field: 'f'.repeat(201), value: 'x' }, 'field'],
      [{ field: 'status', value: 'v'.repeat(1025) }, 'value'],
      [{ q: 'a\u0000b' }, 'q'],
      [{ field: 'status', value: 'a\u0000' }, 'value'],
    ]
    for (const [query, field] of cases) {
      const page = await search(query)
      expect({ query, status: page.status }).toEqual({ query, status: 400 })
      expect(page.text).toContain(field)
    }
  })

  test('who may not read the collection finds nothing in it (403, as the page)', async () => {
    expect((await get(`${ORDERS.replace('Acme', 'Globex')}?q=ord`, 'bob')).status).toBe(404)
    expect((await get(`${ORDERS}?q=ord`, 'erin')).status).toBe(404)
  })
})

describe('the header search (/search)', () => {
  const found = (html: string, kind: string) => {
    const list = new RegExp(`<ul class="search-results" id="found-${kind}">(.*?)</ul>`, 's').exec(html)?.[1] ?? ''
    return [...list.matchAll(/<li><a href="([^"]+)">([^<]*)<\/a>/g)].map((m) => ({ href: unescape(m[1]!), label: unescape(m[2]!) }))
  }

  test('every header has the search box', async () => {
    expect((await get('/', 'bob')).text).toContain('<form class="inline search" method="get" action="/search" role="search"><input name="q"')
  })

  test('projects, records, workflows; people for a project admin', async () => {
    const page = (await get('/search?q=acme', 'alice')).text
    expect(found(page, 'projects')).toEqual([{ href: '/p/Acme', label: 'Acme' }])
    const records = found((await get('/search?q=ord_100', 'alice')).text, 'records')
    expect(records.map((r) => r.label)).toEqual(['ord_1001', 'ord_1002', 'ord_1003'])
    expect(records[0]!.href).toBe('/p/Acme/e/production/t/Support/c/orders/r/ord_1001') // as her own team
    expect((await get(records[0]!.href, 'alice')).status).toBe(200)
    expect(found((await get('/search?q=refund', 'alice')).text, 'workflows')).toEqual([{ href: '/p/Acme/e/production/t/Support/w/Refund%20order', label: 'Refund order' }])
    expect(found((await get('/search?q=bob@', 'alice')).text, 'people')).toEqual([{ href: '/p/Acme/settings', label: 'bob@example.com' }])
  })

  test('record ids with wildcards, quotes, slashes are found literally and linked encoded', async () => {
    const odd = found((await get(`/search?${new URLSearchParams({ q: '%c' })}`, 'alice')).text, 'records')
    expect(odd.map((r) => r.label)).toEqual(['a/b %c d'])
    expect(odd[0]!.href).toEndWith('/r/a%2Fb%20%25c%20d')
    expect((await get(odd[0]!.href, 'alice')).text).toContain('<h1>orders a/b %c d</h1>')
    expect(found((await get(`/search?${new URLSearchParams({ q: `"quoted` })}`, 'alice')).text, 'records').map((r) => r.label)).toEqual([`it's "quoted"`])
    expect(found((await get('/search?q=__', 'alice')).text, 'records')).toEqual([])
  })

  test('a member of another project sees none of this one: no records, no people, no workflows, no project', async () => {
    const erin = (q: string) => get(`/search?q=${encodeURIComponent(q)}`, 'erin')
    expect(found((await erin('ord_')).text, 'records').map((r) => r.label)).toEqual(['ord_globex_1'])
    expect(found((await erin('acme')).text, 'projects')).toEqual([])
    expect(found((await erin('refund')).text, 'workflows')).toEqual([])
    expect(found((await erin('example.com')).text, 'people').map((p) => p.label)).toEqual(['erin@example.com'])
    // And Acme's admin never sees Globex's people or records.
    expect(found((await get('/search?q=erin', 'alice')).text, 'people')).toEqual([])
    expect(found((await get('/search?q=globex', 'alice')).text, 'records')).toEqual([])
  })

  test('a member without the admin role sees no people (no page lists them for her); records only of readable collections', async () => {
    expect(found((await get('/search?q=example.com', 'dave')).text, 'people')).toEqual([])
    expect(found((await get('/search?q=ord_1001', 'dave')).text, 'records').map((r) => r.label)).toEqual(['ord_1001'])
  })

  test('the record ids it shows are logged, as a collection page logs them (index, as the team it links them as)', async () => {
    const auditor = (await tokenFor(env.store, env.clock, 'carol', ['activity_logs:read'])).value
    const entries = async () => {
      const response = await app.handle(request('/v1/project/Acme/environment/production/activity-logs?recordId=ord_1002&limit=100', { headers: bearer(auditor) }))
      return ((await response.json()) as { data: { action: string; user: { email: string }; team: { name: string }; recordIds: string[] }[] }).data
    }
    const before = (await entries()).length
    expect(found((await get('/search?q=ord_1002', 'dave')).text, 'records').map((r) => r.label)).toEqual(['ord_1002'])
    const after = await entries()
    expect(after.length).toBe(before + 1)
    expect(after[0]).toMatchObject({ action: 'index', user: { email: 'dave@example.com' }, team: { name: 'Billing' }, recordIds: ['ord_1002'] })
    // Nothing found, nothing logged.
    await get('/search?q=no-such-record', 'dave')
    expect((await entries()).length).toBe(before + 1)
  })

  test('results are capped per kind', async () => {
    expect(found((await get('/search?q=bulk-', 'alice')).text, 'records')).toHaveLength(10)
  })

  test('too short, too long, unstorable: 400 naming q; no q: the form alone', async () => {
    for (const q of ['a', ' b ', 'x'.repeat(201), 'a\u0000b']) {
      const page = await get(`/search?q=${encodeURIComponent(q)}`, 'alice')
      expect({ q, status: page.status }).toEqual({ q, status: 400 })
      expect(page.text).toContain('q')
    }
    const empty = await get('/search', 'alice')
    expect(empty.status).toBe(200)
    expect(empty.text).not.toContain('found-records')
    expect((await app.handle(request('/search?q=acme'))).status).toBe(303) // no session: sign in first
  })
})

describe('everything connected', () => {
  test('a run links to its record (encoded), collection, workflow, project and environment; crumbs name the path; the record links back', async () => {
    const runId = await startRefund('alice', 'a/b %c d')
    const page = (await get(`/runs/${runId}`, 'alice')).text
    const record = `${ORDERS}/r/a%2Fb%20%25c%20d`
    expect(page).toContain(`<a class="mono record-link" href="${record}">a/b %c d</a>`)
    expect(page).toContain(`<a id="run-workflow" href="/p/Acme/e/production/t/Support/w/Refund%20order">Refund order</a>`)
    expect(page).toContain('<a id="run-project" href="/p/Acme">Acme</a>')
    expect(page).toContain('<a id="run-environment" href="/p/Acme/e/production/t/Support">production · Support</a>')
    expect(page).toContain(`<nav class="crumbs"><a href="/">Projects</a> / <a href="/p/Acme">Acme</a> / <a href="/p/Acme/e/production/t/Support">production · Support</a> / <a href="${ORDERS}">orders</a> / <a href="${record}">a/b %c d</a> / run ${runId.slice(0, 8)}</nav>`)
    // An active run's page follows it live; its steps all listed, pending.
    expect(page).toContain(`<div id="run" data-live-run="/v1/workflow-runs/${runId}">`)
    expect(page).toContain('<script src="/console/live.js" defer></script>')
    expect(page.match(/<tr data-step="\d">/g)).toHaveLength(5)

    const back = (await get(record, 'alice')).text
    expect(back).toContain(`<tr data-run-id="${runId}"><td><a class="mono run-link" href="/runs/${runId}"`)
    expect(back).toContain(`data-live-runs="/v1/project/Acme/environment/production/workflow-runs/events?recordId=a%2Fb%20%25c%20d"`)
    expect(back).toContain('<a href="#runs">Runs</a> · <a href="#tasks">Tasks</a> · <a href="#notes">Notes</a> · <a href="#history">History</a>')
    // The environment's runs list links the run and its record.
    const runs = (await get('/p/Acme/e/production/runs', 'alice')).text
    expect(runs).toContain(`<a class="mono record-link" href="${record}">a/b %c d</a>`)
    expect(runs).toContain('data-live-runs="/v1/project/Acme/environment/production/workflow-runs/events"')
    // The activity log links the record ids it names.
    expect((await get('/p/Acme/e/production/activity?recordId=a%2Fb%20%25c%20d', 'alice')).text).toContain(`<a class="mono record-link" href="${record}">a/b %c d</a>`)
  })

  test('a member who is not an admin: the workflow links to the team page, the record and project still linked', async () => {
    const runId = await startRefund('bob', 'ord_1002')
    const page = (await get(`/runs/${runId}`, 'bob')).text
    expect(page).toContain('<a id="run-workflow" href="/p/Acme/e/production/t/Support#workflows">Refund order</a>')
    expect(page).toContain(`<a class="mono record-link" href="${ORDERS}/r/ord_1002">ord_1002</a>`)
    expect((await get('/p/Acme/e/production/t/Support', 'bob')).text).toContain('<h2 id="workflows">Workflows</h2>')
  })

  test('the live script is served from the binary, typed and never sniffed', async () => {
    const response = await app.handle(request('/console/live.js'))
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
    expect(await response.text()).toContain('EventSource')
  })
})

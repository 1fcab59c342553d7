/**
 * The web console over the real app and a real SQLite file (no browser here: test/console-browser.test.ts drives
 * Chromium): sign-in redirects, the access matrix (same rules as the API), the `type: "read"` activity entries
 * every view of record data writes — validated against the compatibility document's `listActivityLogs` — escaping,
 * security headers, and bad input (unknown names, odd record ids, bad filters) as 4xx pages, never a 500.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createSession } from '../src/modules/auth/sessions.ts'
import { read } from '../src/db/read.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { bearer, execute, processEnv, queryAll, queryOne, repoRoot, request, runCli, runNow, SQLITE_ONLY, sqliteOnlyTest, startServe, tempDir, testApp, type TestEnv, testEnv } from './helpers.ts'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { renderAdminLogs } from '../src/modules/admin-logs/service.ts'
import { instanceLogIds } from '../src/modules/admin-logs/instance.ts'
import { GET_STARTED_COMMANDS } from '../src/modules/console/checklist.ts'
import { adminLogValue } from '../src/modules/console/log-values.ts'
import { SetupGate } from '../src/modules/setup/service.ts'
import { createUser } from '../src/modules/users/service.ts'
import { acmeDocument, acmeProject, applyAcme, startRefundWithSession, tokenFor, userId } from './support/acme.ts'
import { assertValidWithExtensions } from './support/compat-schema.ts'
import { STEP_TEMPLATES } from '../src/modules/console/workflow-authoring.ts'
import { STEP_SCHEMAS, STEP_TYPES, workflowDefinitionProblems } from '../src/modules/workflows/definition.ts'


interface ActivityEntry {
  id: string
  type: string
  action: string
  label?: string
  recordIds: string[]
  user: { email: string }
  team: { name: string }
  collection?: { name: string }
}

let env: TestEnv
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}
let auditor = ''

const ODD_IDS = ['ünï|42', 'a/b c?d#e', "x' OR 1=1 --", '<script>alert(1)</script>']

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  const acme = acmeProject(document)
  document.users.push({ email: 'erin@example.com', username: 'erin' })
  acme.members!.push({ user: 'erin@example.com', role: 'editor' })
  acme.teams!.push({ name: 'Outsiders', members: ['erin@example.com'] })
  acme.collections!.push({ name: 'secrets', permissions: { Support: { read: false }, Billing: { read: false }, Outsiders: { read: true } } })
  for (const id of ODD_IDS) acme.records!.push({ environment: 'production', collection: 'customers', id, data: { name: id, html: '<img src=x onerror=alert(1)>' } })
  document.projects.push({ name: 'Globex', environments: ['production'], teams: [{ name: 'Ops' }], members: [{ user: 'dave@example.com', role: 'admin' }] })
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  for (const name of ['alice', 'bob', 'carol', 'dave', 'erin']) {
    cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
  }
  auditor = (await tokenFor(env.store, env.clock, 'carol', ['activity_logs:read'])).value
})
afterAll(() => env.cleanup())

async function get(path: string, who?: string) {
  const response = await app.handle(request(path, { headers: who ? { cookie: cookies[who]! } : {} }))
  return { status: response.status, headers: response.headers, text: await response.text() }
}

async function activity(query: Record<string, string> = {}): Promise<ActivityEntry[]> {
  const response = await app.handle(
    request(`/v1/project/Acme/environment/production/activity-logs?${new URLSearchParams({ limit: '100', extensions: 'true', ...query })}`, {
      headers: bearer(auditor),
    }),
  )
  expect(response.status).toBe(200)
  const body = (await response.json()) as { data: ActivityEntry[] }
  // The unmodified compatibility document; with extensions=true, DESIGN §7's extension actions (archiveNote…) only.
  assertValidWithExtensions('listActivityLogs', body, 'activity page')
  return body.data
}

const maxActivityId = () => (queryOne(env.store, 'SELECT coalesce(max(id), 0) AS id FROM activity_logs') as { id: number }).id
const entriesAfter = async (id: number) => (await activity()).filter((e) => Number(e.id) > id).reverse()
/** 'Refund order' started on `recordId` from `who`'s console session; the run's id. */
const startRefund = (who: string, recordId: string) => startRefundWithSession(app, cookies[who]!, recordId)

const record = (team: string, collection: string, id: string) => `/p/Acme/e/production/t/${team}/c/${collection}/r/${encodeURIComponent(id)}`

describe('signing in', () => {
  test('every page without a session redirects to /login?next=<the page>', async () => {
    for (const path of ['/', '/account', '/p/Acme', record('Support', 'orders', 'ord_1001'), '/p/Acme/admin-log', '/runs/x']) {
      const page = await get(path)
      expect({ path, status: page.status, location: page.headers.get('location') }).toEqual({ path, status: 303, location: `/login?next=${encodeURIComponent(path)}` })
    }
    const bogus = await app.handle(request('/', { headers: { cookie: 'trellis_session=forged' } }))
    expect(bogus.status).toBe(303)
  })

  test('the login page: a form, strict CSP; signed in, it sends you on — only to a path on this site', async () => {
    const page = await get('/login?next=%2Fp%2FAcme')
    expect(page.status).toBe(200)
    expect(page.text).toContain('action="/auth/login" data-next="/p/Acme"')
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    // Parsed as a URL: browsers drop tabs and newlines (`/\t/host` is `//host`); controls and text left
    // to encode would make an invalid Location header (a 500).
    const offSite = ['//evil.example', 'https://evil.example', '/\\evil.example', '/\t/127.0.0.1:19191/x', '/\n/x', '/\r\n/x', '/x\r\nSet-Cookie: a=b', '/\u3002/evil', '/./\t/evil.example', '/\u0000/x', '/\u007f/x']
    for (const [next, to] of [['/p/Acme', '/p/Acme'], ['/p/Acme?tab=runs#top', '/p/Acme?tab=runs#top'], ...offSite.map((n) => [n, '/'])]) {
      expect((await get(`/login?next=${encodeURIComponent(next!)}`, 'alice')).headers.get('location')).toBe(to!)
      expect((await get(`/login?next=${encodeURIComponent(next!)}`)).text).toContain(`data-next="${to}"`)
    }
  })

  test('the console script and stylesheet come from the binary', async () => {
    const js = await get('/console/console.js')
    expect(js.status).toBe(200)
    expect(js.headers.get('content-type')).toStartWith('text/javascript')
    expect((await get('/console/console.css')).headers.get('content-type')).toStartWith('text/css')
  })
})

describe('record reads are audited', () => {
  test('opening a record writes exactly one read entry: the user, the team it was opened as, the collection, the record', async () => {
    const before = maxActivityId()
    const page = await get(record('Support', 'orders', 'ord_1001'), 'bob')
    expect(page.status).toBe(200)
    expect(page.text).toContain('&quot;status&quot;: &quot;paid&quot;')
    const entries = await entriesAfter(before)
    expect(entries.map((e) => [e.type, e.action, e.label, e.user.email, e.team.name, e.collection?.name, e.recordIds])).toEqual([
      ['read', 'read', 'viewed in the console', 'bob@example.com', 'Support', 'orders', ['ord_1001']],
    ])
    // The auditor finds it by record and by type.
    expect((await activity({ recordId: 'ord_1001', type: 'read' })).map((e) => e.id)).toEqual([entries[0]!.id])
  })

  test('a browser prefetch is refused (503, not cached) and logs nothing; the real visit does', async () => {
    const before = maxActivityId()
    for (const headers of [{ 'sec-purpose': 'prefetch' }, { 'sec-purpose': 'prefetch;prerender' }, { purpose: 'prefetch' }, { 'x-moz': 'prefetch' }] as Record<string, string>[]) {
      const response = await app.handle(request(record('Support', 'orders', 'ord_1003'), { headers: { cookie: cookies.bob!, ...headers } }))
      expect(response.status).toBe(503)
      expect(response.headers.get('cache-control')).toBe('no-store')
    }
    expect(maxActivityId()).toBe(before)
    expect((await get(record('Support', 'orders', 'ord_1003'), 'bob')).status).toBe(200)
    expect((await entriesAfter(before)).length).toBe(1)
  })

  test('a collection page writes one index entry naming the records it showed', async () => {
    const before = maxActivityId()
    const page = await get('/p/Acme/e/production/t/Support/c/orders', 'bob')
    expect(page.status).toBe(200)
    const entries = await entriesAfter(before)
    expect(entries.map((e) => [e.type, e.action, e.label, e.user.email, e.recordIds])).toEqual([
      ['read', 'index', 'listed 3 in the console', 'bob@example.com', ['ord_1001', 'ord_1002', 'ord_1003']],
    ])
  })

  test('record ids with unicode, slashes, quotes or markup open, escaped, each logged under its own id', async () => {
    for (const id of ODD_IDS) {
      const before = maxActivityId()
      const page = await get(record('Support', 'customers', id), 'alice')
      expect({ id, status: page.status }).toEqual({ id, status: 200 })
      expect(page.text).not.toContain('<script>alert(1)</script>')
      expect(page.text).not.toContain('<img src=x')
      expect((await entriesAfter(before)).map((e) => e.recordIds)).toEqual([[id]])
    }
    const list = await get('/p/Acme/e/production/t/Support/c/customers', 'alice')
    expect(list.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;')
    expect(list.text).not.toContain('<script>alert')
  })

  test('nothing is logged for what was not shown: unknown record (404), no access (403), unknown names (404)', async () => {
    const before = maxActivityId()
    const cases: [string, string, number][] = [
      [record('Support', 'orders', 'nope'), 'bob', 404],
      [record('Billing', 'orders', 'ord_1001'), 'bob', 403], // bob is not in Billing
      [record('Support', 'secrets', 'x'), 'bob', 403], // Support may not read secrets
      [record('Outsiders', 'orders', 'ord_1001'), 'alice', 200], // admins reach every team
      [record('Support', 'nothing', 'x'), 'alice', 404],
      ['/p/Acme/e/nowhere/t/Support/c/orders', 'alice', 404],
      ['/p/Acme/e/production/t/Nobody', 'alice', 404],
      ['/p/Globex', 'alice', 404], // not a member: nothing revealed
      ['/p/Nope', 'alice', 404],
    ]
    for (const [path, who, status] of cases) {
      const page = await get(path, who)
      expect({ path, who, status: page.status }).toEqual({ path, who, status })
      if (status !== 200) expect(page.headers.get('content-type')).toStartWith('text/html')
    }
    // Only alice's admin read of ord_1001 as Outsiders was logged.
    expect((await entriesAfter(before)).map((e) => [e.action, e.user.email, e.team.name, e.recordIds])).toEqual([['read', 'alice@example.com', 'Outsiders', ['ord_1001']]])
  })
})

describe('pages and who may see them', () => {
  test('admins see the audit pages; other members get 403 pages; every page is HTML with the security headers', async () => {
    const adminPages = ['/p/Acme/admin-log', '/p/Acme/api-access', '/p/Acme/e/production/activity', '/p/Acme/e/production/notes', '/p/Acme/e/production/runs', '/p/Acme/e/production/t/Support/w/Refund%20order']
    for (const path of adminPages) {
      const asAdmin = await get(path, 'alice')
      expect({ path, status: asAdmin.status }).toEqual({ path, status: 200 })
      expect(asAdmin.headers.get('cache-control')).toBe('no-store')
      expect(asAdmin.headers.get('x-content-type-options')).toBe('nosniff')
      expect((await get(path, 'bob')).status).toBe(403)
    }
    for (const path of ['/', '/account', '/p/Acme', '/p/Acme/e/production/t/Support']) expect((await get(path, 'bob')).status).toBe(200)
  })

  test('the project page lists the teams the user can open; the team page the collections it may read', async () => {
    const project = await get('/p/Acme', 'erin')
    expect(project.text).toContain('href="/p/Acme/e/production/t/Outsiders"')
    expect(project.text).not.toContain('href="/p/Acme/e/production/t/Support"')
    expect(project.text).not.toContain('Admin log')
    const team = await get('/p/Acme/e/production/t/Outsiders', 'erin')
    expect(team.text).toContain('>secrets<')
    expect((await get('/p/Acme/e/production/t/Support', 'erin')).status).toBe(403)
  })

  test('bad filters are 400 pages naming the parameter, never a 500; empty filter fields are no filter', async () => {
    for (const [path, parameter] of [
      ['/p/Acme/e/production/activity?action=drop%20table', 'action'],
      ['/p/Acme/e/production/activity?createdAt.lt=yesterday', 'createdAt.lt'],
      ['/p/Acme/admin-log?type=%F0%9F%98%80', 'type'],
      ['/p/Acme/e/production/runs?status=done', 'status'],
      [`/p/Acme/e/production/notes?recordId=${'x'.repeat(5000)}`, 'recordId'],
    ] as const) {
      const page = await get(path, 'alice')
      expect({ path, status: page.status }).toEqual({ path, status: 400 })
      expect(page.text).toContain(parameter)
    }
    expect((await get('/p/Acme/e/production/activity?action=&type=&recordId=', 'alice')).status).toBe(200)
    expect((await get('/p/Acme/e/production/t/Support/c/orders?after=' + 'z'.repeat(5000), 'alice')).status).toBe(200)
  })

  test('the activity page filters by record through the shared parser and pages with createdAt.lt, exactly', async () => {
    for (let i = 0; i < 3; i++) await get(record('Support', 'orders', 'ord_1002'), 'alice')
    const rows = (html: string) => [...html.matchAll(/<tr><td><time datetime="([^"]+)">[\s\S]*?<td class="records">(.*?)<\/td>/g)].map((m) => [m[1], m[2]!.replace(/<[^>]+>/g, '')])
    const filtered = rows((await get('/p/Acme/e/production/activity?recordId=ord_1002', 'alice')).text)
    expect(filtered.length).toBeGreaterThanOrEqual(5)
    expect(filtered.every(([, ids]) => ids!.split(', ').includes('ord_1002'))).toBe(true)

    // 60 more reads in the same few milliseconds: two pages of 50, nothing seen twice or skipped.
    for (let i = 0; i < 60; i++) await get(record('Support', 'orders', 'ord_1001'), 'carol')
    const seen: string[] = []
    let path: string | undefined = '/p/Acme/e/production/activity'
    while (path) {
      const page = await get(path, 'alice')
      expect(page.status).toBe(200)
      seen.push(...rows(page.text).map(([at]) => at!))
      path = /<a href="([^"]+)">Older →<\/a>/.exec(page.text)?.[1]?.replaceAll('&amp;', '&')
    }
    expect(new Set(seen).size).toBe(seen.length)
    expect(seen.length).toBe(Number((queryOne(env.store, "SELECT count(*) AS n FROM activity_logs a JOIN environments e ON e.id = a.environment_id WHERE e.name = 'production' AND e.project_id = (SELECT id FROM projects WHERE name = 'Acme')") as { n: number }).n))
    expect(seen.length).toBeGreaterThan(50) // it took the Older link
  })

  test('a run started elsewhere shows to its user and to admins, 404 to others', async () => {
    const runId = await startRefund('bob', 'ord_1003')
    expect((await get(`/runs/${runId}`, 'bob')).text).toContain('queued')
    expect((await get(`/runs/${runId}`, 'alice')).status).toBe(200)
    expect((await get(`/runs/${runId}`, 'dave')).status).toBe(404)
    expect((await get('/runs/not-a-run', 'alice')).status).toBe(404)
    // The record page lists it (bob: his own runs; an admin: all).
    expect((await get(record('Support', 'orders', 'ord_1003'), 'bob')).text).toContain(`/runs/${runId}`)
  })

  test('a failed run\'s page: a Retry button (API form, same-origin rule), then "Retried by" / "Retry of" links and the carried step marked', async () => {
    const runId = await startRefund('bob', 'retry-from-console')
    // No executor here: the run is made to have failed at its second step, its first one recorded.
    const now = env.clock.now()
    execute(env.store, 'UPDATE runs SET status = ?, next_step = 1, started_at = ?, finished_at = ?, error = ? WHERE id = ?', 'failed', now, now, JSON.stringify({ code: 'record_not_found', message: 'gone', step: '2-condition' }), runId)
    execute(env.store, 'INSERT INTO run_steps (run_id, step_index, name, type, status, attempts, output, started_at, finished_at) VALUES (?, 0, ?, ?, ?, 1, ?, ?, ?)', runId, '1-load', 'load', 'succeeded', '{}', now, now)
    const retryForm = `<form data-api action="/v1/workflow-runs/${runId}/retry"`
    for (const who of ['bob', 'alice']) expect((await get(`/runs/${runId}`, who)).text).toContain(retryForm)

    const send = (origin?: string) =>
      app.handle(request(`/v1/workflow-runs/${runId}/retry`, { method: 'POST', headers: { cookie: cookies.bob!, ...(origin ? { origin } : {}) }, json: {} }))
    const foreign = await send('https://evil.example')
    expect({ status: foreign.status, code: ((await foreign.json()) as { code: string }).code }).toEqual({ status: 403, code: 'cross_origin' })
    const accepted = await send('http://localhost')
    expect(accepted.status).toBe(202)
    const { runId: retry } = (await accepted.json()) as { runId: string }

    const old = (await get(`/runs/${runId}`, 'bob')).text
    expect(old).toContain(`<tr><th>Retried by</th><td><a class="mono" href="/runs/${retry}">${retry}</a></td></tr>`)
    expect(old).not.toContain(retryForm)
    const fresh = (await get(`/runs/${retry}`, 'bob')).text
    expect(fresh).toContain(`<tr><th>Retry of</th><td><a class="mono" href="/runs/${runId}">${runId}</a>`)
    expect(fresh).toContain('<td>1-load</td><td>load</td><td class="step-status"><span class="status-succeeded">succeeded</span> <span class="muted">carried from the retried run</span></td>')
    expect(fresh).toContain(`action="/v1/workflow-runs/${retry}/cancel"`) // queued: it may be cancelled, not retried
    expect(fresh).not.toContain('/retry"')
  })

  test('a workflow\'s callbacks (admins): listed with Remove forms and their URLs without query, an Add form whose answer shows the secret and whole URL once; a run\'s deliveries with attempts and Resend', async () => {
    const page = '/p/Acme/e/production/t/Support/w/Refund%20order'
    const api = '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/callbacks'
    expect((await get(page, 'alice')).text).toContain('No callback yet.')
    const form = (await get(page, 'alice')).text
    expect(form).toContain(`<form id="new-callback" data-api action="${api}" data-show="#callback-once" data-show-field="secret" data-done=`)
    expect(form).toContain('<input type="checkbox" name="events" value="workflow_run.failed" checked>')
    const url = 'https://erp.example.com/hooks/<b>?token=console-credential'
    const added = await app.handle(request(api, { method: 'POST', headers: { cookie: cookies.alice! }, json: { url } }))
    expect(added.status).toBe(201)
    const endpoint = (await added.json()) as { id: string; secret: string; url: string }
    expect(endpoint.url).toBe(url)
    const listed = (await get(page, 'alice')).text
    // The URL as every read shows it, without its query: whole only in the answer that added it (its slot in the
    // once-box, beside the secret's, is filled from that answer).
    expect(listed).toContain('<td class="mono">https://erp.example.com/hooks/&lt;b&gt;?[redacted]</td><td>succeeded, failed, cancelled</td>')
    expect(listed).not.toContain('console-credential')
    expect(listed).toContain('<code class="mono" id="callback-url" data-field="url"></code>')
    expect(listed).toContain(`data-method="DELETE" action="${api}/${endpoint.id}"`)
    expect(listed).not.toContain(endpoint.secret)
    expect((await get(page, 'bob')).status).toBe(403)

    // No executor here: a run cancelled while queued sends its end; the delivery waits (no worker either).
    const runId = await startRefund('bob', 'callback-from-console')
    expect((await app.handle(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: { cookie: cookies.bob! } }))).status).toBe(200)
    const [delivery] = queryAll<{ id: string }>(env.store, 'SELECT id FROM callback_deliveries WHERE run_id = ?', runId)
    const pending = (await get(`/runs/${runId}`, 'bob')).text
    expect(pending).toContain('<td class="mono">https://erp.example.com/hooks/&lt;b&gt;?[redacted]<br><span class="muted">webhook-id ' + delivery!.id + '</span></td><td>workflow_run.cancelled</td><td><span class="status-pending">pending</span>')
    expect(pending).toContain('<span class="muted">none yet</span>')
    expect(pending).not.toContain('/resend"')
    const now = env.clock.now()
    execute(env.store, "UPDATE callback_deliveries SET status = 'failed', attempts = 1, finished_at = ? WHERE id = ?", now, delivery!.id)
    execute(env.store, 'INSERT INTO callback_attempts (delivery_id, attempt, started_at, duration_ms, status_code, error) VALUES (?, 1, ?, 12, NULL, ?)', delivery!.id, now, 'no answer within 10000 ms')
    const failed = (await get(`/runs/${runId}`, 'alice')).text
    expect(failed).toContain('<span class="status-failed">failed</span>')
    expect(failed).toContain('<span class="error">no answer within 10000 ms</span> · 12 ms</li>')
    expect(failed).toContain(`<form class="inline" data-api action="/v1/workflow-runs/${runId}/callbacks/${delivery!.id}/resend"`)
    expect((await get(`/runs/${runId}`, 'dave')).status).toBe(404)

    const removed = await app.handle(request(`${api}/${endpoint.id}`, { method: 'DELETE', headers: { cookie: cookies.alice! } }))
    expect(removed.status).toBe(204)
    expect((await get(page, 'alice')).text).toContain('No callback yet.')
    expect((await get(`/runs/${runId}`, 'alice')).text).not.toContain('<h2>Callbacks</h2>')
  })

  test('the runs page pages by run id: 60 runs in the same millisecond, each seen once', async () => {
    for (let i = 0; i < 60; i++) await startRefund('alice', `burst-${i}`)
    const total = (queryOne(env.store, 'SELECT count(*) AS n FROM runs') as { n: number }).n
    const seen: string[] = []
    let path: string | undefined = '/p/Acme/e/production/runs'
    for (let pages = 0; path; pages++) {
      const page = await get(path, 'alice')
      expect(page.status).toBe(200)
      seen.push(...[...page.text.matchAll(/<tr data-run-id="([0-9a-f-]{36})">/g)].map((m) => m[1]!))
      path = /<a href="([^"]+)">Older →<\/a>/.exec(page.text)?.[1]?.replaceAll('&amp;', '&')
      expect(pages).toBeLessThan(5)
    }
    expect(seen.length).toBe(total)
    expect(new Set(seen).size).toBe(total)
  })
})

describe('changes with the session come only from Trellis pages', () => {
  const generateToken = (origin?: string) =>
    app.handle(
      request('/v1/account/tokens', {
        method: 'POST',
        headers: { cookie: cookies.carol!, ...(origin ? { origin } : {}) },
        json: { name: 'origin check', projectName: 'Acme', scopes: ['notes:read'] },
      }),
    )

  test('an Origin of another site is refused (403 cross_origin), nothing is created; this site or no Origin is fine', async () => {
    const before = (queryOne(env.store, 'SELECT count(*) AS n FROM api_tokens') as { n: number }).n
    for (const origin of ['https://evil.example', 'http://localhost.evil.example', 'null']) {
      const response = await generateToken(origin)
      expect({ origin, status: response.status, code: ((await response.json()) as { code: string }).code }).toEqual({ origin, status: 403, code: 'cross_origin' })
    }
    expect((queryOne(env.store, 'SELECT count(*) AS n FROM api_tokens') as { n: number }).n).toBe(before)
    expect((await generateToken('http://localhost')).status).toBe(201) // the host the request was made to
    expect((await generateToken('http://trellis.test')).status).toBe(201) // the configured base URL
    expect((await generateToken()).status).toBe(201)
  })

  test('Bearer calls are not concerned (no cookie, no browser)', async () => {
    const admin = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    const response = await app.handle(request('/v1/account/tokens', { headers: { authorization: `Bearer ${admin}`, origin: 'https://evil.example' } }))
    expect(response.status).toBe(200)
  })
})

describe('concurrency: every view is logged, through a real server', () => {
  sqliteOnlyTest(SQLITE_ONLY.ownDataDir, '250 parallel console views (200 records, 50 lists) → 250 answers of 200 and exactly 250 read entries', async () => {
    const dir = tempDir('trellis-console-load-')
    expect((await runCli(['apply', '-f', `${repoRoot}/examples/acme.yaml`, '--data', dir.path])).code).toBe(0)
    const server = await startServe({ dataDir: dir.path, cwd: dir.path })
    try {
      const login = await fetch(`${server.url}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'bob@example.com', password: 'bob-demo-pass-2026' }),
      })
      expect(login.status).toBe(200)
      const cookie = login.headers.get('set-cookie')!.split(';')[0]!
      const paths = [
        ...Array.from({ length: 200 }, (_, i) => `/p/Acme/e/production/t/Support/c/orders/r/ord_100${(i % 3) + 1}`),
        ...Array.from({ length: 50 }, () => '/p/Acme/e/production/t/Support/c/customers'),
      ]
      const statuses = await Promise.all(paths.map(async (path) => (await fetch(`${server.url}${path}`, { headers: { cookie } })).status))
      expect(statuses.filter((s) => s !== 200)).toEqual([])
      const store = openStore(dir.path)
      try {
        const count = (action: string) =>
          (store.sqlite.prepare("SELECT count(*) AS n FROM activity_logs WHERE type = 'read' AND action = ?").get(action) as { n: number }).n
        expect({ read: count('read'), index: count('index') }).toEqual({ read: 200, index: 50 })
        const times = store.sqlite.prepare("SELECT created_at FROM activity_logs WHERE type = 'read' ORDER BY id").all() as { created_at: number }[]
        for (let i = 1; i < times.length; i++) expect(times[i]!.created_at).toBeGreaterThan(times[i - 1]!.created_at)
      } finally {
        store.close()
      }
    } finally {
      await server.stop()
      dir.cleanup()
    }
  }, 60_000)
})

describe('notes from the console', () => {
  const base = '/p/Acme/e/production/t/Support'
  const send = (method: string, path: string, who: string | null, json: unknown, extra: Record<string, string> = {}) =>
    app.handle(request(path, { method, headers: { ...(who ? { cookie: cookies[who]! } : {}), ...extra }, json }))
  const errorOf = async (response: Response) => ({ status: response.status, ...((await response.json()) as { code: string; message: string }) })

  test('a team member starts a note, replies, archives and unarchives it: one entry each, as that person, no token', async () => {
    const before = maxActivityId()
    const created = await send('POST', `${base}/c/orders/r/ord_1002/notes`, 'bob', { title: '  Call back  ', text: 'Customer <b>asked</b> twice.\n\nSecond paragraph\nsame paragraph' })
    expect(created.status).toBe(201)
    const { id } = (await created.json()) as { id: number }
    expect((await send('POST', `${base}/notes/${id}/messages`, 'bob', { text: 'Done & dusted' })).status).toBe(201)
    expect((await send('PATCH', `${base}/notes/${id}`, 'bob', { archived: true })).status).toBe(200)
    expect((await send('PATCH', `${base}/notes/${id}`, 'bob', { archived: false })).status).toBe(200)
    expect((await entriesAfter(before)).map((e) => [e.action, e.label, e.user.email, e.team.name, e.recordIds])).toEqual([
      ['createNote', 'created note "Call back"', 'bob@example.com', 'Support', ['ord_1002']],
      ['createMessage', 'added a message to note "Call back"', 'bob@example.com', 'Support', ['ord_1002']],
      ['archiveNote', 'archived note "Call back"', 'bob@example.com', 'Support', ['ord_1002']],
      ['unarchiveNote', 'unarchived note "Call back"', 'bob@example.com', 'Support', ['ord_1002']],
    ])
    // Typed text is text: escaped into paragraphs, and shown so on the record page.
    const stored = queryAll(env.store, 'SELECT content FROM note_messages WHERE note_id = ? ORDER BY id', id) as { content: string }[]
    expect(stored.map((m) => m.content)).toEqual(['<p>Customer &lt;b&gt;asked&lt;/b&gt; twice.</p><p>Second paragraph<br />same paragraph</p>', '<p>Done &amp; dusted</p>'])
    const page = await get(record('Support', 'orders', 'ord_1002'), 'bob')
    expect(page.text).toContain('Customer &lt;b&gt;asked&lt;/b&gt; twice.')
    expect(page.text).toContain(`action="${base}/notes/${id}/messages"`)
  })

  test('who may: not the team (403), a collection the team may not read (403), another team\'s note or an unknown one (404)', async () => {
    const before = maxActivityId()
    const billingNote = (await (await send('POST', '/p/Acme/e/production/t/Billing/c/orders/r/ord_1001/notes', 'carol', { title: 'billing only', text: 'x' })).json()) as { id: number }
    const cases: [string, string, string, unknown, number, string][] = [
      ['POST', '/p/Acme/e/production/t/Billing/c/orders/r/ord_1001/notes', 'bob', { title: 't', text: 'x' }, 403, 'rendering_forbidden'],
      ['POST', `${base}/c/secrets/r/x/notes`, 'bob', { title: 't', text: 'x' }, 403, 'collection_forbidden'],
      ['POST', `${base}/c/orders/r/nope/notes`, 'bob', { title: 't', text: 'x' }, 404, 'not_found'],
      ['POST', `${base}/notes/${billingNote.id}/messages`, 'bob', { text: 'x' }, 404, 'not_found'],
      ['PATCH', `${base}/notes/${billingNote.id}`, 'alice', { archived: true }, 404, 'not_found'], // as Support: not its note
      ['POST', `${base}/notes/999999/messages`, 'bob', { text: 'x' }, 404, 'not_found'],
      ['POST', '/p/Globex/e/production/t/Ops/c/orders/r/x/notes', 'bob', { title: 't', text: 'x' }, 404, 'not_found'],
    ]
    for (const [method, path, who, json, status, code] of cases) {
      const response = await send(method, path, who, json)
      expect({ path, who, ...(await errorOf(response)) }).toMatchObject({ path, who, status, code })
    }
    expect((await entriesAfter(before)).map((e) => e.label)).toEqual(['created note "billing only"'])
  })

  test('bad input: 400 naming the field, nothing written; no session 401; a token 403; another site 403', async () => {
    const before = maxActivityId()
    const path = `${base}/c/orders/r/ord_1001/notes`
    for (const [json, field] of [
      [{ title: '   ', text: 'x' }, 'title'],
      [{ title: 't', text: ' \n ' }, 'text'],
      [{ title: 't', text: 'x'.repeat(10_001) }, 'text'],
      [{ title: 'x'.repeat(501), text: 'x' }, 'title'],
      [{ title: 42, text: 'x' }, 'title'],
      [{ title: 't' }, 'text'],
    ] as const) {
      const error = await errorOf(await send('POST', path, 'bob', json))
      expect({ field, status: error.status, code: error.code }).toEqual({ field, status: 400, code: 'validation_failed' })
      expect(error.message).toContain(field)
    }
    const malformed = await app.handle(request(path, { method: 'POST', headers: { cookie: cookies.bob!, 'content-type': 'application/json' }, body: '{"title": ' }))
    expect(malformed.status).toBe(400)
    expect((await send('PATCH', `${base}/notes/abc`, 'bob', { archived: true })).status).toBe(400)
    expect((await send('PATCH', `${base}/notes/1`, 'bob', {})).status).toBe(400)
    expect((await errorOf(await send('POST', path, null, { title: 't', text: 'x' }))).status).toBe(401)
    const token = (await tokenFor(env.store, env.clock, 'bob', ['all'])).value
    expect(await errorOf(await send('POST', path, null, { title: 't', text: 'x' }, bearer(token)))).toMatchObject({ status: 403, code: 'session_required' })
    expect(await errorOf(await send('POST', path, 'bob', { title: 't', text: 'x' }, { origin: 'https://evil.example' }))).toMatchObject({ status: 403, code: 'cross_origin' })
    expect(maxActivityId()).toBe(before)
  })
})

/** A fresh instance of its own (the shared Acme one already has everything the checklist asks for). */
function freshInstance(options: Parameters<typeof testApp>[1] = {}) {
  const fresh = testEnv()
  return { env: fresh, app: testApp(fresh, options) }
}

async function pageOf(app: ReturnType<typeof testApp>, path: string, cookie: string) {
  const response = await app.handle(request(path, { headers: { cookie } }))
  return { status: response.status, text: await response.text() }
}

const sessionCookie = async (store: TestEnv['store'], clock: TestEnv['clock'], id: number) =>
  `trellis_session=${(await runNow(store, createSession(clock, id, false))).id}`

describe('Get started checklist', () => {
  test('shown to an instance administrator until each step is done, from the data; its commands run as written; hidden per user by a cookie', async () => {
    const { env: fresh, app } = freshInstance()
    const work = tempDir()
    try {
      const root = await runNow(fresh.store, createUser(fresh.clock, { email: 'root@example.com', username: 'root', passwordHash: null, isInstanceAdmin: true, actorId: null }))
      const cookie = await sessionCookie(fresh.store, fresh.clock, root.id)
      const api = (path: string, json: unknown) => app.handle(request(path, { method: 'POST', headers: { cookie }, json }))
      const done = async () => {
        const home = await pageOf(app, '/', cookie)
        expect(home.status).toBe(200)
        if (!home.text.includes('id="checklist"')) return null
        return [...home.text.matchAll(/<li( class="done")?>/g)].map((m) => m[1] !== undefined)
      }
      expect(await done()).toEqual([false, false, false, false])
      const home = (await pageOf(app, '/', cookie)).text
      for (const command of Object.values(GET_STARTED_COMMANDS)) expect(home).toContain(`<code>${command}</code>`)
      expect(home).not.toContain('apply FILE')

      // 1: a project with an environment, a team and a collection — not before all three.
      expect((await api('/v1/projects', { name: 'First' })).status).toBe(201)
      expect((await api('/v1/project/First/environments', { environmentName: 'production' })).status).toBe(201)
      expect((await api('/v1/project/First/teams', { teamName: 'Support' })).status).toBe(201)
      expect(await done()).toEqual([false, false, false, false])
      expect((await api('/v1/project/First/collections', { collectionName: 'orders' })).status).toBe(201)
      expect(await done()).toEqual([true, false, false, false])

      // 2 and 3 through the commands the checklist shows, exactly as shown, on the instance's data.
      writeFileSync(join(work.path, 'trellis.yaml'), 'projects:\n  - name: First\n    workflows:\n      - name: Triage\n        environment: production\n        team: Support\n        collection: orders\n        steps:\n          - type: load\n')
      const run = (command: string) => runCli(command.split(' ').slice(1), { cwd: work.path, env: { TRELLIS_DATA_DIR: fresh.dataDir, ...processEnv(fresh) } })
      expect(GET_STARTED_COMMANDS.addPerson.startsWith('trellis ')).toBe(true)
      const added = await run(GET_STARTED_COMMANDS.addPerson)
      expect(added.code, added.stderr).toBe(0)
      expect(await done()).toEqual([true, true, false, false])
      const applied = await run(GET_STARTED_COMMANDS.applyFile)
      expect(applied.code, applied.stderr).toBe(0)
      expect(await done()).toEqual([true, true, true, false])

      // Hidden: for this user in this browser (the cookie names users), not for another user's id.
      expect((await pageOf(app, '/', `${cookie}; trellis_checklist_hidden=${root.id + 1}`)).text).toContain('id="checklist"')
      expect((await pageOf(app, '/', `${cookie}; trellis_checklist_hidden=${root.id + 1}.${root.id}`)).text).not.toContain('id="checklist"')

      // 4: a token of one's own; then the checklist is gone.
      expect((await api('/v1/account/tokens', { name: 'cli', projectName: 'First' })).status).toBe(201)
      expect(await done()).toBeNull()

      // Never shown to someone who is not an instance administrator.
      const person = (queryOne(fresh.store, "SELECT id FROM users WHERE email = 'person@example.com'") as { id: number }).id
      const theirs = await pageOf(app, '/', await sessionCookie(fresh.store, fresh.clock, person))
      expect(theirs.text).not.toContain('Get started')
      expect(theirs.text).toContain('not a member of any project')
    } finally {
      work.cleanup()
      fresh.cleanup()
    }
  }, 30_000)
})

describe('the setup-created administrator', () => {
  test('is the instance admin log\'s first entry, written with the user', async () => {
    const fresh = testEnv()
    try {
      const { gate, token } = SetupGate.open()
      const app = testApp(fresh, { setupGate: gate })
      const created = await app.handle(request('/setup', { method: 'POST', json: { token, email: 'root@example.com', username: 'root', password: 'a-long-first-password' } }))
      expect(created.status).toBe(201)
      const { user } = (await created.json()) as { user: { id: number } }
      const entries = await read(fresh.store, renderAdminLogs(await read(fresh.store, instanceLogIds(10))))
      expect(entries.map((e) => ({ type: e.type, resource: e.resource, by: e.user?.email, after: e.newValue }))).toEqual([
        { type: 'add', resource: 'user', by: 'root@example.com', after: { name: 'root@example.com created as instance administrator through the setup link' } },
      ])
      const people = await pageOf(app, '/admin/users', await sessionCookie(fresh.store, fresh.clock, user.id))
      expect(people.text).toContain('created as instance administrator through the setup link')
    } finally {
      fresh.cleanup()
    }
  })
})

describe('admin log values are read, not parsed', () => {
  test('one formatter: fields as "Label: value", internal fields hidden, a user by email, lists by name', () => {
    expect(String(adminLogValue({ name: 'production', codeCustomizationVersion: 0 }))).toBe('production')
    const member = String(adminLogValue({ user: { object: 'user', id: 7, username: 'alice', email: 'alice@example.com' }, permissionLevel: 'admin', teams: [{ object: 'team', name: 'Support' }, { object: 'team', name: 'Billing' }] }))
    expect(member).toBe('<ul class="fields"><li>User: alice@example.com</li><li>Permission level: admin</li><li>Teams: Support, Billing</li></ul>')
    expect(String(adminLogValue({ teams: [], sso: true }))).toBe('<ul class="fields"><li>Teams: none</li><li>Sso: yes</li></ul>')
    expect(String(adminLogValue({ name: '<b>x</b>' }))).toBe('&lt;b&gt;x&lt;/b&gt;')
    expect(String(adminLogValue(undefined))).toBe('')
  })

  test('the project admin log page shows them so, no JSON, no internal field', async () => {
    const page = await get('/p/Acme/admin-log', 'alice')
    expect(page.status).toBe(200)
    expect(page.text).toContain('<li>Permission level: admin</li>')
    for (const raw of ['codeCustomizationVersion', '&quot;object&quot;', '{&quot;']) expect(page.text).not.toContain(raw)
  })
})

describe('token ages and the rotation advice', () => {
  test('lists show age and last use; tokens past the advice are flagged in words, production 90 / development 180 days, configurable; nothing is refused', async () => {
    const document = acmeDocument()
    document.projects.push({ name: 'Lab', environments: ['development'], teams: [{ name: 'R&D', members: ['alice@example.com'] }], members: [{ user: 'alice@example.com', role: 'admin' }] })
    const fresh = testEnv()
    try {
      await applyAcme({ store: fresh.store, clock: fresh.clock, secret: fresh.secret, baseUrl: fresh.config.baseUrl }, document)
      const clock = fresh.clock as TestEnv['clock'] & { advance(ms: number): void }
      const acme = await tokenFor(fresh.store, clock, 'alice', ['notes:read'], { name: 'acme-token' })
      await tokenFor(fresh.store, clock, 'alice', ['notes:read'], { project: 'Lab', name: 'lab-token' })
      const app = testApp(fresh)
      const rowOf = (text: string, name: string) => new RegExp(`<tr data-token="${name}">[\\s\\S]*?</tr>`).exec(text)?.[0] ?? ''
      const at = async (days: number, path = '/account', appToUse = app) => {
        clock.advance(days * 86_400_000)
        const page = await pageOf(appToUse, path, await sessionCookie(fresh.store, clock, userId(fresh.store, 'alice')))
        expect(page.status).toBe(200)
        return page.text
      }
      let text = await at(0)
      expect(rowOf(text, 'acme-token')).toContain('created today')
      expect(rowOf(text, 'acme-token')).toContain('never')
      expect(rowOf(text, 'acme-token')).not.toContain('Rotate')
      expect(text).toContain('Rotation advice (not enforced)')

      text = await at(91)
      expect(rowOf(text, 'acme-token')).toContain('created 91 days ago')
      expect(rowOf(text, 'acme-token')).toContain('<span class="badge">Rotate</span> <span class="rotation">older than the 90-day advice for production</span>')
      expect(rowOf(text, 'lab-token')).not.toContain('Rotate')
      // Not enforced: the flagged token still works (and its use shows).
      expect((await app.handle(request('/v1/project/Acme/environment/production/notes', { headers: bearer(acme.value) }))).status).toBe(200)
      text = await at(1)
      expect(rowOf(text, 'acme-token')).toContain('1 day ago')
      expect(rowOf(text, 'acme-token')).not.toContain('never')

      text = await at(89) // 181 days
      expect(rowOf(text, 'lab-token')).toContain('older than the 180-day advice for development')
      const projectPage = await at(0, '/p/Acme/api-access')
      expect(rowOf(projectPage, 'acme-token')).toContain('older than the 90-day advice for production')

      // Configurable (TRELLIS_TOKEN_ROTATION_DAYS_*): with 365 / 400 days nothing is flagged yet.
      const patient = testApp(fresh, { config: { ...fresh.config, tokenRotationDays: { productionDays: 365, developmentDays: 400 } } })
      expect(await at(0, '/account', patient)).not.toContain('class="badge"')
    } finally {
      fresh.cleanup()
    }
  })
})

describe('authoring workflows', () => {
  const team = '/p/Acme/e/production/t/Support'
  const page = `${team}/w/Authored%20here`
  const api = '/v1/project/Acme/environment/production/team/Support/workflows/Authored%20here'
  const publish = (json: unknown, who = 'alice') => app.handle(request(api, { method: 'PUT', headers: { cookie: cookies[who]! }, json }))

  test('the team page: admins get the New workflow form (every collection of the project) and the editor script; others neither', async () => {
    const asAdmin = (await get(team, 'alice')).text
    expect(asAdmin).toContain('<form id="new-workflow" data-new-workflow action="/v1/project/Acme/environment/production/team/Support/workflows/" data-next="/p/Acme/e/production/t/Support/w/">')
    expect(asAdmin).toContain('<select name="collection"><option>customers</option><option>orders</option><option>secrets</option></select>')
    expect(asAdmin).toContain('<script src="/console/editor.js" defer></script>')
    expect(asAdmin).toContain('<a href="/p/Acme/e/production/t/Support/w/Refund%20order">Refund order</a>')
    const asEditor = (await get(team, 'bob')).text
    expect(asEditor).not.toContain('new-workflow')
    expect(asEditor).not.toContain('editor.js')
    expect(asEditor).not.toContain('/w/Refund%20order')
  })

  test('the workflow page: steps in words, the editor prefilled with the active definition, a test run form, runs, versions, trigger settings', async () => {
    const steps = [
      { type: 'load' },
      { type: 'condition', if: { field: 'status', equals: 'paid' }, else: 'fail' },
      { type: 'update', name: 'mark', set: { status: 'checked' } },
      { type: 'note', title: '<b>Checked</b>', content: 'by {{workflow.name}}' },
      { type: 'http', method: 'POST', url: 'https://erp.example.com/x', headers: { authorization: 'Bearer sk_secret' } },
      { type: 'wait', seconds: 5400 },
    ]
    expect((await publish({ collection: 'orders', steps })).status).toBe(200)
    const { status, text } = await get(page, 'alice')
    expect(status).toBe(200)
    expect(text).toContain('Version <strong>v1</strong> is active, on <strong>orders</strong>.')
    for (const words of [
      'Load the record',
      'Go on only if <code>status</code> equals <code>&quot;paid&quot;</code>; otherwise fail the run',
      '<strong>mark</strong> — Set <code>status</code> = <code>&quot;checked&quot;</code>',
      'Add a note “&lt;b&gt;Checked&lt;/b&gt;”',
      'Call <code>POST https://erp.example.com/x</code> with headers authorization',
      'Wait 1 h 30 min',
    ]) expect(text).toContain(words)
    // The header's value is in the editor (admins may read the definition), not in the steps' words.
    expect(text.split('<form id="workflow-editor"')[0]).not.toContain('sk_secret')
    expect(text).toContain(`<form id="workflow-editor" data-editor data-method="PUT" action="${api}" data-page="${page}">`)
    expect(text).toContain('{\n  &quot;collection&quot;: &quot;orders&quot;,\n  &quot;steps&quot;: [\n    {\n      &quot;type&quot;: &quot;load&quot;\n    },')
    expect(text).toContain('<form id="test-run" data-api action="/v1/project/Acme/environment/production/workflow-runs" data-next="/runs/{runId}" data-done="Test run started.">')
    expect(text).toContain('<input type="hidden" name="workflowName" value="Authored here">')
    expect(text).toMatch(/<h2>Recent runs<\/h2>\n<div class="table-scroll" tabindex="0"><table class="runs" hidden>.*<\/table><\/div><p class="muted no-runs">No runs.<\/p>/s)
    expect(text).toContain('<td>v1</td>')
    expect(text).toContain('Publish a second version to compare two.')
    expect(text).toContain('<h2>Trigger settings</h2>')
    expect(text).toContain('<link rel="stylesheet" href="/console/editor.css">')
  })

  test('a second version: the compare form, the diff of any two; bad or unknown versions are 400 / 404 pages', async () => {
    expect((await publish({ collection: 'orders', steps: [{ type: 'load' }, { type: 'update', set: { status: 'seen' } }] })).status).toBe(200)
    const text = (await get(page, 'alice')).text
    expect(text).toContain('Version <strong>v2</strong> is active')
    expect(text).toContain('<form method="get" id="compare" class="filters" action="#diff">')
    const diff = (await get(`${page}?from=1&to=2`, 'alice')).text
    expect(diff).toMatch(/<h3 id="diff">v1 → v2: \d+ lines changed<\/h3>/)
    expect(diff).toContain('<span class="diff-removed">-       &quot;type&quot;: &quot;wait&quot;,</span>')
    expect(diff).toContain('<span class="diff-added">+         &quot;status&quot;: &quot;seen&quot;</span>')
    expect(diff).toContain('<span class="diff-same">  {</span>')
    expect((await get(`${page}?from=2&to=2`, 'alice')).text).toContain('v2 → v2: no difference')
    for (const [query, parameter, status] of [['from=1', 'to', 400], ['to=1', 'from', 400], ['from=x&to=1', 'from', 400], ['from=1&to=0', 'to', 400]] as const) {
      const bad = await get(`${page}?${query}`, 'alice')
      expect({ query, status: bad.status }).toEqual({ query, status })
      expect(bad.text).toContain(parameter)
    }
    const unknown = await get(`${page}?from=1&to=9`, 'alice')
    expect(unknown.status).toBe(404)
    expect(unknown.text).toContain('has no version 9')
  })

  test('who may: project admins only (an editor, a user, a non-member: 403 or 404); unknown names are 404 pages', async () => {
    expect((await get(page, 'bob')).status).toBe(403)
    expect((await get(page, 'dave')).status).toBe(403)
    expect((await get(page, 'erin')).status).toBe(403)
    expect((await get('/p/Acme/e/production/t/Support/w/Nope', 'alice')).status).toBe(404)
    expect((await get('/p/Acme/e/nowhere/t/Support/w/Authored%20here', 'alice')).status).toBe(404)
    expect((await get(`${page}?from=1&to=2`)).status).toBe(303)
  })

  test('"Add a step" offers every step type, each template a valid step by the checks of the API', async () => {
    const text = (await get(page, 'alice')).text
    for (const type of STEP_TYPES) {
      expect(text).toContain(`>${type}</option>`)
      const definition = { name: 'x', environment: 'production', team: 'Support', collection: 'orders', steps: [{ type: 'load' }, STEP_TEMPLATES[type]] }
      expect({ type, problems: workflowDefinitionProblems(definition) }).toEqual({ type, problems: [] })
    }
    expect(text).toContain('<button type="button" data-add-step>Add</button>')
  })

  test("the builder is given the API's own step schemas, each rule in the API's words, and the project's choices", async () => {
    const text = (await get(page, 'alice')).text
    const attribute = /data-builder="([^"]*)"/.exec(text)?.[1]
    expect(attribute).toBeDefined()
    const data = JSON.parse(attribute!.replace(/&quot;/g, '"').replace(/&#x27;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'))
    const rulesOut = (node: unknown): unknown =>
      Array.isArray(node) ? node.map(rulesOut) : node && typeof node === 'object' ? Object.fromEntries(Object.entries(node).filter(([key]) => key !== 'rule').map(([key, value]) => [key, rulesOut(value)])) : node
    expect(rulesOut(data.schemas)).toEqual(JSON.parse(JSON.stringify(STEP_SCHEMAS)))
    expect(data.schemas.wait.properties.seconds.rule).toBe('must be an integer between 1 and 2592000')
    expect(data.types).toEqual(STEP_TYPES)
    expect(data.teams).toEqual(expect.arrayContaining(['Billing', 'Support']))
    expect(data.users).toContain('carol@example.com')
    expect(data.collections.map((c: { name: string }) => c.name)).toEqual(expect.arrayContaining(['customers', 'orders']))
    expect(data.dryRun).toBe('/v1/project/Acme/environment/production/team/Support/workflows/Authored%20here/dry-run')
  })

  test('the editor script and style come from the binary', async () => {
    const js = await get('/console/editor.js')
    expect(js.headers.get('content-type')).toStartWith('text/javascript')
    expect(js.text).toContain('function jsonLines')
    expect((await get('/console/editor.css')).headers.get('content-type')).toStartWith('text/css')
    const builder = await get('/console/builder.js')
    expect(builder.headers.get('content-type')).toStartWith('text/javascript')
    expect(builder.text).toContain('function stepProblems')
  })
})

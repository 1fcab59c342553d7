/**
 * Activity logs and admin logs (issue 6; spec §1, §2.8, §4.3, §5.8; DESIGN §7) through the real app over real
 * SQLite files: what each action writes, the list endpoints (filters, limit, order, hasMore, paging), the scope and
 * role matrix, append-only storage, retention, and the auditor's question for one record.
 *
 * Every 200 body of `GET …/activity-logs` is validated against the compatibility document's `listActivityLogs`
 * and of `GET …/admin-logs` against `listAdminLogs`, as published (only DESIGN's `exclusiveMinimum` quirk dropped;
 * test/support/compat-schema.ts). Asked with `extensions=true`, a body may deviate only by DESIGN §7's extension
 * values on their own fields. Every 4xx body is validated against the operation's 4XX schema, every 429 against its
 * 429 schema; a 5XX anywhere fails the test.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { ValidateFunction } from 'ajv'
import { createHash } from 'node:crypto'
import { ConfigError, loadConfig } from '../src/config.ts'
import { writeTransaction } from '../src/db/write.ts'
import { Executor } from '../src/executor/executor.ts'
import { type Clock, systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { ACTIVITY_ACTIONS, appendActivityLog } from '../src/modules/activity-logs/service.ts'
import { pruneLogs } from '../src/modules/admin-logs/retention.ts'
import { ADMIN_LOG_RESOURCES, appendAdminLog } from '../src/modules/admin-logs/service.ts'
import { type ApplyReport, ApplyError, applyDocument } from '../src/modules/apply/service.ts'
import { setProjectMember, setUserDeactivated } from '../src/modules/members/service.ts'
import { revokeToken, type Scope } from '../src/modules/tokens/service.ts'
import { bearer, handleJson, request, runCli, tableContents, testApp, testEnv, type TestEnv } from './helpers.ts'
import { type AcmeDocument, acmeProject, acmeWithGlobex, acmeWorkflow, applyAcme, ordersWorkflow, projectId, reportHook, tokenFor, UUID } from './support/acme.ts'
import { assertValid, assertValidWithExtensions, compatDocument, type ErrorObject, EXTENSION_VALUES, validatorFor } from './support/compat-schema.ts'

// ── Compatibility validation ────────────────────────────────────────────────

type Endpoint = 'activity' | 'admin'
const OPERATIONS = { activity: 'listActivityLogs', admin: 'listAdminLogs' } as const
const VALIDATORS: Record<Endpoint, { ok: ValidateFunction; error: ValidateFunction; limited: ValidateFunction }> = {
  activity: {
    ok: validatorFor('listActivityLogs', 200),
    error: validatorFor('listActivityLogs', '4XX'),
    limited: validatorFor('listActivityLogs', 429),
  },
  admin: {
    ok: validatorFor('listAdminLogs', 200),
    error: validatorFor('listAdminLogs', '4XX'),
    limited: validatorFor('listAdminLogs', 429),
  },
}

const validated = { activity200: 0, admin200: 0, error4xx: 0, error429: 0, activityEntries: 0, adminEntries: 0, extensionEntries: 0 }
afterAll(() => {
  console.log(`compat-schema validations: ${JSON.stringify(validated)}`)
})

const ISO_UTC_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const iso = (ms: number) => new Date(ms).toISOString()

// ── Shapes ──────────────────────────────────────────────────────────────────

interface UserObject {
  object: 'user'
  id: number
  username: string
  email: string
}
interface ActivityLog {
  object: 'activityLog'
  id: string
  type: 'read' | 'write'
  action: string
  label?: string
  recordIds: string[]
  createdAt: string
  user: UserObject
  environment: { object: 'environment'; name: string }
  team: { object: 'team'; name: string }
  collection?: { object: 'collection'; name: string }
  workflow?: { object: 'workflow'; name: string; runId: string; stepName?: string }
}
interface AdminLog {
  object: 'adminLog'
  id: string
  type: 'add' | 'remove' | 'update' | 'initial'
  resource: string
  initiator: string
  createdAt: string
  user?: UserObject
  previousValue?: Record<string, unknown>
  newValue?: Record<string, unknown>
}
interface Page<T> {
  hasMore: boolean
  data: T[]
  parameters: Record<string, unknown>
}
interface Sent<T> {
  status: number
  headers: Headers
  text: string
  body: T
}

type App = ReturnType<typeof testApp>

/** Sends through the app; validates the body by status against the endpoint's schemas. 5XX or non-JSON throws. */
async function send<T>(app: App, req: Request, kind: Endpoint): Promise<Sent<T>> {
  const { response, text, body } = await handleJson(app, req)
  const v = VALIDATORS[kind]
  if (response.status === 429) {
    assertValid(v.limited, body, `${req.method} ${req.url} 429`)
    validated.error429++
  } else if (response.status >= 400) {
    assertValid(v.error, body, `${req.method} ${req.url} ${response.status}`)
    validated.error4xx++
  } else {
    // Unmodified document; with extensions=true, deviations only on DESIGN §7's extension fields and values.
    if (new URL(req.url).searchParams.get('extensions') === 'true') validated.extensionEntries += assertValidWithExtensions(OPERATIONS[kind], body, `${req.method} ${req.url} 200`)
    else assertValid(v.ok, body, `${req.method} ${req.url} 200`)
    const page = body as Page<ActivityLog | AdminLog>
    if (kind === 'activity') {
      validated.activity200++
      validated.activityEntries += page.data.length
    } else {
      validated.admin200++
      validated.adminEntries += page.data.length
    }
    for (const entry of page.data) expect(entry.createdAt).toMatch(ISO_UTC_MS)
    if (kind === 'activity') for (const entry of page.data as ActivityLog[]) splitTokenFromLabel(entry)
  }
  return { status: response.status, headers: response.headers, text, body: body as T }
}

/**
 * Entries made through an application token name it at the end of their label (`· token "name" (trl_AbCd1234…)`).
 * The tests below compare labels without it; the token part is checked (against the tokens table) and kept in
 * `tokenOf` for the tests about it.
 */
const TOKEN_SUFFIX = / · token "([^"]*)" \((trl_[A-Za-z0-9_-]{8})…\)$/
const tokenOf = new WeakMap<object, { name: string; prefix: string }>()
function splitTokenFromLabel(entry: ActivityLog): void {
  const match = entry.label === undefined ? null : TOKEN_SUFFIX.exec(entry.label)
  if (!match) return
  entry.label = entry.label!.slice(0, match.index)
  tokenOf.set(entry, { name: match[1]!, prefix: match[2]! })
}

function expectError(sent: Sent<unknown>, status: number, code: string, parameter?: string): ErrorObject {
  const body = sent.body as ErrorObject
  expect({ status: sent.status, code: body.code }).toEqual({ status, code })
  expect(body.message.length).toBeGreaterThan(0)
  if (parameter !== undefined) {
    expect(body.message).toContain(`'${parameter}'`)
    if (body.details) expect(body.details.map((d) => d.field)).toContain(parameter)
  }
  return body
}

type Query = Record<string, string> | string
const search = (query: Query) => (typeof query === 'string' ? query : new URLSearchParams(query).toString())
const withQuery = (base: string, query: Query) => (search(query) === '' ? base : `${base}?${search(query)}`)

function activityPath(query: Query = {}, project = 'Acme', environment = 'production') {
  return withQuery(`/v1/project/${encodeURIComponent(project)}/environment/${encodeURIComponent(environment)}/activity-logs`, query)
}
function adminPath(query: Query = {}, project = 'Acme') {
  return withQuery(`/v1/project/${encodeURIComponent(project)}/admin-logs`, query)
}
const notesPath = (environment = 'production') => `/v1/project/Acme/environment/${environment}/notes`

// ── Fixtures ────────────────────────────────────────────────────────────────

const HIGH_RATES = { TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_API_RATE_PER_HOUR: '100000', TRELLIS_API_RATE_PER_DAY: '100000' }

interface Fx {
  env: TestEnv
  clock: Clock
  app: App
  report: ApplyReport
  /** alice (Acme admin) with `all`: the default reader and the acting admin. */
  alice: string
  /** alice (Globex admin) with `all` on Globex. */
  aliceGlobex: string
  users: Record<'alice' | 'bob' | 'carol' | 'dave', UserObject>
}

function userObject(env: TestEnv, username: string): UserObject {
  const row = env.store.sqlite.prepare('SELECT id, username, email FROM users WHERE username = ?').get(username) as { id: number; username: string; email: string }
  return { object: 'user', ...row }
}

function buildFx(options: { clock?: Clock; document?: AcmeDocument; env?: Record<string, string>; executor?: (env: TestEnv) => Executor } = {}): Fx & { executor?: Executor } {
  const env = testEnv({ ...HIGH_RATES, ...options.env })
  const clock = options.clock ?? env.clock
  const report = applyAcme({ store: env.store, clock, secret: env.secret, baseUrl: env.config.baseUrl }, options.document ?? acmeWithGlobex())
  const executor = options.executor?.(env)
  const app = testApp(env, { clock, ...(executor ? { executor } : {}) })
  return {
    env,
    clock,
    app,
    report,
    executor,
    alice: tokenFor(env.store, clock, 'alice', ['all']).value,
    aliceGlobex: tokenFor(env.store, clock, 'alice', ['all'], { project: 'Globex' }).value,
    users: {
      alice: userObject(env, 'alice'),
      bob: userObject(env, 'bob'),
      carol: userObject(env, 'carol'),
      dave: userObject(env, 'dave'),
    },
  }
}

const listActivity = (fx: Fx, query: Query = {}, options: { token?: string; project?: string; environment?: string } = {}) =>
  send<Page<ActivityLog>>(fx.app, request(activityPath(query, options.project, options.environment), { headers: bearer(options.token ?? fx.alice) }), 'activity')
const listAdmin = (fx: Fx, query: Query = {}, options: { token?: string; project?: string } = {}) =>
  send<Page<AdminLog>>(fx.app, request(adminPath(query, options.project), { headers: bearer(options.token ?? (options.project === 'Globex' ? fx.aliceGlobex : fx.alice)) }), 'admin')

/**
 * Every entry matching `query`, newest first, paging as the README says: `createdAt.lte` the last entry's time and
 * skip ids already seen (log entries may share a millisecond). Fails if a page brings nothing new.
 */
async function walk<T extends ActivityLog | AdminLog>(
  list: (query: Record<string, string>) => Promise<Sent<Page<T>>>,
  query: Record<string, string> = {},
  limit = 100,
): Promise<{ entries: T[]; pages: number }> {
  const seen = new Set<string>()
  const entries: T[] = []
  let next: Record<string, string> = { ...query, limit: String(limit) }
  for (let pages = 1; ; pages++) {
    const sent = await list(next)
    expect(sent.status).toBe(200)
    const fresh = sent.body.data.filter((e) => !seen.has(e.id))
    for (const entry of fresh) {
      seen.add(entry.id)
      entries.push(entry)
    }
    if (!sent.body.hasMore) return { entries, pages }
    if (fresh.length === 0) throw new Error(`paging is stuck: more than ${limit} entries share ${sent.body.data.at(-1)!.createdAt}`)
    next = { ...query, limit: String(limit), 'createdAt.lte': sent.body.data.at(-1)!.createdAt }
    if (pages > 1000) throw new Error('too many pages')
  }
}

/** Whether DESIGN §7 calls the entry an extension (listed only with `extensions=true`). */
function isExtension(entry: ActivityLog | AdminLog): boolean {
  const values = entry.object === 'activityLog' ? EXTENSION_VALUES.listActivityLogs : EXTENSION_VALUES.listAdminLogs
  return Object.entries(values).some(([field, extensions]) => extensions.includes((entry as unknown as Record<string, string>)[field]!))
}
/** The query's first parameter holding an extension value of `kind` (such a filter needs extensions=true), if any. */
function extensionParameter(kind: Endpoint, query: Record<string, string>): string | undefined {
  const values: Record<string, readonly string[]> = EXTENSION_VALUES[OPERATIONS[kind]]
  return Object.keys(query).find((name) => values[name]?.includes(query[name]!))
}

const maxId = (env: TestEnv, table: 'activity_logs' | 'admin_logs') =>
  (env.store.sqlite.prepare(`SELECT coalesce(max(id), 0) AS id FROM ${table}`).get() as { id: number }).id
const rowsAfter = (env: TestEnv, table: 'activity_logs' | 'admin_logs', id: number) =>
  env.store.sqlite.prepare(`SELECT * FROM ${table} WHERE id > ? ORDER BY id`).all(id) as Record<string, unknown>[]

/** The activity entries (any environment) written since `before`, extensions included, oldest first, as the API renders them. */
async function activitySince(fx: Fx, before: number, environment = 'production'): Promise<ActivityLog[]> {
  const { body } = await listActivity(fx, { limit: '100', extensions: 'true' }, { environment })
  return body.data.filter((e) => Number(e.id) > before).reverse()
}
async function adminSince(fx: Fx, before: number, project = 'Acme'): Promise<AdminLog[]> {
  const { body } = await listAdmin(fx, { limit: '100', extensions: 'true' }, { project })
  return body.data.filter((e) => Number(e.id) > before).reverse()
}

const environment = (name: string) => ({ object: 'environment' as const, name })
const team = (name: string) => ({ object: 'team' as const, name })
const collection = (name: string) => ({ object: 'collection' as const, name })

async function until<T>(what: string, probe: () => T | null | undefined | false, timeoutMs = 8_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = probe()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await Bun.sleep(10)
  }
}

// ── Activity: trellis apply ─────────────────────────────────────────────────

describe('activity log: records and notes written by trellis apply', () => {
  let fx: Fx
  const applyCtx = (actorEmail?: string) => ({ store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl, actorEmail })
  beforeAll(() => {
    fx = buildFx()
  })
  afterAll(() => fx.env.cleanup())

  test('the first apply: one create per record (first admin, oldest team allowed to edit), one createNote per imported note', async () => {
    const production = (await walk((q) => listActivity(fx, q))).entries.reverse()
    const summary = (e: ActivityLog) => [e.action, e.label, e.user.username, e.team.name, e.collection?.name, e.recordIds]
    expect(production.map(summary)).toEqual([
      // orders: Billing may not edit it, so Support (older teams first; Support is the oldest anyway).
      ['create', 'created by trellis apply', 'alice', 'Support', 'orders', ['ord_1001']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'orders', ['ord_1002']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'orders', ['ord_1003']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'customers', ['cus_001']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'customers', ['cus_002']],
      // Imports: the note's own user and team; the entry is the import (now), the note keeps its times.
      ...fx.env.store.sqlite
        .prepare(
          `SELECT n.record_id, u.username, t.name AS team, c.name AS coll FROM notes n JOIN users u ON u.id = n.user_id
           JOIN teams t ON t.id = n.team_id JOIN collections c ON c.id = n.collection_id JOIN environments e ON e.id = n.environment_id
           WHERE e.name = 'production' ORDER BY n.id`,
        )
        .all()
        .map((n) => {
          const row = n as { record_id: string; username: string; team: string; coll: string }
          return ['createNote', 'imported by trellis apply', row.username, row.team, row.coll, [row.record_id]]
        }),
    ])
    expect(production.every((e) => e.type === 'write' && e.workflow === undefined && e.environment.name === 'production')).toBe(true)
  })

  test('re-applying the same file writes no activity entry; a changed record writes one update', async () => {
    const before = maxId(fx.env, 'activity_logs')
    applyAcme(applyCtx(), acmeWithGlobex())
    expect(maxId(fx.env, 'activity_logs')).toBe(before)

    const document = acmeWithGlobex()
    document.projects[0]!.records![0]!.data = { status: 'refunded' }
    fx.env.clock.advance(5)
    applyAcme(applyCtx(), document)
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => [e.action, e.label, e.user.username, e.team.name, e.recordIds])).toEqual([
      ['update', 'updated by trellis apply', 'alice', 'Support', ['ord_1001']],
    ])
  })

  test('--as names the user; a record may name its team', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const document = acmeWithGlobex()
    document.projects[0]!.records!.push(
      { environment: 'production', collection: 'customers', id: 'cus_as', data: { n: 1 } },
      { environment: 'production', collection: 'customers', id: 'cus_team', data: { n: 2 }, team: 'Billing' },
    )
    applyAcme(applyCtx('Carol@Example.com'), document)
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => [e.action, e.user.username, e.team.name, e.recordIds])).toEqual([
      ['update', 'carol', 'Support', ['ord_1001']], // back to the file's data after the previous test
      ['create', 'carol', 'Support', ['cus_as']],
      ['create', 'carol', 'Billing', ['cus_team']],
    ])
  })

  test('an --as user who is unknown, not a member, or deactivated, or an unknown record team: an error, nothing written', async () => {
    const document = acmeWithGlobex()
    document.projects[0]!.records!.push({ environment: 'production', collection: 'customers', id: 'cus_never', data: {} })
    const snapshot = () => JSON.stringify(['records', 'activity_logs'].map((t) => tableContents(fx.env.store)[t]))
    const before = snapshot()
    const attempt = (actor: string | undefined, doc: AcmeDocument = document) => {
      try {
        applyAcme(applyCtx(actor), doc)
      } catch (error) {
        expect(error).toBeInstanceOf(ApplyError)
        return (error as Error).message
      }
      throw new Error('applied')
    }
    expect(attempt('nobody@example.com')).toBe('--as: unknown user nobody@example.com')
    applyDocument({ users: [{ email: 'outsider@example.com', username: 'outsider' }] }, applyCtx())
    expect(attempt('outsider@example.com')).toBe('--as: outsider@example.com is not a member of project Acme')
    writeTransaction(fx.env.store, (tx) => setUserDeactivated(tx, fx.env.clock, fx.users.dave.id, true, null))
    expect(attempt('dave@example.com')).toBe('--as: dave@example.com is deactivated')
    const badTeam = acmeWithGlobex()
    badTeam.projects[0]!.records!.push({ environment: 'production', collection: 'customers', id: 'cus_never', data: {}, team: 'Nobody' })
    expect(attempt(undefined, badTeam)).toBe('projects[0].records[7].team: unknown team Nobody')
    expect(snapshot()).toEqual(before)
  })

  test('a project with no admin, or no team allowed to edit the collection: an error naming the record, nothing written', () => {
    const snapshot = () => JSON.stringify(['records', 'activity_logs'].map((t) => tableContents(fx.env.store)[t]))
    const before = snapshot()
    const orphan = { environment: 'production', collection: 'tickets', id: 't1', data: {} }
    const noAdmin = { projects: [{ name: 'Orphans', environments: ['production'], teams: [{ name: 'Ops' }], collections: [{ name: 'tickets' }], records: [orphan] }] }
    expect(() => applyDocument(noAdmin, applyCtx())).toThrow(
      'projects[0].records[0]: project Orphans has no admin to attribute record changes to: add an admin member or pass --as EMAIL',
    )
    const readOnly = {
      projects: [
        {
          name: 'Orphans',
          environments: ['production'],
          teams: [{ name: 'Ops' }],
          members: [{ user: 'alice@example.com', role: 'admin' as const }],
          collections: [{ name: 'tickets', permissions: { Ops: { read: true, edit: false } } }],
          records: [orphan],
        },
      ],
    }
    expect(() => applyDocument(readOnly, applyCtx())).toThrow("projects[0].records[0].team: no team may edit tickets: name the record's team")
    expect(snapshot()).toEqual(before)
  })

  test('through the CLI: --as carol writes carol', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const file = `${fx.env.dataDir}/more.yaml`
    await Bun.write(file, 'projects:\n  - name: Acme\n    records:\n      - { environment: production, collection: customers, id: cus_cli, data: { a: 1 } }\n')
    const cli = await runCli(['apply', '-f', file, '--as', 'carol@example.com', '--data', fx.env.dataDir])
    expect({ code: cli.code, stderr: cli.stderr }).toEqual({ code: 0, stderr: '' })
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => [e.action, e.label, e.user.username, e.recordIds])).toEqual([['create', 'created by trellis apply', 'carol', ['cus_cli']]])
  })
})

// ── Activity: the notes API ─────────────────────────────────────────────────

describe('activity log: every notes API write is exactly one entry', () => {
  let fx: Fx
  beforeAll(() => {
    fx = buildFx()
  })
  afterAll(() => fx.env.cleanup())

  const write = (method: string, path: string, json: unknown, token = fx.alice) =>
    fx.app.handle(request(path, { method, headers: bearer(token), json })).then(async (r) => ({ status: r.status, body: (await r.json()) as { id: number } }))

  /** Runs `act`, then asserts the DB gained exactly the given actions and returns them as the API renders them. */
  async function expectEntries(act: () => Promise<unknown>, actions: string[]): Promise<ActivityLog[]> {
    const before = maxId(fx.env, 'activity_logs')
    fx.env.clock.advance(1_000)
    await act()
    expect(rowsAfter(fx.env, 'activity_logs', before).map((r) => r.action)).toEqual(actions)
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => e.action)).toEqual(actions)
    return entries
  }

  const base = () => ({
    object: 'activityLog' as const,
    id: expect.stringMatching(/^\d+$/),
    type: 'write' as const,
    recordIds: ['ord_1002'],
    createdAt: iso(fx.env.clock.now()),
    user: fx.users.alice,
    environment: environment('production'),
    team: team('Support'),
    collection: collection('orders'),
  })

  let noteId = 0

  test('note created → one createNote entry: alice, the note’s team, collection and record, no workflow', async () => {
    const [entry] = await expectEntries(async () => {
      const sent = await write('POST', notesPath(), { recordId: 'ord_1002', collectionName: 'orders', teamName: 'Support', title: 'Audit', content: '<p>x</p>' })
      expect(sent.status).toBe(201)
      noteId = sent.body.id
    }, ['createNote'])
    expect(entry).toEqual({ ...base(), action: 'createNote', label: 'created note "Audit"' })
  })

  test('message added → one createMessage entry', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('POST', `${notesPath()}/${noteId}/messages`, { content: '<p>more</p>' })).status).toBe(201)
    }, ['createMessage'])
    expect(entry).toEqual({ ...base(), action: 'createMessage', label: 'added a message to note "Audit"' })
  })

  test('renamed → one updateNote entry (extension)', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { title: 'Audit 2' })).status).toBe(200)
    }, ['updateNote'])
    expect(entry).toEqual({ ...base(), action: 'updateNote', label: 'renamed note "Audit" to "Audit 2"' })
  })

  test('archived → one archiveNote entry; archiving again writes nothing', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { archived: true })).status).toBe(200)
    }, ['archiveNote'])
    expect(entry).toEqual({ ...base(), action: 'archiveNote', label: 'archived note "Audit 2"' })
    await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { archived: true })).status).toBe(200)
    }, [])
  })

  test('unarchived → one unarchiveNote entry', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { archived: false })).status).toBe(200)
    }, ['unarchiveNote'])
    expect(entry).toEqual({ ...base(), action: 'unarchiveNote', label: 'unarchived note "Audit 2"' })
  })

  test('title and archive in one PATCH → one entry per effective change, 1 ms apart', async () => {
    const entries = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { title: 'Audit 3', archived: true })).status).toBe(200)
    }, ['updateNote', 'archiveNote'])
    // One clock reading, two entries: 1 ms apart, so createdAt paging never splits them ambiguously.
    expect(Date.parse(entries[1]!.createdAt) - Date.parse(entries[0]!.createdAt)).toBe(1)
    expect(entries[1]!.label).toBe('archived note "Audit 3"')
  })

  test('through which token: the label names the token (name and display prefix, never more of the value)', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('POST', `${notesPath()}/${noteId}/messages`, { content: '<p>which token?</p>' })).status).toBe(201)
    }, ['createMessage'])
    const stored = fx.env.store.sqlite.prepare('SELECT name, prefix FROM api_tokens WHERE prefix = ?').get(fx.alice.slice(0, 12)) as { name: string; prefix: string }
    expect(tokenOf.get(entry!)).toEqual(stored)
    const raw = (await (await fx.app.handle(request(activityPath({ limit: '1' }), { headers: bearer(fx.alice) }))).json()) as Page<ActivityLog>
    expect(raw.data[0]!.label).toBe(`${entry!.label} · token "${stored.name}" (${stored.prefix}…)`)
    expect(JSON.stringify(raw)).not.toContain(fx.alice.slice(12))
  })

  test('the acting user is the token’s user: carol writing in Billing (staging) is carol, in staging’s log only', async () => {
    const carol = tokenFor(fx.env.store, fx.env.clock, 'carol', ['notes:write', 'activity_logs:read']).value
    const before = maxId(fx.env, 'activity_logs')
    const sent = await write('POST', notesPath('staging'), { recordId: 'cus_900', collectionName: 'customers', teamName: 'Billing', title: 'Dunning?', content: '<p>?</p>' }, carol)
    expect(sent.status).toBe(201)
    expect(rowsAfter(fx.env, 'activity_logs', before)).toHaveLength(1)
    expect(await activitySince(fx, before)).toEqual([])
    const { body } = await listActivity(fx, { limit: '1' }, { environment: 'staging', token: carol })
    expect(body.data[0]).toMatchObject({
      action: 'createNote',
      label: 'created note "Dunning?"',
      user: fx.users.carol,
      environment: environment('staging'),
      team: team('Billing'),
      collection: collection('customers'),
      recordIds: ['cus_900'],
    })
  })

  test('a note write that fails (400, 403, 404) writes no entry', async () => {
    const reader = tokenFor(fx.env.store, fx.env.clock, 'alice', ['notes:read']).value
    const bob = tokenFor(fx.env.store, fx.env.clock, 'bob', ['all']).value
    const before = tableContents(fx.env.store)
    const note = { recordId: 'ord_1002', collectionName: 'orders', teamName: 'Support', title: 'x', content: '<p>x</p>' }
    expect((await write('POST', notesPath(), { ...note, teamName: 'Nope' })).status).toBe(400)
    expect((await write('POST', notesPath(), { ...note, collectionName: 'Nope' })).status).toBe(400)
    expect((await write('POST', notesPath(), { ...note, title: '' })).status).toBe(400)
    expect((await write('POST', `${notesPath()}/${noteId}/messages`, { content: '' })).status).toBe(400)
    expect((await write('PATCH', `${notesPath()}/${noteId}`, {})).status).toBe(400)
    expect((await write('POST', notesPath(), note, reader)).status).toBe(403)
    expect((await write('POST', notesPath(), note, bob)).status).toBe(403)
    expect((await write('PATCH', `${notesPath('staging')}/${noteId}`, { title: 'y' })).status).toBe(404)
    const after = tableContents(fx.env.store)
    for (const table of ['activity_logs', 'activity_log_records', 'notes', 'note_messages']) expect(after[table]).toEqual(before[table]!)
  })
})

// ── Activity: workflow runs (executor in-process, real clock) ──────────────

describe('activity log: workflow runs, and the auditor’s question', () => {
  let fx: Fx & { executor?: Executor }
  let executor: Executor
  let bob = ''
  let bobGlobex = ''
  let hook = ''
  let holdHook = ''

  const run = (id: string) => fx.env.store.sqlite.prepare('SELECT status FROM runs WHERE id = ?').get(id) as { status: string }
  const finished = (id: string) => until(`run ${id} to finish`, () => ['succeeded', 'failed', 'cancelled'].includes(run(id).status) && run(id))
  const trigger = async (path: string, token: string, recordId: string) => {
    const response = await fx.app.handle(request(path, { method: 'POST', headers: bearer(token), json: { record_id: recordId } }))
    return { status: response.status, body: (await response.json()) as { runId?: string; code?: string } }
  }

  beforeAll(() => {
    const document = acmeWithGlobex()
    acmeWorkflow(document, 'Refund order').steps[4]!.seconds = 1
    acmeWorkflow(document, 'Refund order').webhook = { enabled: true, ratePerMinute: 1000 }
    acmeProject(document).workflows!.push(
      ordersWorkflow('Long hold', [{ type: 'load' }, { type: 'wait', name: 'pause', seconds: 600 }, { type: 'update', set: { held: 'yes' } }], {
        webhook: { enabled: true, ratePerMinute: 1000 },
      }),
    )
    fx = buildFx({
      clock: systemClock,
      document,
      executor: (env) => new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20 }),
    })
    executor = fx.executor!
    hook = reportHook(fx.report, 'Refund order')
    holdHook = reportHook(fx.report, 'Long hold')
    bob = tokenFor(fx.env.store, systemClock, 'bob', ['workflows:trigger'], { name: 'erp' }).value
    bobGlobex = tokenFor(fx.env.store, systemClock, 'bob', ['all'], { project: 'Globex' }).value
    executor.start()
  })
  afterAll(async () => {
    await executor.stop(2_000)
    fx.env.cleanup()
  })

  test('ord_1001: who changed what, when, through which workflow run — from the activity log API alone', async () => {
    // alice leaves a note by hand, then the ERP (bob's token) triggers the refund through the webhook.
    const note = await fx.app.handle(
      request(notesPath(), { method: 'POST', headers: bearer(fx.alice), json: { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Customer asks for a refund', content: '<p>ok</p>' } }),
    )
    expect(note.status).toBe(201)
    const accepted = await trigger(hook, bob, 'ord_1001')
    expect(accepted.status).toBe(202)
    const runId = accepted.body.runId!
    expect(runId).toMatch(UUID)
    expect((await finished(runId)).status).toBe('succeeded')

    // The auditor: an admin's read-only token, one query by record.
    const auditor = tokenFor(fx.env.store, systemClock, 'carol', ['activity_logs:read']).value
    const { entries } = await walk((q) => listActivity(fx, q, { token: auditor }), { recordId: 'ord_1001' })
    const story = [...entries].reverse()
    const wf = (stepName?: string) => ({ object: 'workflow' as const, name: 'Refund order', runId, ...(stepName ? { stepName } : {}) })
    expect(story.map((e) => ({ action: e.action, label: e.label, user: e.user.username, workflow: e.workflow }))).toEqual([
      // The record itself came from the apply file: attributed to the project's first admin, labelled as apply.
      { action: 'create', label: 'created by trellis apply', user: 'alice', workflow: undefined },
      { action: 'createNote', label: 'created note "Customer asks for a refund"', user: 'alice', workflow: undefined },
      { action: 'triggerWorkflow', label: 'triggered via webhook', user: 'bob', workflow: wf() },
      { action: 'completeWorkflowStep', label: 'completed step 1-load (load)', user: 'bob', workflow: wf('1-load') },
      { action: 'completeWorkflowStep', label: 'completed step 2-condition (condition)', user: 'bob', workflow: wf('2-condition') },
      { action: 'update', label: 'updated status', user: 'bob', workflow: wf('3-update') },
      { action: 'completeWorkflowStep', label: 'completed step 3-update (update)', user: 'bob', workflow: wf('3-update') },
      { action: 'createNote', label: 'created note "Refund"', user: 'bob', workflow: wf('4-note') },
      { action: 'completeWorkflowStep', label: 'completed step 4-note (note)', user: 'bob', workflow: wf('4-note') },
      { action: 'completeWorkflowStep', label: 'completed step 5-wait (wait)', user: 'bob', workflow: wf('5-wait') },
      { action: 'completeWorkflow', label: 'workflow run succeeded', user: 'bob', workflow: wf() },
    ])
    for (const entry of story) {
      expect(entry).toMatchObject({
        type: 'write',
        recordIds: ['ord_1001'],
        environment: environment('production'),
        team: team('Support'),
        collection: collection('orders'),
      })
    }
    expect(story.slice(2).every((e) => e.user.id === fx.users.bob.id && e.user.email === 'bob@example.com')).toBe(true)
    // When: in id order, times never go back; the run's entries lie between trigger and completion.
    const times = story.map((e) => Date.parse(e.createdAt))
    expect(times).toEqual([...times].sort((a, b) => a - b))
    expect(times.at(-1)! - times[1]!).toBeGreaterThanOrEqual(1_000) // the 1 s wait step
    // What changed: the update alone, by record and action; and the run behind it, by its runId.
    const updates = await listActivity(fx, { recordId: 'ord_1001', action: 'update' }, { token: auditor })
    expect(updates.body.data.map((e) => e.workflow)).toEqual([wf('3-update')])
    const byRun = await fx.app.handle(request(`/v1/workflow-runs/${runId}`, { headers: bearer(fx.alice) }))
    expect(await byRun.json()).toMatchObject({ id: runId, status: 'succeeded', trigger: 'webhook', user: { username: 'bob' }, workflow: { name: 'Refund order', version: 1 } })
    // Nothing about ord_1001 leaks into another environment's log.
    expect((await listActivity(fx, { recordId: 'ord_1001' }, { environment: 'staging', token: auditor })).body.data).toEqual([])
  })

  test('manual trigger → label "triggered manually", user the caller (alice)', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const response = await fx.app.handle(
      request('/v1/project/Acme/environment/production/workflow-runs', {
        method: 'POST',
        headers: bearer(fx.alice),
        json: { workflowName: 'Refund order', teamName: 'Support', recordId: 'ord_1002' },
      }),
    )
    expect(response.status).toBe(202)
    const { runId } = (await response.json()) as { runId: string }
    expect((await finished(runId)).status).toBe('succeeded')
    const entries = await activitySince(fx, before)
    // ord_1002 is pending: the condition ends the run after two steps.
    expect(entries.map((e) => [e.action, e.label, e.user.username, e.workflow?.runId, e.workflow?.stepName])).toEqual([
      ['triggerWorkflow', 'triggered manually', 'alice', runId, undefined],
      ['completeWorkflowStep', 'completed step 1-load (load)', 'alice', runId, '1-load'],
      ['completeWorkflowStep', 'completed step 2-condition (condition)', 'alice', runId, '2-condition'],
      ['completeWorkflow', 'workflow run succeeded', 'alice', runId, undefined],
    ])
  })

  test('a failed run → one failWorkflow entry (extension) for the token’s user, no step entry for the failed step', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const accepted = await trigger(hook, bob, 'ord_missing')
    const runId = accepted.body.runId!
    expect((await finished(runId)).status).toBe('failed')
    const entries = await activitySince(fx, before)
    expect(entries).toEqual([
      expect.objectContaining({ action: 'triggerWorkflow', user: fx.users.bob, recordIds: ['ord_missing'] }),
      {
        object: 'activityLog',
        id: expect.any(String),
        type: 'write',
        action: 'failWorkflow',
        label: 'workflow run failed: record_not_found',
        recordIds: ['ord_missing'],
        createdAt: expect.stringMatching(ISO_UTC_MS),
        user: fx.users.bob,
        environment: environment('production'),
        team: team('Support'),
        collection: collection('orders'),
        workflow: { object: 'workflow', name: 'Refund order', runId },
      },
    ])
    const failed = await listActivity(fx, { action: 'failWorkflow', extensions: 'true' })
    expect(failed.body.data.map((e) => e.workflow!.runId)).toEqual([runId])
    // An extension entry: not listed without extensions=true, and filtering on it without that is a 400.
    expect((await listActivity(fx, { limit: '100' })).body.data.map((e) => e.action)).not.toContain('failWorkflow')
    expectError(await listActivity(fx, { action: 'failWorkflow' }), 400, 'invalid_parameter', 'action')
  })

  test('a cancelled run → one abortWorkflow entry for the canceller; 409s (record busy, run finished) write nothing', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const runId = (await trigger(holdHook, bob, 'ord_1003')).body.runId!
    await until('the run to park on its wait', () => run(runId).status === 'waiting')
    const parked = maxId(fx.env, 'activity_logs')

    // One active run per record: the second trigger is a 409 and writes nothing.
    const busy = await trigger(holdHook, bob, 'ord_1003')
    expect(busy).toMatchObject({ status: 409, body: { code: 'run_in_progress', runId } })
    const busyManual = await fx.app.handle(
      request('/v1/project/Acme/environment/production/workflow-runs', {
        method: 'POST',
        headers: bearer(fx.alice),
        json: { workflowName: 'Long hold', teamName: 'Support', recordId: 'ord_1003' },
      }),
    )
    expect(busyManual.status).toBe(409)
    expect(maxId(fx.env, 'activity_logs')).toBe(parked)

    const cancelled = await fx.app.handle(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: bearer(bob) }))
    expect(cancelled.status).toBe(200)
    expect(run(runId).status).toBe('cancelled')
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => [e.action, e.user.username, e.workflow?.stepName])).toEqual([
      ['triggerWorkflow', 'bob', undefined],
      ['completeWorkflowStep', 'bob', '1-load'],
      ['completeWorkflowStep', 'bob', 'pause'],
      ['abortWorkflow', 'bob', undefined],
    ])
    expect(entries.at(-1)).toMatchObject({ label: 'workflow run cancelled', workflow: { object: 'workflow', name: 'Long hold', runId }, recordIds: ['ord_1003'] })

    // Cancelling again: 409 run_finished, nothing written.
    const after = maxId(fx.env, 'activity_logs')
    const again = await fx.app.handle(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: bearer(bob) }))
    expect(again.status).toBe(409)
    expect(((await again.json()) as ErrorObject).code).toBe('run_finished')
    expect(maxId(fx.env, 'activity_logs')).toBe(after)
  })

  test('a webhook refused before the run (wrong project token, bad body) writes nothing', async () => {
    const before = tableContents(fx.env.store)
    expect((await trigger(hook, bobGlobex, 'ord_1003')).status).toBe(403)
    const bad = await fx.app.handle(request(hook, { method: 'POST', headers: bearer(bob), json: { record_id: '' } }))
    expect(bad.status).toBe(400)
    const after = tableContents(fx.env.store)
    for (const table of ['activity_logs', 'activity_log_records', 'runs']) expect(after[table]).toEqual(before[table]!)
  })
})

// ── Admin log: every administrative act ────────────────────────────────────

describe('admin log: every administrative act is exactly one entry', () => {
  let fx: Fx
  const secrets: string[] = []
  beforeAll(() => {
    fx = buildFx()
    // The CLI commands below run in their own process on the real clock: keep the test clock ahead of it, so that
    // entries written here carry the test clock's time (an entry never takes a time before the latest one).
    fx.env.clock.set(Math.max(fx.env.clock.now(), Date.now()) + 86_400_000)
  })
  afterAll(() => fx.env.cleanup())

  const manage = async (method: string, path: string, json?: unknown, token = fx.alice) => {
    const response = await fx.app.handle(request(path, { method, headers: bearer(token), json }))
    const text = await response.text()
    return { status: response.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> }
  }

  /** Runs `act`, asserts exactly `count` new admin rows per project and returns Acme's new entries (API), oldest first. */
  async function expectAdmin(act: () => unknown, count: number, project = 'Acme'): Promise<AdminLog[]> {
    const before = maxId(fx.env, 'admin_logs')
    fx.env.clock.advance(1_000)
    await act()
    const rows = rowsAfter(fx.env, 'admin_logs', before)
    const pid = projectId(fx.env.store, project)
    expect(rows.filter((r) => r.project_id === pid)).toHaveLength(count)
    const entries = await adminSince(fx, before, project)
    expect(entries).toHaveLength(count)
    return entries
  }

  const aliceActor = () => fx.users.alice

  test('apply: environments and teams created, members added with permission level and teams — initiator administrator, no user', async () => {
    const { body } = await listAdmin(fx, { limit: '100' })
    const fromApply = body.data.filter((e) => e.resource !== 'api-token').reverse()
    for (const entry of fromApply) {
      expect(entry.initiator).toBe('administrator')
      expect('user' in entry).toBe(false)
    }
    expect(fromApply.filter((e) => e.resource === 'environment').map((e) => [e.type, e.newValue])).toEqual([
      ['add', { name: 'production', codeCustomizationVersion: 0 }],
      ['add', { name: 'staging', codeCustomizationVersion: 0 }],
    ])
    expect(fromApply.filter((e) => e.resource === 'team').map((e) => [e.type, e.newValue])).toEqual([
      ['add', { name: 'Support' }],
      ['add', { name: 'Billing' }],
    ])
    // One `add` per member, whose newValue is the compatibility document's user-project value. Apply adds
    // members before team memberships, so each member's story starts with the add (no teams yet).
    const adds = fromApply.filter((e) => e.resource === 'user-project' && e.type === 'add')
    expect(adds.map((e) => e.newValue)).toEqual([
      { user: fx.users.alice, permissionLevel: 'admin', teams: [] },
      { user: fx.users.bob, permissionLevel: 'editor', teams: [] },
      { user: fx.users.carol, permissionLevel: 'admin', teams: [] },
      { user: fx.users.dave, permissionLevel: 'user', teams: [] },
    ])
    expect(adds.every((e) => !('previousValue' in e))).toBe(true)
    // Each team membership is recorded too (as a user-project update: teams before → after).
    const teamUpdates = fromApply.filter((e) => e.resource === 'user-project' && e.type === 'update')
    expect(teamUpdates.map((e) => [(e.newValue!.user as UserObject).username, e.newValue!.teams])).toEqual([
      ['alice', [team('Support')]],
      ['bob', [team('Support')]],
      ['carol', [team('Billing')]],
      ['dave', [team('Billing')]],
    ])
    // Globex's own log has its own entries, and Acme's none of them.
    const globex = await listAdmin(fx, { limit: '100', resource: 'environment' }, { project: 'Globex' })
    expect(globex.body.data.map((e) => e.newValue)).toEqual([{ name: 'production', codeCustomizationVersion: 0 }])
  })

  test('re-applying the same file writes no admin entry', async () => {
    await expectAdmin(() => applyAcme({ store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl }, acmeWithGlobex()), 0)
  })

  test('apply: an environment and a team created, a team member added → one entry each', async () => {
    const entries = await expectAdmin(
      () =>
        applyDocument(
          { projects: [{ name: 'Acme', environments: ['qa'], teams: [{ name: 'Audit' }, { name: 'Support', members: ['dave@example.com'] }] }] },
          { store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl },
        ),
      3,
    )
    expect(entries.map((e) => [e.type, e.resource, e.previousValue, e.newValue])).toEqual([
      ['add', 'environment', undefined, { name: 'qa', codeCustomizationVersion: 0 }],
      ['add', 'team', undefined, { name: 'Audit' }],
      [
        'update',
        'user-project',
        { user: fx.users.dave, permissionLevel: 'user', teams: [team('Billing')] },
        { user: fx.users.dave, permissionLevel: 'user', teams: [team('Billing'), team('Support')] },
      ],
    ])
  })

  test('member added through the CLI → add user-project, initiator administrator, no user', async () => {
    applyDocument({ users: [{ email: 'erin@example.com', username: 'erin' }] }, { store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl })
    const [entry] = await expectAdmin(async () => {
      const cli = await runCli(['member', 'set', '--project', 'Acme', '--user', 'erin@example.com', '--role', 'editor', '--data', fx.env.dataDir])
      expect({ code: cli.code, stderr: cli.stderr }).toEqual({ code: 0, stderr: '' })
    }, 1)
    expect(entry).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'add',
      resource: 'user-project',
      initiator: 'administrator',
      createdAt: expect.stringMatching(ISO_UTC_MS),
      newValue: { user: userObject(fx.env, 'erin'), permissionLevel: 'editor', teams: [] },
    })
  })

  test('role changed by an admin → update user-project with previous and new permission level, user the admin; unchanged → nothing', async () => {
    const erin = userObject(fx.env, 'erin')
    const set = (role: 'developer') =>
      writeTransaction(fx.env.store, (tx) =>
        setProjectMember(tx, fx.env.clock, { projectId: projectId(fx.env.store, 'Acme'), userId: erin.id, role, actorId: fx.users.alice.id }),
      )
    const [entry] = await expectAdmin(() => expect(set('developer')).toBe('updated'), 1)
    expect(entry).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'update',
      resource: 'user-project',
      initiator: 'administrator',
      createdAt: iso(fx.env.clock.now()),
      user: aliceActor(),
      previousValue: { user: erin, permissionLevel: 'editor', teams: [] },
      newValue: { user: erin, permissionLevel: 'developer', teams: [] },
    })
    await expectAdmin(() => expect(set('developer')).toBe('unchanged'), 0)
  })

  test('token created and revoked through the API → api-token add / remove by alice, only the prefix in the values', async () => {
    let created: Record<string, unknown> = {}
    const [add] = await expectAdmin(async () => {
      const sent = await manage('POST', '/v1/account/tokens', { name: 'reporting', projectName: 'Acme', scopes: ['notes:read', 'activity_logs:read'] })
      expect(sent.status).toBe(201)
      created = sent.body
    }, 1)
    const value = created.token as string
    const prefix = created.prefix as string
    secrets.push(value, value.slice(4), value.slice(prefix.length), createHash('sha256').update(value).digest('hex'))
    const description = `reporting (${prefix}…) of alice@example.com, scopes notes:read activity_logs:read`
    expect(add).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'add',
      resource: 'api-token',
      initiator: 'administrator',
      createdAt: iso(fx.env.clock.now()),
      user: aliceActor(),
      newValue: { name: description },
    })
    const [remove] = await expectAdmin(async () => {
      expect((await manage('DELETE', `/v1/account/tokens/${created.id}`)).status).toBe(204)
    }, 1)
    expect(remove).toMatchObject({ type: 'remove', resource: 'api-token', user: aliceActor(), previousValue: { name: description } })
    expect('newValue' in remove!).toBe(false)
    // Revoking again: 404, nothing written.
    await expectAdmin(async () => expect((await manage('DELETE', `/v1/account/tokens/${created.id}`)).status).toBe(404), 0)
  })

  test('an admin revokes another user’s token (project API access settings) → remove api-token, user the admin', async () => {
    const bobs = tokenFor(fx.env.store, fx.env.clock, 'bob', ['notes:read'], { name: 'bob-erp' })
    secrets.push(bobs.value, bobs.token.tokenHash)
    const [remove] = await expectAdmin(async () => {
      expect((await manage('DELETE', `/v1/project/Acme/api-tokens/${bobs.token.id}`)).status).toBe(204)
    }, 1)
    expect(remove).toMatchObject({ type: 'remove', resource: 'api-token', user: aliceActor() })
    expect(remove!.previousValue!.name).toStartWith(`bob-erp (${bobs.token.prefix}…) of bob@example.com`)
  })

  test('webhook disabled / enabled / rate changed / regenerated → one workflow-webhook entry each; unchanged → none', async () => {
    const webhook = '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/webhook'
    const oldUrl = fx.report.workflows.find((w) => w.name === 'Refund order')!.webhook.url!
    secrets.push(new URL(oldUrl).pathname)
    const describeAs = (state: string, rate: string, generation: number) => ({ name: `Refund order: webhook ${state}, ${rate}, URL generation ${generation}` })
    const steps: [unknown, number, string, [string, string, number], [string, string, number]][] = [
      [{ enabled: false }, 200, 'PATCH', ['enabled', '60/min', 1], ['disabled', '60/min', 1]],
      [{ enabled: true }, 200, 'PATCH', ['disabled', '60/min', 1], ['enabled', '60/min', 1]],
      [{ ratePerMinute: 120 }, 200, 'PATCH', ['enabled', '60/min', 1], ['enabled', '120/min', 1]],
      [{ ratePerMinute: null }, 200, 'PATCH', ['enabled', '120/min', 1], ['enabled', 'default rate', 1]],
      [null, 200, 'POST', ['enabled', 'default rate', 1], ['enabled', 'default rate', 2]],
    ]
    for (const [json, status, method, before, after] of steps) {
      const [entry] = await expectAdmin(async () => {
        const sent = method === 'POST' ? await manage('POST', `${webhook}/regenerate`) : await manage('PATCH', webhook, json)
        expect(sent.status).toBe(status)
        if (sent.body?.url) secrets.push(new URL(sent.body.url as string).pathname)
      }, 1)
      expect(entry).toEqual({
        object: 'adminLog',
        id: expect.any(String),
        type: 'update',
        resource: 'workflow-webhook',
        initiator: 'administrator',
        createdAt: iso(fx.env.clock.now()),
        user: aliceActor(),
        previousValue: describeAs(...before),
        newValue: describeAs(...after),
      })
    }
    await expectAdmin(async () => expect((await manage('PATCH', webhook, { enabled: true })).status).toBe(200), 0)
    // Two effective changes in one PATCH: two entries.
    await expectAdmin(async () => expect((await manage('PATCH', webhook, { enabled: false, ratePerMinute: 30 })).status).toBe(200), 2)
    await expectAdmin(async () => expect((await manage('PATCH', webhook, { enabled: true })).status).toBe(200), 1)
  })

  test('workflow published → add workflow v1; republished unchanged → nothing; changed → update v1 → v2', async () => {
    const path = '/v1/project/Acme/environment/production/team/Support/workflows/Audit%20me'
    const [created] = await expectAdmin(async () => {
      const sent = await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }] })
      expect(sent.body).toMatchObject({ outcome: 'created', version: 1 })
    }, 1)
    expect(created).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'add',
      resource: 'workflow',
      initiator: 'administrator',
      createdAt: iso(fx.env.clock.now()),
      user: aliceActor(),
      newValue: { name: 'Audit me v1' },
    })
    await expectAdmin(async () => expect((await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }] })).body).toMatchObject({ outcome: 'unchanged' }), 0)
    const [published] = await expectAdmin(async () => {
      const sent = await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }, { type: 'wait', seconds: 5 }] })
      expect(sent.body).toMatchObject({ outcome: 'published', version: 2 })
    }, 1)
    expect(published).toMatchObject({ type: 'update', resource: 'workflow', user: aliceActor(), previousValue: { name: 'Audit me v1' }, newValue: { name: 'Audit me v2' } })
    // Enabling its webhook in the definition: the trigger change alone.
    const [trigger] = await expectAdmin(async () => {
      const sent = await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }, { type: 'wait', seconds: 5 }], webhook: { enabled: true } })
      expect(sent.body).toMatchObject({ outcome: 'unchanged', version: 2 })
      secrets.push(new URL((sent.body.webhook as { url: string }).url).pathname)
    }, 1)
    expect(trigger).toMatchObject({ resource: 'workflow-webhook', previousValue: { name: 'Audit me: webhook disabled, default rate' }, newValue: { name: 'Audit me: webhook enabled, default rate' } })
  })

  test('user deactivated / reactivated → resource user, one entry in each project of the user', async () => {
    const bob = fx.users.bob
    for (const [deactivate, actorId, from, to] of [
      [true, fx.users.alice.id, 'active', 'deactivated'],
      [false, null, 'deactivated', 'active'],
    ] as const) {
      const acmeBefore = maxId(fx.env, 'admin_logs')
      fx.env.clock.advance(1_000)
      if (actorId === null) {
        // The operator through the CLI.
        const cli = await runCli(['user', 'enable', '--email', 'bob@example.com', '--data', fx.env.dataDir])
        expect(cli.code).toBe(0)
      } else {
        expect(writeTransaction(fx.env.store, (tx) => setUserDeactivated(tx, fx.env.clock, bob.id, deactivate, actorId))).toBe(true)
      }
      for (const project of ['Acme', 'Globex']) {
        const entries = await adminSince(fx, acmeBefore, project)
        expect({ project, entries }).toEqual({
          project,
          entries: [
            {
              object: 'adminLog',
              id: expect.any(String),
              type: 'update',
              resource: 'user',
              initiator: 'administrator',
              createdAt: expect.stringMatching(ISO_UTC_MS),
              ...(actorId === null ? {} : { user: aliceActor() }),
              previousValue: { name: `bob@example.com ${from}` },
              newValue: { name: `bob@example.com ${to}` },
            },
          ],
        })
      }
      expect(rowsAfter(fx.env, 'admin_logs', acmeBefore)).toHaveLength(2)
    }
    // dave is only in Acme: one entry.
    const before = maxId(fx.env, 'admin_logs')
    writeTransaction(fx.env.store, (tx) => setUserDeactivated(tx, fx.env.clock, fx.users.dave.id, true, fx.users.alice.id))
    expect(rowsAfter(fx.env, 'admin_logs', before).map((r) => r.resource)).toEqual(['user'])
    // Already deactivated: nothing.
    expect(writeTransaction(fx.env.store, (tx) => setUserDeactivated(tx, fx.env.clock, fx.users.dave.id, true, fx.users.alice.id))).toBe(false)
    expect(maxId(fx.env, 'admin_logs')).toBe(before + 1)
  })

  test('never a secret: no token value, token hash or webhook signature anywhere in the admin log (API body or table)', async () => {
    expect(secrets.length).toBeGreaterThanOrEqual(8)
    const { entries } = await walk((q) => listAdmin(fx, { ...q, extensions: 'true' }))
    const text = JSON.stringify(entries)
    const table = JSON.stringify(fx.env.store.sqlite.prepare('SELECT * FROM admin_logs').all())
    for (const secret of secrets) {
      expect({ secret, inApi: text.includes(secret), inTable: table.includes(secret) }).toEqual({ secret, inApi: false, inTable: false })
    }
    // The signature part of a webhook URL alone is not there either.
    for (const path of secrets.filter((s) => s.startsWith('/v1/hooks/'))) expect(text).not.toContain(path.split('.').at(-1)!)
  })

  test('every entry: initiator administrator (people and CLI), a user exactly when a person acted through the API', async () => {
    const { entries } = await walk((q) => listAdmin(fx, { ...q, extensions: 'true' }))
    expect(entries.length).toBeGreaterThan(25)
    expect(new Set(entries.map((e) => e.initiator))).toEqual(new Set(['administrator']))
    expect(entries.filter((e) => e.user !== undefined).every((e) => e.user!.id === fx.users.alice.id)).toBe(true)
  })
})

// ── A failed transaction writes no entry ────────────────────────────────────

describe('a failed transaction writes no log entry', () => {
  let fx: Fx
  beforeAll(() => {
    fx = buildFx()
  })
  afterAll(() => fx.env.cleanup())

  const logTables = ['activity_logs', 'activity_log_records', 'admin_logs']
  function expectNothingWritten(before: Record<string, unknown[]>, tables = logTables) {
    const after = tableContents(fx.env.store)
    for (const table of tables) expect({ table, rows: after[table] }).toEqual({ table, rows: before[table]! })
  }

  test('409 webhook conflict: the second trigger writes neither a run nor an entry', async () => {
    const bob = tokenFor(fx.env.store, fx.env.clock, 'bob', ['workflows:trigger']).value
    const hook = reportHook(fx.report, 'Refund order')
    const post = () => fx.app.handle(request(hook, { method: 'POST', headers: bearer(bob), json: { record_id: 'ord_1003' } }))
    expect((await post()).status).toBe(202)
    const before = tableContents(fx.env.store)
    const conflict = await post()
    expect(conflict.status).toBe(409)
    expectNothingWritten(before, [...logTables, 'runs'])
  })

  test('an apply file with an error at its very end changes nothing (no admin entry for the valid parts before it)', () => {
    const before = tableContents(fx.env.store)
    const document = {
      users: [{ email: 'zed@example.com', username: 'zed' }],
      projects: [
        {
          name: 'Acme',
          environments: ['qa'],
          teams: [{ name: 'Audit', members: ['zed@example.com'] }],
          members: [
            { user: 'zed@example.com', role: 'admin' },
            { user: 'nobody@example.com', role: 'admin' },
          ],
        },
      ],
    }
    expect(() => applyDocument(document, { store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl })).toThrow(ApplyError)
    expect(tableContents(fx.env.store)).toEqual(before)
  })

  test('management calls that fail (400, 404) write no admin entry', async () => {
    const before = tableContents(fx.env.store)
    const call = (method: string, path: string, json?: unknown) => fx.app.handle(request(path, { method, headers: bearer(fx.alice), json })).then((r) => r.status)
    const workflows = '/v1/project/Acme/environment/production/team/Support/workflows'
    expect(await call('PUT', `${workflows}/Broken`, { collection: 'nope', steps: [{ type: 'load' }] })).toBe(400)
    expect(await call('PUT', `${workflows}/Broken`, { collection: 'orders', steps: [] })).toBe(400)
    expect(await call('PUT', '/v1/project/Acme/environment/production/team/Nope/workflows/Broken', { collection: 'orders', steps: [{ type: 'load' }] })).toBe(400)
    expect(await call('PATCH', `${workflows}/Nope/webhook`, { enabled: false })).toBe(404)
    expect(await call('PATCH', `${workflows}/Refund%20order/webhook`, { enabled: false, ratePerMinute: 0 })).toBe(400)
    expect(await call('POST', '/v1/account/tokens', { name: 'x', projectName: 'Acme', scopes: ['nope'] })).toBe(400)
    expect(await call('DELETE', '/v1/account/tokens/999999')).toBe(404)
    expectNothingWritten(before, [...logTables, 'workflows', 'workflow_versions', 'webhook_triggers'])
    expect(tableContents(fx.env.store).api_tokens).toHaveLength(before.api_tokens!.length)
  })

  test('a transaction that throws after appending rolls the entry back', () => {
    const before = tableContents(fx.env.store)
    const acme = projectId(fx.env.store, 'Acme')
    const production = (fx.env.store.sqlite.prepare("SELECT id FROM environments WHERE project_id = ? AND name = 'production'").get(acme) as { id: number }).id
    expect(() =>
      writeTransaction(fx.env.store, (tx) => {
        appendActivityLog(tx, fx.env.clock, { environmentId: production, type: 'write', action: 'update', userId: fx.users.alice.id, teamId: null, collectionId: null, recordIds: ['r1', 'r2'] })
        appendAdminLog(tx, fx.env.clock, { projectId: acme, type: 'update', resource: 'team', actorId: fx.users.alice.id, newValue: { name: 'x' } })
        throw new Error('boom')
      }),
    ).toThrow('boom')
    expectNothingWritten(before)
  })
})

// ── Lists: filters, enums, limit, order, hasMore ────────────────────────────

describe('GET …/activity-logs and …/admin-logs: filters, limit, order, hasMore, access', () => {
  let fx: Fx
  const T = Date.UTC(2026, 11, 1, 8, 0, 0)
  const tokens = {} as Record<
    'activity' | 'admin' | 'readOnly' | 'notesRead' | 'notesWrite' | 'trigger' | 'bobAll' | 'daveAll' | 'revoked',
    string
  >
  /** Every seeded entry, extensions included (`extensions=true`), and the ones a default call lists. */
  let production: ActivityLog[] = []
  let adminAll: AdminLog[] = []
  let productionDocumented: ActivityLog[] = []
  let adminDocumented: AdminLog[] = []

  beforeAll(async () => {
    fx = buildFx()
    const { env } = fx
    const make = (user: string, scopes: Scope[], project?: string) => tokenFor(env.store, env.clock, user, scopes, { project })
    tokens.activity = make('alice', ['activity_logs:read']).value
    tokens.admin = make('alice', ['admin_logs:read']).value
    tokens.readOnly = make('alice', ['activity_logs:read', 'admin_logs:read', 'notes:read']).value
    tokens.notesRead = make('alice', ['notes:read']).value
    tokens.notesWrite = make('alice', ['notes:write']).value
    tokens.trigger = make('alice', ['workflows:trigger']).value
    tokens.bobAll = make('bob', ['all']).value
    tokens.daveAll = make('dave', ['all']).value
    const revoked = make('alice', ['all'])
    tokens.revoked = revoked.value
    writeTransaction(env.store, (tx) => revokeToken(tx, env.clock, revoked.token, null))
    // The seed below is the whole activity log: set the apply file's own entries aside (deleting is what
    // retention does; nothing updates an entry).
    env.store.sqlite.exec('DELETE FROM activity_logs')

    // Seed: 48 production + 6 staging activity entries spread over users, teams, collections, actions, types and
    // records, three per millisecond-exact time (ties); 36 admin entries likewise. Straight through the services.
    const q = (sql: string, ...p: string[]) => (env.store.sqlite.prepare(sql).get(...p) as { id: number }).id
    const acme = projectId(env.store, 'Acme')
    const envId = (name: string) => q('SELECT id FROM environments WHERE project_id = ? AND name = ?', String(acme), name)
    const teamId = (name: string) => q('SELECT id FROM teams WHERE project_id = ? AND name = ?', String(acme), name)
    const collectionId = (name: string) => q('SELECT id FROM collections WHERE project_id = ? AND name = ?', String(acme), name)
    const users = ['alice', 'bob', 'carol', 'dave'] as const
    const actions = ['create', 'update', 'delete', 'createNote', 'createMessage', 'triggerWorkflow', 'completeWorkflowStep', 'updateNote', 'failWorkflow'] as const
    for (let i = 0; i < 54; i++) {
      env.clock.set(T + Math.floor(i / 3) * 1_000)
      const read = i % 7 === 3
      writeTransaction(env.store, (tx) =>
        appendActivityLog(tx, env.clock, {
          environmentId: envId(i >= 48 ? 'staging' : 'production'),
          type: read ? 'read' : 'write',
          action: read ? 'read' : actions[i % actions.length]!,
          label: `seed ${i}`,
          userId: fx.users[users[i % 4]!].id,
          teamId: teamId(i % 3 === 0 ? 'Billing' : 'Support'),
          collectionId: i % 5 === 4 ? null : collectionId(i % 2 === 0 ? 'orders' : 'customers'),
          recordIds: i % 6 === 0 ? ['rec-a', 'rec-b'] : i === 13 ? ['ünï|42'] : [`rec-${i % 4}`],
          ...(i % 4 === 1 ? { workflow: { name: 'Refund order', runId: `run-${i}`, ...(i % 8 === 1 ? { stepName: '1-load' } : {}) } } : {}),
        }),
      )
    }
    const types = ['add', 'remove', 'update', 'initial'] as const
    for (let i = 0; i < 36; i++) {
      env.clock.set(T + Math.floor(i / 3) * 1_000)
      writeTransaction(env.store, (tx) =>
        appendAdminLog(tx, env.clock, {
          projectId: acme,
          type: types[i % 4]!,
          resource: ADMIN_LOG_RESOURCES[i % ADMIN_LOG_RESOURCES.length]!,
          initiator: i % 6 === 5 ? 'system' : i % 5 === 0 ? 'identityProvider' : 'administrator',
          actorId: i % 6 === 5 ? null : fx.users[i % 2 === 0 ? 'alice' : 'carol'].id,
          previousValue: i % 2 === 0 ? { name: `before ${i}` } : undefined,
          newValue: { name: `after ${i}` },
        }),
      )
    }
    env.clock.set(T + 3_600_000)
    production = (await walk((query) => listActivity(fx, { ...query, extensions: 'true' }))).entries
    adminAll = (await walk((query) => listAdmin(fx, { ...query, extensions: 'true' }))).entries
    productionDocumented = production.filter((e) => !isExtension(e))
    adminDocumented = adminAll.filter((e) => !isExtension(e))
  })
  afterAll(() => fx.env.cleanup())

  test('the seeded entries render exactly (labels, record ids, optional collection and workflow)', () => {
    expect(production).toHaveLength(48)
    // Seeds 7, 8 (mod 9) that are not reads are updateNote / failWorkflow; admin seeds 4…8 (mod 9) or initiator system.
    expect(production.length - productionDocumented.length).toBe(9)
    expect(adminAll.length - adminDocumented.length).toBeGreaterThan(15)
    expect(adminDocumented.length).toBeGreaterThan(10)
    const ids = production.map((e) => Number(e.id))
    expect(ids).toEqual([...ids].sort((a, b) => b - a))
    const entry = (i: number) => production.find((e) => e.label === `seed ${i}`)!
    expect(entry(0)).toEqual({
      object: 'activityLog',
      id: expect.any(String),
      type: 'write',
      action: 'create',
      label: 'seed 0',
      recordIds: ['rec-a', 'rec-b'],
      createdAt: iso(T),
      user: fx.users.alice,
      environment: environment('production'),
      team: team('Billing'),
      collection: collection('orders'),
    })
    expect(entry(9)).toMatchObject({ action: 'create', createdAt: iso(T + 3_000), workflow: { object: 'workflow', name: 'Refund order', runId: 'run-9', stepName: '1-load' } })
    expect(entry(5).workflow).toEqual({ object: 'workflow', name: 'Refund order', runId: 'run-5' })
    expect('collection' in entry(4)).toBe(false)
    expect(entry(3)).toMatchObject({ type: 'read', action: 'read' })
    expect(entry(13).recordIds).toEqual(['ünï|42'])
    expect(adminAll.filter((e) => e.newValue?.name?.toString().startsWith('after '))).toHaveLength(36)
    const system = adminAll.find((e) => e.newValue?.name === 'after 5')!
    expect(system).toMatchObject({ initiator: 'system', resource: ADMIN_LOG_RESOURCES[5] })
    expect('user' in system).toBe(false)
  })

  // ── Filters, each alone and combined, against the full list ──

  type ActivityCase = [string, Record<string, string>, (e: ActivityLog) => boolean]
  const at = (k: number) => iso(T + k * 1_000)
  const time = (e: { createdAt: string }) => Date.parse(e.createdAt)
  const activityCases = (): ActivityCase[] => [
    ['userEmail', { userEmail: 'bob@example.com' }, (e) => e.user.username === 'bob'],
    ['userEmail (case-insensitive)', { userEmail: 'Carol@Example.COM' }, (e) => e.user.username === 'carol'],
    ['userId', { userId: String(fx.users.dave.id) }, (e) => e.user.username === 'dave'],
    ['teamName', { teamName: 'Billing' }, (e) => e.team.name === 'Billing'],
    ['collectionName', { collectionName: 'customers' }, (e) => e.collection?.name === 'customers'],
    ['recordId (one of several)', { recordId: 'rec-b' }, (e) => e.recordIds.includes('rec-b')],
    ['recordId', { recordId: 'rec-3' }, (e) => e.recordIds.includes('rec-3')],
    ['recordId unicode composite', { recordId: 'ünï|42' }, (e) => e.recordIds.includes('ünï|42')],
    ['action', { action: 'createNote' }, (e) => e.action === 'createNote'],
    ['action (extension)', { action: 'failWorkflow' }, (e) => e.action === 'failWorkflow'],
    ['action read', { action: 'read' }, (e) => e.action === 'read'],
    ['type read', { type: 'read' }, (e) => e.type === 'read'],
    ['type write', { type: 'write' }, (e) => e.type === 'write'],
    ['createdAt.eq (the first of three written at one clock reading)', { 'createdAt.eq': at(4) }, (e) => time(e) === T + 4_000],
    ['createdAt.lt', { 'createdAt.lt': at(4) }, (e) => time(e) < T + 4_000],
    ['createdAt.lte', { 'createdAt.lte': at(4) }, (e) => time(e) <= T + 4_000],
    ['createdAt.gt', { 'createdAt.gt': at(4) }, (e) => time(e) > T + 4_000],
    ['createdAt.gte', { 'createdAt.gte': at(4) }, (e) => time(e) >= T + 4_000],
    ['createdAt range', { 'createdAt.gt': at(2), 'createdAt.lte': at(9) }, (e) => time(e) > T + 2_000 && time(e) <= T + 9_000],
    ['userEmail + userId of the same user', { userEmail: 'alice@example.com', userId: String(fx.users.alice.id) }, (e) => e.user.username === 'alice'],
    ['userEmail + userId of different users', { userEmail: 'alice@example.com', userId: String(fx.users.bob.id) }, () => false],
    ['teamName + collectionName', { teamName: 'Support', collectionName: 'orders' }, (e) => e.team.name === 'Support' && e.collection?.name === 'orders'],
    ['userId + action + type', { userId: String(fx.users.bob.id), action: 'update', type: 'write' }, (e) => e.user.username === 'bob' && e.action === 'update'],
    ['recordId + createdAt.lt', { recordId: 'rec-a', 'createdAt.lt': at(10) }, (e) => e.recordIds.includes('rec-a') && time(e) < T + 10_000],
    [
      'everything at once',
      { userEmail: 'alice@example.com', teamName: 'Billing', collectionName: 'orders', recordId: 'rec-a', action: 'create', type: 'write', 'createdAt.gte': at(0), 'createdAt.lt': at(20) },
      (e) => e.user.username === 'alice' && e.team.name === 'Billing' && e.collection?.name === 'orders' && e.recordIds.includes('rec-a') && e.action === 'create',
    ],
    ['unknown email', { userEmail: 'nobody@example.com' }, () => false],
    ['unknown team', { teamName: 'billing' }, () => false],
    ['unknown collection', { collectionName: 'nope' }, () => false],
    ['unknown record', { recordId: 'rec-' }, () => false],
    ['a documented action Trellis never writes', { action: 'search' }, () => false],
    ['another documented action', { action: 'openNote' }, () => false],
  ]

  test('activity filters: every case returns exactly the matching entries, newest first — with and without extensions', async () => {
    for (const [name, query, match] of activityCases()) {
      const { entries } = await walk((q) => listActivity(fx, { ...q, extensions: 'true' }), query, 7)
      expect({ name, ids: entries.map((e) => e.id) }).toEqual({ name, ids: production.filter(match).map((e) => e.id) })
      // Without extensions=true: exactly the documented matches (paged in SQL: full pages, exact hasMore), or a 400
      // when the filter itself is an extension value.
      const extension = extensionParameter('activity', query)
      if (extension) expectError(await listActivity(fx, query), 400, 'invalid_parameter', extension)
      else {
        const plain = await walk((q) => listActivity(fx, q), query, 7)
        expect({ name, ids: plain.entries.map((e) => e.id) }).toEqual({ name, ids: productionDocumented.filter(match).map((e) => e.id) })
      }
      const total = production.filter(match).length
      if (!/unknown|different|never|documented|everything/.test(name)) expect({ name, nonTrivial: total > 0 && total < production.length }).toEqual({ name, nonTrivial: true })
    }
    expect(production.filter(activityCases().find((c) => c[0] === 'everything at once')![2]).length).toBeGreaterThan(0)
  })

  test('activity: staging has its own entries; filters never cross environments', async () => {
    const staging = (await walk((q) => listActivity(fx, { ...q, extensions: 'true' }, { environment: 'staging' }))).entries
    expect(staging.map((e) => e.label)).toEqual(['seed 53', 'seed 52', 'seed 51', 'seed 50', 'seed 49', 'seed 48'])
    expect(staging.every((e) => e.environment.name === 'staging')).toBe(true)
    const byRecord = await listActivity(fx, { recordId: 'rec-1', limit: '100', extensions: 'true' }, { environment: 'staging' })
    expect(byRecord.body.data.map((e) => e.label)).toEqual(staging.filter((e) => e.recordIds.includes('rec-1')).map((e) => e.label))
  })

  type AdminCase = [string, Record<string, string>, (e: AdminLog) => boolean]
  const adminCases = (): AdminCase[] => [
    ['userEmail', { userEmail: 'carol@example.com' }, (e) => e.user?.username === 'carol'],
    ['userEmail (case-insensitive)', { userEmail: 'ALICE@example.com' }, (e) => e.user?.username === 'alice'],
    ['userId', { userId: String(fx.users.alice.id) }, (e) => e.user?.username === 'alice'],
    ...(['add', 'remove', 'update', 'initial'] as const).map((type): AdminCase => [`type ${type}`, { type }, (e) => e.type === type]),
    ...(['administrator', 'identityProvider', 'system'] as const).map((initiator): AdminCase => [`initiator ${initiator}`, { initiator }, (e) => e.initiator === initiator]),
    ...ADMIN_LOG_RESOURCES.map((resource): AdminCase => [`resource ${resource}`, { resource }, (e) => e.resource === resource]),
    ['createdAt.eq', { 'createdAt.eq': at(2) }, (e) => time(e) === T + 2_000],
    ['createdAt.lt', { 'createdAt.lt': at(2) }, (e) => time(e) < T + 2_000],
    ['createdAt.lte', { 'createdAt.lte': at(2) }, (e) => time(e) <= T + 2_000],
    ['createdAt.gt', { 'createdAt.gt': at(2) }, (e) => time(e) > T + 2_000],
    ['createdAt.gte', { 'createdAt.gte': at(2) }, (e) => time(e) >= T + 2_000],
    ['userId + type', { userId: String(fx.users.carol.id), type: 'remove' }, (e) => e.user?.username === 'carol' && e.type === 'remove'],
    ['initiator + resource', { initiator: 'administrator', resource: 'user-project' }, (e) => e.initiator === 'administrator' && e.resource === 'user-project'],
    [
      'everything at once',
      { userEmail: 'alice@example.com', userId: String(fx.users.alice.id), type: 'add', initiator: 'identityProvider', resource: 'user-project', 'createdAt.gte': at(0), 'createdAt.lt': at(20) },
      (e) => e.user?.username === 'alice' && e.type === 'add' && e.initiator === 'identityProvider' && e.resource === 'user-project' && time(e) >= T && time(e) < T + 20_000,
    ],
    ['unknown email', { userEmail: 'nobody@example.com' }, () => false],
    ['a documented initiator Trellis never writes', { initiator: 'forestAdmin' }, () => false],
  ]

  test('admin filters: every case returns exactly the matching entries, newest first — with and without extensions', async () => {
    for (const [name, query, match] of adminCases()) {
      const { entries } = await walk((q) => listAdmin(fx, { ...q, extensions: 'true' }), query, 7)
      expect({ name, ids: entries.map((e) => e.id) }).toEqual({ name, ids: adminAll.filter(match).map((e) => e.id) })
      const extension = extensionParameter('admin', query)
      if (extension) expectError(await listAdmin(fx, query), 400, 'invalid_parameter', extension)
      else {
        const plain = await walk((q) => listAdmin(fx, q), query, 7)
        expect({ name, ids: plain.entries.map((e) => e.id) }).toEqual({ name, ids: adminDocumented.filter(match).map((e) => e.id) })
      }
      const total = adminAll.filter(match).length
      if (!/unknown|never/.test(name)) expect({ name, nonTrivial: total > 0 && total < adminAll.length }).toEqual({ name, nonTrivial: true })
    }
  })

  test('admin: another project’s entries never show; Globex sees only its own', async () => {
    const globex = (await walk((q) => listAdmin(fx, q, { token: fx.aliceGlobex, project: 'Globex' }))).entries
    expect(globex.length).toBeGreaterThan(0)
    const acmeIds = new Set(adminAll.map((e) => e.id))
    expect(globex.some((e) => acmeIds.has(e.id))).toBe(false)
  })

  // ── Enum values and other parameters ──

  test('every enum value of the compatibility document is accepted as a filter; an extension value only with extensions=true', async () => {
    const params = (op: string) => {
      for (const methods of Object.values(compatDocument().paths)) {
        for (const o of Object.values(methods)) {
          if (o.operationId === op) return (o as unknown as { parameters: { name: string; schema: { enum?: string[] } }[] }).parameters
        }
      }
      throw new Error(op)
    }
    const documented = (op: string, name: string) => params(op).find((p) => p.name === name)!.schema.enum!
    expect(documented('listActivityLogs', 'action').length).toBeGreaterThan(30)
    const checks: [Endpoint, string, string[], string[]][] = [
      ['activity', 'action', documented('listActivityLogs', 'action'), [...EXTENSION_VALUES.listActivityLogs.action!]],
      ['activity', 'type', documented('listActivityLogs', 'type'), []],
      ['admin', 'type', documented('listAdminLogs', 'type'), []],
      ['admin', 'initiator', documented('listAdminLogs', 'initiator'), [...EXTENSION_VALUES.listAdminLogs.initiator!]],
      ['admin', 'resource', documented('listAdminLogs', 'resource'), [...EXTENSION_VALUES.listAdminLogs.resource!]],
    ]
    for (const [kind, name, values, extensions] of checks) {
      const list = (q: Record<string, string>) => (kind === 'activity' ? listActivity(fx, q) : listAdmin(fx, q))
      const all: (ActivityLog | AdminLog)[] = kind === 'activity' ? production : adminAll
      const matching = (value: string) => all.filter((e) => (e as unknown as Record<string, string>)[name] === value)
      for (const value of values) {
        for (const extensions of ['', 'true', 'false']) {
          const query: Record<string, string> = { [name]: value, limit: '100' }
          if (extensions) query.extensions = extensions
          const sent = await list(query)
          expect({ name, value, status: sent.status }).toEqual({ name, value, status: 200 })
          const expected = matching(value).filter((e) => extensions === 'true' || !isExtension(e))
          expect(sent.body.data.map((e) => e.id)).toEqual(expected.map((e) => e.id))
        }
      }
      for (const value of extensions) {
        // Without extensions=true: a 400 naming the parameter and listing the document's values (and how to get the rest).
        for (const extensionsParam of [{}, { extensions: 'false' }] as Record<string, string>[]) {
          const refused = expectError(await list({ [name]: value, ...extensionsParam }), 400, 'invalid_parameter', name)
          expect(refused.message).toContain(values.join(', '))
          expect(refused.message).toContain('extensions=true')
        }
        const sent = await list({ [name]: value, limit: '100', extensions: 'true' })
        expect({ name, value, status: sent.status }).toEqual({ name, value, status: 200 })
        expect(sent.body.data.map((e) => e.id)).toEqual(matching(value).map((e) => e.id))
      }
    }
    // What Trellis writes is within the document's values plus DESIGN §7's extensions, and the service agrees on which is which.
    expect([...ACTIVITY_ACTIONS].sort() as string[]).toEqual([...documented('listActivityLogs', 'action'), ...EXTENSION_VALUES.listActivityLogs.action!].sort())
    expect([...ADMIN_LOG_RESOURCES].sort() as string[]).toEqual([...documented('listAdminLogs', 'resource'), ...EXTENSION_VALUES.listAdminLogs.resource!].sort())
  })

  test.each(['TRUE', 'True', '1', 'yes', 'on', 'true ', 'maybe'])('extensions=%p → 400 invalid_parameter naming extensions, on both', async (value) => {
    expectError(await listActivity(fx, { extensions: value }), 400, 'invalid_parameter', 'extensions')
    expectError(await listAdmin(fx, { extensions: value }), 400, 'invalid_parameter', 'extensions')
  })

  test('extensions= (empty) or false is the default page; repeated → the first', async () => {
    const plain = await listActivity(fx, { limit: '100' })
    for (const query of ['limit=100&extensions=', 'limit=100&extensions=false', 'limit=100&extensions=false&extensions=true']) {
      expect((await listActivity(fx, query)).body).toEqual(plain.body)
    }
    expect((await listActivity(fx, 'limit=100&extensions=true&extensions=false')).body.data).toHaveLength(production.length)
  })

  test.each([
    ['activity', 'action', 'bogus'],
    ['activity', 'action', 'CreateNote'],
    ['activity', 'action', 'createNote '],
    ['activity', 'type', 'Write'],
    ['activity', 'type', 'delete'],
    ['activity', 'userId', 'abc'],
    ['activity', 'userId', '0'],
    ['activity', 'createdAt.lt', 'yesterday'],
    ['activity', 'createdAt.eq', '2026-13-01T00:00:00Z'],
    ['activity', 'recordId', 'x'.repeat(5000)],
    ['admin', 'type', 'delete'],
    ['admin', 'type', 'Add'],
    ['admin', 'initiator', 'System'],
    ['admin', 'initiator', 'cli'],
    ['admin', 'resource', 'token'],
    ['admin', 'resource', 'USER'],
    ['admin', 'userId', '-1'],
    ['admin', 'createdAt.gte', 'not-a-date'],
  ] as const)('%s: %s=%p → 400 invalid_parameter naming it', async (kind, name, value) => {
    const sent = kind === 'activity' ? await listActivity(fx, { [name]: value }) : await listAdmin(fx, { [name]: value })
    expectError(sent, 400, 'invalid_parameter', name)
  })

  test.each(['1', '2', '10', '99', '100', '007'])('limit=%p is accepted on both', async (limit) => {
    const n = Number(limit)
    const activity = await listActivity(fx, { limit })
    expect(activity.body.parameters).toEqual({ projectName: 'Acme', environmentName: 'production', limit: n })
    expect(activity.body.data.map((e) => e.id)).toEqual(productionDocumented.slice(0, n).map((e) => e.id))
    expect(activity.body.hasMore).toBe(n < productionDocumented.length)
    const admin = await listAdmin(fx, { limit })
    expect(admin.body.parameters).toEqual({ projectName: 'Acme', limit: n })
    expect(admin.body.data.map((e) => e.id)).toEqual(adminDocumented.slice(0, n).map((e) => e.id))
    expect(admin.body.hasMore).toBe(n < adminDocumented.length)
    const all = await listAdmin(fx, { limit, extensions: 'true' })
    expect(all.body.data.map((e) => e.id)).toEqual(adminAll.slice(0, n).map((e) => e.id))
    expect(all.body.hasMore).toBe(n < adminAll.length)
  })

  test('limit absent or empty → 10; repeated → the first', async () => {
    for (const query of ['', 'limit=', 'limit=10&limit=500']) {
      expect((await listActivity(fx, query)).body.data).toHaveLength(10)
      expect((await listAdmin(fx, query)).body.parameters).toEqual({ projectName: 'Acme', limit: 10 })
    }
    expect((await listActivity(fx, 'limit=2&limit=500')).body.parameters.limit).toBe(2)
  })

  test.each(['0', '101', '-1', 'abc', '1.5', '1e1', '+5', '0x10', ' ', '1000000000000000000000'])('limit=%p → 400 invalid_parameter naming limit, on both', async (limit) => {
    expectError(await listActivity(fx, { limit }), 400, 'invalid_parameter', 'limit')
    expectError(await listAdmin(fx, { limit }), 400, 'invalid_parameter', 'limit')
  })

  test('unknown query parameters are ignored', async () => {
    const noise = { foo: 'bar', cursor: 'abc', sort: 'id', 'createdAt.neq': 'x', recordIds: 'rec-a', environmentName: 'staging', page: '2' }
    const plain = await listActivity(fx, { limit: '5', teamName: 'Support' })
    const noisy = await listActivity(fx, { limit: '5', teamName: 'Support', ...noise })
    expect(noisy.status).toBe(200)
    expect(noisy.body).toEqual(plain.body)
    const plainAdmin = await listAdmin(fx, { limit: '5', type: 'add' })
    const noisyAdmin = await listAdmin(fx, { limit: '5', type: 'add', ...noise, projectName: 'Globex' })
    expect(noisyAdmin.body).toEqual(plainAdmin.body)
  })

  test('order: id descending on both, with and without filters', async () => {
    for (const list of [production, adminAll]) {
      const ids = list.map((e) => Number(e.id))
      for (let k = 1; k < ids.length; k++) expect(ids[k]!).toBeLessThan(ids[k - 1]!)
    }
    // createdAt never goes backwards in id order, so a createdAt.lte page starts where the previous one ended.
    for (const list of [production, adminAll]) {
      const times = list.map((e) => Date.parse(e.createdAt))
      for (let k = 1; k < times.length; k++) expect(times[k]!).toBeLessThanOrEqual(times[k - 1]!)
    }
  })

  test('hasMore: exactly `limit` matching entries → false; one more than limit → true', async () => {
    const cases: [Endpoint, Record<string, string>][] = [
      ['activity', {}],
      ['activity', { teamName: 'Billing' }],
      ['activity', { recordId: 'rec-a' }],
      ['activity', { 'createdAt.gte': at(4) }],
      ['activity', { extensions: 'true' }],
      ['activity', { teamName: 'Billing', extensions: 'true' }],
      ['admin', {}],
      ['admin', { userEmail: 'carol@example.com' }],
      ['admin', { extensions: 'true' }],
      ['admin', { initiator: 'system', extensions: 'true' }],
      ['admin', { userEmail: 'carol@example.com', extensions: 'true' }],
    ]
    for (const [kind, query] of cases) {
      const list = (q: Record<string, string>) => (kind === 'activity' ? listActivity(fx, q) : listAdmin(fx, q))
      const total = (await list({ ...query, limit: '100' })).body.data.length
      expect(total).toBeGreaterThan(1)
      expect(total).toBeLessThan(100)
      const exact = await list({ ...query, limit: String(total) })
      expect({ kind, query, n: exact.body.data.length, hasMore: exact.body.hasMore }).toEqual({ kind, query, n: total, hasMore: false })
      const short = await list({ ...query, limit: String(total - 1) })
      expect({ kind, query, n: short.body.data.length, hasMore: short.body.hasMore }).toEqual({ kind, query, n: total - 1, hasMore: true })
    }
  })

  test('an empty result: hasMore false, data [], parameters echoed', async () => {
    expect((await listActivity(fx, { recordId: 'nothing' })).body).toEqual({ hasMore: false, data: [], parameters: { projectName: 'Acme', environmentName: 'production', limit: 10 } })
    expect((await listAdmin(fx, { userEmail: 'nobody@example.com', limit: '3' })).body).toEqual({ hasMore: false, data: [], parameters: { projectName: 'Acme', limit: 3 } })
  })

  // ── Scope and role matrix ──

  test('scope and role matrix (DESIGN §4 order: token → user → project → scope → role → existence)', async () => {
    type Expect = [number, string?]
    const matrix: [string, string, Expect, Expect][] = [
      ['activity_logs:read', tokens.activity, [200], [403, 'insufficient_scope']],
      ['admin_logs:read', tokens.admin, [403, 'insufficient_scope'], [200]],
      ['read-only preset', tokens.readOnly, [200], [200]],
      ['all', fx.alice, [200], [200]],
      ['notes:read', tokens.notesRead, [403, 'insufficient_scope'], [403, 'insufficient_scope']],
      ['notes:write', tokens.notesWrite, [403, 'insufficient_scope'], [403, 'insufficient_scope']],
      ['workflows:trigger', tokens.trigger, [403, 'insufficient_scope'], [403, 'insufficient_scope']],
      ['editor with all', tokens.bobAll, [403, 'insufficient_role'], [403, 'insufficient_role']],
      ['user role with all', tokens.daveAll, [403, 'insufficient_role'], [403, 'insufficient_role']],
      ["another project's token", fx.aliceGlobex, [403, 'wrong_project'], [403, 'wrong_project']],
      ['revoked token', tokens.revoked, [401, 'unauthorized'], [401, 'unauthorized']],
      ['unknown token', `trl_${'A'.repeat(43)}`, [401, 'unauthorized'], [401, 'unauthorized']],
    ]
    for (const [name, token, activity, admin] of matrix) {
      const a = await listActivity(fx, {}, { token })
      const b = await listAdmin(fx, {}, { token })
      const outcome = (sent: Sent<unknown>): [number, string | null] => [sent.status, (sent.body as ErrorObject).code ?? null]
      expect({ name, activity: outcome(a), admin: outcome(b) }).toEqual({ name, activity: [activity[0], activity[1] ?? null], admin: [admin[0], admin[1] ?? null] })
      for (const sent of [a, b]) {
        if (sent.status === 403) expect((sent.body as unknown as ErrorObject).error).toBe('Forbidden')
        if (sent.status === 401) expect((sent.body as unknown as ErrorObject).error).toBe('Unauthorized')
      }
    }
    // No Authorization header at all.
    expectError(await send(fx.app, request(activityPath()), 'activity'), 401, 'unauthorized')
    expectError(await send(fx.app, request(adminPath()), 'admin'), 401, 'unauthorized')
  })

  test('unknown environment → 404 only after authentication; unknown project → 403 (nothing revealed)', async () => {
    expectError(await listActivity(fx, {}, { environment: 'Production' }), 404, 'not_found')
    expectError(await listActivity(fx, {}, { environment: 'nope', token: tokens.activity }), 404, 'not_found')
    // Before the environment is looked up: scope, role, project.
    expectError(await listActivity(fx, {}, { environment: 'nope', token: tokens.notesRead }), 403, 'insufficient_scope')
    expectError(await listActivity(fx, {}, { environment: 'nope', token: tokens.bobAll }), 403, 'insufficient_role')
    expectError(await listActivity(fx, {}, { environment: 'nope', token: `trl_${'B'.repeat(43)}` }), 401, 'unauthorized')
    expectError(await listActivity(fx, {}, { project: 'NoSuchProject' }), 403, 'wrong_project')
    expectError(await listAdmin(fx, {}, { project: 'acme' }), 403, 'wrong_project')
  })

  test('a deactivated user’s token → 403 on both; reactivated → 200', async () => {
    writeTransaction(fx.env.store, (tx) => setUserDeactivated(tx, fx.env.clock, fx.users.carol.id, true, null))
    const carol = tokenFor(fx.env.store, fx.env.clock, 'carol', ['all']).value
    expectError(await listActivity(fx, {}, { token: carol }), 403, 'user_deactivated')
    expectError(await listAdmin(fx, {}, { token: carol }), 403, 'user_deactivated')
    writeTransaction(fx.env.store, (tx) => setUserDeactivated(tx, fx.env.clock, fx.users.carol.id, false, null))
    expect((await listActivity(fx, {}, { token: carol })).status).toBe(200)
    // Roles are read at request time: demoting alice cuts her token off at once.
    const acme = projectId(fx.env.store, 'Acme')
    writeTransaction(fx.env.store, (tx) => setProjectMember(tx, fx.env.clock, { projectId: acme, userId: fx.users.carol.id, role: 'editor', actorId: null }))
    expectError(await listAdmin(fx, {}, { token: carol }), 403, 'insufficient_role')
    writeTransaction(fx.env.store, (tx) => setProjectMember(tx, fx.env.clock, { projectId: acme, userId: fx.users.carol.id, role: 'admin', actorId: null }))
  })

  // ── Append-only ──

  test('append-only: an UPDATE on any log table fails with the trigger’s message', () => {
    const sqlite = fx.env.store.sqlite
    const before = tableContents(fx.env.store)
    expect(() => sqlite.prepare("UPDATE activity_logs SET label = 'forged' WHERE id = (SELECT max(id) FROM activity_logs)").run()).toThrow('activity log entries are append-only')
    expect(() => sqlite.prepare('UPDATE activity_logs SET user_id = user_id').run()).toThrow('activity log entries are append-only')
    expect(() => sqlite.prepare("UPDATE activity_log_records SET record_id = 'forged' WHERE log_id = (SELECT max(log_id) FROM activity_log_records)").run()).toThrow(
      'activity log entries are append-only',
    )
    expect(() => sqlite.prepare("UPDATE admin_logs SET new_value = '{}' WHERE id = (SELECT max(id) FROM admin_logs)").run()).toThrow('admin log entries are append-only')
    expect(() => sqlite.prepare("UPDATE admin_logs SET initiator = 'system'").run()).toThrow('admin log entries are append-only')
    const after = tableContents(fx.env.store)
    for (const table of ['activity_logs', 'activity_log_records', 'admin_logs']) expect(after[table]).toEqual(before[table]!)
  })

  test('append-only: no route writes to a log — PATCH / PUT / DELETE / POST on the list URLs → 405 (Allow: GET, HEAD), on entries → 404', async () => {
    const id = production[0]!.id
    const adminId = adminAll[0]!.id
    const cases: [Endpoint, string, string][] = [
      ['activity', 'PATCH', activityPath()],
      ['activity', 'DELETE', activityPath()],
      ['activity', 'PUT', activityPath()],
      ['activity', 'POST', activityPath()],
      ['activity', 'PATCH', `${activityPath()}/${id}`],
      ['activity', 'DELETE', `${activityPath()}/${id}`],
      ['activity', 'GET', `${activityPath()}/${id}`],
      ['admin', 'PATCH', adminPath()],
      ['admin', 'DELETE', adminPath()],
      ['admin', 'PUT', adminPath()],
      ['admin', 'POST', adminPath()],
      ['admin', 'PATCH', `${adminPath()}/${adminId}`],
      ['admin', 'DELETE', `${adminPath()}/${adminId}`],
    ]
    for (const [kind, method, path] of cases) {
      const sent = await send<ErrorObject>(fx.app, request(path, { method, headers: bearer(fx.alice), json: method === 'GET' || method === 'DELETE' ? undefined : { label: 'forged' } }), kind)
      const list = path === activityPath() || path === adminPath()
      expect({ method, path, status: sent.status, code: sent.body.code, allow: sent.headers.get('allow') }).toEqual(
        list ? { method, path, status: 405, code: 'method_not_allowed', allow: 'GET, HEAD' } : { method, path, status: 404, code: 'not_found', allow: null },
      )
    }
    expect((await walk((q) => listActivity(fx, { ...q, extensions: 'true' }))).entries).toEqual(production)
  })
})

// ── Pagination walk ─────────────────────────────────────────────────────────

describe('pagination walk over ≥ 250 activity entries written through the notes API', () => {
  let fx: Fx
  const TOTAL = 270
  beforeAll(() => {
    fx = buildFx()
  })
  afterAll(() => fx.env.cleanup())

  test(`${TOTAL} entries, several per millisecond: createdAt.lte paging skipping seen ids sees each exactly once`, async () => {
    const post = (path: string, json: unknown) => fx.app.handle(request(path, { method: 'POST', headers: bearer(fx.alice), json }))
    const noteIds: number[] = []
    const start = maxId(fx.env, 'activity_logs')
    for (let i = 0; i < TOTAL; i++) {
      // The clock moves 1 ms every 4 writes: entries share milliseconds (activity createdAt is max(now, previous)).
      if (i % 4 === 0) fx.env.clock.advance(1)
      if (i % 3 === 2 && noteIds.length > 0) {
        expect((await post(`${notesPath()}/${noteIds[i % noteIds.length]}/messages`, { content: `<p>${i}</p>` })).status).toBe(201)
      } else {
        const created = await post(notesPath(), { recordId: `walk-${i % 7}`, collectionName: 'orders', teamName: 'Support', title: `walk ${i}`, content: '<p>x</p>' })
        expect(created.status).toBe(201)
        noteIds.push(((await created.json()) as { id: number }).id)
      }
    }
    const rows = fx.env.store.sqlite.prepare('SELECT id, created_at FROM activity_logs WHERE id > ? ORDER BY id').all(start) as { id: number; created_at: number }[]
    expect(rows).toHaveLength(TOTAL)
    // Strictly increasing in id order within the environment: no two entries share a millisecond.
    for (let k = 1; k < rows.length; k++) expect(rows[k]!.created_at).toBeGreaterThan(rows[k - 1]!.created_at)

    for (const limit of [100, 7, 5]) {
      const { entries, pages } = await walk((q) => listActivity(fx, q), {}, limit)
      const ids = entries.map((e) => Number(e.id)).filter((id) => id > start)
      expect(ids).toEqual(rows.map((r) => r.id).reverse())
      expect(new Set(ids).size).toBe(TOTAL)
      expect(pages).toBeGreaterThanOrEqual(Math.ceil(TOTAL / limit))
    }

    // With a filter too.
    const byRecord = await walk((q) => listActivity(fx, q), { recordId: 'walk-3', action: 'createNote' }, 5)
    const expected = (await walk((q) => listActivity(fx, q), {}, 100)).entries.filter((e) => e.recordIds[0] === 'walk-3' && e.action === 'createNote')
    expect(byRecord.entries.map((e) => e.id)).toEqual(expected.map((e) => e.id))

    // The notes recipe (createdAt.lt to the last entry's time) is exact for logs too.
    const seen = new Set<string>()
    let query: Record<string, string> = { limit: '100' }
    for (;;) {
      const { body } = await listActivity(fx, query)
      for (const e of body.data) if (Number(e.id) > start) seen.add(e.id)
      if (!body.hasMore) break
      query = { limit: '100', 'createdAt.lt': body.data.at(-1)!.createdAt }
    }
    expect(seen.size).toBe(TOTAL)
  }, 30_000)
})

describe('paging past a burst of more than `limit` entries in one millisecond', () => {
  /*
   * Everything one transaction writes happens at one clock reading: `trellis apply` with 130 teams writes 130+
   * admin entries at once. Entries take createdAt strictly after the previous one in their list (+1 ms), so
   * paging reaches every one of them.
   */
  test('every admin entry of a 130-team apply is reachable by createdAt paging', async () => {
    const env = testEnv()
    try {
      const teams = Array.from({ length: 130 }, (_, i) => ({ name: `t${i}` }))
      applyDocument(
        { users: [{ email: 'a@example.com', username: 'a' }], projects: [{ name: 'P', environments: ['production'], members: [{ user: 'a@example.com', role: 'admin' }], teams }] },
        { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl },
      )
      const app = testApp(env)
      const token = tokenFor(env.store, env.clock, 'a', ['all'], { project: 'P' }).value
      const list = (query: Record<string, string>) => send<Page<AdminLog>>(app, request(adminPath(query, 'P'), { headers: bearer(token) }), 'admin')
      // Project P's entries (the instance-wide ones — the user apply created — belong to no project's log).
      const count = (where: string) => (env.store.sqlite.prepare(`SELECT count(*) AS n FROM admin_logs WHERE project_id IS NOT NULL ${where}`).get() as { n: number }).n
      const total = count('')
      const extensions = count(`AND (resource IN (${EXTENSION_VALUES.listAdminLogs.resource!.map((r) => `'${r}'`).join(', ')}) OR initiator = 'system')`)
      expect(total - extensions).toBeGreaterThan(130)
      expect(extensions).toBeGreaterThan(0) // the token's api-token entry
      expect((await walk(list, {}, 100)).entries).toHaveLength(total - extensions)
      expect((await walk((q) => list({ ...q, extensions: 'true' }), {}, 100)).entries).toHaveLength(total)
    } finally {
      env.cleanup()
    }
  })
})

// ── Retention ───────────────────────────────────────────────────────────────

describe('retention: pruneLogs and TRELLIS_LOG_RETENTION_DAYS', () => {
  let fx: Fx
  const DAY = 86_400_000
  let T0 = 0
  beforeAll(() => {
    fx = buildFx()
    T0 = fx.env.clock.now()
  })
  afterAll(() => fx.env.cleanup())

  test('deletes only entries older than the cutoff (activity with their record rows, admin), then one system entry per project', async () => {
    const { env } = fx
    // The apply file's own entries (records created, notes imported) were written at T0 too.
    const applied = (env.store.sqlite.prepare('SELECT count(*) AS n FROM activity_logs').get() as { n: number }).n
    const appliedRecordRows = (env.store.sqlite.prepare('SELECT count(*) AS n FROM activity_log_records').get() as { n: number }).n
    const note = (title: string) =>
      fx.app.handle(
        request(notesPath(), { method: 'POST', headers: bearer(fx.alice), json: { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title, content: '<p>x</p>' } }),
      )
    // At T0: the apply and the token (admin) and two notes (activity).
    expect((await note('old 1')).status).toBe(201)
    expect((await note('old 2')).status).toBe(201)
    // One millisecond before the future cutoff, and exactly at it.
    env.clock.set(T0 + 3 * DAY - 1)
    expect((await note('just before')).status).toBe(201)
    tokenFor(env.store, env.clock, 'carol', ['notes:read'])
    env.clock.set(T0 + 3 * DAY)
    expect((await note('at cutoff')).status).toBe(201)
    tokenFor(env.store, env.clock, 'carol', ['notes:read'], { name: 'kept' })
    env.clock.set(T0 + 10 * DAY)
    expect((await note('new')).status).toBe(201)

    const count = (sql: string) => (env.store.sqlite.prepare(sql).get() as { n: number }).n
    const cutoff = T0 + 3 * DAY
    const oldActivity = count(`SELECT count(*) AS n FROM activity_logs WHERE created_at < ${cutoff}`)
    const oldAdmin = count(`SELECT count(*) AS n FROM admin_logs WHERE created_at < ${cutoff}`)
    const oldRecordRows = count(`SELECT count(*) AS n FROM activity_log_records WHERE log_id IN (SELECT id FROM activity_logs WHERE created_at < ${cutoff})`)
    expect(oldActivity).toBe(applied + 3)
    expect(oldRecordRows).toBe(appliedRecordRows + 3)
    expect(oldAdmin).toBeGreaterThan(10)
    const keptActivity = env.store.sqlite.prepare(`SELECT * FROM activity_logs WHERE created_at >= ${cutoff} ORDER BY id`).all()
    const keptAdmin = env.store.sqlite.prepare(`SELECT * FROM admin_logs WHERE created_at >= ${cutoff} ORDER BY id`).all()
    const keptRecords = count('SELECT count(*) AS n FROM activity_log_records') - oldRecordRows
    const adminBefore = maxId(env, 'admin_logs')

    const result = await pruneLogs(env.store, env.clock, 7)
    expect(result).toEqual({ activityLogs: oldActivity, adminLogs: oldAdmin, cutoff })
    expect(env.store.sqlite.prepare(`SELECT * FROM activity_logs ORDER BY id`).all()).toEqual(keptActivity)
    expect(env.store.sqlite.prepare(`SELECT * FROM admin_logs WHERE id <= ${adminBefore} ORDER BY id`).all()).toEqual(keptAdmin)
    // The record rows of pruned entries went with them (cascade); no orphan remains.
    expect(count('SELECT count(*) AS n FROM activity_log_records')).toBe(keptRecords)
    expect(count('SELECT count(*) AS n FROM activity_log_records WHERE log_id NOT IN (SELECT id FROM activity_logs)')).toBe(0)

    // Through the API: the activity log keeps the entry at the cutoff and the new one.
    const activity = await listActivity(fx, { limit: '100' })
    expect(activity.body.data.map((e) => e.label)).toEqual(['created note "new"', 'created note "at cutoff"'])

    // One log-retention entry in each project, by the system, without a user.
    const expectedName = `pruned ${oldActivity} activity and ${oldAdmin} admin log entries older than ${iso(cutoff)} (retention 7 days)`
    for (const project of ['Acme', 'Globex']) {
      const entries = await adminSince(fx, adminBefore, project)
      expect({ project, entries }).toEqual({
        project,
        entries: [
          {
            object: 'adminLog',
            id: expect.any(String),
            type: 'remove',
            resource: 'log-retention',
            initiator: 'system',
            createdAt: iso(T0 + 10 * DAY),
            newValue: { name: expectedName },
          },
        ],
      })
      const bySystem = await listAdmin(fx, { initiator: 'system', extensions: 'true' }, { project })
      expect(bySystem.body.data.map((e) => e.resource)).toEqual(['log-retention'])
      expect((await listAdmin(fx, { resource: 'log-retention', extensions: 'true' }, { project })).body.data).toEqual(bySystem.body.data)
      // An extension entry: the default list leaves it out.
      expect((await listAdmin(fx, { limit: '100' }, { project })).body.data.map((e) => e.resource)).not.toContain('log-retention')
    }
    expect(rowsAfter(env, 'admin_logs', adminBefore)).toHaveLength(2)

    // Nothing older left: prunes nothing and writes nothing.
    const again = await pruneLogs(env.store, env.clock, 7)
    expect(again).toMatchObject({ activityLogs: 0, adminLogs: 0 })
    expect(rowsAfter(env, 'admin_logs', adminBefore)).toHaveLength(2)
    // A longer retention does not touch the kept entries either.
    env.clock.set(T0 + 11 * DAY)
    expect(await pruneLogs(env.store, env.clock, 30)).toMatchObject({ activityLogs: 0, adminLogs: 0 })
    expect(rowsAfter(env, 'admin_logs', adminBefore)).toHaveLength(2)
  })

  test('TRELLIS_LOG_RETENTION_DAYS: unset or blank keeps forever; whole days 1–36500; anything else is a ConfigError naming it', () => {
    const load = (value?: string) => loadConfig({ data: '/tmp/trellis-retention' }, value === undefined ? {} : { TRELLIS_LOG_RETENTION_DAYS: value })
    expect(load().logRetentionDays).toBeNull()
    expect(load('').logRetentionDays).toBeNull()
    expect(load('  ').logRetentionDays).toBeNull()
    expect(load('30').logRetentionDays).toBe(30)
    expect(load(' 7 ').logRetentionDays).toBe(7)
    expect(load('1').logRetentionDays).toBe(1)
    expect(load('36500').logRetentionDays).toBe(36_500)
    for (const bad of ['0', '-1', 'abc', '1.5', '7d', '36501', '1e3', '0x10']) {
      expect(() => load(bad)).toThrow(ConfigError)
      expect(() => load(bad)).toThrow('TRELLIS_LOG_RETENTION_DAYS')
    }
  })
})

// ── 429 bodies ──────────────────────────────────────────────────────────────

describe('rate limit on the log endpoints', () => {
  let fx: Fx
  beforeAll(() => {
    fx = buildFx({ env: { TRELLIS_API_RATE_PER_MIN: '2' } })
  })
  afterAll(() => fx.env.cleanup())

  test('the 429 body and Retry-After of both endpoints match the document', async () => {
    expect((await listActivity(fx)).status).toBe(200)
    expect((await listAdmin(fx)).status).toBe(200)
    for (const sent of [await listActivity(fx), await listAdmin(fx)]) {
      expect(sent.status).toBe(429)
      expect(sent.headers.get('retry-after')).toMatch(/^[1-9]\d*$/)
      expect(sent.body as unknown as ErrorObject).toMatchObject({ error: 'Too Many Requests', code: 'rate_limited' })
    }
  })
})

// ── The compatibility schemas themselves ────────────────────────────────────

describe('the validators: the document as published, extensions only where DESIGN §7 lists them', () => {
  test('the default validator is the unmodified document; the extensions=true check accepts only DESIGN §7 values on their own fields', () => {
    const entry = (action: string, extra: Record<string, unknown> = {}) => ({
      hasMore: false,
      parameters: { projectName: 'Acme', environmentName: 'production', limit: 10 },
      data: [
        {
          object: 'activityLog',
          id: '1',
          type: 'write',
          action,
          recordIds: [],
          createdAt: '2026-01-01T00:00:00.000Z',
          user: { object: 'user', id: 1, username: 'a', email: 'a@example.com' },
          environment: { object: 'environment', name: 'production' },
          team: { object: 'team', name: 'Support' },
          ...extra,
        },
      ],
    })
    expect(VALIDATORS.activity.ok(entry('createNote'))).toBe(true)
    for (const action of EXTENSION_VALUES.listActivityLogs.action!) expect(VALIDATORS.activity.ok(entry(action))).toBe(false)
    expect(assertValidWithExtensions('listActivityLogs', entry('createNote'))).toBe(0)
    expect(assertValidWithExtensions('listActivityLogs', entry('failWorkflow'))).toBe(1)
    expect(() => assertValidWithExtensions('listActivityLogs', entry('renameNote'))).toThrow(/beyond DESIGN/)
    // An extension entry must still be right in every other respect.
    expect(() => assertValidWithExtensions('listActivityLogs', entry('failWorkflow', { extra: 1 }))).toThrow(/beyond DESIGN/)
    const admin = (resource: string, initiator: string) => ({
      hasMore: false,
      parameters: { projectName: 'Acme', limit: 10 },
      data: [{ object: 'adminLog', id: '1', type: 'add', resource, initiator, createdAt: '2026-01-01T00:00:00.000Z', newValue: { name: 'x' } }],
    })
    expect(VALIDATORS.admin.ok(admin('team', 'administrator'))).toBe(true)
    expect(VALIDATORS.admin.ok(admin('api-token', 'administrator'))).toBe(false)
    expect(VALIDATORS.admin.ok(admin('team', 'system'))).toBe(false)
    expect(assertValidWithExtensions('listAdminLogs', admin('api-token', 'system'))).toBe(1)
    expect(() => assertValidWithExtensions('listAdminLogs', admin('token', 'administrator'))).toThrow(/beyond DESIGN/)
    expect(() => assertValidWithExtensions('listAdminLogs', admin('team', 'cli'))).toThrow(/beyond DESIGN/)
    // An extension value on another field is not an extension.
    expect(() => assertValidWithExtensions('listAdminLogs', admin('system', 'administrator'))).toThrow(/beyond DESIGN/)
  })
})

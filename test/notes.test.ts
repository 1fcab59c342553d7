/**
 * The notes API (spec §2.1–2.4, §4.1, §7.3, §8; DESIGN §3, §5, §6) against the real app and a real SQLite file.
 *
 * Every 200 list body is validated against the compatibility document's `listNotes` 200 schema, every single
 * note (GET by id, writes) against that schema's item, and every error body against its 4XX / 429 schemas
 * (test/support/compat-schema.ts). A 5XX anywhere fails the test.
 *
 * Fixtures are loaded through `apply` (notes import keeps the given times), so every time below is exact.
 */
import { DEFAULT_LIVE_TOKENS_PER_USER } from '../src/config.ts'
import { runOp } from '../src/db/sqlite/op-runner.ts'
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { ValidateFunction } from 'ajv'
import { drizzle } from 'drizzle-orm/bun-sqlite'
import { stringify as toYaml } from 'yaml'
import type { Db } from '../src/db/dialect.ts'
import * as schema from '../src/db/schema.ts'
import { systemClock } from '../src/lib/clock.ts'
import { parseApplyText } from '../src/modules/apply/service.ts'
import { parseDateFilters } from '../src/http/list.ts'
import { NOTE_DATE_FIELDS } from '../src/modules/notes/model.ts'
import { listNoteIds, type NoteFilters } from '../src/modules/notes/service.ts'
import { createToken, type Scope } from '../src/modules/tokens/service.ts'
import { applyNow, bearer, execute, handleJson, ISO_UTC_MICROS, listed, queryAll, queryOne, request, runNow, SQLITE_ONLY, sqliteOf, sqliteOnlyEach, testApp, type TestEnv, testEnv } from './helpers.ts'
import { type Micros, parseIsoMicros, toIsoMicros } from '../src/lib/time.ts'
import { assertValid, type ErrorObject, validatorFor } from './support/compat-schema.ts'
import { BAD_LIMITS, badParameter, type Scenario, scenarios, type Sent } from './support/scenarios.ts'

// ── Compatibility validation ────────────────────────────────────────────────

const listOk = validatorFor('listNotes', 200)
const noteItem = validatorFor('listNotes', 200, { at: '/properties/data/items' })
const clientError = validatorFor('listNotes', '4XX')
const rateLimited = validatorFor('listNotes', 429)

/** How many bodies were checked against the compatibility document (reported at the end). */
const validated = { list: 0, note: 0, error4xx: 0, error429: 0 }
afterAll(() => {
  console.log(`compat-schema validations: ${JSON.stringify(validated)}`)
})


interface UserObject {
  object: 'user'
  id: number
  username: string
  email: string
}
interface MessageObject {
  object: 'note-message'
  content: string
  createdAt: string
  user: UserObject
}
interface NoteObject {
  object: 'note'
  id: number
  title: string
  recordId: string
  createdAt: string
  updatedAt: string
  archivedAt?: string
  user: UserObject
  environment: { object: 'environment'; name: string }
  team: { object: 'team'; name: string }
  collection?: { object: 'collection'; name: string }
  messages: MessageObject[]
}
interface NotesPage {
  hasMore: boolean
  data: NoteObject[]
  parameters: { projectName: string; environmentName: string; limit: number }
}

/** Every date of a note is ISO 8601 UTC with microseconds (docs/design-decisions.md "Times"). */
function expectUtcDates(note: NoteObject) {
  const dates = [note.createdAt, note.updatedAt, ...(note.archivedAt === undefined ? [] : [note.archivedAt]), ...note.messages.map((m) => m.createdAt)]
  for (const date of dates) expect(date).toMatch(ISO_UTC_MICROS)
}

/**
 * Sends a request through the app and validates the body by status: 2xx against `success`, 429 and 4XX against
 * the document's error schemas. A 5XX or a non-JSON body throws.
 */
async function send<T>(app: { handle(r: Request): Promise<Response> }, req: Request, success: 'list' | 'note'): Promise<Sent<T>> {
  const { response, body } = await handleJson(app, req)
  expect(response.headers.get('content-type') ?? '').toStartWith('application/json')
  const check = (validate: ValidateFunction, key: keyof typeof validated, label: string) => {
    assertValid(validate, body, `${req.method} ${req.url} ${label}`)
    validated[key]++
  }
  if (response.status === 429) check(rateLimited, 'error429', '429')
  else if (response.status >= 400) check(clientError, 'error4xx', '4XX')
  else if (success === 'list') {
    check(listOk, 'list', '200')
    for (const note of (body as NotesPage).data) expectUtcDates(note)
  } else {
    check(noteItem, 'note', `${response.status} note`)
    expectUtcDates(body as NoteObject)
  }
  return { status: response.status, headers: response.headers, body: body as T }
}

// ── Fixture ─────────────────────────────────────────────────────────────────

const PROJECT = 'Acme'
const ENVIRONMENTS = ['production', 'staging'] as const
const TEAMS = ['Support', 'Ops'] as const
const USERS = [
  { email: 'alice@example.com', username: 'alice' },
  { email: 'bob@example.com', username: 'bob' },
  { email: 'carol@example.com', username: 'carol' },
] as const
/** Deleted after the import: its notes keep existing with `collection_id` NULL and render without `collection`. */
const DELETED_COLLECTION = 'legacy'
const UNICODE_RECORD = 'ünïcødé-🎉'
const COMPOSITE_RECORD = '42|eu'
const NOTE_COUNT = 30

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0, 0)
const MINUTE = 60_000
const HOUR = 3_600_000

interface ModelMessage {
  user: string
  content: string
  createdAt: number
}
interface ModelNote {
  index: number
  id: number
  title: string
  environment: string
  team: string
  collection: string
  recordId: string
  user: string
  createdAt: number
  updatedAt: number
  archivedAt: number | null
  messages: ModelMessage[]
}

/** `ms` as ISO text in a fixed offset such as `+02:00` (the same instant). */
function isoWithOffset(ms: number, offset: string): string {
  const sign = offset.startsWith('-') ? -1 : 1
  const [h, m] = offset.slice(1).split(':').map(Number)
  const shifted = new Date(ms + sign * (h! * 60 + m!) * MINUTE).toISOString()
  return shifted.replace('Z', offset)
}

/**
 * 30 notes with exact times: 20 in production, 10 in staging; teams, users, collections and record ids spread
 * so that every filter selects a different subset; 0–3 messages; 5 archived; 6 on the deleted collection; some
 * times given with a `+02:00` offset; some without `updatedAt` (the import derives it).
 */
function fixtureNotes(): Omit<ModelNote, 'id'>[] {
  const notes: Omit<ModelNote, 'id'>[] = []
  for (let i = 0; i < NOTE_COUNT; i++) {
    const createdAt = T0 + i * HOUR + (i % 2 === 1 ? 250 : 0)
    const archivedAt = i % 6 === 1 ? createdAt + 30 * MINUTE : null
    const messages = Array.from({ length: i % 4 }, (_, k) => ({
      user: USERS[(i + k) % 3]!.email,
      content: `<p>Note ${i}, message ${k}</p>`,
      createdAt: createdAt + k * 10_000,
    }))
    const explicitUpdated = Math.max(createdAt + (i % 4) * MINUTE, archivedAt ?? 0)
    // Without updatedAt the import takes the latest of createdAt, archivedAt and the messages.
    const derivedUpdated = Math.max(createdAt, archivedAt ?? createdAt, ...messages.map((m) => m.createdAt))
    notes.push({
      index: i,
      title: `Note ${i}`,
      environment: i % 3 === 2 ? 'staging' : 'production',
      team: TEAMS[i % 2]!,
      collection: i % 5 === 4 ? DELETED_COLLECTION : i % 3 === 0 ? 'orders' : 'customers',
      recordId: i === 7 || i === 16 ? UNICODE_RECORD : i === 10 ? COMPOSITE_RECORD : `rec-${i % 4}`,
      user: USERS[Math.floor(i / 2) % 3]!.email,
      createdAt,
      updatedAt: i % 7 === 0 ? derivedUpdated : explicitUpdated,
      archivedAt,
      messages,
    })
  }
  return notes
}

function applyFileFor(notes: Omit<ModelNote, 'id'>[]) {
  return {
    users: USERS.map((u) => ({ ...u })),
    projects: [
      {
        name: PROJECT,
        environments: [...ENVIRONMENTS],
        teams: [
          { name: 'Support', members: ['alice@example.com', 'bob@example.com'] },
          { name: 'Ops', members: ['carol@example.com'] },
        ],
        members: [
          { user: 'alice@example.com', role: 'admin' },
          { user: 'bob@example.com', role: 'editor' },
          { user: 'carol@example.com', role: 'admin' },
        ],
        collections: [{ name: 'orders' }, { name: 'customers' }, { name: DELETED_COLLECTION }],
        notes: notes.map((n) => ({
          environment: n.environment,
          team: n.team,
          collection: n.collection,
          recordId: n.recordId,
          title: n.title,
          user: n.user,
          // Every fifth note's times are written with a +02:00 offset: the same instant, rendered back in UTC.
          createdAt: n.index % 5 === 0 ? isoWithOffset(n.createdAt, '+02:00') : new Date(n.createdAt).toISOString(),
          ...(n.index % 7 === 0 ? {} : { updatedAt: new Date(n.updatedAt).toISOString() }),
          ...(n.archivedAt === null ? {} : { archivedAt: n.index % 5 === 0 ? isoWithOffset(n.archivedAt, '+02:00') : new Date(n.archivedAt).toISOString() }),
          ...(n.messages.length === 0
            ? {}
            : { messages: n.messages.map((m) => ({ user: m.user, content: m.content, createdAt: new Date(m.createdAt).toISOString() })) }),
        })),
      },
    ],
  }
}

interface Fixture {
  env: TestEnv
  app: ReturnType<typeof testApp>
  projectId: number
  environmentIds: Record<string, number>
  userIds: Record<string, number>
  notes: ModelNote[]
  /** alice, admin, scope `all`. */
  admin: string
  /** alice, admin, scope `notes:read` only. */
  reader: string
  /** bob, editor (not admin), scope `all`. */
  editor: string
  adminTokenId: number
}

const HIGH_RATES = { TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_API_RATE_PER_HOUR: '100000', TRELLIS_API_RATE_PER_DAY: '100000' }

async function token(env: TestEnv, email: string, projectId: number, scopes: Scope[]) {
  const userId = queryOne<{ id: number }>(env.store, 'SELECT id FROM users WHERE email = ?', email)!.id
  return await runNow(env.store, createToken(env.clock, { name: `${email} ${scopes.join(',')}`, userId, projectId, scopes, expiresAt: null, createdWithSso: false, actorId: null, maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER }))
}

/** A fresh env with the project applied (and `notes` imported), then the deleted collection removed. */
async function buildFixture(envVars: Record<string, string>, notes: Omit<ModelNote, 'id'>[], overrides: Parameters<typeof testApp>[1] = {}): Promise<Fixture> {
  const env = testEnv(envVars)
  await applyNow(parseApplyText(toYaml(applyFileFor(notes))), { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl })
  // Foreign keys are on (SQLite: the connection's PRAGMA; PostgreSQL always enforces them), and
  // notes.collection_id is ON DELETE SET NULL: the notes stay, without a collection.
  if (env.store.kind === 'sqlite') expect((queryOne(env.store, 'PRAGMA foreign_keys') as { foreign_keys: number }).foreign_keys).toBe(1)
  // Trellis never deletes a collection, and activity entries are append-only (their collection cannot be
  // nulled): this database-level removal first drops the import's entries that name it.
  execute(env.store, 'DELETE FROM activity_logs WHERE collection_id = (SELECT id FROM collections WHERE name = ?)', DELETED_COLLECTION)
  execute(env.store, 'DELETE FROM collections WHERE name = ?', DELETED_COLLECTION)
  const projectId = queryOne<{ id: number }>(env.store, 'SELECT id FROM projects WHERE name = ?', PROJECT)!.id
  const environmentIds = Object.fromEntries(
    queryAll<{ id: number; name: string }>(env.store, 'SELECT id, name FROM environments WHERE project_id = ?', projectId).map((r) => [r.name, r.id]),
  )
  const userIds = Object.fromEntries(queryAll<{ id: number; email: string }>(env.store, 'SELECT id, email FROM users').map((r) => [r.email, r.id]))
  const idByTitle = new Map(queryAll<{ id: number; title: string }>(env.store, 'SELECT id, title FROM notes').map((r) => [r.title, r.id]))
  const admin = await token(env, 'alice@example.com', projectId, ['all'])
  return {
    env,
    app: testApp(env, overrides),
    projectId,
    environmentIds,
    userIds,
    notes: notes.map((n) => ({ ...n, id: idByTitle.get(n.title)! })),
    admin: admin.value,
    adminTokenId: admin.token.id,
    reader: (await token(env, 'alice@example.com', projectId, ['notes:read'])).value,
    editor: (await token(env, 'bob@example.com', projectId, ['all'])).value,
  }
}

function notesPath(query: Record<string, string> | string = {}, project = PROJECT, environment = 'production'): string {
  const base = `/v1/project/${encodeURIComponent(project)}/environment/${encodeURIComponent(environment)}/notes`
  const search = typeof query === 'string' ? query : new URLSearchParams(query).toString()
  return search === '' ? base : `${base}?${search}`
}

/** The note objects the API must render for the model, newest first. */
function renderModel(fx: Fixture, note: ModelNote): NoteObject {
  const user = (email: string): UserObject => ({ object: 'user', id: fx.userIds[email]!, username: email.split('@')[0]!, email })
  return {
    object: 'note',
    id: note.id,
    title: note.title,
    recordId: note.recordId,
    createdAt: listed(note.createdAt),
    updatedAt: listed(note.updatedAt),
    ...(note.archivedAt === null ? {} : { archivedAt: listed(note.archivedAt) }),
    user: user(note.user),
    environment: { object: 'environment', name: note.environment },
    team: { object: 'team', name: note.team },
    ...(note.collection === DELETED_COLLECTION ? {} : { collection: { object: 'collection', name: note.collection } }),
    messages: note.messages.map((m) => ({ object: 'note-message', content: m.content, createdAt: listed(m.createdAt), user: user(m.user) })),
  }
}

// ── Reads over the imported fixture ─────────────────────────────────────────

describe('GET …/notes over an imported fixture', () => {
  let fx: Fixture
  beforeAll(async () => {
    fx = await buildFixture(HIGH_RATES, fixtureNotes())
  })
  afterAll(() => fx.env.cleanup())

  const list = (query: Record<string, string> | string = {}, options: { token?: string; project?: string; environment?: string } = {}) =>
    send<NotesPage>(fx.app, request(notesPath(query, options.project, options.environment), { headers: bearer(options.token ?? fx.admin) }), 'list')

  /** Ids the model says match, in the API's order (id descending). */
  const expectedIds = (predicate: (n: ModelNote) => boolean, environment = 'production') =>
    fx.notes
      .filter((n) => n.environment === environment && predicate(n))
      .map((n) => n.id)
      .sort((a, b) => b - a)
  const idsOf = (page: NotesPage) => page.data.map((n) => n.id)
  const byIndex = (i: number) => fx.notes.find((n) => n.index === i)!

  test('the fixture is what the tests assume', () => {
    expect(fx.notes).toHaveLength(NOTE_COUNT)
    expect(new Set(fx.notes.map((n) => n.id)).size).toBe(NOTE_COUNT)
    expect(fx.notes.filter((n) => n.environment === 'production')).toHaveLength(20)
    expect(fx.notes.filter((n) => n.archivedAt !== null).length).toBe(5)
    const orphans = queryOne(fx.env.store, 'SELECT count(*) AS n FROM notes WHERE collection_id IS NULL') as { n: number }
    expect(orphans.n).toBe(fx.notes.filter((n) => n.collection === DELETED_COLLECTION).length)
    expect(orphans.n).toBe(6)
    // Ids are in file order, so createdAt increases with id like it does for notes written through the API.
    const sorted = [...fx.notes].sort((a, b) => a.id - b.id)
    for (let k = 1; k < sorted.length; k++) expect(sorted[k]!.createdAt).toBeGreaterThan(sorted[k - 1]!.createdAt)
  })

  test('every note renders exactly as the spec shapes it (times from the import, in UTC; collection omitted once deleted)', async () => {
    for (const environment of ENVIRONMENTS) {
      const { status, body } = await list({ limit: '100' }, { environment })
      expect(status).toBe(200)
      const expected = fx.notes
        .filter((n) => n.environment === environment)
        .sort((a, b) => b.id - a.id)
        .map((n) => renderModel(fx, n))
      expect(body.data).toEqual(expected)
      expect(body.hasMore).toBe(false)
    }
  })

  test('note imported with a +02:00 offset renders the same instant in UTC', async () => {
    const { body } = await list({ limit: '1', 'createdAt.eq': '2026-01-01T00:00:00.000Z' })
    expect(body.data.map((n) => [n.title, n.createdAt])).toEqual([['Note 0', '2026-01-01T00:00:00.000000Z']])
  })

  test('default limit is 10; parameters echo projectName, environmentName and the effective limit', async () => {
    const { body } = await list()
    expect(body.data).toHaveLength(10)
    expect(body.hasMore).toBe(true)
    expect(body.parameters).toEqual({ projectName: PROJECT, environmentName: 'production', limit: 10 })
    expect(idsOf(body)).toEqual(expectedIds(() => true).slice(0, 10))
    const filtered = await list({ limit: '3', teamName: 'Ops', 'createdAt.gte': '2026-01-01T00:00:00Z' }, { environment: 'staging' })
    expect(filtered.body.parameters).toEqual({ projectName: PROJECT, environmentName: 'staging', limit: 3 })
  })

  test('ordered by id descending', async () => {
    const { body } = await list({ limit: '100' })
    const ids = idsOf(body)
    expect(ids).toEqual(expectedIds(() => true))
    for (let k = 1; k < ids.length; k++) expect(ids[k]!).toBeLessThan(ids[k - 1]!)
  })

  test('archivedAt is present exactly on archived notes', async () => {
    for (const environment of ENVIRONMENTS) {
      const { body } = await list({ limit: '100' }, { environment })
      for (const note of body.data) {
        const model = fx.notes.find((n) => n.id === note.id)!
        expect({ id: note.id, has: 'archivedAt' in note }).toEqual({ id: note.id, has: model.archivedAt !== null })
      }
    }
  })

  test('messages are oldest first, with their authors', async () => {
    const { body } = await list({ limit: '100' })
    const threeMessages = body.data.filter((n) => n.messages.length === 3)
    expect(threeMessages.length).toBeGreaterThan(0)
    for (const note of body.data) {
      const times = note.messages.map((m) => Date.parse(m.createdAt))
      expect(times).toEqual([...times].sort((a, b) => a - b))
      expect(note.messages.map((m) => m.content)).toEqual(fx.notes.find((n) => n.id === note.id)!.messages.map((m) => m.content))
    }
  })

  // ── Filters ──

  type Case = { name: string; query: (fx: Fixture) => Record<string, string>; match: (n: ModelNote, fx: Fixture) => boolean; environment?: string }
  const filterCases: Case[] = [
    { name: 'userEmail', query: () => ({ userEmail: 'bob@example.com' }), match: (n) => n.user === 'bob@example.com' },
    { name: 'userEmail (matched case-insensitively, emails are stored lower-case)', query: () => ({ userEmail: 'Bob@Example.COM' }), match: (n) => n.user === 'bob@example.com' },
    { name: 'userEmail of a user without notes here', query: () => ({ userEmail: 'nobody@example.com' }), match: () => false },
    { name: 'userId', query: (f) => ({ userId: String(f.userIds['carol@example.com']) }), match: (n) => n.user === 'carol@example.com' },
    { name: 'userId unknown', query: () => ({ userId: '987654' }), match: () => false },
    { name: 'teamName', query: () => ({ teamName: 'Ops' }), match: (n) => n.team === 'Ops' },
    { name: 'teamName (staging)', query: () => ({ teamName: 'Support' }), match: (n) => n.team === 'Support', environment: 'staging' },
    { name: 'teamName is case-sensitive', query: () => ({ teamName: 'ops' }), match: () => false },
    { name: 'collectionName', query: () => ({ collectionName: 'orders' }), match: (n) => n.collection === 'orders' },
    { name: 'collectionName customers', query: () => ({ collectionName: 'customers' }), match: (n) => n.collection === 'customers' },
    { name: 'collectionName of the deleted collection', query: () => ({ collectionName: DELETED_COLLECTION }), match: () => false },
    { name: 'recordId', query: () => ({ recordId: 'rec-1' }), match: (n) => n.recordId === 'rec-1' },
    { name: 'recordId unicode', query: () => ({ recordId: UNICODE_RECORD }), match: (n) => n.recordId === UNICODE_RECORD },
    { name: 'recordId composite (packed with |)', query: () => ({ recordId: COMPOSITE_RECORD }), match: (n) => n.recordId === COMPOSITE_RECORD },
    { name: 'recordId is exact (no prefix match)', query: () => ({ recordId: 'rec-' }), match: () => false },
    {
      name: 'userEmail + userId of the same user',
      query: (f) => ({ userEmail: 'alice@example.com', userId: String(f.userIds['alice@example.com']) }),
      match: (n) => n.user === 'alice@example.com',
    },
    {
      name: 'userEmail + userId of different users → nothing',
      query: (f) => ({ userEmail: 'alice@example.com', userId: String(f.userIds['bob@example.com']) }),
      match: () => false,
    },
    { name: 'teamName + collectionName', query: () => ({ teamName: 'Support', collectionName: 'customers' }), match: (n) => n.team === 'Support' && n.collection === 'customers' },
    { name: 'userEmail + recordId', query: () => ({ userEmail: 'alice@example.com', recordId: 'rec-0' }), match: (n) => n.user === 'alice@example.com' && n.recordId === 'rec-0' },
    {
      name: 'userId + teamName + collectionName + recordId',
      query: (f) => ({ userId: String(f.userIds['bob@example.com']), teamName: 'Ops', collectionName: 'orders', recordId: 'rec-3' }),
      match: (n) => n.user === 'bob@example.com' && n.team === 'Ops' && n.collection === 'orders' && n.recordId === 'rec-3',
    },
    {
      name: 'teamName + createdAt range',
      query: () => ({ teamName: 'Support', 'createdAt.gte': new Date(T0 + 6 * HOUR).toISOString(), 'createdAt.lt': new Date(T0 + 20 * HOUR).toISOString() }),
      match: (n) => n.team === 'Support' && n.createdAt >= T0 + 6 * HOUR && n.createdAt < T0 + 20 * HOUR,
    },
    {
      name: 'collectionName + archivedAt + updatedAt',
      query: () => ({ collectionName: 'customers', 'archivedAt.gte': '2026-01-01T00:00:00Z', 'updatedAt.lt': '2026-01-02T00:00:00Z' }),
      match: (n) => n.collection === 'customers' && n.archivedAt !== null && n.updatedAt < Date.UTC(2026, 0, 2),
    },
    {
      name: 'every kind at once',
      query: (f) => ({
        userEmail: 'alice@example.com',
        userId: String(f.userIds['alice@example.com']),
        teamName: 'Support',
        collectionName: 'orders',
        recordId: 'rec-0',
        'createdAt.gte': '2026-01-01T00:00:00Z',
        'createdAt.lte': '2026-01-03T00:00:00Z',
        'updatedAt.gt': '2025-12-31T23:59:59.999Z',
        'updatedAt.lt': '2026-01-03T00:00:00Z',
      }),
      match: (n) => n.user === 'alice@example.com' && n.team === 'Support' && n.collection === 'orders' && n.recordId === 'rec-0',
    },
  ]

  test.each(filterCases.map((c) => [c.name, c] as const))('filter: %s', async (_, c) => {
    const environment = c.environment ?? 'production'
    const { status, body } = await list({ ...c.query(fx), limit: '100' }, { environment })
    expect(status).toBe(200)
    expect(idsOf(body)).toEqual(expectedIds((n) => c.match(n, fx), environment))
    expect(body.hasMore).toBe(false)
  })

  test('the filters select non-trivial subsets (so the cases above mean something)', () => {
    for (const c of filterCases) {
      const n = expectedIds((note) => c.match(note, fx), c.environment).length
      if (!/nothing|unknown|without|deleted|case-sensitive|exact|every kind/.test(c.name)) {
        expect({ name: c.name, nonEmpty: n > 0, notAll: n < 20 }).toEqual({ name: c.name, nonEmpty: true, notAll: true })
      }
    }
    expect(expectedIds((n) => filterCases.at(-1)!.match(n, fx)).length).toBeGreaterThan(0)
  })

  // ── Date operators at an exact boundary ──

  const DATE_FIELDS = ['createdAt', 'updatedAt', 'archivedAt'] as const
  const OPS = {
    eq: (a: number, b: number) => a === b,
    lt: (a: number, b: number) => a < b,
    lte: (a: number, b: number) => a <= b,
    gt: (a: number, b: number) => a > b,
    gte: (a: number, b: number) => a >= b,
  } as const
  const boundaryCases = DATE_FIELDS.flatMap((field) => (Object.keys(OPS) as (keyof typeof OPS)[]).map((op) => [field, op] as const))

  test.each(boundaryCases)('%s.%s at an exact note timestamp', async (field, op) => {
    // Note 13: production, archived, odd (so its times carry 250 ms).
    const pivot = byIndex(13)
    expect(pivot.environment).toBe('production')
    const value = pivot[field]!
    const { body } = await list({ [`${field}.${op}`]: new Date(value).toISOString(), limit: '100' })
    const expected = expectedIds((n) => n[field] !== null && OPS[op](n[field]!, value))
    expect(idsOf(body)).toEqual(expected)
    const includesPivot = op === 'eq' || op === 'lte' || op === 'gte'
    expect(idsOf(body).includes(pivot.id)).toBe(includesPivot)
    if (op === 'eq') expect(idsOf(body)).toEqual([pivot.id])
    else expect(expected.length).toBeGreaterThan(0)
    // One millisecond away, the inclusive and exclusive forms swap.
    const shifted = op === 'lt' || op === 'lte' ? value + 1 : op === 'gt' || op === 'gte' ? value - 1 : value + 1
    const near = await list({ [`${field}.${op}`]: new Date(shifted).toISOString(), limit: '100' })
    expect(idsOf(near.body).includes(pivot.id)).toBe(op !== 'eq')
  })

  test('archivedAt filters never match notes that are not archived', async () => {
    const { body } = await list({ 'archivedAt.gte': '1970-01-01T00:00:00Z', limit: '100' })
    expect(idsOf(body)).toEqual(expectedIds((n) => n.archivedAt !== null))
    expect(body.data.every((n) => n.archivedAt !== undefined)).toBe(true)
  })

  test('createdAt range gte + lt is half-open', async () => {
    const from = byIndex(3).createdAt
    const to = byIndex(12).createdAt
    const { body } = await list({ 'createdAt.gte': new Date(from).toISOString(), 'createdAt.lt': new Date(to).toISOString(), limit: '100' })
    expect(idsOf(body)).toEqual(expectedIds((n) => n.createdAt >= from && n.createdAt < to))
    expect(idsOf(body)).toContain(byIndex(3).id)
    expect(idsOf(body)).not.toContain(byIndex(12).id)
  })

  // ── ISO 8601 inputs ──

  test.each([
    ['no milliseconds', '2026-01-01T12:00:00Z', 12],
    ['minutes only', '2026-01-01T12:00Z', 12],
    ['+02:00 offset', '2026-01-01T14:00:00+02:00', 12],
    ['+0200 offset with milliseconds', '2026-01-01T14:00:00.000+0200', 12],
    ['-05:00 offset', '2026-01-01T07:00:00-05:00', 12],
    ['+05:30 offset', '2026-01-01T17:30:00.000+05:30', 12],
    ['offset crossing midnight', '2025-12-31T21:00:00-03:00', 0],
    ['+00:00 with milliseconds', '2026-01-01T13:00:00.250+00:00', 13],
    ['offset with milliseconds', '2026-01-01T15:00:00.250+02:00', 13],
    ['space instead of T', '2026-01-01 12:00:00Z', 12],
    ['microseconds', '2026-01-01T13:00:00.250000Z', 13],
    ['nanoseconds (digits past the sixth dropped)', '2026-01-01T13:00:00.250000999Z', 13],
  ])('createdAt.eq with %s (%s) is compared in UTC', async (_, value, index) => {
    const { status, body } = await list({ 'createdAt.eq': value })
    expect(status).toBe(200)
    expect(idsOf(body)).toEqual([byIndex(index).id])
  })

  test('a time that differs only in milliseconds does not match eq', async () => {
    const { body } = await list({ 'createdAt.eq': '2026-01-01T13:00:00Z' })
    expect(body.data).toEqual([])
  })

  test('a time that differs only in microseconds does not match eq: filters compare to the microsecond', async () => {
    for (const value of ['2026-01-01T13:00:00.250001Z', '2026-01-01T13:00:00.249999Z']) {
      const { body } = await list({ 'createdAt.eq': value })
      expect({ value, data: body.data }).toEqual({ value, data: [] })
    }
    expect(idsOf((await list({ 'createdAt.lt': '2026-01-01T13:00:00.250001Z', 'createdAt.gt': '2026-01-01T13:00:00.249999Z' })).body)).toEqual([byIndex(13).id])
  })

  test('a date alone is midnight UTC', async () => {
    const { body } = await list({ 'createdAt.lt': '2026-01-02', limit: '100' })
    expect(idsOf(body)).toEqual(expectedIds((n) => n.createdAt < Date.UTC(2026, 0, 2)))
  })

  // ── limit ──

  test.each(['1', '2', '10', '50', '99', '100', '007'])('limit=%p is accepted', async (limit) => {
    const { status, body } = await list({ limit, 'createdAt.gte': '2020-01-01T00:00:00Z' })
    expect(status).toBe(200)
    const n = Number(limit)
    expect(body.parameters.limit).toBe(n)
    expect(body.data).toHaveLength(Math.min(n, 20))
    expect(body.hasMore).toBe(n < 20)
    expect(idsOf(body)).toEqual(expectedIds(() => true).slice(0, n))
  })

  test('limit= (empty) means the default 10', async () => {
    const { status, body } = await list('limit=')
    expect(status).toBe(200)
    expect(body.parameters.limit).toBe(10)
    expect(body.data).toHaveLength(10)
  })

  test('a repeated parameter counts once (the first value)', async () => {
    const { body } = await list('limit=2&limit=500')
    expect(body.parameters.limit).toBe(2)
  })

  // ── hasMore at page boundaries ──

  test('hasMore: exactly `limit` matching notes → false; one more → true', async () => {
    for (const [query, environment] of [
      [{ teamName: 'Ops' }, 'production'],
      [{ userEmail: 'alice@example.com' }, 'production'],
      [{}, 'production'],
      [{}, 'staging'],
      [{ recordId: UNICODE_RECORD }, 'production'],
    ] as const) {
      const total = (await list({ ...query, limit: '100' }, { environment })).body.data.length
      expect(total).toBeGreaterThan(1)
      const exact = await list({ ...query, limit: String(total) }, { environment })
      expect({ query, n: exact.body.data.length, hasMore: exact.body.hasMore }).toEqual({ query, n: total, hasMore: false })
      const short = await list({ ...query, limit: String(total - 1) }, { environment })
      expect({ query, n: short.body.data.length, hasMore: short.body.hasMore }).toEqual({ query, n: total - 1, hasMore: true })
    }
  })

  test('an empty result: hasMore false, data []', async () => {
    const { body } = await list({ recordId: 'no-such-record' })
    expect(body).toEqual({ hasMore: false, data: [], parameters: { projectName: PROJECT, environmentName: 'production', limit: 10 } })
  })

  test('paging the fixture by createdAt.lt visits every production note once', async () => {
    const seen: number[] = []
    let query: Record<string, string> = { limit: '3' }
    for (let pages = 0; pages < 20; pages++) {
      const { body } = await list(query)
      seen.push(...idsOf(body))
      if (!body.hasMore) break
      query = { limit: '3', 'createdAt.lt': body.data.at(-1)!.createdAt }
    }
    expect(seen).toEqual(expectedIds(() => true))
  })

  // ── Unknown parameters, hostile strings ──

  test('unknown query parameters are ignored', async () => {
    const plain = await list({ limit: '5' })
    const noisy = await list({ limit: '5', foo: 'bar', 'createdAt.neq': 'nonsense', cursor: 'abc', sort: 'id', 'createdAt.between': 'x', page: '2' })
    expect(noisy.status).toBe(200)
    expect(noisy.body).toEqual(plain.body)
  })

  const hostile = ["' OR 1=1 --", "'; DROP TABLE notes; --", '" OR ""="', '%', '_', '*', '\\', '🎉🔥', 'Ωmega ünïcødé 中文', '\u0000', 'null', '<script>alert(1)</script>', '../../etc/passwd']
  test.each(['userEmail', 'teamName', 'collectionName', 'recordId'].flatMap((name) => hostile.map((value) => [name, value] as const)))(
    '%s=%p → 200 empty, never 500',
    async (name, value) => {
      const { status, body } = await list({ [name]: value })
      expect(status).toBe(200)
      expect(body.data).toEqual([])
      expect(body.hasMore).toBe(false)
    },
  )

  test('notes are still all there after the hostile filters', () => {
    const { n } = queryOne(fx.env.store, 'SELECT count(*) AS n FROM notes') as { n: number }
    expect(n).toBe(NOTE_COUNT)
  })

  // ── Project / environment names, authentication ──

  test('GET …/notes/:id renders one note like the list does', async () => {
    for (const note of [byIndex(0), byIndex(4), byIndex(13), byIndex(2)]) {
      const sent = await send<NoteObject>(fx.app, request(`${notesPath({}, PROJECT, note.environment)}/${note.id}`, { headers: bearer(fx.admin) }), 'note')
      expect(sent.status).toBe(200)
      expect(sent.body).toEqual(renderModel(fx, note))
    }
  })

  // ── Refusals: bad parameters, names, authentication (one row each) ──

  describe('refusals of GET …/notes and …/notes/:id', () => {
    const get = (query: Record<string, string> | string, options: { token?: string; project?: string; environment?: string } = {}) => () => ({
      path: notesPath(query, options.project, options.environment),
      headers: bearer(options.token ?? fx.admin),
    })
    const badQuery = (name: string, value: string, query?: Record<string, string> | string, note?: string) => badParameter((q) => get(q)(), name, value, query, note)
    scenarios(
      [
        // Bad dates, each naming its parameter.
        ...(
          [
            ['createdAt.eq', 'yesterday'],
            ['createdAt.lt', '2026-13-01T00:00:00Z'],
            ['createdAt.lte', '2026-02-30T00:00:00Z'],
            ['createdAt.gt', '2026-01-01T24:00:00Z'],
            ['createdAt.gte', '2026-01-01T10:00:00+25:00'],
            ['updatedAt.eq', '1767225600000'],
            ['updatedAt.lt', 'null'],
            ['updatedAt.lte', '2026-01-01T10:60:00Z'],
            ['updatedAt.gt', '2026-1-1'],
            ['updatedAt.gte', ' '],
            ['archivedAt.eq', '0'],
            ['archivedAt.lt', '2026-01-01T10:00:00Zjunk'],
            ['archivedAt.lte', "2026-01-01' OR 1=1 --"],
            ['archivedAt.gt', '2026-01-01T10:00:00 02:00'], // what an unencoded '+' turns into
            ['archivedAt.gte', '２０２６-01-01'],
          ] as const
        ).map(([name, value]) => badQuery(name, value)),
        // A bad date is a 400 even when a name filter matches nobody (the dates are parsed before the page is asked for).
        badQuery('createdAt.lt', 'yesterday', { userEmail: 'nobody@example.com', 'createdAt.lt': 'yesterday' }, ' with a userEmail matching nobody'),
        badQuery('archivedAt.gte', '2026-13-01', { teamName: 'No such team', 'archivedAt.gte': '2026-13-01' }, ' with a teamName matching nobody'),
        // An unencoded + in the query (a space once decoded) is a 400, never a silent misread.
        badQuery('createdAt.gt', '2026-01-01T10:00:00+02:00', 'createdAt.gt=2026-01-01T10:00:00+02:00', ' with its + unencoded'),
        ...BAD_LIMITS.map((limit) => badQuery('limit', limit)),
        ...["' OR 1=1 --", 'abc', '0', '-1', '1.5', '1e3', '12345678901234567890', '🎉'].map((value) => badQuery('userId', value)),
        badQuery('recordId', 'x'.repeat(5000)),
        badQuery('teamName', 'T'.repeat(300)),
        badQuery('collectionName', 'C'.repeat(300)),
        badQuery('userEmail', `${'e'.repeat(400)}@example.com`),
        // Project names are case-sensitive and compared before existence: nothing is revealed.
        { name: 'project acme (the Acme token) → 403 wrong_project', request: get({}, { project: 'acme' }), status: 403, code: 'wrong_project', body: { error: 'Forbidden' } },
        { name: 'an unknown project with a valid token → the same 403', request: get({}, { project: 'NoSuchProject' }), status: 403, code: 'wrong_project' },
        ...['Production', 'PRODUCTION', 'prod', 'nope', ' production'].map(
          (environment): Scenario => ({ name: `environment ${JSON.stringify(environment)} of the right project → 404 not_found`, request: get({}, { environment }), status: 404, code: 'not_found' }),
        ),
        { name: 'no token → 401', request: { path: notesPath() }, status: 401, code: 'unauthorized', body: { error: 'Unauthorized' } },
        { name: 'an unknown token → 401', request: get({}, { token: `trl_${'A'.repeat(43)}` }), status: 401, code: 'unauthorized' },
        { name: 'a read-only token reads', request: () => get({}, { token: fx.reader })(), status: 200 },
        { name: 'a non-admin → 403 insufficient_role', request: () => get({}, { token: fx.editor })(), status: 403, code: 'insufficient_role', body: { error: 'Forbidden' } },
      ],
      (req) => send(fx.app, req, 'list'),
    )

    test('the note of another environment used below is in staging', () => {
      expect(byIndex(2).environment).toBe('staging')
    })
    const byId = (id: () => string) => () => ({ path: `${notesPath()}/${id()}`, headers: bearer(fx.admin) })
    scenarios(
      [
        { name: "GET …/notes/:id of another environment's note → 404", request: byId(() => String(byIndex(2).id)), status: 404, code: 'not_found' },
        ...['abc', '0', '-1', '1.5', '1e3', '0x10', '01', '%20', '9'.repeat(16), "1' OR '1'='1"].map(
          (bad): Scenario => ({ name: `GET …/notes/${bad} → 400 naming id`, request: byId(() => encodeURIComponent(bad)), status: 400, code: 'invalid_parameter', field: 'id' }),
        ),
        { name: 'GET …/notes/99999999 → 404', request: byId(() => '99999999'), status: 404, code: 'not_found' },
        { name: `GET …/notes/${'9'.repeat(15)} → 404`, request: byId(() => '9'.repeat(15)), status: 404, code: 'not_found' },
      ],
      (req) => send(fx.app, req, 'note'),
    )
  })

  // ── Indexes ──

  /*
   * Plans observed (bun 1.4.5's SQLite, no ANALYZE) for listNoteIds' `select "id" from "notes" where … order by
   * "id" desc limit ?` (print them with SHOW_PLANS=1):
   *   environment only            SEARCH notes USING COVERING INDEX notes_env_id_idx (environment_id=?)
   *   + userId                    SEARCH notes USING COVERING INDEX notes_env_user_idx (environment_id=? AND user_id=?)
   *   + userEmail                 SEARCH notes USING COVERING INDEX notes_env_user_idx (environment_id=? AND user_id=?)
   *   + teamName                  SEARCH notes USING COVERING INDEX notes_env_team_idx (environment_id=? AND team_id=?)
   *   + collectionName            SEARCH notes USING COVERING INDEX notes_env_collection_idx (environment_id=? AND collection_id=?)
   *   + recordId                  SEARCH notes USING COVERING INDEX notes_env_record_idx (environment_id=? AND record_id=?)
   *   + createdAt range           SEARCH notes USING COVERING INDEX notes_env_created_idx (environment_id=? AND created_at>? AND created_at<?)
   *                               | USE TEMP B-TREE FOR ORDER BY
   *   + createdAt.lt (paging)     SEARCH notes USING COVERING INDEX notes_env_created_idx (environment_id=? AND created_at<?)
   *                               | USE TEMP B-TREE FOR ORDER BY
   *   + createdAt.eq              SEARCH notes USING COVERING INDEX notes_env_created_idx (environment_id=? AND created_at=?)
   *   + updatedAt range           SEARCH notes USING COVERING INDEX notes_env_updated_idx (environment_id=? AND updated_at>? AND updated_at<?)
   *                               | USE TEMP B-TREE FOR ORDER BY
   *   + archivedAt range          SEARCH notes USING COVERING INDEX notes_env_archived_idx (environment_id=? AND archived_at>? AND archived_at<?)
   *                               | USE TEMP B-TREE FOR ORDER BY
   *   + recordId + createdAt      SEARCH notes USING INDEX notes_env_created_idx (environment_id=? AND created_at>? AND created_at<?)
   *                               | USE TEMP B-TREE FOR ORDER BY
   *   everything                  SEARCH notes USING INDEX notes_env_archived_idx (environment_id=? AND archived_at>?)
   *                               | USE TEMP B-TREE FOR ORDER BY
   * Never a bare `SCAN notes`. With a date range the matching rows are sorted for `order by id` (temp B-tree);
   * for `createdAt.lt` paging that is every older note of the environment, not just one page.
   */
  const planCases: [string, NoteFilters, Record<string, string>][] = [
    ['environment only', {}, {}],
    ['+ userId', { userId: 1 }, {}],
    ['+ userEmail', { userEmail: 'bob@example.com' }, {}],
    ['+ teamName', { teamName: 'Ops' }, {}],
    ['+ collectionName', { collectionName: 'orders' }, {}],
    ['+ recordId', { recordId: 'rec-1' }, {}],
    ['+ createdAt range', {}, { 'createdAt.gte': '2026-01-01T00:00:00Z', 'createdAt.lt': '2026-01-02T00:00:00Z' }],
    ['+ createdAt.lt (paging)', {}, { 'createdAt.lt': '2026-01-02T00:00:00Z' }],
    ['+ createdAt.eq', {}, { 'createdAt.eq': '2026-01-01T00:00:00Z' }],
    ['+ updatedAt range', {}, { 'updatedAt.gt': '2026-01-01T00:00:00Z', 'updatedAt.lt': '2026-01-02T00:00:00Z' }],
    ['+ archivedAt range', {}, { 'archivedAt.gt': '2026-01-01T00:00:00Z', 'archivedAt.lt': '2026-01-02T00:00:00Z' }],
    ['+ recordId + createdAt range', { recordId: 'rec-1' }, { 'createdAt.gte': '2026-01-01T00:00:00Z', 'createdAt.lt': '2026-01-02T00:00:00Z' }],
    [
      'everything',
      { userId: 1, teamName: 'Ops', collectionName: 'orders', recordId: 'rec-1' },
      { 'createdAt.gte': '2026-01-01T00:00:00Z', 'updatedAt.lt': '2026-01-02T00:00:00Z', 'archivedAt.gt': '2026-01-01T00:00:00Z' },
    ],
  ]

  sqliteOnlyEach(SQLITE_ONLY.queryPlan, planCases, 'EXPLAIN QUERY PLAN of listNoteIds %s uses an index on notes', (name, filters, query) => {
    const store = sqliteOf(fx.env.store, SQLITE_ONLY.queryPlan)
    const captured: { sql: string; params: unknown[] }[] = []
    // A connection of its own: statements are prepared once per connection, so this one logs its own.
    const connection = new Database(store.path)
    const db = drizzle({ client: connection, schema, logger: { logQuery: (sql, params) => void captured.push({ sql, params }) } }) as unknown as Db
    runOp(db, listNoteIds(fx.projectId, fx.environmentIds.production!, filters, parseDateFilters(query, NOTE_DATE_FIELDS), 10))
    connection.close()
    const statement = captured.find((q) => /^select "id" from "notes"/i.test(q.sql))
    expect(statement).toBeDefined()
    const plan = (store.sqlite.prepare(`EXPLAIN QUERY PLAN ${statement!.sql}`).all(...(statement!.params as never[])) as { detail: string }[]).map((r) => r.detail)
    if (process.env.SHOW_PLANS) console.log(`PLAN ${name}: ${plan.join(' | ')}`)
    const onNotes = plan.filter((d) => /\bnotes\b/.test(d))
    expect(onNotes.length).toBeGreaterThan(0)
    for (const detail of onNotes) {
      expect(detail).toMatch(/^(SEARCH|SCAN) notes USING (COVERING )?INDEX notes_env_\w+_idx/)
      expect(detail).not.toMatch(/^SCAN notes$/)
    }
    // The environment is always an index prefix: a query never reads another environment's notes.
    expect(onNotes.some((d) => /^SEARCH notes USING .*\(environment_id=\?/.test(d))).toBe(true)
  })
})

// ── Writes ──────────────────────────────────────────────────────────────────

describe('notes writes', () => {
  let fx: Fixture
  beforeAll(async () => {
    fx = await buildFixture(HIGH_RATES, fixtureNotes())
  })
  afterAll(() => fx.env.cleanup())

  const write = (method: string, path: string, json: unknown, tokenValue = fx.admin) =>
    send<NoteObject>(fx.app, request(path, { method, headers: bearer(tokenValue), json }), 'note')
  const list = (query: Record<string, string>) => send<NotesPage>(fx.app, request(notesPath(query), { headers: bearer(fx.admin) }), 'list')
  /** The newest activity log id: the mark a write's entries are counted from. */
  const lastLogId = () => (queryOne(fx.env.store, 'SELECT coalesce(max(id), 0) AS id FROM activity_logs') as { id: number }).id

  interface LogRow {
    id: number
    environment_id: number
    type: string
    action: string
    user_id: number
    token_id: number | null
    team_id: number | null
    collection_id: number | null
  }
  /** Asserts that the write appended exactly the given actions, each with its record row; returns the rows. */
  function expectLogged(before: number, actions: string[], recordId: string, environment = 'production'): LogRow[] {
    const rows = queryAll(fx.env.store, 'SELECT * FROM activity_logs WHERE id > ? ORDER BY id', before) as LogRow[]
    expect(rows.map((r) => r.action)).toEqual(actions)
    for (const row of rows) {
      expect(row).toMatchObject({
        environment_id: fx.environmentIds[environment]!,
        type: 'write',
        user_id: fx.userIds['alice@example.com']!,
        token_id: fx.adminTokenId,
      })
      const records = queryAll(fx.env.store, 'SELECT environment_id, record_id FROM activity_log_records WHERE log_id = ?', row.id)
      expect(records).toEqual([{ environment_id: fx.environmentIds[environment]!, record_id: recordId }])
    }
    return rows
  }

  const newNote = { recordId: 'order-9', collectionName: 'orders', teamName: 'Ops', title: 'Refund check', content: '<p>Please <b>verify</b></p>' }

  test('POST …/notes → 201 note with its first message; one createNote activity entry', async () => {
    const before = lastLogId()
    const now = fx.env.clock.now()
    const sent = await write('POST', notesPath(), newNote)
    expect(sent.status).toBe(201)
    const note = sent.body
    expect(note).toMatchObject({
      object: 'note',
      title: 'Refund check',
      recordId: 'order-9',
      createdAt: listed(now),
      updatedAt: listed(now),
      user: { object: 'user', id: fx.userIds['alice@example.com'], username: 'alice', email: 'alice@example.com' },
      environment: { object: 'environment', name: 'production' },
      team: { object: 'team', name: 'Ops' },
      collection: { object: 'collection', name: 'orders' },
      messages: [{ object: 'note-message', content: '<p>Please <b>verify</b></p>', createdAt: listed(now), user: { email: 'alice@example.com' } }],
    })
    expect('archivedAt' in note).toBe(false)
    expect(note.id).toBeGreaterThan(Math.max(...fx.notes.map((n) => n.id)))
    const [row] = expectLogged(before, ['createNote'], 'order-9')
    expect(row).toMatchObject({ team_id: expect.any(Number), collection_id: expect.any(Number) })
    // The new note is the newest in the list.
    const page = await list({ limit: '1' })
    expect(page.body.data[0]).toEqual(note)
  })

  test('POST notes in the same millisecond still get strictly increasing createdAt, 1 µs apart', async () => {
    const a = await write('POST', notesPath(), { ...newNote, title: 'same ms 1' })
    const b = await write('POST', notesPath(), { ...newNote, title: 'same ms 2' })
    expect(parseIsoMicros(b.body.createdAt)).toBe((parseIsoMicros(a.body.createdAt)! + 1) as Micros)
  })

  // ── Refused writes (one row each): nothing is written ──

  describe('refused writes: unknown or bad fields → 400 naming the field; wrong environment, scope or role; nothing written', () => {
    let before = { log: 0, notes: 0 }
    const noteCount = () => (queryOne(fx.env.store, 'SELECT count(*) AS n FROM notes') as { n: number }).n
    beforeAll(() => {
      before = { log: lastLogId(), notes: noteCount() }
    })
    /** After each row: no note and no activity entry more than before the table. */
    const nothingWritten = () => expect({ log: lastLogId(), notes: noteCount() }).toEqual(before)
    const mine = () => fx.notes.find((n) => n.environment === 'production')!.id
    const staging = () => fx.notes.find((n) => n.environment === 'staging')!.id
    const call = (method: string, path: () => string, json: unknown, token?: () => string) => () => ({ method, path: path(), headers: bearer(token?.() ?? fx.admin), body: json })
    const post = (json: unknown, token?: () => string) => call('POST', () => notesPath(), json, token)
    const invalid = (name: string, request: Scenario['request'], field?: string): Scenario => ({ name, request, status: 400, code: 'validation_failed', field })
    scenarios(
      [
        // An unknown name: the field it is in.
        invalid('POST with an unknown teamName (Billing)', post({ ...newNote, teamName: 'Billing' }), 'teamName'),
        invalid('POST with an unknown teamName (ops)', post({ ...newNote, teamName: 'ops' }), 'teamName'),
        invalid('POST with an unknown collectionName', post({ ...newNote, collectionName: 'invoices' }), 'collectionName'),
        invalid('POST with a deleted collectionName', post({ ...newNote, collectionName: DELETED_COLLECTION }), 'collectionName'),
        invalid('POST with an unknown teamName and collectionName → the team', post({ ...newNote, teamName: 'Billing', collectionName: 'invoices' }), 'teamName'),
        // A bad value.
        invalid('POST with an empty recordId', post({ ...newNote, recordId: '' }), 'recordId'),
        invalid('POST with a 1025-character recordId', post({ ...newNote, recordId: 'r'.repeat(1025) }), 'recordId'),
        invalid('POST with an empty title', post({ ...newNote, title: '' }), 'title'),
        invalid('POST with a numeric title', post({ ...newNote, title: 5 }), 'title'),
        invalid('POST without content', post({ ...newNote, content: undefined }), 'content'),
        invalid('POST with a null teamName', post({ ...newNote, teamName: null }), 'teamName'),
        { name: 'POST on an unknown environment → 404', request: call('POST', () => notesPath({}, PROJECT, 'Production'), newNote), status: 404, code: 'not_found' },
        { name: 'POST with a notes:read token → 403 insufficient_scope', request: post(newNote, () => fx.reader), status: 403, code: 'insufficient_scope' },
        { name: 'POST as a non-admin → 403 insufficient_role', request: post(newNote, () => fx.editor), status: 403, code: 'insufficient_role' },
        // Messages.
        { name: "POST a message on another environment's note → 404", request: call('POST', () => `${notesPath()}/${staging()}/messages`, { content: '<p>x</p>' }), status: 404, code: 'not_found' },
        { name: 'POST a message on note abc → 400 naming id', request: call('POST', () => `${notesPath()}/abc/messages`, { content: '<p>x</p>' }), status: 400, code: 'invalid_parameter', field: 'id' },
        invalid('POST a message with empty content', call('POST', () => `${notesPath()}/${mine()}/messages`, { content: '' }), 'content'),
        invalid('POST a message without content', call('POST', () => `${notesPath()}/${mine()}/messages`, {}), 'content'),
        // PATCH.
        invalid('PATCH {}', call('PATCH', () => `${notesPath()}/${mine()}`, {})),
        invalid('PATCH an empty title', call('PATCH', () => `${notesPath()}/${mine()}`, { title: '' }), 'title'),
        invalid('PATCH archived "yes"', call('PATCH', () => `${notesPath()}/${mine()}`, { archived: 'yes' }), 'archived'),
        { name: "PATCH another environment's note → 404", request: call('PATCH', () => `${notesPath()}/${staging()}`, { title: 'x' }), status: 404, code: 'not_found' },
        { name: 'PATCH note abc → 400 naming id', request: call('PATCH', () => `${notesPath()}/abc`, { title: 'x' }), status: 400, code: 'invalid_parameter', field: 'id' },
        { name: 'PATCH with a notes:read token → 403 insufficient_scope', request: call('PATCH', () => `${notesPath()}/${mine()}`, { title: 'x' }, () => fx.reader), status: 403, code: 'insufficient_scope' },
      ].map((row): Scenario => ({ ...row, check: nothingWritten })),
      (req) => send(fx.app, req, 'note'),
    )
  })

  test('POST …/notes/:id/messages → 201; the thread grows oldest first and updatedAt moves', async () => {
    const created = (await write('POST', notesPath(), { ...newNote, title: 'Thread' })).body
    fx.env.clock.advance(5 * MINUTE)
    const before = lastLogId()
    const at = fx.env.clock.now()
    const sent = await write('POST', `${notesPath()}/${created.id}/messages`, { content: '<p>Second</p>' })
    expect(sent.status).toBe(201)
    expect(sent.body.id).toBe(created.id)
    expect(sent.body.messages.map((m) => m.content)).toEqual(['<p>Please <b>verify</b></p>', '<p>Second</p>'])
    expect(sent.body.messages[1]!.createdAt).toBe(listed(at))
    expect(sent.body.updatedAt).toBe(listed(at))
    expect(sent.body.createdAt).toBe(created.createdAt)
    expectLogged(before, ['createMessage'], 'order-9')

    fx.env.clock.advance(MINUTE)
    const third = await write('POST', `${notesPath()}/${created.id}/messages`, { content: '<p>Third</p>' })
    expect(third.body.messages.map((m) => m.content)).toEqual(['<p>Please <b>verify</b></p>', '<p>Second</p>', '<p>Third</p>'])
    expect(third.body.updatedAt).toBe(listed(fx.env.clock.now()))
    // The list sees the new updatedAt.
    const page = await list({ 'updatedAt.eq': third.body.updatedAt })
    expect(page.body.data.map((n) => n.id)).toEqual([created.id])
  })

  test('PATCH title → 200 updateNote; archived true/false → archivedAt set then removed (archiveNote / unarchiveNote)', async () => {
    const created = (await write('POST', notesPath(), { ...newNote, title: 'Patch me' })).body
    const path = `${notesPath()}/${created.id}`

    fx.env.clock.advance(MINUTE)
    let before = lastLogId()
    const renamed = await write('PATCH', path, { title: 'Patched' })
    expect(renamed.status).toBe(200)
    expect(renamed.body.title).toBe('Patched')
    expect(renamed.body.updatedAt).toBe(listed(fx.env.clock.now()))
    expect('archivedAt' in renamed.body).toBe(false)
    expectLogged(before, ['updateNote'], 'order-9')

    fx.env.clock.advance(MINUTE)
    before = lastLogId()
    const archived = await write('PATCH', path, { archived: true })
    expect(archived.status).toBe(200)
    expect(archived.body.archivedAt).toBe(listed(fx.env.clock.now()))
    expect(archived.body.updatedAt).toBe(archived.body.archivedAt!)
    expectLogged(before, ['archiveNote'], 'order-9')
    expect((await list({ 'archivedAt.eq': archived.body.archivedAt! })).body.data.map((n) => n.id)).toEqual([created.id])

    // Archiving an archived note changes nothing and logs nothing.
    before = lastLogId()
    const again = await write('PATCH', path, { archived: true })
    expect(again.body).toEqual(archived.body)
    expect(lastLogId()).toBe(before)

    fx.env.clock.advance(MINUTE)
    before = lastLogId()
    const unarchived = await write('PATCH', path, { archived: false })
    expect(unarchived.status).toBe(200)
    expect('archivedAt' in unarchived.body).toBe(false)
    expect(unarchived.body.updatedAt).toBe(listed(fx.env.clock.now()))
    expectLogged(before, ['unarchiveNote'], 'order-9')
    expect((await list({ 'archivedAt.gte': '1970-01-01T00:00:00Z', limit: '100' })).body.data.map((n) => n.id)).not.toContain(created.id)

    // Both at once: one entry per effective change.
    fx.env.clock.advance(MINUTE)
    before = lastLogId()
    const both = await write('PATCH', path, { title: 'Both', archived: true })
    expect(both.body).toMatchObject({ title: 'Both', archivedAt: listed(fx.env.clock.now()) })
    expectLogged(before, ['updateNote', 'archiveNote'], 'order-9')
  })

  test('GET …/notes/:id after writes shows the stored state', async () => {
    const created = (await write('POST', notesPath(), { ...newNote, title: 'Get me' })).body
    const got = await send<NoteObject>(fx.app, request(`${notesPath()}/${created.id}`, { headers: bearer(fx.admin) }), 'note')
    expect(got.status).toBe(200)
    expect(got.body).toEqual(created)
  })

  // ── Sanitiser ──

  const XSS = [
    '<script>alert(1)</script><p>after</p>',
    '<SCRIPT SRC=https://evil.example/x.js></SCRIPT>',
    '<scr<script>ipt>alert(1)</scr</script>ipt>',
    '<<script>script>alert(1)<</script>/script>',
    '<img src=x onerror=alert(1)>',
    '<p onclick="alert(1)" onload="alert(2)">hi</p>',
    '<svg onload=alert(1)><circle/></svg>',
    '<body onload=alert(1)>',
    '<details open ontoggle=alert(1)>x</details>',
    '<a href="javascript:alert(1)">a</a>',
    '<a href="JaVaScRiPt:alert(1)">b</a>',
    '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">c</a>',
    '<a href="&#x6A;avascript&#x3A;alert(1)">c2</a>',
    '<a href="java&#x09;script:alert(1)">d</a>',
    '<a href="  javascript:alert(1)">e</a>',
    '<a href="vbscript:msgbox(1)">v</a>',
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">f</a>',
    '<img src="data:image/svg+xml;base64,PHN2Zz4=">',
    '<iframe src="https://evil.example"></iframe>',
    '<IFRAME SRCDOC="<script>alert(1)</script>"></IFRAME>',
    '<div style="background:url(javascript:alert(1));width:expression(alert(1))">s</div>',
    '<style>body{background:url("javascript:alert(1)")}</style>',
    '<form action="javascript:alert(1)"><input type=submit></form>',
    '<object data="data:text/html,<script>alert(1)</script>"></object>',
    '<embed src="javascript:alert(1)">',
    '<math><a xlink:href="javascript:alert(1)">m</a></math>',
    '<a href="https://ok.example/" onmouseover="alert(1)">ok</a>',
  ]
  const FORBIDDEN = ['<script', 'onerror', 'onload', 'onclick', 'onmouseover', 'ontoggle', 'javascript:', 'vbscript:', 'data:', '<iframe', '<svg', '<style', 'style=', '<form', '<object', '<embed', 'srcdoc']

  test.each(XSS)('sanitiser: %p is stored without active content (note and message)', async (payload) => {
    const created = await write('POST', notesPath(), { ...newNote, title: 'xss', content: payload })
    expect(created.status).toBe(201)
    const message = await write('POST', `${notesPath()}/${created.body.id}/messages`, { content: payload })
    expect(message.status).toBe(201)
    const stored = queryAll(fx.env.store, 'SELECT content FROM note_messages WHERE note_id = ? ORDER BY id', created.body.id) as { content: string }[]
    expect(stored).toHaveLength(2)
    for (const text of [...stored.map((s) => s.content), ...message.body.messages.map((m) => m.content)]) {
      const lower = text.toLowerCase()
      for (const bad of FORBIDDEN) expect({ text, contains: bad, found: lower.includes(bad) }).toEqual({ text, contains: bad, found: false })
    }
  })

  test('sanitiser keeps ordinary formatting and https links', async () => {
    const html = '<p><b>bold</b> <i>italic</i> <strong>s</strong> <em>e</em></p><ul><li>one</li><li>two</li></ul><ol><li>n</li></ol><a href="https://example.com/x?a=1&amp;b=2">link</a><br><blockquote>q</blockquote><code>c</code>'
    const sent = await write('POST', notesPath(), { ...newNote, title: 'formatting', content: html })
    const content = sent.body.messages[0]!.content
    for (const kept of ['<p>', '<b>bold</b>', '<i>italic</i>', '<strong>s</strong>', '<em>e</em>', '<ul><li>one</li><li>two</li></ul>', '<ol><li>n</li></ol>', 'href="https://example.com/x?a=1&amp;b=2"', '>link</a>', '<br />', '<blockquote>q</blockquote>', '<code>c</code>']) {
      expect(content).toContain(kept)
    }
    expect(content).toContain('rel="noopener noreferrer nofollow"')
  })
})

// ── Pagination walk over notes written as fast as possible ──────────────────

describe('pagination walk', () => {
  const TOTAL = 320
  let fx: Fixture
  beforeAll(async () => {
    fx = await buildFixture(HIGH_RATES, [], { clock: systemClock })
  })
  afterAll(() => fx.env.cleanup())

  test(`${TOTAL} notes POSTed in concurrent batches of 50: createdAt strictly increasing in id order; createdAt.lt paging sees each once`, async () => {
    const created: NoteObject[] = []
    for (let start = 0; start < TOTAL; start += 50) {
      const batch = Array.from({ length: Math.min(50, TOTAL - start) }, (_, k) =>
        send<NoteObject>(
          fx.app,
          request(notesPath(), {
            method: 'POST',
            headers: bearer(fx.admin),
            json: { recordId: `walk-${(start + k) % 7}`, collectionName: 'orders', teamName: 'Support', title: `walk ${start + k}`, content: `<p>${start + k}</p>` },
          }),
          'note',
        ),
      )
      for (const sent of await Promise.all(batch)) {
        expect(sent.status).toBe(201)
        created.push(sent.body)
      }
    }
    expect(created).toHaveLength(TOTAL)

    // In id order, createdAt strictly increases (several notes land in the same clock millisecond: +1 µs each).
    const rows = queryAll(fx.env.store, 'SELECT id, created_at FROM notes ORDER BY id') as { id: number; created_at: number }[]
    expect(rows).toHaveLength(TOTAL)
    expect(new Set(rows.map((r) => r.created_at)).size).toBe(TOTAL)
    for (let k = 1; k < rows.length; k++) expect(rows[k]!.created_at).toBeGreaterThan(rows[k - 1]!.created_at)
    const byId = [...created].sort((a, b) => a.id - b.id)
    expect(byId.map((n) => n.createdAt)).toEqual(rows.map((r) => toIsoMicros(r.created_at as Micros)))

    // Walk with limit=100, moving createdAt.lt to the last note's createdAt.
    const seen: number[] = []
    let query: Record<string, string> = { limit: '100' }
    let pages = 0
    for (;;) {
      const { status, body } = await send<NotesPage>(fx.app, request(notesPath(query), { headers: bearer(fx.admin) }), 'list')
      expect(status).toBe(200)
      pages++
      expect(body.data.length).toBe(body.hasMore ? 100 : TOTAL % 100)
      seen.push(...body.data.map((n) => n.id))
      if (!body.hasMore) break
      query = { limit: '100', 'createdAt.lt': body.data.at(-1)!.createdAt }
      expect(pages).toBeLessThan(10)
    }
    expect(pages).toBe(Math.ceil(TOTAL / 100))
    expect(seen).toHaveLength(TOTAL)
    expect(new Set(seen).size).toBe(TOTAL)
    expect(seen).toEqual(rows.map((r) => r.id).reverse())
  }, 60_000)
})

// ── Rate limit ──────────────────────────────────────────────────────────────

describe('rate limit', () => {
  let fx: Fixture
  beforeAll(async () => {
    fx = await buildFixture({ TRELLIS_API_RATE_PER_MIN: '5' }, fixtureNotes().slice(0, 3))
  })
  afterAll(() => fx.env.cleanup())

  test('the 6th GET in a minute is a 429 with Retry-After and the 429 body; the next minute is open again', async () => {
    const get = () => send<NotesPage | ErrorObject>(fx.app, request(notesPath(), { headers: bearer(fx.admin) }), 'list')
    for (let k = 0; k < 5; k++) {
      const sent = await get()
      expect(sent.status).toBe(200)
      expect(sent.headers.get('x-ratelimit-limit')).toBe('5')
      expect(sent.headers.get('x-ratelimit-remaining')).toBe(String(4 - k))
      expect(Number(sent.headers.get('x-ratelimit-reset'))).toBeGreaterThan(fx.env.clock.now() / 1000)
    }
    const refused = await get()
    expect(refused.status).toBe(429)
    const retryAfter = refused.headers.get('retry-after')
    expect(retryAfter).toMatch(/^[1-9]\d*$/)
    expect(Number(retryAfter)).toBeLessThanOrEqual(60)
    const body = refused.body as ErrorObject
    expect(body).toMatchObject({ error: 'Too Many Requests', code: 'rate_limited', retry_after: Number(retryAfter) })
    expect(body.message.length).toBeGreaterThan(0)
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')

    // Refused requests are not counted; after the window they pass again.
    fx.env.clock.advance(Number(retryAfter) * 1000)
    expect((await get()).status).toBe(200)
  })
})

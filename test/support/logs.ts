/**
 * The activity-log and admin-log harness shared by test/activity-logs.test.ts and test/admin-logs.test.ts
 * (spec §1, §2.8, §4.3, §5.8; DESIGN §7): the real app over a real SQLite file with the Acme + Globex file applied.
 *
 * Every 200 body of `GET …/activity-logs` is validated against the compatibility document's `listActivityLogs`
 * and of `GET …/admin-logs` against `listAdminLogs`, as published (only DESIGN's `exclusiveMinimum` quirk dropped;
 * test/support/compat-schema.ts). Asked with `extensions=true`, a body may deviate only by DESIGN §7's extension
 * values on their own fields. Every 4xx body is validated against the operation's 4XX schema, every 429 against its
 * 429 schema; a 5XX anywhere fails the test.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { ValidateFunction } from 'ajv'
import { writeNow } from '../../src/db/write.ts'
import type { Executor } from '../../src/executor/executor.ts'
import type { Clock } from '../../src/lib/clock.ts'
import { parseIsoMicros } from '../../src/lib/time.ts'
import { appendActivityLog } from '../../src/modules/activity-logs/service.ts'
import { ADMIN_LOG_RESOURCES, appendAdminLog } from '../../src/modules/admin-logs/service.ts'
import type { ApplyReport } from '../../src/modules/apply/service.ts'
import { revokeToken, type Scope } from '../../src/modules/tokens/service.ts'
import { bearer, execute, handleJson, ISO_UTC_MICROS, listed, queryAll, queryOne, request, tableContents, testApp, testEnv, type TestEnv } from '../helpers.ts'
import { type AcmeDocument, acmeWithGlobex, applyAcme, projectId, tokenFor } from './acme.ts'
import { assertValid, assertValidWithExtensions, compatDocument, type ErrorObject, EXTENSION_VALUES, validatorFor } from './compat-schema.ts'
import { expectError, type Scenario, type Sent } from './scenarios.ts'


// ── Compatibility validation ────────────────────────────────────────────────

export type Endpoint = 'activity' | 'admin'
export const OPERATIONS = { activity: 'listActivityLogs', admin: 'listAdminLogs' } as const
export const VALIDATORS: Record<Endpoint, { ok: ValidateFunction; error: ValidateFunction; limited: ValidateFunction }> = {
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
/** Prints how many bodies were checked against the compatibility document (call in a file's `afterAll`). */
export function reportValidations(): void {
  console.log(`compat-schema validations: ${JSON.stringify(validated)}`)
}

export { ISO_UTC_MICROS, listed } from '../helpers.ts'
/** A millisecond time as the API renders other times (tokens, runs, the retention entry's text). */
export const iso = (ms: number) => new Date(ms).toISOString()

// ── Shapes ──────────────────────────────────────────────────────────────────

export interface UserObject {
  object: 'user'
  id: number
  username: string
  email: string
}
export interface ActivityLog {
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
export interface AdminLog {
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
export interface Page<T> {
  hasMore: boolean
  data: T[]
  parameters: Record<string, unknown>
}
export type App = ReturnType<typeof testApp>

/** Sends through the app; validates the body by status against the endpoint's schemas. 5XX or non-JSON throws. */
export async function send<T>(app: App, req: Request, kind: Endpoint): Promise<Sent<T>> {
  const { response, body } = await handleJson(app, req)
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
    for (const entry of page.data) expect(entry.createdAt).toMatch(ISO_UTC_MICROS)
    if (kind === 'activity') for (const entry of page.data as ActivityLog[]) splitTokenFromLabel(entry)
    if (new URL(req.url).searchParams.get('extensions') === 'true') takeChainLinks(page.data)
  }
  return { status: response.status, headers: response.headers, body: body as T }
}

/**
 * Entries made through an application token name it at the end of their label (`· token "name" (trl_AbCd1234…)`).
 * The tests below compare labels without it; the token part is checked (against the tokens table) and kept in
 * `tokenOf` for the tests about it.
 */
const TOKEN_SUFFIX = / · token "([^"]*)" \((trl_[A-Za-z0-9_-]{8})…\)$/
export const tokenOf = new WeakMap<object, { name: string; prefix: string }>()
function splitTokenFromLabel(entry: ActivityLog): void {
  const match = entry.label === undefined ? null : TOKEN_SUFFIX.exec(entry.label)
  if (!match) return
  entry.label = entry.label!.slice(0, match.index)
  tokenOf.set(entry, { name: match[1]!, prefix: match[2]! })
}

export type Query = Record<string, string> | string
const search = (query: Query) => (typeof query === 'string' ? query : new URLSearchParams(query).toString())
const withQuery = (base: string, query: Query) => (search(query) === '' ? base : `${base}?${search(query)}`)

export function activityPath(query: Query = {}, project = 'Acme', environment = 'production') {
  return withQuery(`/v1/project/${encodeURIComponent(project)}/environment/${encodeURIComponent(environment)}/activity-logs`, query)
}
export function adminPath(query: Query = {}, project = 'Acme') {
  return withQuery(`/v1/project/${encodeURIComponent(project)}/admin-logs`, query)
}
export const notesPath = (environment = 'production') => `/v1/project/Acme/environment/${environment}/notes`

// ── Fixtures ────────────────────────────────────────────────────────────────

/** `extensions` values both log lists refuse: only `true`, `false` and empty are accepted, exactly. */
export const BAD_EXTENSIONS = ['TRUE', 'True', '1', 'yes', 'on', 'true ', 'maybe']

export const HIGH_RATES = { TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_API_RATE_PER_HOUR: '100000', TRELLIS_API_RATE_PER_DAY: '100000' }

export interface Fx {
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

export function userObject(env: TestEnv, username: string): UserObject {
  const row = queryOne<{ id: number; username: string; email: string }>(env.store, 'SELECT id, username, email FROM users WHERE username = ?', username)!
  return { object: 'user', ...row }
}

export async function buildFx(options: { clock?: Clock; document?: AcmeDocument; env?: Record<string, string>; executor?: (env: TestEnv) => Executor } = {}): Promise<Fx & { executor?: Executor }> {
  const env = testEnv({ ...HIGH_RATES, ...options.env })
  const clock = options.clock ?? env.clock
  const report = await applyAcme({ store: env.store, clock, secret: env.secret, baseUrl: env.config.baseUrl }, options.document ?? acmeWithGlobex())
  const executor = options.executor?.(env)
  const app = testApp(env, { clock, ...(executor ? { executor } : {}) })
  return {
    env,
    clock,
    app,
    report,
    executor,
    alice: (await tokenFor(env.store, clock, 'alice', ['all'])).value,
    aliceGlobex: (await tokenFor(env.store, clock, 'alice', ['all'], { project: 'Globex' })).value,
    users: {
      alice: userObject(env, 'alice'),
      bob: userObject(env, 'bob'),
      carol: userObject(env, 'carol'),
      dave: userObject(env, 'dave'),
    },
  }
}

export const listActivity = (fx: Fx, query: Query = {}, options: { token?: string; project?: string; environment?: string } = {}) =>
  send<Page<ActivityLog>>(fx.app, request(activityPath(query, options.project, options.environment), { headers: bearer(options.token ?? fx.alice) }), 'activity')
export const listAdmin = (fx: Fx, query: Query = {}, options: { token?: string; project?: string } = {}) =>
  send<Page<AdminLog>>(fx.app, request(adminPath(query, options.project), { headers: bearer(options.token ?? (options.project === 'Globex' ? fx.aliceGlobex : fx.alice)) }), 'admin')

/**
 * Every entry matching `query`, newest first, paging as docs/api.md says: `createdAt.lte` the last entry's time and
 * skip ids already seen (log entries may share a millisecond). Fails if a page brings nothing new.
 */
export async function walk<T extends ActivityLog | AdminLog>(
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
export function isExtension(entry: ActivityLog | AdminLog): boolean {
  const values = entry.object === 'activityLog' ? EXTENSION_VALUES.listActivityLogs : EXTENSION_VALUES.listAdminLogs
  return Object.entries(values).some(([field, extensions]) => extensions.includes((entry as unknown as Record<string, string>)[field]!))
}
/** The query's first parameter holding an extension value of `kind` (such a filter needs extensions=true), if any. */
export function extensionParameter(kind: Endpoint, query: Record<string, string>): string | undefined {
  const values: Record<string, readonly string[]> = EXTENSION_VALUES[OPERATIONS[kind]]
  return Object.keys(query).find((name) => values[name]?.includes(query[name]!))
}

/**
 * With `extensions=true` every entry carries its link in its scope's hash chain (`chain: { position, hash }`, its shape
 * checked by `assertValidWithExtensions`): on a page of one scope, newest first, the positions fall by one from entry
 * to entry but where a filter skips some. Checked here and taken off, so that the tests compare the document's fields.
 */
function takeChainLinks(entries: (ActivityLog | AdminLog)[]): void {
  const links = entries.map((entry) => (entry as { chain?: { position: number } }).chain)
  expect(links.every((link) => link !== undefined)).toBe(true)
  for (let i = 1; i < links.length; i++) expect(links[i]!.position).toBeLessThan(links[i - 1]!.position)
  for (const entry of entries) delete (entry as { chain?: unknown }).chain
}

export const maxId = (env: TestEnv, table: 'activity_logs' | 'admin_logs') => queryOne<{ id: number }>(env.store, `SELECT coalesce(max(id), 0) AS id FROM ${table}`)!.id
export const rowsAfter = (env: TestEnv, table: 'activity_logs' | 'admin_logs', id: number) => queryAll(env.store, `SELECT * FROM ${table} WHERE id > ? ORDER BY id`, id)

/** The activity entries (any environment) written since `before`, extensions included, oldest first, as the API renders them. */
export async function activitySince(fx: Fx, before: number, environment = 'production'): Promise<ActivityLog[]> {
  const { body } = await listActivity(fx, { limit: '100', extensions: 'true' }, { environment })
  return body.data.filter((e) => Number(e.id) > before).reverse()
}
export async function adminSince(fx: Fx, before: number, project = 'Acme'): Promise<AdminLog[]> {
  const { body } = await listAdmin(fx, { limit: '100', extensions: 'true' }, { project })
  return body.data.filter((e) => Number(e.id) > before).reverse()
}

export const environment = (name: string) => ({ object: 'environment' as const, name })
export const team = (name: string) => ({ object: 'team' as const, name })
export const collection = (name: string) => ({ object: 'collection' as const, name })

// ── The seeded list fixture (GET …/activity-logs and …/admin-logs) ─────────────

/** The time of the first seeded entry; the seed spreads entries over T … T + 17 s, three per second. */
export const T = Date.UTC(2026, 11, 1, 8, 0, 0)
/** The seed's time `k` seconds after T, as the API renders it; an entry's time in ms, with its µs as a fraction. */
export const at = (k: number) => listed(T + k * 1_000)
export const time = (e: { createdAt: string }) => parseIsoMicros(e.createdAt)! / 1000
export type ListTokens = Record<'activity' | 'admin' | 'readOnly' | 'notesRead' | 'notesWrite' | 'trigger' | 'bobAll' | 'daveAll' | 'revoked', string>
export interface ListFixture {
  fx: Fx
  tokens: ListTokens
  /** Every seeded entry, extensions included (`extensions=true`), and the ones a default call lists. */
  production: ActivityLog[]
  adminAll: AdminLog[]
  productionDocumented: ActivityLog[]
  adminDocumented: AdminLog[]
}

/**
 * The apply file's log entries set aside, then 48 production + 6 staging activity entries and 36 admin entries
 * written straight through the services, and tokens of every scope and role.
 */
export async function listFixture(): Promise<ListFixture> {
  const tokens = {} as ListTokens
  const fx = await buildFx()
  const { env } = fx
  const make = async (user: string, scopes: Scope[], project?: string) => (await tokenFor(env.store, env.clock, user, scopes, { project })).value
  tokens.activity = await make('alice', ['activity_logs:read'])
  tokens.admin = await make('alice', ['admin_logs:read'])
  tokens.readOnly = await make('alice', ['activity_logs:read', 'admin_logs:read', 'notes:read'])
  tokens.notesRead = await make('alice', ['notes:read'])
  tokens.notesWrite = await make('alice', ['notes:write'])
  tokens.trigger = await make('alice', ['workflows:trigger'])
  tokens.bobAll = await make('bob', ['all'])
  tokens.daveAll = await make('dave', ['all'])
  const revoked = await tokenFor(env.store, env.clock, 'alice', ['all'])
  tokens.revoked = revoked.value
  await writeNow(env.store, function* () {
        return yield* revokeToken(env.clock, revoked.token, null)
      })
  // The seed below is the whole activity log: set the apply file's own entries aside (deleting is what
  // retention does; nothing updates an entry).
  execute(env.store, 'DELETE FROM activity_logs')

  // Seed: 48 production + 6 staging activity entries spread over users, teams, collections, actions, types and
  // records, three per millisecond-exact time (ties); 36 admin entries likewise. Straight through the services.
  // The ids are read once, before the loop: each row check is a psql process on PostgreSQL (tens of ms), and an
  // op must not wait on one inside its open transaction.
  const acme = projectId(env.store, 'Acme')
  const idsOf = (table: 'environments' | 'teams' | 'collections') => {
    const ids = new Map(queryAll<{ id: number; name: string }>(env.store, `SELECT id, name FROM ${table} WHERE project_id = ?`, acme).map((r) => [r.name, r.id]))
    return (name: string) => ids.get(name) ?? expect.unreachable(`no ${table} row named ${name}`)
  }
  const envId = idsOf('environments')
  const teamId = idsOf('teams')
  const collectionId = idsOf('collections')
  const users = ['alice', 'bob', 'carol', 'dave'] as const
  const actions = ['create', 'update', 'delete', 'createNote', 'createMessage', 'triggerWorkflow', 'completeWorkflowStep', 'updateNote', 'failWorkflow'] as const
  for (let i = 0; i < 54; i++) {
    env.clock.set(T + Math.floor(i / 3) * 1_000)
    const read = i % 7 === 3
    await writeNow(env.store, function* () {
          return yield* appendActivityLog(env.clock, {
                          environmentId: envId(i >= 48 ? 'staging' : 'production'),
                          type: read ? 'read' : 'write',
                          action: read ? 'read' : actions[i % actions.length]!,
                          label: `seed ${i}`,
                          userId: fx.users[users[i % 4]!].id,
                          teamId: teamId(i % 3 === 0 ? 'Billing' : 'Support'),
                          collectionId: i % 5 === 4 ? null : collectionId(i % 2 === 0 ? 'orders' : 'customers'),
                          recordIds: i % 6 === 0 ? ['rec-a', 'rec-b'] : i === 13 ? ['ünï|42'] : [`rec-${i % 4}`],
                          ...(i % 4 === 1 ? { workflow: { name: 'Refund order', runId: `run-${i}`, ...(i % 8 === 1 ? { stepName: '1-load' } : {}) } } : {}),
                        })
        },
    )
  }
  const types = ['add', 'remove', 'update', 'initial'] as const
  for (let i = 0; i < 36; i++) {
    env.clock.set(T + Math.floor(i / 3) * 1_000)
    await writeNow(env.store, function* () {
          return yield* appendAdminLog(env.clock, {
                          projectId: acme,
                          type: types[i % 4]!,
                          resource: ADMIN_LOG_RESOURCES[i % ADMIN_LOG_RESOURCES.length]!,
                          initiator: i % 6 === 5 ? 'system' : i % 5 === 0 ? 'identityProvider' : 'administrator',
                          actorId: i % 6 === 5 ? null : fx.users[i % 2 === 0 ? 'alice' : 'carol'].id,
                          previousValue: i % 2 === 0 ? { name: `before ${i}` } : undefined,
                          newValue: { name: `after ${i}` },
                        })
        },
    )
  }
  env.clock.set(T + 3_600_000)
  const production = (await walk((query) => listActivity(fx, { ...query, extensions: 'true' }))).entries
  const adminAll = (await walk((query) => listAdmin(fx, { ...query, extensions: 'true' }))).entries
  const productionDocumented = production.filter((e) => !isExtension(e))
  const adminDocumented = adminAll.filter((e) => !isExtension(e))
  return { fx, tokens, production, adminAll, productionDocumented, adminDocumented }
}

/**
 * Each filter case alone against the full list: exactly the matching entries, newest first, paged by 7 — with
 * `extensions=true`, and without it either exactly the documented matches or, when the filter itself is an
 * extension value, a 400 naming it. A case whose name does not match `trivial` must select a proper subset.
 */
export async function expectFilterCases<E extends ActivityLog | AdminLog>(
  kind: Endpoint,
  list: (query: Record<string, string>) => Promise<Sent<Page<E>>>,
  all: { extensions: E[]; documented: E[] },
  cases: [string, Record<string, string>, (e: E) => boolean][],
  trivial: RegExp,
): Promise<void> {
  for (const [name, query, match] of cases) {
    const { entries } = await walk((q) => list({ ...q, extensions: 'true' }), query, 7)
    expect({ name, ids: entries.map((e) => e.id) }).toEqual({ name, ids: all.extensions.filter(match).map((e) => e.id) })
    // Without extensions=true: exactly the documented matches (paged in SQL: full pages, exact hasMore), or a 400
    // when the filter itself is an extension value.
    const extension = extensionParameter(kind, query)
    if (extension) expectError(await list(query), 400, 'invalid_parameter', extension)
    else {
      const plain = await walk((q) => list(q), query, 7)
      expect({ name, ids: plain.entries.map((e) => e.id) }).toEqual({ name, ids: all.documented.filter(match).map((e) => e.id) })
    }
    const total = all.extensions.filter(match).length
    if (!trivial.test(name)) expect({ name, nonTrivial: total > 0 && total < all.extensions.length }).toEqual({ name, nonTrivial: true })
  }
}

/** The enum values the compatibility document lists for parameter `name` of operation `op`. */
export function documented(op: string, name: string): string[] {
  const params = (() => {
    for (const methods of Object.values(compatDocument().paths)) {
      for (const o of Object.values(methods)) {
        if (o.operationId === op) return (o as unknown as { parameters: { name: string; schema: { enum?: string[] } }[] }).parameters
      }
    }
    throw new Error(op)
  })()
  return params.find((p) => p.name === name)!.schema.enum!
}

/**
 * Every documented value of parameter `name` is accepted as a filter (with extensions absent, true or false) and
 * selects exactly its entries; an extension value is a 400 naming the parameter and listing the document's values
 * unless `extensions=true`.
 */
export async function expectEnumFilter<E extends ActivityLog | AdminLog>(
  list: (query: Record<string, string>) => Promise<Sent<Page<E>>>,
  all: E[],
  name: string,
  values: string[],
  extensions: string[],
): Promise<void> {
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

/** For each query: exactly `limit` matching entries → hasMore false; one more than limit → true. */
export async function expectHasMoreBoundaries(kind: Endpoint, list: (query: Record<string, string>) => Promise<Sent<Page<unknown>>>, cases: Record<string, string>[]): Promise<void> {
  for (const query of cases) {
    const total = (await list({ ...query, limit: '100' })).body.data.length
    expect(total).toBeGreaterThan(1)
    expect(total).toBeLessThan(100)
    const exact = await list({ ...query, limit: String(total) })
    expect({ kind, query, n: exact.body.data.length, hasMore: exact.body.hasMore }).toEqual({ kind, query, n: total, hasMore: false })
    const short = await list({ ...query, limit: String(total - 1) })
    expect({ kind, query, n: short.body.data.length, hasMore: short.body.hasMore }).toEqual({ kind, query, n: total - 1, hasMore: true })
  }
}

/** Ids strictly descending and createdAt never going backwards in id order (a createdAt.lte page starts where the previous one ended). */
export function expectNewestFirst(list: (ActivityLog | AdminLog)[]): void {
  const ids = list.map((e) => Number(e.id))
  for (let k = 1; k < ids.length; k++) expect(ids[k]!).toBeLessThan(ids[k - 1]!)
  const times = list.map((e) => Date.parse(e.createdAt))
  for (let k = 1; k < times.length; k++) expect(times[k]!).toBeLessThanOrEqual(times[k - 1]!)
}

/** The rows of `tables` are what they were in `before` (a `tableContents` snapshot). */
export function expectNothingWritten(env: TestEnv, before: Record<string, unknown[]>, tables: string[]): void {
  const after = tableContents(env.store)
  for (const table of tables) expect({ table, rows: after[table] }).toEqual({ table, rows: before[table]! })
}

/**
 * The rate limit on one log endpoint: with 2 calls a minute, one on each endpoint spends the token's budget (one
 * budget for both), and the next call on `kind`'s endpoint is the document's 429 with a Retry-After in whole seconds.
 */
export function describeRateLimit(kind: Endpoint): void {
  describe(`rate limit on the ${kind} log endpoint`, () => {
    let fx: Fx
    beforeAll(async () => {
      fx = await buildFx({ env: { TRELLIS_API_RATE_PER_MIN: '2' } })
    })
    afterAll(() => fx.env.cleanup())

    test(`one budget with the ${kind === 'activity' ? 'admin' : 'activity'} log; the 429 body and Retry-After match the document`, async () => {
      expect((await listActivity(fx)).status).toBe(200)
      expect((await listAdmin(fx)).status).toBe(200)
      const sent = kind === 'activity' ? await listActivity(fx) : await listAdmin(fx)
      expect(sent.status).toBe(429)
      expect(sent.headers.get('retry-after')).toMatch(/^[1-9]\d*$/)
      expect(sent.body as unknown as ErrorObject).toMatchObject({ error: 'Too Many Requests', code: 'rate_limited' })
    })
  })
}

type Outcome = [number, string?]
/** DESIGN §4 order: token → user → project → scope → role → existence; [activity-logs, admin-logs] per token. */
const SCOPE_MATRIX: [string, (lf: ListFixture) => string, Outcome, Outcome][] = [
  ['activity_logs:read', (lf) => lf.tokens.activity, [200], [403, 'insufficient_scope']],
  ['admin_logs:read', (lf) => lf.tokens.admin, [403, 'insufficient_scope'], [200]],
  ['read-only preset', (lf) => lf.tokens.readOnly, [200], [200]],
  ['all', (lf) => lf.fx.alice, [200], [200]],
  ['notes:read', (lf) => lf.tokens.notesRead, [403, 'insufficient_scope'], [403, 'insufficient_scope']],
  ['notes:write', (lf) => lf.tokens.notesWrite, [403, 'insufficient_scope'], [403, 'insufficient_scope']],
  ['workflows:trigger', (lf) => lf.tokens.trigger, [403, 'insufficient_scope'], [403, 'insufficient_scope']],
  ['editor with all', (lf) => lf.tokens.bobAll, [403, 'insufficient_role'], [403, 'insufficient_role']],
  ['user role with all', (lf) => lf.tokens.daveAll, [403, 'insufficient_role'], [403, 'insufficient_role']],
  ["another project's token", (lf) => lf.fx.aliceGlobex, [403, 'wrong_project'], [403, 'wrong_project']],
  ['revoked token', (lf) => lf.tokens.revoked, [401, 'unauthorized'], [401, 'unauthorized']],
  ['unknown token', () => `trl_${'A'.repeat(43)}`, [401, 'unauthorized'], [401, 'unauthorized']],
]

/** The scope and role matrix of one log endpoint as scenario rows (a 200 carries no error code), then no Authorization header at all. */
export function scopeMatrix(kind: Endpoint, fixture: () => ListFixture): Scenario[] {
  const path = kind === 'activity' ? activityPath() : adminPath()
  const rows = SCOPE_MATRIX.map(([name, token, ...outcomes]): Scenario => {
    const [status, code] = outcomes[kind === 'activity' ? 0 : 1]
    const request = () => ({ path, headers: bearer(token(fixture())) })
    if (code === undefined) return { name: `${name} → ${status}`, request, status, code: null }
    return { name: `${name} → ${status} ${code}`, request, status, code, body: { error: status === 401 ? 'Unauthorized' : 'Forbidden' } }
  })
  return [...rows, { name: 'no Authorization header → 401 unauthorized', request: { path }, status: 401, code: 'unauthorized' }]
}

/**
 * Append-only: no route writes to a log — PATCH / PUT / DELETE / POST on the list URL → 405 (Allow: GET, HEAD), on
 * the newest entry with each of `entryMethods` → 404. alice's `all` token sends them.
 */
export function noWriteRoutes(kind: Endpoint, fixture: () => ListFixture, entryMethods: string[]): Scenario[] {
  const list = kind === 'activity' ? activityPath() : adminPath()
  const entryId = () => (kind === 'activity' ? fixture().production : fixture().adminAll)[0]!.id
  const json = (method: string) => (method === 'GET' || method === 'DELETE' ? undefined : { label: 'forged' })
  const call = (method: string, path: () => string) => () => ({ method, path: path(), headers: bearer(fixture().fx.alice), body: json(method) })
  return [
    ...['PATCH', 'DELETE', 'PUT', 'POST'].map((method): Scenario => ({
      name: `${method} ${list} → 405, Allow: GET, HEAD`,
      request: call(method, () => list),
      status: 405,
      code: 'method_not_allowed',
      headers: { allow: 'GET, HEAD' },
    })),
    ...entryMethods.map((method): Scenario => ({
      name: `${method} ${list}/:id → 404`,
      request: call(method, () => `${list}/${entryId()}`),
      status: 404,
      code: 'not_found',
      headers: { allow: null },
    })),
  ]
}

/** What the shared parameter tests of a log list need: its call, what it echoes besides `limit`, and its entries. */
export interface ListParameterSpec<E extends ActivityLog | AdminLog> {
  list: (query: Query) => Promise<Sent<Page<E>>>
  /** What `parameters` echoes besides `limit`. */
  echoed: Record<string, unknown>
  /** Every entry without `extensions`, newest first (read once the fixture is seeded). */
  documented: () => E[]
  /** Every entry with `extensions=true`, newest first. */
  all: () => E[]
  /** A filter some entries match (unknown parameters beside it change nothing). */
  filter: Record<string, string>
  /** A filter no entry matches. */
  nothing: Record<string, string>
}

/**
 * The list parameters both log lists share, tested alike: `limit` (accepted values, absent, empty, repeated), unknown
 * parameters ignored (a path parameter's name in the query included), the order, and an empty result.
 */
export function listParameterTests<E extends ActivityLog | AdminLog>(spec: ListParameterSpec<E>): void {
  test.each(['1', '2', '10', '99', '100', '007'])('limit=%p is accepted, with and without extensions', async (limit) => {
    const n = Number(limit)
    const plain = await spec.list({ limit })
    expect(plain.body.parameters).toEqual({ ...spec.echoed, limit: n })
    expect(plain.body.data.map((e) => e.id)).toEqual(spec.documented().slice(0, n).map((e) => e.id))
    expect(plain.body.hasMore).toBe(n < spec.documented().length)
    const all = await spec.list({ limit, extensions: 'true' })
    expect(all.body.data.map((e) => e.id)).toEqual(spec.all().slice(0, n).map((e) => e.id))
    expect(all.body.hasMore).toBe(n < spec.all().length)
  })

  test('limit absent or empty → 10; repeated → the first', async () => {
    for (const query of ['', 'limit=', 'limit=10&limit=500']) {
      const page = await spec.list(query)
      expect(page.body.parameters).toEqual({ ...spec.echoed, limit: 10 })
      expect(page.body.data).toHaveLength(Math.min(10, spec.documented().length))
    }
    expect((await spec.list('limit=2&limit=500')).body.parameters.limit).toBe(2)
  })

  test('unknown query parameters are ignored', async () => {
    const noise = { foo: 'bar', cursor: 'abc', sort: 'id', 'createdAt.neq': 'x', recordIds: 'rec-a', projectName: 'Globex', environmentName: 'staging', page: '2' }
    const plain = await spec.list({ limit: '5', ...spec.filter })
    const noisy = await spec.list({ limit: '5', ...spec.filter, ...noise })
    expect(noisy.status).toBe(200)
    expect(noisy.body).toEqual(plain.body)
  })

  test('order: id descending, with and without filters', () => {
    expectNewestFirst(spec.all())
  })

  test('an empty result: hasMore false, data [], parameters echoed', async () => {
    expect((await spec.list({ ...spec.nothing, limit: '3' })).body).toEqual({ hasMore: false, data: [], parameters: { ...spec.echoed, limit: 3 } })
  })
}

/**
 * Property-based fuzzing of every operation in the app's own /openapi.json, with fast-check, on
 * the test env's store (SQLite; PostgreSQL in `npm test`'s second pass). The operations are read from the document,
 * so an operation added later is fuzzed too, and grouped into families by their OpenAPI tag (operations, setup, auth,
 * tokens, notes, workflows, webhooks, runs, activity-logs, admin-logs, instance-administration,
 * project-administration): each family gets TRELLIS_FUZZ_RUNS cases (default 200), each case one request through
 * `app.handle` over the Acme fixture (test/support/api-fixture.ts). A case varies
 * - the path parameters: the fixture's real value (to reach the code behind the lookups), hostile text
 *   percent-encoded (long, unicode, lone surrogates, NUL, SQL, HTML, numbers as text), raw segments (`%zz`, `..`);
 * - the query: documented parameters with valid, hostile and numeric-text values, unknown and repeated keys;
 * - the headers: the caller (alice's all-scopes admin token; her session cookie, with this site's Origin or a foreign
 *   one; garbage credentials; nobody), content types, Origin, X-Forwarded-For, Accept, prefetch hints, odd names,
 *   values of 17 KB, a hundred headers;
 * - the body: valid for the schema, one part of it broken (a value replaced by any hostile JSON value, a field
 *   dropped or added, at any depth), a key written twice, or a text no serializer writes (deep and wide nesting,
 *   1e309, raw `\ud800` and `\u0000` escapes, bytes that are not UTF-8, over the body limit).
 * Properties, per request: never a 5xx; every 4xx is JSON (and says so) with string `error`, `code` and `message`; a refused
 * request (4xx) writes nothing (a digest of every table before and after, test/support/db-digest.ts); and /healthz,
 * asked in the same process every few milliseconds throughout, never waits behind HEALTH_BOUND_MS of work.
 * A request that is accepted may break the fixture (rename Acme, turn SSO on, sign the session out): then the fixture
 * is made again (a session alone, or the whole env), counted in the printed summary.
 * TRELLIS_FUZZ_SEED sets the seed (printed; fixed by default, so CI runs the same cases), TRELLIS_FUZZ_RUNS the cases
 * per family; a failure prints the failing request and fast-check's seed and path (no shrinking: the server has state,
 * so a shrunk case would be run against another database than the one that failed); TRELLIS_FUZZ_PATH hands that path
 * back to replay one case (with `-t <family>`). `npm run soak` runs it long.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { request, type TestEnv, testEnv } from './helpers.ts'
import { type ApiFixture, fixtureValue, HIGH_API_BUDGETS, seedApiFixture, sessionCookie } from './support/api-fixture.ts'
import { changedTables, databaseDigest, type Digest } from './support/db-digest.ts'
import {
  brokenValue,
  headerValue,
  hostileJsonValue,
  hostileString,
  isoDateTime,
  NUMBER_TEXTS,
  percentEncoded,
  rawBody,
  RAW_SEGMENTS,
  schemaValue,
  withDuplicateKey,
} from './support/hostile-input.ts'
import { bodySchemaOf, type Json, type Operation, operationsOf, parametersOf } from './support/openapi-requests.ts'

const SEED = Number(process.env.TRELLIS_FUZZ_SEED ?? 26_2026)
const RUNS = Number(process.env.TRELLIS_FUZZ_RUNS ?? 200)
/**
 * /healthz, asked in this process while the fuzz runs, never waits behind this much work on the event loop. A request
 * that holds the loop (the deep-JSON freeze held it 7–14 s, a password hashed on it ~100 ms) shows here. The work is
 * the main thread's CPU time while an ask waited — on a loaded 2-core box the wall-clock wait also holds the time the
 * process was not scheduled at all (seen: 650 ms), which no code of ours causes; the summary prints both.
 */
const HEALTH_BOUND_MS = 100

// ── The fixture, made again when an accepted request broke it ──────────────────────────────────────────────────────

interface World extends ApiFixture {
  env: TestEnv
}

let world: World
/** The fixture's values by name, kept in this one object across remakes (the arbitraries read it when they run). */
const known: Record<string, string> = {}
let doc: Json
const remade = { sessions: 0, fixtures: 0 }

async function makeWorld(): Promise<World> {
  const env = testEnv({ ...HIGH_API_BUDGETS, TRELLIS_WEBHOOK_RATE_PER_MIN: '100000' })
  const fixture = await seedApiFixture(env)
  Object.assign(known, fixture.known)
  return { ...fixture, env }
}

// Made before the tests are declared: one test per family, and the families come from the document.
world = await makeWorld()
doc = (await (await world.app.handle(request('/openapi.json'))).json()) as Json
/** Each operation's family: its first OpenAPI tag. */
const familyOf = (op: Operation) => (op.operation.tags as string[])[0]!
const FAMILIES = [...new Set(operationsOf(doc).map(familyOf))]
console.log(`fuzz: seed ${SEED} (TRELLIS_FUZZ_SEED), ${RUNS} cases per family (TRELLIS_FUZZ_RUNS), ${FAMILIES.length} families, store ${world.env.store.kind}`)

afterAll(() => world?.env.cleanup())

const get = async (path: string, headers: Record<string, string>): Promise<Json | null> => {
  const response = await world.app.handle(request(path, { headers }))
  return response.status === 200 ? ((await response.json()) as Json) : null
}

/**
 * What the cases lean on is there as the fixture made it — alice's token and session, Acme's names, the webhook — or
 * made again. Whether anything was made again.
 */
async function keepFixture(): Promise<boolean> {
  const token = { authorization: world.bearer }
  const workflows = '/v1/project/Acme/environment/production/team/Support/workflows'
  const intact = async () => {
    const [tokens, workflow, hook] = await Promise.all([
      get('/v1/project/Acme/api-tokens', token),
      get(`${workflows}/Refund%20order`, token),
      get(`${workflows}/Hooked/webhook`, token),
    ])
    return tokens !== null && workflow?.collection === 'orders' && hook?.enabled === true && String(hook.url).endsWith(known['hooks/token']!)
  }
  const sessionWorks = async () => (await get('/v1/instance/users', { cookie: world.cookie })) !== null
  if (await intact()) {
    if (await sessionWorks()) return false
    world.cookie = await sessionCookie(world.env, world.aliceId)
    remade.sessions++
    if (await sessionWorks()) return true
  }
  remaking = true
  world.env.cleanup()
  world = await makeWorld()
  remade.fixtures++
  remaking = false
  remadeAt = performance.now()
  return true
}

/** While and when the fixture was last remade: the test's own work (SQLite applies it on the event loop), not the server's. */
let remaking = false
let remadeAt = 0

// ── Cases ───────────────────────────────────────────────────────────────────────────────────────────────────────────

type Caller = 'token' | 'session' | 'session, foreign origin' | 'forged' | 'anonymous'
/** A path parameter: the fixture's value (looked up when sent: a remade fixture has a new run id), or text as sent. */
type Segment = { fixture: string } | { raw: string }

interface FuzzCase {
  op: Operation
  path: Record<string, Segment>
  query: string
  caller: Caller
  headers: [string, string][]
  contentType?: string
  body?: string | Uint8Array
}

/** Body and query fields: the fixture's names; SSO left off (on, it would refuse alice's token and session from then on). */
const FIELDS = { known, pinned: { sso: false } }

const fixtureOr = (name: string, value: string | undefined) => value ?? known[name] ?? 'x'

/** A path parameter: the fixture's (most often), hostile text encoded, a raw segment, a number as text. */
function pathParameter(op: Operation, name: string): fc.Arbitrary<Segment> {
  const numeric = /^(id|userId)$/.test(name)
  return fc.oneof(
    { arbitrary: fc.constant({ fixture: name }), weight: 12 },
    { arbitrary: hostileString().map((text) => ({ raw: percentEncoded(text) })), weight: 3 },
    { arbitrary: fc.constantFrom(...RAW_SEGMENTS).map((raw) => ({ raw })), weight: 1 },
    { arbitrary: fc.oneof(fc.constantFrom(...NUMBER_TEXTS), fc.integer({ min: -3, max: 40 }).map(String)).map((raw) => ({ raw: encodeURIComponent(raw) })), weight: numeric ? 3 : 1 },
  ).map((segment) => ('raw' in segment && numeric && isProtected(op, name, segment.raw) ? { fixture: name } : segment))
}

/** Ids the fuzz leaves alone: alice (everything signs in as her) and her token. Any other may be revoked, removed… */
function isProtected(op: Operation, name: string, raw: string): boolean {
  const id = Number(raw)
  if (name === 'userId' || op.path.includes('/users/')) return id === world.aliceId
  return op.path.includes('tokens/') && id === world.tokenId
}

const QUERY_KEYS = ['limit', 'limit[]', 'createdAt.eq', 'createdAt.foo', '__proto__', 'constructor', 'a[b][c]', '', ' ', '%zz', 'userId', 'cursor', 'after']

function queryString(op: Operation): fc.Arbitrary<string> {
  const documented = parametersOf(op.operation, 'query')
  const value = (parameter?: Json): fc.Arbitrary<string> =>
    fc.oneof(
      { arbitrary: parameter ? schemaValue(parameter.schema ?? {}, FIELDS, parameter.name).map(String) : hostileString(), weight: 3 },
      { arbitrary: hostileString(), weight: 2 },
      { arbitrary: fc.constantFrom(...NUMBER_TEXTS), weight: 1 },
      { arbitrary: isoDateTime(), weight: parameter && /At\./.test(parameter.name) ? 2 : 0 },
    )
  const pair = fc.oneof(
    ...(documented.length > 0 ? [{ arbitrary: fc.constantFrom(...documented).chain((p) => fc.tuple(fc.constant(p.name as string), value(p))), weight: 4 }] : []),
    { arbitrary: fc.tuple(fc.oneof(fc.constantFrom(...QUERY_KEYS), hostileString()), value()), weight: 1 },
  )
  return fc.oneof(
    { arbitrary: fc.array(pair, { maxLength: 5 }).map((pairs) => pairs.map(([k, v]) => `${percentEncoded(k)}=${percentEncoded(v)}`).join('&')), weight: 8 },
    { arbitrary: fc.constantFrom('%zz=1', '=', '&&&', 'a', 'limit=%', 'limit=1&limit=2', 'limit=1;limit=2', '?', `a=${'x'.repeat(9_000)}`, 'a=%ED%A0%80&b=%00'), weight: 1 },
  )
}

const HEADER_NAME_UNIT = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-_!#$%&\'*+.^`|~'.split(''))

function extraHeader(): fc.Arbitrary<[string, string][]> {
  const one = (name: string, value: fc.Arbitrary<string>) => value.map((v): [string, string][] => [[name, v]])
  return fc.oneof(
    one('origin', fc.oneof(fc.constantFrom('http://localhost', 'http://trellis.test', 'https://evil.example', 'null', 'http://localhost:1', 'file://', ''), headerValue())),
    one('x-forwarded-for', fc.oneof(fc.constantFrom('1.2.3.4', '::1', '1.2.3.4, 5.6.7.8', '999.1.1.1', 'unknown'), headerValue())),
    one('x-forwarded-proto', headerValue()),
    one('accept', fc.constantFrom('text/html', '*/*', 'application/json', 'image/png', '', 'text/html;q=0, */*;q=0.1')),
    one('purpose', fc.constant('prefetch')),
    one('sec-purpose', fc.constant('prefetch;prerender')),
    one('cookie', headerValue()),
    one('authorization', fc.oneof(fc.constantFrom('Bearer', 'Bearer ', 'bearer x', 'Basic YWxpY2U6cGFzcw==', 'Bearer a.b.c', `Bearer ${'x'.repeat(5_000)}`), headerValue())),
    one('host', headerValue()),
    fc.tuple(fc.string({ unit: HEADER_NAME_UNIT, minLength: 1, maxLength: 20 }), headerValue()).map(([name, value]): [string, string][] => [[name, value]]),
    fc.constant(Array.from({ length: 101 }, (_, i): [string, string] => [`x-many-${i}`, 'x'])),
  )
}

const CONTENT_TYPES = ['application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'application/json; charset=latin1', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', 'multipart/form-data; boundary=x', 'application/octet-stream', 'application/merge-patch+json', '']

/** The body of a case: valid for the operation's schema, broken in one place, a key twice, any value, or raw text. */
function body(op: Operation): fc.Arbitrary<string | Uint8Array | undefined> {
  const method = op.method.toLowerCase()
  if (method === 'get' || method === 'head') return fc.constant(undefined)
  const schema = bodySchemaOf(doc, op.operation)
  const anyBody = fc.oneof(
    { arbitrary: hostileJsonValue().map((value) => JSON.stringify(value) ?? 'null'), weight: 1 },
    { arbitrary: rawBody(), weight: 2 },
  )
  if (!schema) return fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, { arbitrary: anyBody, weight: 1 })
  const valid = schemaValue(schema, FIELDS)
  return fc.oneof(
    { arbitrary: valid.map((value) => JSON.stringify(value)), weight: 4 },
    { arbitrary: valid.chain(brokenValue).map((value) => JSON.stringify(value) ?? 'null'), weight: 4 },
    { arbitrary: fc.tuple(valid, hostileJsonValue()).map(([value, other]) => withDuplicateKey(value, other)), weight: 1 },
    { arbitrary: anyBody, weight: 2 },
  )
}

/** Mostly a caller the operation takes (so that most cases get past authentication), sometimes anyone else. */
function callerOf(op: Operation): fc.Arbitrary<Caller> {
  const schemes = ((op.operation.security ?? []) as Json[]).flatMap((scheme) => Object.keys(scheme))
  const weights: Record<Caller, number> = {
    token: schemes.includes('bearerAuth') ? 6 : 1,
    session: schemes.includes('sessionCookie') ? 5 : 1,
    'session, foreign origin': 1,
    forged: 1,
    anonymous: 1,
  }
  return fc.oneof(...Object.entries(weights).map(([caller, weight]) => ({ arbitrary: fc.constant(caller as Caller), weight })))
}

function fuzzCase(op: Operation): fc.Arbitrary<FuzzCase> {
  const names = parametersOf(op.operation, 'path').map((p) => p.name as string)
  return fc
    .record({
      path: fc.record(Object.fromEntries(names.map((name) => [name, pathParameter(op, name)]))),
      query: fc.option(queryString(op), { freq: 2, nil: '' }),
      caller: callerOf(op),
      headers: fc.oneof({ arbitrary: fc.constant<[string, string][]>([]), weight: 2 }, { arbitrary: fc.array(extraHeader(), { minLength: 1, maxLength: 3 }).map((lists) => lists.flat()), weight: 1 }),
      contentType: fc.oneof({ arbitrary: fc.constant('application/json'), weight: 12 }, { arbitrary: fc.constantFrom(...CONTENT_TYPES), weight: 1 }),
      body: body(op),
    })
    .map((c) => withSummary({ op, ...c, contentType: c.body === undefined && c.contentType === 'application/json' ? undefined : c.contentType }))
}

/** A case as fast-check prints it: the request line, the caller, the headers and the body, each cut short. */
function withSummary(c: FuzzCase): FuzzCase {
  Object.defineProperty(c, fc.toStringMethod, { value: () => describeCase(c), enumerable: false })
  return c
}

const short = (text: string, max = 300) => (text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text)

function describeCase(c: FuzzCase): string {
  const body = c.body === undefined ? 'no body' : c.body instanceof Uint8Array ? `bytes [${[...c.body].join(', ')}]` : JSON.stringify(short(c.body))
  const headers = c.headers.length > 20 ? `${c.headers.length} extra headers` : JSON.stringify(c.headers.map(([n, v]) => [n, short(v, 80)]))
  return `${c.op.method.toUpperCase()} ${short(urlOf(c))} as ${c.caller}, content-type ${JSON.stringify(c.contentType ?? null)}, headers ${headers}, body ${body}`
}

function urlOf(c: FuzzCase): string {
  const path = c.op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const segment = c.path[name]!
    return 'raw' in segment ? segment.raw : encodeURIComponent(fixtureOr(name, fixtureValue(known, c.op.path, name)))
  })
  return c.query ? `${path}?${c.query}` : path
}

function requestOf(c: FuzzCase): Request {
  const headers = new Headers()
  if (c.caller === 'token') headers.set('authorization', world.bearer)
  if (c.caller.startsWith('session')) headers.set('cookie', world.cookie)
  // A browser sends its page's Origin with every change; the check refuses another one (403 cross_origin).
  if (c.caller === 'session' && c.op.method !== 'get') headers.set('origin', 'http://localhost')
  if (c.caller === 'session, foreign origin') headers.set('origin', 'https://evil.example')
  if (c.caller === 'forged') {
    headers.set('authorization', `${world.bearer.slice(0, -4)}AAAA`)
    headers.set('cookie', `${world.cookie.slice(0, -4)}AAAA`)
  }
  if (c.contentType !== undefined) headers.set('content-type', c.contentType)
  for (const [name, value] of c.headers) headers.append(name, value)
  return new Request(`http://localhost${urlOf(c)}`, { method: c.op.method.toUpperCase(), headers, body: c.body })
}

// ── The properties ──────────────────────────────────────────────────────────────────────────────────────────────────

interface FamilyStats {
  statuses: Map<number, number>
  /** The operations that accepted at least one case (2xx): how deep the family's cases got. */
  accepted: Set<string>
  slowest: { ms: number; what: string }
}

/** The test's own work on the event loop (main-thread CPU ms of its digests), which the /healthz watch leaves out. */
let testWorkMs = 0

/** The database's digest, its cost counted as the test's own work (on SQLite it reads every row on the event loop). */
async function digest(): Promise<Digest> {
  const cpu = process.threadCpuUsage()
  try {
    return await databaseDigest(world.env.store)
  } finally {
    testWorkMs += cpuMs(process.threadCpuUsage(cpu))
  }
}

/** The digest after the last case: the next one's before (nothing else writes in between). */
let lastDigest: Digest | undefined

async function checkCase(c: FuzzCase, stats: FamilyStats): Promise<void> {
  const fixturesBefore = remade.fixtures
  const before = lastDigest ?? (await digest())
  const began = performance.now()
  inFlight = `${c.op.method.toUpperCase()} ${c.op.path}`
  const response = await world.app.handle(requestOf(c))
  // An event stream does not end by itself: its head is the answer (a 200 holds nothing to check), then the client goes away.
  const stream = response.headers.get('content-type')?.startsWith('text/event-stream') === true
  if (stream) await response.body?.cancel()
  const text = stream ? '' : await response.text()
  const ms = performance.now() - began
  const after = await digest()
  lastDigest = after
  stats.statuses.set(response.status, (stats.statuses.get(response.status) ?? 0) + 1)
  if (response.status < 300) stats.accepted.add(`${c.op.method} ${c.op.path}`)
  if (ms > stats.slowest.ms) stats.slowest = { ms, what: `${c.op.method.toUpperCase()} ${c.op.path} → ${response.status}` }
  const answer = `→ ${response.status} ${short(text)}`
  if (response.status >= 500) throw new Error(`a 5xx ${answer}`)
  if (response.status >= 400) {
    let error: Json | null = null
    try {
      error = JSON.parse(text) as Json
    } catch {
      throw new Error(`an error body that is not JSON ${answer}`)
    }
    const missing = ['error', 'code', 'message'].filter((field) => typeof error?.[field] !== 'string')
    if (missing.length > 0) throw new Error(`an error body without string ${missing.join(', ')} ${answer}`)
    if (!response.headers.get('content-type')?.startsWith('application/json')) throw new Error(`an error body labelled ${response.headers.get('content-type')} ${answer}`)
    const changed = changedTables(before, after)
    if (changed.length > 0) throw new Error(`refused, yet written: ${changed.join('; ')} ${answer}`)
  } else if (c.op.method !== 'get' && (await keepFixture())) {
    // A remade session or fixture is a write of the test's own: the next case takes its digest afresh.
    lastDigest = undefined
    if (remade.fixtures > fixturesBefore) console.log(`fuzz: remade the fixture after ${describeCase(c)} ${answer}`)
  }
}

/** The operation of the case being sent, for the /healthz watch to name what it waited behind. */
let inFlight = ''

/**
 * /healthz asked every few milliseconds until `stop`: how often, and the longest wait — in wall-clock time and in work
 * the event loop did meanwhile (main-thread CPU time, the test's own digests left out) — with the request it waited
 * behind. A wait counts from when the
 * ask was due (how late the loop let its timer fire, as a request arriving then would have waited) to the answer.
 * The cases let the loop turn between them (`nextTurn`), as a server's requests would.
 */
function watchHealth(): { stop(): Promise<HealthWatch> } {
  let watching = true
  const watch: HealthWatch = { asked: 0, slowestMs: 0, mostWorkMs: 0, behind: '' }
  const loop = (async () => {
    while (watching) {
      const due = performance.now() + HEALTH_EVERY_MS
      const cpu = process.threadCpuUsage()
      const testWorkBefore = testWorkMs
      await Bun.sleep(HEALTH_EVERY_MS)
      const waitingBehind = inFlight
      const response = await world.app.handle(request('/healthz'))
      const waited = performance.now() - due
      const worked = cpuMs(process.threadCpuUsage(cpu)) - (testWorkMs - testWorkBefore)
      watch.asked++
      if (response.status !== 200) throw new Error(`/healthz answered ${response.status}`)
      // The first ask waits behind fast-check's start, not behind a request.
      if (watch.asked === 1 || remaking || due <= remadeAt) continue
      watch.slowestMs = Math.max(watch.slowestMs, waited)
      if (worked > watch.mostWorkMs) [watch.mostWorkMs, watch.behind] = [worked, waitingBehind]
      if (process.env.FUZZ_DEBUG && waited > 100) console.log(`/healthz waited ${waited.toFixed(0)} ms (${worked.toFixed(0)} ms of work) behind ${waitingBehind}, ask ${watch.asked}`)
    }
  })()
  return {
    async stop() {
      watching = false
      await loop
      return watch
    },
  }
}

interface HealthWatch {
  asked: number
  slowestMs: number
  mostWorkMs: number
  behind: string
}

const cpuMs = ({ user, system }: { user: number; system: number }) => (user + system) / 1000
const HEALTH_EVERY_MS = 5
const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

test('the digest sees a write: an accepted note change changes it, a read does not', async () => {
  const note = `/v1/project/Acme/environment/production/notes/${known['notes/id']}`
  const before = await databaseDigest(world.env.store)
  expect((await world.app.handle(request(note, { headers: { authorization: world.bearer } }))).status).toBe(200)
  expect(changedTables(before, await databaseDigest(world.env.store))).toEqual([])
  const patched = await world.app.handle(request(note, { method: 'PATCH', headers: { authorization: world.bearer }, json: { title: 'Digest check' } }))
  expect(patched.status).toBe(200)
  expect(changedTables(before, await databaseDigest(world.env.store)).map((change) => change.split(' ')[0])).toContain('notes')
})

describe('every operation of /openapi.json, fuzzed: no 5xx, every error body whole, nothing written when refused', () => {
  for (const family of FAMILIES) {
    test(`${family}: ${RUNS} cases, /healthz never waits behind ${HEALTH_BOUND_MS} ms of work`, async () => {
      const ops = operationsOf(doc).filter((op) => familyOf(op) === family)
      expect(ops.length).toBeGreaterThan(0)
      const stats: FamilyStats = { statuses: new Map(), accepted: new Set(), slowest: { ms: 0, what: '' } }
      const remadeBefore = { ...remade }
      lastDigest = undefined
      const cases = fc.constantFrom(...ops.map(fuzzCase)).chain((arbitrary) => arbitrary)
      const health = watchHealth()
      const began = performance.now()
      try {
        await fc.assert(
          fc.asyncProperty(cases, async (c) => {
            await checkCase(c, stats)
            await nextTurn()
          }),
          { seed: SEED, numRuns: RUNS, endOnFailure: true, path: process.env.TRELLIS_FUZZ_PATH },
        )
      } finally {
        const { asked, slowestMs, mostWorkMs, behind } = await health.stop()
        console.log(
          `fuzz ${family}: ${ops.length} operations (${stats.accepted.size} accepted a case), ${RUNS} cases in ${((performance.now() - began) / 1000).toFixed(1)} s, statuses ${JSON.stringify(Object.fromEntries([...stats.statuses].sort(([a], [b]) => a - b)))}, ` +
            `slowest ${stats.slowest.ms.toFixed(1)} ms (${stats.slowest.what}), /healthz asked ${asked} times, slowest ${slowestMs.toFixed(1)} ms, behind ${mostWorkMs.toFixed(1)} ms of work at most (${behind || 'nothing'}), ` +
            `remade ${remade.sessions - remadeBefore.sessions} session(s) and ${remade.fixtures - remadeBefore.fixtures} fixture(s)`,
        )
        expect(asked).toBeGreaterThan(0)
        expect(mostWorkMs).toBeLessThan(HEALTH_BOUND_MS)
      }
    }, 120_000 + RUNS * 200)
  }
})

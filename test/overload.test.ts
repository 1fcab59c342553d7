/**
 * Overload: a real `serve` process, loopback only, floods of a fixed short duration at ten times
 * each budget — a webhook's rate, a token's API rate, the login throttle — and a saturating mixed load; then slow and
 * idle clients. Every answer is a status /openapi.json lists for its route (never a 5xx but 503), every 429 and 503
 * carries Retry-After, nothing acknowledged is lost, the server's memory stays under a stated bound and /healthz,
 * asked at a steady rate from another process, answers within 50 ms at the 99th percentile throughout.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { BLOCK_AFTER } from '../src/modules/auth/throttle.ts'
import { MAX_WAITING_PASSWORD_CHECKS, usePasswordHashing } from '../src/modules/users/service.ts'
import { HTTP_IDLE_TIMEOUT_SECONDS } from '../src/cli/serve.ts'
import { systemClock } from '../src/lib/clock.ts'
import { bearer, PRODUCTION_PASSWORD_HASHES, processEnv, queryAll, type ServeProcess, startServe, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, reportHook, tokenFor } from './support/acme.ts'
import {
  type Answer,
  answerProblems,
  flood,
  type OpenApi,
  rawClient,
  type RawClient,
  type Sent,
  statusCounts,
  trickle,
  watchFigures,
  quantile,
  watching,
} from './support/overload.ts'

/** Each flood lasts this long: long enough for hundreds of requests, short enough for CI. */
const FLOOD_MS = 2_500
/** The Budget workflow's webhook rate (per minute): a bucket of 30 that refills one every 2 s. */
const WEBHOOK_RATE = 30
/** TRELLIS_API_RATE_PER_MIN of the server the budget floods run against. */
const API_RATE = 30
/** /healthz's 99th percentile, client-side, asked every 10 ms from another process: its bound, in every flood. */
const HEALTHZ_P99_MS = 50
/**
 * /healthz never waits this long, in any flood. Measured maxima here since the request slices and the commit budget
 * (docs/guarantees.md "Guarantees"): 7–87 ms in the budget floods, 47–172 ms in the mixed load, 76–213 ms beside the slow clients
 * (2-core machine shared with other test runs).
 */
const HEALTHZ_STALL_MS = 2_000
/**
 * The server's resident memory may not pass this at any tick of any flood. Measured peaks on this 2-core machine:
 * 105 MiB in the budget floods, 170 MiB with the login flood's argon2 checks (64 MiB each), 190–216 MiB in the mixed
 * load, 329–412 MiB with three clients not reading a 12.6 MB page (SQLite; PostgreSQL 269–299 MiB). That last peak
 * is the three pages built at once, a moment long (sampled every half second, the anonymous memory is 215–225 MiB
 * through the slow clients' phase but for one 298 MiB sample as the pages are built, and falls back to 166 MiB
 * after): how high it reaches depends on how the three builds overlap. The bound is about 1.5 times the largest, so
 * that a leak or an unbounded queue fails while the allocator's ups and downs do not.
 */
const RSS_BOUND_MIB = 600
/**
 * A connection that sends no complete request head is closed by Bun's HTTP layer after its fixed 10 s
 * (uWebSockets' HTTP_IDLE_TIMEOUT_S, whatever `idleTimeout` says); one that trickles a body, or does not read its
 * answer, after `serve`'s HTTP_IDLE_TIMEOUT_SECONDS. Bun's timers tick every 4 s, so either is cut up to 4 s later:
 * the bound allows that and 2 s more for a loaded machine.
 */
const CUT_WITHIN_MS = Math.max(10, HTTP_IDLE_TIMEOUT_SECONDS) * 1000 + 6_000

const ALICE = { email: 'alice@example.com', password: 'alice-demo-pass-2026' }
const CAROL = { email: 'carol@example.com', password: 'carol-demo-pass-2026' }
const NOTES = '/v1/project/Acme/environment/production/notes'
const RUNS = '/v1/project/Acme/environment/production/workflow-runs'
const STAGING_NOTES = '/v1/project/Acme/environment/staging/notes'
/** Records the mixed load's triggers cycle through: enough for runs to queue, few enough for 409s. */
const LOAD_RECORDS = 40

let env: TestEnv
let hooks: { budget: string; busy: string }
/**
 * The tokens, made before any server runs: written from this process while a `serve` writes too (its start-up
 * recovery and pruning, its checkpoints), a token could meet the server's write lock and be refused database_busy.
 */
let tokens: { bobTrigger: string; aliceBudget: string; aliceAll: string; erp: string }
/** Every flood's figures, printed at the end (docs/guarantees.md "Guarantees" quotes them). */
const figures: Record<string, unknown> = {}

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument({ passwords: true })
  const acme = acmeProject(document)
  acme.workflows!.push(
    ordersWorkflow('Budget', [{ type: 'update', name: 'mark', set: { budget: 'seen' } }], { webhook: { enabled: true, ratePerMinute: WEBHOOK_RATE } }),
    ordersWorkflow('Busy', [{ type: 'load' }, { type: 'update', name: 'mark', set: { busy: '{{run.id}}' } }], { webhook: { enabled: true, ratePerMinute: 100_000 } }),
  )
  for (let i = 0; i < LOAD_RECORDS; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `load_${i}`, data: { busy: '' } })
  // At the production cost: the login flood measures the queue of argon2 checks a real hash makes.
  usePasswordHashing('production')
  const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document).finally(() => usePasswordHashing('weak-for-tests'))
  hooks = { budget: reportHook(report, 'Budget'), busy: reportHook(report, 'Busy') }
  const made = async (user: string, scopes: Parameters<typeof tokenFor>[3]) => (await tokenFor(env.store, systemClock, user, scopes)).value
  tokens = {
    bobTrigger: await made('bob', ['workflows:trigger']),
    aliceBudget: await made('alice', ['all']),
    aliceAll: await made('alice', ['all']),
    erp: await made('bob', ['workflows:trigger']),
  }
}, 60_000)

afterAll(() => {
  console.log(`overload figures (${env.store.kind}): ${JSON.stringify(figures)}`)
  env?.cleanup()
})

/** A `serve` on the test env's store; TRELLIS_TRUST_PROXY=127.0.0.1 lets the login floods name their client address. */
async function serve(vars: Record<string, string>): Promise<ServeProcess> {
  return startServe({
    dataDir: env.dataDir,
    cwd: env.dataDir,
    env: { ...processEnv(env), ...PRODUCTION_PASSWORD_HASHES, TRELLIS_SECRET: env.secret.toString('utf8'), TRELLIS_TRUST_PROXY: '127.0.0.1', TRELLIS_LOG_LEVEL: 'info', ...vars },
    timeoutMs: 30_000,
  })
}

let openapi: OpenApi

function post(server: ServeProcess, path: string, headers: Record<string, string>, json: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(json) })
}

const trigger = (server: ServeProcess, hook: string, token: string, recordId: string): Sent => ({
  route: 'POST /v1/hooks/{token}',
  response: post(server, hook, bearer(token), { record_id: recordId }),
})

const login = (server: ServeProcess, who: { email: string; password: string }, address: string): Sent => ({
  route: 'POST /auth/login',
  response: post(server, '/auth/login', { 'x-forwarded-for': address }, who),
})

/**
 * Runs `work` under the watcher and records its figures as `name`: /healthz must answer every ask, within
 * HEALTHZ_P99_MS at the 99th percentile and never after HEALTHZ_STALL_MS, and memory stay under its bound.
 */
async function measured<T>(server: ServeProcess, name: string, work: () => Promise<T>): Promise<T> {
  const { result, watch } = await watching(server, work)
  figures[name] = { ...(figures[name] as object), ...watchFigures(watch) }
  const seen = watchFigures(watch)
  expect(watch.healthzFailures).toEqual([])
  expect(seen.healthzAsks).toBeGreaterThan(50)
  expect(seen.healthzP99).toBeLessThan(HEALTHZ_P99_MS)
  expect(seen.healthzMax).toBeLessThan(HEALTHZ_STALL_MS)
  expect(seen.rssPeakMiB).toBeLessThan(RSS_BOUND_MIB)
  return result
}

function expectDocumented(answers: Answer[]): void {
  expect(answerProblems(answers, openapi)).toEqual([])
}

describe('floods at ten times each budget', () => {
  let server: ServeProcess

  beforeAll(async () => {
    server = await serve({ TRELLIS_API_RATE_PER_MIN: String(API_RATE) })
    openapi = (await (await fetch(`${server.url}/openapi.json`)).json()) as OpenApi
  }, 60_000)
  afterAll(async () => {
    expect(await server?.stop()).toBe(0)
  })

  test('a webhook at 10× its rate: 202 within the bucket, 429 with Retry-After beyond it, every accepted run stored', async () => {
    const token = tokens.bobTrigger
    // The bucket holds WEBHOOK_RATE and refills WEBHOOK_RATE a minute: over the flood, that is its whole budget.
    const budget = WEBHOOK_RATE + (WEBHOOK_RATE * FLOOD_MS) / 60_000
    const total = Math.ceil(10 * budget)
    const { answers, elapsedMs } = await measured(server, 'webhook', () =>
      flood({ durationMs: FLOOD_MS, total, concurrency: 32 }, (i) => trigger(server, hooks.budget, token, `budget_${i}`)),
    )
    figures.webhook = { ...(figures.webhook as object), requests: total, statuses: statusCounts(answers) }
    expectDocumented(answers)
    const accepted = answers.filter((a) => a.status === 202)
    expect(accepted.length).toBeGreaterThanOrEqual(WEBHOOK_RATE)
    expect(accepted.length).toBeLessThanOrEqual(WEBHOOK_RATE + Math.ceil((WEBHOOK_RATE * elapsedMs) / 60_000))
    expect(answers.filter((a) => a.status === 429)).toHaveLength(total - accepted.length)
    expectRunsStored(accepted)
  }, 30_000)

  test('a token at 10× its API rate: its budget answered 200, the rest 429 with Retry-After', async () => {
    const token = tokens.aliceBudget
    const total = 10 * API_RATE
    const { answers } = await measured(server, 'api', () =>
      flood({ durationMs: FLOOD_MS, total, concurrency: 32 }, () => ({
        route: 'GET /v1/project/{projectName}/environment/{environmentName}/notes',
        response: fetch(`${server.url}${NOTES}?limit=5`, { headers: bearer(token) }),
      })),
    )
    figures.api = { ...(figures.api as object), requests: total, statuses: statusCounts(answers) }
    expectDocumented(answers)
    // The minute's window opened at the flood's first request and outlasts it: exactly its budget passed.
    expect(answers.filter((a) => a.status === 200)).toHaveLength(API_RATE)
    expect(answers.filter((a) => a.status === 429)).toHaveLength(total - API_RATE)
  }, 30_000)

  test('logins at 10× the throttle: 401 up to it, then 429 with Retry-After; the owner elsewhere still signs in', async () => {
    const total = 10 * BLOCK_AFTER
    const { answers } = await measured(server, 'login', () =>
      flood({ durationMs: FLOOD_MS, total, concurrency: 32 }, (i) =>
        // One attacker's address and one account, as the throttle counts them; every 20th is carol herself, elsewhere.
        i % 20 === 19 ? login(server, CAROL, `198.51.100.${i}`) : login(server, { email: CAROL.email, password: `wrong-${i}` }, '203.0.113.7'),
      ),
    )
    figures.login = { ...(figures.login as object), requests: total, statuses: statusCounts(answers) }
    expectDocumented(answers)
    const owner = answers.filter((a) => a.i % 20 === 19)
    expect(owner.map((a) => a.status)).toEqual(Array(total / 20).fill(200))
    expect(answers.filter((a) => a.status === 401)).toHaveLength(BLOCK_AFTER)
    expect(answers.filter((a) => a.status === 429)).toHaveLength(total - total / 20 - BLOCK_AFTER)
  }, 30_000)

  test('logins from many addresses at once: past the password checks that may wait, 503 server_busy at once', async () => {
    // Every attempt from its own address: the throttle lets each through to the password check.
    const total = MAX_WAITING_PASSWORD_CHECKS + 16
    const { answers } = await measured(server, 'loginQueue', () =>
      flood({ durationMs: 0, total, concurrency: total }, (i) => login(server, { email: CAROL.email, password: `wrong-${i}` }, `192.0.2.${i}`)),
    )
    figures.loginQueue = { ...(figures.loginQueue as object), requests: total, statuses: statusCounts(answers), latencyMs: latencies(answers) }
    expectDocumented(answers)
    const busy = answers.filter((a) => a.status === 503)
    expect(busy.length).toBeGreaterThan(0)
    for (const a of busy) expect(JSON.parse(a.body)).toMatchObject({ code: 'server_busy', retry_after: 1 })
    expect(answers.filter((a) => a.status !== 503).every((a) => a.status === 401)).toBe(true)
    // Refused at once, not after waiting for the checks ahead of them.
    expect(Math.max(...busy.map((a) => a.ms))).toBeLessThan(2_000)
  }, 30_000)
})

describe('a saturating mixed load, then slow and idle clients', () => {
  let server: ServeProcess
  let admin: string
  let erp: string

  beforeAll(async () => {
    server = await serve({ TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' })
    openapi ??= (await (await fetch(`${server.url}/openapi.json`)).json()) as OpenApi
    admin = tokens.aliceAll
    erp = tokens.erp
  }, 60_000)
  afterAll(async () => {
    expect(await server?.stop()).toBe(0)
  })

  test('triggers, note writes, lists and logins at once, 96 at a time: documented answers only, nothing acknowledged lost', async () => {
    const mixed = (i: number): Sent => {
      const kind = i % 20
      if (kind < 6) return trigger(server, hooks.busy, erp, `load_${i % LOAD_RECORDS}`)
      if (kind < 11) {
        return {
          route: 'POST /v1/project/{projectName}/environment/{environmentName}/notes',
          response: post(server, NOTES, bearer(admin), { recordId: `load_${i % LOAD_RECORDS}`, collectionName: 'orders', teamName: 'Support', title: `load ${i}`, content: `<p>note ${i}</p>` }),
        }
      }
      if (kind < 15) return { route: 'GET /v1/project/{projectName}/environment/{environmentName}/notes', response: fetch(`${server.url}${NOTES}?limit=20`, { headers: bearer(admin) }) }
      if (kind < 18) return { route: 'GET /v1/project/{projectName}/environment/{environmentName}/workflow-runs', response: fetch(`${server.url}${RUNS}?limit=20`, { headers: bearer(admin) }) }
      // Logins from many addresses, most right: each is an argon2 check.
      return login(server, kind === 18 ? ALICE : { email: ALICE.email, password: `wrong-${i}` }, `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
    }
    const { answers, elapsedMs } = await measured(server, 'mixed', () => flood({ durationMs: FLOOD_MS, concurrency: 96 }, mixed))
    figures.mixed = { ...(figures.mixed as object), elapsedMs: Math.round(elapsedMs), requests: answers.length, statuses: statusCounts(answers), latencyMs: latencies(answers) }
    expectDocumented(answers)
    // PostgreSQL on a loaded 2-core machine answered about 200 in the 2.5 s (SQLite about 3,000).
    expect(answers.length).toBeGreaterThan(100)
    expectRunsStored(answers.filter((a) => a.status === 202))
    const notes = answers.filter((a) => a.status === 201).map((a) => JSON.parse(a.body) as { id: number; title: string })
    expect(notes.length).toBeGreaterThan(20)
    const stored = new Map(queryAll<{ id: number; title: string }>(env.store, 'SELECT id, title FROM notes').map((n) => [n.id, n.title]))
    expect(notes.filter((n) => stored.get(n.id) !== n.title)).toEqual([])
  }, 60_000)

  test('idle, slow and non-reading clients are cut within the stated timeouts while others keep being served', async () => {
    // The large answer a client will not read: a staging notes page of 64 notes of 65,536 three-byte characters.
    for (let i = 0; i < 64; i++) {
      const created = await post(server, STAGING_NOTES, bearer(admin), { recordId: 'big', collectionName: 'orders', teamName: 'Support', title: `big ${i}`, content: '€'.repeat(65_536) })
      expect(created.status).toBe(201)
    }
    const bigPage = `GET ${STAGING_NOTES}?limit=64 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${admin}\r\n\r\n`
    const pageBytes = (await (await fetch(`${server.url}${STAGING_NOTES}?limit=64`, { headers: bearer(admin) })).arrayBuffer()).byteLength
    expect(pageBytes).toBeGreaterThan(12_000_000)

    const started = performance.now()
    const idle = Array.from({ length: 10 }, () => rawClient(server, () => {}))
    const slowHead = Array.from({ length: 5 }, () => rawClient(server, (socket) => trickle(socket, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${'s'.repeat(200)}\r\n\r\n`, 200)))
    const slowBody = Array.from({ length: 5 }, () =>
      rawClient(server, (socket) => {
        socket.write(`POST ${NOTES} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`)
        trickle(socket, `{"title":"${'t'.repeat(99_980)}"}`, 200)
      }),
    )
    const nonReaders = Array.from({ length: 3 }, () =>
      rawClient(server, (socket) => {
        socket.write(bigPage)
        socket.pause() // reads nothing: the answer stays with the kernel and the server
      }),
    )
    // Meanwhile other clients are served as usual.
    const served = await measured(server, 'slowClients', async () => {
      const answers: Answer[] = []
      let cutting = true
      const cuts = Promise.all([...idle, ...slowHead, ...slowBody].map((c) => c.closed)).then((ms) => {
        cutting = false
        return ms
      })
      while (cutting && performance.now() - started < CUT_WITHIN_MS) {
        answers.push(...(await flood({ durationMs: 500, concurrency: 4 }, () => ({ route: 'GET /v1/project/{projectName}/environment/{environmentName}/notes', response: fetch(`${server.url}${NOTES}?limit=5`, { headers: bearer(admin) }) }))).answers)
      }
      return { answers, cuts: await Promise.race([cuts, Bun.sleep(1).then(() => null)]) }
    })
    expect(served.cuts).not.toBeNull()
    expectDocumented(served.answers)
    expect(served.answers.every((a) => a.status === 200)).toBe(true)
    expect(served.answers.length).toBeGreaterThan(100)
    const cutAfter = async (clients: RawClient[]) => Promise.all(clients.map((c) => c.closed))
    const [idleMs, headMs, bodyMs] = [await cutAfter(idle), await cutAfter(slowHead), await cutAfter(slowBody)]
    figures.slowClients = { ...(figures.slowClients as object), idleCutMs: idleMs.map(Math.round), slowHeadCutMs: headMs.map(Math.round), slowBodyCutMs: bodyMs.map(Math.round) }
    for (const ms of [...idleMs, ...headMs, ...bodyMs]) expect(ms).toBeLessThan(CUT_WITHIN_MS)
    // None of them got an answer: a head that never ends is not a request; the trickled body's is not read to its end.
    expect([...idle, ...slowHead].map((c) => c.received())).toEqual(Array(15).fill(0))
    // The non-readers: by now their connections are closed by the server (they would otherwise still hold most of
    // the page). Reading now, each gets what the kernel held, then the end, far short of the page.
    await Bun.sleep(Math.max(0, started + Math.max(...bodyMs) + 4_000 - performance.now()))
    for (const c of nonReaders) c.socket.resume()
    const readerMs = await Promise.race([cutAfter(nonReaders), Bun.sleep(5_000).then(() => null)])
    expect(readerMs).not.toBeNull()
    figures.slowClients = { ...(figures.slowClients as object), nonReaderBytes: nonReaders.map((c) => c.received()), pageBytes }
    for (const c of nonReaders) expect(c.received()).toBeLessThan(pageBytes / 2)
  }, 60_000)
})

/** Each route's client-side wait, p50, p99 and max in ms (for the figures). */
function latencies(answers: Answer[]) {
  const routes = [...new Set(answers.map((a) => a.route))]
  return Object.fromEntries(
    routes.map((route) => {
      const ms = answers.filter((a) => a.route === route).map((a) => a.ms)
      return [route, { p50: Math.round(quantile(ms, 0.5)), p99: Math.round(quantile(ms, 0.99)), max: Math.round(Math.max(...ms)) }]
    }),
  )
}

/** Every accepted run (its 202 body's runId) is a row of `runs`, each once. */
function expectRunsStored(accepted: Answer[]): void {
  const runIds = accepted.map((a) => (JSON.parse(a.body) as { runId: string }).runId)
  expect(new Set(runIds).size).toBe(runIds.length)
  const stored = new Set(queryAll<{ id: string }>(env.store, 'SELECT id FROM runs').map((r) => r.id))
  expect(runIds.filter((id) => !stored.has(id))).toEqual([])
}

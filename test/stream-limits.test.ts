/**
 * What one person may hold, and for how long (docs/security.md; docs/workflows.md "Run events (SSE)"; docs/api.md
 * "Application tokens"), through real `trellis serve` processes and the real CLI, on the test store (SQLite, or
 * PostgreSQL with TRELLIS_TEST_STORE=postgres) and on two PostgreSQL instances sharing one database:
 * - event streams are counted per user — every token and console session of the user together — and per project (at
 *   most half the instance's bound), so a plain member with many tokens cannot take another project's streams;
 * - a user holds at most TRELLIS_LIVE_TOKENS_PER_USER live tokens, whichever route makes them and however many
 *   creations race, on one instance or two;
 * - a stream ends within its re-check interval once its caller may no longer read — token revoked, user deactivated,
 *   member removed from the project, the project turned to SSO — on an instance that serves no other request.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { systemClock } from '../src/lib/clock.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { RECHECK_HEARTBEATS } from '../src/modules/run-events/hub.ts'
import { revokeToken, type TokenRow } from '../src/modules/tokens/service.ts'
import { bearer, POSTGRES_ONLY, postgresOnlyTest, processEnv, runCli, runNow, type ServeProcess, startServe, type TestEnv, testEnv, type TestStore, until } from './helpers.ts'
import { type AcmeDocument, acmeProject, acmeWithGlobex, applyAcme, tokenFor, userId } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'
import { type Instances, startInstances } from './support/instances.ts'
import { directUrlOf, freshDatabase, openProductPostgres } from './support/postgres-cluster.ts'
import { SseReader } from './support/sse.ts'

const ACME_EVENTS = '/v1/project/Acme/environment/production/workflow-runs/events'
const GLOBEX_EVENTS = '/v1/project/Globex/environment/production/workflow-runs/events'
const HEARTBEAT_MS = 1_000
/** The documented bound on how long a stream outlives its caller's right (RECHECK_HEARTBEATS × heartbeat), plus a tick of the hub and a second of slack. */
const RECHECK_DEADLINE_MS = RECHECK_HEARTBEATS * HEARTBEAT_MS + 2_000

/** Acme and Globex (alice and bob its admins), and erin, a plain member of Acme who makes tokens. */
function document(): AcmeDocument {
  const doc = acmeWithGlobex()
  doc.users.push({ email: 'erin@example.com', username: 'erin' })
  acmeProject(doc).members!.push({ user: 'erin@example.com', role: 'user' })
  doc.projects.find((p) => p.name === 'Globex')!.members!.push({ user: 'erin@example.com', role: 'admin' })
  return doc
}

/** An event stream asked for with these headers: its answer, read as a stream when it is one. */
async function openStream(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; reader: SseReader | null; body: Record<string, unknown> | null; retryAfter: string | null }> {
  const response = await fetch(`${base}${path}`, { headers })
  if (response.status !== 200) return { status: response.status, reader: null, body: (await response.json()) as Record<string, unknown>, retryAfter: response.headers.get('retry-after') }
  const reader = new SseReader(response)
  expect(await reader.next()).toEqual({ retry: 2000 })
  return { status: 200, reader, body: null, retryAfter: null }
}

/** Reads the stream until it ends (only heartbeats expected meanwhile); when it ended (ms), or a failure after `timeoutMs`. */
async function endOf(reader: SseReader, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const item = await reader.next(Math.max(1, deadline - Date.now()))
    if (item === null) return Date.now()
    expect('comment' in item).toBe(true)
  }
}

const WATCHERS = ['alice', 'bob', 'carol', 'dave'] as const
type WatchTokens = Record<(typeof WATCHERS)[number], { value: string; token: TokenRow }>

/** An `all` token of each watcher, made on `store` (before a server runs on a SQLite file: it would hold the write lock). */
async function watchTokens(store: TestStore): Promise<WatchTokens> {
  const tokens = {} as WatchTokens
  for (const user of WATCHERS) tokens[user] = await tokenFor(store, systemClock, user, ['all'])
  return tokens
}

/**
 * Four streams of Acme's production on `streamOn`; then, from elsewhere (the CLI on `store`'s database, or `actOn`'s
 * API), bob's token is revoked, dave deactivated, carol removed from Acme: each of their streams ends within the
 * re-check interval of the change, while alice's goes on; then Acme turns SSO on, and alice's (a token not made in an
 * SSO session) ends too. Nothing is asked of `streamOn` meanwhile.
 */
async function streamsEndWhenRightsGo(streamOn: string, actOn: string, tokens: WatchTokens, cli: (args: string[]) => Promise<string>): Promise<void> {
  const streams: Record<string, SseReader> = {}
  for (const user of WATCHERS) {
    const opened = await openStream(streamOn, ACME_EVENTS, bearer(tokens[user].value))
    expect(opened.status, JSON.stringify(opened.body)).toBe(200)
    streams[user] = opened.reader!
  }
  const changes = {
    bob: () => cli(['token', 'revoke', String(tokens.bob.token.id)]),
    dave: () => cli(['user', 'disable', '--email', 'dave@example.com']),
    carol: () => cli(['member', 'remove', '--project', 'Acme', '--user', 'carol@example.com']),
  }
  // alice's goes on, beating, until theirs have ended.
  let othersEnded = false
  const aliceMeanwhile = (async () => {
    while (!othersEnded) expect(await streams.alice!.next(3 * HEARTBEAT_MS)).toEqual({ comment: 'heartbeat' })
  })()
  const lasted = await Promise.all(
    Object.entries(changes).map(async ([user, change]) => {
      await change()
      const changedAt = Date.now()
      return [user, (await endOf(streams[user]!, RECHECK_DEADLINE_MS + 4_000)) - changedAt] as const
    }),
  )
  othersEnded = true
  await aliceMeanwhile
  for (const [user, ms] of lasted) expect(ms, `${user}'s stream lasted ${ms} ms after the change`).toBeLessThan(RECHECK_DEADLINE_MS)

  const sso = await fetch(`${actOn}/v1/project/Acme/settings`, {
    method: 'PUT',
    headers: { ...bearer(tokens.alice.value), 'content-type': 'application/json' },
    body: JSON.stringify({ projectName: 'Acme', sso: true }),
  })
  expect(sso.status, await sso.clone().text()).toBe(200)
  const changedAt = Date.now()
  expect((await endOf(streams.alice!, RECHECK_DEADLINE_MS + 4_000)) - changedAt).toBeLessThan(RECHECK_DEADLINE_MS)
}

describe('through one server on the test store', () => {
  let env: TestEnv
  let server: ServeProcess
  const settings = { TRELLIS_EVENT_STREAMS_MAX: '8', TRELLIS_EVENT_STREAMS_PER_USER: '3', TRELLIS_LIVE_TOKENS_PER_USER: '4', TRELLIS_EVENT_HEARTBEAT_SECONDS: String(HEARTBEAT_MS / 1000) }
  const cli = async (args: string[], extra: Record<string, string> = {}) => {
    const result = await runCli([...args, '--data', env.dataDir], { env: { ...processEnv(env), ...extra } })
    if (result.code !== 0) throw new Error(`trellis ${args.join(' ')} (exit ${result.code}): ${result.stderr}`)
    return result.stdout
  }
  // What the tests use, made before the server starts (on SQLite it would hold the write lock the test's writes need).
  const made = {} as {
    daves: Record<string, string>[]
    carol: Record<string, string>
    bob: Record<string, string>
    alice: Record<string, string>
    erin: Record<string, string>
    watchers: WatchTokens
  }

  beforeAll(async () => {
    env = testEnv()
    await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document())
    const value = async (username: string, project = 'Acme') => bearer((await tokenFor(env.store, systemClock, username, ['notes:read'], { project })).value)
    const sessionOf = async (username: string) => ({ cookie: `trellis_session=${(await runNow(env.store, createSession(systemClock, userId(env.store, username), false))).id}` })
    made.daves = [await value('dave'), await value('dave'), await value('dave'), await sessionOf('dave')]
    made.carol = await value('carol')
    made.bob = await value('bob', 'Globex')
    made.alice = await value('alice', 'Globex')
    made.erin = await sessionOf('erin')
    // erin's tokens that the bound does not count: one revoked, one expired.
    await runNow(env.store, revokeToken(systemClock, (await tokenFor(env.store, systemClock, 'erin', ['notes:read'])).token, null))
    await tokenFor(env.store, systemClock, 'erin', ['notes:read'], { expiresAt: Date.now() - 1_000 })
    made.watchers = await watchTokens(env.store)
    server = await startServe({ dataDir: env.dataDir, cwd: env.dataDir, env: { ...processEnv(env), ...HIGH_API_BUDGETS, TRELLIS_LOG_LEVEL: 'warn', ...settings }, timeoutMs: 20_000 })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    env?.cleanup()
  })

  test('event streams: per user over all their tokens and sessions (429), per project at most half the instance (503), the instance in all (503)', async () => {
    const { daves, carol, bob, alice } = made
    const open: SseReader[] = []
    const tryOpen = async (path: string, headers: Record<string, string>) => {
      const answer = await openStream(server.url, path, headers)
      if (answer.reader) open.push(answer.reader)
      return answer
    }
    try {
      // dave, a plain member, holds 3 streams however many tokens and sessions he brings.
      const byDave = []
      for (const headers of [...daves, daves[0]!]) byDave.push(await tryOpen(ACME_EVENTS, headers))
      expect(byDave.map((a) => a.status)).toEqual([200, 200, 200, 429, 429])
      expect(byDave[3]!.retryAfter).toBe('5')
      expect(byDave[3]!.body).toMatchObject({ code: 'rate_limited', retry_after: 5, message: expect.stringContaining('per user') })
      // Acme holds half the instance's 8 once carol opens one: her next is refused though the instance has room.
      expect((await tryOpen(ACME_EVENTS, carol)).status).toBe(200)
      const acmeFull = await tryOpen(ACME_EVENTS, carol)
      expect([acmeFull.status, acmeFull.retryAfter]).toEqual([503, '5'])
      expect(acmeFull.body).toMatchObject({ code: 'too_many_streams', message: expect.stringContaining('4 event streams at most per project') })
      // Globex's admins still open theirs: the other half.
      for (const headers of [bob, bob, bob, alice]) expect((await tryOpen(GLOBEX_EVENTS, headers)).status).toBe(200)
      const metrics = await (await fetch(`${server.url}/metrics`)).text()
      expect(metrics).toContain('\ntrellis_event_streams 8\n')
      const instanceFull = await tryOpen(GLOBEX_EVENTS, alice)
      expect([instanceFull.status, instanceFull.retryAfter]).toEqual([503, '5'])
      expect(instanceFull.body).toMatchObject({ code: 'too_many_streams', message: expect.stringContaining('8 event streams at most') })
      // A stream that ends frees its place in every bound: dave's session opens one again.
      await open.shift()!.close()
      expect((await until('dave’s session to open a stream again', async () => (await tryOpen(ACME_EVENTS, daves[3]!)).status === 200 || null, 3_000, 20))).toBe(true)
    } finally {
      await Promise.all(open.map((reader) => reader.close()))
    }
  }, 30_000)

  test('live tokens: at most TRELLIS_LIVE_TOKENS_PER_USER (revoked and expired ones not counted) by the API and the CLI alike, 409 too_many_tokens beyond, under concurrent creation', async () => {
    // erin holds a revoked and an expired token: neither counts.
    const { erin } = made
    const create = (name: string, projectName = 'Acme') =>
      fetch(`${server.url}/v1/account/tokens`, {
        method: 'POST',
        headers: { ...erin, origin: server.url, 'content-type': 'application/json' },
        body: JSON.stringify({ name, projectName }),
      })
    const created: number[] = []
    for (let i = 0; i < 3; i++) {
      const response = await create(`t${i}`)
      expect(response.status).toBe(201)
      created.push(((await response.json()) as { id: number }).id)
    }
    // The bound is over every project of the user.
    expect((await create('globex', 'Globex')).status).toBe(201)
    const refused = await create('one-more')
    expect(refused.status).toBe(409)
    expect(await refused.json()).toMatchObject({ error: 'Conflict', code: 'too_many_tokens', message: expect.stringContaining('TRELLIS_LIVE_TOKENS_PER_USER') })
    // The CLI is held to the same rule (its own setting: the same variable).
    const bound = { TRELLIS_LIVE_TOKENS_PER_USER: '4' }
    await expect(cli(['token', 'create', '--user', 'erin@example.com', '--project', 'Acme', '--name', 'cli'], bound)).rejects.toThrow(/4 live tokens already.*TRELLIS_LIVE_TOKENS_PER_USER/)
    // Another user is not affected.
    expect((await cli(['token', 'create', '--user', 'carol@example.com', '--project', 'Acme', '--name', 'cli'], bound)).trim()).toStartWith('trl_')

    // Two revoked: two places; twelve creations at once take exactly those.
    for (const id of created.slice(0, 2)) {
      expect((await fetch(`${server.url}/v1/account/tokens/${id}`, { method: 'DELETE', headers: { ...erin, origin: server.url } })).status).toBe(204)
    }
    const statuses = (await Promise.all(Array.from({ length: 12 }, (_, i) => create(`race-${i}`)))).map((r) => r.status)
    expect(statuses.filter((s) => s === 201)).toHaveLength(2)
    expect(statuses.filter((s) => s === 409)).toHaveLength(10)
    const live = (JSON.parse(await cli(['token', 'list', '--user', 'erin@example.com', '--json'])) as { revokedAt: string | null; expiresAt: string | null }[]).filter(
      (t) => t.revokedAt === null && (t.expiresAt === null || Date.parse(t.expiresAt) > Date.now()),
    )
    expect(live).toHaveLength(4)
  }, 30_000)

  test('a stream ends within its re-check interval once its token is revoked, its user deactivated, removed from the project, or the project turns to SSO', async () => {
    await streamsEndWhenRightsGo(server.url, server.url, made.watchers, (args) => cli(args))
  }, 60_000)
})

describe('two PostgreSQL instances on one database', () => {
  let set: Instances | undefined
  afterAll(async () => {
    await set?.close()
  })
  const instances = async () =>
    (set ??= await startInstances({
      url: await freshDatabase(),
      document: document(),
      count: 2,
      env: { TRELLIS_LIVE_TOKENS_PER_USER: '10', TRELLIS_EVENT_HEARTBEAT_SECONDS: String(HEARTBEAT_MS / 1000) },
    }))

  postgresOnlyTest(
    POSTGRES_ONLY.severalInstances,
    'twenty token creations at once, half through each instance, around the bound of 10: exactly 10 live tokens, the rest 409 too_many_tokens',
    async () => {
      const { instances: [a, b], cli } = await instances()
      const erin = (await cli(['token', 'create', '--user', 'erin@example.com', '--project', 'Globex', '--name', 'maker', '--scopes', 'all'])).trim()
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          fetch(`${(i % 2 === 0 ? a : b)!.url}/v1/account/tokens`, {
            method: 'POST',
            headers: { ...bearer(erin), 'content-type': 'application/json' },
            body: JSON.stringify({ name: `race-${i}`, projectName: 'Globex' }),
          }),
        ),
      )
      const statuses = answers.map((r) => r.status)
      expect(statuses.filter((s) => s === 201)).toHaveLength(9)
      expect(statuses.filter((s) => s === 409)).toHaveLength(11)
      const listed = JSON.parse(await cli(['token', 'list', '--user', 'erin@example.com', '--json'])) as { revokedAt: string | null }[]
      expect(listed.filter((t) => t.revokedAt === null)).toHaveLength(10)
    },
    90_000,
  )

  postgresOnlyTest(
    POSTGRES_ONLY.severalInstances,
    'a stream on an instance asked nothing else ends within its re-check interval after a revocation, a deactivation, a removal (the CLI) or SSO turned on (the other instance)',
    async () => {
      const { instances: [a, b], cli, env } = await instances()
      const store = openProductPostgres(directUrlOf(env.TRELLIS_DATABASE_URL!), { max: 2 })
      try {
        await streamsEndWhenRightsGo(b!.url, a!.url, await watchTokens(store), cli)
      } finally {
        await store.close()
      }
    },
    90_000,
  )
})

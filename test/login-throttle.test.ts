/**
 * Login throttling that cannot be turned against users: the client address comes from the
 * connection (X-Forwarded-For only through the proxies TRELLIS_TRUST_PROXY names), failures count per (email,
 * client address) and per client address, never per email alone, and the password check does not stall the
 * event loop. Real `serve` processes, with attacker and victim addresses simulated through a trusted proxy header.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { ConfigError, loadConfig } from '../src/config.ts'
import { clientAddressOf } from '../src/http/client-address.ts'
import { acceptRequest } from '../src/http/server-request.ts'
import { BLOCK_AFTER } from '../src/modules/auth/throttle.ts'
import { MAX_WAITING_PASSWORD_CHECKS } from '../src/modules/users/service.ts'
import { PRODUCTION_PASSWORD_HASHES, processEnv, repoRoot, runCli, type ServeProcess, startServe, testEnv, type TestEnv } from './helpers.ts'

const CAROL = { email: 'carol@example.com', password: 'carol-demo-pass-2026' }
const DAVE = { email: 'dave@example.com', password: 'dave-demo-pass-2026' }
const ATTACKER = '203.0.113.7'
const VICTIM = '198.51.100.9'

/** The test env the processes share: its data dir, and on PostgreSQL its database. */
let shared: TestEnv
let dataDir: string

beforeAll(async () => {
  shared = testEnv()
  dataDir = shared.dataDir
  // At the production cost: this file measures what argon2 checks of real hashes do to the server.
  const applied = await runCli(['apply', '-f', join(repoRoot, 'examples/acme.yaml'), '--data', dataDir], { env: { ...processEnv(shared), ...PRODUCTION_PASSWORD_HASHES } })
  expect(applied.code).toBe(0)
}, 60_000)

afterAll(() => shared.cleanup())

/** A `serve` on the shared data dir (each start has fresh, in-memory throttle counters). */
async function serve(env: Record<string, string>): Promise<ServeProcess> {
  return startServe({ dataDir, cwd: dataDir, env: { TRELLIS_EXECUTOR_CONCURRENCY: '0', TRELLIS_LOG_LEVEL: 'warn', ...processEnv(shared), ...PRODUCTION_PASSWORD_HASHES, ...env } })
}

function login(server: ServeProcess, who: { email: string; password: string }, forwardedFor?: string): Promise<Response> {
  return fetch(`${server.url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }) },
    body: JSON.stringify(who),
  })
}

const wrong = (who: { email: string }, n = 0) => ({ email: who.email, password: `not-the-password-${n}` })

async function statuses(responses: Promise<Response>[]): Promise<number[]> {
  return Promise.all(responses.map(async (r) => (await r).status))
}

describe('a real serve behind a trusted proxy (TRELLIS_TRUST_PROXY=127.0.0.1)', () => {
  let server: ServeProcess
  beforeAll(async () => {
    server = await serve({ TRELLIS_TRUST_PROXY: '127.0.0.1' })
  }, 30_000)
  afterAll(async () => {
    await server?.stop()
  })

  test(
    "an attacker's failures block the attacker's address, never the account's owner at another address, never other users",
    async () => {
      const attempts = Array.from({ length: BLOCK_AFTER }, (_, i) => login(server, wrong(CAROL, i), `6.6.6.6, ${ATTACKER}`))
      expect(await statuses(attempts)).toEqual(Array(BLOCK_AFTER).fill(401))
      // The attacker is now refused, even with the right password…
      const blocked = await login(server, CAROL, ATTACKER)
      expect(blocked.status).toBe(429)
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(blocked.headers.get('set-cookie')).toBeNull()
      // …while carol, at her own address, is not even slowed down, and signs in.
      expect((await login(server, wrong(CAROL), VICTIM)).status).toBe(401)
      const victim = await login(server, CAROL, VICTIM)
      expect(victim.status).toBe(200)
      expect(victim.headers.get('set-cookie')).toStartWith('trellis_session=')
      // Nor is anyone else, anywhere.
      expect((await login(server, DAVE, '192.0.2.33')).status).toBe(200)
    },
    30_000,
  )

  test(
    'the password check runs off the event loop: /healthz keeps answering during a flood of failing logins',
    async () => {
      const FLOOD = 40
      // As many as may wait for a check at once (past that, 503 server_busy: test/overload.test.ts).
      const CONCURRENCY = MAX_WAITING_PASSWORD_CHECKS
      let next = 0
      const answered: number[] = []
      const flood = async () => {
        while (next < FLOOD) {
          const n = next++
          // Each from its own address (and its own email), so the throttle lets every one reach the password check.
          const response = await login(server, { email: `flood-${n}@example.com`, password: 'not-the-password' }, `10.77.0.${n}`)
          answered.push(response.status)
        }
      }
      const healthz: number[] = []
      let flooding = true
      const probe = async () => {
        while (flooding) {
          const started = performance.now()
          const response = await fetch(`${server.url}/healthz`)
          await response.arrayBuffer()
          expect(response.status).toBe(200)
          healthz.push(performance.now() - started)
          await Bun.sleep(5)
        }
      }
      const probing = probe()
      await Promise.all(Array.from({ length: CONCURRENCY }, flood))
      flooding = false
      await probing
      expect(answered).toEqual(Array(FLOOD).fill(401))
      expect(healthz.length).toBeGreaterThan(5)
      // Generous, for a shared 2-core machine (the p99 figure is in docs/performance.md): a synchronous argon2 check
      // (≈ 100 ms each, 20 queued) held /healthz for 2.4 s here.
      expect(Math.max(...healthz)).toBeLessThan(1_000)
    },
    60_000,
  )
})

describe('a real serve with no trusted proxy', () => {
  test(
    'X-Forwarded-For is ignored: rotating it does not escape the throttle',
    async () => {
      const server = await serve({ TRELLIS_TRUST_PROXY: '10.9.9.9' }) // a proxy, but not the one these requests come from
      try {
        const attempts = Array.from({ length: BLOCK_AFTER }, (_, i) => login(server, wrong(CAROL, i), `203.0.113.${i + 1}`))
        expect(await statuses(attempts)).toEqual(Array(BLOCK_AFTER).fill(401))
        expect((await login(server, CAROL, '203.0.113.200')).status).toBe(429)
      } finally {
        await server.stop()
      }
    },
    30_000,
  )
})

describe('client address', () => {
  const peer = (address: string, forwardedFor?: string) =>
    acceptRequest(new Request('http://localhost/auth/login', { headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } }), address)

  test('the peer address, unless a trusted proxy sent the request: then X-Forwarded-For, walked from the right', () => {
    const none = clientAddressOf([])
    expect(none(peer('192.0.2.1', '6.6.6.6'))).toBe('192.0.2.1')
    const trusting = clientAddressOf(['127.0.0.1', '10.0.0.0/8'])
    expect(trusting(peer('192.0.2.1', '6.6.6.6'))).toBe('192.0.2.1') // not a trusted peer: the header is the client's word
    expect(trusting(peer('127.0.0.1'))).toBe('127.0.0.1')
    expect(trusting(peer('127.0.0.1', '6.6.6.6, 203.0.113.7, 10.1.2.3'))).toBe('203.0.113.7') // skips the trusted hops only
    expect(trusting(peer('127.0.0.1', '10.1.2.3, 10.4.5.6'))).toBe('10.1.2.3') // every hop trusted: the furthest one
    expect(trusting(peer('::ffff:127.0.0.1', '203.0.113.7'))).toBe('203.0.113.7') // IPv4-mapped peers count as IPv4
    expect(trusting(peer('127.0.0.1', 'not-an-address'))).toBe('127.0.0.1')
    expect(trusting(new Request('http://localhost/'))).toBe('unknown') // not through the server boundary
  })

  test('IPv6 clients are counted per /64 (one subscriber), IPv4-mapped ones as IPv4', () => {
    const none = clientAddressOf([])
    expect(none(peer('2001:db8:1:2:3:4:5:6'))).toBe('2001:db8:1:2::/64')
    expect(none(peer('2001:db8:1:2:ffff::1'))).toBe('2001:db8:1:2::/64')
    expect(none(peer('::ffff:192.0.2.5'))).toBe('192.0.2.5')
  })

  test('TRELLIS_TRUST_PROXY: comma-separated addresses, CIDR ranges or loopback/linklocal/uniquelocal; anything else stops the start', () => {
    expect(loadConfig({}, {}).trustProxy).toEqual([])
    expect(loadConfig({}, { TRELLIS_TRUST_PROXY: ' 10.0.0.1, 172.16.0.0/12 ,loopback,fd00::/8 ' }).trustProxy).toEqual(['10.0.0.1', '172.16.0.0/12', 'loopback', 'fd00::/8'])
    for (const bad of ['proxy.example.com', '10.0.0.0/33', 'true', '*']) {
      expect(() => loadConfig({}, { TRELLIS_TRUST_PROXY: bad })).toThrow(ConfigError)
      expect(() => loadConfig({}, { TRELLIS_TRUST_PROXY: bad })).toThrow(/TRELLIS_TRUST_PROXY/)
    }
  })
})

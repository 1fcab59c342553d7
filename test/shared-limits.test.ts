/**
 * The limits (per-token API windows, per-webhook bucket, login throttle) over the counters they share
 * (src/lib/rate-counters.ts): each rule's answers on this process's memory (SQLite) and on PostgreSQL
 * (src/db/postgres/rate-windows.ts) alike; and, on PostgreSQL, one budget across instances — several pools on one
 * database (each an instance's own connections and limiters), many decisions at once spread over them: exactly the
 * budget is accepted, never one more. Then through the real routes of three apps, each counting on its own pool.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { PgRateCounters } from '../src/db/postgres/rate-windows.ts'
import type { PgStore } from '../src/db/postgres/store.ts'
import { TokenRateLimiter, type RateLimits } from '../src/lib/rate-limit.ts'
import { manualClock } from '../src/lib/clock.ts'
import { MemoryRateCounters, type RateCounters } from '../src/lib/rate-counters.ts'
import { ADDRESS_BLOCK_AFTER, BLOCK_AFTER, LoginThrottle, WINDOW_MS } from '../src/modules/auth/throttle.ts'
import { WebhookRateLimiter } from '../src/modules/webhooks/rate.ts'
import { bearer, request, testApp, testEnv, type TestEnv } from './helpers.ts'
import { acmeDocument, applyAcme, reportHook, tokenFor } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'
import { freshDatabase, openProductPostgres, postgresInstalled } from './support/postgres-cluster.ts'

const withPostgres = postgresInstalled && postgresOrSkip('shared-limits (PostgreSQL)')

// The shared cluster and its migrated template start once, here, not inside the first test's time limit.
beforeAll(async () => {
  if (withPostgres) await freshDatabase()
}, 60_000)

/** Stores opened by a test, closed after it. */
const opened: PgStore[] = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()))
})

/** `count` instances on one fresh database: each its own pool and counters. */
async function instances(count: number): Promise<{ url: string; stores: PgStore[]; counters: PgRateCounters[] }> {
  const url = await freshDatabase()
  const stores = Array.from({ length: count }, () => openProductPostgres(url, { max: 8 }))
  opened.push(...stores)
  return { url, stores, counters: stores.map((store) => new PgRateCounters(store.sql)) }
}

const kinds: { name: string; enabled: boolean; counters(): Promise<RateCounters> }[] = [
  { name: 'in memory (SQLite)', enabled: true, counters: async () => new MemoryRateCounters() },
  { name: 'in PostgreSQL', enabled: withPostgres, counters: async () => (await instances(1)).counters[0]! },
]

for (const kind of kinds) {
  describe.skipIf(!kind.enabled)(`the rules, counted ${kind.name}`, () => {
    const LIMITS: RateLimits = { perMinute: 3, perHour: 5, perDay: 100 }

    test('API: three windows counted together; the tightest in the headers; refused calls are not counted', async () => {
      const clock = manualClock(0)
      const limiter = new TokenRateLimiter(clock, LIMITS, await kind.counters())
      const remaining: string[] = []
      for (let i = 0; i < 3; i++) {
        const decision = await limiter.consume(1)
        expect(decision.retryAfter).toBe(0)
        expect(decision.headers['x-ratelimit-limit']).toBe('3')
        expect(decision.headers['x-ratelimit-reset']).toBe('60')
        remaining.push(decision.headers['x-ratelimit-remaining']!)
        clock.advance(1000)
      }
      expect(remaining).toEqual(['2', '1', '0'])
      const refused = await limiter.consume(1)
      expect(refused.retryAfter).toBe(57)
      expect(refused.headers['x-ratelimit-remaining']).toBe('0')
      expect((await limiter.consume(2)).retryAfter).toBe(0) // another token: its own budget
      clock.set(60_000)
      // The minute opened again; the hour holds 3 of 5 (the refused call was not counted): 2 more, then the hour.
      for (const left of ['1', '0']) expect((await limiter.consume(1)).headers['x-ratelimit-remaining']).toBe(left)
      const hourFull = await limiter.consume(1)
      expect(hourFull.retryAfter).toBe(3540)
      expect(hourFull.headers['x-ratelimit-limit']).toBe('5')
      await expect(Promise.resolve().then(() => limiter.enforce(1))).rejects.toMatchObject({ status: 429 })
    })

    test('webhook: capacity = rate; whole seconds until the next token; continuous refill', async () => {
      const clock = manualClock(0)
      const limiter = new WebhookRateLimiter(clock, await kind.counters())
      for (let i = 0; i < 60; i++) expect(await limiter.take(1, 60)).toBe(0)
      expect(await limiter.take(1, 60)).toBe(1)
      clock.advance(999)
      expect(await limiter.take(1, 60)).toBe(1)
      clock.advance(1)
      expect(await limiter.take(1, 60)).toBe(0)
      expect(await limiter.take(1, 60)).toBe(1)
    })

    test('webhook: slow rates answer long waits, rounded up', async () => {
      const clock = manualClock(0)
      const limiter = new WebhookRateLimiter(clock, await kind.counters())
      expect(await limiter.take(7, 1)).toBe(0)
      expect(await limiter.take(7, 1)).toBe(60)
      clock.advance(500)
      expect(await limiter.take(7, 1)).toBe(60) // 59.5 s → 60
      clock.advance(29_500)
      expect(await limiter.take(7, 1)).toBe(30)
      clock.advance(30_000)
      expect(await limiter.take(7, 1)).toBe(0)
      for (let i = 0; i < 3; i++) expect(await limiter.take(8, 3)).toBe(0)
      expect(await limiter.take(8, 3)).toBe(20)
    })

    test('webhook: buckets are per webhook; a changed rate starts a new bucket; refill never exceeds the capacity', async () => {
      const clock = manualClock(0)
      const limiter = new WebhookRateLimiter(clock, await kind.counters())
      for (let i = 0; i < 2; i++) expect(await limiter.take(1, 2)).toBe(0)
      expect(await limiter.take(1, 2)).toBeGreaterThan(0)
      expect(await limiter.take(2, 2)).toBe(0)
      expect(await limiter.take(1, 5)).toBe(0)
      clock.advance(3_600_000)
      for (let i = 0; i < 5; i++) expect(await limiter.take(1, 5)).toBe(0)
      expect(await limiter.take(1, 5)).toBe(12)
    })

    const carolAt = (address: string) => ({ email: 'carol@example.com', address })

    test('login: per (email, address) the delay grows with failures, capped at 2 s; blocked after 10 until the window passes', async () => {
      const clock = manualClock(0)
      const throttle = new LoginThrottle(clock, await kind.counters())
      const attempt = carolAt('203.0.113.7')
      const delays: number[] = []
      for (let i = 1; i <= BLOCK_AFTER; i++) {
        expect(await throttle.begin(attempt)).toBe(0)
        delays.push(await throttle.delayMs(attempt))
      }
      expect(delays).toEqual([0, 0, 0, 250, 500, 1000, 2000, 2000, 2000, 2000])
      expect(await throttle.begin(attempt)).toBe(WINDOW_MS / 1000)
      clock.advance(60_000)
      expect(await throttle.begin(attempt)).toBe(WINDOW_MS / 1000 - 60)
      clock.advance(WINDOW_MS - 60_000 - 500)
      expect(await throttle.begin(attempt)).toBe(1) // whole seconds, never 0 while blocked
      clock.advance(500)
      expect(await throttle.begin(attempt)).toBe(0)
      expect(await throttle.delayMs(attempt)).toBe(0)
    })

    test('login: the same email at another address is neither blocked nor slowed; success clears only its own pair', async () => {
      const throttle = new LoginThrottle(manualClock(0), await kind.counters())
      for (let i = 0; i < BLOCK_AFTER; i++) await throttle.begin(carolAt('203.0.113.7'))
      expect(await throttle.begin(carolAt('203.0.113.7'))).toBeGreaterThan(0)
      expect(await throttle.begin(carolAt('198.51.100.9'))).toBe(0)
      expect(await throttle.delayMs(carolAt('198.51.100.9'))).toBe(0)
      await throttle.succeeded(carolAt('198.51.100.9'))
      expect(await throttle.begin(carolAt('203.0.113.7'))).toBeGreaterThan(0)
    })

    test('login: attempts are counted when they start: concurrent attempts cannot overshoot the limit', async () => {
      const throttle = new LoginThrottle(manualClock(0), await kind.counters())
      const verdicts = await Promise.all(Array.from({ length: BLOCK_AFTER + 5 }, () => throttle.begin(carolAt('203.0.113.7'))))
      expect(verdicts.filter((v) => v === 0).length).toBe(BLOCK_AFTER)
    })

    test(`login: per address over every email, blocked after ${ADDRESS_BLOCK_AFTER}; a success there does not reset it`, async () => {
      const clock = manualClock(0)
      const throttle = new LoginThrottle(clock, await kind.counters())
      const address = '203.0.113.7'
      for (let i = 0; i < ADDRESS_BLOCK_AFTER; i++) {
        expect(await throttle.begin({ email: `user-${i}@example.com`, address })).toBe(0)
        expect(await throttle.delayMs({ email: `user-${i}@example.com`, address })).toBe(0) // one failure per email: no delay
        if (i === 20) {
          await throttle.begin({ email: 'own@example.com', address })
          await throttle.succeeded({ email: 'own@example.com', address }) // the attacker's own account, signing in
        }
      }
      expect(await throttle.begin({ email: 'fresh@example.com', address })).toBeGreaterThan(0)
      expect(await throttle.begin({ email: 'fresh@example.com', address: '198.51.100.9' })).toBe(0)
      clock.advance(WINDOW_MS)
      expect(await throttle.begin({ email: 'fresh@example.com', address })).toBe(0)
    })
  })
}

/** `total` decisions started at once, spread round-robin over the instances' limiters. */
function spread<L, T>(limiters: L[], total: number, decide: (limiter: L, i: number) => T | Promise<T>): Promise<T[]> {
  return Promise.all(Array.from({ length: total }, (_, i) => decide(limiters[i % limiters.length]!, i)))
}

describe.skipIf(!withPostgres)('one budget across instances on one PostgreSQL (the limiters, real concurrency)', () => {
  const clock = manualClock(Date.UTC(2026, 10, 21, 12))

  test('the sweep never deadlocks with decisions on the windows it deletes (it skips the rows they hold)', async () => {
    const { counters } = await instances(2)
    const [sweeper, decider] = counters as [PgRateCounters, PgRateCounters]
    const keys = Array.from({ length: 300 }, (_, i) => ({ scope: 'login-pair', id: `203.0.113.7 user-${i}@example.com` }))
    const shared = { scope: 'login-address', id: '203.0.113.7' }
    const rules = (i: number) => [{ ...keys[i]!, sizeMs: 1_000, limit: 10 }, { ...shared, sizeMs: 1_000, limit: 100_000 }]
    let t = 0
    for (let round = 0; round < 30; round++) {
      await Promise.all(keys.map((_, i) => decider.take(rules(i), t)))
      t += 2_000 // every window above has ended: the sweep deletes them while decisions renew them
      // Decisions renewing those windows, all at once beside the sweep (before it skipped what they hold: deadlocks).
      const decisions = Array.from({ length: keys.length }, (_, i) => decider.take(rules(keys.length - 1 - i), t))
      const outcomes = await Promise.allSettled([sweeper.sweep(t), ...decisions])
      expect(outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason))).toEqual([])
      t += 2_000
    }
    // Alone, a sweep still deletes every ended window (the last round's), and then finds none.
    expect(await sweeper.sweep(t)).toBe(keys.length + 1)
    expect(await sweeper.sweep(t)).toBe(0)
  }, 60_000)

  test('webhook: 90 concurrent triggers over 3 instances, 60/min → exactly 60 taken', async () => {
    const { counters } = await instances(3)
    const limiters = counters.map((c) => new WebhookRateLimiter(clock, c))
    const waits = await spread(limiters, 90, (limiter) => limiter.take(42, 60))
    expect(waits.filter((w) => w === 0).length).toBe(60)
    expect(waits.filter((w) => w === 1).length).toBe(30)
  })

  test('API: 90 concurrent calls of one token over 3 instances, 60/min → exactly 60, each remaining count once', async () => {
    const { counters } = await instances(3)
    const limiters = counters.map((c) => new TokenRateLimiter(clock, { perMinute: 60, perHour: 1000, perDay: 10_000 }, c))
    const decisions = await spread(limiters, 90, (limiter) => limiter.consume(7))
    const accepted = decisions.filter((d) => d.retryAfter === 0)
    expect(accepted.length).toBe(60)
    expect(accepted.map((d) => Number(d.headers['x-ratelimit-remaining'])).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i))
    for (const refused of decisions.filter((d) => d.retryAfter > 0)) {
      expect(refused.headers['x-ratelimit-remaining']).toBe('0')
      expect(refused.retryAfter).toBe(60)
    }
  })

  test('API: all or nothing across windows under contention — the hour (40) fills before the minute (50); no window keeps a refused count', async () => {
    const { counters } = await instances(3)
    const limiters = counters.map((c) => new TokenRateLimiter(clock, { perMinute: 50, perHour: 40, perDay: 45 }, c))
    const decisions = await spread(limiters, 120, (limiter) => limiter.consume(9))
    expect(decisions.filter((d) => d.retryAfter === 0).length).toBe(40)
    const now = clock.now()
    for (const scope of ['api-minute', 'api-hour', 'api-day']) expect(await counters[0]!.count({ scope, id: 9 }, now)).toBe(40)
  })

  test('login: 30 concurrent failures of one (email, address) over 3 instances → exactly 10 go on; 80 emails from one address → exactly 50', async () => {
    const { counters } = await instances(3)
    const throttles = counters.map((c) => new LoginThrottle(clock, c))
    const pair = await spread(throttles, 30, (throttle) => throttle.begin({ email: 'carol@example.com', address: '203.0.113.7' }))
    expect(pair.filter((w) => w === 0).length).toBe(BLOCK_AFTER)
    const spraying = await spread(throttles, 80, (throttle, i) => throttle.begin({ email: `user-${i}@example.com`, address: '198.51.100.9' }))
    expect(spraying.filter((w) => w === 0).length).toBe(ADDRESS_BLOCK_AFTER)
    // A success on one instance clears the pair on all of them.
    await throttles[0]!.succeeded({ email: 'carol@example.com', address: '203.0.113.7' })
    expect(await throttles[2]!.begin({ email: 'carol@example.com', address: '203.0.113.7' })).toBe(0)
  })

  test('ended windows and refilled buckets are swept away; open ones stay', async () => {
    const { stores, counters } = await instances(1)
    const pg = counters[0]!
    const start = clock.now()
    await pg.take([{ scope: 'short', id: 1, sizeMs: 1000, limit: 5 }, { scope: 'long', id: 1, sizeMs: 60_000, limit: 5 }], start)
    await pg.takeToken({ scope: 'fast', id: 1, capacity: 60, perMs: 60 / 60_000 }, start) // full again after 1 s
    await pg.takeToken({ scope: 'slow', id: 1, capacity: 1, perMs: 1 / 60_000 }, start) // full again after 60 s
    const rows = async () => {
      const windows = (await stores[0]!.sql`SELECT key FROM rate_limit_windows ORDER BY key`) as { key: string }[]
      const buckets = (await stores[0]!.sql`SELECT key FROM rate_limit_buckets ORDER BY key`) as { key: string }[]
      return [...windows, ...buckets].map((r) => r.key)
    }
    expect(await rows()).toEqual(['long 1', 'short 1', 'fast 1', 'slow 1'])
    expect(await pg.sweep(start + 1000)).toBe(2)
    expect(await rows()).toEqual(['long 1', 'slow 1'])
    expect(await pg.sweep(start + 60_000)).toBe(2)
    expect(await rows()).toEqual([])
  })
})

describe.skipIf(!withPostgres)('one budget across three apps, through the routes (each app counting on its own pool)', () => {
  // The data (Acme) is one SQLite file the three apps share; what is under test is the limits' counters, which each
  // app keeps in PostgreSQL through its own pool — as three instances would. (With every face twin merged, the same
  // scenario runs with the data in PostgreSQL too.)
  let env: TestEnv
  let apps: ReturnType<typeof testApp>[]
  let hook: string
  let kept: PgStore[] = []

  beforeAll(async () => {
    env = testEnv()
    const report = await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
    hook = reportHook(report, 'Refund order')
    const { stores, counters } = await instances(3)
    kept = opened.splice(0) // open for the whole block, not closed after each test
    expect(stores).toEqual(kept)
    apps = counters.map((rateCounters) => testApp(env, { rateCounters }))
  })
  afterAll(async () => {
    await Promise.all(kept.map((store) => store.close()))
    env?.cleanup()
  })

  const statuses = async (responses: Promise<Response>[]) => (await Promise.all(responses)).map((r) => r.status)
  const tally = (list: number[]) => Object.fromEntries([...new Set(list)].sort().map((s) => [s, list.filter((x) => x === s).length]))

  test('POST {webhook_url}: 90 concurrent triggers spread over the three → exactly 60 × 202, 30 × 429', async () => {
    const token = (await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])).value
    const sent = Array.from({ length: 90 }, (_, i) =>
      apps[i % 3]!.handle(request(hook, { method: 'POST', headers: bearer(token), json: { record_id: `shared-${i}` } })),
    )
    expect(tally(await statuses(sent))).toEqual({ 202: 60, 429: 30 })
  })

  test('the API: 90 concurrent calls of one token spread over the three → exactly 60 × 200, 30 × 429', async () => {
    const token = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    const sent = Array.from({ length: 90 }, (_, i) => apps[i % 3]!.handle(request('/v1/project/Acme/environment/production/notes', { headers: bearer(token) })))
    expect(tally(await statuses(sent))).toEqual({ 200: 60, 429: 30 })
  })

  test('POST /auth/login: 15 concurrent wrong passwords spread over the three → exactly 10 × 401, 5 × 429', async () => {
    const sent = Array.from({ length: 15 }, (_, i) =>
      apps[i % 3]!.handle(request('/auth/login', { method: 'POST', json: { email: 'nobody@example.com', password: `wrong-${i}` } })),
    )
    expect(tally(await statuses(sent))).toEqual({ 401: BLOCK_AFTER, 429: 5 })
  }, 20_000)
})

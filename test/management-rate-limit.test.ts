/**
 * DESIGN §6: the per-token rate limit covers the whole API a token can call — token management and runs as well
 * as notes and logs — with one budget per token. Console sessions (people) are not limited.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createSession } from '../src/modules/auth/sessions.ts'
import { bearer, request, runNow, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, applyAcme, tokenFor, userId } from './support/acme.ts'

let env: TestEnv
let app: ReturnType<typeof testApp>

beforeAll(async () => {
  env = testEnv({ TRELLIS_API_RATE_PER_MIN: '5' })
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
  app = testApp(env)
})
afterAll(() => env.cleanup())

describe('the API rate limit on management and run calls', () => {
  test('one budget per token across notes, token management and runs; the 6th call in a minute is 429 with Retry-After', async () => {
    const token = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    const auth = bearer(token)
    const calls = [
      '/v1/account/tokens',
      '/v1/project/Acme/environment/production/notes',
      '/v1/project/Acme/api-tokens',
      '/v1/project/Acme/environment/production/workflow-runs',
      '/v1/account',
    ]
    for (const [i, path] of calls.entries()) {
      const response = await app.handle(request(path, { headers: auth }))
      expect({ path, status: response.status }).toEqual({ path, status: 200 })
      expect(response.headers.get('x-ratelimit-limit')).toBe('5')
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(4 - i))
    }
    const limited = await app.handle(request('/v1/account/tokens', { headers: auth }))
    expect(limited.status).toBe(429)
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(((await limited.json()) as { code: string }).code).toBe('rate_limited')
    // Another token has its own budget; the next minute opens again.
    const other = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    expect((await app.handle(request('/v1/account/tokens', { headers: bearer(other) }))).status).toBe(200)
    env.clock.advance(60_000)
    expect((await app.handle(request('/v1/account/tokens', { headers: auth }))).status).toBe(200)
  })

  test('a console session is never limited', async () => {
    const cookie = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, 'carol'), false))).id}`
    for (let i = 0; i < 20; i++) {
      const response = await app.handle(request('/v1/account/tokens', { headers: { cookie } }))
      expect(response.status).toBe(200)
      expect(response.headers.get('x-ratelimit-limit')).toBeNull()
    }
  })
})

/**
 * Every route against hostile input (issue 24, "Done when"): deep, wide and long JSON bodies, bodies over the limit,
 * hostile path parameters and query strings — signed in and not — sent to a real `serve` process while /healthz is
 * asked every few milliseconds. No answer may be a 5xx, and /healthz may never wait more than 100 ms. The routes
 * are the app's own list, so a route added later is fuzzed too.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { MAX_JSON_DEPTH } from '../src/http/body.ts'
import { DEFAULT_MAX_BODY_BYTES } from '../src/config.ts'
import { processEnv, repoRoot, runCli, type ServeProcess, startServe, tempDir, testApp, type TestEnv, testEnv } from './helpers.ts'

/** A value for each path parameter that reaches the handler's own checks on the Acme fixture. */
const FIXTURE_PARAMS: Record<string, string> = {
  projectName: 'Acme',
  project: 'Acme',
  environmentName: 'production',
  environment: 'production',
  teamName: 'Billing',
  team: 'Billing',
  collectionName: 'orders',
  collection: 'orders',
  workflowName: 'Refund order',
  workflow: 'Refund order',
  recordId: 'ord_1001',
  record: 'ord_1001',
  userId: '2',
  id: '1',
  runId: '0190f2a8-7b3c-7def-8123-456789abcdef',
  token: 'eyJ2IjoxfQ.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlcw',
}

/** Path parameter values no route should answer with a 5xx. */
const HOSTILE_PARAMS = ['x'.repeat(4_000), '%zz', '%', '%00', '..', '%2e%2e%2f', '%F0%9F%92%A9', '%ED%A0%80', '-1', '1e309', '9'.repeat(40)]

const depth = 50_000
const BODIES: [string, string][] = [
  ['deep objects', `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`],
  ['deep arrays', `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`],
  ['one level too deep', `${'{"a":'.repeat(MAX_JSON_DEPTH + 1)}1${'}'.repeat(MAX_JSON_DEPTH + 1)}`],
  ['wide object', JSON.stringify(Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, i])))],
  ['wide array', JSON.stringify({ email: Array.from({ length: 150_000 }, () => 0), title: Array.from({ length: 100 }, () => ({})) })],
  ['long strings', JSON.stringify({ email: 'e'.repeat(300_000), title: 't'.repeat(300_000), content: 'c'.repeat(300_000) })],
  ['lone surrogates and NUL', '{"email":"\\ud800@example.com","password":"\\udc00","title":"\\u0000","name":"\\ud800"}'],
  ['numbers out of range', '{"limit":1e309,"expiresAt":-1e309,"instanceAdmin":1e400,"role":9007199254740993}'],
  ['over the body limit', JSON.stringify({ content: 'x'.repeat(DEFAULT_MAX_BODY_BYTES + 10) })],
]

const QUERIES = [`?${'a'.repeat(6_000)}=1`, '?limit=1e309&createdAt.gt=%ff&createdAt.lt=9999999-99-99', `?recordId=${'%ED%A0%80'.repeat(50)}&userEmail=%00`, '?a[b][c][d][e][f]=1&a=2&a=3']

interface Route {
  method: string
  path: string
}

function fill(path: string, value: (name: string) => string): string {
  return path.replace(/:(\w+)/g, (_, name: string) => value(name))
}

describe('every route, hostile input, a real server', () => {
  const dirs: { cleanup(): void }[] = []
  let server: ServeProcess
  let routes: Route[]
  let token: string
  let cookie: string

  let env: TestEnv

  beforeAll(async () => {
    // The test env's store (SQLite, or a fresh PostgreSQL database in the PostgreSQL pass) for the processes.
    env = testEnv()
    routes = testApp(env).routes.map((r) => ({ method: r.method, path: r.path })).filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS')
    const data = tempDir('trellis-fuzz-')
    dirs.push(data)
    const cli = (args: string[]) => runCli([...args, '--data', data.path], { env: processEnv(env) })
    expect((await cli(['apply', '-f', join(repoRoot, 'examples/acme.yaml')])).code).toBe(0)
    // A decoy first: the fuzz's DELETE …/tokens/1 revokes it, not the token it signs in with.
    expect((await cli(['token', 'create', '--user', 'alice@example.com', '--project', 'Acme', '--name', 'decoy', '--scopes', 'all'])).code).toBe(0)
    const created = await cli(['token', 'create', '--user', 'alice@example.com', '--project', 'Acme', '--name', 'fuzz', '--scopes', 'all'])
    expect(created.code).toBe(0)
    token = created.stdout.trim()
    // Generous budgets: the fuzz is about answers, not about the rate limits (which answer 429, never a 5xx).
    server = await startServe({
      dataDir: data.path,
      cwd: data.path,
      env: { ...processEnv(env), TRELLIS_EXECUTOR_CONCURRENCY: '0', TRELLIS_LOG_LEVEL: 'error', TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000', TRELLIS_WEBHOOK_RATE_PER_MIN: '1000000' },
    })
    const login = await fetch(`${server.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'alice@example.com', password: 'alice-demo-pass-2026' }),
    })
    expect(login.status).toBe(200)
    cookie = login.headers.get('set-cookie')!.split(';')[0]!
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    for (const dir of dirs) dir.cleanup()
    env?.cleanup()
  })

  test('no 5xx anywhere, and /healthz never waits 100 ms', async () => {
    const asks: { method: string; path: string; body?: string; signedIn: boolean }[] = []
    for (const route of routes) {
      const fixture = fill(route.path, (name) => encodeURIComponent(FIXTURE_PARAMS[name] ?? 'x'))
      for (const signedIn of [true, false]) {
        if (route.method !== 'GET') for (const [, body] of BODIES) asks.push({ method: route.method, path: fixture, body, signedIn })
        for (const query of QUERIES) asks.push({ method: route.method, path: fixture + query, body: route.method === 'GET' ? undefined : '{}', signedIn })
        if (route.path.includes(':')) {
          for (const hostile of HOSTILE_PARAMS) asks.push({ method: route.method, path: fill(route.path, () => hostile), body: route.method === 'GET' ? undefined : '{}', signedIn })
        }
      }
    }

    // What ends a signed-in caller's access (a removal, a revocation, signing out) comes last.
    const lastly = (ask: { method: string; path: string }) => (ask.path.startsWith('/auth/logout') ? 2 : ask.method === 'DELETE' ? 1 : 0)
    asks.sort((a, b) => lastly(a) - lastly(b))

    let asking = true
    const healthWaits: number[] = []
    const health = (async () => {
      while (asking) {
        const started = performance.now()
        const answer = await fetch(`${server.url}/healthz`)
        healthWaits.push(performance.now() - started)
        expect(answer.status).toBe(200)
        await Bun.sleep(10)
      }
    })()

    const fiveHundreds: string[] = []
    const statuses = new Map<number, number>()
    const timings: [number, string][] = []
    try {
      for (const ask of asks) {
        const headers: Record<string, string> = ask.body === undefined ? {} : { 'content-type': 'application/json' }
        if (ask.signedIn) Object.assign(headers, { authorization: `Bearer ${token}`, cookie })
        const began = performance.now()
        const answer = await fetch(`${server.url}${ask.path}`, { method: ask.method, headers, body: ask.body, redirect: 'manual', signal: AbortSignal.timeout(20_000) })
        // An event stream does not end by itself: its head is the answer, then the client goes away.
        if (answer.headers.get('content-type')?.startsWith('text/event-stream')) await answer.body?.cancel()
        else await answer.arrayBuffer()
        if (process.env.FUZZ_DEBUG) timings.push([performance.now() - began, `${ask.method} ${ask.path.slice(0, 100)} ${ask.body?.slice(0, 30)} ${ask.signedIn} → ${answer.status}`])
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1)
        if (answer.status >= 500) fiveHundreds.push(`${ask.method} ${ask.path.slice(0, 160)} (${ask.body?.slice(0, 40) ?? 'no body'}, ${ask.signedIn ? 'signed in' : 'anonymous'}) → ${answer.status}`)
      }
    } finally {
      asking = false
      await health
    }
    const slowest = Math.max(...healthWaits)
    if (process.env.FUZZ_DEBUG) console.log(timings.sort((a, b) => b[0] - a[0]).slice(0, 15).map(([ms, what]) => `${ms.toFixed(1)} ${what}`).join('\n'))
    console.log(`route fuzz: ${routes.length} routes, ${asks.length} requests, statuses ${JSON.stringify(Object.fromEntries(statuses))}, /healthz asked ${healthWaits.length} times, slowest ${slowest.toFixed(1)} ms`)
    expect(fiveHundreds).toEqual([])
    expect(healthWaits.length).toBeGreaterThan(10)
    expect(slowest).toBeLessThan(100)
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200)
  }, 600_000)
})

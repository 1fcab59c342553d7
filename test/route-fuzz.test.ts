/**
 * Every route against hostile input: deep, wide and long JSON bodies, bodies over the limit,
 * hostile path parameters and query strings — signed in and not — sent to a real `serve` process while /healthz is
 * asked every few milliseconds. No answer may be a 5xx, and no request may hold /healthz up for 100 ms: a /healthz that
 * waited that long has each request then in flight sent again three times beside /healthz, and fails the test if the
 * wait repeats every time (a request that holds the event loop does so each time; a pause of the process by a busy host
 * does not repeat). The routes are the app's own list, so a route added later is fuzzed too.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { MAX_JSON_DEPTH } from '../src/http/body.ts'
import { DEFAULT_MAX_BODY_BYTES } from '../src/config.ts'
import { acmePathParams } from './support/acme.ts'
import { processEnv, repoRoot, runCli, type ServeProcess, startServe, tempDir, testApp, type TestEnv, testEnv } from './helpers.ts'

/** A value for each path parameter that reaches the handler's own checks on the Acme fixture. */
const FIXTURE_PARAMS: Record<string, string> = {
  ...acmePathParams('Billing'),
  userId: '2',
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

interface Ask {
  method: string
  path: string
  body?: string
  signedIn: boolean
}

/** The longest /healthz may wait behind any request (the event loop is never held that long by one). */
const HEALTH_WAIT_LIMIT_MS = 100

const describeAsk = (ask: Ask) => `${ask.method} ${ask.path.slice(0, 160)} (${ask.body?.slice(0, 40) ?? 'no body'}, ${ask.signedIn ? 'signed in' : 'anonymous'})`

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

  test('no 5xx anywhere, and /healthz never waits 100 ms behind a request (a slow answer repeats when its request is sent again)', async () => {
    const asks: Ask[] = []
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

    const fiveHundreds: string[] = []
    const statuses = new Map<number, number>()
    const timings: [number, string][] = []
    const spans: { ask: Ask; from: number; to: number }[] = []
    const probes = await whileProbing(async () => {
      for (const ask of asks) {
        const from = performance.now()
        const status = await send(ask)
        spans.push({ ask, from, to: performance.now() })
        if (process.env.FUZZ_DEBUG) timings.push([performance.now() - from, `${describeAsk(ask)} → ${status}`])
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
        if (status >= 500) fiveHundreds.push(`${describeAsk(ask)} → ${status}`)
      }
    })
    const slowest = Math.max(...probes.map((p) => p.to - p.from))
    if (process.env.FUZZ_DEBUG) console.log(timings.sort((a, b) => b[0] - a[0]).slice(0, 15).map(([ms, what]) => `${ms.toFixed(1)} ${what}`).join('\n'))

    // A /healthz that waited 100 ms or more: a request in flight then held the server — or the machine paused the
    // process (a busy CI host does, now and then). Each request in flight during such a wait is sent again, three
    // times, with /healthz asked beside it: a request that holds the server holds it every time; a pause does not repeat.
    const slowProbes = probes.filter((p) => p.to - p.from >= HEALTH_WAIT_LIMIT_MS)
    const suspects = [...new Set(slowProbes.flatMap((p) => spans.filter((s) => s.from < p.to && s.to > p.from).map((s) => s.ask)))].slice(0, 20)
    const holders: string[] = []
    for (const ask of suspects) {
      const waits: number[] = []
      for (let round = 0; round < 3; round++) {
        const again = await whileProbing(() => send(ask), 2)
        waits.push(Math.max(...again.map((p) => p.to - p.from)))
      }
      if (waits.every((wait) => wait >= HEALTH_WAIT_LIMIT_MS)) holders.push(`${describeAsk(ask)}: /healthz waited ${waits.map((w) => w.toFixed(0)).join(', ')} ms`)
    }
    console.log(
      `route fuzz: ${routes.length} routes, ${asks.length} requests, statuses ${JSON.stringify(Object.fromEntries(statuses))}, /healthz asked ${probes.length} times, slowest ${slowest.toFixed(1)} ms` +
        (slowProbes.length === 0 ? '' : `; ${slowProbes.length} waited ≥ ${HEALTH_WAIT_LIMIT_MS} ms, ${suspects.length} request(s) in flight sent again: ${holders.length} held the server again`),
    )
    expect(fiveHundreds).toEqual([])
    expect(probes.length).toBeGreaterThan(10)
    expect(holders).toEqual([])
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200)

    /** Sends one ask; its status (an event stream's head is its answer: the client then goes away). */
    async function send(ask: Ask): Promise<number> {
      const headers: Record<string, string> = ask.body === undefined ? {} : { 'content-type': 'application/json' }
      if (ask.signedIn) Object.assign(headers, { authorization: `Bearer ${token}`, cookie })
      const answer = await fetch(`${server.url}${ask.path}`, { method: ask.method, headers, body: ask.body, redirect: 'manual', signal: AbortSignal.timeout(20_000) })
      if (answer.headers.get('content-type')?.startsWith('text/event-stream')) await answer.body?.cancel()
      else await answer.arrayBuffer()
      return answer.status
    }

    /** Runs `work` while /healthz is asked every `everyMs`; each ask's span (every answer must be 200). */
    async function whileProbing(work: () => Promise<unknown>, everyMs = 10): Promise<{ from: number; to: number }[]> {
      const spans: { from: number; to: number }[] = []
      let asking = true
      const probing = (async () => {
        while (asking) {
          const from = performance.now()
          const answer = await fetch(`${server.url}/healthz`)
          await answer.arrayBuffer()
          spans.push({ from, to: performance.now() })
          expect(answer.status).toBe(200)
          await Bun.sleep(everyMs)
        }
      })()
      try {
        await work()
      } finally {
        asking = false
        await probing
      }
      return spans
    }
  }, 600_000)
})

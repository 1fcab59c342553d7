/**
 * Deeply nested JSON: `{"a":{"a":…}}` 50,000 levels deep (350 KB) posted to /auth/login would freeze a
 * real server for 7–14 s and take 2.3 GB (Elysia's validation overflows the stack building its error). Every JSON
 * body is refused past MAX_JSON_DEPTH before it is parsed: a 400 `json_too_deep` at once, whatever the route and
 * whether or not the caller is signed in, with /healthz answering as usual meanwhile. A real `serve` process.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { jsonShapeProblem, MAX_JSON_DEPTH, MAX_JSON_MEMBERS } from '../src/http/body.ts'
import { processEnv, repoRoot, runCli, type ServeProcess, startServe, testEnv, type TestEnv } from './helpers.ts'

/** `{"a":{"a":…1…}}` with `levels` objects. */
const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`
/** `[[[…]]]` with `levels` arrays. */
const nestedArrays = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`

const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024

describe('jsonShapeProblem', () => {
  test('counts objects and arrays, not brackets inside strings or after escapes', () => {
    expect(jsonShapeProblem(nested(32), 32)).toBe(null)
    expect(jsonShapeProblem(nested(33), 32)).toBe('deep')
    expect(jsonShapeProblem(nestedArrays(33), 32)).toBe('deep')
    expect(jsonShapeProblem(`{"a":"${'['.repeat(100)}"}`, 32)).toBe(null)
    expect(jsonShapeProblem(`{"a":"\\"${'{'.repeat(100)}"}`, 32)).toBe(null)
    // An escaped backslash ends right before the closing quote: what follows is outside the string again.
    expect(jsonShapeProblem(`{"a":"x\\\\","b":${nestedArrays(33)}}`, 32)).toBe('deep')
    expect(jsonShapeProblem(`{"a":"x\\\\\\"${nestedArrays(33)}"}`, 32)).toBe(null)
  })

  test('counts the members of each object and array, not commas inside strings or in other containers', () => {
    const items = (n: number) => Array.from({ length: n }, () => '{"x":1,"y":2}').join(',')
    expect(jsonShapeProblem(`[${items(100)}]`, 32, 100)).toBe(null)
    expect(jsonShapeProblem(`[${items(101)}]`, 32, 100)).toBe('wide')
    expect(jsonShapeProblem(`{"a":[${items(60)}],"b":[${items(60)}]}`, 32, 100)).toBe(null) // 120 in all, 60 each
    expect(jsonShapeProblem(`{"a":"${','.repeat(1_000)}"}`, 32, 100)).toBe(null)
    expect(jsonShapeProblem(JSON.stringify(Object.fromEntries(Array.from({ length: MAX_JSON_MEMBERS }, (_, i) => [`k${i}`, i]))))).toBe(null)
    expect(jsonShapeProblem(JSON.stringify(Object.fromEntries(Array.from({ length: MAX_JSON_MEMBERS + 1 }, (_, i) => [`k${i}`, i]))))).toBe('wide')
  })
})

describe('a real server and JSON nested 50,000 deep', () => {
  let env: TestEnv
  let server: ServeProcess
  let token: string

  beforeAll(async () => {
    env = testEnv()
    const data = { path: env.dataDir }
    const cli = (args: string[]) => runCli(args, { env: processEnv(env) })
    expect((await cli(['apply', '-f', join(repoRoot, 'examples/acme.yaml'), '--data', data.path])).code).toBe(0)
    const created = await cli(['token', 'create', '--user', 'alice@example.com', '--project', 'Acme', '--name', 'deep', '--scopes', 'all', '--data', data.path])
    expect(created.code).toBe(0)
    token = created.stdout.trim()
    server = await startServe({ dataDir: data.path, cwd: data.path, env: { TRELLIS_EXECUTOR_CONCURRENCY: '0', TRELLIS_LOG_LEVEL: 'warn', ...processEnv(env) } })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    env.cleanup()
  })

  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body, signal: AbortSignal.timeout(30_000) })

  test('every JSON route answers 400 json_too_deep at once, signed in or not; /healthz keeps answering; memory stays flat', async () => {
    const body = nested(50_000)
    expect(body.length).toBeGreaterThan(300_000)
    const rssBefore = rssOf(server.proc.pid)
    const asks: [string, Record<string, string>][] = [
      ['/auth/login', {}],
      ['/setup', {}],
      ['/auth/invitation', {}],
      ['/v1/projects', {}],
      ['/v1/projects', { authorization: `Bearer ${token}` }],
      ['/v1/project/Acme/environment/production/notes', { authorization: `Bearer ${token}` }],
    ]
    /** One round: three deep bodies at a time to each route, /healthz asked again and again meanwhile. */
    const round = async () => {
      let asking = true
      const healthWaits: number[] = []
      const health = (async () => {
        while (asking) {
          const started = performance.now()
          expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
          healthWaits.push(performance.now() - started)
          await Bun.sleep(5)
        }
      })()
      const started = performance.now()
      for (const [path, headers] of asks) {
        const answers = await Promise.all([0, 1, 2].map(() => post(path, body, headers)))
        for (const answer of answers) {
          expect(answer.headers.get('x-content-type-options')).toBe('nosniff')
          expect({ path, status: answer.status, body: await answer.json() }).toEqual({
            path,
            status: 400,
            body: { error: 'Bad Request', code: 'json_too_deep', message: `Request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels` },
          })
        }
      }
      const elapsed = performance.now() - started
      asking = false
      await health
      expect(healthWaits.length).toBeGreaterThan(0)
      return { elapsed, slowestHealth: Math.max(...healthWaits) }
    }
    // 18 refusals of 350 KB each: before, one alone took 7–14 s and held /healthz as long. The bounds leave room for
    // a 2-core machine running other test files beside this one (npm test's parallel part), and a round slower than
    // them is run again (up to three in all): a refusal that holds the server does so every round; a pause of the
    // process by a busy host does not repeat.
    const rounds: { elapsed: number; slowestHealth: number }[] = []
    const within = (r: { elapsed: number; slowestHealth: number }) => r.elapsed < 10_000 && r.slowestHealth < 1_000
    do rounds.push(await round())
    while (!within(rounds.at(-1)!) && rounds.length < 3)
    expect(rounds.some(within), `rounds (ms): ${JSON.stringify(rounds)}`).toBe(true)
    expect(rssOf(server.proc.pid) - rssBefore).toBeLessThan(100 * 1024 * 1024)
  }, 60_000)

  test(`${MAX_JSON_DEPTH} levels reach the route's own checks; ${MAX_JSON_DEPTH + 1} do not`, async () => {
    const within = await post('/auth/login', nested(MAX_JSON_DEPTH))
    expect(within.status).toBe(400)
    expect(((await within.json()) as { code: string }).code).not.toBe('json_too_deep')
    const beyond = await post('/auth/login', nested(MAX_JSON_DEPTH + 1))
    expect(((await beyond.json()) as { code: string }).code).toBe('json_too_deep')
    const arrays = await post('/auth/login', `{"email":${nestedArrays(MAX_JSON_DEPTH)}}`)
    expect(((await arrays.json()) as { code: string }).code).toBe('json_too_deep')
  })

  test('a deep body is refused as what it is, not counted as a failed login', async () => {
    for (let i = 0; i < 12; i++) expect((await post('/auth/login', nested(1_000))).status).toBe(400)
    // Had those counted against this address, the real login would be throttled (429); it is not.
    const login = await post('/auth/login', JSON.stringify({ email: 'alice@example.com', password: 'alice-demo-pass-2026' }))
    expect(login.status).not.toBe(429)
  })
})

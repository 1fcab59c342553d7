/**
 * The bench's load generator (bench/procs.ts runLoad driving wrk with bench/wrk.lua) against a real server on
 * loopback: what it sends and what it counts. Not a timing test: it asserts request bodies, status counts and that
 * CPU time was read, never a rate. Needs `wrk`: skipped with a warning without it, unless TRELLIS_REQUIRE_WRK=1
 * (as in .ci/run, which installs it), where a missing wrk fails.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type LoadSpec, PathsOnce, requestsAtOnce, runLoad } from '../bench/procs.ts'

const available = Bun.which('wrk') !== null
if (!available) {
  if (process.env.TRELLIS_REQUIRE_WRK === '1') throw new Error('wrk not found (apt-get install wrk)')
  console.warn('bench-load: SKIPPED, no wrk on PATH (apt-get install wrk)')
}

interface Seen {
  method: string
  path: string
  authorization: string | null
  contentType: string | null
  body: string
}

let seen: Seen[] = []
/** Answers 202, but 500 to every request whose record id ends in 7 and 409 on /busy. */
let server: ReturnType<typeof Bun.serve> | undefined

beforeAll(() => {
  if (!available) return
  server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname
      const body = request.method === 'POST' ? await request.text() : ''
      seen.push({ method: request.method, path, authorization: request.headers.get('authorization'), contentType: request.headers.get('content-type'), body })
      if (path === '/busy') return new Response('{}', { status: 409 })
      if (body.endsWith('7"}')) return new Response('{}', { status: 500 })
      return new Response('{}', { status: request.method === 'POST' ? 202 : 200 })
    },
  })
})

afterAll(() => server?.stop(true))

const load = (requests: LoadSpec['requests'], expect: number, reset = true, warmup = 0) => {
  if (reset) seen = []
  return runLoad({ url: `http://127.0.0.1:${server!.port}`, connections: 4, duration: 1, warmup, headers: { authorization: 'Bearer t0ken' }, expect, serverPid: process.pid, requests })
}

describe.skipIf(!available)('bench load generator (wrk + bench/wrk.lua)', () => {
  test('unique: a record id no other request used, every status counted, the unexpected ones reported', async () => {
    const result = await load({ kind: 'unique', paths: ['/hooks/a', '/hooks/b'], prefix: 'bench-test' }, 202)
    const posts = seen.filter((s) => s.method === 'POST')
    expect(posts.length).toBeGreaterThan(10)
    const ids = posts.map((s) => (JSON.parse(s.body) as { record_id: string }).record_id)
    expect(new Set(ids).size).toBe(ids.length)
    for (const id of ids) expect(id).toMatch(/^bench-test-m4-1-\d+$/)
    expect(new Set(posts.map((s) => s.path))).toEqual(new Set(['/hooks/a', '/hooks/b']))
    expect(posts.every((s) => s.authorization === 'Bearer t0ken' && s.contentType === 'application/json')).toBe(true)

    const failed = result.statusCodes['500'] ?? 0
    expect(failed).toBeGreaterThan(0)
    expect(result.responses).toBe((result.statusCodes['202'] ?? 0) + failed)
    expect(result.unexpected).toBe(failed)
    // Every request the server saw was answered and counted, or still in flight when wrk stopped.
    expect(result.responses + result.unanswered).toBe(posts.length)
    expect(result.latency.p99).toBeGreaterThan(0)
    expect(result.cpu.generatorPerRequestUs).toBeGreaterThan(0)
    expect(result.cpu.serverPerRequestUs).toBeGreaterThan(0)
  }, 20_000)

  test('fixed: each record id goes to its own path; the expected 409s are not unexpected', async () => {
    const result = await load({ kind: 'fixed', paths: ['/busy', '/free'], recordIds: ['r"1', 'r2'] }, 409)
    const posts = seen.filter((s) => s.method === 'POST')
    for (const s of posts) expect(JSON.parse(s.body)).toEqual({ record_id: s.path === '/busy' ? 'r"1' : 'r2' })
    expect(result.statusCodes['409']).toBeGreaterThan(0)
    expect(result.statusCodes['202']).toBeGreaterThan(0)
    expect(result.unexpected).toBe(result.statusCodes['202']!)
  }, 20_000)

  test('once: each path sent once, over runs one after another (a warm-up, then the measured run) and runs at once', async () => {
    const pool = new PathsOnce(Array.from({ length: 400_000 }, (_, i) => `/once/${i}`))
    const body = JSON.stringify({ decision: 'approve' })
    seen = []
    await load({ kind: 'once', paths: pool.share()[0]!, body }, 202, false, 1)
    await Promise.all(requestsAtOnce([0, 1].map(() => ({ kind: 'once', paths: pool.share()[0]!, body }))).map((requests) => load(requests, 202, false)))
    const paths = seen.map((s) => s.path)
    expect(paths.length).toBeGreaterThan(100)
    expect(new Set(paths).size).toBe(paths.length)
    expect(paths.every((path) => Number(path.split('/')[2]) < pool.next)).toBe(true)
    expect(seen.every((s) => s.method === 'POST' && s.body === body && s.contentType === 'application/json' && s.authorization === 'Bearer t0ken')).toBe(true)
    // Past the last path the last one again (a decision's answer is then a 409: unexpected). The first is the request
    // wrk makes before starting and never sends.
    const few = new PathsOnce(['/once/a', '/once/b'])
    await load({ kind: 'once', paths: few.share()[0]!, body }, 202)
    expect(seen.length).toBeGreaterThan(2)
    expect(new Set(seen.map((s) => s.path))).toEqual(new Set(['/once/b']))
  }, 30_000)

  test('get: the paths in turn, 200s expected', async () => {
    const result = await load({ kind: 'get', paths: ['/one?limit=10', '/two'] }, 200)
    expect(new Set(seen.map((s) => `${s.method} ${s.path}`))).toEqual(new Set(['GET /one', 'GET /two']))
    expect(result.unexpected).toBe(0)
    expect(result.responses).toBe(result.statusCodes['200']!)
  }, 20_000)
})

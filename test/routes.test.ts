/**
 * The same answer on every route: a token of another project is 403 `wrong_project` on every
 * project route (driven by the served /openapi.json, so a new route is covered the day it is added); logout
 * refuses a foreign Origin; /setup and /docs send the console's security headers and no inline script; what is
 * refused before routing (431, 414, an unknown method, 405 on a known path) is the one JSON error body; integer
 * ids above the database's range get a 400 stating the bound; the database files are private (0600).
 * Real SQLite in temp dirs, the real app, a real `serve` process spoken to over raw TCP.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, readFileSync, statSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { writeNow } from '../src/db/write.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { SESSION_COOKIE } from '../src/lib/session-cookie.ts'
import { parseApplyText } from '../src/modules/apply/service.ts'
import { acmeDocument, applyAcme, tokenFor, userId } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'
import { applyNow, bearer, repoRoot, request, type ServeProcess, startServe, tempDir, testApp, testEnv } from './helpers.ts'

// Budgets out of the way: one test sends a call per project route of /openapi.json (twice) with one token.
const env = testEnv(HIGH_API_BUDGETS)
const app = testApp(env)
let gina: string // admin of Globex only: her token names a project she is not even a member of
let alice: string // admin of Acme (a token for Acme)
let aliceCookie: string

const GLOBEX = `
users: [{ email: gina@globex.example, username: gina }]
projects:
  - name: Globex
    environments: [production]
    members: [{ user: gina@globex.example, role: admin }]
`

beforeAll(async () => {
  const ctx = { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }
  await applyAcme(ctx, acmeDocument())
  await applyNow(parseApplyText(GLOBEX), ctx)
  gina = (await tokenFor(env.store, env.clock, 'gina', ['all'], { project: 'Globex' })).value
  alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
  const session = await writeNow(env.store, function* () {
        return yield* createSession(env.clock, userId(env.store, 'alice'), false)
      })
  aliceCookie = `${SESSION_COOKIE}=${session.id}`
})
afterAll(() => env.cleanup())

const send = (path: string, init: Parameters<typeof request>[1] = {}) => app.handle(request(path, init))

async function errorOf(response: Response) {
  const body = (await response.json()) as { error: string; code: string; message: string }
  return { status: response.status, code: body.code, message: body.message, hasError: typeof body.error === 'string' }
}

/** Every operation of /openapi.json whose path names a project, with its parameters filled in. */
async function projectOperations(projectName: string): Promise<{ method: string; path: string }[]> {
  const document = (await (await send('/openapi.json')).json()) as { paths: Record<string, Record<string, unknown>> }
  const values: Record<string, string> = { projectName, environmentName: 'production', teamName: 'Support', workflowName: 'Refund order', id: '1' }
  return Object.entries(document.paths)
    .filter(([path]) => path.includes('{projectName}'))
    .flatMap(([path, operations]) =>
      Object.keys(operations)
        .filter((method) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
        .map((method) => ({
          method: method.toUpperCase(),
          path: path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? 'x')),
        })),
    )
}

describe('a token of another project', () => {
  test('is 403 wrong_project on every project route of /openapi.json, whether the project exists or not', async () => {
    const answers: Record<string, string> = {}
    for (const projectName of ['Acme', 'NoSuchProject']) {
      const operations = await projectOperations(projectName)
      expect(operations.length).toBeGreaterThanOrEqual(15)
      for (const { method, path } of operations) {
        const response = await send(path, { method, headers: bearer(gina), ...(method === 'GET' || method === 'DELETE' ? {} : { json: {} }) })
        const { status, code } = await errorOf(response)
        answers[`${method} ${path}`] = `${status} ${code}`
      }
    }
    const wrong = Object.entries(answers).filter(([, answer]) => answer !== '403 wrong_project')
    expect(wrong).toEqual([])
  })

  test('is 403 wrong_project when it creates a token on a project named in the body', async () => {
    const response = await send('/v1/account/tokens', { method: 'POST', headers: bearer(gina), json: { name: 'x', projectName: 'Acme' } })
    expect(await errorOf(response)).toMatchObject({ status: 403, code: 'wrong_project' })
  })

  test("a token of the right project still gets its route's own answers (404 for what is not there)", async () => {
    const response = await send('/v1/project/Acme/environment/nowhere/notes', { headers: bearer(alice) })
    expect(await errorOf(response)).toMatchObject({ status: 404 })
    expect((await send('/v1/project/Acme/api-tokens', { headers: bearer(alice) })).status).toBe(200)
  })
})

describe('logout', () => {
  test('refuses a foreign Origin (403 cross_origin) and keeps the session; this site or no Origin signs out', async () => {
    const logout = (origin?: string) => send('/auth/logout', { method: 'POST', headers: { cookie: aliceCookie, ...(origin ? { origin } : {}) } })
    expect(await errorOf(await logout('https://evil.example'))).toMatchObject({ status: 403, code: 'cross_origin' })
    expect((await send('/v1/account', { headers: { cookie: aliceCookie } })).status).toBe(200)
    expect((await logout('http://trellis.test')).status).toBe(204)
    expect((await send('/v1/account', { headers: { cookie: aliceCookie } })).status).toBe(401)
  })
})

describe('/setup and /docs', () => {
  test("send the console's security headers, and no inline script or style", async () => {
    const consolePage = await send('/login')
    const expected = Object.fromEntries(
      ['content-security-policy', 'x-content-type-options', 'referrer-policy', 'cache-control'].map((name) => [name, consolePage.headers.get(name)]),
    )
    expect(expected['content-security-policy']).toContain("script-src 'self'")
    for (const path of ['/setup', '/docs']) {
      const response = await send(path)
      expect(response.status).toBe(200)
      const headers = Object.fromEntries(Object.keys(expected).map((name) => [name, response.headers.get(name)]))
      expect({ path, headers }).toEqual({ path, headers: expected })
      const page = await response.text()
      const scripts = [...page.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)]
      expect(scripts.length).toBeGreaterThan(0)
      for (const [, attributes, content] of scripts) {
        expect({ path, attributes: /\bsrc="\/[^"]+"/.test(attributes!), content: content!.trim() }).toEqual({ path, attributes: true, content: '' })
      }
      expect(page).not.toMatch(/<style\b/i)
      expect(page).not.toMatch(/\sstyle="/i)
      expect(page).not.toMatch(/\son[a-z]+="/i)
      // Every script and style sheet the page names is served, as the right type.
      for (const [, asset] of page.matchAll(/(?:src|href)="(\/[^"]+\.(?:js|css))"/g)) {
        const served = await send(asset!)
        expect({ asset, status: served.status, nosniff: served.headers.get('x-content-type-options') }).toEqual({ asset, status: 200, nosniff: 'nosniff' })
        expect(served.headers.get('content-type')).toMatch(asset!.endsWith('.js') ? /^text\/javascript/ : /^text\/css/)
      }
    }
  })
})

describe('a method a known path does not serve', () => {
  test('is 405 with Allow listing what the path serves; Allow is exactly what answers', async () => {
    const cases: [string, string, string[]][] = [
      ['DELETE', '/healthz', ['GET', 'HEAD']],
      ['PUT', '/auth/login', ['POST']],
      ['POST', '/v1/project/Acme/api-tokens', ['GET', 'HEAD']],
      ['GET', '/v1/project/Acme/api-tokens/7', ['DELETE']],
      ['DELETE', '/v1/project/Acme/environment/production/notes/1', ['GET', 'HEAD', 'PATCH']],
      ['PATCH', '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/webhook/regenerate', ['POST']],
      ['OPTIONS', '/v1/account/tokens', ['GET', 'HEAD', 'POST']],
    ]
    for (const [method, path, allowed] of cases) {
      const response = await send(path, { method })
      const body = await errorOf(response)
      expect({ method, path, status: body.status, code: body.code, allow: response.headers.get('allow') }).toEqual({
        method,
        path,
        status: 405,
        code: 'method_not_allowed',
        allow: allowed.join(', '),
      })
      expect(body.message).toContain(`${method} ${path}`)
      expect(body.hasError).toBe(true)
      for (const other of allowed) expect({ other, path, status: (await send(path, { method: other })).status }).not.toMatchObject({ status: 405 })
    }
  })

  test('an unknown path is still 404 not_found', async () => {
    expect(await errorOf(await send('/v1/nothing-here', { method: 'DELETE' }))).toMatchObject({ status: 404, code: 'not_found' })
  })
})

const MAX_ID = Number.MAX_SAFE_INTEGER

describe('integer ids above the database range', () => {
  const bound = `must be an integer between 1 and ${Number.MAX_SAFE_INTEGER}`

  test('the bound is one exported constant: the largest integer JavaScript and SQLite agree on', async () => {
    const params = (await import('../src/http/params.ts')) as Record<string, unknown>
    expect(params.MAX_ID).toBe(Number.MAX_SAFE_INTEGER)
  })

  test('are a 400 naming the parameter and stating the bound; the bound itself is a valid id (404)', async () => {
    const auth = bearer(alice)
    const over = String(MAX_ID + 1) // 9007199254740992
    const cases: [string, string, string][] = [
      [`/v1/project/Acme/environment/production/notes/${over}`, 'GET', 'id'],
      [`/v1/project/Acme/environment/production/notes/99999999999999999999999`, 'GET', 'id'],
      [`/v1/project/Acme/api-tokens/${over}`, 'DELETE', 'id'],
      [`/v1/account/tokens/${over}`, 'DELETE', 'id'],
      [`/v1/project/Acme/admin-logs?userId=${over}`, 'GET', 'userId'],
      [`/v1/project/Acme/environment/production/activity-logs?userId=${over}`, 'GET', 'userId'],
    ]
    for (const [path, method, name] of cases) {
      const body = await errorOf(await send(path, { method, headers: auth }))
      expect({ path, status: body.status, message: body.message }).toEqual({ path, status: 400, message: expect.stringContaining(`'${name}': ${bound}`) })
    }
    for (const path of [`/v1/project/Acme/environment/production/notes/${MAX_ID}`, `/v1/project/Acme/environment/production/notes/1000000000000000`]) {
      expect(await errorOf(await send(path, { headers: auth }))).toMatchObject({ status: 404, code: 'not_found' })
    }
    const page = await send(`/v1/project/Acme/admin-logs?userId=${MAX_ID}`, { headers: auth })
    expect(page.status).toBe(200)
  })
})

describe('files on disk', () => {
  const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8)
  const databaseModes = (path: string) => ['', '-wal', '-shm'].map((suffix) => [`trellis.db${suffix}`, modeOf(path + suffix)])
  const allPrivate = [['trellis.db', '600'], ['trellis.db-wal', '600'], ['trellis.db-shm', '600']]

  test('a new data directory is 0700; the database, its -wal and -shm files are 0600', () => {
    const dir = tempDir()
    try {
      const dataDir = join(dir.path, 'new', 'data')
      const store = openStore(dataDir)
      migrate(store.sqlite)
      expect(modeOf(dataDir)).toBe('700')
      expect(databaseModes(store.path)).toEqual(allPrivate)
      store.close()
    } finally {
      dir.cleanup()
    }
  })

  test('files left readable by others are narrowed to 0600 at the next open', () => {
    const dir = tempDir()
    try {
      const first = openStore(dir.path)
      migrate(first.sqlite)
      for (const suffix of ['', '-wal', '-shm']) chmodSync(first.path + suffix, 0o644)
      const second = openStore(dir.path)
      expect(databaseModes(second.path)).toEqual(allPrivate)
      second.close()
      first.close()
    } finally {
      dir.cleanup()
    }
  })

  test("the Dockerfile makes the data directory 0700", () => {
    const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8')
    expect(dockerfile).toMatch(/chmod 0?700 \/data/)
  })
})

// ── Before routing: a real server, raw bytes over TCP ─────────────────────────

describe('what is refused before routing, by a real serve', () => {
  let dir: ReturnType<typeof tempDir>
  let server: ServeProcess

  beforeAll(async () => {
    dir = tempDir('trellis-routes-')
    server = await startServe({ dataDir: dir.path, cwd: dir.path })
  }, 30_000)
  afterAll(async () => {
    await server?.stop()
    dir?.cleanup()
  })

  /** Writes `head` as is and reads the whole answer (the server closes: every request says Connection: close). */
  function raw(head: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
    const { port } = new URL(server.url)
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = []
      const socket = connect(Number(port), '127.0.0.1', () => socket.write(head))
      socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')))
      socket.on('data', (chunk: Buffer) => chunks.push(chunk))
      socket.on('error', reject)
      socket.on('close', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        const [head = '', ...rest] = text.split('\r\n\r\n')
        const [statusLine = '', ...lines] = head.split('\r\n')
        const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
        resolve({ status: Number(statusLine.split(' ')[1] ?? 0), headers, body: rest.join('\r\n\r\n') })
      })
    })
  }
  const requestHead = (target: string, extra: string[] = [], method = 'GET') =>
    [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', ...extra, 'Connection: close', '', ''].join('\r\n')

  async function expectJsonError(answer: Awaited<ReturnType<typeof raw>>, status: number, code: string) {
    expect({ status: answer.status, type: answer.headers['content-type'] }).toEqual({ status, type: expect.stringMatching(/^application\/json/) })
    const body = JSON.parse(answer.body) as Record<string, unknown>
    expect({ error: typeof body.error, code: body.code, message: typeof body.message }).toEqual({ error: 'string', code, message: 'string' })
    return body
  }

  test('a URL over the limit is 414 uri_too_long, JSON', async () => {
    const answer = await raw(requestHead(`/healthz?${'a'.repeat(20_000)}`))
    const body = await expectJsonError(answer, 414, 'uri_too_long')
    expect(body.message).toMatch(/\d+ bytes/)
  })

  test('header fields over the limit are 431 headers_too_large, JSON', async () => {
    const big = await raw(requestHead('/healthz', [`X-Big: ${'a'.repeat(20_000)}`]))
    await expectJsonError(big, 431, 'headers_too_large')
    const many = await raw(requestHead('/healthz', Array.from({ length: 150 }, (_, i) => `X-Field-${i}: v`)))
    await expectJsonError(many, 431, 'headers_too_large')
  })

  test('a method no route serves is 405 with Allow, JSON; a known path still answers its own methods', async () => {
    const answer = await raw(requestHead('/healthz', [], 'PROPFIND'))
    await expectJsonError(answer, 405, 'method_not_allowed')
    expect(answer.headers.allow).toBe('GET, HEAD')
    const fine = await raw(requestHead('/healthz'))
    expect(fine.status).toBe(200)
  })
})

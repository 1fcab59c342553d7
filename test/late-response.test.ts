/**
 * Late large responses (src/http/late-response.ts): a response over Bun's 16 KiB cork buffer that completes after its
 * request's dispatch is re-framed as a direct stream (chunked), byte for byte the same with the same status and
 * headers; one completed inside the dispatch, a small one, HEAD's and an event stream are sent as they were. Read
 * off the wire of a real `Bun.serve` on loopback; then a crowd of large pages through a real `trellis serve`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { CORK_BUFFER_BYTES, sendLateResponsesWhole } from '../src/http/late-response.ts'
import { bearer, processEnv, type ServeProcess, startServe, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, applyAcme, tokenFor } from './support/acme.ts'
import { systemClock } from '../src/lib/clock.ts'

/** A body of `bytes` bytes, every byte value in it (not text: the bytes must come back exactly). */
function bodyOf(bytes: number): Uint8Array<ArrayBuffer> {
  const body = new Uint8Array(bytes)
  for (let i = 0; i < bytes; i++) body[i] = (i * 7 + 3) % 256
  return body
}
const LARGE = bodyOf(CORK_BUFFER_BYTES * 3 + 5)
const SMALL = bodyOf(1000)
/** JSON over 16 KiB with characters of two, three and four bytes in UTF-8 (re-framed as its UTF-8 bytes, never decoded). */
const LARGE_JSON = { data: Array.from({ length: 1200 }, (_, i) => ({ i, label: `é€😀 note ${i}` })) }
const LARGE_TEXT = JSON.stringify(LARGE_JSON)

/** Answers after a later turn of the event loop (late) or at once, as the path says. */
async function answer(request: Request): Promise<Response> {
  const url = new URL(request.url)
  if (url.searchParams.has('late')) await new Promise((resolve) => setImmediate(resolve))
  const headers = new Headers({ 'content-type': 'application/octet-stream', 'x-answer': 'kept' })
  headers.append('set-cookie', 'a=1; Path=/')
  headers.append('set-cookie', 'b=2; Path=/')
  if (url.pathname === '/text') return new Response(LARGE_TEXT, { headers: { 'content-type': 'application/json; charset=utf-8' } })
  // As Elysia answers an object: Bun holds the body as UTF-8 bytes.
  if (url.pathname === '/json') return Response.json(LARGE_JSON)
  if (url.pathname === '/events') {
    const stream = new ReadableStream<Uint8Array>({ start: (controller) => controller.enqueue(new TextEncoder().encode(': hello\n\n')) })
    return new Response(stream, { headers: { 'content-type': 'text/event-stream' } })
  }
  return new Response(url.pathname === '/large' ? LARGE : SMALL, { status: 201, headers })
}

let server: ReturnType<typeof Bun.serve>
beforeAll(() => {
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: sendLateResponsesWhole(answer) })
})
afterAll(() => server.stop(true))

/** The response head as sent (lower-cased lines) for one raw HTTP/1.1 request; reads until `done` says so. */
function rawHead(method: string, path: string, done: (received: string) => boolean = (r) => r.includes('\r\n\r\n')): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(server.port!, '127.0.0.1', () => socket.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`))
    let received = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      received += chunk
      if (done(received)) {
        socket.destroy()
        resolve(received.slice(0, received.indexOf('\r\n\r\n')).toLowerCase())
      }
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(received.slice(0, received.indexOf('\r\n\r\n')).toLowerCase()))
  })
}

describe('a large response completed after its dispatch', () => {
  test('goes out chunked, with the same bytes, status and headers (both cookies)', async () => {
    const response = await fetch(`http://127.0.0.1:${server.port}/large?late`)
    expect(response.status).toBe(201)
    expect(response.headers.get('x-answer')).toBe('kept')
    expect(response.headers.getSetCookie()).toEqual(['a=1; Path=/', 'b=2; Path=/'])
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(LARGE)
    const head = await rawHead('GET', '/large?late')
    expect(head).toContain('transfer-encoding: chunked')
    expect(head).not.toContain('content-length')
  })

  test('a text body (JSON with multi-byte characters, from a string or from Response.json) arrives as the same UTF-8 bytes', async () => {
    expect(Buffer.byteLength(LARGE_TEXT)).toBeGreaterThan(CORK_BUFFER_BYTES)
    // Each with the content type it was answered with (Bun's Response.json names its own).
    for (const [path, type] of [['/text', 'application/json; charset=utf-8'], ['/json', 'application/json;charset=utf-8']] as const) {
      const response = await fetch(`http://127.0.0.1:${server.port}${path}?late`)
      expect(response.headers.get('content-type')).toBe(type)
      expect(Buffer.from(await response.arrayBuffer()).equals(Buffer.from(LARGE_TEXT))).toBe(true)
      expect(await rawHead('GET', `${path}?late`)).toContain('transfer-encoding: chunked')
    }
  })

  test('HEAD is answered as before, without a body', async () => {
    const head = await rawHead('HEAD', '/large?late')
    expect(head).toStartWith('http/1.1 201')
    expect(head).not.toContain('transfer-encoding')
  })
})

describe('sent as they were', () => {
  test('a large response completed inside its dispatch keeps its Content-Length', async () => {
    expect(await rawHead('GET', '/large')).toContain(`content-length: ${LARGE.byteLength}`)
    expect(new Uint8Array(await (await fetch(`http://127.0.0.1:${server.port}/large`)).arrayBuffer())).toEqual(LARGE)
  })

  test('a small late response keeps its Content-Length and bytes', async () => {
    expect(await rawHead('GET', '/small?late')).toContain(`content-length: ${SMALL.byteLength}`)
    const response = await fetch(`http://127.0.0.1:${server.port}/small?late`)
    expect(response.headers.getSetCookie()).toEqual(['a=1; Path=/', 'b=2; Path=/'])
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(SMALL)
  })

  test('a late event stream is left a stream (its first event arrives, it is not read to an end)', async () => {
    const head = await rawHead('GET', '/events?late', (received) => received.includes(': hello'))
    expect(head).toContain('content-type: text/event-stream')
  })
})

describe('through a real trellis serve', () => {
  let env: TestEnv
  let serve: ServeProcess
  let admin: string
  const NOTES = '/v1/project/Acme/environment/production/notes'
  beforeAll(async () => {
    env = testEnv()
    await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
    admin = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
    serve = await startServe({
      dataDir: env.dataDir,
      cwd: env.dataDir,
      env: { ...processEnv(env), TRELLIS_SECRET: env.secret.toString('utf8'), TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_EXECUTOR_CONCURRENCY: '0' },
    })
    // 60 notes of 600 characters: a page of 100 is over 16 KiB.
    for (let i = 0; i < 60; i++) {
      const created = await fetch(`${serve.url}${NOTES}`, {
        method: 'POST',
        headers: { ...bearer(admin), 'content-type': 'application/json' },
        body: JSON.stringify({ recordId: `r-${i}`, collectionName: 'orders', teamName: 'Support', title: `note ${i}`, content: `<p>${'x'.repeat(600)}</p>` }),
      })
      expect(created.status).toBe(201)
    }
  })
  afterAll(async () => {
    await serve?.stop()
    env?.cleanup()
  })

  test('64 large pages asked at once (most started in a later turn) all arrive whole and equal', async () => {
    const one = await (await fetch(`${serve.url}${NOTES}?limit=100`, { headers: bearer(admin) })).text()
    expect(one.length).toBeGreaterThan(CORK_BUFFER_BYTES)
    const pages = await Promise.all(Array.from({ length: 64 }, () => fetch(`${serve.url}${NOTES}?limit=100`, { headers: bearer(admin) })))
    // Those started in a later turn went out re-framed (chunked), the others with their length.
    expect(pages.filter((page) => page.headers.get('content-length') === null).length).toBeGreaterThan(0)
    for (const page of pages) {
      expect(page.status).toBe(200)
      expect(page.headers.get('content-type')).toContain('application/json')
      expect(await page.text()).toBe(one)
    }
  })
})

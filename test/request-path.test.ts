/**
 * Paths and logs agree: whatever the Host header or the request target, a real `serve` process
 * routes, applies the raw-body rule and logs on one parsed path, and no log line holds a webhook URL's signature.
 * Raw TCP requests (node:net), so odd Host headers and request targets really reach the server as sent.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { join } from 'node:path'
import { redactPath } from '../src/http/request-log.ts'
import { processEnv, repoRoot, runCli, type ServeProcess, startServe, testEnv, type TestEnv } from './helpers.ts'

interface RawAnswer {
  status: number
  body: string
}

/** Sends `text` as is on a fresh connection and reads the answer until the server closes it. */
function rawRequest(port: number, text: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    let received = ''
    const timer = setTimeout(() => socket.destroy(new Error(`no answer within 5 s to ${JSON.stringify(text.split('\r\n')[0])}`)), 5_000)
    socket.on('data', (chunk) => (received += chunk.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => {
      clearTimeout(timer)
      const status = Number(received.match(/^HTTP\/1\.[01] (\d{3})/)?.[1] ?? 0)
      resolve({ status, body: received.slice(received.indexOf('\r\n\r\n') + 4) })
    })
  })
}

let server: ServeProcess
let port: number
let webhookPath: string // /v1/hooks/<payload>.<signature>
let payload: string
let signature: string
let token: string
let env: TestEnv
let recordSeq = 0

beforeAll(async () => {
  env = testEnv()
  const data = { path: env.dataDir }
  const applied = await runCli(['apply', '-f', join(repoRoot, 'examples/acme.yaml'), '--data', data.path], { env: processEnv(env) })
  expect(applied.code).toBe(0)
  const url = applied.stdout.match(/https?:\/\/\S+(\/v1\/hooks\/\S+)/)?.[1]
  if (!url) throw new Error(`apply printed no webhook URL:\n${applied.stdout}`)
  webhookPath = url
  ;[payload, signature] = url.slice('/v1/hooks/'.length).split('.') as [string, string]
  const minted = await runCli(['token', 'create', '--user', 'alice@example.com', '--project', 'Acme', '--name', 'hooks', '--scopes', 'workflows:trigger', '--data', data.path], { env: processEnv(env) })
  expect(minted.code).toBe(0)
  token = minted.stdout.trim()
  server = await startServe({ dataDir: data.path, cwd: data.path, env: { TRELLIS_EXECUTOR_CONCURRENCY: '0', ...processEnv(env) } })
  port = Number(new URL(server.url).port)
}, 30_000)

afterAll(async () => {
  await server?.stop()
  env.cleanup()
})

/** A webhook call (a fresh record each time, so a queued run never answers 409) with a non-JSON content type. */
function webhookCall(target: string, hostLine: string | null, version = '1.1'): string {
  const body = JSON.stringify({ record_id: `path-${++recordSeq}` })
  return [
    `POST ${target} HTTP/${version}`,
    ...(hostLine === null ? [] : [hostLine]),
    `Authorization: Bearer ${token}`,
    // The webhook reads its raw body whatever the type; any other route would answer 415 to text/plain.
    'Content-Type: text/plain',
    `Content-Length: ${body.length}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n')
}

/** The request log lines written since `from` (stdout offset). */
function logLinesSince(from: number): { method: string; path: string; status: number }[] {
  return server
    .stdout()
    .slice(from)
    .split('\n')
    .filter((line) => line.includes('"msg":"request"'))
    .map((line) => JSON.parse(line) as { method: string; path: string; status: number })
}

async function sendAndLog(text: string): Promise<{ answer: RawAnswer; logged: { path: string; status: number } }> {
  const from = server.stdout().length
  const answer = await rawRequest(port, text)
  const deadline = Date.now() + 2_000
  while (logLinesSince(from).length === 0 && Date.now() < deadline) await Bun.sleep(10)
  const lines = logLinesSince(from)
  expect(lines.length).toBe(1)
  return { answer, logged: lines[0]! }
}

const REDACTED_HOOK = () => `/v1/hooks/${payload}.[redacted]`

describe('odd Host headers and request targets reach the webhook on the path that is logged', () => {
  // Every one of these names the real webhook path: each must be routed to it (202), read as a raw body (not 415),
  // and logged as that path with the signature redacted.
  const spellings: [string, () => string][] = [
    ['Host: a (shorter than the router assumes)', () => webhookCall(webhookPath, 'Host: a')],
    ['Host: a:1', () => webhookCall(webhookPath, 'Host: a:1')],
    ['an empty Host', () => webhookCall(webhookPath, 'Host: ')],
    ['Host: x/y (not a host at all)', () => webhookCall(webhookPath, 'Host: x/y')],
    ['Host: x?y', () => webhookCall(webhookPath, 'Host: x?y')],
    ['no Host (HTTP/1.0)', () => webhookCall(webhookPath, null, '1.0')],
    ['an absolute-form target naming another host', () => webhookCall(`http://elsewhere.example${webhookPath}`, 'Host: a')],
    ['the separator as %2E', () => webhookCall(`/v1/hooks/${payload}%2E${signature}`, 'Host: a')],
    ['the separator as %2e', () => webhookCall(`/v1/hooks/${payload}%2e${signature}`, 'Host: trellis.test')],
    ['dot segments', () => webhookCall(`/v1/./x/../hooks/${payload}.${signature}`, 'Host: a')],
  ]
  for (const [name, build] of spellings) {
    test(name, async () => {
      const { answer, logged } = await sendAndLog(build())
      expect({ status: answer.status, body: answer.body }).toMatchObject({ status: 202 })
      expect(logged).toMatchObject({ method: 'POST', path: REDACTED_HOOK(), status: 202 })
      expect(JSON.stringify(logged)).not.toContain(signature)
    })
  }
})

describe('paths that only look like the webhook are neither routed to it nor logged with its signature', () => {
  const lookalikes: [string, () => string, number][] = [
    // With a one-letter Host the router would skip the first segment: `/xx/v1/hooks/…` would reach the webhook.
    ['a prefix segment under a short Host', () => webhookCall(`/xx${webhookPath}`, 'Host: a'), 404],
    ['a prefix segment under Host: x/y', () => webhookCall(`/xx${webhookPath}`, 'Host: x/y'), 404],
    ['a leading double slash', () => webhookCall(`/${webhookPath}`, 'Host: trellis.test'), 404],
    ['a double slash inside', () => webhookCall(`/v1//hooks/${payload}.${signature}`, 'Host: trellis.test'), 404],
    ['a double slash before the token', () => webhookCall(`/v1/hooks//${payload}.${signature}`, 'Host: trellis.test'), 404],
    ['upper case', () => webhookCall(`/V1/HOOKS/${payload}.${signature}`, 'Host: trellis.test'), 404],
    ['an encoded segment name', () => webhookCall(`/v1/%68ooks/${payload}.${signature}`, 'Host: trellis.test'), 404],
    ['a trailing dot on the segment', () => webhookCall(`/v1/hooks./${payload}.${signature}`, 'Host: trellis.test'), 404],
    ['a double-encoded separator', () => webhookCall(`/v1/hooks/${payload}%252E${signature}`, 'Host: trellis.test'), 400],
    ['a trailing dot on the token', () => webhookCall(`${webhookPath}.`, 'Host: trellis.test'), 400],
    ['an extra segment', () => webhookCall(`${webhookPath}/more`, 'Host: a'), 404],
  ]
  for (const [name, build, status] of lookalikes) {
    test(name, async () => {
      const { answer, logged } = await sendAndLog(build())
      expect({ status: answer.status, body: answer.body }).toMatchObject({ status })
      expect(logged.status).toBe(status)
      expect(JSON.stringify(logged)).not.toContain(signature)
    })
  }

  test('a request with no usable Host is answered and logged like any other (not a 500)', async () => {
    for (const host of ['Host: ', 'Host: x/y']) {
      const { answer, logged } = await sendAndLog(`GET /healthz?probe=1 HTTP/1.1\r\n${host}\r\nConnection: close\r\n\r\n`)
      expect(answer.status).toBe(200)
      expect(logged).toMatchObject({ method: 'GET', path: '/healthz', status: 200 })
    }
    const { answer, logged } = await sendAndLog(`GET /v1/project/Acme/environment/production/notes HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`)
    expect(answer.status).toBe(401) // routed to the notes API (no token), not a 404 on a shortened path
    expect(logged).toMatchObject({ path: '/v1/project/Acme/environment/production/notes', status: 401 })
  })
})

describe('redactPath', () => {
  test('hides everything after a hooks segment, however spelled, but a leading payload that decodes to a JSON object', () => {
    const cases: [string, string][] = [
      ['/v1/hooks/eyJ2IjoxfQ.c2lnbmF0dXJl', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ.c2ln.extra', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ.c2lnbmF0dXJl/', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/.c2lnbmF0dXJl', '/v1/hooks/.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ%2ec2lnbmF0dXJl', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ%2Ec2lnbmF0dXJl', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ%252Ec2lnbmF0dXJl', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/V1/HOOKS/eyJ2IjoxfQ.c2lnbmF0dXJl', '/V1/HOOKS/eyJ2IjoxfQ.[redacted]'],
      ['/v1/%68ooks/eyJ2IjoxfQ.c2lnbmF0dXJl', '/v1/%68ooks/eyJ2IjoxfQ.[redacted]'],
      ['//v1/hooks//eyJ2IjoxfQ.c2lnbmF0dXJl', '//v1/hooks//eyJ2IjoxfQ.[redacted]'],
      ['/x/v1/hooks./eyJ2IjoxfQ.c2lnbmF0dXJl/more.c2lu', '/x/v1/hooks./eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ.c2lnbmF0dXJl.', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/%65yJ2IjoxfQ.c2lnbmF0dXJl', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/no-separator', '/v1/hooks/.[redacted]'],
      // A slash instead of the dot, a signature alone, or glued to the payload: none of it is logged.
      ['/v1/hooks/eyJ2IjoxfQ/c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ%2Fc2lnbmF0dXJl', '/v1/hooks/eyJ2IjoxfQ.[redacted]'],
      ['/v1/hooks/c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl', '/v1/hooks/.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQc2lnbmF0dXJlc2lnbmF0dXJl', '/v1/hooks/.[redacted]'],
      ['/v1/hooks/eyJ2IjoxfQ', '/v1/hooks/eyJ2IjoxfQ'],
      ['/v1/workflow-runs/0190.abc', '/v1/workflow-runs/0190.abc'],
      ['/v1/project/Acme%20Corp/environment/production/notes', '/v1/project/Acme%20Corp/environment/production/notes'],
      ['/healthz', '/healthz'],
    ]
    for (const [path, logged] of cases) expect({ path, logged: redactPath(path) }).toEqual({ path, logged })
  })
})

/**
 * The overload harness: bounded floods against a real `serve`, what it answered, a watcher of its
 * /healthz and memory in another process (./server-watch.ts), and raw TCP clients that are slow on purpose.
 */
import net from 'node:net'
import { join } from 'node:path'
import type { ServeProcess } from '../helpers.ts'
import type { Watch } from './server-watch.ts'

/** One answer of a flood: status, Retry-After, body text, client-side wait. Status 0: no answer (a failed request). */
export interface Answer {
  /** The request's number in its flood. */
  i: number
  route: string
  status: number
  retryAfter: string | null
  body: string
  ms: number
}

export interface Sent {
  /** The route as /openapi.json names it (`POST /v1/hooks/{token}`): what it may answer. */
  route: string
  response: Promise<Response>
}

/**
 * A flood of `durationMs`. With `total`: that many requests spread evenly over it (request i leaves at
 * i × durationMs / total, or later when `concurrency` requests are already waiting). Without: `concurrency` clients
 * each sending its next request as soon as its last is answered, until the time is up. Resolves with every answer
 * once the last has come.
 */
export async function flood(options: { durationMs: number; total?: number; concurrency: number }, send: (i: number) => Sent): Promise<{ answers: Answer[]; elapsedMs: number }> {
  const started = performance.now()
  const answers: Answer[] = []
  const { total, durationMs } = options
  let next = 0
  const more = () => (total === undefined ? performance.now() - started < durationMs : next < total)
  const worker = async () => {
    while (more()) {
      const i = next++
      const wait = total === undefined ? 0 : started + (i * durationMs) / total - performance.now()
      if (wait > 0) await Bun.sleep(wait)
      const began = performance.now()
      const { route, response } = send(i)
      try {
        const answer = await response
        const body = await answer.text()
        answers.push({ i, route, status: answer.status, retryAfter: answer.headers.get('retry-after'), body, ms: performance.now() - began })
      } catch (error) {
        answers.push({ i, route, status: 0, retryAfter: null, body: String(error), ms: performance.now() - began })
      }
    }
  }
  await Promise.all(Array.from({ length: options.concurrency }, worker))
  return { answers, elapsedMs: performance.now() - started }
}

/** How many answers of each status, per route: `{ 'POST /v1/hooks/{token}': { 202: 31, 429: 282 } }`. */
export function statusCounts(answers: Answer[]): Record<string, Record<number, number>> {
  const counts: Record<string, Record<number, number>> = {}
  for (const { route, status } of answers) {
    const byStatus = (counts[route] ??= {})
    byStatus[status] = (byStatus[status] ?? 0) + 1
  }
  return counts
}

/**
 * What is wrong with the answers, one line each (empty: nothing): a status /openapi.json does not list for the route,
 * any 5xx but 503, a 429 or 503 without Retry-After, an error body without `error`, `code` and `message`.
 */
export function answerProblems(answers: Answer[], openapi: OpenApi): string[] {
  const problems = new Set<string>()
  for (const answer of answers) {
    const documented = documentedStatuses(openapi, answer.route)
    const at = `${answer.route} → ${answer.status}`
    if (answer.status === 0) problems.add(`${answer.route}: no answer (${answer.body})`)
    else if (!documented.includes(answer.status)) problems.add(`${at}: not documented (${documented.join(', ')}): ${answer.body.slice(0, 200)}`)
    else if (answer.status >= 500 && answer.status !== 503) problems.add(`${at}: ${answer.body.slice(0, 200)}`)
    if ((answer.status === 429 || answer.status === 503) && !(Number(answer.retryAfter) >= 1)) problems.add(`${at} without Retry-After`)
    if (answer.status >= 400) {
      const body = parsed(answer.body)
      if (!body || typeof body.error !== 'string' || typeof body.code !== 'string' || typeof body.message !== 'string') {
        problems.add(`${at}: the error body lacks error, code or message: ${answer.body.slice(0, 200)}`)
      }
    }
  }
  return [...problems]
}

function parsed(text: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(text) as unknown
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : null
  } catch {
    return null
  }
}

export interface OpenApi {
  paths: Record<string, Record<string, { responses?: Record<string, unknown> }>>
}

/** The statuses /openapi.json lists for `route` (`METHOD /path/{param}`); a route it does not know fails the test. */
export function documentedStatuses(openapi: OpenApi, route: string): number[] {
  const [method, path] = route.split(' ') as [string, string]
  const operation = openapi.paths[path]?.[method.toLowerCase()]
  if (!operation?.responses) throw new Error(`/openapi.json has no ${route}`)
  return Object.keys(operation.responses).map(Number)
}

/** The `p` quantile (0–1) of `values` (nearest rank). */
export function quantile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!
}

/** A Watch in figures: /healthz p50, p99 and max (ms), the server's peak RSS (MiB). */
export function watchFigures(watch: Watch) {
  const round = (ms: number) => Math.round(ms * 10) / 10
  return {
    healthzAsks: watch.healthzMs.length,
    healthzP50: round(quantile(watch.healthzMs, 0.5)),
    healthzP99: round(quantile(watch.healthzMs, 0.99)),
    healthzMax: round(Math.max(...watch.healthzMs)),
    rssPeakMiB: Math.round(Math.max(...watch.rssKiB) / 1024),
  }
}

/**
 * Watches `server` from another process (./server-watch.ts) while `work` runs: its /healthz every `intervalMs`, its
 * VmRSS at the same ticks. Resolves with `work`'s answer and what was watched.
 */
export async function watching<T>(server: ServeProcess, work: () => Promise<T>, intervalMs = 10): Promise<{ result: T; watch: Watch }> {
  const watcher = Bun.spawn([process.execPath, join(import.meta.dir, 'server-watch.ts'), server.url, String(server.proc.pid), String(intervalMs)], {
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'inherit',
  })
  const report = new Response(watcher.stdout).text()
  try {
    // Its first ask answered: it is watching.
    await Bun.sleep(300)
    return { result: await work(), watch: await stopWatcher() }
  } finally {
    if (watcher.exitCode === null) watcher.kill()
  }

  async function stopWatcher(): Promise<Watch> {
    await watcher.stdin.end()
    const text = await report
    if ((await watcher.exited) !== 0) throw new Error(`server-watch failed: ${text}`)
    return JSON.parse(text) as Watch
  }
}

/** A raw TCP client of the server: what it received and when the server closed the connection. */
export interface RawClient {
  socket: net.Socket
  /** Bytes received so far. */
  received(): number
  /** Resolves with the ms from the connection's start to its close by the server (or by an error). */
  closed: Promise<number>
}

/** Opens a TCP connection to `server` and hands it to `act` once connected. */
export function rawClient(server: ServeProcess, act: (socket: net.Socket) => void): RawClient {
  const { hostname, port } = new URL(server.url)
  const started = performance.now()
  const socket = net.connect(Number(port), hostname)
  let received = 0
  socket.on('data', (chunk: Buffer) => {
    received += chunk.length
  })
  socket.on('error', () => {})
  socket.on('connect', () => act(socket))
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now() - started)))
  return { socket, received: () => received, closed }
}

/** Writes `text` one byte every `everyMs` until it is all sent or the socket is closed. */
export function trickle(socket: net.Socket, text: string, everyMs: number): void {
  let at = 0
  const timer = setInterval(() => {
    if (at >= text.length || socket.destroyed || socket.writableEnded) return clearInterval(timer)
    socket.write(text[at++]!)
  }, everyMs)
  socket.on('close', () => clearInterval(timer))
}

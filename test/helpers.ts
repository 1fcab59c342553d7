/** Test helpers: a real SQLite file in a temp dir with real migrations, the real app, the real CLI. */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../src/app.ts'
import { createDeps, type DepsInput } from '../src/deps.ts'
import { type Config, loadConfig } from '../src/config.ts'
import { migrate } from '../src/db/migrate.ts'
import type { Op } from '../src/db/op.ts'
import { keepEventLoopFree, openStore, type SqliteStore } from '../src/db/open.ts'
import { commitNow } from '../src/db/write.ts'
import { type Clock, manualClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createMetrics } from '../src/lib/metrics.ts'
import { microsFromMillis, toIsoMicros } from '../src/lib/time.ts'

export const repoRoot = join(import.meta.dir, '..')

/** Every TypeScript source file under `dir` (declaration files left out), as absolute paths. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : []
  })
}

export function tempDir(prefix = 'trellis-test-'): { path: string; cleanup(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix))
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) }
}

export interface TestEnv {
  dataDir: string
  store: SqliteStore
  config: Config
  clock: ReturnType<typeof manualClock>
  secret: Buffer
  cleanup(): void
}

/** A migrated database in a fresh temp dir, its connection set up as `serve` sets up its own. */
export function testEnv(env: Record<string, string> = {}): TestEnv {
  const dir = tempDir()
  const config = loadConfig({ data: dir.path }, { TRELLIS_BASE_URL: 'http://trellis.test', ...env })
  const store = openStore(config.dataDir)
  migrate(store.sqlite)
  keepEventLoopFree(store, config.dbBusyWaitMs)
  return {
    dataDir: dir.path,
    store,
    config,
    clock: manualClock(Date.UTC(2026, 10, 21, 12, 0, 0)),
    secret: Buffer.from('test-secret-test-secret-test-secret-0123'),
    cleanup: () => {
      store.close()
      dir.cleanup()
    },
  }
}

/** The real Elysia app over a test env; call with `app.handle(new Request(...))`. */
export function testApp(env: TestEnv, overrides: Partial<DepsInput> = {}) {
  return createApp(createDeps({ config: env.config, store: env.store, clock: env.clock as Clock, logger: silentLogger, secret: env.secret, metrics: createMetrics(), ...overrides }))
}

/** The Authorization header of a call made with an application token. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

export function request(path: string, init: RequestInit & { json?: unknown } = {}): Request {
  const { json, ...rest } = init
  const headers = new Headers(rest.headers)
  if (json !== undefined) headers.set('content-type', 'application/json')
  return new Request(`http://localhost${path}`, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body })
}

/** Sends through the app and parses the JSON body; a 5XX or a body that is not JSON fails the test with both shown. */
export async function handleJson(app: { handle(r: Request): Promise<Response> }, req: Request): Promise<{ response: Response; text: string; body: unknown }> {
  const response = await app.handle(req)
  const text = await response.text()
  if (response.status >= 500) throw new Error(`${req.method} ${req.url} → ${response.status}: ${text}`)
  try {
    return { response, text, body: JSON.parse(text) as unknown }
  } catch {
    throw new Error(`${req.method} ${req.url} → ${response.status} with a non-JSON body: ${text.slice(0, 200)}`)
  }
}

export interface CliResult {
  code: number
  stdout: string
  stderr: string
}

/** Runs the CLI from source in a real process (`bun src/main.ts …`). */
export async function runCli(args: string[], options: { stdin?: string; env?: Record<string, string>; cwd?: string } = {}): Promise<CliResult> {
  const proc = Bun.spawn([process.execPath, join(repoRoot, 'src/main.ts'), ...args], {
    cwd: options.cwd ?? repoRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...options.env },
    stdin: options.stdin === undefined ? 'ignore' : new TextEncoder().encode(options.stdin),
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

/** A row count per table: used to prove that a failed command wrote nothing. */
export function tableContents(store: SqliteStore): Record<string, unknown[]> {
  const tables = store.sqlite
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    .all() as { name: string }[]
  return Object.fromEntries(tables.map(({ name }) => [name, store.sqlite.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all()]))
}

/** Polls `probe` every `pollMs` until it gives a value (not null, undefined or false); fails naming `what` after the timeout. */
export async function until<T>(what: string, probe: () => T | null | undefined | false | Promise<T | null | undefined | false>, timeoutMs = 10_000, pollMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const value = await probe()
    if (value !== null && value !== undefined && value !== false) return value
    await Bun.sleep(pollMs)
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}

/** A TCP port nobody listens on right now (the OS picks it; we release it at once). */
export function freePort(): number {
  const probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response(null) })
  const port = probe.port
  probe.stop(true)
  if (port === undefined) throw new Error('could not find a free port')
  return port
}

export interface ServeProcess {
  url: string
  proc: Bun.Subprocess<'ignore', 'pipe', 'pipe'>
  /** Everything written to stdout so far. */
  stdout(): string
  stderr(): string
  /** Waits until stdout contains `text` (or `timeoutMs` passes) and returns stdout. */
  waitForOutput(text: string, timeoutMs?: number): Promise<string>
  /** Sends `signal` and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>
}

/** Runs `trellis serve` from source in a real process on a free port; resolves once /healthz answers. */
export async function startServe(options: { dataDir: string; cwd: string; env?: Record<string, string>; timeoutMs?: number; port?: number }): Promise<ServeProcess> {
  const port = options.port ?? freePort()
  const proc = Bun.spawn([process.execPath, join(repoRoot, 'src/main.ts'), 'serve', '--port', String(port), '--data', options.dataDir], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...options.env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const out = { stdout: '', stderr: '' }
  const drain = async (stream: ReadableStream<Uint8Array>, key: 'stdout' | 'stderr') => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) out[key] += decoder.decode(chunk, { stream: true })
  }
  void drain(proc.stdout, 'stdout')
  void drain(proc.stderr, 'stderr')
  const url = `http://127.0.0.1:${port}`
  const server: ServeProcess = {
    url,
    proc,
    stdout: () => out.stdout,
    stderr: () => out.stderr,
    async waitForOutput(text, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs
      while (!out.stdout.includes(text) && Date.now() < deadline && proc.exitCode === null) await Bun.sleep(20)
      return out.stdout
    },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null) proc.kill(signal)
      const code = await proc.exited
      await Bun.sleep(20) // let the pipes drain
      return code
    },
  }
  const deadline = Date.now() + (options.timeoutMs ?? 15_000)
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) break
    try {
      if ((await fetch(`${url}/healthz`)).ok) return server
    } catch {
      // not listening yet
    }
    await Bun.sleep(50)
  }
  proc.kill('SIGKILL')
  await proc.exited
  throw new Error(`trellis serve did not become healthy on ${url}\nstdout:\n${out.stdout}\nstderr:\n${out.stderr}`)
}

/** Seeding and checks: `work` run at once in one write transaction of `store` (the CLI's way), its answer returned. */
export function runNow<T>(store: SqliteStore, work: Op<T>): T {
  return commitNow(store, () => work)
}

/** How the API renders note, message and log times: UTC with six fraction digits (README "Times"). */
export const ISO_UTC_MICROS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

/** A clock reading (ms) as the API renders a note, message or log time taken at it (the first in its millisecond). */
export const listed = (ms: number): string => toIsoMicros(microsFromMillis(ms))


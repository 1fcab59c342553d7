/** Test helpers: a real SQLite file in a temp dir with real migrations, the real app, the real CLI. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp, type AppDeps } from '../src/app.ts'
import { type Config, loadConfig } from '../src/config.ts'
import { migrate } from '../src/db/migrate.ts'
import { openStore, type Store } from '../src/db/open.ts'
import { type Clock, manualClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'

export const repoRoot = join(import.meta.dir, '..')

export function tempDir(prefix = 'trellis-test-'): { path: string; cleanup(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix))
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) }
}

export interface TestEnv {
  dataDir: string
  store: Store
  config: Config
  clock: ReturnType<typeof manualClock>
  secret: Buffer
  cleanup(): void
}

/** A migrated database in a fresh temp dir. */
export function testEnv(env: Record<string, string> = {}): TestEnv {
  const dir = tempDir()
  const config = loadConfig({ data: dir.path }, { TRELLIS_BASE_URL: 'http://trellis.test', ...env })
  const store = openStore(config.dataDir)
  migrate(store.sqlite)
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
export function testApp(env: TestEnv, overrides: Partial<AppDeps> = {}) {
  return createApp({ config: env.config, store: env.store, clock: env.clock as Clock, logger: silentLogger, secret: env.secret, ...overrides })
}

export function request(path: string, init: RequestInit & { json?: unknown } = {}): Request {
  const { json, ...rest } = init
  const headers = new Headers(rest.headers)
  if (json !== undefined) headers.set('content-type', 'application/json')
  return new Request(`http://localhost${path}`, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body })
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
export function tableContents(store: Store): Record<string, unknown[]> {
  const tables = store.sqlite
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    .all() as { name: string }[]
  return Object.fromEntries(tables.map(({ name }) => [name, store.sqlite.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all()]))
}

/**
 * `bun bench/login-flood.ts [--logins N] [--concurrency C]`: does a flood of failing password logins hold up other
 * requests? A real `serve` (from source) behind a simulated trusted proxy, each login from its own address so the
 * throttle lets every one reach the argon2 check; `/healthz` is asked one request at a time, first idle, then during
 * the flood. Prints JSON (p50 / p99 / max in ms). The server is not pinned to a core: argon2 runs on Bun's worker
 * threads, and pinning would put them on the event loop's core. Asserts nothing. `npm run bench`
 * runs it too (measureLoginFlood) with the server it measures.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { latencySummary as summary, probeHealth, repoRoot, startServer } from './procs.ts'

export interface LoginFloodOptions {
  logins: number
  concurrency: number
  idleSeconds: number
  /** The server's command line for a port and data directory; default: `bun src/main.ts serve`. */
  command?: (port: number, dataDir: string) => string[]
}

export type LoginFloodResult = Awaited<ReturnType<typeof measureLoginFlood>>

/** /healthz latency idle and during a flood of failing logins, against a fresh data directory with examples/acme.yaml. */
export async function measureLoginFlood(options: LoginFloodOptions) {
  const { logins: LOGINS, concurrency: CONCURRENCY } = options
  const command = options.command ?? ((port: number, dataDir: string) => [process.execPath, 'src/main.ts', 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir])
  const work = mkdtempSync(join(tmpdir(), 'trellis-login-flood-'))
  const dataDir = join(work, 'data')
  try {
    const apply = Bun.spawnSync([process.execPath, 'src/main.ts', 'apply', '-f', 'examples/acme.yaml', '--data', dataDir], { cwd: repoRoot, stdout: 'ignore' })
    if (apply.exitCode !== 0) throw new Error(`apply failed: ${apply.stderr.toString()}`)
    const server = await startServer({
      name: 'trellis',
      command: (port) => command(port, dataDir),
      env: { TRELLIS_TRUST_PROXY: '127.0.0.1', TRELLIS_EXECUTOR_CONCURRENCY: '0', TRELLIS_LOG_LEVEL: 'warn' },
      stderrFile: join(work, 'trellis.err'),
      pin: false,
    })
    try {
      const idleUntil = performance.now() + options.idleSeconds * 1000
      const idle = await probeHealth(server.url, () => performance.now() > idleUntil)

      let next = 0
      let flooding = true
      const statuses: Record<string, number> = {}
      const floodStarted = performance.now()
      const worker = async () => {
        while (next < LOGINS) {
          const n = next++
          const response = await fetch(`${server.url}/auth/login`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-forwarded-for': `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` },
            body: JSON.stringify({ email: n % 2 ? 'carol@example.com' : `nobody-${n}@example.com`, password: `not-the-password-${n}` }),
          })
          await response.arrayBuffer()
          statuses[response.status] = (statuses[response.status] ?? 0) + 1
        }
      }
      const during = probeHealth(server.url, () => !flooding)
      await Promise.all(Array.from({ length: CONCURRENCY }, worker))
      flooding = false
      const floodSeconds = (performance.now() - floodStarted) / 1000
      return {
        logins: LOGINS,
        concurrency: CONCURRENCY,
        statuses,
        floodSeconds: Math.round(floodSeconds * 10) / 10,
        loginsPerSecond: Math.round((LOGINS / floodSeconds) * 10) / 10,
        healthzIdle: summary(idle),
        healthzDuringFlood: summary(await during),
      }
    } finally {
      await server.stop()
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { logins: { type: 'string', default: '200' }, concurrency: { type: 'string', default: '32' } } })
  const result = await measureLoginFlood({ logins: Number(values.logins), concurrency: Number(values.concurrency), idleSeconds: 5 })
  console.log(JSON.stringify(result, null, 2))
}

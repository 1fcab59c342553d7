/** Processes of the bench: servers pinned to one core, the load generator on the other, /proc readings, the WAL watch. */
import { existsSync, readFileSync, statSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'

export const repoRoot = join(import.meta.dir, '..')

/** With two cores or more and `taskset`, servers get core 0 and the generator core 1 (as the figures). */
const taskset = availableParallelism() >= 2 ? Bun.which('taskset') : null
export const pinning = taskset ? 'servers on core 0, generator on core 1 (taskset)' : 'no pinning'
const onCore = (core: number, command: string[]) => (taskset ? [taskset, '-c', String(core), ...command] : command)

export function freePort(): number {
  const probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response(null) })
  const port = probe.port!
  probe.stop(true)
  return port
}

export interface Server {
  name: string
  url: string
  pid: number
  proc: Bun.Subprocess
  /** Milliseconds from spawn to the first 2xx (Trellis: 200) on the health path. */
  startMs: number
  stop(signal?: NodeJS.Signals): Promise<number>
}

/** Spawns a server on core 0 and waits (bounded) until `healthPath` answers 200. */
export async function startServer(options: {
  name: string
  command: (port: number) => string[]
  env?: Record<string, string>
  stderrFile: string
  healthPath?: string
  timeoutMs?: number
  pin?: boolean
}): Promise<Server> {
  const port = freePort()
  const url = `http://127.0.0.1:${port}`
  const command = options.command(port)
  const started = performance.now()
  const proc = Bun.spawn(options.pin === false ? command : onCore(0, command), {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...options.env },
    stdin: 'ignore',
    // Trellis logs one JSON line per request on stdout: produced as in production, discarded here.
    stdout: 'ignore',
    stderr: Bun.file(options.stderrFile),
  })
  const deadline = started + (options.timeoutMs ?? 30_000)
  for (;;) {
    try {
      const response = await fetch(`${url}${options.healthPath ?? '/healthz'}`)
      if (response.ok) break
    } catch {
      // not listening yet
    }
    if (proc.exitCode !== null) throw new Error(`${options.name} exited with ${proc.exitCode} before answering; see ${options.stderrFile}`)
    if (performance.now() > deadline) {
      proc.kill('SIGKILL')
      throw new Error(`${options.name} did not answer within ${options.timeoutMs ?? 30_000} ms; see ${options.stderrFile}`)
    }
    await Bun.sleep(2)
  }
  const startMs = performance.now() - started
  // With taskset the child execs the server: same pid.
  return {
    name: options.name,
    url,
    pid: proc.pid,
    proc,
    startMs,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode !== null) return proc.exitCode
      proc.kill(signal)
      const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000)
      const code = await proc.exited
      clearTimeout(timer)
      return code
    },
  }
}

/** VmRSS and VmHWM (peak) of a process, in bytes. */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024
  return { rss: kb('VmRSS'), peak: kb('VmHWM') }
}

export interface LoadSpec {
  url: string
  connections: number
  duration: number
  warmup: number
  maxRequests: number
  headers: Record<string, string>
  expect: number
  /** Requests per second for all connections together (a steady trickle instead of saturation). */
  rate?: number
  requests:
    | { kind: 'get'; paths: string[] }
    | { kind: 'unique'; paths: string[]; prefix: string }
    | { kind: 'fixed'; paths: string[]; recordIds: string[] }
}

export interface LoadResult {
  generator: string
  connections: number
  duration: number
  responses: number
  unanswered: number
  rps: number
  latency: { p50: number; p90: number; p99: number; max: number; mean: number }
  statusCodes: Record<string, number>
  unexpected: number
  non2xx: number
  errors: number
  timeouts: number
  bytesPerResponse: number
}

/** Runs autocannon in its own Node process on core 1; bounded by duration, request count and a kill timer. */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const proc = Bun.spawn(onCore(1, ['node', join(import.meta.dir, 'loadgen.mjs'), JSON.stringify(spec)]), {
    cwd: repoRoot,
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const killer = setTimeout(() => proc.kill('SIGKILL'), (spec.warmup + spec.duration + 30) * 1000)
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  clearTimeout(killer)
  if (code !== 0) throw new Error(`load generator exited with ${code}: ${err.slice(0, 2000)}`)
  return JSON.parse(out.trim().split('\n').pop()!) as LoadResult
}

/** Samples the size of the `-wal` file while a phase runs; `max` since the last `reset`. */
export class WalWatch {
  private timer: ReturnType<typeof setInterval>
  max = 0
  overall = 0

  constructor(private readonly walPath: string) {
    this.timer = setInterval(() => this.sample(), 100)
  }

  sample(): number {
    const size = existsSync(this.walPath) ? statSync(this.walPath).size : 0
    this.max = Math.max(this.max, size)
    this.overall = Math.max(this.overall, size)
    return size
  }

  reset(): void {
    this.max = this.sample()
  }

  stop(): void {
    clearInterval(this.timer)
  }
}

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

/** Processes of the bench: servers pinned to one core, the load generator on the other, /proc readings, the WAL watch. */
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'

export const repoRoot = join(import.meta.dir, '..')

/** A bench script's `--name value` argument, or `fallback` when it is not given. */
export function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback
}

/** A line of a bench script's progress on stderr, after the time of day (UTC). */
export const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`)
/** The rate limits a benched server runs with: raised by configuration so that the limiter never answers 429, but still on the request path. */
export const RAISED_RATE_LIMITS = {
  TRELLIS_API_RATE_PER_MIN: '1000000000',
  TRELLIS_API_RATE_PER_HOUR: '1000000000',
  TRELLIS_API_RATE_PER_DAY: '1000000000',
  TRELLIS_WEBHOOK_RATE_PER_MIN: '1000000000',
}

/** With two cores or more and `taskset`, servers get core 0 and the generator core 1. */
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
/**
 * A process's resident set (VmRSS), its peak, and the resident set's two parts: anonymous (its heap, stacks, JIT
 * code) and file-backed (the pages of its binary and libraries it has mapped; clean, shared with the page cache, and
 * more of them mapped the more of the binary the page cache holds).
 */
export function memoryOf(pid: number): { rss: number; peak: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024
  return { rss: kb('VmRSS'), peak: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem') }
}

/**
 * Drops `file`'s pages from the page cache (GNU dd's `iflag=nocache count=0`: posix_fadvise DONTNEED, no privilege
 * needed), so that the next process mapping it maps only the pages it touches and their read-ahead. A binary just
 * written is wholly in the page cache, and the kernel maps the cached pages around each fault too: the same binary's
 * file-backed RSS read 34.6 MB of code freshly built and 30.2 MB once evicted, any later start staying at 30.2 (it
 * caches only what it read). Evicting first makes the figure the binary's own, not its build time's.
 */
export function evictFromPageCache(file: string): void {
  const dd = Bun.spawnSync(['dd', `if=${file}`, 'iflag=nocache', 'count=0', 'status=none'])
  if (dd.exitCode !== 0) throw new Error(`dd could not evict ${file} from the page cache: ${dd.stderr.toString()}`)
}

export interface LoadSpec {
  url: string
  connections: number
  /** Seconds measured, after `warmup` seconds of the same load in a separate, unmeasured wrk run. */
  duration: number
  warmup: number
  headers: Record<string, string>
  /** The status every response should have; any other is counted in `unexpected`. */
  expect: number
  /** The server's pid: its CPU time over the measured run is read from /proc. */
  serverPid?: number
  requests:
    | { kind: 'get'; paths: string[] }
    | { kind: 'unique'; paths: string[]; prefix: string }
    | { kind: 'fixed'; paths: string[]; recordIds: string[] }
    | { kind: 'once'; paths: OnceShare; body: string; method?: 'POST' | 'PATCH' }
}

/**
 * Paths each requested once over the whole bench, whichever run sends them (the decision scenario's tasks: a second
 * decision on a task is a 409). A run takes a share of the paths no run took yet and tells what it sent (`took`).
 */
export class PathsOnce {
  /** Every path before this one was taken (or skipped by runs at once). */
  next = 0
  constructor(readonly paths: readonly string[]) {}

  /** `runs` disjoint shares of the paths left, for runs at once: share i takes the i-th path left, then every runs-th after it. */
  share(runs = 1): OnceShare[] {
    return Array.from({ length: runs }, (_, i) => new OnceShare(this, this.next + i, runs))
  }
}

/** One run's share of a PathsOnce (its runs one after another take it on: a warm-up, then the measured run). */
export class OnceShare {
  private sent = 0
  constructor(readonly pool: PathsOnce, private readonly first: number, private readonly stride: number) {}

  /** The share's paths not sent yet, in order. */
  left(): string[] {
    const out: string[] = []
    for (let i = this.first + this.sent * this.stride; i < this.pool.paths.length; i += this.stride) out.push(this.pool.paths[i]!)
    return out
  }

  /** `count` more of the share's paths were used: no later share takes one up to the last of them (other shares' included). */
  took(count: number): void {
    if (count === 0) return
    this.sent += count
    this.pool.next = Math.max(this.pool.next, this.first + (this.sent - 1) * this.stride + 1)
  }
}

/** The requests of wrk runs made at once, one each: the paths of a `once` kind shared out between them, the others as asked. */
export function requestsAtOnce(requests: LoadSpec['requests'][]): LoadSpec['requests'][] {
  const first = requests[0]
  if (first?.kind !== 'once') return requests
  const shares = first.paths.pool.share(requests.length)
  return requests.map((r, i) => ({ ...(r as typeof first), paths: shares[i]! }))
}

export interface LoadResult {
  generator: string
  connections: number
  /** Seconds, as wrk measured its run. */
  duration: number
  responses: number
  /** Requests still in flight when the run ended (a starved server leaves them all unanswered). */
  unanswered: number
  rps: number
  /** Milliseconds (wrk's histogram, microsecond resolution). */
  latency: { p50: number; p90: number; p99: number; max: number; mean: number }
  statusCodes: Record<string, number>
  /** Responses with another status than `expect`, plus socket errors and responses slower than the timeout. */
  unexpected: number
  errors: { connect: number; read: number; write: number; timeout: number }
  bytesPerResponse: number
  /**
   * CPU time (user + system, all threads) over the measured run, per response and as a share of one core; `otherCores`
   * is what the rest of the machine (other processes, this bench's own) kept busy meanwhile, in cores.
   */
  cpu: { serverPerRequestUs: number | null; serverBusy: number | null; generatorPerRequestUs: number; generatorBusy: number; otherCores: number | null }
}

interface WrkSummary {
  durationUs: number
  requests: number
  bytes: number
  sent: number
  /** Requests the script made, the one wrk asks for before starting and never sends included (the `once` paths used). */
  made: number
  statuses: Record<string, number>
  errors: LoadResult['errors']
  latencyUs: LoadResult['latency']
}

const wrkScript = join(import.meta.dir, 'wrk.lua')
/** Clock ticks per second of /proc/<pid>/stat's utime and stime. */
const clockTicks = Number(Bun.spawnSync(['getconf', 'CLK_TCK']).stdout.toString().trim()) || 100

/** The load generator's path; the bench stops before it starts when wrk is missing. */
function wrkPath(): string {
  const wrk = Bun.which('wrk')
  if (!wrk) throw new Error('wrk not found: the bench needs it (Debian: apt-get install wrk)')
  return wrk
}

/** `wrk --version`'s first words (it prints them and exits 1); throws when wrk is missing. */
export function generatorVersion(): string {
  const out = Bun.spawnSync([wrkPath(), '--version']).stdout.toString()
  return /^wrk \S+/.exec(out)?.[0] ?? 'wrk'
}

/** A meter of the CPU time `servers` spend from now on (every one's, in µs): call it to read what they spent since. */
export function cpuSince(servers: readonly Pick<Server, 'pid'>[]): () => number {
  const before = servers.map((server) => cpuTimeUs(server.pid))
  return () => servers.reduce((sum, server, i) => sum + cpuTimeUs(server.pid) - before[i]!, 0)
}

/** User + system CPU time of a process (all its threads) in microseconds, from /proc/<pid>/stat. */
export function cpuTimeUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks
}

/** CPU time every core of the machine spent busy (not idle, not waiting on I/O), in microseconds, from /proc/stat. */
export function machineBusyUs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!
  // cpu user nice system idle iowait irq softirq steal …
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number)
  return (((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 1e6) / clockTicks
}

let onceFiles = 0

/**
 * wrk's script arguments for one run: the kind, the record-id prefix and the paths (with record ids, `fixed`); for
 * `once`, a file of the share's paths left (too many for a command line) and the body, the file removed by `done`.
 */
function scriptArgs(requests: LoadSpec['requests'], phase: string): { args: string[]; done(): void } {
  const done = () => {}
  if (requests.kind === 'get') return { args: ['get', '', ...requests.paths], done }
  if (requests.kind === 'unique') return { args: ['unique', `${requests.prefix}-${phase}`, ...requests.paths], done }
  if (requests.kind === 'once') {
    const left = requests.paths.left()
    // None left: the last one again, each answer then unexpected (the report shows it), rather than no run at all.
    const paths = left.length > 0 ? left : requests.paths.pool.paths.slice(-1)
    const file = join(tmpdir(), `trellis-wrk-once-${process.pid}-${onceFiles++}.txt`)
    writeFileSync(file, `${paths.join('\n')}\n`)
    return { args: ['once', file, requests.body, requests.method ?? 'POST'], done: () => rmSync(file, { force: true }) }
  }
  if (requests.paths.length !== requests.recordIds.length) throw new Error('fixed requests pair each path with one record id')
  return { args: ['fixed', '', ...requests.paths.flatMap((path, i) => [path, requests.recordIds[i]!])], done }
}

/** One wrk run on core 1 (one thread), bounded by its duration and a kill timer; its summary and its own CPU time. */
async function runWrk(spec: LoadSpec, seconds: number, phase: string): Promise<{ summary: WrkSummary; generatorUs: number }> {
  const headers = Object.entries(spec.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`])
  const script = scriptArgs(spec.requests, phase)
  // One thread: the `once` kind walks its paths in one script state.
  const command = [wrkPath(), '-t1', `-c${spec.connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', wrkScript, ...headers, spec.url, '--', ...script.args]
  try {
    const proc = Bun.spawn(onCore(1, command), { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
    const killer = setTimeout(() => proc.kill('SIGKILL'), (seconds + 30) * 1000)
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
    clearTimeout(killer)
    const line = out.split('\n').find((l) => l.startsWith('wrk-json '))
    if (code !== 0 || !line) throw new Error(`wrk exited with ${code}: ${err.slice(0, 2000)}${out.slice(0, 2000)}`)
    // With taskset the child execs wrk: the rusage of the pid is wrk's own.
    const generatorUs = Number(proc.resourceUsage()?.cpuTime.total ?? 0)
    const summary = JSON.parse(line.slice('wrk-json '.length)) as WrkSummary
    if (spec.requests.kind === 'once') spec.requests.paths.took(summary.made)
    return { summary, generatorUs }
  } finally {
    script.done()
  }
}

/** Runs wrk on core 1: a warm-up run, then the measured run, with the server's and wrk's CPU time over it. */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  if (spec.warmup > 0) await runWrk(spec, spec.warmup, `w${spec.connections}`)
  const serverBefore = spec.serverPid === undefined ? null : cpuTimeUs(spec.serverPid)
  const machineBefore = machineBusyUs()
  const { summary: s, generatorUs } = await runWrk(spec, spec.duration, `m${spec.connections}`)
  const serverUs = serverBefore === null ? null : cpuTimeUs(spec.serverPid!) - serverBefore
  const machineUs = machineBusyUs() - machineBefore
  const responses = Object.values(s.statuses).reduce((a, b) => a + b, 0)
  const seconds = s.durationUs / 1e6
  const perResponse = (us: number) => (responses > 0 ? us / responses : 0)
  const ms = (us: number) => Math.round(us) / 1000
  const errors = s.errors.connect + s.errors.read + s.errors.write + s.errors.timeout
  return {
    generator: 'wrk',
    connections: spec.connections,
    duration: seconds,
    responses,
    unanswered: Math.max(0, s.sent - responses),
    rps: responses / seconds,
    latency: { p50: ms(s.latencyUs.p50), p90: ms(s.latencyUs.p90), p99: ms(s.latencyUs.p99), max: ms(s.latencyUs.max), mean: ms(s.latencyUs.mean) },
    statusCodes: s.statuses,
    unexpected: responses - (s.statuses[String(spec.expect)] ?? 0) + errors,
    errors: s.errors,
    bytesPerResponse: responses > 0 ? s.bytes / responses : 0,
    cpu: {
      serverPerRequestUs: serverUs === null ? null : perResponse(serverUs),
      serverBusy: serverUs === null ? null : serverUs / s.durationUs,
      generatorPerRequestUs: perResponse(generatorUs),
      generatorBusy: generatorUs / s.durationUs,
      otherCores: serverUs === null ? null : Math.max(0, machineUs - serverUs - generatorUs) / s.durationUs,
    },
  }
}

/** POST {"record_id": …} to a path, as the webhook scenarios do. */
export function post(base: string, path: string, recordId: string, headers: Record<string, string>, signal?: AbortSignal) {
  return fetch(`${base}${path}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ record_id: recordId }), signal })
}

/** Samples the size of the `-wal` file while a phase runs; `max` since the last `reset`. */
export class WalWatch {
  private timer: ReturnType<typeof setInterval>
  max = 0
  overall = 0

  constructor(private readonly walPath: string) {
    this.timer = setInterval(() => this.sample(), 100)
  }

  /** While set, samples are read but not kept: the bench's own writes (not the server's) are under way. */
  paused = false

  sample(): number {
    const size = existsSync(this.walPath) ? statSync(this.walPath).size : 0
    if (this.paused) return size
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

/** p50, p99 and max of latency samples (ms), to a tenth. */
export function latencySummary(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b)
  const ms = (p: number) => Math.round(percentile(sorted, p) * 10) / 10
  return { requests: sorted.length, p50: ms(50), p99: ms(99), max: ms(100) }
}

/** /healthz, one request at a time (10 ms apart), until `until()` says stop: each answer's latency in ms. */
export async function probeHealth(url: string, until: () => boolean): Promise<number[]> {
  const samples: number[] = []
  while (!until()) {
    const started = performance.now()
    const response = await fetch(`${url}/healthz`)
    await response.arrayBuffer()
    if (response.status !== 200) throw new Error(`/healthz answered ${response.status}`)
    samples.push(performance.now() - started)
    await Bun.sleep(10)
  }
  return samples
}

/** CPU µs of every process of the cluster, those that ended included (the postmaster's waited-for children). */
export function clusterCpuUs(dataDir: string): number {
  const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n', 1)[0])
  const fieldsOf = (pid: number) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  }
  const own = fieldsOf(postmaster)
  let total = ((Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14])) * 1e6) / clockTicks
  for (const name of readdirSync('/proc')) {
    const pid = Number(name)
    if (!Number.isInteger(pid) || pid === postmaster) continue
    try {
      if (Number(fieldsOf(pid)[1]) === postmaster) total += cpuTimeUs(pid)
    } catch {
      // ended meanwhile: counted in the postmaster's children's time
    }
  }
  return total
}

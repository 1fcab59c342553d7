/**
 * `npm run bench [-- --quick] [--scenarios id,id] [--duration S]`: Trellis against the machine's ceiling, in one run.
 * Seeds a database in a temp dir, measures cold start, runs every HTTP scenario against baseline (b) and Trellis
 * in turn at 64 and at 8 connections (baseline (a) at both), with `wrk` as the load generator and the CPU time of
 * server and generator per request, then the executor, and prints the tables (stdout) with each target (and the
 * further targets) next to its figure, PASS/MISS, then the full report with its method, and writes
 * bench/results/<date>-<commit>[-quick].json, commit and verdicts included. Progress goes to stderr. Asserts no
 * thresholds. `--scenarios` runs those HTTP scenarios alone (on PostgreSQL too, those of its phase), prints their
 * tables and writes no result; `--duration` sets the seconds measured per run.
 */
import { Database } from 'bun:sqlite'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { availableParallelism, release, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { measureLoginFlood } from './login-flood.ts'
import { measureScheduleTick } from './schedule-tick.ts'
import { type EventStreamsResult, measureEventStreams } from './event-streams.ts'
import { createdAtLeadMs, LEFT_ACTIVE, measureExecutor } from './executor.ts'
import { evictFromPageCache, generatorVersion, type LoadResult, type LoadSpec, memoryOf, pinning, post, RAISED_RATE_LIMITS, repoRoot, runLoad, type Server, startServer, WalWatch } from './procs.ts'
import { type BenchResults, earlierTargetChecks, markdownTables, fullReport, postgresTables, scenarioTable, type ScenarioResult, type ScenarioRun, targetChecks, type TracingResult } from './report.ts'
import { busyRecordIds, type Scenario, scenarios } from './scenarios.ts'
import { seedDatabase } from './seed.ts'
import { BENCH_TASKS } from './seed-tasks.ts'
import { measurePostgres, POSTGRES_SCENARIOS, type PostgresResult } from './postgres.ts'
import { postgresInstalled } from '../test/support/postgres-cluster.ts'

const { values: flags } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, keep: { type: 'boolean', default: false }, scenarios: { type: 'string' }, duration: { type: 'string' } },
})
const { quick, keep } = flags
/** The HTTP scenarios asked for alone (`--scenarios`), or null: the whole bench. */
const only = flags.scenarios?.split(',') ?? null
const settings = quick
  ? { notes: 100_000, typedRecords: 100_000, duration: 1, warmup: 0, executorRuns: 2_000, busySeconds: 2, steadySeconds: 1, coldStarts: 3, floodLogins: 64, postgresExecutorRuns: 500, scheduleRecords: 2_000 }
  : { notes: 1_000_000, typedRecords: 1_000_000, duration: 10, warmup: 1, executorRuns: 50_000, busySeconds: 5, steadySeconds: 3, coldStarts: 5, floodLogins: 200, postgresExecutorRuns: 10_000, scheduleRecords: 10_000 }
if (flags.duration !== undefined) {
  settings.duration = Number(flags.duration)
  if (!(settings.duration > 0)) throw new Error(`--duration ${flags.duration}: seconds, more than 0`)
}
/** Every HTTP scenario at each: saturation (throughput; p99 is queueing there) and a moderate load (latency). */
const CONNECTIONS = [64, 8]
/** Idle run event streams held open at once. */
const EVENT_STREAMS = 1000

const benchStarted = performance.now()
const log = (line: string) => process.stderr.write(`${line}\n`)
const elapsed = () => `${((performance.now() - benchStarted) / 1000).toFixed(0)} s`
const work = mkdtempSync(join(tmpdir(), 'trellis-bench-'))
const dataDir = join(work, 'data')
const servers: Server[] = []

async function main() {
  const generator = generatorVersion()
  // The commit measured, read before the binary is built: a commit made while the bench runs is not this run's.
  const commit = await gitDescribe()
  log(`trellis bench (${quick ? 'quick' : 'full'}) in ${work}, load generator ${generator}`)

  // ── Seed ────────────────────────────────────────────────────────────────────
  log(`[${elapsed()}] seeding ${settings.notes.toLocaleString('en-US')} notes`)
  const seed = seedDatabase(dataDir, { notes: settings.notes, records: 10_000, users: 1_000, workflows: 100, tasks: BENCH_TASKS, typedRecords: settings.typedRecords }, log)
  const databaseBytes = statSync(seed.dbPath).size
  log(`[${elapsed()}] seeded in ${(seed.timings.totalMs / 1000).toFixed(1)} s: ${Math.round(seed.notesPerSecond)} notes/s, ${(databaseBytes / 1e6).toFixed(0)} MB`)
  const wal = new WalWatch(`${seed.dbPath}-wal`)

  // ── The binary ──────────────────────────────────────────────────────────────
  const binary = await ensureBinary()
  const trellisCommand = (port: number) =>
    binary
      ? [binary, 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir]
      : [process.execPath, 'src/main.ts', 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir]
  const serverName = binary ? 'the compiled binary `dist/trellis serve`' : '`bun src/main.ts serve` (no binary)'
  const trellisEnv = (executor: boolean): Record<string, string> => ({
    ...RAISED_RATE_LIMITS,
    ...(executor ? {} : { TRELLIS_EXECUTOR_CONCURRENCY: '0' }),
  })
  const startTrellis = async (executor: boolean) => {
    const server = await startServer({ name: 'trellis', command: trellisCommand, env: trellisEnv(executor), stderrFile: join(work, `trellis-${servers.length}.err`) })
    servers.push(server)
    return server
  }

  // ── Cold start on the seeded database ───────────────────────────────────────
  const coldStartMs: number[] = []
  for (let i = 0; i < (only ? 0 : settings.coldStarts); i++) {
    const server = await startServer({ name: 'trellis', command: trellisCommand, stderrFile: join(work, `cold-${i}.err`), pin: true })
    coldStartMs.push(server.startMs)
    await server.stop()
  }
  const coldStartMedianMs = [...coldStartMs].sort((a, b) => a - b)[Math.floor(coldStartMs.length / 2)] ?? 0
  if (!only) log(`[${elapsed()}] cold start: ${coldStartMs.map((ms) => ms.toFixed(0)).join(', ')} ms`)

  // ── HTTP scenarios: (a) once, then (b) and Trellis in turn ─────────────────
  const bare = only ? null : await startServer({ name: 'bare', command: (port) => [process.execPath, 'bench/baselines/bare.ts', String(port)], stderrFile: join(work, 'bare.err') })
  if (bare) servers.push(bare)
  const minimal = await startServer({
    name: 'minimal',
    command: (port) => [process.execPath, 'bench/baselines/minimal.ts', String(port), seed.dbPath],
    stderrFile: join(work, 'minimal.err'),
  })
  servers.push(minimal)
  // Idle RSS of a start whose binary is not in the page cache (the cold starts above mapped pages of it, as a freshly
  // built binary's whole file is cached): what it touches, whenever it was built (bench/procs.ts evictFromPageCache).
  if (binary) evictFromPageCache(binary)
  const trellis = await startTrellis(false)
  await Bun.sleep(1000)
  const idle = memoryOf(trellis.pid)
  const auth = { authorization: `Bearer ${seed.adminToken}` }
  const known = scenarios(seed)
  for (const id of only ?? []) if (!known.some((s) => s.id === id)) throw new Error(`unknown scenario ${id}: ${known.map((s) => s.id).join(', ')}`)
  const all = only ? known.filter((s) => only.includes(s.id)) : known
  const headersOf = (scenario: Scenario) => scenario.headers ?? auth

  // One active run per webhook, through Trellis: the 409 scenario posts these records again.
  const busy = busyRecordIds(seed)
  for (let i = 0; i < (all.some((s) => s.id === 'webhook-409') ? seed.webhookPaths.length : 0); i++) {
    const response = await post(trellis.url, seed.webhookPaths[i]!, busy[i]!, auth)
    if (response.status !== 202) throw new Error(`setting up the 409 scenario: ${response.status} ${await response.text()}`)
  }
  for (const scenario of all) {
    await checkOnce(scenario, minimal, 'minimal', headersOf(scenario))
    await checkOnce(scenario, trellis, 'trellis', headersOf(scenario))
  }

  /** The first run of a scenario on a server warms it up; the runs after it at other connection counts do not. */
  const load = (server: Server, scenario: Scenario, target: string, connections: number, warm: boolean): Promise<LoadResult> =>
    runLoad({
      url: server.url,
      connections,
      duration: settings.duration,
      warmup: warm ? settings.warmup : 0,
      serverPid: server.pid,
      headers: headersOf(scenario),
      expect: scenario.expect,
      requests: scenario.requests(target),
    })
  const bareResults: LoadResult[] = []
  for (const [i, connections] of (bare ? CONNECTIONS : []).entries()) {
    log(`[${elapsed()}] (a) bare Bun.serve, ${connections} connections`)
    bareResults.push(await load(bare!, all[0]!, 'bare', connections, i === 0))
    log(`  ${summary(bareResults[i]!)}`)
  }
  await bare?.stop()

  const results: ScenarioResult[] = []
  const webhookCreatedAtLeadMs: number[] = []
  let peakRssWebhookBytes = 0
  for (const scenario of all) {
    wal.reset()
    const runs: ScenarioRun[] = []
    for (const [i, connections] of CONNECTIONS.entries()) {
      log(`[${elapsed()}] ${scenario.id}, ${connections} connections`)
      const minimalResult = await load(minimal, scenario, 'minimal', connections, i === 0)
      log(`  (b)      ${summary(minimalResult)}`)
      const trellisResult = await load(trellis, scenario, 'trellis', connections, i === 0)
      log(`  Trellis  ${summary(trellisResult)}  ratio ${(trellisResult.rps / minimalResult.rps).toFixed(2)}`)
      if (scenario.id === 'webhook-202') {
        peakRssWebhookBytes = memoryOf(trellis.pid).peak
        webhookCreatedAtLeadMs.push(await createdAtLeadMs(trellis.url, seed.adminToken, seed.project))
      }
      runs.push({ connections, trellis: trellisResult, minimal: minimalResult })
    }
    results.push({ id: scenario.id, title: scenario.title, expect: scenario.expect, runs, walMaxBytes: wal.max })
  }
  await Bun.sleep(1000)
  const afterLoad = memoryOf(trellis.pid)
  await minimal.stop()
  await trellis.stop()

  /** The PostgreSQL phase (when installed) on these scenarios, draining `drainRuns` runs (none: no drain). */
  const onPostgres = async (drainRuns: number): Promise<PostgresResult | null> => {
    if (!postgresInstalled) {
      log(`[${elapsed()}] PostgreSQL: not installed (apt-get install postgresql), its phase is skipped`)
      return null
    }
    if (drainRuns === 0 && !all.some((s) => POSTGRES_SCENARIOS.includes(s.id))) return null
    log(`[${elapsed()}] PostgreSQL: 1 and 3 instances`)
    return await measurePostgres({
      seed,
      dataDir,
      cli: binary ? [binary] : [process.execPath, 'src/main.ts'],
      command: trellisCommand,
      env: trellisEnv,
      scenarios: all,
      connections: CONNECTIONS[0]!,
      duration: settings.duration,
      warmup: settings.warmup,
      executorRuns: drainRuns,
      headers: auth,
      stderrFile: (name) => join(work, `${name}.err`),
      log,
    })
  }
  if (only) {
    const settingsUsed = { connections: CONNECTIONS, durationSeconds: settings.duration, warmupSeconds: settings.warmup }
    const postgres = await onPostgres(0)
    // The WAL's watch stops here too: its timer would keep the process alive after the last line.
    wal.stop()
    log(`[${elapsed()}] done (--scenarios: no other phase, no result file)`)
    const postgresLines = postgres ? ['', ...postgresTables({ settings: settingsUsed, scenarios: results, executor: null, postgres })] : []
    process.stdout.write(`${[...scenarioTable(results), ...postgresLines].join('\n')}\n`)
    return
  }

  // ── Executor ────────────────────────────────────────────────────────────────
  log(`[${elapsed()}] executor: ${settings.executorRuns.toLocaleString('en-US')} three-step runs`)
  const executor = await measureExecutor({
    seed,
    runs: settings.executorRuns,
    busySeconds: settings.busySeconds,
    steadyRate: 100,
    steadySeconds: settings.steadySeconds,
    timeoutMs: 60_000,
    connections: CONNECTIONS[0]!,
    notesPath: `/v1/project/${seed.project}/environment/production/notes?limit=10`,
    startTrellis: () => startTrellis(true),
    wal,
    log,
  })
  log(
    `  ${Math.round(executor.runsPerSecond)} runs/s, queue latency p50 ${Math.round(executor.burstQueueLatencyMs.p50)} ms, ` +
      `notes while busy: ${summary(executor.notesWhileBusy)}`,
  )
  wal.stop()

  // ── Run event streams: what 1,000 idle streams cost ────────────────────────
  log(`[${elapsed()}] event streams: ${EVENT_STREAMS.toLocaleString('en-US')} idle streams, heartbeats every second`)
  const streamsServer = await startServer({
    name: 'trellis',
    command: trellisCommand,
    env: { ...trellisEnv(true), TRELLIS_EVENT_STREAMS_PER_USER: String(EVENT_STREAMS), TRELLIS_EVENT_HEARTBEAT_SECONDS: '1' },
    stderrFile: join(work, 'event-streams.err'),
  })
  servers.push(streamsServer)
  // The streams are measured idle, on their heartbeats: the runs the executor phase left (it stops at its timeout,
  // drained or not) finish first, or their events would keep every stream busy.
  await untilNoActiveRuns(seed.dbPath, 180_000)
  const eventStreams: EventStreamsResult = await measureEventStreams({
    server: streamsServer,
    seed,
    streams: EVENT_STREAMS,
    heartbeatSeconds: 1,
    idleSeconds: quick ? 3 : 10,
    log,
  })
  await streamsServer.stop()

  // ── Login flood: does argon2 hold up other requests? ───────────────────────
  log(`[${elapsed()}] login flood: ${settings.floodLogins} failing logins, 32 at a time, /healthz beside them`)
  const loginFlood = await measureLoginFlood({
    logins: settings.floodLogins,
    concurrency: 32,
    idleSeconds: settings.steadySeconds,
    command: (port, floodData) => trellisCommand(port).map((arg) => (arg === dataDir ? floodData : arg)),
  })
  log(`  /healthz p99 ${loginFlood.healthzDuringFlood.p99} ms during the flood (idle ${loginFlood.healthzIdle.p99} ms), ${loginFlood.loginsPerSecond} logins/s`)

  // ── A schedule's tick over many records: does it hold up other requests? ──
  log(`[${elapsed()}] schedule tick: one tick over ${settings.scheduleRecords.toLocaleString('en-US')} records, /healthz beside it`)
  const scheduleTick = await measureScheduleTick({
    records: settings.scheduleRecords,
    idleSeconds: quick ? 2 : 5,
    command: (port, tickData) => trellisCommand(port).map((arg) => (arg === dataDir ? tickData : arg)),
  })
  log(`  /healthz p99 ${scheduleTick.healthzDuringTick.p99} ms during the tick (${scheduleTick.tickSeconds} s), ${scheduleTick.healthzDuringDrain.p99} ms while its runs drain (idle ${scheduleTick.healthzIdle.p99} ms)`)

  // ── Tracing: what OpenTelemetry costs the trigger and the executor when on (full runs only) ──
  const tracing = quick ? undefined : await measureTracing()

  // ── PostgreSQL: the same binary on one and on three instances ─────────────
  const postgres = await onPostgres(settings.postgresExecutorRuns)

  const report: BenchResults = {
    date: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    command: quick ? 'npm run bench -- --quick' : 'npm run bench',
    machine: {
      nproc: availableParallelism(),
      cpu: /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      kernel: release(),
      bun: Bun.version,
      pinning,
    },
    generator,
    commit,
    server: serverName,
    settings: { connections: CONNECTIONS, durationSeconds: settings.duration, warmupSeconds: settings.warmup },
    seed: {
      notes: seed.notes,
      messages: seed.messages,
      activityEntries: seed.activityEntries,
      records: 10_000,
      users: 1_000,
      workflows: seed.workflowIds.length,
      seconds: seed.timings.totalMs / 1000,
      notesPerSecond: seed.notesPerSecond,
      rowsPerSecond: seed.rowsPerSecond,
      databaseBytes,
      bytesPerNote: databaseBytes / seed.notes,
      ...(seed.tasks ? { tasks: { tasks: seed.tasks.tasks, open: seed.tasks.open, assignees: seed.tasks.assignees, decisions: seed.tasks.decisions, seconds: seed.tasks.seconds } } : {}),
    },
    bare: bareResults,
    scenarios: results,
    executor,
    eventStreams,
    loginFlood,
    scheduleTick,
    ...(tracing ? { tracing } : {}),
    footprint: {
      coldStartMs,
      coldStartMedianMs,
      coldStartOf: binary ? 'binary' : 'source',
      idleRssBytes: idle.rss,
      idleRssAnonBytes: idle.anon,
      idleRssFileBytes: idle.file,
      peakRssWebhookBytes,
      rssAfterLoadBytes: afterLoad.rss,
      peakRssBytes: afterLoad.peak,
      binaryBytes: binary ? statSync(binary).size : null,
    },
    webhookCreatedAtLeadMs,
    walMaxBytes: wal.overall,
    totalSeconds: (performance.now() - benchStarted) / 1000,
    postgres,
  }
  report.targets = targetChecks(report)
  report.earlierTargets = earlierTargetChecks(report)
  const resultsDir = join(import.meta.dir, 'results')
  mkdirSync(resultsDir, { recursive: true })
  // Named by day, commit and mode: a quick run never overwrites a full one, nor a run of one commit another's.
  const file = join(resultsDir, `${report.date.slice(0, 10)}-${report.commit}${quick ? '-quick' : ''}.json`)
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)
  log(`[${elapsed()}] done; results in ${file}`)

  process.stdout.write(`${markdownTables(report)}\n\n---- the full report, with its method ----\n\n${fullReport(report)}\n`)
}

/** One request of the scenario before loading it: the expected status, or the bench stops with the body. */
async function checkOnce(scenario: Scenario, server: Server, target: string, headers: Record<string, string>) {
  const requests = scenario.requests(`check-${target}`)
  const response = await firstRequest(server, requests, headers)
  const body = await response.text()
  if (response.status !== scenario.expect) throw new Error(`${scenario.id} on ${target}: ${response.status} instead of ${scenario.expect}: ${body.slice(0, 500)}`)
}

/** The first request of a load's, sent with fetch (a `once` path then counts as sent). */
async function firstRequest(server: Server, requests: LoadSpec['requests'], headers: Record<string, string>): Promise<Response> {
  switch (requests.kind) {
    case 'get':
      return fetch(`${server.url}${requests.paths[0]!}`, { headers })
    case 'unique':
      return post(server.url, requests.paths[0]!, `${requests.prefix}-check`, headers)
    case 'fixed':
      return post(server.url, requests.paths[0]!, requests.recordIds[0]!, headers)
    case 'once': {
      const [path] = requests.paths.left()
      if (path === undefined) throw new Error(`${server.name}: no path left to send once`)
      requests.paths.took(1)
      return fetch(`${server.url}${path}`, { method: requests.method ?? 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: requests.body })
    }
  }
}

function summary(r: LoadResult): string {
  const cpu = (perRequest: number | null) => (perRequest === null ? 'n/a' : perRequest.toFixed(1))
  return (
    `${Math.round(r.rps)} rps, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, unexpected ${r.unexpected}, ${Math.round(r.bytesPerResponse)} B/response, ` +
    `CPU µs/req server ${cpu(r.cpu.serverPerRequestUs)} wrk ${cpu(r.cpu.generatorPerRequestUs)}`
  )
}

/** `dist/trellis`, built with `npm run build` when missing or older than a source file; null when the build fails. */
async function ensureBinary(): Promise<string | null> {
  const binary = join(repoRoot, 'dist/trellis')
  const newestSource = newestMtime(join(repoRoot, 'src'))
  let built: number | null = null
  try {
    built = statSync(binary).mtimeMs
  } catch {
    built = null
  }
  if (built !== null && built >= newestSource) return binary
  log(`[${elapsed()}] npm run build (dist/trellis ${built === null ? 'missing' : 'older than src/'})`)
  const proc = Bun.spawn(['npm', 'run', 'build'], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  const timer = setTimeout(() => proc.kill('SIGKILL'), 300_000)
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  clearTimeout(timer)
  if (code !== 0) {
    log(`  build failed (${code}); serving from source:\n${out.slice(-1000)}${err.slice(-1000)}`)
    return null
  }
  return binary
}

function newestMtime(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs)
  }
  return newest
}

async function gitDescribe(): Promise<string> {
  try {
    const proc = Bun.spawn(['git', 'describe', '--always', '--dirty'], { cwd: repoRoot, stdout: 'pipe', stderr: 'ignore' })
    return (await new Response(proc.stdout).text()).trim() || 'unknown'
  } catch {
    return 'unknown'
  }
}

async function cleanup() {
  for (const server of servers) await server.stop('SIGKILL').catch(() => {})
  if (!keep) rmSync(work, { recursive: true, force: true })
  else log(`kept ${work}`)
}

try {
  await main()
  await cleanup()
} catch (error) {
  log(`bench failed: ${(error as Error).stack ?? String(error)}`)
  await cleanup()
  process.exit(1)
}

/** Waits until the database holds no queued, running or waiting run but those parked on a task (read-only, every 500 ms). */
async function untilNoActiveRuns(dbPath: string, timeoutMs: number): Promise<void> {
  const db = new Database(dbPath, { readonly: true })
  try {
    const active = db.prepare(`SELECT count(*) AS n FROM runs WHERE ${LEFT_ACTIVE}`)
    const deadline = performance.now() + timeoutMs
    for (let left = (active.get() as { n: number }).n; left > 0; left = (active.get() as { n: number }).n) {
      if (performance.now() > deadline) throw new Error(`${left} runs still active after ${timeoutMs / 1000} s`)
      log(`  ${left.toLocaleString('en-US')} runs of the executor phase still active: waiting for them`)
      await Bun.sleep(500)
    }
  } finally {
    db.close()
  }
}

/** bench/tracing.ts in a process of its own (its servers and sink are its own): its JSON summary, the last line it prints. */
async function measureTracing(): Promise<TracingResult> {
  log(`[${elapsed()}] tracing: off against on at 100 % sampling (bench/tracing.ts)`)
  const child = Bun.spawn([process.execPath, join(import.meta.dir, 'tracing.ts'), '--rounds', '3'], { stdout: 'pipe', stderr: 'inherit' })
  const [out, code] = await Promise.all([new Response(child.stdout).text(), child.exited])
  if (code !== 0) throw new Error(`bench/tracing.ts exited with ${code}`)
  const result = JSON.parse(out.trim().split('\n').at(-1)!) as TracingResult
  log(`  trigger ${result.medians.off.triggerCpuUs} → ${result.medians.on.triggerCpuUs} µs CPU per call, executor ${result.medians.off.executorCpuUsPerRun} → ${result.medians.on.executorCpuUsPerRun} µs CPU per run`)
  return result
}

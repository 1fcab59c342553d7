/**
 * The PostgreSQL phase: the seeded SQLite database moved into a throw-away PostgreSQL cluster with
 * `trellis db copy`, then 1 and 3 Trellis instances on it — the webhook trigger and notes pages under wrk (the
 * connections split over the instances, one wrk per instance, run at once), and the executor draining a burst of
 * queued runs with every instance's executor on (no drain with `executorRuns` 0). Reported beside the same
 * scenarios on SQLite from the same run.
 */
import { SQL, randomUUIDv7 } from 'bun'
import { startCluster } from '../test/support/postgres-cluster.ts'
import { cpuSince, type LoadResult, repoRoot, requestsAtOnce, runLoad, type Server, startServer } from './procs.ts'
import type { Scenario } from './scenarios.ts'
import { burstRecord, type SeedResult } from './seed.ts'

/** The scenarios measured on PostgreSQL (a subset of the SQLite ones: the write path, a short and a long page, a person's inbox and a decision). */
export const POSTGRES_SCENARIOS = ['webhook-202', 'notes-10', 'notes-100', 'inbox', 'decision', 'records-filter']
export const INSTANCE_COUNTS = [1, 3]

export interface SpreadResult {
  instances: number
  connections: number
  rps: number
  /** The slowest instance's wrk p50 and p99 (ms). */
  p50: number
  p99: number
  unexpected: number
  /** Responses by status, every instance together. */
  statusCodes: Record<string, number>
  /** CPU µs per response, every instance together. */
  serverPerRequestUs: number
  generatorPerRequestUs: number
}

export interface PostgresResult {
  server: string
  settings: string
  copySeconds: number
  scenarios: { id: string; title: string; runs: SpreadResult[] }[]
  executor: { instances: number; runs: number; finished: number; runsPerSecond: number }[]
}

export interface PostgresOptions {
  seed: SeedResult
  dataDir: string
  /** How to run the CLI: the binary, or bun with src/main.ts. */
  cli: string[]
  command: (port: number) => string[]
  env: (executor: boolean) => Record<string, string>
  scenarios: Scenario[]
  connections: number
  duration: number
  warmup: number
  executorRuns: number
  headers: Record<string, string>
  stderrFile: (name: string) => string
  log: (line: string) => void
}

/** PostgreSQL's settings for the bench: durable like SQLite's WAL with synchronous=NORMAL (no fsync per commit). */
/** The cluster settings of the PostgreSQL measurements (the bench's phase, `http-ab --postgres`). */
export const POSTGRES_SETTINGS = { synchronous_commit: 'off', shared_buffers: '256MB', max_connections: '200' }

export async function measurePostgres(o: PostgresOptions): Promise<PostgresResult> {
  const cluster = startCluster({ fsync: true, settings: POSTGRES_SETTINGS })
  const admin = new SQL({ url: cluster.url, max: 1 })
  try {
    await admin.unsafe('CREATE DATABASE trellis')
    const url = cluster.url.replace(/\/postgres$/, '/trellis')
    const version = ((await admin`SHOW server_version`) as { server_version: string }[])[0]!.server_version
    o.log(`  PostgreSQL ${version}: copying the seeded database (trellis db copy)`)
    const copyStarted = performance.now()
    const copy = Bun.spawnSync([...o.cli, 'db', 'copy', '--from', o.dataDir, '--to', url], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
    if (copy.exitCode !== 0) throw new Error(`trellis db copy failed: ${copy.stderr.toString()}${copy.stdout.toString()}`)
    const copySeconds = (performance.now() - copyStarted) / 1000
    o.log(`  copied in ${copySeconds.toFixed(0)} s`)

    // The instances share the seeded data directory, so its secret (which signed the webhook URLs) too.
    const env = (executor: boolean) => ({ ...o.env(executor), TRELLIS_DATABASE_URL: url })
    const start = async (count: number, executor: boolean) =>
      Promise.all(Array.from({ length: count }, (_, i) => startServer({ name: `trellis-pg-${i}`, command: o.command, env: env(executor), stderrFile: o.stderrFile(`pg-${count}-${i}`), timeoutMs: 60_000 })))

    const scenarios: PostgresResult['scenarios'] = o.scenarios.filter((s) => POSTGRES_SCENARIOS.includes(s.id)).map((s) => ({ id: s.id, title: s.title, runs: [] }))
    for (const count of INSTANCE_COUNTS) {
      const servers = await start(count, false)
      try {
        for (const scenario of o.scenarios.filter((s) => POSTGRES_SCENARIOS.includes(s.id))) {
          o.log(`  ${scenario.id} on ${count} PostgreSQL instance${count > 1 ? 's' : ''}, ${o.connections} connections`)
          const result = await loadSpread(servers, scenario, `pg${count}`, o)
          o.log(`    ${Math.round(result.rps)} rps, p99 ${result.p99} ms, ${result.unexpected} unexpected ${JSON.stringify(result.statusCodes)}`)
          scenarios.find((s) => s.id === scenario.id)!.runs.push(result)
        }
      } finally {
        await Promise.all(servers.map((server) => server.stop()))
      }
    }

    const executor: PostgresResult['executor'] = []
    const sql = new SQL({ url, max: 2 })
    try {
      for (const count of o.executorRuns > 0 ? INSTANCE_COUNTS : []) {
        executor.push(await drain(sql, count, o, () => start(count, true)))
        o.log(`  executor on ${count} instance${count > 1 ? 's' : ''}: ${Math.round(executor.at(-1)!.runsPerSecond)} runs/s`)
      }
    } finally {
      await sql.close()
    }
    return { server: `PostgreSQL ${version}`, settings: Object.entries(POSTGRES_SETTINGS).map(([k, v]) => `${k}=${v}`).join(', '), copySeconds, scenarios, executor }
  } finally {
    await admin.close()
    cluster.stop()
  }
}

/**
 * One scenario against every server at once: the connections split between them, one wrk each (all on the generator's
 * core), a warm-up first (when `o.warmup` is more than 0); the servers' CPU time summed over the measured run.
 */
async function loadSpread(servers: Server[], scenario: Scenario, target: string, o: PostgresOptions): Promise<SpreadResult> {
  const specs = (seconds: number, phase: string) => {
    // Each run its own record ids (the warm-up's runs stay active: no executor, the measured run must not hit them)
    // and its own share of the paths sent once.
    const requests = requestsAtOnce(servers.map((_, i) => scenario.requests(`${target}-${i}-${phase}`)))
    return servers.map((server, i) => ({
      url: server.url,
      connections: Math.max(1, Math.round(o.connections / servers.length)),
      duration: seconds,
      warmup: 0,
      headers: scenario.headers ?? o.headers,
      expect: scenario.expect,
      requests: requests[i]!,
    }))
  }
  if (o.warmup > 0) await Promise.all(specs(o.warmup, 'warm').map(runLoad))
  const spent = cpuSince(servers)
  const runs: LoadResult[] = await Promise.all(specs(o.duration, 'measured').map(runLoad))
  const serverUs = spent()
  const responses = runs.reduce((sum, run) => sum + run.responses, 0)
  return {
    instances: servers.length,
    connections: o.connections,
    rps: runs.reduce((sum, run) => sum + run.rps, 0),
    p50: Math.max(...runs.map((run) => run.latency.p50)),
    p99: Math.max(...runs.map((run) => run.latency.p99)),
    unexpected: runs.reduce((sum, run) => sum + run.unexpected, 0),
    statusCodes: runs.reduce<Record<string, number>>((sum, run) => {
      for (const [status, n] of Object.entries(run.statusCodes)) sum[status] = (sum[status] ?? 0) + n
      return sum
    }, {}),
    serverPerRequestUs: responses > 0 ? serverUs / responses : 0,
    generatorPerRequestUs: responses > 0 ? runs.reduce((sum, run) => sum + run.cpu.generatorPerRequestUs * run.responses, 0) / responses : 0,
  }
}

/** A burst of queued three-step runs inserted straight into the queue, drained by `count` instances' executors. */
async function drain(sql: SQL, count: number, o: PostgresOptions, start: () => Promise<Server[]>): Promise<PostgresResult['executor'][number]> {
  const runs = o.executorRuns
  const t0 = await queueBurst(sql, o.seed, runs)
  // This burst: created_at in [t0 µs, t0 µs + runs) (no server runs meanwhile: nothing else is created then).
  const burst = (status: string) => sql`SELECT count(*)::int AS n FROM runs WHERE created_at >= ${t0 * 1000} AND created_at < ${t0 * 1000 + runs} AND status = ANY(string_to_array(${status}, ','))`
  const servers = await start()
  try {
    const deadline = performance.now() + 180_000
    let finished = 0
    while (performance.now() < deadline) {
      finished = ((await burst('succeeded,failed')) as { n: number }[])[0]!.n
      if (finished >= runs) break
      await Bun.sleep(200)
    }
    const [span] = (await sql`SELECT (max(finished_at) - min(started_at))::float8 AS ms FROM runs
      WHERE created_at >= ${t0 * 1000} AND created_at < ${t0 * 1000 + runs} AND finished_at IS NOT NULL`) as { ms: number | null }[]
    return { instances: count, runs, finished, runsPerSecond: span?.ms ? (finished * 1000) / span.ms : 0 }
  } finally {
    await Promise.all(servers.map((server) => server.stop()))
  }
}

/**
 * The drain's burst, straight into the queue: every active run cancelled first, then `runs` queued three-step runs
 * over the seeded workflows, due now, `created_at` in [t0 µs, t0 µs + runs) (nothing else is created meanwhile).
 * Returns t0 (ms).
 */
export async function queueBurst(sql: SQL, seed: SeedResult, runs: number): Promise<number> {
  await sql`UPDATE runs SET status = 'cancelled', finished_at = ${Date.now()} WHERE status IN ('queued', 'running', 'waiting')`
  const [token] = (await sql`SELECT id::float8 AS id, user_id::float8 AS user_id FROM api_tokens WHERE name = 'bench admin'`) as { id: number; user_id: number }[]
  const workflows = (await sql`SELECT w.id::float8 AS id, w.active_version_id::float8 AS version, r.environment_id::float8 AS env
    FROM workflows w JOIN renderings r ON r.id = w.rendering_id WHERE w.id IN ${sql(seed.workflowIds)} ORDER BY w.id`) as { id: number; version: number; env: number }[]
  const t0 = Date.now()
  const rows = Array.from({ length: runs }, (_, i) => {
    const w = workflows[i % workflows.length]!
    const records = seed.productionRecords[seed.workflowCollections[seed.workflowIds.indexOf(w.id)]!]!
    // A run is due at its trigger time (ms); created_at is µs, as the server's own inserts store it.
    return {
      id: randomUUIDv7(), workflow_id: w.id, workflow_version_id: w.version, environment_id: w.env,
      record_id: burstRecord(records, i, workflows.length), user_id: token!.user_id, token_id: token!.id,
      trigger: 'webhook', status: 'queued', next_step: 0, available_at: Date.now(), attempts: 0, created_at: t0 * 1000 + i,
    }
  })
  for (let i = 0; i < rows.length; i += 1000) await sql`INSERT INTO runs ${sql(rows.slice(i, i + 1000))}`
  return t0
}

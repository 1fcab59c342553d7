/**
 * `npm run bench:pg-drain [-- --notes N --runs N --instances 1,3 --seconds N --concurrency N --profile DIR]`: the executor on PostgreSQL alone,
 * watched from inside. Seeds a database as `npm run bench` does (1M notes by default), copies it into a throw-away
 * cluster (`trellis db copy`), then per instance count queues a burst of three-step runs (as bench/postgres.ts's
 * drain) and starts that many `serve` processes with their executors. Every second it prints the runs finished, the
 * runs leased (`running`: at most the instances' concurrency, 8 each by default) and what PostgreSQL's busy
 * connections wait on (`pg_stat_activity`); after each drain, the statements that took the most time
 * (`pg_stat_statements`), and the runs a second and Trellis CPU per run from the first sample to the last. It shows where the drain's time goes (a claim that leases every due run shows as one
 * instance holding them all); `--profile DIR`: each server writes a CPU profile under DIR/<instances>x (`bun
 * --cpu-prof`). Asserts nothing. Progress and figures go to stderr.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SQL } from 'bun'
import { startCluster } from '../test/support/postgres-cluster.ts'
import { queueBurst } from './postgres.ts'
import { cpuSince, log, option, repoRoot, type Server, startServer } from './procs.ts'
import { seedDatabase } from './seed.ts'

const NOTES = Number(option('notes', '1000000'))
const RUNS = Number(option('runs', '10000'))
const INSTANCES = option('instances', '1,3').split(',').map(Number)
const SECONDS = Number(option('seconds', '180'))
const RAISED = '1000000000'
/** A directory for `bun --cpu-prof` profiles of every server (written when it exits), or none. */
const PROFILE = option('profile', '')
/** Each instance's executor workers (TRELLIS_EXECUTOR_CONCURRENCY), or Trellis's default. */
const CONCURRENCY = option('concurrency', '')

const work = mkdtempSync(join(tmpdir(), 'trellis-pg-drain-'))
const dataDir = join(work, 'data')
const cli = [process.execPath, join(repoRoot, 'src/main.ts')]

const seed = seedDatabase(dataDir, { notes: NOTES, records: 10_000, users: 1_000, workflows: 100 }, log)
const cluster = startCluster({
  fsync: true,
  settings: { synchronous_commit: 'off', shared_buffers: '256MB', max_connections: '200', shared_preload_libraries: 'pg_stat_statements' },
})
const admin = new SQL({ url: cluster.url, max: 1 })
const servers: Server[] = []
try {
  await admin.unsafe('CREATE DATABASE trellis')
  const url = cluster.url.replace(/\/postgres$/, '/trellis')
  log('copying the seeded database (trellis db copy)')
  const copy = Bun.spawnSync([...cli, 'db', 'copy', '--from', dataDir, '--to', url], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  if (copy.exitCode !== 0) throw new Error(`trellis db copy failed: ${copy.stderr.toString()}`)
  const sql = new SQL({ url, max: 2 })
  await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
  const env = { TRELLIS_API_RATE_PER_MIN: RAISED, TRELLIS_WEBHOOK_RATE_PER_MIN: RAISED, TRELLIS_DATABASE_URL: url, ...(CONCURRENCY ? { TRELLIS_EXECUTOR_CONCURRENCY: CONCURRENCY } : {}) }
  for (const count of INSTANCES) {
    const t0 = await queueBurst(sql, seed, RUNS)
    await sql`SELECT pg_stat_statements_reset()`
    for (let i = 0; i < count; i++) {
      servers.push(await startServer({
        name: `trellis-pg-${i}`,
        command: (port) => [process.execPath, ...(PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}/${count}x`] : []), ...cli.slice(1), 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir],
        env,
        stderrFile: join(work, `pg-${count}-${i}.err`),
        timeoutMs: 60_000,
      }))
    }
    const started = performance.now()
    let finished = 0
    let first: { at: number; finished: number; spent: () => number } | null = null
    while (finished < RUNS && performance.now() - started < SECONDS * 1000) {
      await Bun.sleep(1000)
      const before = finished
      finished = ((await sql`SELECT count(*)::int AS n FROM runs WHERE created_at >= ${t0 * 1000} AND created_at < ${t0 * 1000 + RUNS}
        AND status IN ('succeeded', 'failed')`) as { n: number }[])[0]!.n
      first ??= { at: performance.now(), finished, spent: cpuSince(servers) }
      const [leased] = (await sql`SELECT count(*)::int AS n FROM runs WHERE status = 'running'`) as { n: number }[]
      const waits = (await sql`SELECT coalesce(wait_event_type, 'cpu') || ':' || coalesce(wait_event, '-') AS w, count(*)::int AS n
        FROM pg_stat_activity WHERE datname = 'trellis' AND pid <> pg_backend_pid() AND state <> 'idle' GROUP BY 1 ORDER BY 2 DESC`) as { w: string; n: number }[]
      log(`${count}×: finished ${finished} (+${finished - before}), leased ${leased!.n} | ${waits.map((w) => `${w.w}=${w.n}`).join(' ')}`)
    }
    const seconds = (performance.now() - started) / 1000
    // Steady: from the first sample (a second after the executors started) to the last.
    const steady = first && performance.now() > first.at + 1 ? (finished - first.finished) / ((performance.now() - first.at) / 1000) : 0
    const cpuPerRun = first && finished > first.finished ? first.spent() / (finished - first.finished) : 0
    log(`${count} instance${count > 1 ? 's' : ''}: ${finished} of ${RUNS} runs in ${seconds.toFixed(0)} s; ${Math.round(steady)} runs/s and ${Math.round(cpuPerRun)} µs of Trellis CPU per run from the first sample to the last`)
    const top = (await sql`SELECT calls::int AS calls, round(total_exec_time)::int AS total, round(mean_exec_time::numeric, 2)::float8 AS mean,
      left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 120) AS query FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 8`) as { calls: number; total: number; mean: number; query: string }[]
    for (const t of top) log(`  ${t.total} ms in ${t.calls} calls (mean ${t.mean} ms): ${t.query}`)
    await Promise.all(servers.splice(0).map((server) => server.stop()))
  }
  await sql.close()
} finally {
  await Promise.all(servers.map((server) => server.stop()))
  await admin.close()
  cluster.stop()
  rmSync(work, { recursive: true, force: true })
}

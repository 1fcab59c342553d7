/**
 * `bun bench/pg-trigger-ab.ts --roots DIR_A,DIR_B [--rounds 3 --seconds 10 --connections 64 --instances 1 --notes 20000
 * --tasks --typed-records N --scenario webhook-202]`: the webhook trigger (202) on PostgreSQL, or another of the
 * bench's scenarios that needs no state of its own (bench/scenarios.ts, e.g. `--scenario notes-10`; the inbox and a
 * decision with `--tasks`, the records pages with `--typed-records`), checkouts A and B alternated (A, B, A, B…)
 * against one throw-away cluster and one seeded database, so that a shared machine's drift falls on both alike. Each
 * turn starts `--instances` `serve` processes of one checkout (executor off), loads them with wrk for `--seconds` after
 * a warm-up, and prints the responses per second and the Trellis CPU per trigger, or per request of another scenario
 * (user + system from /proc, every instance together). The database is copied by A's `db copy`; a checkout with
 * newer migrations applies them at its first start, after which both run on its schema. `--profile DIR`: each server
 * writes a CPU profile there (`bun --cpu-prof`). Every 250 ms it samples Trellis's busy connections and those waiting
 * on an advisory lock (a checkout that still takes an environment's lock shows it), and it splits the machine's CPU
 * between Trellis, PostgreSQL (every process of the cluster) and wrk, and counts the runs the lists' pass moved;
 * `--statements N` lists the N statements called most per response (pg_stat_statements). `TRELLIS_DATABASE_POOL` in the
 * environment goes to the servers. `--no-statistics`: the copied database's statistics deleted, autovacuum off and
 * every plan generic — the plans a deployment could keep before its first ANALYZE, or after a bulk load into a table
 * last analyzed while nearly empty (with TRELLIS_PG_EXPLAIN_MS, test/support/postgres-cluster.ts, their plans are
 * logged). Asserts nothing; figures go to stdout.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SQL } from 'bun'
import { startCluster } from '../test/support/postgres-cluster.ts'
import { clusterCpuUs, cpuSince, log, option, RAISED_RATE_LIMITS, repoRoot, runLoad, type Server, startServer } from './procs.ts'
import { scenarios } from './scenarios.ts'
import { seedDatabase } from './seed.ts'
import { BENCH_TASKS } from './seed-tasks.ts'

const ROOTS = option('roots', repoRoot).split(',')
const ROUNDS = Number(option('rounds', '3'))
const SECONDS = Number(option('seconds', '10'))
const CONNECTIONS = Number(option('connections', '64'))
const INSTANCES = Number(option('instances', '1'))
const NOTES = Number(option('notes', '20000'))
/** A directory for `bun --cpu-prof` profiles of every server (written when it exits), or none. */
const PROFILE = option('profile', '')
const SCENARIO = option('scenario', 'webhook-202')
const NO_STATISTICS = process.argv.includes('--no-statistics')
/** `--tasks`: the full bench's approval tasks seeded too (the inbox and decision scenarios need them). */
const TASKS = process.argv.includes('--tasks')
/** `--typed-records N`: N records of the typed collection (the records scenarios need them). */
const TYPED_RECORDS = Number(option('typed-records', '0'))
/** `--statements N`: the N statements called most per response in each measured run, with their mean time (pg_stat_statements); 0: none. */
const STATEMENTS = Number(option('statements', '0'))
/** What one response is, in the figures: a trigger, or a request of another scenario. */
const UNIT = SCENARIO === 'webhook-202' ? 'trigger' : 'request'

const work = mkdtempSync(join(tmpdir(), 'trellis-pg-trigger-'))
const dataDir = join(work, 'data')
const seed = seedDatabase(dataDir, { notes: NOTES, records: 10_000, users: 1_000, workflows: 100, ...(TASKS ? { tasks: BENCH_TASKS } : {}), ...(TYPED_RECORDS > 0 ? { typedRecords: TYPED_RECORDS } : {}) }, log)
const scenario = scenarios(seed).find((s) => s.id === SCENARIO)
// The 409's records need a run active before the load (npm run bench starts them); each turn here cancels every one.
const refusal = !scenario ? 'no such bench scenario (bench/scenarios.ts)' : scenario.requests('').kind === 'fixed' ? 'needs active runs this tool does not start' : null
if (!scenario || refusal) {
  rmSync(work, { recursive: true, force: true })
  throw new Error(`--scenario ${SCENARIO}: ${refusal}`)
}
const cluster = startCluster({
  fsync: true,
  settings: {
    synchronous_commit: 'off', shared_buffers: '256MB', max_connections: '200',
    ...(STATEMENTS > 0 ? { shared_preload_libraries: 'pg_stat_statements' } : {}),
    ...(NO_STATISTICS ? { autovacuum: 'off', plan_cache_mode: 'force_generic_plan' } : {}),
  },
})
const admin = new SQL({ url: cluster.url, max: 1 })
const servers: Server[] = []
try {
  await admin.unsafe('CREATE DATABASE trellis')
  const url = cluster.url.replace(/\/postgres$/, '/trellis')
  const copy = Bun.spawnSync([process.execPath, join(ROOTS[0]!, 'src/main.ts'), 'db', 'copy', '--from', dataDir, '--to', url], { cwd: ROOTS[0], stdout: 'pipe', stderr: 'pipe' })
  if (copy.exitCode !== 0) throw new Error(`trellis db copy failed: ${copy.stderr.toString()}`)
  const sql = new SQL({ url, max: 1 })
  if (NO_STATISTICS) await sql.unsafe("DELETE FROM pg_statistic WHERE starelid IN (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public')")
  if (STATEMENTS > 0) await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
  /** Rows of `runs` updated so far: with the executor off, the lists' pass moving a run's time (and each turn's cancelling update). */
  const runsUpdated = async () => ((await sql`SELECT n_tup_upd::float8 AS n FROM pg_stat_user_tables WHERE relname = 'runs'`) as { n: number }[])[0]!.n
  const env = {
    ...RAISED_RATE_LIMITS,
    TRELLIS_EXECUTOR_CONCURRENCY: '0', TRELLIS_DATABASE_URL: url,
    ...(process.env.TRELLIS_DATABASE_POOL ? { TRELLIS_DATABASE_POOL: process.env.TRELLIS_DATABASE_POOL } : {}),
  }
  const figures = new Map<string, { rps: number; us: number }[]>(ROOTS.map((root) => [root, []]))
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [which, root] of ROOTS.entries()) {
      // No run active: every turn starts from the same queue (its triggers' runs stay queued, the executor is off).
      await sql`UPDATE runs SET status = 'cancelled' WHERE status IN ('queued', 'running', 'waiting')`
      for (let i = 0; i < INSTANCES; i++) {
        servers.push(await startServer({
          name: `trellis-${which}-${i}`,
          command: (port) => [process.execPath, ...(PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}`] : []), join(root, 'src/main.ts'), 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir],
          env,
          stderrFile: join(work, `${which}-${round}-${i}.err`),
          timeoutMs: 60_000,
        }))
      }
      const spec = (server: Server, i: number, seconds: number, phase: string) => ({
        url: server.url, connections: Math.max(1, Math.round(CONNECTIONS / INSTANCES)), duration: seconds, warmup: 0,
        headers: scenario.headers ?? { authorization: `Bearer ${seed.adminToken}` }, expect: scenario.expect,
        requests: scenario.requests(`ab-${which}-${round}-${i}-${phase}`),
      })
      await Promise.all(servers.map((server, i) => runLoad(spec(server, i, 3, 'warm'))))
      const spent = cpuSince(servers)
      if (STATEMENTS > 0) await sql`SELECT pg_stat_statements_reset()`
      await sql`SELECT pg_stat_force_next_flush()` // this connection's cancelling update is counted before, not during
      const updatedBefore = await runsUpdated()
      const postgresBefore = clusterCpuUs(cluster.local!.dataDir)
      const load = Promise.all(servers.map((server, i) => runLoad(spec(server, i, SECONDS, 'measured'))))
      // What Trellis's connections do meanwhile, sampled: waiting on an advisory lock (an environment's), or not.
      const samples = { advisory: 0, busy: 0, n: 0 }
      const sampling = (async () => {
        for (const end = performance.now() + SECONDS * 1000; performance.now() < end; await Bun.sleep(250)) {
          const [row] = (await sql`SELECT count(*) FILTER (WHERE wait_event = 'advisory')::int AS advisory, count(*)::int AS busy
            FROM pg_stat_activity WHERE datname = 'trellis' AND pid <> pg_backend_pid() AND state <> 'idle'`) as { advisory: number; busy: number }[]
          samples.advisory += row!.advisory
          samples.busy += row!.busy
          samples.n++
        }
      })()
      const runs = await load
      await sampling
      const us = spent()
      const postgresUs = clusterCpuUs(cluster.local!.dataDir) - postgresBefore
      const responses = runs.reduce((sum, run) => sum + run.responses, 0)
      const wrkUs = runs.reduce((sum, run) => sum + run.cpu.generatorPerRequestUs * run.responses, 0)
      const unexpected = runs.reduce((sum, run) => sum + run.unexpected, 0)
      const figure = { rps: runs.reduce((sum, run) => sum + run.rps, 0), us: us / responses }
      figures.get(root)!.push(figure)
      // The servers' connections report their statistics when they close: stopped first.
      await Promise.all(servers.splice(0).map((server) => server.stop()))
      await Bun.sleep(200)
      const moved = (await runsUpdated()) - updatedBefore
      const cores = (cpuUs: number) => (cpuUs / (SECONDS * 1e6)).toFixed(2)
      log(`round ${round} ${which === 0 ? 'A' : 'B'} (${root}): ${Math.round(figure.rps)} rps, ${Math.round(figure.us)} µs CPU per ${UNIT}, ${unexpected} unexpected;` +
        ` cores busy: Trellis ${cores(us)}, PostgreSQL ${cores(postgresUs)} (${Math.round(postgresUs / responses)} µs per ${UNIT}), wrk ${cores(wrkUs)};` +
        ` runs updated (the lists' pass moving a run's time; the executor is off) ${(moved / responses).toFixed(3)} per ${UNIT};` +
        ` connections busy ${(samples.busy / samples.n).toFixed(1)}, of them waiting on an advisory lock ${(samples.advisory / samples.n).toFixed(1)} (mean of ${samples.n} samples)`)
      if (STATEMENTS > 0) {
        const top = (await sql.unsafe(
          `SELECT calls::float8 AS calls, (total_exec_time / calls)::float8 AS mean, left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS query
            FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'trellis' ORDER BY calls DESC LIMIT $1`,
          [STATEMENTS],
        )) as { calls: number; mean: number; query: string }[]
        const [all] = (await sql`SELECT coalesce(sum(calls), 0)::float8 AS calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'trellis'`) as { calls: number }[]
        log(`  statements per ${UNIT}: ${(all!.calls / responses).toFixed(2)}; the most called:\n${top.map((t) => `    ${(t.calls / responses).toFixed(3)}  ${t.mean.toFixed(3)} ms  ${t.query}`).join('\n')}`)
      }
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  for (const [which, root] of ROOTS.entries()) {
    const runs = figures.get(root)!
    console.log(`${which === 0 ? 'A' : 'B'} ${root}: median ${Math.round(median(runs.map((r) => r.rps)))} rps, ${Math.round(median(runs.map((r) => r.us)))} µs CPU per ${UNIT}` +
      ` (${runs.map((r) => `${Math.round(r.rps)}/${Math.round(r.us)}`).join(' ')}), ${INSTANCES} instance(s), ${CONNECTIONS} connections`)
  }
  await sql.close()
} finally {
  await Promise.all(servers.map((server) => server.stop()))
  await admin.close()
  cluster.stop()
  rmSync(work, { recursive: true, force: true })
}

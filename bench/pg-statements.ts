/**
 * `bun bench/pg-statements.ts [--notes 100000] [--min-ms 5] [--plans 15] [--load-seconds 0] [--as admin|inbox] [--query-chars 160]`: what
 * the API's list endpoints cost PostgreSQL. Seeds a database as `npm run bench` does (tasks and a typed collection
 * included), copies it into a throw-away cluster with auto_explain and pg_stat_statements loaded, serves it with one
 * `trellis serve` (executor off), and calls every list endpoint with each of its filters (`PATHS`) three times, one at
 * a time: the best time of each, slowest first, then the plans of the slowest statements (auto_explain with ANALYZE,
 * over `--min-ms`; the copy's own statements left out). With `--load-seconds S` it then sends the first path given in
 * `--path` (default the inbox) from 64 concurrent loops for S seconds and lists the statements by their time, with how
 * often each was planned (`calls` against `plans`: a statement planned at every call pays its planning each time).
 * Asserts nothing; figures to stdout, progress to stderr.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SQL } from 'bun'
import { startCluster } from '../test/support/postgres-cluster.ts'
import { log, option, RAISED_RATE_LIMITS, repoRoot, startServer } from './procs.ts'
import { seedDatabase } from './seed.ts'
import { BENCH_TASKS } from './seed-tasks.ts'

const NOTES = Number(option('notes', '100000'))
const MIN_MS = Number(option('min-ms', '5'))
const PLANS = Number(option('plans', '15'))
const LOAD_SECONDS = Number(option('load-seconds', '0'))
const AS = option('as', 'admin')
/** How much of each statement's text the load's list shows (pg_stat_statements' normalised text: constants as $n too). */
const QUERY_CHARS = Number(option('query-chars', '160'))

/** The list endpoints and their filters; `$P` the environment's path, `$REC` a record with notes, `$EMAIL`/`$TEAM` a user with notes and their team, `$HALF` the notes' half-way time. */
const PATHS = [
  '$P/notes?limit=10', '$P/notes?limit=100', '$P/notes?recordId=$REC', '$P/notes?userEmail=$EMAIL&teamName=$TEAM',
  '$P/notes?createdAt.lt=$HALF&limit=100', '$P/notes?updatedAt.gt=$HALF&limit=100', '$P/notes?collectionName=orders&limit=100',
  '$P/notes?userId=5&limit=100', '$P/activity-logs?limit=100', '$P/activity-logs?recordId=$REC&limit=100',
  '$P/activity-logs?userEmail=$EMAIL&limit=100', '$P/activity-logs?action=createNote&limit=100', '$P/activity-logs?type=read&limit=100',
  '$P/activity-logs?createdAt.lt=$HALF&limit=100', '$P/activity-logs?extensions=true&limit=100', '$P/workflow-runs?limit=100',
  '$P/workflow-runs?status=failed&limit=100', '$P/workflow-runs?recordId=$REC', '$P/tasks?limit=100', '$P/tasks?assignee=me&status=open&limit=50',
  '$P/tasks?status=approved&limit=100', '$P/collection/invoices/records?limit=50', '$P/collection/invoices/records?status.eq=open&sort=-amount&limit=50',
  '$P/collection/invoices/records?amount.gt=5000&limit=50', '$P/collection/invoices/records?status.in=void,draft&sort=amount&limit=50',
  '$P/collection/invoices/records?customer.contains=CUS-1000&limit=50', '$P/collection/invoices/records?sort=customer&limit=50',
  '/v1/project/Bench/admin-logs?limit=100',
]
const LOAD_PATH = option('path', '$P/tasks?assignee=me&status=open&limit=50')

const work = mkdtempSync(join(tmpdir(), 'trellis-pg-statements-'))
const dataDir = join(work, 'data')
const cli = [process.execPath, join(repoRoot, 'src/main.ts')]

const seed = seedDatabase(dataDir, { notes: NOTES, records: 10_000, users: 1_000, workflows: 100, tasks: BENCH_TASKS, typedRecords: 50_000 }, log)
const token = AS === 'inbox' ? seed.tasks!.inboxToken : seed.adminToken
const cluster = startCluster({
  settings: {
    shared_buffers: '256MB',
    shared_preload_libraries: 'auto_explain,pg_stat_statements',
    'pg_stat_statements.track_planning': 'on',
    'auto_explain.log_min_duration': String(MIN_MS),
    'auto_explain.log_analyze': 'on',
    'auto_explain.log_buffers': 'on',
  },
})
const admin = new SQL({ url: cluster.url, max: 1 })
try {
  await admin.unsafe('CREATE DATABASE trellis')
  const url = cluster.url.replace(/\/postgres$/, '/trellis')
  log('copying the seeded database (trellis db copy)')
  const copy = Bun.spawnSync([...cli, 'db', 'copy', '--from', dataDir, '--to', url, '--quiet'], { stdout: 'pipe', stderr: 'pipe' })
  if (copy.exitCode !== 0) throw new Error(`trellis db copy failed: ${copy.stderr.toString()}`)
  const logStart = readFileSync(join(cluster.local!.dataDir, '..', 'log'), 'utf8').length
  const server = await startServer({
    name: 'trellis-pg',
    command: (port) => [...cli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir],
    env: { ...RAISED_RATE_LIMITS, TRELLIS_DATABASE_URL: url, TRELLIS_EXECUTOR_CONCURRENCY: '0' },
    stderrFile: join(work, 'serve.err'),
    timeoutMs: 60_000,
  })
  const fill = (path: string) =>
    path
      .replaceAll('$P', `/v1/project/${encodeURIComponent(seed.project)}/environment/production`)
      .replaceAll('$REC', encodeURIComponent(seed.sampleRecordId))
      .replaceAll('$EMAIL', encodeURIComponent(seed.sampleUserEmail))
      .replaceAll('$TEAM', encodeURIComponent(seed.sampleUserTeam))
      .replaceAll('$HALF', encodeURIComponent(seed.halfwayCreatedAt))
  const get = async (path: string) => {
    const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
    await response.arrayBuffer()
    return response.status
  }
  try {
    const timed: { path: string; status: number; ms: number }[] = []
    for (const path of PATHS.map(fill)) {
      let best = Infinity
      let status = 0
      for (let i = 0; i < 3; i++) {
        const started = performance.now()
        status = await get(path)
        best = Math.min(best, performance.now() - started)
      }
      timed.push({ path, status, ms: best })
    }
    console.log(`## each list endpoint, one request at a time (best of 3), as ${AS}\n`)
    for (const t of timed.sort((a, b) => b.ms - a.ms)) console.log(`${t.ms.toFixed(1).padStart(8)} ms  ${t.status}  ${t.path}`)

    const plans = readFileSync(join(cluster.local!.dataDir, '..', 'log'), 'utf8')
      .slice(logStart)
      .split(/(?=LOG: {2}duration: )/)
      .filter((entry) => entry.startsWith('LOG:  duration: '))
      .sort((a, b) => Number.parseFloat(b.slice(16)) - Number.parseFloat(a.slice(16)))
    console.log(`\n## ${plans.length} statements over ${MIN_MS} ms (auto_explain), the slowest ${Math.min(PLANS, plans.length)}\n`)
    for (const plan of plans.slice(0, PLANS)) console.log(`${plan.trimEnd().slice(0, 3000)}\n`)

    if (LOAD_SECONDS > 0) {
      const db = new SQL({ url, max: 1 })
      try {
        await db.unsafe('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
        await db.unsafe('SELECT pg_stat_statements_reset()')
        const path = fill(LOAD_PATH)
        const until = performance.now() + LOAD_SECONDS * 1000
        let answered = 0
        await Promise.all(Array.from({ length: 64 }, async () => {
          for (; performance.now() < until; answered++) await get(path)
        }))
        console.log(`## ${path} from 64 concurrent loops for ${LOAD_SECONDS} s: ${Math.round(answered / LOAD_SECONDS)} a second; statements by time\n`)
        const top = (await db.unsafe(`SELECT calls::int, plans::int, round(total_exec_time)::int AS exec, round(total_plan_time)::int AS plan,
            left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), $1::int) AS query
          FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 12`, [QUERY_CHARS])) as { calls: number; plans: number; exec: number; plan: number; query: string }[]
        for (const t of top) console.log(`${t.calls} calls, ${t.plans} plans: ${t.exec} ms executing, ${t.plan} ms planning: ${t.query}`)
      } finally {
        await db.close()
      }
    }
  } finally {
    await server.stop()
  }
} finally {
  await admin.close()
  cluster.stop()
  rmSync(work, { recursive: true, force: true })
}

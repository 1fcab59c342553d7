/**
 * `npm run bench:http-ab -- --vs DIR [--scenarios activity-100,notes-100] [--rounds 3] [--connections 64]
 * [--duration 10] [--notes 1000000] [--typed-records 100000] [--data DIR] [--source] [--profile DIR] [--postgres]`: `npm run bench`'s HTTP scenarios
 * (bench/scenarios.ts), this checkout against another one (DIR: a worktree of an older commit, with its `npm ci` done),
 * each on a database its own `bench/seed.ts` seeded (the two schemas may differ), the two servers started in turn for
 * every round so that the machine's drift falls on both alike. Prints one line per measurement (rps, server CPU per
 * request, unexpected answers) and a JSON summary; asserts nothing.
 *
 * Each side serves its `dist/trellis` (build both first: `npm run build` in each checkout), or with `--source` its
 * `src/main.ts` under this Bun; `--profile DIR` (with `--source`) writes each server's CPU profile under
 * DIR/<side>-<round>. `--data DIR` keeps the seeded databases there and reuses them on the next call (a million notes
 * take about a minute to seed per side); without it they live in a temp directory removed at the end. The decision
 * scenario decides each of its tasks once: a database kept with `--data` serves it on one call only.
 * With `--postgres` each side serves a database of its own in one throw-away PostgreSQL cluster, its seed moved there
 * by its own `trellis db copy` (as `npm run bench`'s PostgreSQL phase does).
 * It measures, among others, what the request slices cost large answers (docs/performance.md "Large answers
 * completed late").
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { SQL } from 'bun'
import { startCluster } from '../test/support/postgres-cluster.ts'
import { POSTGRES_SETTINGS } from './postgres.ts'
import { RAISED_RATE_LIMITS, repoRoot, runLoad, startServer } from './procs.ts'
import type { Scenario } from './scenarios.ts'
import type { SeedResult } from './seed.ts'
import { BENCH_TASKS } from './seed-tasks.ts'

const { values } = parseArgs({
  options: {
    vs: { type: 'string' },
    scenarios: { type: 'string', default: 'activity-100' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    duration: { type: 'string', default: '10' },
    notes: { type: 'string', default: '1000000' },
    'typed-records': { type: 'string', default: '100000' },
    data: { type: 'string' },
    source: { type: 'boolean', default: false },
    profile: { type: 'string' },
    postgres: { type: 'boolean', default: false },
  },
})
if (!values.vs) throw new Error('--vs DIR is required: the other checkout (e.g. `git worktree add --detach ../before fcb10f7`)')
if (values.profile && !values.source) throw new Error('--profile needs --source (a CPU profile of the compiled binary is not written)')
const wanted = values.scenarios.split(',')
const rounds = Number(values.rounds)
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`)

const work = values.data ?? mkdtempSync(join(tmpdir(), 'trellis-http-ab-'))
interface Side {
  name: string
  root: string
  dataDir: string
  /** `--postgres`: the side's database. */
  databaseUrl?: string
  seed: SeedResult
  scenarios: Scenario[]
}

/** The side's seeded database, seeded by its own checkout's seed (or the one a former call left in `--data`). */
async function sideOf(name: string, root: string): Promise<Side> {
  const dataDir = join(work, name)
  const seedFile = join(dataDir, 'seed.json')
  const { seedDatabase } = (await import(join(root, 'bench/seed.ts'))) as typeof import('./seed.ts')
  const { scenarios } = (await import(join(root, 'bench/scenarios.ts'))) as typeof import('./scenarios.ts')
  let seed: SeedResult
  if (existsSync(seedFile)) {
    seed = JSON.parse(readFileSync(seedFile, 'utf8')) as SeedResult
    log(`${name}: the database seeded before in ${dataDir}`)
  } else {
    rmSync(dataDir, { recursive: true, force: true })
    mkdirSync(dataDir, { recursive: true })
    log(`${name}: seeding ${Number(values.notes).toLocaleString('en-US')} notes with ${root}'s seed`)
    // The bench's tasks too (a checkout whose seed has none ignores them).
    seed = seedDatabase(dataDir, { notes: Number(values.notes), records: 10_000, users: 1_000, workflows: 100, tasks: BENCH_TASKS, typedRecords: Number(values['typed-records']) }, log)
    writeFileSync(seedFile, JSON.stringify(seed))
  }
  const known = scenarios(seed)
  for (const id of wanted) if (!known.some((s) => s.id === id)) throw new Error(`unknown scenario ${id}: ${known.map((s) => s.id).join(', ')}`)
  return { name, root, dataDir, seed, scenarios: known.filter((s) => wanted.includes(s.id)) }
}

const sides = [await sideOf('vs', values.vs), await sideOf('this', repoRoot)]
const cluster = values.postgres ? startCluster({ fsync: true, settings: POSTGRES_SETTINGS }) : null
if (cluster) {
  const admin = new SQL({ url: cluster.url, max: 1 })
  for (const side of sides) {
    await admin.unsafe(`CREATE DATABASE ${side.name}`)
    side.databaseUrl = cluster.url.replace(/\/postgres$/, `/${side.name}`)
    log(`${side.name}: trellis db copy into PostgreSQL`)
    const copy = Bun.spawnSync([join(side.root, 'dist/trellis'), 'db', 'copy', '--from', side.dataDir, '--to', side.databaseUrl], { stdout: 'pipe', stderr: 'pipe' })
    if (copy.exitCode !== 0) throw new Error(`${side.name}: trellis db copy failed: ${copy.stderr.toString()}${copy.stdout.toString()}`)
  }
  await admin.close()
}
const results: { round: number; side: string; scenario: string; rps: number; serverUsPerRequest: number | null; unexpected: number }[] = []
try {
  for (let round = 0; round < rounds; round++) {
    for (const side of sides) {
      const binary = values.source
        ? [process.execPath, ...(values.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(values.profile, `${side.name}-${round}`)}`] : []), join(side.root, 'src/main.ts')]
        : [join(side.root, 'dist/trellis')]
      const server = await startServer({
        name: `${side.name} trellis`,
        command: (port) => [...binary, 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', side.dataDir],
        env: { ...RAISED_RATE_LIMITS, TRELLIS_EXECUTOR_CONCURRENCY: '0', ...(side.databaseUrl ? { TRELLIS_DATABASE_URL: side.databaseUrl } : {}) },
        stderrFile: join(work, `${side.name}-${round}.err`),
      })
      try {
        for (const scenario of side.scenarios) {
          const load = await runLoad({
            url: server.url,
            connections: Number(values.connections),
            duration: Number(values.duration),
            warmup: 1,
            headers: { authorization: `Bearer ${side.seed.adminToken}`, 'content-type': 'application/json', ...scenario.headers },
            expect: scenario.expect,
            serverPid: server.pid,
            requests: scenario.requests(`ab-${side.name}-${round}`),
          })
          const row = { round, side: side.name, scenario: scenario.id, rps: Math.round(load.rps), serverUsPerRequest: load.cpu.serverPerRequestUs === null ? null : Math.round(load.cpu.serverPerRequestUs), unexpected: load.unexpected }
          results.push(row)
          console.log(`round ${round} ${side.name.padEnd(4)} ${scenario.id}: ${row.rps} rps, server ${row.serverUsPerRequest} µs/request, unexpected ${row.unexpected}`)
        }
      } finally {
        await server.stop()
      }
    }
  }
  console.log(JSON.stringify({ vs: values.vs, postgres: values.postgres, connections: Number(values.connections), duration: Number(values.duration), notes: Number(values.notes), source: values.source, results }))
} finally {
  cluster?.stop()
  if (!values.data) rmSync(work, { recursive: true, force: true })
}

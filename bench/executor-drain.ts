/**
 * `bun bench/executor-drain.ts [-- --runs N --notes N --rounds N --busy S --vs DIR --shares P,Q]`: the executor phase of `npm run
 * bench` (bench/executor.ts: a burst of three-step runs drained by a real `serve`, the notes load beside it, the
 * burst's queue latency) on a small seeded database (`--cancelled N` leaves N cancelled runs in it first, as the full
 * bench's HTTP scenarios do: the phase's own reader then counts the burst among them), and the notes' idle rps just before it on the same server, for
 * the executor's A/B measurements. With `--vs DIR` (a worktree of an older commit) each round runs
 * that checkout's server and this one's in turn on fresh copies of the same database, so the shared machine's drift
 * falls on both alike; with `--shares 33,90` this checkout runs once per TRELLIS_EXECUTOR_SHARE given, in turn; `--profile DIR`
 * writes each server's CPU profile under DIR/<side>-<round> (only a server that drained its burst exits gracefully). Prints
 * one line per measurement and a JSON summary; asserts nothing. `--compiled` runs each side's built binary (`dist/trellis`,
 * as the full bench does) instead of its sources: the two can rank commits differently.
 */
import { Database } from 'bun:sqlite'
import { randomUUIDv7 } from 'bun'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { measureExecutor } from './executor.ts'
import { log, option, RAISED_RATE_LIMITS, repoRoot, runLoad, startServer, WalWatch } from './procs.ts'
import { seedDatabase } from './seed.ts'

const RUNS = Number(option('runs', '10000'))
const NOTES = Number(option('notes', '20000'))
const ROUNDS = Number(option('rounds', '2'))
const BUSY = Number(option('busy', '4'))
const VS = option('vs', '')
const SHARES = option('shares', '').split(',').filter(Boolean)
const CANCELLED = Number(option('cancelled', '0'))
/** A directory for `bun --cpu-prof` profiles of the servers (written when one exits after draining its burst), or none. */
const PROFILE = option('profile', '')
const COMPILED = process.argv.includes('--compiled')

const work = mkdtempSync(join(tmpdir(), 'trellis-exec-drain-'))
const seed = seedDatabase(join(work, 'seed'), { notes: NOTES, records: 10_000, users: 1_000, workflows: 100 }, log)
const notesPath = `/v1/project/${seed.project}/environment/production/notes?limit=10`
if (CANCELLED > 0) leaveCancelledRuns(seed.dbPath, seed.workflowIds[0]!, CANCELLED)
const sides: { name: string; root: string; env?: Record<string, string> }[] = SHARES.length > 0
  ? SHARES.map((share) => ({ name: `share-${share}`, root: repoRoot, env: { TRELLIS_EXECUTOR_SHARE: share } }))
  : VS ? [{ name: 'vs', root: VS }, { name: 'this', root: repoRoot }] : [{ name: 'this', root: repoRoot }]
const summary: Record<string, unknown>[] = []

try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const side of sides) {
      const dataDir = join(work, `${side.name}-${round}`)
      cpSync(seed.dataDir, dataDir, { recursive: true })
      const wal = new WalWatch(join(dataDir, 'trellis.db-wal'))
      const program = COMPILED
        ? [join(side.root, 'dist/trellis')]
        : [process.execPath, ...(PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}/${side.name}-${round}`] : []), join(side.root, 'src/main.ts')]
      const command = (port: number) => [...program, 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir]
      const env = { ...RAISED_RATE_LIMITS, ...pick('TRELLIS_EXECUTOR_'), ...side.env }
      let idleRps = 0
      const result = await measureExecutor({
        seed: { ...seed, dataDir, dbPath: join(dataDir, 'trellis.db') },
        runs: RUNS,
        busySeconds: BUSY,
        steadyRate: 100,
        steadySeconds: 0,
        timeoutMs: 120_000,
        connections: 64,
        notesPath,
        startTrellis: async () => {
          const server = await startServer({ name: side.name, command, env, stderrFile: join(work, `${side.name}-${round}.err`) })
          try {
            // The notes' idle rps on the same server before the burst is queued (its executor finds nothing to do).
            const idle = await runLoad({ url: server.url, connections: 64, duration: BUSY, warmup: 1, serverPid: server.pid, headers: { authorization: `Bearer ${seed.adminToken}` }, expect: 200, requests: { kind: 'get', paths: [notesPath] } })
            idleRps = idle.rps
            return server
          } catch (error) {
            // Not handed to measureExecutor, which would stop it: stop it here (no wrk, a failed load).
            await server.stop()
            throw error
          }
        },
        wal,
        log: () => {},
      })
      wal.stop()
      const line = {
        side: side.name,
        round,
        runsPerSecond: Math.round(result.runsPerSecond),
        quiet: Math.round(result.runsPerSecondQuiet ?? 0),
        besideNotes: Math.round(result.runsPerSecondUnderHttpLoad ?? 0),
        notesRps: Math.round(result.notesWhileBusy.rps),
        idleNotesRps: Math.round(idleRps),
        notesRatio: Number((result.notesWhileBusy.rps / idleRps).toFixed(2)),
        notesP99: result.notesWhileBusy.latency.p99,
        // Both rates scale with the CPU the shared machine leaves the server; their ratio is the share.
        runsPerNotesRequest: Number(((result.runsPerSecondUnderHttpLoad ?? 0) / result.notesWhileBusy.rps).toFixed(3)),
        burstP50: Math.round(result.burstQueueLatencyMs.p50),
        walPeakMB: Number((result.walMaxBytes / 1024 / 1024).toFixed(1)),
        busyThroughout: result.busyThroughout,
        failed: result.failed,
      }
      log(JSON.stringify(line))
      summary.push(line)
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
  console.log(JSON.stringify(summary))
} finally {
  rmSync(work, { recursive: true, force: true })
}

/** This process's settings whose names start with `prefix`, passed on to the servers. */
function pick(prefix: string): Record<string, string> {
  return Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => entry[0].startsWith(prefix) && entry[1] !== undefined))
}

/** `count` cancelled runs of one workflow on made-up record ids, created an hour ago: what the bench's webhook scenarios leave. */
function leaveCancelledRuns(dbPath: string, workflowId: number, count: number): void {
  const db = new Database(dbPath, { strict: true })
  try {
    const wf = db.prepare('SELECT w.id, w.active_version_id AS version, r.environment_id AS env FROM workflows w JOIN renderings r ON r.id = w.rendering_id WHERE w.id = ?').get(workflowId) as { id: number; version: number; env: number }
    const token = db.prepare("SELECT id, user_id FROM api_tokens WHERE name = 'bench admin'").get() as { id: number; user_id: number }
    const insert = db.prepare(`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
      status, next_step, available_at, attempts, created_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'webhook', 'cancelled', 0, ?, 0, ?, ?)`)
    const at = Date.now() - 3_600_000
    db.transaction(() => {
      for (let i = 0; i < count; i++) insert.run(randomUUIDv7(), wf.id, wf.version, wf.env, `left-${i}`, token.user_id, token.id, at, at * 1000 + i, at)
    }).immediate()
    db.run('PRAGMA wal_checkpoint(TRUNCATE)')
  } finally {
    db.close()
  }
  log(`left ${count.toLocaleString('en-US')} cancelled runs in the seed`)
}

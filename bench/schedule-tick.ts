/**
 * `bun bench/schedule-tick.ts [--records N] [--binary PATH]`: does a schedule's tick over many records hold up other
 * requests? A real `serve` on a fresh data directory (examples/acme.yaml, plus a typed collection of N records, default
 * 10,000, and a one-step workflow whose schedule matches every record with a limit of N); `/healthz` is asked one
 * request at a time, first idle, then while the tick queues its N runs, then while the executor drains them. Prints JSON
 * (p50 / p99 / max in ms, the tick's and the drain's seconds). Asserts nothing; `npm run bench` runs it too
 * (measureScheduleTick) and docs/performance.md states the bound it is read against.
 */
import { Database } from 'bun:sqlite'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { parseApplyText } from '../src/modules/apply/service.ts'
import { latencySummary, probeHealth, repoRoot, startServer } from './procs.ts'
import { seedTypedRecords, TYPED_COLLECTION, TYPED_SCHEMA } from './seed-records.ts'

export interface ScheduleTickOptions {
  records: number
  idleSeconds: number
  /** The server's command line for a port and data directory; default: `bun src/main.ts serve`. */
  command?: (port: number, dataDir: string) => string[]
}

export type ScheduleTickResult = Awaited<ReturnType<typeof measureScheduleTick>>

/**
 * Seconds from now to the tick: time for the apply, the seed (about a second per 1,000 records on a loaded machine,
 * with room), the start and the idle probe. A tick that comes before the idle probe has ended fails the run.
 */
const tickInSeconds = (options: ScheduleTickOptions) => options.idleSeconds + 6 + Math.ceil(options.records / 1_000)
const WORKFLOW = 'Chase invoices'

/** The apply file: Acme, the typed collection, and the workflow whose one tick starts a run on every record. */
function applyFile(records: number, fireAt: Date): string {
  const document = parseApplyText(readFileSync(join(repoRoot, 'examples/acme.yaml'), 'utf8')) as { projects: Record<string, unknown[]>[] }
  const acme = document.projects[0]!
  acme.collections!.push({ name: TYPED_COLLECTION, schema: TYPED_SCHEMA })
  acme.workflows!.push({
    name: WORKFLOW,
    environment: 'production',
    team: 'Support',
    collection: TYPED_COLLECTION,
    steps: [{ type: 'load' }],
    schedule: {
      // One fire time, today at that second (UTC): the tick measured.
      cron: `${fireAt.getUTCSeconds()} ${fireAt.getUTCMinutes()} ${fireAt.getUTCHours()} * * *`,
      records: { where: { status: { in: ['draft', 'open', 'paid', 'void'] } }, limit: records },
      runAs: 'alice@example.com',
      catchUp: 'skip',
    },
  })
  return JSON.stringify(document)
}

/** /healthz latency idle, during a tick over `records` records, and while the executor drains its runs. */
export async function measureScheduleTick(options: ScheduleTickOptions) {
  const command = options.command ?? ((port: number, dataDir: string) => [process.execPath, 'src/main.ts', 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir])
  const work = mkdtempSync(join(tmpdir(), 'trellis-schedule-tick-'))
  const dataDir = join(work, 'data')
  try {
    const fireAt = new Date(Math.ceil((Date.now() + tickInSeconds(options) * 1000) / 1000) * 1000)
    writeFileSync(join(work, 'apply.json'), applyFile(options.records, fireAt))
    const apply = Bun.spawnSync([process.execPath, 'src/main.ts', 'apply', '-f', join(work, 'apply.json'), '--data', dataDir], { cwd: repoRoot, stdout: 'ignore' })
    if (apply.exitCode !== 0) throw new Error(`apply failed: ${apply.stderr.toString()}`)
    const sqlite = new Database(join(dataDir, 'trellis.db'))
    const place = sqlite
      .query<{ environmentId: number; collectionId: number }, [string]>(
        `SELECT e.id AS environmentId, c.id AS collectionId FROM environments e JOIN projects p ON p.id = e.project_id
           JOIN collections c ON c.project_id = p.id WHERE p.name = 'Acme' AND e.name = 'production' AND c.name = ?`,
      )
      .get(TYPED_COLLECTION)!
    let seed = 7
    const rand = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31)
    seedTypedRecords({ sqlite, rand, ...place, count: options.records, newestBefore: Date.now(), batch: 5_000 })
    sqlite.close()

    const server = await startServer({
      name: 'trellis',
      command: (port) => command(port, dataDir),
      env: { TRELLIS_LOG_LEVEL: 'warn' },
      stderrFile: join(work, 'trellis.err'),
      pin: false,
    })
    const db = new Database(join(dataDir, 'trellis.db'), { readonly: true })
    try {
      const tick = () => db.query<{ started: number; skipped: number; finished: number | null }, []>('SELECT started, skipped, finished_at AS finished FROM schedule_ticks').get()
      const active = () => db.query<{ n: number }, []>("SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running', 'waiting')").get()!.n
      const idleUntil = performance.now() + options.idleSeconds * 1000
      const idle = await probeHealth(server.url, () => performance.now() > idleUntil)
      if (tick() !== null) throw new Error(`the schedule ticked before the idle probe ended: the set-up took longer than ${tickInSeconds(options)} s`)
      // Wait for the tick to begin (its row), then probe until it has queued every run, then until they are done.
      const deadline = Date.now() + (tickInSeconds(options) + 60) * 1000
      while (tick() === null) {
        if (Date.now() > deadline) throw new Error('the schedule never ticked')
        await Bun.sleep(50)
      }
      const tickStarted = performance.now()
      const duringTick = await probeHealth(server.url, () => tick()?.finished != null || Date.now() > deadline + 300_000)
      const tickSeconds = (performance.now() - tickStarted) / 1000
      const drainStarted = performance.now()
      const duringDrain = await probeHealth(server.url, () => active() === 0 || performance.now() - drainStarted > 300_000)
      const ticked = tick()!
      return {
        records: options.records,
        runsStarted: ticked.started,
        recordsSkipped: ticked.skipped,
        tickSeconds: Math.round(tickSeconds * 10) / 10,
        drainSeconds: Math.round(((performance.now() - drainStarted) / 1000) * 10) / 10,
        healthzIdle: latencySummary(idle),
        healthzDuringTick: latencySummary(duringTick),
        healthzDuringDrain: latencySummary(duringDrain),
      }
    } finally {
      db.close()
      await server.stop()
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { records: { type: 'string', default: '10000' }, binary: { type: 'string' } } })
  const binary = values.binary
  const result = await measureScheduleTick({
    records: Number(values.records),
    idleSeconds: 5,
    ...(binary ? { command: (port: number, dataDir: string) => [binary, 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir] } : {}),
  })
  console.log(JSON.stringify(result, null, 2))
}

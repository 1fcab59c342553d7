/**
 * The executor phase: a burst of queued three-step runs (load, update, note) inserted straight into the queue,
 * drained by the server's in-process executor. Measures runs/s, queue latency (created → started), the notes list
 * while the executor is saturated, and queue latency at a steady trickle of webhook triggers.
 */
import { Database } from 'bun:sqlite'
import { randomUUIDv7 } from 'bun'
import { type LoadResult, percentile, post, runLoad, type Server, type WalWatch } from './procs.ts'
import { burstRecord, type SeedResult } from './seed.ts'
import { ACTIVE_RUN_STATUSES, anyOfLiterals, FINISHED_RUN_STATUSES, sqlLiterals } from '../src/db/schema.ts'
import { UNTIL_TASK_CLOSES } from '../src/db/queue.ts'

/** The active run statuses as an SQL list: `('queued', 'running', 'waiting')`. */
const ACTIVE_STATUSES = `(${sqlLiterals(ACTIVE_RUN_STATUSES)})`
/**
 * The runs some phase left active, but those parked on an open task (the seeded tasks' runs, which no executor takes
 * until a decision wakes them): an SQL condition.
 */
export const LEFT_ACTIVE = `status IN ${ACTIVE_STATUSES} AND NOT (status = 'waiting' AND available_at = ${UNTIL_TASK_CLOSES})`

export interface ExecutorOptions {
  seed: SeedResult
  runs: number
  /** Seconds of notes load while the executor is busy. */
  busySeconds: number
  steadyRate: number
  steadySeconds: number
  timeoutMs: number
  connections: number
  notesPath: string
  startTrellis: () => Promise<Server>
  wal: WalWatch
  log: (line: string) => void
}

export interface ExecutorResult {
  runs: number
  succeeded: number
  failed: number
  drained: boolean
  /** Runs per second from the first start to the last finish. */
  runsPerSecond: number
  /** Runs per second outside / inside the notes load window. */
  runsPerSecondQuiet: number | null
  runsPerSecondUnderHttpLoad: number | null
  drainSeconds: number
  burstQueueLatencyMs: { p50: number; p99: number; max: number }
  /** Runs triggered through the webhook at a steady rate (one request at a time, sent on schedule). */
  steadyQueueLatencyMs: { rate: number; runs: number; p50: number; p99: number; max: number; statusCodes: Record<string, number> } | null
  notesWhileBusy: LoadResult
  /** Sequential single requests during the notes load (each bounded to 15 s). */
  probe: { requests: number; p50: number; max: number; timedOut: number }
  /** Whether runs were still queued when the notes load ended (the measurement saw a saturated executor). */
  busyThroughout: boolean
  walMaxBytes: number
  /** How far the newest activity entry's `createdAt` ran ahead of the wall clock (ms), sampled every 200 ms. */
  createdAtLeadMs: { max: number; afterDrain: number; samples: number; failedSamples: number }
}

interface RunTimes {
  id: string
  status: string
  created_at: number
  started_at: number | null
  finished_at: number | null
}

export async function measureExecutor(o: ExecutorOptions): Promise<ExecutorResult> {
  const db = new Database(o.seed.dbPath, { strict: true })
  db.run('PRAGMA busy_timeout = 5000')
  // The HTTP scenarios left queued runs on made-up record ids, and the decisions woke the runs of the tasks they
  // closed: they are not part of this phase. Cancelling them is the bench's own write (tens of thousands of rows after
  // a full run's webhook scenarios), checkpointed here before the server starts, so that the phase's `-wal` figures and
  // the server's checkpoints are the phase's own. The runs parked on open tasks stay as they are.
  o.wal.paused = true
  const leftover = db.run(`UPDATE runs SET status = 'cancelled', finished_at = ? WHERE ${LEFT_ACTIVE}`, [Date.now()]).changes
  const walBefore = o.wal.sample()
  db.run('PRAGMA wal_checkpoint(TRUNCATE)')
  o.wal.paused = false
  if (leftover > 0) o.log(`  cancelled ${leftover.toLocaleString('en-US')} runs the HTTP scenarios left queued (a ${(walBefore / 1024 / 1024).toFixed(1)} MB -wal, checkpointed before the phase)`)
  const token = db.prepare("SELECT id, user_id FROM api_tokens WHERE name = 'bench admin'").all()[0] as { id: number; user_id: number }
  const workflows = o.seed.workflowIds.map((id) => db.prepare('SELECT w.id, w.active_version_id AS version, r.environment_id AS env FROM workflows w JOIN renderings r ON r.id = w.rendering_id WHERE w.id = ?').all(id)[0] as { id: number; version: number; env: number })
  const recordsOf = (w: number) => o.seed.productionRecords[o.seed.workflowCollections[w]!]!
  const perWorkflow = Math.ceil(o.runs / workflows.length)
  if (perWorkflow + 1000 > recordsOf(0).length) throw new Error(`too many runs for ${recordsOf(0).length} records per collection`)

  o.wal.reset()
  const server = await o.startTrellis()
  const insert = db.prepare(`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger",
    status, next_step, available_at, attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'webhook', 'queued', 0, ?, 0, ?)`)
  const ids = new Set<string>()
  const t0 = Date.now()
  db.transaction(() => {
    for (let i = 0; i < o.runs; i++) {
      const w = i % workflows.length
      const wf = workflows[w]!
      const id = randomUUIDv7()
      ids.add(id)
      const now = Date.now()
      // A run is due at its trigger time (ms); its created_at is µs, as the server's own inserts store it.
      insert.run(id, wf.id, wf.version, wf.env, burstRecord(recordsOf(w), i, workflows.length), token.user_id, token.id, now, now * 1000 + i)
    }
  }).immediate()
  o.log(`  queued ${o.runs.toLocaleString('en-US')} runs in ${Date.now() - t0} ms`)
  // No wake-up call: the executor's idle poll (every second) picks the burst up, as it would from another process.
  const tEnd = Date.now()
  const counts = db.prepare(
    "SELECT sum(status = 'succeeded') AS ok, sum(status = 'failed') AS failed FROM runs WHERE environment_id = ? AND created_at >= ? AND created_at <= ?",
  )
  const samples: { t: number; done: number }[] = []
  const doneNow = () => {
    const row = counts.all(workflows[0]!.env, t0 * 1000, tEnd * 1000 + o.runs)[0] as { ok: number | null; failed: number | null }
    return { ok: row.ok ?? 0, failed: row.failed ?? 0 }
  }
  // While the burst drains, its finished runs are counted on `runs_finished_idx` alone (its predicate repeated: an
  // index-only count of at most the burst, a few ms), every run the phase did not queue having finished before t0.
  // The count above reads every run of the environment — after a full run's HTTP scenarios ~170,000 cancelled ones —
  // and, taken every 200 ms, held a read snapshot most of the time: the server's TRUNCATE checkpoints kept finding
  // this connection busy and the `-wal` grew to hundreds of MB (`bench/executor-drain.ts --cancelled 170000`: 190 MB
  // against 41 without them). It is read once, at the end.
  const finishedSince = db.prepare(`SELECT count(*) AS n FROM runs WHERE ${anyOfLiterals('status', FINISHED_RUN_STATUSES)} AND finished_at >= ?`)
  const finishedNow = () => (finishedSince.get(t0) as { n: number }).n
  let load: Promise<LoadResult> | null = null
  let probe: Promise<ExecutorResult['probe']> | null = null
  let probeUntil = Number.POSITIVE_INFINITY
  let loadWindow: { from: number; to: number } | null = null
  let busyThroughout = false
  const deadline = performance.now() + o.timeoutMs
  let sampling = true
  const leads = sampleCreatedAtLead(server.url, o.seed.adminToken, o.seed.project, () => sampling)
  for (;;) {
    const done = finishedNow()
    const t = performance.now()
    samples.push({ t, done })
    if (!load && done >= Math.min(o.runs * 0.05, 500)) {
      const from = performance.now()
      load = runLoad({
        url: server.url,
        connections: o.connections,
        duration: o.busySeconds,
        warmup: 0,
        serverPid: server.pid,
        headers: { authorization: `Bearer ${o.seed.adminToken}` },
        expect: 200,
        requests: { kind: 'get', paths: [o.notesPath] },
      }).then((result) => {
        loadWindow = { from, to: performance.now() }
        probeUntil = 0
        busyThroughout = finishedNow() < o.runs
        return result
      })
      // One request at a time beside the load: how long a single caller waits while the executor works.
      probe = probeLatency(`${server.url}${o.notesPath}`, o.seed.adminToken, () => probeUntil)
    }
    if (done >= o.runs) break
    if (t > deadline) {
      o.log(`  executor did not drain within ${o.timeoutMs / 1000} s`)
      break
    }
    await Bun.sleep(200)
  }
  const notesWhileBusy = await load!
  const probeResult = await probe!
  const finalCounts = doneNow()
  sampling = false
  const leadSamples = await leads
  const afterDrain = await createdAtLeadMs(server.url, o.seed.adminToken, o.seed.project)

  // Runs per second from the database's own timestamps.
  const rows = (db.prepare('SELECT id, status, created_at, started_at, finished_at FROM runs WHERE environment_id = ? AND created_at >= ? AND created_at <= ?').all(workflows[0]!.env, t0 * 1000, tEnd * 1000 + o.runs) as RunTimes[]).filter((r) => ids.has(r.id))
  const started = rows.filter((r) => r.started_at !== null)
  const firstStart = Math.min(...started.map((r) => r.started_at!))
  const finished = rows.filter((r) => r.finished_at !== null)
  const lastFinish = Math.max(...finished.map((r) => r.finished_at!))
  const drainSeconds = (lastFinish - firstStart) / 1000
  const latencies = Float64Array.from(started.map((r) => r.started_at! - r.created_at / 1000)).sort()
  const windowRate = (from: number, to: number) => {
    // Up to the sample that saw the burst drained: after it the executor had nothing left to run (quick runs drain
    // inside the notes load), and counting that idle time would understate its rate.
    const window = samples.filter((s) => s.t >= from && s.t <= to)
    const drained = window.findIndex((s) => s.done >= o.runs)
    const inside = drained === -1 ? window : window.slice(0, drained + 1)
    if (inside.length < 2) return null
    const a = inside[0]!
    const b = inside[inside.length - 1]!
    return b.t > a.t ? ((b.done - a.done) / (b.t - a.t)) * 1000 : null
  }
  const w = loadWindow as { from: number; to: number } | null
  const quietFrom = w ? w.to : samples[0]!.t
  const runsPerSecondUnderHttpLoad = w ? windowRate(w.from, w.to) : null
  const runsPerSecondQuiet = windowRate(quietFrom, Number.POSITIVE_INFINITY)

  // Queue latency at a steady trickle of webhook triggers, once the burst's runs have all finished (no active run left).
  let steady: ExecutorResult['steadyQueueLatencyMs'] = null
  if (o.steadySeconds > 0 && finalCounts.ok + finalCounts.failed >= o.runs) {
    const count = Math.ceil(o.steadyRate * o.steadySeconds)
    const requests: { path: string; recordId: string }[] = []
    for (let i = 0; i < count; i++) {
      const w = i % workflows.length
      requests.push({ path: o.seed.webhookPaths[w]!, recordId: recordsOf(w)[perWorkflow + Math.floor(i / workflows.length)]! })
    }
    const t1 = Date.now()
    const statusCodes = await trickle(server.url, { authorization: `Bearer ${o.seed.adminToken}` }, requests, o.steadyRate)
    const steadyDeadline = performance.now() + 15_000
    const pending = db.prepare("SELECT count(*) AS n FROM runs WHERE environment_id = ? AND created_at >= ? AND status IN ('queued', 'running')")
    while ((pending.all(workflows[0]!.env, t1 * 1000)[0] as { n: number }).n > 0 && performance.now() < steadyDeadline) await Bun.sleep(100)
    const steadyRows = db.prepare('SELECT created_at, started_at FROM runs WHERE environment_id = ? AND created_at >= ? AND started_at IS NOT NULL').all(workflows[0]!.env, t1 * 1000) as { created_at: number; started_at: number }[]
    const sorted = Float64Array.from(steadyRows.map((r) => r.started_at - r.created_at / 1000)).sort()
    steady = { rate: o.steadyRate, runs: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? 0, statusCodes }
  }
  // A server whose executor still has a backlog does not get to its SIGTERM handler (see the probe): kill it.
  await server.stop(finalCounts.ok + finalCounts.failed >= o.runs ? 'SIGTERM' : 'SIGKILL')
  db.close()
  return {
    runs: o.runs,
    succeeded: finalCounts.ok,
    failed: finalCounts.failed,
    drained: finalCounts.ok + finalCounts.failed >= o.runs,
    runsPerSecond: drainSeconds > 0 ? finished.length / drainSeconds : 0,
    runsPerSecondQuiet,
    runsPerSecondUnderHttpLoad,
    drainSeconds,
    burstQueueLatencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies[latencies.length - 1] ?? 0 },
    steadyQueueLatencyMs: steady,
    notesWhileBusy,
    probe: probeResult,
    busyThroughout,
    walMaxBytes: o.wal.max,
    createdAtLeadMs: { max: Math.max(afterDrain, ...leadSamples.leads), afterDrain, samples: leadSamples.leads.length + 1, failedSamples: leadSamples.failed },
  }
}

/** POSTs each request at its time on a fixed schedule (`rate` per second) without waiting for the answers; counts of each status ("error" for none). */
async function trickle(url: string, headers: Record<string, string>, requests: { path: string; recordId: string }[], rate: number): Promise<Record<string, number>> {
  const statusCodes: Record<string, number> = {}
  const count = (key: string) => {
    statusCodes[key] = (statusCodes[key] ?? 0) + 1
  }
  const started = performance.now()
  const answers: Promise<void>[] = []
  for (let i = 0; i < requests.length; i++) {
    const wait = started + (i * 1000) / rate - performance.now()
    if (wait > 0) await Bun.sleep(wait)
    const { path, recordId } = requests[i]!
    answers.push(
      post(url, path, recordId, headers, AbortSignal.timeout(15_000)).then(
        async (response) => {
          await response.arrayBuffer()
          count(String(response.status))
        },
        () => count('error'),
      ),
    )
  }
  await Promise.all(answers)
  return statusCodes
}

/**
 * How far the newest production activity entry's `createdAt` is ahead of the wall clock, in ms (negative: behind),
 * read through the API. The clock is read when the answer has arrived, so this never overstates the lead.
 */
export async function createdAtLeadMs(url: string, token: string, project: string): Promise<number> {
  const response = await fetch(`${url}/v1/project/${encodeURIComponent(project)}/environment/production/activity-logs?limit=1`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(15_000),
  })
  const body = (await response.json()) as { data?: { createdAt?: string }[] }
  const now = Date.now()
  const createdAt = body.data?.[0]?.createdAt
  if (response.status !== 200 || createdAt === undefined) throw new Error(`activity-logs?limit=1 answered ${response.status}: ${JSON.stringify(body).slice(0, 300)}`)
  return Date.parse(createdAt) - now
}

/** Samples `createdAtLeadMs` every 200 ms while `going()`; a failed sample (a 503 under load, say) is counted, not fatal. */
async function sampleCreatedAtLead(url: string, token: string, project: string, going: () => boolean): Promise<{ leads: number[]; failed: number }> {
  const leads: number[] = []
  let failed = 0
  while (going()) {
    await createdAtLeadMs(url, token, project).then(
      (lead) => leads.push(lead),
      () => failed++,
    )
    await Bun.sleep(200)
  }
  return { leads, failed }
}

async function probeLatency(url: string, token: string, until: () => number): Promise<ExecutorResult['probe']> {
  const times: number[] = []
  let timedOut = 0
  while (performance.now() < until()) {
    const started = performance.now()
    try {
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(15_000) })
      await response.arrayBuffer()
      times.push(performance.now() - started)
    } catch {
      timedOut++
    }
    await Bun.sleep(50)
  }
  const sorted = Float64Array.from(times).sort()
  return { requests: sorted.length, p50: percentile(sorted, 50), max: sorted[sorted.length - 1] ?? 0, timedOut }
}

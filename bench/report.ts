/** Turns a bench run into the markdown tables (stdout, docs/performance.md) and the JSON kept in bench/results/. */
import type { ExecutorResult } from './executor.ts'
import type { PostgresResult, SpreadResult } from './postgres.ts'
import type { LoginFloodResult } from './login-flood.ts'
import type { ScheduleTickResult } from './schedule-tick.ts'
import type { EventStreamsResult } from './event-streams.ts'
import type { LoadResult } from './procs.ts'

/** One scenario at one connection count: Trellis and baseline (b), measured back to back with the same requests. */
export interface ScenarioRun {
  connections: number
  trellis: LoadResult
  minimal: LoadResult
}

export interface ScenarioResult {
  id: string
  title: string
  expect: number
  runs: ScenarioRun[]
  walMaxBytes: number
}

/** One target next to what this run measured: reported, never asserted. */
export interface TargetCheck {
  /** The area of the targets table the target belongs to, or `further` for the further targets. */
  row: string
  target: string
  measured: string
  /** `reported`: a figure shown with no threshold. */
  verdict: 'PASS' | 'MISS' | 'not measured' | 'reported'
  /** Beside the verdict, not part of it (the webhook's stretch goal). */
  note?: string
}

/** bench/tracing.ts's summary: medians of its rounds, each side on the same seeded data directory. */
export interface TracingResult {
  runs: number
  rounds: number
  connections: number
  binary: boolean
  spansReceived: number
  medians: Record<'off' | 'on', { triggerPerSecond: number; triggerCpuUs: number; executorRunsPerSecond: number; executorCpuUsPerRun: number }>
}

export interface BenchResults {
  date: string
  mode: 'full' | 'quick'
  command: string
  machine: { nproc: number; cpu: string; memoryGiB: number; kernel: string; bun: string; pinning: string }
  generator: string
  commit: string
  server: string
  settings: { connections: number[]; durationSeconds: number; warmupSeconds: number }
  seed: {
    notes: number
    messages: number
    activityEntries: number
    records: number
    users: number
    workflows: number
    seconds: number
    notesPerSecond: number
    rowsPerSecond: number
    databaseBytes: number
    bytesPerNote: number
    /** The approval tasks (absent in older results). */
    tasks?: { tasks: number; open: number; assignees: number; decisions: number; seconds: number }
  }
  /** Baseline (a), one run per connection count. */
  bare: LoadResult[]
  scenarios: ScenarioResult[]
  executor: ExecutorResult | null
  /** Absent in results written before the login flood joined the bench. */
  loginFlood?: LoginFloodResult
  /** A schedule's tick over many records (10,000; 2,000 in a quick run); absent in older results. */
  scheduleTick?: ScheduleTickResult
  /** OpenTelemetry off against on at 100 % sampling (bench/tracing.ts, full runs only); absent in quick and older results. */
  tracing?: TracingResult
  /** Idle run event streams; absent in older results. */
  eventStreams?: EventStreamsResult
  footprint: {
    coldStartMs: number[]
    coldStartMedianMs: number
    coldStartOf: string
    idleRssBytes: number
    /** The idle resident set's anonymous and file-backed parts (absent in older results). */
    idleRssAnonBytes?: number
    idleRssFileBytes?: number
    peakRssWebhookBytes: number
    rssAfterLoadBytes: number
    peakRssBytes: number
    binaryBytes: number | null
  }
  /** The newest activity entry's `createdAt` minus the wall clock right after each Trellis webhook-202 run (ms). */
  webhookCreatedAtLeadMs: number[]
  walMaxBytes: number
  totalSeconds: number
  /** The targets, every area of the targets table (targetChecks). */
  targets?: TargetCheck[]
  /** The further targets (earlierTargetChecks). */
  earlierTargets?: TargetCheck[]
  /** The same scenarios on PostgreSQL with 1 and 3 instances; null when PostgreSQL is not installed. */
  postgres?: PostgresResult | null
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`
const int = (n: number) => Math.round(n).toLocaleString('en-US')
const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))
const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : 'n/a')
const us = (n: number | null) => (n === null ? 'n/a' : n >= 100 ? n.toFixed(0) : n.toFixed(1))
const percent = (share: number | null) => (share === null ? 'n/a' : `${Math.round(share * 100)} %`)
const seconds = (lead: number) => `${lead >= 0 ? '+' : '−'}${(Math.abs(lead) / 1000).toFixed(2)} s`

/** A process above this share of its core may have set the pace (see paceNotes). */
const BUSY = 0.8

/** The latency target: p99 at the fewest connections measured, for the webhook and every notes page. */
const P99_TARGET_MS = 5
const hasP99Target = (id: string) => id === 'webhook-202' || id.startsWith('notes-')

const runAt = (s: ScenarioResult, connections: number) => s.runs.find((run) => run.connections === connections)

function loadRow(label: string, connections: number, t: LoadResult, b: LoadResult): string {
  return (
    `| ${label} | ${connections} | ${int(t.rps)} | ${ms(t.latency.p50)} | ${ms(t.latency.p99)} | ${us(t.cpu.serverPerRequestUs)} | ${us(t.cpu.generatorPerRequestUs)} | ` +
    `${int(b.rps)} | ${ms(b.latency.p50)} | ${ms(b.latency.p99)} | ${us(b.cpu.serverPerRequestUs)} | ${us(b.cpu.generatorPerRequestUs)} | ` +
    `${ratio(t.rps, b.rps)} | ${t.unexpected} / ${b.unexpected} |`
  )
}

/** Who set the pace: runs where wrk neared its core, and baseline (a) runs whose server core was not saturated either. */
function paceNotes(r: BenchResults): string[] {
  const loads = [
    ...r.bare.map((a) => ({ label: `(a) at ${a.connections}`, load: a })),
    ...r.scenarios.flatMap((s) =>
      s.runs.flatMap((run) => [
        { label: `${s.id} Trellis at ${run.connections}`, load: run.trellis },
        { label: `${s.id} (b) at ${run.connections}`, load: run.minimal },
      ]),
    ),
  ]
  const saturated = loads.filter(({ load }) => load.cpu.generatorBusy > BUSY)
  const notes = [
    saturated.length === 0
      ? `wrk used at most ${percent(Math.max(...loads.map(({ load }) => load.cpu.generatorBusy)))} of its core in every run: it did not set the pace.`
      : `wrk used more than ${percent(BUSY)} of its core in: ${saturated.map(({ label, load }) => `${label} (${percent(load.cpu.generatorBusy)})`).join(', ')} — there the generator may have set the pace.`,
  ]
  const others = loads.map(({ load }) => load.cpu.otherCores).filter((cores): cores is number => cores !== undefined && cores !== null).sort((a, b) => a - b)
  if (others.length > 0) {
    notes.push(
      `Other work on the machine (other processes, interrupts charged to none, this bench itself) kept ${others[Math.floor(others.length / 2)]!.toFixed(2)} cores busy during the median measured run, ` +
        `${others[others.length - 1]!.toFixed(2)} at most (of ${r.machine.nproc}): the more, the less a figure says.`,
    )
  }
  const idle = r.bare.filter((a) => a.cpu.serverBusy !== null && a.cpu.serverBusy < BUSY && a.cpu.generatorBusy < BUSY)
  if (idle.length > 0) {
    notes.push(
      `Baseline (a) at ${idle.map((a) => `${a.connections} (server ${percent(a.cpu.serverBusy)}, wrk ${percent(a.cpu.generatorBusy)})`).join(', ')}: ` +
        'neither core was busy, so other work on the machine held the run back; its rps is below the ceiling, read the full-core column.',
    )
  }
  return notes
}

/** PostgreSQL with 1 and 3 instances beside SQLite (same run, same requests, at the most connections). */
export function postgresTables(r: Pick<BenchResults, 'postgres' | 'settings' | 'scenarios' | 'executor'>): string[] {
  const pg = r.postgres
  if (!pg) return ['PostgreSQL was not installed on this machine: no PostgreSQL figures in this run.']
  const most = Math.max(...r.settings.connections)
  const lines = [
    `${pg.server} on the same machine (${pg.settings}; \`trellis db copy\` moved the seeded database in ${pg.copySeconds.toFixed(0)} s). ` +
      `Each instance is a \`trellis serve\` of the same binary on core 0; with 3, the ${most} connections are split over them, one wrk each ` +
      '(all on core 1, run at once); p50/p99 are the slowest instance\'s, server µs/req is every instance\'s CPU together (PostgreSQL\'s own CPU is not in it), wrk µs/req every wrk\'s.',
    '',
    '| scenario | SQLite rps | PostgreSQL ×1 rps | ×1 p99 ms | ×1 server µs/req | ×1 wrk µs/req | PostgreSQL ×3 rps | ×3 p99 ms | ×3 server µs/req | ×3 wrk µs/req | ×1 ÷ SQLite | ×3 ÷ ×1 | ×3 ÷ SQLite | unexpected |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for (const s of pg.scenarios) {
    const sqlite = r.scenarios.find((x) => x.id === s.id)
    const lite = sqlite ? runAt(sqlite, most)?.trellis.rps ?? 0 : 0
    const one = s.runs.find((run) => run.instances === 1)
    const three = s.runs.find((run) => run.instances === 3)
    if (!one || !three) continue
    lines.push(
      `| ${s.title} | ${int(lite)} | ${int(one.rps)} | ${ms(one.p99)} | ${us(one.serverPerRequestUs)} | ${us(one.generatorPerRequestUs)} | ` +
        `${int(three.rps)} | ${ms(three.p99)} | ${us(three.serverPerRequestUs)} | ${us(three.generatorPerRequestUs)} | ` +
        `${ratio(one.rps, lite)} | ${ratio(three.rps, one.rps)} | ${ratio(three.rps, lite)} | ${one.unexpected} / ${three.unexpected} |`,
    )
  }
  const lite = r.executor?.runsPerSecondQuiet ?? r.executor?.runsPerSecond ?? 0
  const one = pg.executor.find((e) => e.instances === 1)
  const three = pg.executor.find((e) => e.instances === 3)
  if (one && three) {
    lines.push(
      `| executor: three-step runs drained per second (${int(one.runs)} queued) | ${int(lite)} | ${int(one.runsPerSecond)} | | | | ${int(three.runsPerSecond)} | | | | ` +
        `${ratio(one.runsPerSecond, lite)} | ${ratio(three.runsPerSecond, one.runsPerSecond)} | ${ratio(three.runsPerSecond, lite)} | ${one.runs - one.finished} / ${three.runs - three.finished} unfinished |`,
    )
  }
  return lines
}

/** The HTTP scenarios' table: each run of each, Trellis beside baseline (b). */
export function scenarioTable(scenarios: ScenarioResult[]): string[] {
  return [
    '| scenario | conns | Trellis rps | p50 ms | p99 ms | server µs/req | wrk µs/req | (b) rps | (b) p50 ms | (b) p99 ms | (b) server µs/req | (b) wrk µs/req | ratio to (b) | unexpected |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...scenarios.flatMap((s) => s.runs.map((run) => loadRow(s.title, run.connections, run.trellis, run.minimal))),
  ]
}

export function markdownTables(r: BenchResults): string {
  const lines: string[] = []
  lines.push(
    `${r.settings.connections.join(' and ')} connections, ${r.settings.durationSeconds} s measured per run (each scenario warmed for ${r.settings.warmupSeconds} s first), ` +
      `${r.generator}, one thread; ${r.machine.pinning}. Trellis: ${r.server}. Ratio = Trellis rps ÷ baseline (b) rps, same requests, ` +
      'same connection count. CPU µs/req = CPU time (user + system, every thread) over the measured run ÷ responses: the server\'s from ' +
      '`/proc/<pid>/stat`, wrk\'s from its own resource usage. Latency: wrk\'s histogram (1 µs resolution, after wrk\'s own correction ' +
      'for coordinated omission). Unexpected = responses with another status than the scenario\'s, socket errors ' +
      'and answers slower than 10 s (Trellis / (b)).',
    '',
    ...scenarioTable(r.scenarios),
  )
  lines.push(
    '',
    '| baseline (a): bare `Bun.serve`, 202 with a body of the webhook answer\'s size | conns | rps | p50 ms | p99 ms | server µs/req | server core busy | rps at a full server core (1e6 ÷ µs/req) | wrk µs/req | wrk core busy | other work (cores) | unexpected |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  )
  for (const a of r.bare) {
    const perRequest = a.cpu.serverPerRequestUs
    lines.push(
      `| same requests as the webhook scenario | ${a.connections} | ${int(a.rps)} | ${ms(a.latency.p50)} | ${ms(a.latency.p99)} | ${us(perRequest)} | ` +
        `${percent(a.cpu.serverBusy)} | ${perRequest ? int(1e6 / perRequest) : 'n/a'} | ${us(a.cpu.generatorPerRequestUs)} | ${percent(a.cpu.generatorBusy)} | ${a.cpu.otherCores == null ? 'n/a' : a.cpu.otherCores.toFixed(2)} | ${a.unexpected} |`,
    )
  }
  lines.push('', ...paceNotes(r))
  const e = r.executor
  if (e) {
    lines.push(
      '',
      '| executor (three-step runs: load, update, note) | |',
      '|---|---:|',
      `| runs queued at once / succeeded / failed | ${int(e.runs)} / ${int(e.succeeded)} / ${int(e.failed)}${e.drained ? '' : ' (not drained)'} |`,
      `| throughput, first start → last finish | ${int(e.runsPerSecond)} runs/s (${e.drainSeconds.toFixed(1)} s${e.drained ? '' : `; all ${int(e.runs)} would take ≈ ${int(e.runs / Math.max(1, e.runsPerSecond))} s`}) |`,
      `| throughput with / without the notes load beside it | ${e.runsPerSecondUnderHttpLoad === null ? 'n/a' : int(e.runsPerSecondUnderHttpLoad)} / ${e.runsPerSecondQuiet === null ? 'n/a' : int(e.runsPerSecondQuiet)} runs/s |`,
      `| queue latency created → started, burst of ${int(e.runs)} (p50 / p99${e.drained ? '' : ' of the runs started within the bound'}) | ${int(e.burstQueueLatencyMs.p50)} / ${int(e.burstQueueLatencyMs.p99)} ms |`,
    )
    if (e.steadyQueueLatencyMs) {
      const s = e.steadyQueueLatencyMs
      const other = Object.entries(s.statusCodes).filter(([code]) => code !== '202')
      lines.push(
        `| queue latency at a steady ${s.rate} webhook runs/s (p50 / p99, ${int(s.runs)} runs${other.length ? `; answers other than 202: ${other.map(([code, n]) => `${n}× ${code}`).join(', ')}` : ''}) | ${ms(s.p50)} / ${ms(s.p99)} ms |`,
      )
    }
    const idle = r.scenarios.find((s) => s.id === 'notes-10')
    const idleP99 = idle ? (runAt(idle, e.notesWhileBusy.connections)?.trellis.latency.p99 ?? 0) : 0
    lines.push(
      `| notes \`limit=10\` at ${e.notesWhileBusy.connections} connections while the executor is busy: rps, p99 (idle p99), unanswered at the end | ${int(e.notesWhileBusy.rps)} rps, ${e.notesWhileBusy.responses > 0 ? `${ms(e.notesWhileBusy.latency.p99)} ms` : 'no response'} (${ms(idleP99)} ms), ${e.notesWhileBusy.unanswered}${e.busyThroughout ? '' : ' — executor drained before the load ended'} |`,
      e.probe.requests > 0
        ? `| one notes request at a time beside it: answered, p50 / max${e.probe.timedOut ? ', still waiting after 15 s' : ''} | ${e.probe.requests}, ${ms(e.probe.p50)} / ${ms(e.probe.max)} ms${e.probe.timedOut ? `, ${e.probe.timedOut}` : ''} |`
        : `| one notes request at a time beside it | none answered: still waiting after 15 s |`,
      `| newest activity \`createdAt\` minus the wall clock: largest of ${e.createdAtLeadMs.samples} samples during the burst / after it${e.createdAtLeadMs.failedSamples ? ` (${e.createdAtLeadMs.failedSamples} samples unanswered)` : ''} | ${seconds(e.createdAtLeadMs.max)} / ${seconds(e.createdAtLeadMs.afterDrain)} |`,
    )
  }
  const streams = r.eventStreams
  if (streams) {
    const grown = streams.rssWithStreamsBytes - streams.rssBeforeBytes
    lines.push(
      '',
      `| run event streams (${int(streams.streams)} idle SSE streams on one environment, heartbeats every ${streams.heartbeatSeconds} s) | |`,
      '|---|---:|',
      `| opened (100 at a time) and each one's first heartbeat seen | ${streams.openSeconds.toFixed(1)} s |`,
      `| server RSS without / with the streams (per stream) | ${mb(streams.rssBeforeBytes)} / ${mb(streams.rssWithStreamsBytes)} (${int(grown / streams.streams)} B) |`,
      `| server CPU while idle, ${streams.idleSeconds} s: without / with the streams beating | ${(streams.idleCpuBefore * 100).toFixed(1)} % / ${(streams.idleCpuWithStreams * 100).toFixed(1)} % of a core |`,
      `| one webhook run: its 202 → its last event on every stream | ${ms(streams.fanOutMs)} ms |`,
    )
  }
  const flood = r.loginFlood
  if (flood) {
    lines.push(
      '',
      `| login flood (${int(flood.logins)} failing logins, ${flood.concurrency} at a time, each from its own address) | |`,
      '|---|---:|',
      `| \`/healthz\` one at a time, idle: p50 / p99 / max | ${ms(flood.healthzIdle.p50)} / ${ms(flood.healthzIdle.p99)} / ${ms(flood.healthzIdle.max)} ms |`,
      `| \`/healthz\` during the flood: p50 / p99 / max (target p99 < 50 ms) | ${ms(flood.healthzDuringFlood.p50)} / ${ms(flood.healthzDuringFlood.p99)} / ${ms(flood.healthzDuringFlood.max)} ms |`,
      `| logins checked per second | ${flood.loginsPerSecond} |`,
    )
  }
  const tick = r.scheduleTick
  if (tick) {
    lines.push(
      '',
      `| schedule tick (${int(tick.records)} records, one run each: ${int(tick.runsStarted)} started, ${int(tick.recordsSkipped)} skipped) | |`,
      '|---|---:|',
      `| \`/healthz\` one at a time, idle: p50 / p99 / max | ${ms(tick.healthzIdle.p50)} / ${ms(tick.healthzIdle.p99)} / ${ms(tick.healthzIdle.max)} ms |`,
      `| \`/healthz\` during the tick (${tick.tickSeconds} s): p50 / p99 / max (target p99 < 50 ms) | ${ms(tick.healthzDuringTick.p50)} / ${ms(tick.healthzDuringTick.p99)} / ${ms(tick.healthzDuringTick.max)} ms |`,
      `| \`/healthz\` while its runs drain (${tick.drainSeconds} s): p50 / p99 / max | ${ms(tick.healthzDuringDrain.p50)} / ${ms(tick.healthzDuringDrain.p99)} / ${ms(tick.healthzDuringDrain.max)} ms |`,
    )
  }
  const traced = r.tracing
  if (traced) {
    const { off, on } = traced.medians
    const ratio = (a: number, b: number) => (b === 0 ? 'n/a' : `${(a / b).toFixed(2)}×`)
    lines.push(
      '',
      `| tracing at 100 % sampling (${traced.rounds} rounds of ${int(traced.runs)} webhook calls, then their two-step runs; medians) | off | on | on ÷ off |`,
      '|---|---:|---:|---:|',
      `| trigger: server CPU per call | ${int(off.triggerCpuUs)} µs | ${int(on.triggerCpuUs)} µs | ${ratio(on.triggerCpuUs, off.triggerCpuUs)} |`,
      `| trigger: calls/s | ${int(off.triggerPerSecond)} | ${int(on.triggerPerSecond)} | ${ratio(on.triggerPerSecond, off.triggerPerSecond)} |`,
      `| executor: server CPU per run | ${int(off.executorCpuUsPerRun)} µs | ${int(on.executorCpuUsPerRun)} µs | ${ratio(on.executorCpuUsPerRun, off.executorCpuUsPerRun)} |`,
      `| executor: runs/s | ${int(off.executorRunsPerSecond)} | ${int(on.executorRunsPerSecond)} | ${ratio(on.executorRunsPerSecond, off.executorRunsPerSecond)} |`,
    )
  }
  const f = r.footprint
  lines.push(
    '',
    '| footprint | |',
    '|---|---:|',
    `| seeding: ${int(r.seed.notes)} notes, ${int(r.seed.messages)} messages, ${int(r.seed.activityEntries)} activity entries | ${r.seed.seconds.toFixed(1)} s, ${int(r.seed.notesPerSecond)} notes/s (${int(r.seed.rowsPerSecond)} rows/s) |`,
    ...(r.seed.tasks ? [`| seeding the tasks: ${int(r.seed.tasks.tasks)} (${int(r.seed.tasks.open)} open), ${int(r.seed.tasks.assignees)} assignees, ${int(r.seed.tasks.decisions)} decisions | ${r.seed.tasks.seconds.toFixed(1)} s |`] : []),
    `| cold start to first 200 on \`/healthz\` (${f.coldStartOf}, median of ${f.coldStartMs.length}) | ${ms(f.coldStartMedianMs)} ms |`,
    `| idle RSS after start${f.idleRssAnonBytes === undefined ? '' : ' (anonymous + file-backed)'} / after the HTTP scenarios | ${mb(f.idleRssBytes)}${f.idleRssAnonBytes === undefined || f.idleRssFileBytes === undefined ? '' : ` (${mb(f.idleRssAnonBytes)} + ${mb(f.idleRssFileBytes)})`} / ${mb(f.rssAfterLoadBytes)} |`,
    `| peak RSS in the webhook scenario / over all HTTP scenarios | ${mb(f.peakRssWebhookBytes)} / ${mb(f.peakRssBytes)} |`,
    `| binary size (\`dist/trellis\`) | ${f.binaryBytes === null ? 'not built' : mb(f.binaryBytes)} |`,
    `| database after seeding / bytes per note (messages, activity and indexes included) | ${mb(r.seed.databaseBytes)} / ${int(r.seed.bytesPerNote)} B |`,
    `| largest \`-wal\` file seen (every 100 ms, all phases) | ${mb(r.walMaxBytes)} |`,
  )
  if (r.postgres !== undefined) lines.push('', '### PostgreSQL: one instance and three', '', ...postgresTables(r))
  lines.push('', '### Targets', '', ...targetTables(r))
  return lines.join('\n')
}

const verdict = (met: boolean): TargetCheck['verdict'] => (met ? 'PASS' : 'MISS')
const notMeasured = (row: string, target: string, why: string): TargetCheck => ({ row, target, measured: `not measured: ${why}`, verdict: 'not measured' })
const MB = 1024 * 1024

/** The targets and the further targets, as the two tables at the end of the report. */
function targetTables(r: BenchResults): string[] {
  const checks = targetChecks(r)
  const count = (v: TargetCheck['verdict']) => checks.filter((t) => t.verdict === v).length
  return [
    '| area | target | measured | |',
    '|---|---|---|---|',
    ...checks.map((t) => `| ${t.row} | ${t.target} | ${t.measured}${t.note ? `; ${t.note}` : ''} | ${t.verdict} |`),
    '',
    `Targets: ${count('PASS')} PASS, ${count('MISS')} MISS, ${count('not measured')} not measured, ${count('reported')} reported without a threshold.`,
    '',
    '| further target | measured | |',
    '|---|---|---|',
    ...earlierTargetChecks(r).map((t) => `| ${t.target} | ${t.measured} | ${t.verdict} |`),
  ]
}

/** Trellis rps ÷ baseline (b) rps of one scenario at one connection count, against `least`; the other counts shown. */
function ratioCheck(r: BenchResults, row: string, id: string, connections: number, least: number): TargetCheck {
  const s = r.scenarios.find((x) => x.id === id)
  const run = s && runAt(s, connections)
  const target = `${s?.title ?? id}: ≥ ${least.toFixed(1)}× (b) at ${connections} connections`
  if (!s || !run) return notMeasured(row, target, `no run at ${connections} connections`)
  const others = s.runs.filter((other) => other !== run).map((other) => `${ratio(other.trellis.rps, other.minimal.rps)} at ${other.connections}`)
  return {
    row,
    target,
    measured: `${ratio(run.trellis.rps, run.minimal.rps)} (${int(run.trellis.rps)} against ${int(run.minimal.rps)} rps${others.length ? `; ${others.join(', ')}` : ''})`,
    verdict: verdict(run.trellis.rps >= least * run.minimal.rps),
  }
}

/** The webhook's server CPU per 202 against (b)'s, at `connections` (the others shown). */
function webhookCpuCheck(r: BenchResults, connections: number): TargetCheck {
  const row = 'webhook 202'
  const target = `webhook trigger → 202: server CPU per request ≤ (b)'s at ${connections} connections`
  const s = r.scenarios.find((x) => x.id === 'webhook-202')
  const run = s && runAt(s, connections)
  const [t, b] = [run?.trellis.cpu.serverPerRequestUs ?? null, run?.minimal.cpu.serverPerRequestUs ?? null]
  if (!s || t === null || b === null) return notMeasured(row, target, `no server CPU reading at ${connections} connections`)
  const others = s.runs.filter((other) => other !== run).map((other) => `${us(other.trellis.cpu.serverPerRequestUs)} against ${us(other.minimal.cpu.serverPerRequestUs)} at ${other.connections}`)
  return { row, target, measured: `${us(t)} µs against ${us(b)} µs${others.length ? ` (${others.join(', ')})` : ''}`, verdict: verdict(t <= b) }
}

/** The targets, every area of the targets table, each next to this run's figure: reported, never asserted. */
export function targetChecks(r: BenchResults): TargetCheck[] {
  const most = Math.max(...r.settings.connections)
  const fewest = Math.min(...r.settings.connections)
  const webhook = r.scenarios.find((s) => s.id === 'webhook-202')
  const saturated = webhook && runAt(webhook, most)
  const atMost = ratioCheck(r, 'webhook 202', 'webhook-202', most, 1.0)
  if (saturated) atMost.note = `stretch 1.5× ${saturated.trellis.rps >= 1.5 * saturated.minimal.rps ? 'met' : 'not met'}`
  const pages = r.scenarios.filter((s) => s.id.startsWith('notes-') || s.id.startsWith('activity-'))
  return [
    atMost,
    ratioCheck(r, 'webhook 202', 'webhook-202', fewest, 1.0),
    webhookCpuCheck(r, most),
    ratioCheck(r, 'webhook 409', 'webhook-409', most, 1.0),
    ...pages.map((s) => ratioCheck(r, 'notes and activity pages', s.id, most, 0.9)),
    ...executorChecks(r),
    ...postgresChecks(r),
    {
      row: 'idle RSS',
      target: `idle RSS ≤ 64 MB (${r.footprint.coldStartOf === 'binary' ? 'the binary' : 'from source'}, 1 s after its first answer, executor off)`,
      measured: `${mb(r.footprint.idleRssBytes)}${r.footprint.idleRssAnonBytes === undefined || r.footprint.idleRssFileBytes === undefined ? '' : ` (anonymous ${mb(r.footprint.idleRssAnonBytes)}, file-backed ${mb(r.footprint.idleRssFileBytes)})`}`,
      verdict: verdict(r.footprint.idleRssBytes <= 64 * MB),
    },
  ]
}

function executorChecks(r: BenchResults): TargetCheck[] {
  const row = 'executor, three-step runs'
  const alone = 'executor ≥ 2,000 runs/s alone'
  const beside = 'executor ≥ 500 runs/s beside the saturating notes load'
  const notesBeside = 'notes `limit=10` beside the busy executor ≥ 0.8× their idle rps'
  const burst = 'queue latency of a burst, created → started, p50 (no threshold)'
  const e = r.executor
  if (!e) return [alone, beside, notesBeside, burst].map((target) => notMeasured(row, target, 'no executor phase'))
  const checks: TargetCheck[] = [
    e.runsPerSecondQuiet === null
      ? notMeasured(row, alone, 'fewer than two progress samples outside the notes load')
      : { row, target: alone, measured: `${int(e.runsPerSecondQuiet)} runs/s (first start → last finish: ${int(e.runsPerSecond)})`, verdict: verdict(e.runsPerSecondQuiet >= 2000) },
    e.runsPerSecondUnderHttpLoad === null
      ? notMeasured(row, beside, 'fewer than two progress samples inside the notes load')
      : { row, target: beside, measured: `${int(e.runsPerSecondUnderHttpLoad)} runs/s`, verdict: verdict(e.runsPerSecondUnderHttpLoad >= 500) },
  ]
  const notes10 = r.scenarios.find((s) => s.id === 'notes-10')
  const idle = notes10 ? runAt(notes10, e.notesWhileBusy.connections)?.trellis : undefined
  if (!e.busyThroughout) checks.push(notMeasured(row, notesBeside, `the executor drained before the ${e.notesWhileBusy.duration.toFixed(0)} s notes load ended (queue more runs)`))
  else if (!idle) checks.push(notMeasured(row, notesBeside, `no idle notes \`limit=10\` run at ${e.notesWhileBusy.connections} connections`))
  else {
    checks.push({
      row,
      target: notesBeside,
      measured: `${ratio(e.notesWhileBusy.rps, idle.rps)} (${int(e.notesWhileBusy.rps)} of ${int(idle.rps)} rps at ${e.notesWhileBusy.connections} connections)`,
      verdict: verdict(e.notesWhileBusy.rps >= 0.8 * idle.rps),
    })
  }
  const q = e.burstQueueLatencyMs
  checks.push({
    row,
    target: `${burst}, ${int(e.runs)} runs queued at once${e.runs === 50_000 ? '' : ' (the full bench queues 50,000)'}`,
    measured: `${int(q.p50)} ms (p99 ${int(q.p99)} ms${e.drained ? '' : ', of the runs started within the bound'})`,
    verdict: 'reported',
  })
  return checks
}

function postgresChecks(r: BenchResults): TargetCheck[] {
  const one = 'PostgreSQL, one instance'
  const three = 'PostgreSQL, three instances'
  const cpuTarget = 'Trellis CPU per webhook trigger ≤ 2× SQLite\'s (same run, same connections)'
  const executorTarget = 'executor ≥ 500 runs/s'
  const spread = (what: string) => `${what}: three instances ≥ 0.95× one`
  const pg = r.postgres
  if (!pg) {
    const why = pg === null ? 'PostgreSQL is not installed on this machine' : 'no PostgreSQL phase in this result'
    return [
      notMeasured(one, cpuTarget, why),
      notMeasured(one, executorTarget, why),
      ...['webhook', 'notes pages', 'executor'].map((what) => notMeasured(three, spread(what), why)),
    ]
  }
  const most = Math.max(...r.settings.connections)
  const runsOf = (id: string) => pg.scenarios.find((s) => s.id === id)?.runs ?? []
  const instances = (runs: SpreadResult[], n: number) => runs.find((run) => run.instances === n)
  const checks: TargetCheck[] = []
  const sqliteWebhook = r.scenarios.find((s) => s.id === 'webhook-202')
  const liteUs = sqliteWebhook ? (runAt(sqliteWebhook, most)?.trellis.cpu.serverPerRequestUs ?? null) : null
  const pgWebhook = instances(runsOf('webhook-202'), 1)
  checks.push(
    !pgWebhook || liteUs === null
      ? notMeasured(one, cpuTarget, 'no webhook run on both stores')
      : {
          row: one,
          target: cpuTarget,
          measured: `${us(pgWebhook.serverPerRequestUs)} µs against SQLite's ${us(liteUs)} µs: ${ratio(pgWebhook.serverPerRequestUs, liteUs)} (PostgreSQL's own CPU not in it)`,
          verdict: verdict(pgWebhook.serverPerRequestUs <= 2 * liteUs),
        },
  )
  const drainOne = pg.executor.find((e) => e.instances === 1)
  const drainThree = pg.executor.find((e) => e.instances === 3)
  checks.push(
    !drainOne
      ? notMeasured(one, executorTarget, 'no drain on one instance')
      : {
          row: one,
          target: `${executorTarget} (a burst of ${int(drainOne.runs)})`,
          measured: `${int(drainOne.runsPerSecond)} runs/s${drainOne.finished < drainOne.runs ? `, ${int(drainOne.runs - drainOne.finished)} unfinished` : ''}`,
          verdict: verdict(drainOne.runsPerSecond >= 500),
        },
  )
  for (const s of pg.scenarios) {
    const [a, b] = [instances(s.runs, 1), instances(s.runs, 3)]
    checks.push(
      !a || !b
        ? notMeasured(three, spread(s.title), 'no run on one and on three instances')
        : { row: three, target: spread(s.title), measured: `${ratio(b.rps, a.rps)} (${int(b.rps)} against ${int(a.rps)} rps)`, verdict: verdict(b.rps >= 0.95 * a.rps) },
    )
  }
  checks.push(
    !drainOne || !drainThree
      ? notMeasured(three, spread('executor'), 'no drain on one and on three instances')
      : {
          row: three,
          target: spread('executor'),
          measured: `${ratio(drainThree.runsPerSecond, drainOne.runsPerSecond)} (${int(drainThree.runsPerSecond)} against ${int(drainOne.runsPerSecond)} runs/s)`,
          verdict: verdict(drainThree.runsPerSecond >= 0.95 * drainOne.runsPerSecond),
        },
  )
  return checks
}

/**
 * The further targets, beside the targets table: p99 at the fewest connections, `createdAt` drift, the `-wal` file,
 * cold start.
 */
export function earlierTargetChecks(r: BenchResults): TargetCheck[] {
  const row = 'further'
  const fewest = Math.min(...r.settings.connections)
  const checks: TargetCheck[] = r.scenarios.filter((s) => hasP99Target(s.id)).flatMap((s) => {
    const run = runAt(s, fewest)
    if (!run) return []
    return [{ row, target: `${s.title}: p99 ≤ ${P99_TARGET_MS} ms at ${fewest} connections`, measured: `${ms(run.trellis.latency.p99)} ms ((b): ${ms(run.minimal.latency.p99)} ms)`, verdict: verdict(run.trellis.latency.p99 <= P99_TARGET_MS) }]
  })
  const leads = [...r.webhookCreatedAtLeadMs, ...(r.executor ? [r.executor.createdAtLeadMs.max] : [])]
  checks.push(
    leads.length === 0
      ? notMeasured(row, '`createdAt` drift ≤ 1 s', 'no Trellis webhook run and no executor phase')
      : {
          row,
          target: '`createdAt` drift ≤ 1 s (newest activity entry minus the wall clock)',
          measured: [
            r.webhookCreatedAtLeadMs.length ? `${seconds(Math.max(...r.webhookCreatedAtLeadMs))} after the webhook 202 runs` : null,
            r.executor ? `${seconds(r.executor.createdAtLeadMs.max)} during and after the executor burst` : null,
          ].filter((part) => part !== null).join('; '),
          verdict: verdict(Math.max(...leads) <= 1000),
        },
    { row, target: '`-wal` file < 64 MB (largest seen, every 100 ms)', measured: mb(r.walMaxBytes), verdict: verdict(r.walMaxBytes < 64 * MB) },
    { row, target: `cold start ≤ 100 ms (${r.footprint.coldStartOf}, median)`, measured: `${ms(r.footprint.coldStartMedianMs)} ms`, verdict: verdict(r.footprint.coldStartMedianMs <= 100) },
  )
  return checks
}

/** The method of the run in words, then its tables (docs/performance.md quotes them). */
export function fullReport(r: BenchResults): string {
  const most = Math.max(...r.settings.connections)
  const fewest = Math.min(...r.settings.connections)
  return [
    '## Latest figures',
    '',
    `Measured with \`${r.command}\` on ${r.date.slice(0, 16).replace('T', ' ')} UTC: ${r.machine.nproc} cores (${r.machine.cpu}), ${r.machine.memoryGiB} GiB, ` +
      `Bun ${r.machine.bun}, loopback only. The database held ` +
      `${int(r.seed.notes)} notes (${int(r.seed.messages)} messages), ${int(r.seed.records)} records, ${int(r.seed.users)} users and ` +
      `${r.seed.workflows} workflows with their webhook enabled; rate limits were raised by configuration, the limiter stayed on the request path. ` +
      `The load generator is ${r.generator} (Debian's package) with one thread, pinned to its own core while the server under test has the other; ` +
      'its Lua script (`bench/wrk.lua`) sends a record id no other request used with each webhook 202, the records with an active run with ' +
      'each 409, and counts every status: an answer with another status than the scenario\'s is reported as unexpected, never dropped. ' +
      `Every scenario runs at ${r.settings.connections.join(' and at ')} connections: at ${most} the server is saturated and p99 is mostly queueing ` +
      `(p50 ≈ connections ÷ rps), so latency is read at ${fewest}. Each run also measures the CPU time the server and wrk spent per response ` +
      '(the server from `/proc/<pid>/stat` over the measured run, wrk from its own resource usage): baseline (a) is a bare `Bun.serve` ' +
      'answering 202 with a body of the same size, and its server-busy and wrk-busy columns show whether its rps is the server\'s ceiling ' +
      '(server core near 100 %) or the generator\'s; its server µs/req gives the ceiling either way (1e6 ÷ µs/req, shown). Where wrk ' +
      'nears its core, the line under the tables names the run. Baseline (b) is `bench/baselines/minimal.ts`, the naive durable path on the same database file with prepared statements only ' +
      '(one transaction per request; webhook: sha256 of the token, one token SELECT, one run INSERT under the partial unique index; lists: the token, one indexed page ' +
      'query and one query for its messages; its deep page turns `createdAt.lt` into an id bound and its `userEmail`+`teamName` page stays ' +
      'on the user\'s index; the inbox: the join of the open tasks with their assignees naming the caller or their teams, newest first; ' +
      'a decision: the task if the caller may decide it, the decision, the task closed and its run woken, in one transaction). During the HTTP scenarios Trellis ran with `TRELLIS_EXECUTOR_CONCURRENCY=0` (the executor is measured ' +
      'on its own below) and wrote its request log lines to `/dev/null`. The last tables put each target (every area of the targets ' +
      'table) and the further targets next to its figure, PASS or MISS (reported, never asserted). The machine is shared and noisy: read the ratios, not the absolute figures.',
    '',
    markdownTables(r),
    '',
    `Reproduce: \`npm ci && npm run bench\` (needs \`wrk\`; about ${Math.max(1, Math.round(r.totalSeconds / 60))} minutes; results in \`bench/results/<date>-<commit>.json\`). ` +
      '`npm run bench -- --quick` (100,000 notes, 1 s runs without warm-up) is the smoke run of `.ci/run`; neither asserts thresholds.',
  ].join('\n')
}

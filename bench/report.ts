/** Turns a bench run into the markdown tables (stdout, README) and the JSON kept in bench/results/. */
import type { ExecutorResult } from './executor.ts'
import type { LoginFloodResult } from './login-flood.ts'
import type { LoadResult } from './procs.ts'

export interface ScenarioResult {
  id: string
  title: string
  expect: number
  trellis: LoadResult
  minimal: LoadResult
  walMaxBytes: number
}

export interface BenchResults {
  date: string
  mode: 'full' | 'quick'
  command: string
  machine: { nproc: number; cpu: string; memoryGiB: number; kernel: string; bun: string; node: string; pinning: string }
  generator: string
  commit: string
  server: string
  settings: { connections: number; durationSeconds: number; warmupSeconds: number }
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
  }
  bare: LoadResult
  scenarios: ScenarioResult[]
  executor: ExecutorResult | null
  /** Absent in results written before the login flood joined the bench. */
  loginFlood?: LoginFloodResult
  footprint: {
    coldStartMs: number[]
    coldStartMedianMs: number
    coldStartOf: string
    idleRssBytes: number
    peakRssWebhookBytes: number
    rssAfterLoadBytes: number
    peakRssBytes: number
    binaryBytes: number | null
  }
  walMaxBytes: number
  totalSeconds: number
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`
const int = (n: number) => Math.round(n).toLocaleString('en-US')
const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))
const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : 'n/a')

export function markdownTables(r: BenchResults): string {
  const lines: string[] = []
  lines.push(
    `${r.settings.connections} connections, ${r.settings.durationSeconds} s per scenario after ${r.settings.warmupSeconds} s of warm-up, ` +
      `${r.generator}; ${r.machine.pinning}. Trellis: ${r.server}. Ratio = Trellis rps ÷ baseline (b) rps for the same requests.`,
    '',
    '| scenario | Trellis rps | p50 ms | p99 ms | unexpected | baseline (b) rps | (b) p99 ms | ratio to (b) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  )
  lines.push(
    `| (a) bare \`Bun.serve\` 202, same body size | ${int(r.bare.rps)} | ${ms(r.bare.latency.p50)} | ${ms(r.bare.latency.p99)} | ${r.bare.unexpected} | | | |`,
  )
  for (const s of r.scenarios) {
    lines.push(
      `| ${s.title} | ${int(s.trellis.rps)} | ${ms(s.trellis.latency.p50)} | ${ms(s.trellis.latency.p99)} | ${s.trellis.unexpected} | ` +
        `${int(s.minimal.rps)} | ${ms(s.minimal.latency.p99)} | ${ratio(s.trellis.rps, s.minimal.rps)} |`,
    )
  }
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
      lines.push(`| queue latency at a steady ${s.rate} webhook runs/s (p50 / p99, ${int(s.runs)} runs) | ${ms(s.p50)} / ${ms(s.p99)} ms |`)
    }
    const idle = r.scenarios.find((s) => s.id === 'notes-10')?.trellis.latency.p99 ?? 0
    lines.push(
      `| notes \`limit=10\` while the executor is busy: rps, p99 (idle p99), unanswered at the end | ${int(e.notesWhileBusy.rps)} rps, ${e.notesWhileBusy.responses > 0 ? `${ms(e.notesWhileBusy.latency.p99)} ms` : 'no response'} (${ms(idle)} ms), ${e.notesWhileBusy.unanswered}${e.busyThroughout ? '' : ' — executor drained before the load ended'} |`,
      e.probe.requests > 0
        ? `| one notes request at a time beside it: answered, p50 / max${e.probe.timedOut ? ', still waiting after 15 s' : ''} | ${e.probe.requests}, ${ms(e.probe.p50)} / ${ms(e.probe.max)} ms${e.probe.timedOut ? `, ${e.probe.timedOut}` : ''} |`
        : `| one notes request at a time beside it | none answered: still waiting after 15 s |`,
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
  const f = r.footprint
  lines.push(
    '',
    '| footprint | |',
    '|---|---:|',
    `| seeding: ${int(r.seed.notes)} notes, ${int(r.seed.messages)} messages, ${int(r.seed.activityEntries)} activity entries | ${r.seed.seconds.toFixed(1)} s, ${int(r.seed.notesPerSecond)} notes/s (${int(r.seed.rowsPerSecond)} rows/s) |`,
    `| cold start to first 200 on \`/healthz\` (${f.coldStartOf}, median of ${f.coldStartMs.length}) | ${ms(f.coldStartMedianMs)} ms |`,
    `| idle RSS after start / after the HTTP scenarios | ${mb(f.idleRssBytes)} / ${mb(f.rssAfterLoadBytes)} |`,
    `| peak RSS in the webhook scenario / over all HTTP scenarios | ${mb(f.peakRssWebhookBytes)} / ${mb(f.peakRssBytes)} |`,
    `| binary size (\`dist/trellis\`) | ${f.binaryBytes === null ? 'not built' : mb(f.binaryBytes)} |`,
    `| database after seeding / bytes per note (messages, activity and indexes included) | ${mb(r.seed.databaseBytes)} / ${int(r.seed.bytesPerNote)} B |`,
    `| largest \`-wal\` file seen (every 100 ms, all phases) | ${mb(r.walMaxBytes)} |`,
  )
  return lines.join('\n')
}

export function readmeSection(r: BenchResults): string {
  return [
    '## Performance',
    '',
    `Measured with \`${r.command}\` on ${r.date.slice(0, 16).replace('T', ' ')} UTC: ${r.machine.nproc} cores (${r.machine.cpu}), ${r.machine.memoryGiB} GiB, ` +
      `Bun ${r.machine.bun}, load generator ${r.generator} on Node ${r.machine.node}, loopback only. The database held ` +
      `${int(r.seed.notes)} notes (${int(r.seed.messages)} messages), ${int(r.seed.records)} records, ${int(r.seed.users)} users and ` +
      `${r.seed.workflows} workflows with their webhook enabled; rate limits were raised by configuration, the limiter stayed on the request path. ` +
      'Baseline (a) is a bare `Bun.serve` answering 202 with a body of the same size (the HTTP ceiling of this machine and generator); ' +
      'baseline (b) is `bench/baselines/minimal.ts`, the minimal durable path on the same database file with prepared statements only ' +
      '(webhook: sha256 of the token, one token SELECT, one run INSERT under the partial unique index; lists: the token, one indexed page ' +
      'query and one query for its messages; its deep page turns `createdAt.lt` into an id bound and its `userEmail`+`teamName` page stays ' +
      'on the user\'s index). During the HTTP scenarios Trellis ran with `TRELLIS_EXECUTOR_CONCURRENCY=0` (the executor is measured ' +
      'on its own below) and wrote its request log lines to `/dev/null`. The machine is shared and noisy: read the ratios, not the absolute figures.',
    '',
    markdownTables(r),
    '',
    `Reproduce: \`npm ci && npm run bench\` (about ${Math.max(1, Math.round(r.totalSeconds / 60))} minutes; results in \`bench/results/<date>.json\`). ` +
      '`npm run bench -- --quick` (100,000 notes, 3 s scenarios) is the smoke run of `.ci/run`; neither asserts thresholds.',
  ].join('\n')
}

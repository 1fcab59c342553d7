/**
 * `npm run bench:tracing [-- --runs 2000 --rounds 3 --connections 32 --source]`: what OpenTelemetry tracing costs
 * (docs/tracing.md "Cost"), off against on at 100 % sampling, on the compiled binary (built into a temp dir; `--source`:
 * `bun src/main.ts`) serving one SQLite data directory seeded with the Acme fixture and `--runs` orders.
 *
 * Each round, for each side in turn (so that the machine's drift falls on both alike):
 * - trigger: `--runs` webhook calls (one per order, `--connections` at once) to a server whose executor is off
 *   (TRELLIS_EXECUTOR_CONCURRENCY=0), so the calls alone are measured: calls/s and the server's CPU per call;
 * - executor: a server with its executor on drains the runs those calls queued (two steps each: an update and a note):
 *   runs/s and the server's CPU per run.
 * "On" exports to an OTLP/HTTP sink in this process (127.0.0.1), which counts what it receives. Prints one line per
 * measurement and a JSON summary; asserts nothing.
 */
import { Database } from 'bun:sqlite'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pkg from '../package.json' with { type: 'json' }
import { cpuTimeUs, RAISED_RATE_LIMITS, repoRoot, type Server, startServer } from './procs.ts'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { systemClock } from '../src/lib/clock.ts'
import { loadInstanceSecret } from '../src/lib/secret.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, reportHook, tokenFor } from '../test/support/acme.ts'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    source: { type: 'boolean', default: false },
  },
})
const RUNS = Number(values.runs)
const ROUNDS = Number(values.rounds)
const CONNECTIONS = Number(values.connections)

const work = mkdtempSync(join(tmpdir(), 'trellis-bench-tracing-'))
const dataDir = join(work, 'data')

/** The OTLP sink: answers every export, counting the spans (each has one start time; a link has none). */
let spansReceived = 0
const sink = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(request) {
    const text = await request.text()
    spansReceived += text.split('"startTimeUnixNano"').length - 1
    return Response.json({})
  },
})

async function build(): Promise<string[]> {
  if (values.source) return [process.execPath, join(repoRoot, 'src/main.ts')]
  const binary = join(work, 'trellis')
  const args = pkg.scripts.build.replace('dist/trellis', binary).split(' ').slice(1)
  const proc = Bun.spawn([process.execPath, ...args], { cwd: repoRoot, stdout: 'ignore', stderr: 'inherit' })
  if ((await proc.exited) !== 0) throw new Error('build failed')
  return [binary]
}

/** The Acme fixture, `RUNS` orders, and a two-step webhook workflow on them. */
async function seed(): Promise<{ hook: string; token: string; orders: string[] }> {
  const store = openStore(dataDir)
  try {
    migrate(store.sqlite)
    const document = acmeDocument()
    const project = acmeProject(document)
    const orders = Array.from({ length: RUNS }, (_, i) => `bench_${i}`)
    for (const id of orders) project.records!.push({ environment: 'production', collection: 'orders', id, data: { status: 'open' } })
    project.workflows!.push(ordersWorkflow('Bench traced', [
      { type: 'update', name: 'mark', set: { status: 'seen' } },
      { type: 'note', title: 'Seen', content: 'Order {{record.id}}' },
    ], { webhook: { enabled: true } }))
    const report = await applyAcme({ store, clock: systemClock, secret: loadInstanceSecret(dataDir), baseUrl: 'http://127.0.0.1' }, document)
    return { hook: reportHook(report, 'Bench traced'), token: (await tokenFor(store, systemClock, 'bob', ['workflows:trigger'])).value, orders }
  } finally {
    store.close()
  }
}

function serve(command: string[], traced: boolean, executor: boolean): Promise<Server> {
  return startServer({
    name: `${traced ? 'on' : 'off'}-${executor ? 'executor' : 'trigger'}`,
    command: (port) => [...command, 'serve', '--port', String(port), '--data', dataDir],
    env: {
      ...RAISED_RATE_LIMITS,
      TRELLIS_LOG_LEVEL: 'warn',
      TRELLIS_EXECUTOR_CONCURRENCY: executor ? '8' : '0',
      ...(traced ? { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`, OTEL_TRACES_SAMPLER: 'always_on' } : {}),
    },
    stderrFile: join(work, `${traced ? 'on' : 'off'}.stderr`),
  })
}

const left = () => {
  const db = new Database(join(dataDir, 'trellis.db'), { readonly: true })
  try {
    return (db.prepare("SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running')").get() as { n: number }).n
  } finally {
    db.close()
  }
}

/** Every order's webhook call, CONNECTIONS at once: calls/s and server CPU per call. */
async function triggers(server: Server, hook: string, token: string, orders: string[]) {
  const cpuBefore = cpuTimeUs(server.pid)
  const started = performance.now()
  let next = 0
  let unexpected = 0
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (next < orders.length) {
      const id = orders[next++]!
      const answer = await fetch(`${server.url}${hook}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
        body: JSON.stringify({ record_id: id }),
      })
      if (answer.status !== 202) unexpected++
      await answer.arrayBuffer()
    }
  }))
  const seconds = (performance.now() - started) / 1000
  return { perSecond: orders.length / seconds, cpuUs: (cpuTimeUs(server.pid) - cpuBefore) / orders.length, unexpected }
}

/** Until the queued runs are done: runs/s and server CPU per run. */
async function drain(server: Server, runs: number) {
  const cpuBefore = cpuTimeUs(server.pid)
  const started = performance.now()
  while (left() > 0) await Bun.sleep(20)
  const seconds = (performance.now() - started) / 1000
  return { perSecond: runs / seconds, cpuUs: (cpuTimeUs(server.pid) - cpuBefore) / runs }
}

const command = await build()
const seeded = await seed()
const results: Record<'off' | 'on', { trigger: Awaited<ReturnType<typeof triggers>>[]; executor: Awaited<ReturnType<typeof drain>>[] }> = {
  off: { trigger: [], executor: [] },
  on: { trigger: [], executor: [] },
}
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const side of round % 2 === 1 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
      const traced = side === 'on'
      const triggering = await serve(command, traced, false)
      const t = await triggers(triggering, seeded.hook, seeded.token, seeded.orders)
      await triggering.stop()
      const executing = await serve(command, traced, true)
      const e = await drain(executing, seeded.orders.length)
      await executing.stop()
      results[side].trigger.push(t)
      results[side].executor.push(e)
      console.log(`round ${round} ${side.padEnd(3)} trigger ${t.perSecond.toFixed(0)}/s ${t.cpuUs.toFixed(0)} µs CPU/call (unexpected ${t.unexpected}) · executor ${e.perSecond.toFixed(0)} runs/s ${e.cpuUs.toFixed(0)} µs CPU/run`)
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const summary = Object.fromEntries((['off', 'on'] as const).map((side) => [side, {
    triggerPerSecond: Math.round(median(results[side].trigger.map((r) => r.perSecond))),
    triggerCpuUs: Math.round(median(results[side].trigger.map((r) => r.cpuUs))),
    executorRunsPerSecond: Math.round(median(results[side].executor.map((r) => r.perSecond))),
    executorCpuUsPerRun: Math.round(median(results[side].executor.map((r) => r.cpuUs))),
  }]))
  console.log(JSON.stringify({ runs: RUNS, rounds: ROUNDS, connections: CONNECTIONS, binary: !values.source, spansReceived, medians: summary }))
} finally {
  sink.stop(true)
  rmSync(work, { recursive: true, force: true })
}

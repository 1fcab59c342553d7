/**
 * `bun bench/pg-capacity.ts [--triggers N] [--runs-concurrency N]`: what one webhook trigger and one three-step run
 * cost on PostgreSQL — Trellis CPU, PostgreSQL CPU, WAL bytes, statements, transactions, rows written and dead, bytes
 * kept — the inputs of the capacity model in docs/scaling-out.md. One real `trellis serve` on a throw-away cluster
 * (the bench's settings: synchronous_commit off), first with its executor off while the triggers queue their runs,
 * then another with its executor on draining them. Figures are per trigger and per run; asserts nothing; prints JSON
 * to stdout and progress to stderr.
 */
import { SQL } from 'bun'
import { acmeDocument, acmeProject, ordersWorkflow } from '../test/support/acme.ts'
import { triggerRequest } from '../test/support/faults.ts'
import { startInstances } from '../test/support/instances.ts'
import { psqlSync, startCluster } from '../test/support/postgres-cluster.ts'
import { clusterCpuUs, cpuTimeUs, log, option } from './procs.ts'
import { POSTGRES_SETTINGS } from './postgres.ts'

const TRIGGERS = Number(option('triggers', '3000'))
const IN_FLIGHT = 16

interface Counters {
  trellisUs: number
  postgresUs: number
  walBytes: number
  statements: number
  commits: number
  inserted: number
  updated: number
  deleted: number
}

const cluster = startCluster({ settings: { ...POSTGRES_SETTINGS, shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track_planning': 'on' } })
psqlSync(cluster.url, 'CREATE DATABASE trellis')
const url = cluster.url.replace(/\/postgres$/, '/trellis')
const sql = new SQL({ url, max: 1 })
await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`

async function counters(trellisPid: number): Promise<Counters> {
  const [row] = (await sql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal,
      (SELECT coalesce(sum(calls), 0)::float8 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'trellis') AS statements,
      xact_commit::float8 AS commits, tup_inserted::float8 AS inserted, tup_updated::float8 AS updated, tup_deleted::float8 AS deleted
    FROM pg_stat_database WHERE datname = 'trellis'`) as { wal: number; statements: number; commits: number; inserted: number; updated: number; deleted: number }[]
  return {
    trellisUs: cpuTimeUs(trellisPid),
    postgresUs: clusterCpuUs(cluster.local!.dataDir),
    walBytes: row!.wal,
    statements: row!.statements,
    commits: row!.commits,
    inserted: row!.inserted,
    updated: row!.updated,
    deleted: row!.deleted,
  }
}

/** `after − before` per unit, rounded; the statistics views lag a moment (pg_stat_force_next_flush, PostgreSQL 15+). */
function perUnit(before: Counters, after: Counters, units: number) {
  const per = (key: keyof Counters) => Math.round(((after[key] - before[key]) / units) * 10) / 10
  return {
    trellisCpuUs: per('trellisUs'),
    postgresCpuUs: per('postgresUs'),
    walBytes: per('walBytes'),
    statements: per('statements'),
    commits: per('commits'),
    rowsInserted: per('inserted'),
    rowsUpdated: per('updated'),
    rowsDeleted: per('deleted'),
  }
}

/** One statement's figures in `pg_stat_statements` (its text shortened to a line). */
interface StatementStats {
  calls: number
  plans: number
  ms: number
  mean: number
  planMs: number
  query: string
}

/** The `limit` statements first by `order` since the last reset of `pg_stat_statements`. */
async function topStatements(order: 'total_exec_time' | 'calls' | 'total_plan_time', limit: number): Promise<StatementStats[]> {
  return (await sql.unsafe(
    `SELECT calls::int AS calls, plans::int AS plans, round(total_exec_time)::int AS ms, round(mean_exec_time::numeric, 3)::float8 AS mean,
       round(total_plan_time)::int AS "planMs", left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 140) AS query
     FROM pg_stat_statements ORDER BY ${order} DESC LIMIT $1`,
    [limit],
  )) as StatementStats[]
}

/**
 * The statements PostgreSQL planned most since the last reset (a prepared statement is planned again at each execution
 * while its custom plans look cheaper than a generic one; one without parameters Bun sends as a simple query).
 */
async function mostPlanned(): Promise<StatementStats[]> {
  const rows = await topStatements('total_plan_time', 12)
  for (const t of rows) log(`  planned ${t.plans} of ${t.calls} calls, ${t.planMs} ms: ${t.query}`)
  return rows
}

const TABLES = ['runs', 'run_steps', 'run_events', 'activity_logs', 'activity_log_records', 'notes', 'records', 'idempotency_keys']
async function tableBytes(): Promise<Record<string, number>> {
  const rows = (await sql`SELECT c.relname AS name, pg_total_relation_size(c.oid)::float8 AS bytes FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname IN ${sql(TABLES)}`) as { name: string; bytes: number }[]
  return Object.fromEntries(rows.map((row) => [row.name, row.bytes]))
}

const document = acmeDocument()
const acme = acmeProject(document)
const steps = [{ type: 'load' }, { type: 'update', set: { status: 'processed' } }, { type: 'note', title: 'Processed', content: '<p>processed</p>' }]
acme.workflows!.push(ordersWorkflow('Counted', steps, { webhook: { enabled: true, ratePerMinute: 100_000 } }))
for (let i = 0; i <= TRIGGERS; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `cap_${i}`, data: { status: 'paid' } })
const RAISED = { TRELLIS_WEBHOOK_RATE_PER_MIN: '1000000000', TRELLIS_API_RATE_PER_MIN: '1000000000' }

const result: Record<string, unknown> = { triggers: TRIGGERS, settings: POSTGRES_SETTINGS, server: psqlSync(cluster.url, 'SHOW server_version').trim() }
try {
  log(`applying ${TRIGGERS} records, one instance with its executor off`)
  const triggering = await startInstances({ url, document, count: 1, env: { ...RAISED, TRELLIS_EXECUTOR_CONCURRENCY: '0' } })
  const token = await triggering.token('bob@example.com', 'erp', 'workflows:trigger')
  const instance = triggering.instances[0]!
  // Warm the caches (token, workflow, membership) with a trigger of a record left out of the figures.
  await (await fetch(`${instance.url}${triggering.hooks.Counted}`, triggerRequest(token, 'cap_0'))).arrayBuffer()
  const bytes0 = await tableBytes()
  await sql`SELECT pg_stat_statements_reset()`
  const before = await counters(instance.proc.pid)
  const started = performance.now()
  let next = 1
  const statuses: Record<number, number> = {}
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = next++; i <= TRIGGERS; i = next++) {
        const response = await fetch(`${instance.url}${triggering.hooks.Counted}`, triggerRequest(token, `cap_${i}`))
        await response.arrayBuffer()
        statuses[response.status] = (statuses[response.status] ?? 0) + 1
      }
    }),
  )
  const triggerSeconds = (performance.now() - started) / 1000
  await Bun.sleep(1000) // the statistics collector's flush
  const after = await counters(instance.proc.pid)
  const bytes1 = await tableBytes()
  result.trigger = { statuses, perSecond: Math.round(TRIGGERS / triggerSeconds), ...perUnit(before, after, TRIGGERS), note: 'Trellis CPU includes HTTP parsing; the load generator runs in this process, not counted' }
  log(`triggers: ${JSON.stringify(result.trigger)}`)
  result.triggerStatementsByPlanning = await mostPlanned()
  await triggering.close()

  log('one instance with its executor on, draining the queued runs')
  const draining = await startInstances({ url, document, count: 1, env: { ...RAISED, TRELLIS_EXECUTOR_CONCURRENCY: '8', TRELLIS_EXECUTOR_LEASE_SECONDS: '30' } })
  const drainer = draining.instances[0]!
  await sql`SELECT pg_stat_statements_reset()`
  const drainBefore = await counters(drainer.proc.pid)
  const drainStarted = performance.now()
  for (;;) {
    const [row] = (await sql`SELECT count(*)::int AS n FROM runs WHERE status IN ('queued', 'running')`) as { n: number }[]
    if (row!.n === 0) break
    if (performance.now() - drainStarted > 300_000) throw new Error(`${row!.n} runs still active after 300 s`)
    await Bun.sleep(100)
  }
  const drainSeconds = (performance.now() - drainStarted) / 1000
  await Bun.sleep(1000)
  const drainAfter = await counters(drainer.proc.pid)
  const bytes2 = await tableBytes()
  const [ended] = (await sql`SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded, count(*)::int AS runs FROM runs`) as { succeeded: number; runs: number }[]
  result.run = { ...ended, perSecond: Math.round(ended!.runs / drainSeconds), ...perUnit(drainBefore, drainAfter, ended!.runs) }
  log(`runs: ${JSON.stringify(result.run)}`)
  const top = await topStatements('total_exec_time', 10)
  result.runStatements = top
  for (const t of top) log(`  ${t.ms} ms in ${t.calls} calls (mean ${t.mean} ms): ${t.query}`)
  // The statements a run sends, most called first: where the round trips go.
  const mostCalled = await topStatements('calls', 25)
  result.runStatementsByCalls = mostCalled
  for (const t of mostCalled) log(`  ${(t.calls / ended!.runs).toFixed(2)} a run, ${t.ms} ms: ${t.query}`)
  result.runStatementsByPlanning = await mostPlanned()
  await draining.close()
  // Bytes kept per trigger and its run (tables with their indexes and TOAST), after both phases.
  result.bytesKept = Object.fromEntries(TABLES.map((name) => [name, Math.round(((bytes2[name] ?? 0) - (bytes0[name] ?? 0)) / TRIGGERS)]))
  result.bytesKeptBetweenPhases = Object.fromEntries(TABLES.map((name) => [name, Math.round(((bytes1[name] ?? 0) - (bytes0[name] ?? 0)) / TRIGGERS)]))
  console.log(JSON.stringify(result, null, 2))
} finally {
  await sql.close()
  cluster.stop()
}

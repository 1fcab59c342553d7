/**
 * `bun bench/pg-commit-order.ts [--seconds 10 --connections 16 --writers 1,3 --modes lock,sequencer,watermark
 * --settle-ms 5]`: a
 * prototype, not wired into the product (docs/scaling-out.md "Next step"). One environment's triggers on a throw-away
 * cluster, written three ways by
 * `--writers` processes (instances) of `--connections` connections each, for `--seconds`:
 *
 * - `lock`: both rows dated under the environment's locks (the product's runs still are: src/db/queue.ts
 *   `QUEUE_RUN`; its activity entries are the lists' pass's): BEGIN; the environment's runs and activity locks in one
 *   statement; the run after the newest (`max(now, newest + 1 µs)`); its entry after the newest entry; COMMIT. Times follow commit order because commits of one environment are serialized: the lock's hold
 *   time bounds the environment's triggers per second.
 * - `sequencer`: no lock. BEGIN; the run and its entry inserted undated, with the writer's transaction id
 *   (`pg_current_xact_id()`); COMMIT. A sequencer (any instance; `pg_try_advisory_xact_lock` keeps it to one at a
 *   time per environment) dates, in one statement per pass, every undated row whose transaction id is below the
 *   oldest transaction still open (`pg_snapshot_xmin(pg_current_snapshot())`): no transaction that could still commit
 *   a row below that bound is running, so the rows it dates are final, and they get times after every row dated
 *   before (`max(now, newest + 1 µs)`, in transaction-id order). Lists show dated rows only, ordered by createdAt.
 * - `watermark`: no lock, and ids as today. BEGIN; the run (its list position `seq`) and its entry (its id) drawn
 *   from their sequences after the transaction's id (bench/list-watermark.ts), each with the time the writer proposes
 *   (the database's clock at the insert, so that times mostly follow ids already);
 *   COMMIT. A sequencer pass every 5 ms moves each list's watermark over the positions no transaction can still
 *   commit below, keeping each row's proposed time unless it must move to stay after the row before it. Lists show
 *   the rows at or below the watermark, ordered by position (id for entries, `seq` for runs).
 *
 * Prints, per mode and writer count: triggers per second, their latency (p50, p99), the CPU per trigger of the
 * writers (client) and of PostgreSQL (its backends, from the postmaster's reaped children), the lock's hold time (lock
 * acquired to COMMIT answered) and, for the sequencer, its passes, rows per pass and time per dated row, and how
 * long a row waited to be dated (p50, p99). Checks that every row got a time and that times increase strictly in
 * dating order. Figures go to stdout.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUIDv7, SQL } from 'bun'
import { startCluster } from '../test/support/postgres-cluster.ts'
import { datingInOrder, registerList, WATERMARK_SCHEMA, watermarkPass } from './list-watermark.ts'
import { option, percentile } from './procs.ts'

const SECONDS = Number(option('seconds', '10'))
const CONNECTIONS = Number(option('connections', '16'))
const WRITERS = option('writers', '1,3').split(',').map(Number)
const MODES = option('modes', 'lock,sequencer,watermark').split(',') as Mode[]
/** The watermark's pause after a pass that left marks pending (`--settle-ms`, default the period: 5 ms). */
const SETTLE_MS = Number(option('settle-ms', '5'))
const ENVIRONMENT = 1

type Mode = 'lock' | 'sequencer' | 'watermark'

const SCHEMA = `
  CREATE TABLE runs (id text PRIMARY KEY, environment_id int8 NOT NULL, record_id text NOT NULL, created_at int8, writer_xid xid8, queued_at int8 NOT NULL);
  CREATE INDEX runs_env_id_idx ON runs (environment_id, id);
  CREATE INDEX runs_env_created_idx ON runs (environment_id, created_at);
  CREATE INDEX runs_undated_idx ON runs (environment_id, writer_xid, id) WHERE created_at IS NULL;
  CREATE TABLE activity_logs (id bigserial PRIMARY KEY, environment_id int8 NOT NULL, run_id text, created_at int8, writer_xid xid8, queued_at int8 NOT NULL);
  CREATE INDEX activity_logs_env_created_idx ON activity_logs (environment_id, created_at);
  CREATE INDEX activity_logs_undated_idx ON activity_logs (environment_id, writer_xid, id) WHERE created_at IS NULL;`

// The product reads the newest run by id and stores an id after it (`idAfter`); here the newest time stands in.
const LOCKED_RUN = `INSERT INTO runs (id, environment_id, record_id, created_at, queued_at)
  SELECT $1, $2, $3, greatest($4::int8 * 1000, coalesce((SELECT max(created_at) FROM runs WHERE environment_id = $2), 0) + 1), $4 RETURNING id`
const LOCKED_ENTRY = `INSERT INTO activity_logs (environment_id, run_id, created_at, queued_at)
  SELECT $1, $2, greatest($3::int8 * 1000, coalesce((SELECT max(created_at) FROM activity_logs WHERE environment_id = $1), 0) + 1), $3`
const UNDATED_RUN = `INSERT INTO runs (id, environment_id, record_id, writer_xid, queued_at) VALUES ($1, $2, $3, pg_current_xact_id(), $4)`
const UNDATED_ENTRY = `INSERT INTO activity_logs (environment_id, run_id, writer_xid, queued_at) VALUES ($1, $2, pg_current_xact_id(), $3)`

// The watermark's columns: the runs' list position and the entries' id drawn after the transaction's id.
const WATERMARKED = `${WATERMARK_SCHEMA}
  CREATE SEQUENCE runs_seq CACHE 1;
  ALTER TABLE runs ADD COLUMN seq int8 NOT NULL DEFAULT trellis_sequenced_id('runs_seq');
  CREATE UNIQUE INDEX runs_seq_idx ON runs (seq);
  CREATE INDEX runs_env_seq_idx ON runs (environment_id, seq);
  ALTER TABLE activity_logs ALTER COLUMN id SET DEFAULT trellis_sequenced_id('activity_logs_id_seq');
  CREATE INDEX activity_logs_env_id_idx ON activity_logs (environment_id, id);
  ${datingInOrder('date_runs', 'runs', 'seq', 'id')}
  ${datingInOrder('date_activity_logs', 'activity_logs', 'id', 'id')}
  ${registerList('runs', 'runs_seq', 'date_runs')}; ${registerList('activity_logs', 'activity_logs_id_seq', 'date_activity_logs')};`
const PROPOSED_RUN = `INSERT INTO runs (id, environment_id, record_id, created_at, queued_at) VALUES ($1, $2, $3, (extract(epoch FROM clock_timestamp()) * 1e6)::int8, $4)`
const PROPOSED_ENTRY = `INSERT INTO activity_logs (environment_id, run_id, created_at, queued_at) VALUES ($1, $2, (extract(epoch FROM clock_timestamp()) * 1e6)::int8, $3)`

/** One pass of the sequencer over a table: dates what is final, in (writer_xid, id) order; answers the rows dated. */
const dateTable = (table: string) => `WITH bound AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
  settled AS (SELECT id, row_number() OVER (ORDER BY writer_xid, id) AS n FROM runs_or_entries
    WHERE environment_id = $1 AND created_at IS NULL AND writer_xid < (SELECT xmin FROM bound)),
  newest AS (SELECT coalesce(max(created_at), 0) AS at FROM runs_or_entries WHERE environment_id = $1)
  UPDATE runs_or_entries t SET created_at = greatest($2::int8 * 1000, (SELECT at FROM newest) + 1) + s.n - 1
  FROM settled s WHERE t.id = s.id RETURNING t.queued_at`.replaceAll('runs_or_entries', table)
const DATE_RUNS = dateTable('runs')
const DATE_ENTRIES = dateTable('activity_logs')

/** The postmaster's pid (the first line of postmaster.pid in the data directory). */
const postmasterPid = (dataDirectory: string) => Number(readFileSync(join(dataDirectory, 'postmaster.pid'), 'utf8').split('\n')[0])

/** CPU (user + system, µs) of the postmaster's children that have exited (cutime + cstime in /proc/PID/stat). */
function reapedCpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[13]) + Number(fields[14])) * 1_000_000) / 100 // clock ticks: 100 a second on Linux
}

/** A writer process: `--connections` loops of triggers for `--seconds`; prints its latencies and hold times as JSON. */
async function writer() {
  const url = option('url', '')
  const mode = option('mode', 'lock') as Mode
  const name = option('name', 'w')
  const sql = new SQL({ url, max: CONNECTIONS })
  const latencies: number[] = []
  const holds: number[] = []
  const until = performance.now() + SECONDS * 1000
  let n = 0
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < until) {
      const started = performance.now()
      const id = randomUUIDv7()
      const record = `${name}-${n++}`
      let locked = 0
      await sql.begin(async (tx) => {
        if (mode === 'lock') {
          await tx.unsafe('SELECT pg_advisory_xact_lock(5, $1::int4), pg_advisory_xact_lock(3, $1::int4)', [ENVIRONMENT])
          locked = performance.now()
          await tx.unsafe(LOCKED_RUN, [id, ENVIRONMENT, record, Date.now()])
          await tx.unsafe(LOCKED_ENTRY, [ENVIRONMENT, id, Date.now()])
        } else if (mode === 'watermark') {
          await tx.unsafe(PROPOSED_RUN, [id, ENVIRONMENT, record, Date.now()])
          await tx.unsafe(PROPOSED_ENTRY, [ENVIRONMENT, id, Date.now()])
        } else {
          await tx.unsafe(UNDATED_RUN, [id, ENVIRONMENT, record, Date.now()])
          await tx.unsafe(UNDATED_ENTRY, [ENVIRONMENT, id, Date.now()])
        }
      })
      const ended = performance.now()
      latencies.push(ended - started)
      if (locked > 0) holds.push(ended - locked)
    }
  }))
  await sql.close()
  console.log(JSON.stringify({ latencies, holds }))
}

/**
 * A dating pass: answers the `queued_at` (epoch ms) of the rows it listed, how many of them it updated, and the time
 * its own statements took (ms; not the bench's reads of `queued_at`).
 */
type Pass = () => Promise<{ queuedAt: number[]; moved: number; ms: number; marksPending?: boolean }>

/** The `sequencer` mode's pass: dates every undated row whose writer's transaction has ended, in one statement a table. */
const datingPass = (sql: SQL): Pass => async () => {
  const started = performance.now()
  const dated = await sql.begin(async (tx) => {
    const mine = ((await tx.unsafe('SELECT pg_try_advisory_xact_lock(9, $1::int4) AS mine', [ENVIRONMENT])) as { mine: boolean }[])[0]!.mine
    if (!mine) return [] as { queued_at: string }[]
    const now = Date.now()
    return [...((await tx.unsafe(DATE_RUNS, [ENVIRONMENT, now])) as { queued_at: string }[]), ...((await tx.unsafe(DATE_ENTRIES, [ENVIRONMENT, now])) as { queued_at: string }[])]
  })
  return { queuedAt: dated.map((row) => Number(row.queued_at)), moved: dated.length, ms: performance.now() - started }
}

/** The `watermark` mode's pass (bench/list-watermark.ts), then the rows it listed read apart for their delay. */
const watermarkingPass = (sql: SQL): Pass => async () => {
  const started = performance.now()
  const listed = await watermarkPass(sql, 9)
  const ms = performance.now() - started
  const queuedAt: number[] = []
  for (const { list, from, to } of listed.filter((range) => range.to > range.from)) {
    const order = list === 'runs' ? 'seq' : 'id'
    const rows = (await sql.unsafe(`SELECT queued_at::float8 AS at FROM ${list} WHERE ${order} > $1 AND ${order} <= $2`, [from, to])) as { at: number }[]
    queuedAt.push(...rows.map((row) => row.at))
  }
  return { queuedAt, moved: listed.reduce((sum, range) => sum + range.moved, 0), ms, marksPending: listed.some((range) => range.pending > 0) }
}

/**
 * The sequencer: a pass every `periodMs` while `running()`, or `SETTLE_MS` after one that left marks pending (the
 * watermark: rows wait for their mark to settle); its pass count, rows listed and moved, statement time.
 */
async function sequencer(pass: Pass, running: () => boolean, periodMs: number) {
  let passes = 0
  let rows = 0
  let moved = 0
  let ms = 0
  const waits: number[] = []
  const timed = async () => {
    const listed = await pass()
    const now = Date.now()
    for (const at of listed.queuedAt) waits.push(now - at)
    passes++
    rows += listed.queuedAt.length
    moved += listed.moved
    ms += listed.ms
    return listed.marksPending === true
  }
  while (running()) {
    const marksPending = await timed()
    await Bun.sleep(marksPending ? SETTLE_MS : periodMs)
  }
  // The writers are done: what they committed last becomes final once no transaction is open (a watermark: two passes).
  for (let i = 0; i < 4; i++) await timed()
  return { passes, rows, moved, ms, waits }
}

async function main() {
  const cluster = startCluster({ fsync: true, settings: { synchronous_commit: 'off', shared_buffers: '256MB', max_connections: '200' } })
  const admin = new SQL({ url: cluster.url, max: 1 })
  try {
    console.log(`one environment, ${CONNECTIONS} connections per writer, ${SECONDS} s per run; PostgreSQL ${((await admin`SHOW server_version`) as { server_version: string }[])[0]!.server_version}`)
    for (const mode of MODES) {
      for (const writers of WRITERS) {
        await admin.unsafe('DROP DATABASE IF EXISTS proto WITH (FORCE)')
        await admin.unsafe('CREATE DATABASE proto')
        const url = cluster.url.replace(/\/postgres$/, '/proto')
        const sql = new SQL({ url, max: 2 })
        await sql.unsafe(SCHEMA)
        if (mode === 'watermark') await sql.unsafe(WATERMARKED)
        const postmaster = postmasterPid(((await admin`SHOW data_directory`) as { data_directory: string }[])[0]!.data_directory)
        const serverBefore = reapedCpuUs(postmaster)
        let running = true
        const dating = mode === 'lock' ? null : sequencer(mode === 'sequencer' ? datingPass(sql) : watermarkingPass(sql), () => running, 5)
        const started = performance.now()
        const children = Array.from({ length: writers }, (_, i) =>
          Bun.spawn([process.execPath, import.meta.path, '--writer', '--url', url, '--mode', mode, '--name', `w${i}`, '--seconds', String(SECONDS), '--connections', String(CONNECTIONS)], { stdout: 'pipe', stderr: 'inherit' }))
        const outputs = await Promise.all(children.map(async (child) => JSON.parse(await new Response(child.stdout).text()) as { latencies: number[]; holds: number[] }))
        const seconds = (performance.now() - started) / 1000
        running = false
        const dated = dating ? await dating : null
        await Promise.all(children.map((child) => child.exited))
        const clientUs = children.reduce((sum, child) => sum + Number(child.resourceUsage()!.cpuTime.total), 0)
        await Bun.sleep(500) // the writers' backends exit and are reaped: their CPU lands in the postmaster's children's
        const latencies = outputs.flatMap((o) => o.latencies).sort((a, b) => a - b)
        const holds = outputs.flatMap((o) => o.holds).sort((a, b) => a - b)
        // Every row dated, times strictly increasing in the order they were dated (the list's order).
        // Watermark: listed means at or below the watermark, and times must increase in list order (runs by seq, entries by id).
        const [check] = (await sql.unsafe(
          mode === 'watermark'
            ? `SELECT count(*)::int AS n, count(*) FILTER (WHERE seq <= (SELECT through FROM list_sequencer WHERE list = 'runs'))::int AS dated, count(DISTINCT created_at)::int AS distinct_times,
                (SELECT count(*) FROM (SELECT created_at <= lag(created_at) OVER (ORDER BY seq) AS late FROM runs) r WHERE late)::int
                + (SELECT count(*) FROM (SELECT created_at <= lag(created_at) OVER (ORDER BY id) AS late FROM activity_logs) a WHERE late)::int AS out_of_order,
                (SELECT count(*) FROM activity_logs WHERE id > (SELECT through FROM list_sequencer WHERE list = 'activity_logs'))::int AS entries_unlisted FROM runs`
            : `SELECT count(*)::int AS n, count(created_at)::int AS dated, count(DISTINCT created_at)::int AS distinct_times, 0 AS out_of_order, 0 AS entries_unlisted FROM runs`,
        )) as { n: number; dated: number; distinct_times: number; out_of_order: number; entries_unlisted: number }[]
        const triggers = latencies.length
        const parts = [
          `${mode.padEnd(9)} ${writers} writer${writers > 1 ? 's' : ' '}: ${Math.round(triggers / SECONDS)} triggers/s`,
          `CPU per trigger: writers ${Math.round(clientUs / triggers)} µs, PostgreSQL ${Math.round((reapedCpuUs(postmaster) - serverBefore) / triggers)} µs`,
          `latency p50 ${percentile(latencies, 50).toFixed(2)} ms p99 ${percentile(latencies, 99).toFixed(2)} ms`,
          holds.length > 0 ? `lock held p50 ${percentile(holds, 50).toFixed(2)} ms (bound ${Math.round(1000 / percentile(holds, 50))}/s)` : 'no lock',
          dated ? `sequencer: ${dated.passes} passes, ${(dated.rows / Math.max(1, dated.passes)).toFixed(1)} rows/pass, ${dated.moved} updated, ${((dated.ms * 1000) / Math.max(1, dated.rows)).toFixed(1)} µs/row, listed after p50 ${percentile(dated.waits.sort((a, b) => a - b), 50)} ms p99 ${percentile(dated.waits, 99)} ms` : '',
          `rows ${check!.n}, listed ${check!.dated}, distinct times ${check!.distinct_times}${mode === 'watermark' ? `, out of order ${check!.out_of_order}, entries unlisted ${check!.entries_unlisted}` : ''}`,
          `(${seconds.toFixed(1)} s wall)`,
        ]
        console.log(parts.filter(Boolean).join(' | '))
        await sql.close()
      }
    }
  } finally {
    await admin.close()
    cluster.stop()
  }
}

if (process.argv.includes('--writer')) await writer()
else await main()

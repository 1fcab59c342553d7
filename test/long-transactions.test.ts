/**
 * A long transaction elsewhere in the PostgreSQL cluster, on a cluster of its own (the shared one's other files hold
 * transactions of their own, and these hold theirs for seconds, which would hold back every other file's lists):
 * - src/db/postgres/transaction-watch.ts: a real `serve` with TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS=1 sees
 *   another session hold a transaction id past it — the log names the session once, `/readyz` answers 200 `degraded`
 *   (`long_transaction`) and `/metrics` shows the age — and once it commits, ready again and the gauge back to 0;
 * - src/db/postgres/listing-watch.ts: with TRELLIS_LISTING_DELAY_SECONDS=1, a run event id drawn while such a
 *   transaction is open stays unlisted — `trellis_list_lag_seconds` grows, the log names the session once, `/readyz`
 *   answers `degraded` (`listing_delayed`) — and once it commits, the list catches up and the instance is ready.
 * SQLite has no other writers: its `/readyz` never says so.
 */
import { afterAll, afterEach, beforeAll, expect } from 'bun:test'
import { SQL } from 'bun'
import { POSTGRES_ONLY, postgresOnlyTest, runCli, type ServeProcess, startServe, TEST_STORE, tempDir, until } from './helpers.ts'
import { type Cluster, psqlSync, startCluster } from './support/postgres-cluster.ts'

let cluster: Cluster | undefined
let url: string
let server: ServeProcess | undefined
const cwd = tempDir()

beforeAll(async () => {
  if (TEST_STORE !== 'postgres') return
  cluster = startCluster()
  psqlSync(cluster.url, 'CREATE DATABASE trellis')
  url = cluster.url.replace(/\/postgres$/, '/trellis')
  const migrated = await runCli(['migrate', '--data', cwd.path], { env: { TRELLIS_DATABASE_URL: url } })
  if (migrated.code !== 0) throw new Error(`trellis migrate: ${migrated.stderr}`)
}, 60_000)

afterEach(async () => {
  await server?.stop('SIGTERM')
  server = undefined
})

afterAll(() => {
  cluster?.stop()
  cwd.cleanup()
})

/** A `serve` on the cluster's database with these limits (seconds). */
async function serveWith(limits: { longTransaction: number; listingDelay: number }): Promise<ServeProcess> {
  server = await startServe({
    dataDir: cwd.path,
    cwd: cwd.path,
    env: {
      TRELLIS_DATABASE_URL: url,
      TRELLIS_LOG_LEVEL: 'info',
      TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS: String(limits.longTransaction),
      TRELLIS_LISTING_DELAY_SECONDS: String(limits.listingDelay),
      TRELLIS_SECRET: 'long-transactions-secret-0123456789abcdef',
    },
    timeoutMs: 20_000,
  })
  return server
}

/** The server's log lines (warnings and errors go to stderr). */
const logLines = (served: ServeProcess) => `${served.stdout()}\n${served.stderr()}`.split('\n')
/** The warnings that name `limit` and the session `pid`. */
const warningsAbout = (served: ServeProcess, limit: string, pid: number) => logLines(served).filter((line) => line.includes(`past ${limit}`) && line.includes(`"pid":${pid},`))
const readyz = async (served: ServeProcess) => (await (await fetch(`${served.url}/readyz`)).json()) as { status: string; code?: string; message?: string }
const metric = async (served: ServeProcess, pattern: RegExp) => Number(pattern.exec(await (await fetch(`${served.url}/metrics`)).text())?.[1])
const oldestSeconds = (served: ServeProcess) => metric(served, /^trellis_database_oldest_transaction_seconds (\S+)$/m)
const runEventsLag = (served: ServeProcess) => metric(served, /^trellis_list_lag_seconds\{list="run_events"\} (\S+)$/m)
const activityLag = (served: ServeProcess) => metric(served, /^trellis_list_lag_seconds\{list="activity_logs"\} (\S+)$/m)

/** The run events' watermark. */
const listedThrough = (list = 'run_events') => Number(psqlSync(url, `SELECT through FROM list_sequencer WHERE list = '${list}'`).trim())

/** `/readyz`'s answer once it says `degraded`. */
const degradedAnswer = (served: ServeProcess) =>
  until('/readyz to say degraded', async () => {
    const answer = await readyz(served)
    return answer.status === 'degraded' ? answer : null
  }, 20_000, 100)

/** Resolves once `/readyz` says `ready` again. */
const readyAgain = (served: ServeProcess) => until('/readyz to say ready', async () => (await readyz(served)).status === 'ready' || null, 20_000, 100)

/**
 * Another session's transaction that asked for a transaction id (as any write does) and then waits, like a report
 * left open: `pid` its session, `release` commits it.
 */
async function heldTransaction(): Promise<{ pid: number; release: () => Promise<void> }> {
  const other = new SQL({ url, max: 1 })
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let held!: (pid: number) => void
  const holding = new Promise<number>((resolve) => (held = resolve))
  const transaction = other.begin(async (tx) => {
    const [row] = (await tx`SELECT pg_backend_pid() AS pid, pg_current_xact_id()::text AS xid`) as { pid: number }[]
    held(row!.pid)
    await released
  })
  return {
    pid: await holding,
    release: async () => {
      release()
      await transaction
      await other.close()
    },
  }
}

postgresOnlyTest(
  POSTGRES_ONLY.concurrentWriters,
  'a transaction held open past the limit by another session: logged once with its session, /readyz degraded, the age in /metrics; ready again once it ends',
  async () => {
    const served = await serveWith({ longTransaction: 1, listingDelay: 3600 })
    expect(await readyz(served)).toEqual({ status: 'ready' })
    const held = await heldTransaction()
    // Work goes on behind it (transactions of later ids finish): what a long transaction then holds back.
    let working = true
    const work = (async () => {
      const writer = new SQL({ url, max: 1 })
      while (working) {
        await writer`SELECT pg_current_xact_id()`
        await Bun.sleep(100)
      }
      await writer.close()
    })()
    try {
      const degraded = await degradedAnswer(served)
      expect(degraded.code).toBe('long_transaction')
      expect(degraded.message).toContain('TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS (1 s)')
      expect(await oldestSeconds(served)).toBeGreaterThanOrEqual(1)
      const warning = await until('the warning', () => warningsAbout(served, 'TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS', held.pid)[0])
      expect(JSON.parse(warning)).toMatchObject({ level: 'warn', pid: held.pid, limitSeconds: 1 })
    } finally {
      working = false
      await work
      await held.release()
    }
    await readyAgain(served)
    await until('the gauge to read 0', async () => (await oldestSeconds(served)) === 0 || null, 20_000, 100)
    await until('the end said', () => logLines(served).some((line) => line.includes('the long PostgreSQL transaction ended')) || null)
    // Said once while it lasted.
    expect(warningsAbout(served, 'TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS', held.pid)).toHaveLength(1)
  },
  60_000,
)

postgresOnlyTest(
  POSTGRES_ONLY.concurrentWriters,
  'a run event id and an activity entry id drawn while another session holds a transaction open stay unlisted: the lag in /metrics, logged once with the session past the limit, /readyz degraded (listing_delayed); caught up once it ends',
  async () => {
    const served = await serveWith({ longTransaction: 3600, listingDelay: 1 })
    expect(await readyz(served)).toEqual({ status: 'ready' })
    await until('the lag gauge', async () => (await runEventsLag(served)) === 0 || null, 10_000, 100)
    const held = await heldTransaction()
    // An event's id drawn after it began (as an append does; the row itself does not matter to the watermark).
    const drawn = Number(psqlSync(url, "SELECT nextval('run_events_id_seq')").trim())
    // And an activity entry's: the activity log is a watermarked list too.
    const entryDrawn = Number(psqlSync(url, "SELECT nextval('activity_logs_id_seq')").trim())
    try {
      const degraded = await degradedAnswer(served)
      expect(degraded.code).toBe('listing_delayed')
      // Both lists are held back as long: the message names one of them.
      expect(degraded.message).toMatch(/^The newest (run events|activity logs) have waited/)
      expect(degraded.message).toContain('TRELLIS_LISTING_DELAY_SECONDS (1 s)')
      expect(await runEventsLag(served)).toBeGreaterThanOrEqual(1)
      expect(await activityLag(served)).toBeGreaterThanOrEqual(1)
      expect(listedThrough('activity_logs')).toBeLessThan(entryDrawn)
      const warning = await until('the warning', () => warningsAbout(served, 'TRELLIS_LISTING_DELAY_SECONDS', held.pid)[0])
      expect(JSON.parse(warning)).toMatchObject({ level: 'warn', pid: held.pid, limitSeconds: 1 })
      expect(['run_events', 'activity_logs']).toContain(JSON.parse(warning).list)
      // Still unlisted: the watermark stops below it.
      expect(listedThrough()).toBeLessThan(drawn)
    } finally {
      await held.release()
    }
    await readyAgain(served)
    await until('the lag to read 0', async () => ((await runEventsLag(served)) === 0 && (await activityLag(served)) === 0) || null, 20_000, 100)
    await until('the catch-up said', () => logLines(served).some((line) => line.includes('the lists caught up')) || null)
    // Listed by the watch's own passes, with no reader.
    expect(listedThrough()).toBeGreaterThanOrEqual(drawn)
    expect(listedThrough('activity_logs')).toBeGreaterThanOrEqual(entryDrawn)
    expect(warningsAbout(served, 'TRELLIS_LISTING_DELAY_SECONDS', held.pid)).toHaveLength(1)
  },
  60_000,
)

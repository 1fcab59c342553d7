/**
 * Faults of a scaled-out deployment: three real `trellis serve` processes on a throw-away
 * PostgreSQL cluster of their own. One instance is killed with SIGKILL in the middle of a burst of webhook triggers;
 * then the PostgreSQL server is stopped (`pg_ctl stop -m fast`, then `-m immediate`) and started again while a load
 * runs against the two survivors. Each fault answers only documented statuses, loses nothing acknowledged, and the
 * instances recover by themselves. Runs in the first pass of `npm test` (it brings its own PostgreSQL), like
 * test/scale-out.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { bearer, runCli, type ServeProcess, tempDir, until } from './helpers.ts'
import { acmeDocument, acmeProject, ordersWorkflow } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'
import { NOTES, noteRequest, triggerRequest } from './support/faults.ts'
import { type Instances, startInstances } from './support/instances.ts'
import { type Cluster, psqlSync, startCluster } from './support/postgres-cluster.ts'

/** Triggers of the burst, spread over the three instances; the victim dies after a third of them are acknowledged. */
const BURST = 120
const IN_FLIGHT = 24
/** Records for the load during the PostgreSQL outages (one trigger each). */
const OUTAGE_RECORDS = 400

const TERMINAL = ['succeeded', 'failed', 'cancelled']

/**
 * What each run calls between its two data steps: answers after 200 ms, so that runs outlast the burst's pace (two
 * workers per instance) and the victim dies holding some.
 */
const remote = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: async () => (await Bun.sleep(200), Response.json({ ok: true })) })
afterAll(() => remote.stop(true))

describe.skipIf(!postgresOrSkip('faults-postgres'))('faults of three instances on one PostgreSQL', () => {
  let cluster: Cluster
  let sql: SQL
  let set: Instances
  let trigger: string
  let admin: string

  beforeAll(async () => {
    // A cluster of its own: the outage test stops and restarts the server.
    cluster = startCluster()
    psqlSync(cluster.url, 'CREATE DATABASE trellis')
    const url = cluster.url.replace(/\/postgres$/, '/trellis')
    const dir = tempDir('trellis-faults-pg-')
    const migrated = await runCli(['migrate', '--data', dir.path], { env: { TRELLIS_DATABASE_URL: url } })
    dir.cleanup()
    if (migrated.code !== 0) throw new Error(`trellis migrate: ${migrated.stderr}`)
    sql = new SQL({ url, max: 2 })
    const document = acmeDocument()
    const acme = acmeProject(document)
    // Each run appends one `x` to its record's trail: a data step applied twice would leave `xx`.
    const steps = [
      { type: 'load' },
      { type: 'http', name: 'call', method: 'POST', url: `http://127.0.0.1:${remote.port}/slow`, retries: 0, timeoutSeconds: 5 },
      { type: 'update', name: 'append', set: { trail: '{{record.trail}}x' } },
    ]
    acme.workflows!.push(ordersWorkflow('Append', steps, { webhook: { enabled: true, ratePerMinute: 100_000 } }))
    for (let i = 1; i <= BURST; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `burst_${i}`, data: { trail: '' } })
    for (let i = 1; i <= OUTAGE_RECORDS; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `outage_${i}`, data: { trail: '' } })
    set = await startInstances({ url, document, env: { TRELLIS_EXECUTOR_CONCURRENCY: '2' } })
    trigger = await set.token('bob@example.com', 'erp', 'workflows:trigger')
    admin = await set.token('alice@example.com', 'admin', 'all')
  }, 120_000)

  afterAll(async () => {
    await set?.close()
    await sql?.close()
    cluster?.stop()
  }, 30_000) // the instances' graceful stops, then the cluster's

  /** Waits until every run in `runIds` has ended; their rows. */
  async function runsEnded(runIds: string[], timeoutMs: number) {
    return until(`${runIds.length} runs to end`, async () => {
      const rows = (await sql`SELECT id, record_id, status FROM runs WHERE id IN ${sql(runIds)}`) as { id: string; record_id: string; status: string }[]
      return rows.length === runIds.length && rows.every((row) => TERMINAL.includes(row.status)) ? rows : null
    }, timeoutMs, 200)
  }

  /**
   * Every data step applied once: each record's trail holds one `x` per run it had — every run of the record, not only
   * the acknowledged ones: a run the victim committed but never answered for also ran — each run's steps recorded once.
   */
  async function appliedOnce(runIds: string[]) {
    const trails = (await sql`SELECT r.record_key, r.data, (SELECT count(*)::int FROM runs WHERE record_id = r.record_key) AS runs
      FROM records r WHERE r.record_key IN (SELECT record_id FROM runs WHERE id IN ${sql(runIds)})`) as { record_key: string; data: string; runs: number }[]
    for (const row of trails) expect({ record: row.record_key, trail: (JSON.parse(row.data) as { trail: string }).trail }).toEqual({ record: row.record_key, trail: 'x'.repeat(row.runs) })
    const steps = (await sql`SELECT run_id, name, count(*)::int AS n FROM run_steps WHERE run_id IN ${sql(runIds)} GROUP BY run_id, name HAVING count(*) > 1`) as unknown[]
    expect(steps).toEqual([])
  }

  test('kill -9 of one of three instances mid-burst of webhook triggers: the survivors keep answering, every acknowledged run exists and succeeds, each data step applied once', async () => {
    const [first, victim, third] = set.instances as [ServeProcess, ServeProcess, ServeProcess]
    const victimOwner = [...set.owners].find(([, instance]) => instance === victim)![0]
    let heldByVictim = 0
    const victimRunning = async () => ((await sql`SELECT count(*)::int AS n FROM runs WHERE lease_owner = ${victimOwner} AND status = 'running'`) as { n: number }[])[0]!.n
    const kill = async () => {
      heldByVictim = await victimRunning()
      return set.kill(victim)
    }
    // Killed once a third of the burst is acknowledged and the victim is running runs of its own (on a loaded machine
    // its executor may not have claimed any yet at that count).
    let looking = false
    const acknowledged = new Map<string, string>() // record → runId
    const unanswered: string[] = [] // records whose trigger the victim never answered
    const wrong: string[] = []
    let killed: Promise<number> | null = null
    let next = 1
    const worker = async () => {
      for (let i = next++; i <= BURST; i = next++) {
        const record = `burst_${i}`
        const instance = [first, victim, third][i % 3]!
        try {
          const response = await fetch(`${instance.url}${set.hooks.Append}`, triggerRequest(trigger, record))
          const body = (await response.json()) as { runId?: string }
          if (response.status === 202) acknowledged.set(record, body.runId!)
          else wrong.push(`${record} on ${instance === victim ? 'the victim' : 'a survivor'}: ${response.status} ${JSON.stringify(body)}`)
        } catch (error) {
          if (instance === victim && killed) unanswered.push(record)
          else wrong.push(`${record}: ${String(error)}`)
        }
        if (!killed && !looking && acknowledged.size >= BURST / 3) {
          looking = true
          if ((await victimRunning()) > 0) killed = kill()
          looking = false
        }
      }
    }
    const started = performance.now()
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
    expect(await killed!).not.toBe(0)
    const burstMs = performance.now() - started
    expect(wrong).toEqual([])
    // It died mid-run: runs of its own in their http step, which a survivor resumes once the lease has expired.
    expect(heldByVictim).toBeGreaterThan(0)

    // The client tries what the victim never answered on a survivor: a new run (202), or the run the victim had
    // committed before it died (409 run_in_progress naming it) — never a second one.
    const retried: Record<number, number> = {}
    for (const record of unanswered) {
      const response = await fetch(`${first.url}${set.hooks.Append}`, triggerRequest(trigger, record))
      const body = (await response.json()) as { runId?: string; code?: string }
      retried[response.status] = (retried[response.status] ?? 0) + 1
      if (response.status === 202 || (response.status === 409 && body.code === 'run_in_progress')) acknowledged.set(record, body.runId!)
      else wrong.push(`${record} retried: ${response.status} ${JSON.stringify(body)}`)
    }
    expect(wrong).toEqual([])
    // 409 only when the run is still active; a run the victim committed and that already ended left the record free.
    const runIds = [...acknowledged.values()]
    const rows = await runsEnded(runIds, 30_000)
    expect(rows.filter((row) => row.status !== 'succeeded')).toEqual([])
    await appliedOnce(runIds)
    // Nothing beyond what was acknowledged or retried: one run per burst record, or two for a record the victim never
    // answered — the run it committed, which a survivor ran to its end, then the retry's — one after the other
    // (finished_at in ms, created_at in µs).
    const perRecord = (await sql`SELECT record_id, count(*)::int AS n, bool_and(status IN ('succeeded', 'failed', 'cancelled')) AS ended,
        (array_agg(finished_at ORDER BY created_at))[1] * 1000 <= (array_agg(created_at ORDER BY created_at))[2] AS one_after_the_other
      FROM runs WHERE record_id LIKE 'burst_%' GROUP BY record_id HAVING count(*) > 1`) as { record_id: string; n: number; ended: boolean; one_after_the_other: boolean }[]
    for (const row of perRecord) expect({ ...row, unanswered: unanswered.includes(row.record_id) }).toEqual({ ...row, n: 2, ended: true, one_after_the_other: true, unanswered: true })
    // The survivors answer as before.
    for (const instance of set.instances) expect((await fetch(`${instance.url}${NOTES}`, { headers: bearer(admin) })).status).toBe(200)
    console.log(
      `kill -9 mid-burst: ${BURST} triggers in ${burstMs.toFixed(0)} ms, the victim holding ${heldByVictim} running runs, ${acknowledged.size - unanswered.length} acknowledged during the burst, ` +
        `${unanswered.length} unanswered by the victim then retried (${JSON.stringify(retried)}), ${runIds.length} runs succeeded, lost 0, doubled 0`,
    )
  }, 60_000)

  test('PostgreSQL stopped (fast, then immediate) and started again under load: only 503 database_unavailable with Retry-After meanwhile, never a 500; the instances serve again by themselves and every acknowledged write is there', async () => {
    const survivors = [...set.instances]
    expect(survivors.length).toBeGreaterThanOrEqual(2)
    type Kind = 'note' | 'trigger' | 'read' | 'healthz'
    const answers: { kind: Kind; instance: string; at: number; status: number; code?: string; retryAfter: string | null; bodyRetryAfter?: number }[] = []
    const errors: string[] = []
    const notes: number[] = []
    const runIds: string[] = []
    let records = 0
    let running = true
    let turn = 0
    const kinds: Kind[] = ['note', 'trigger', 'read', 'note', 'trigger', 'healthz']
    const load = async () => {
      while (running) {
        const i = turn++
        const kind = kinds[i % kinds.length] === 'trigger' && records === OUTAGE_RECORDS ? 'read' : kinds[i % kinds.length]!
        // A whole round of kinds to one instance, the next round to the next: every instance gets every kind.
        const instance = survivors[Math.floor(i / kinds.length) % survivors.length]!
        const [path, init]: [string, RequestInit] =
          kind === 'note' ? [NOTES, noteRequest(admin, `load ${i}`)]
          : kind === 'trigger' ? [set.hooks.Append!, triggerRequest(trigger, `outage_${++records}`)]
          : kind === 'read' ? [NOTES, { headers: bearer(admin) }]
          : ['/healthz', {}]
        try {
          const response = await fetch(`${instance.url}${path}`, { ...init, signal: AbortSignal.timeout(15_000) })
          const body = (await response.json()) as { id?: number; runId?: string; code?: string; retry_after?: number }
          answers.push({ kind, instance: instance.url, at: Date.now(), status: response.status, code: body.code, retryAfter: response.headers.get('retry-after'), bodyRetryAfter: body.retry_after })
          if (kind === 'note' && response.status === 201) notes.push(body.id!)
          if (kind === 'trigger' && response.status === 202) runIds.push(body.runId!)
        } catch (error) {
          errors.push(`${kind} on ${instance.url}: ${String(error)}`)
        }
        if (answers.length + errors.length > 20_000) running = false // a bound, whatever the timing
        await Bun.sleep(20)
      }
    }
    const loops = Array.from({ length: 6 }, load)
    const writesSucceed = (since: number) =>
      survivors.every((instance) => answers.some((a) => a.instance === instance.url && a.at > since && a.kind === 'note' && a.status === 201))
    const outages: { mode: 'fast' | 'immediate'; from: number; to: number; recoveredMs: number }[] = []
    await Bun.sleep(500)
    for (const mode of ['fast', 'immediate'] as const) {
      const from = Date.now()
      cluster.pause(mode)
      await Bun.sleep(1_500)
      cluster.resume()
      const to = Date.now()
      await until(`writes to succeed again after the ${mode} stop`, () => writesSucceed(to), 20_000, 50)
      outages.push({ mode, from, to, recoveredMs: Date.now() - to })
      await Bun.sleep(500)
    }
    running = false
    await Promise.all(loops)

    expect(errors).toEqual([])
    const undocumented = answers.filter((a) => (a.status >= 300 && a.status !== 503) || (a.status === 503 && (a.code !== 'database_unavailable' || a.retryAfter !== '1' || a.bodyRetryAfter !== 1)))
    expect(undocumented).toEqual([])
    const during = (outage: (typeof outages)[number]) => answers.filter((a) => a.at >= outage.from && a.at <= outage.to)
    for (const outage of outages) {
      // The outage was seen (writes refused), liveness answered throughout.
      expect(during(outage).some((a) => a.status === 503)).toBe(true)
      expect(during(outage).filter((a) => a.kind === 'healthz').every((a) => a.status === 200)).toBe(true)
    }
    for (const instance of survivors) expect(instance.proc.exitCode).toBeNull()

    // Every acknowledged write is there: each note answered 201, each run answered 202 — and each run ends.
    const stored = (await sql`SELECT id FROM notes WHERE id IN ${sql(notes)}`) as { id: number }[]
    expect(stored.length).toBe(notes.length)
    const rows = await runsEnded(runIds, 30_000)
    expect(rows.filter((row) => row.status !== 'succeeded')).toEqual([])
    await appliedOnce(runIds)
    const count = (status: number) => answers.filter((a) => a.status === status).length
    console.log(
      `PostgreSQL stopped under load: ${answers.length} answers (${count(201)} notes and ${count(202)} runs acknowledged, ${count(200)} reads and health checks, ` +
        `${count(503)} × 503 database_unavailable), ${errors.length} errors, no 5xx other than 503; ` +
        outages.map((o) => `${o.mode} stop for ${o.to - o.from} ms, writes back ${o.recoveredMs} ms after the restart`).join('; ') +
        `; lost 0, doubled 0`,
    )
  }, 90_000)
})

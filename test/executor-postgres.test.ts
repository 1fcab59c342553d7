/**
 * The executor on PostgreSQL, several instances on one database. Each instance is an Executor over
 * its own PgStore (its own pool), the dead one a real process killed with SIGKILL. Acme (with the workflows below) is
 * applied through the real apply service and copied into the database (test/support/acme-on-postgres.ts).
 * - Notifications leave a pool at the end of the turn when it is idle, and under load one NOTIFY a channel every 10 ms
 *   at most, carrying the parts of every call meanwhile (`notifySoon`).
 * - A run queued through one instance wakes another instance's executor through LISTEN/NOTIFY: with a poll interval of
 *   a minute it is claimed within a fraction of a second, while a run inserted without the notification waits.
 * - A run given back on a graceful stop is announced too: another instance resumes it at once.
 * - A run held by an instance that dies is recovered by another once the lease expires, resumes at its first step
 *   not recorded, and each step is recorded exactly once.
 * - An instance whose server is stopped for a while, then whose connections are cut again and again (a cluster of the
 *   test's own), lives on: every failed claim or idle read is logged (once per outage) and retried, and it runs what
 *   comes due once the server answers again.
 * - A workflow's concurrency limit holds across instances: three instances of one worker each, a
 *   workflow limited to two — never three of its runs running, sampled all along, two at times, every run finished.
 * The workflows use only `http` and `wait` steps: a run's data steps and its end (the activity entry) need the twins
 * of records, notes and activity logs, which land separately.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7, SQL } from 'bun'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { writeNow } from '../src/db/write.ts'
import { NOTIFY_EVERY_MS, notifySoon } from '../src/db/postgres/notify.ts'
import { openPostgres, type PgStore } from '../src/db/postgres/store.ts'
import { insertRun, type NewRun } from '../src/db/queue.ts'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { type LogLevel, silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { parseAllowList } from '../src/lib/outbound/policy.ts'
import { repoRoot, tempDir, until } from './helpers.ts'
import { type AcmeOnBoth, acmeOnBoth } from './support/acme-on-postgres.ts'
import { acmeDocument, acmeProject, ordersWorkflow } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'
import { type Cluster, psqlSync, startCluster } from './support/postgres-cluster.ts'

// ── The remote an `http` step calls: the first call of each run hangs until its caller goes away ──
const hangs = new Map<string, number>()
let hanging: (runId: string) => void = () => {}
const remote = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(req) {
    // A brief call: answered after 100 ms.
    if (new URL(req.url).pathname === '/brief') return Bun.sleep(100).then(() => Response.json({ ok: true }))
    const runId = req.headers.get('x-trellis-run-id') ?? ''
    const seen = (hangs.get(runId) ?? 0) + 1
    hangs.set(runId, seen)
    if (seen === 1) {
      hanging(runId)
      await Promise.race([Bun.sleep(30_000), new Promise((resolve) => req.signal.addEventListener('abort', resolve))])
    }
    return Response.json({ ok: true })
  },
})
afterAll(() => remote.stop(true))
const hangStarted = (runId: string) =>
  new Promise<void>((resolve, reject) => {
    hanging = (id) => id === runId && resolve()
    setTimeout(() => reject(new Error(`run ${runId} never called out`)), 10_000)
  })

/**
 * An executor in a process of its own (its own pool) on the database at `url`, logging JSON lines to stderr at
 * `logLevel`; resolves once it listens, with its owner id. Kill the process and remove `dir` when done.
 */
async function spawnInstance(url: string, options: { leaseMs: number; pollMs: number; logLevel: LogLevel; stderr: 'inherit' | 'pipe' }) {
  const dir = tempDir('trellis-pg-executor-')
  const script = join(dir.path, 'instance.ts')
  const src = (path: string) => JSON.stringify(join(repoRoot, path))
  writeFileSync(
    script,
    `import { openPostgres } from ${src('src/db/postgres/store.ts')}
import { Executor } from ${src('src/executor/executor.ts')}
import { systemClock } from ${src('src/lib/clock.ts')}
import { createLogger } from ${src('src/lib/logger.ts')}
import { OutboundClient } from ${src('src/lib/outbound/client.ts')}
import { parseAllowList } from ${src('src/lib/outbound/policy.ts')}
const executor = new Executor({ store: openPostgres(process.argv[2], { max: 4 }), clock: systemClock, logger: createLogger(${JSON.stringify(options.logLevel)}, (line) => console.error(line)),
  concurrency: 2, leaseMs: ${options.leaseMs}, pollMs: ${options.pollMs}, outbound: new OutboundClient({ allow: parseAllowList('127.0.0.1') }) })
executor.start()
await executor.listening()
console.log(executor.owner)
`,
  )
  const instance = Bun.spawn([process.execPath, script, url], { stdout: 'pipe', stderr: options.stderr })
  const owner = new TextDecoder().decode((await instance.stdout.getReader().read()).value).trim()
  return { instance, owner, dir }
}

/** What a run of `workflow` (on production, by bob, through its webhook) is queued with, but its id, record and time. */
async function runBase(store: PgStore, workflow: string): Promise<Omit<NewRun, 'id' | 'recordId' | 'createdAt'>> {
  const [row] = (await store.sql`SELECT w.id::float8 AS id, w.active_version_id::float8 AS v, r.environment_id::float8 AS e FROM workflows w
    JOIN renderings r ON r.id = w.rendering_id WHERE w.name = ${workflow}`) as { id: number; v: number; e: number }[]
  const [bob] = (await store.sql`SELECT id::float8 AS id FROM users WHERE username = 'bob'`) as { id: number }[]
  return { workflowId: row!.id, workflowVersionId: row!.v, environmentId: row!.e, userId: bob!.id, tokenId: null, trigger: 'webhook' }
}

const PARK = 'Park'
const CALL_THEN_PARK = 'Call then park'
const LIMITED = 'Two at a time'
const allow = parseAllowList('127.0.0.1')

describe.skipIf(!postgresOrSkip('executor-postgres'))('the executor on PostgreSQL, across instances', () => {
  let stores: AcmeOnBoth
  const opened: PgStore[] = []
  const executors: Executor[] = []
  let bases: Record<string, Omit<NewRun, 'id' | 'recordId' | 'createdAt'>>

  /** Another instance's store on the same database. */
  function instanceStore(): PgStore {
    const store = openPostgres(stores.url, { max: 4 })
    opened.push(store)
    return store
  }
  function executorOn(store: PgStore, options: { pollMs: number; leaseMs: number; concurrency?: number }): Executor {
    const executor = new Executor({ store, clock: systemClock, logger: silentLogger, concurrency: 2, outbound: new OutboundClient({ allow }), ...options })
    executors.push(executor)
    return executor
  }
  /** Queues a run of `workflow` through `store` with the runs service's own face call (the NOTIFY included). */
  async function queue(store: PgStore, workflow: string, recordId: string): Promise<string> {
    const answer = await writeNow(store, () => insertRun({ ...bases[workflow]!, id: randomUUIDv7(), recordId, createdAt: Date.now() }))
    if (!answer.inserted) throw new Error('not queued')
    return answer.id
  }
  const runRow = async (id: string) =>
    ((await stores.pg.sql`SELECT status, lease_owner, attempts::float8 AS attempts, next_step::float8 AS next_step, started_at::float8 AS started_at FROM runs WHERE id = ${id}`) as {
      status: string
      lease_owner: string | null
      attempts: number
      next_step: number
      started_at: number | null
    }[])[0]!
  const stepsOf = async (id: string) => [...(await stores.pg.sql`SELECT step_index::float8 AS step_index, name, status FROM run_steps WHERE run_id = ${id} ORDER BY step_index`)]
  const parked = (id: string, timeoutMs: number) => until(`run ${id} to park`, async () => ((await runRow(id)).status === 'waiting' ? runRow(id) : null), timeoutMs, 10)

  beforeAll(async () => {
    const document = acmeDocument()
    acmeProject(document).workflows!.push(
      ordersWorkflow(PARK, [{ type: 'wait', name: 'pause', seconds: 3600 }]),
      ordersWorkflow(CALL_THEN_PARK, [
        { type: 'http', name: 'call', method: 'POST', url: `http://127.0.0.1:${remote.port}/hang`, retries: 0, timeoutSeconds: 30 },
        { type: 'wait', name: 'pause', seconds: 3600 },
      ]),
      ordersWorkflow(LIMITED, [{ type: 'http', name: 'call', method: 'POST', url: `http://127.0.0.1:${remote.port}/brief`, retries: 0 }], { concurrency: 2 }),
    )
    stores = await acmeOnBoth(document)
    bases = { [PARK]: await runBase(stores.pg, PARK), [CALL_THEN_PARK]: await runBase(stores.pg, CALL_THEN_PARK), [LIMITED]: await runBase(stores.pg, LIMITED) }
  }, 60_000)

  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop(1_000)))
    for (const store of opened) await store.close()
    await stores?.close()
  })

  test('notifications: an idle pool sends at the end of the turn; under load one NOTIFY a channel every 10 ms at most, carrying every call\'s parts', async () => {
    const pool = instanceStore()
    // The pool as notifySoon sees it, each NOTIFY it sends noted (when, in this process) on its way to the server.
    const sent: number[] = []
    const watched = new Proxy(pool.sql, {
      get: (target, key) =>
        key === 'notify' ? (channel: string, payload: string) => (sent.push(performance.now()), target.notify(channel, payload)) : Reflect.get(target, key, target),
    })
    const listener = new SQL({ url: stores.url, max: 1 })
    const heard: string[] = []
    await listener.listen('trellis_notify_probe', (payload: string) => void heard.push(payload))
    const parts = () => heard.flatMap((payload) => payload.split(',').map(Number))
    try {
      // Idle: sent once this turn's work is done (before an immediate queued after the calls runs), one for its calls.
      notifySoon(watched, 'trellis_notify_probe', [1])
      notifySoon(watched, 'trellis_notify_probe', [2, 1])
      await new Promise((resolve) => setImmediate(resolve))
      expect(sent.length).toBe(1)
      await until('the idle notification', () => heard.length === 1, 10_000, 5)
      expect(heard).toEqual(['1,2'])
      // Under load: a call every millisecond or so for 60 calls, each in a turn of its own.
      heard.length = 0
      sent.length = 0
      const called: number[] = []
      const calls: number[] = []
      const firstCall = performance.now()
      for (let i = 0; i < 60; i++) {
        notifySoon(watched, 'trellis_notify_probe', [100 + i])
        called.push(100 + i)
        calls.push(performance.now())
        await Bun.sleep(1)
      }
      const callsSpanMs = performance.now() - firstCall
      await until('every part heard', () => parts().length === called.length, 10_000, 5)
      // Each part once, in whatever order: two sends may go out on two of the pool's connections and commit the other
      // way round (a notification is a wake-up; its listeners read what it names from the tables).
      expect(parts().sort((a, b) => a - b)).toEqual(called)
      // Each send at least the window after the one before (noted here a moment after its own time is taken; a timer
      // that fires early waits for the rest): one a window at most over the calls' span (however long a loaded machine
      // made it), and the last one's window after it.
      const gaps = sent.slice(1).map((at, i) => at - sent[i]!)
      // What a failure shows: when each send and each call came, from the first call.
      const seen = `sends at ${sent.map((at) => (at - firstCall).toFixed(2)).join(' ')} ms; calls at ${calls.map((at) => (at - firstCall).toFixed(1)).join(' ')} ms`
      // The window is kept by the pool's own clock reading, taken a few statements before the proxy notes the send: a
      // pause between them on a loaded machine (a collection, another process on the core) shows here as a shorter gap
      // — 9.5 ms was seen once in CI. Unbatched sends would be a call apart (about 1 ms).
      expect(Math.min(...gaps), seen).toBeGreaterThanOrEqual(NOTIFY_EVERY_MS - 1)
      expect(sent.length).toBeLessThanOrEqual(Math.floor(callsSpanMs / NOTIFY_EVERY_MS) + 2)
      console.log(`notifications: 60 calls over ${callsSpanMs.toFixed(0)} ms, ${sent.length} NOTIFYs`)
    } finally {
      await listener.close()
    }
  })

  test('a run queued through one instance wakes another instance at once (NOTIFY), far inside its one-minute poll', async () => {
    const a = instanceStore()
    const b = executorOn(instanceStore(), { pollMs: 60_000, leaseMs: 30_000 })
    b.start()
    expect(await b.listening()).toBe(true)
    await Bun.sleep(300) // B's first claim found nothing: it sleeps for its poll interval now
    // Control: a run inserted without the announcement is not seen until B's next poll.
    const silent = randomUUIDv7()
    await a.sql.unsafe(
      `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, "trigger", status, next_step, available_at, attempts, created_at)
       VALUES ($1, $2, $3, $4, 'silent_1', $5, 'webhook', 'queued', 0, $6, 0, $7)`,
      [silent, bases[PARK]!.workflowId, bases[PARK]!.workflowVersionId, bases[PARK]!.environmentId, bases[PARK]!.userId, Date.now(), Date.now() * 1000],
    )
    await Bun.sleep(1_000)
    expect(await runRow(silent)).toMatchObject({ status: 'queued', attempts: 0 })
    // Queued through A: B claims it (and the silent one with it) and parks both, well under a second later.
    const started = performance.now()
    const announced = await queue(a, PARK, 'notify_1')
    await parked(announced, 5_000)
    const tookMs = performance.now() - started
    expect(tookMs).toBeLessThan(1_000)
    console.log(`NOTIFY wake: queued on instance A, claimed and parked by instance B in ${tookMs.toFixed(0)} ms (B polls every 60 s)`)
    expect(await runRow(announced)).toMatchObject({ status: 'waiting', lease_owner: null, attempts: 1, next_step: 1 })
    expect(await stepsOf(announced)).toEqual([{ step_index: 0, name: 'pause', status: 'succeeded' }])
    expect(await parked(silent, 1_000)).toMatchObject({ attempts: 1 })
    await b.stop(1_000)
  })

  test('claims gather freed slots only briefly: with three of four workers held by hanging calls, a run queued starts at once', async () => {
    const x = executorOn(instanceStore(), { pollMs: 60_000, leaseMs: 30_000, concurrency: 4 })
    x.start()
    expect(await x.listening()).toBe(true)
    const held = ['gather_1', 'gather_2', 'gather_3'].map((recordId) => ({ recordId, runId: randomUUIDv7() }))
    const pool = instanceStore()
    for (const { recordId, runId } of held) await writeNow(pool, () => insertRun({ ...bases[CALL_THEN_PARK]!, id: runId, recordId, createdAt: Date.now() }))
    await until('three calls hanging', () => (held.every(({ runId }) => hangs.get(runId) === 1) ? true : null), 5_000, 10)
    // One slot free, three runs in flight: a claim waits for more slots to free, but only a few milliseconds.
    const started = performance.now()
    const lone = await queue(pool, PARK, 'gather_4')
    await parked(lone, 5_000)
    const tookMs = performance.now() - started
    expect(tookMs).toBeLessThan(1_000)
    for (const { runId } of held) expect(await runRow(runId)).toMatchObject({ status: 'running', lease_owner: x.owner })
    await x.stop(200)
  })

  test('a run given back on a graceful stop is announced: another instance resumes it at once', async () => {
    const x = executorOn(instanceStore(), { pollMs: 60_000, leaseMs: 30_000 })
    const y = executorOn(instanceStore(), { pollMs: 60_000, leaseMs: 30_000 })
    x.start()
    expect(await x.listening()).toBe(true)
    const runId = randomUUIDv7()
    const calling = hangStarted(runId)
    const queued = await writeNow(instanceStore(), () => insertRun({ ...bases[CALL_THEN_PARK]!, id: runId, recordId: 'handover_1', createdAt: Date.now() }))
    expect(queued).toEqual({ inserted: true, id: runId })
    await calling
    expect(await runRow(runId)).toMatchObject({ status: 'running', lease_owner: x.owner })
    y.start()
    expect(await y.listening()).toBe(true)
    await Bun.sleep(300)
    // X stops: its call is aborted at the stop's deadline, the run given back (announced), Y takes it up at once.
    const stopping = performance.now()
    await x.stop(200)
    const done = await parked(runId, 3_000)
    const tookMs = performance.now() - stopping
    expect(tookMs).toBeLessThan(2_000)
    expect(done).toMatchObject({ status: 'waiting', attempts: 2, next_step: 2 })
    expect(await stepsOf(runId)).toEqual([
      { step_index: 0, name: 'call', status: 'succeeded' },
      { step_index: 1, name: 'pause', status: 'succeeded' },
    ])
    expect(hangs.get(runId)).toBe(2)
    await y.stop(1_000)
  })

  test('a workflow limited to two runs at a time, three instances of one worker each: never three running, two at times, all finished', async () => {
    const pools = [0, 1, 2].map(() => instanceStore())
    const instances = pools.map((pool) => executorOn(pool, { pollMs: 20, leaseMs: 30_000, concurrency: 1 }))
    for (const executor of instances) executor.start()
    for (const executor of instances) expect(await executor.listening()).toBe(true)
    const { workflowId } = bases[LIMITED]!
    const sample = async () =>
      ((await stores.pg.sql`SELECT count(*) FILTER (WHERE status = 'running')::int AS running, count(*) FILTER (WHERE status = 'succeeded')::int AS done,
          coalesce(array_agg(lease_owner) FILTER (WHERE status = 'running'), '{}') AS owners FROM runs WHERE workflow_id = ${workflowId}`) as {
        running: number
        done: number
        owners: string[]
      }[])[0]!
    const seen: number[] = []
    const owners = new Set<string>()
    let sampling = true
    const sampler = (async () => {
      while (sampling) {
        const now = await sample()
        seen.push(now.running)
        for (const owner of now.owners) owners.add(owner)
        await Bun.sleep(5)
      }
    })()
    try {
      // Queued through the instances in turn (each NOTIFY wakes all three), as triggers on several instances are.
      for (let i = 0; i < 12; i++) await queue(pools[i % 3]!, LIMITED, `limited_${i}`)
      await until('every limited run to finish', async () => (await sample()).done === 12, 30_000, 20)
    } finally {
      sampling = false
      await sampler
      for (const executor of instances) await executor.stop(1_000)
    }
    console.log(`workflow limit 2 over three one-worker instances: ${seen.length} samples, at most ${Math.max(...seen)} running, on ${owners.size} instances`)
    expect(Math.max(...seen)).toBe(2)
    expect(owners.size).toBeGreaterThanOrEqual(2)
  }, 60_000)

  test('an instance killed mid-step: another recovers the run once the lease expires and records each step once', async () => {
    // Instance A: a real process (its own pool, its own executor), killed with SIGKILL while its http step hangs.
    const { instance, owner, dir } = await spawnInstance(stores.url, { leaseMs: 1_000, pollMs: 50, logLevel: 'silent', stderr: 'inherit' })
    try {
      expect(owner).toMatch(/^executor-/)
      const runId = randomUUIDv7()
      const calling = hangStarted(runId)
      await writeNow(stores.pg, () => insertRun({ ...bases[CALL_THEN_PARK]!, id: runId, recordId: 'crash_1', createdAt: Date.now() }))
      await calling
      expect(await runRow(runId)).toMatchObject({ status: 'running', lease_owner: owner, attempts: 1 })

      // Instance B runs meanwhile (its sweep every 10 s recovers expired leases); A dies holding the run.
      const b = executorOn(instanceStore(), { pollMs: 100, leaseMs: 1_000 })
      b.start()
      await Bun.sleep(300)
      expect(await runRow(runId)).toMatchObject({ status: 'running', lease_owner: owner })
      instance.kill('SIGKILL')
      expect(await instance.exited).not.toBe(0)
      const killedAt = Date.now()
      const done = await parked(runId, 15_000)
      // Recovered no earlier than the lease's expiry, then resumed at the http step (called again: at least once).
      expect(Date.now() - killedAt).toBeGreaterThanOrEqual(600)
      expect(done).toMatchObject({ status: 'waiting', lease_owner: null, attempts: 2, next_step: 2 })
      expect(await stepsOf(runId)).toEqual([
        { step_index: 0, name: 'call', status: 'succeeded' },
        { step_index: 1, name: 'pause', status: 'succeeded' },
      ])
      expect(hangs.get(runId)).toBe(2)
      await b.stop(1_000)
    } finally {
      instance.kill('SIGKILL')
      dir.cleanup()
    }
  }, 30_000)
})

describe.skipIf(!postgresOrSkip('executor-postgres'))('the executor while its PostgreSQL server is down', () => {
  const TWO_WAITS = 'Two waits'
  let cluster: Cluster
  let stores: AcmeOnBoth
  let base: Omit<NewRun, 'id' | 'recordId' | 'createdAt'>

  beforeAll(async () => {
    // A cluster of its own: this test stops and restarts the server.
    cluster = startCluster()
    psqlSync(cluster.url, 'CREATE DATABASE trellis')
    const document = acmeDocument()
    acmeProject(document).workflows!.push(ordersWorkflow(TWO_WAITS, [{ type: 'wait', name: 'first', seconds: 1 }, { type: 'wait', name: 'second', seconds: 3600 }]))
    stores = await acmeOnBoth(document, {}, cluster.url.replace(/\/postgres$/, '/trellis'))
    base = await runBase(stores.pg, TWO_WAITS)
  }, 120_000)
  afterAll(async () => {
    await stores?.close()
    cluster?.stop()
  })

  const queue = async (recordId: string) => {
    const queued = await writeNow(stores.pg, () => insertRun({ ...base, id: randomUUIDv7(), recordId, createdAt: Date.now() }))
    if (!queued.inserted) throw new Error('not queued')
    return queued.id
  }
  const nextStep = async (id: string) =>
    ((await stores.pg.sql`SELECT status, next_step::float8 AS next_step FROM runs WHERE id = ${id}`) as { status: string; next_step: number }[])[0]!
  const parkedAt = (id: string, step: number, timeoutMs: number) =>
    until(`run ${id} to park before step ${step}`, async () => {
      const row = await nextStep(id)
      return row.status === 'waiting' && row.next_step === step ? row : null
    }, timeoutMs, 20)

  test('the server stopped for 2 s, then connections cut for 3 s: failed claims and idle reads are logged and retried, the process lives on and runs what comes due', async () => {
    const { instance, dir } = await spawnInstance(stores.url, { leaseMs: 2_000, pollMs: 20, logLevel: 'warn', stderr: 'pipe' })
    const outage = { from: 0, to: 0 }
    try {
      const before = await queue('outage_1')
      await parkedAt(before, 1, 5_000)
      // The server goes away (every connection cut) while the run's first wait comes due, for two seconds of 20 ms polls.
      outage.from = Date.now()
      cluster.pause()
      await Bun.sleep(2_000)
      expect(instance.exitCode).toBeNull()
      cluster.resume()
      outage.to = Date.now()
      // The run that came due meanwhile goes on.
      await parkedAt(before, 2, 10_000)
      // Then the instance's connections are cut again and again for three seconds, at random moments of its loop: some
      // between a claim and its idle read (that read's failure once ended the loop with an unhandled rejection).
      const killer = new SQL({ url: stores.url, max: 1 })
      for (const cutUntil = Date.now() + 3_000; Date.now() < cutUntil; ) {
        await killer`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
        await Bun.sleep(5 + Math.random() * 20)
      }
      await killer.close()
      expect(instance.exitCode).toBeNull()
      // A run queued afterwards runs too (claimed by polling, if the LISTEN is still reconnecting).
      const after = await queue('outage_2')
      await parkedAt(after, 1, 10_000)
      expect(instance.exitCode).toBeNull()
    } finally {
      instance.kill('SIGKILL')
      await instance.exited
      dir.cleanup()
    }
    // What it said: our JSON lines and the driver's own notices that its LISTENs (runs, callbacks, task deadlines) reconnect, nothing else (no crash,
    // no stack); the outage among them, said once and not per attempt.
    const lines = (await new Response(instance.stderr).text()).trim().split('\n')
    const ours = lines.filter((line) => !/^bun:sql LISTEN "trellis_\w+" failed, retrying: /.test(line))
    const logged = ours.map((line) => JSON.parse(line) as { time: string; level: string; msg: string })
    expect(logged.filter((entry) => entry.level !== 'warn')).toEqual([])
    const during = logged.filter((entry) => entry.msg === 'claiming runs failed; retrying' && Date.parse(entry.time) >= outage.from && Date.parse(entry.time) <= outage.to)
    expect(during).toHaveLength(1)
  }, 60_000)
})

/**
 * Issue 18, item 3: the executor on PostgreSQL, several instances on one database. Each instance is an Executor over
 * its own PgStore (its own pool), the dead one a real process killed with SIGKILL. Acme (with the workflows below) is
 * applied through the real apply service and copied into the database (test/support/acme-on-postgres.ts).
 * - A run queued through one instance wakes another instance's executor through LISTEN/NOTIFY: with a poll interval of
 *   a minute it is claimed within a fraction of a second, while a run inserted without the notification waits.
 * - A run given back on a graceful stop is announced too: another instance resumes it at once.
 * - A run held by an instance that dies is recovered by another once the lease expires, resumes at its first step
 *   not recorded, and each step is recorded exactly once.
 * The workflows use only `http` and `wait` steps: a run's data steps and its end (the activity entry) need the twins
 * of records, notes and activity logs, which land separately.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { op } from '../src/db/op.ts'
import { writeOnPostgres } from '../src/db/postgres/op-runner.ts'
import { openPostgres, type PgStore } from '../src/db/postgres/store.ts'
import { insertRun, type NewRun } from '../src/db/queue.ts'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { parseAllowList } from '../src/lib/outbound/policy.ts'
import { repoRoot, tempDir, until } from './helpers.ts'
import { type AcmeOnBoth, acmeOnBoth } from './support/acme-on-postgres.ts'
import { acmeDocument, acmeProject, ordersWorkflow } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'

// ── The remote an `http` step calls: the first call of each run hangs until its caller goes away ──
const hangs = new Map<string, number>()
let hanging: (runId: string) => void = () => {}
const remote = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(req) {
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

const PARK = 'Park'
const CALL_THEN_PARK = 'Call then park'
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
  function executorOn(store: PgStore, options: { pollMs: number; leaseMs: number }): Executor {
    const executor = new Executor({ store, clock: systemClock, logger: silentLogger, concurrency: 2, outbound: new OutboundClient({ allow }), ...options })
    executors.push(executor)
    return executor
  }
  /** Queues a run of `workflow` through `store` with the runs service's own face call (the NOTIFY included). */
  async function queue(store: PgStore, workflow: string, recordId: string): Promise<string> {
    const answer = await writeOnPostgres(store, () => op(insertRun, { ...bases[workflow]!, id: randomUUIDv7(), recordId, createdAt: Date.now() }))
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
    )
    stores = await acmeOnBoth(document)
    bases = {}
    for (const name of [PARK, CALL_THEN_PARK]) {
      const [row] = (await stores.pg.sql`SELECT w.id::float8 AS id, w.active_version_id::float8 AS v, r.environment_id::float8 AS e FROM workflows w
        JOIN renderings r ON r.id = w.rendering_id WHERE w.name = ${name}`) as { id: number; v: number; e: number }[]
      const [bob] = (await stores.pg.sql`SELECT id::float8 AS id FROM users WHERE username = 'bob'`) as { id: number }[]
      bases[name] = { workflowId: row!.id, workflowVersionId: row!.v, environmentId: row!.e, userId: bob!.id, tokenId: null, trigger: 'webhook' }
    }
  }, 60_000)

  afterAll(async () => {
    await Promise.all(executors.map((e) => e.stop(1_000)))
    for (const store of opened) await store.close()
    await stores?.close()
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

  test('a run given back on a graceful stop is announced: another instance resumes it at once', async () => {
    const x = executorOn(instanceStore(), { pollMs: 60_000, leaseMs: 30_000 })
    const y = executorOn(instanceStore(), { pollMs: 60_000, leaseMs: 30_000 })
    x.start()
    expect(await x.listening()).toBe(true)
    const runId = randomUUIDv7()
    const calling = hangStarted(runId)
    const queued = await writeOnPostgres(instanceStore(), () => op(insertRun, { ...bases[CALL_THEN_PARK]!, id: runId, recordId: 'handover_1', createdAt: Date.now() }))
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

  test('an instance killed mid-step: another recovers the run once the lease expires and records each step once', async () => {
    // Instance A: a real process (its own pool, its own executor), killed with SIGKILL while its http step hangs.
    const dir = tempDir('trellis-pg-executor-')
    const script = join(dir.path, 'instance.ts')
    const src = (path: string) => JSON.stringify(join(repoRoot, path))
    writeFileSync(
      script,
      `import { openPostgres } from ${src('src/db/postgres/store.ts')}
import { Executor } from ${src('src/executor/executor.ts')}
import { systemClock } from ${src('src/lib/clock.ts')}
import { silentLogger } from ${src('src/lib/logger.ts')}
import { OutboundClient } from ${src('src/lib/outbound/client.ts')}
import { parseAllowList } from ${src('src/lib/outbound/policy.ts')}
const executor = new Executor({ store: openPostgres(process.argv[2], { max: 4 }), clock: systemClock, logger: silentLogger, concurrency: 2,
  leaseMs: 1000, pollMs: 50, outbound: new OutboundClient({ allow: parseAllowList('127.0.0.1') }) })
executor.start()
await executor.listening()
console.log(executor.owner)
`,
    )
    const instance = Bun.spawn([process.execPath, script, stores.url], { stdout: 'pipe', stderr: 'inherit' })
    try {
      const reader = instance.stdout.getReader()
      const owner = new TextDecoder().decode((await reader.read()).value).trim()
      expect(owner).toMatch(/^executor-/)
      const runId = randomUUIDv7()
      const calling = hangStarted(runId)
      await writeOnPostgres(stores.pg, () => op(insertRun, { ...bases[CALL_THEN_PARK]!, id: runId, recordId: 'crash_1', createdAt: Date.now() }))
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

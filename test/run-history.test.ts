/**
 * A bounded run history (docs/workflows.md "Run history retention"). Through the app with the executor running,
 * on the store the pass gives (both passes: this file is in POSTGRES_PASS): the finished runs older than the retention
 * go with their steps and idempotency keys, in batches; newer ones stay, and active ones (queued, running, waiting)
 * whatever their age; activity and admin logs are not touched; a pruned run is 404, and a retry whose retried run was
 * pruned still renders; on PostgreSQL a retry (or a bulk retry) beside a pass deleting its run waits for it. Then through real `trellis serve` processes with a retention of seconds: the runs go by
 * themselves, counted on /metrics (PostgreSQL: two instances); and on SQLite, under a steady trigger loop, the file
 * stops growing but for the activity log's own entries (measured, printed).
 *
 * Acme: bob is an editor in team Support; his runs are on Support's `orders` in production.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { statSync } from 'node:fs'
import { databasePath } from '../src/db/sqlite/open.ts'
import type { QueryCall } from '../src/db/op.ts'
import { deleteFinishedRunBatch, FINISHED_RUNS_PER_BATCH } from '../src/db/maintenance.ts'
import { postgresDialect } from '../src/db/postgres/dialect.ts'
import { Executor } from '../src/executor/executor.ts'
import { type Clock, systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { pruneRunHistory } from '../src/modules/runs/history.ts'
import {
  bearer,
  executeBeside,
  POSTGRES_ONLY,
  postgresOnlyTest,
  queryAll,
  queryOne,
  request,
  type ServeProcess,
  SQLITE_ONLY,
  sqliteOnlyTest,
  startServe,
  TEST_STORE,
  testApp,
  type TestEnv,
  testEnv,
  until,
} from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, hookPath, ordersWorkflow, seedDataDir, tokenFor } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'
import { startInstances } from './support/instances.ts'
import { freshDatabase, psqlSync } from './support/postgres-cluster.ts'

// ── The receiver of the `http` steps ───────────────────────────────────────

/** Calls the receiver got, by path. */
const calls = new Map<string, number>()
/** While set, `/hold/…` calls wait for it (a run kept `running` at its `http` step). */
let holding: { promise: Promise<void>; release: () => void } | null = null

const receiver = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(req) {
    const path = new URL(req.url).pathname
    const seen = (calls.get(path) ?? 0) + 1
    calls.set(path, seen)
    if (path.startsWith('/hold/')) await holding?.promise
    // `/flaky/…` fails its first call, then answers.
    if (path.startsWith('/flaky/') && seen === 1) return new Response('not now', { status: 503 })
    return Response.json({ ok: true, path })
  },
})
afterAll(() => receiver.stop(true))
const receiverUrl = `http://127.0.0.1:${receiver.port}`

function hold(): void {
  let release = () => {}
  const promise = new Promise<void>((resolve) => (release = resolve))
  holding = { promise, release }
}
function releaseHeld(): void {
  holding?.release()
  holding = null
}

const FAST = { enabled: true, ratePerMinute: 100_000 }
const WORKFLOWS = [
  // Three steps: a realistic run to prune (steps with outputs, a record read and written).
  ordersWorkflow('Stamp', [{ type: 'load' }, { type: 'condition', if: { field: 'status', equals: 'new' } }, { type: 'update', set: { stamped: '{{run.id}}' } }], { webhook: FAST }),
  ordersWorkflow('Hold', [{ type: 'wait', name: 'hold', seconds: 600 }], { webhook: FAST }),
  // One run at a time: while one is held at its call, the next stays queued.
  ordersWorkflow('Serial', [{ type: 'http', name: 'call', method: 'POST', url: `${receiverUrl}/hold/{{record.id}}`, retries: 0 }], { webhook: FAST, concurrency: 1 }),
  // Fails at its call the first time for a record; its retry carries the `load` step.
  ordersWorkflow('Notify', [{ type: 'load' }, { type: 'http', name: 'notify', method: 'POST', url: `${receiverUrl}/flaky/{{record.id}}`, retries: 0 }], { webhook: FAST }),
]
const RECORDS = Array.from({ length: 14 }, (_, i) => `rh-${i + 1}`)
const FINISHED = "('succeeded', 'failed', 'cancelled')"
/** Run ids as an SQL list: `('a', 'b')`. */
const idList = (ids: string[]) => `(${ids.map((id) => `'${id}'`).join(', ')})`

/** A clock at `ms` (pruneRunHistory's `now`). */
const at = (ms: number): Clock => ({ now: () => ms })

describe('through the app, the executor running', () => {
  let env: TestEnv
  let app: ReturnType<typeof testApp>
  let executor: Executor
  let token: string
  const hooks: Record<string, string> = {}
  let retention: number

  beforeAll(async () => {
    env = testEnv({ ...HIGH_API_BUDGETS, TRELLIS_HTTP_ALLOW: '127.0.0.1' })
    retention = env.config.runRetentionMs!
    const document = acmeDocument()
    const acme = acmeProject(document)
    acme.workflows!.push(...WORKFLOWS)
    for (const id of RECORDS) acme.records!.push({ environment: 'production', collection: 'orders', id, data: { status: 'new' } })
    const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    for (const workflow of report.workflows) if (workflow.webhook.url) hooks[workflow.name] = hookPath(workflow.webhook.url)
    executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 20, outbound: new OutboundClient({ allow: env.config.httpAllow }) })
    app = testApp(env, { clock: systemClock, executor })
    executor.start()
    token = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
  }, 60_000) // on PostgreSQL the first block starts the shared cluster

  afterAll(async () => {
    releaseHeld()
    await executor.stop(2_000)
    env.cleanup()
  })

  async function call(req: Request): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await app.handle(req)
    const text = await response.text()
    expect(response.status, text).toBeLessThan(500)
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
  }

  /** A webhook trigger of `workflow` on `recordId` (with `key` as its Idempotency-Key): the run's id. */
  async function trigger(workflow: string, recordId: string, key?: string): Promise<string> {
    const headers: Record<string, string> = { ...bearer(token), 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) }
    const sent = await call(new Request(`http://localhost${hooks[workflow]}`, { method: 'POST', headers, body: JSON.stringify({ record_id: recordId }) }))
    expect(sent.status).toBe(202)
    return sent.body.runId as string
  }

  const getRun = (id: string) => call(request(`/v1/workflow-runs/${id}`, { headers: bearer(token) }))
  const statusOf = (id: string) => queryOne<{ status: string }>(env.store, 'SELECT status FROM runs WHERE id = ?', id)?.status
  const reaches = (id: string, ...statuses: string[]) => until(`run ${id} to be ${statuses.join(' or ')}`, () => statuses.includes(statusOf(id) ?? ''), 10_000, 10)
  const finishedAt = (id: string) => Number(queryOne<{ t: number }>(env.store, 'SELECT finished_at AS t FROM runs WHERE id = ?', id)!.t)
  const count = (sql: string) => Number(queryOne<{ n: number }>(env.store, sql)!.n)
  const stepsOf = (ids: string[]) => count(`SELECT count(*) AS n FROM run_steps WHERE run_id IN ${idList(ids)}`)
  const keysOf = (ids: string[]) => count(`SELECT count(*) AS n FROM idempotency_keys WHERE run_id IN ${idList(ids)}`)
  const runsLeft = (ids: string[]) => queryAll<{ id: string }>(env.store, `SELECT id FROM runs WHERE id IN ${idList(ids)} ORDER BY id`).map((r) => r.id)
  /** Every row of the logs, in id order: what pruning must leave as it was. */
  const logs = () => ({
    activity: queryAll(env.store, 'SELECT * FROM activity_logs ORDER BY id'),
    records: queryAll(env.store, 'SELECT * FROM activity_log_records ORDER BY log_id, record_id'),
    admin: queryAll(env.store, 'SELECT * FROM admin_logs ORDER BY id'),
  })

  test('runs finished before the retention go with their steps and keys; newer ones stay, active ones whatever their age, and the logs', async () => {
    expect(retention).toBe(30 * 86_400_000) // the default
    const older = [await stampedRun('rh-1'), await stampedRun('rh-2'), await stampedRun('rh-3')]
    await Bun.sleep(5) // the newer ones finish in a later millisecond
    const newer = [await stampedRun('rh-4'), await stampedRun('rh-5')]
    const cutoff = Math.min(...newer.map((run) => run.finished))
    expect(Math.max(...older.map((run) => run.finished))).toBeLessThan(cutoff)
    // Active runs: one waiting, one running (held at its call), one queued behind it (its workflow's limit is 1).
    hold()
    const waiting = await trigger('Hold', 'rh-6')
    const running = await trigger('Serial', 'rh-7')
    await reaches(running, 'running')
    const queued = await trigger('Serial', 'rh-8')
    await reaches(waiting, 'waiting')
    await Bun.sleep(100)
    expect(statusOf(queued)).toBe('queued')
    const active = [waiting, running, queued]
    // Made as old as can be: created, started and even "finished" at the epoch's first microsecond.
    await executeBeside(env.store, `UPDATE runs SET created_at = 1, started_at = 1, finished_at = 1 WHERE id IN ${idList(active)}`)

    const olderIds = older.map((run) => run.id)
    const newerIds = newer.map((run) => run.id)
    expect(stepsOf(olderIds)).toBe(9)
    expect(keysOf(olderIds)).toBe(3)
    const firstKey = queryOne<{ key: string }>(env.store, 'SELECT key FROM idempotency_keys WHERE run_id = ?', olderIds[0]!)!.key
    const expected = count(`SELECT count(*) AS n FROM runs WHERE status IN ${FINISHED} AND finished_at < ${cutoff}`)
    expect(expected).toBeGreaterThanOrEqual(3)
    const entriesOfOlder = count(`SELECT count(*) AS n FROM activity_logs WHERE run_id IN ${idList(olderIds)}`)
    expect(entriesOfOlder).toBe(3 * 4) // triggerWorkflow, read, update, completeWorkflow
    const logsBefore = logs()

    // A day short of the retention nothing goes; at it, the runs finished before the cutoff do.
    expect(await pruneRunHistory(env.store, at(cutoff - 1 + retention - 86_400_000), retention)).toMatchObject({ runs: 0, batches: 1 })
    const pruned = await pruneRunHistory(env.store, at(cutoff + retention), retention)
    expect(pruned).toMatchObject({ cutoff, runs: expected, batches: 1 })
    expect(count(`SELECT count(*) AS n FROM runs WHERE status IN ${FINISHED} AND finished_at < ${cutoff}`)).toBe(0)
    expect(runsLeft(olderIds)).toEqual([])
    expect(stepsOf(olderIds)).toBe(0)
    expect(keysOf(olderIds)).toBe(0)
    expect(runsLeft(newerIds)).toEqual([...newerIds].sort())
    expect(stepsOf(newerIds)).toBe(6)
    expect(keysOf(newerIds)).toBe(2)
    expect(runsLeft(active)).toEqual([...active].sort())
    expect(active.map(statusOf)).toEqual(['waiting', 'running', 'queued'])
    // The logs are as they were: the pruned runs' entries still name them.
    expect(logs()).toEqual(logsBefore)
    expect(count(`SELECT count(*) AS n FROM activity_logs WHERE run_id IN ${idList(olderIds)}`)).toBe(entriesOfOlder)

    // A pruned run is not found, nor listed; the others answer as before.
    for (const id of olderIds) expect(await getRun(id)).toMatchObject({ status: 404, body: { code: 'not_found' } })
    expect(await getRun(newerIds[0]!)).toMatchObject({ status: 200, body: { id: newerIds[0], status: 'succeeded' } })
    const listed = await call(request('/v1/project/Acme/environment/production/workflow-runs?limit=100', { headers: bearer((await tokenFor(env.store, systemClock, 'alice', ['all'])).value) }))
    const listedIds = (listed.body.data as { id: string }[]).map((run) => run.id)
    expect(listedIds.filter((id) => olderIds.includes(id))).toEqual([])
    expect(listedIds).toEqual(expect.arrayContaining([...newerIds, ...active]))
    // A pruned run's key went with it: the same call starts a new run (docs/workflows.md "Idempotency keys").
    const replay = await trigger('Stamp', 'rh-1', firstKey)
    expect(replay).not.toBe(olderIds[0])
    await reaches(replay, 'succeeded')
    // The newer ones go once the clock passes them too; the active ones never.
    const later = await pruneRunHistory(env.store, at(Date.now() + retention + 1), retention)
    expect(later.runs).toBeGreaterThanOrEqual(2)
    expect(runsLeft(newerIds)).toEqual([])
    expect(runsLeft(active)).toEqual([...active].sort())

    releaseHeld()
    await reaches(running, 'succeeded')
    await reaches(queued, 'succeeded')
    expect((await call(request(`/v1/workflow-runs/${waiting}/cancel`, { method: 'POST', headers: bearer(token) }))).status).toBe(200)
  }, 60_000)

  test('a retry whose retried run was pruned still renders; the retried run is 404', async () => {
    const failed = await trigger('Notify', 'rh-9')
    await reaches(failed, 'failed')
    const retry = await call(request(`/v1/workflow-runs/${failed}/retry`, { method: 'POST', headers: bearer(token) }))
    expect(retry).toMatchObject({ status: 202, body: { retryOf: failed } })
    const retryId = retry.body.runId as string
    await reaches(retryId, 'succeeded')
    const before = await getRun(retryId)
    expect(before.body).toMatchObject({ retryOf: failed, retriedBy: null, steps: [{ name: '1-load', carriedFrom: failed }, { name: 'notify', status: 'succeeded' }] })
    expect(finishedAt(failed)).toBeLessThan(finishedAt(retryId))

    const pruned = await pruneRunHistory(env.store, at(finishedAt(retryId) + retention), retention)
    expect(pruned.runs).toBeGreaterThanOrEqual(1)
    expect(runsLeft([failed, retryId])).toEqual([retryId])
    expect(await getRun(failed)).toMatchObject({ status: 404 })
    // The retry keeps its link (to a run that is gone) and its steps, the carried one included; which steps were carried
    // was read from the retried run, so `carriedFrom` goes with it.
    const after = await getRun(retryId)
    expect(after.status).toBe(200)
    const { steps, ...run } = after.body as { steps: Record<string, unknown>[] }
    const { steps: stepsBefore, ...runBefore } = before.body as { steps: Record<string, unknown>[] }
    expect(run).toEqual(runBefore)
    expect(steps).toEqual(stepsBefore.map(({ carriedFrom: _, ...step }) => step))
    // Nor can it be retried now: 404, like any run that is gone.
    expect(await call(request(`/v1/workflow-runs/${failed}/retry`, { method: 'POST', headers: bearer(token) }))).toMatchObject({ status: 404 })
  }, 30_000)

  /**
   * `act` while another transaction has deleted the run `runId` (as a pass of the retention does) and not yet committed:
   * `act` must wait for it (still unanswered after half a second); then the deletion commits. What `act` answered.
   */
  async function whilePruning<T>(runId: string, act: () => Promise<T>): Promise<T> {
    const store = env.store
    if (store.kind !== 'postgres') throw new Error('PostgreSQL only')
    const reserved = await store.sql.reserve()
    try {
      await reserved.unsafe('BEGIN')
      await reserved.unsafe('DELETE FROM runs WHERE id = $1', [runId])
      let answered = false
      const answer = act().finally(() => (answered = true))
      await Bun.sleep(500)
      expect(answered).toBe(false)
      await reserved.unsafe('COMMIT')
      return await answer
    } finally {
      reserved.release()
    }
  }

  postgresOnlyTest(POSTGRES_ONLY.concurrentWriters, 'a retry waits for a pruning under way that deletes its run, then is 404: never a retry whose steps were deleted before it copied them', async () => {
    const failed = await trigger('Notify', 'rh-12')
    await reaches(failed, 'failed')
    const retry = await whilePruning(failed, () => call(request(`/v1/workflow-runs/${failed}/retry`, { method: 'POST', headers: bearer(token) })))
    expect(retry).toMatchObject({ status: 404, body: { code: 'not_found' } })
    expect(count(`SELECT count(*) AS n FROM runs WHERE retry_of = '${failed}'`)).toBe(0)
  }, 30_000)

  postgresOnlyTest(POSTGRES_ONLY.concurrentWriters, 'a bulk retry skips a run that a pruning under way deletes (not_found) and retries the others', async () => {
    const [older, newer] = [await trigger('Notify', 'rh-13'), await trigger('Notify', 'rh-14')]
    await reaches(older, 'failed')
    await reaches(newer, 'failed')
    // Both listed before the pruning begins (its open transaction would hold the runs list back: PostgreSQL's lists' pass).
    expect(await env.store.awaitListed('runs')).toBe(true)
    const admin = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
    const bulk = await whilePruning(older, () =>
      call(request('/v1/project/Acme/environment/production/workflow-runs/retry', { method: 'POST', headers: bearer(admin), json: { workflowName: 'Notify' } })),
    )
    expect(bulk).toMatchObject({ status: 200, body: { retried: [{ retryOf: newer }], skipped: [{ runId: older, code: 'not_found' }], more: false } })
  }, 30_000)

  /**
   * `copies` copies of the run `template`, each with its steps and key, finished before it (the oldest first in the
   * index's order); their ids are the template's with `-<n>` after it. On PostgreSQL each table is ANALYZEd right after
   * its rows go in: a connection's cached foreign-key checks and cascades (planned while the tables held a few rows, as
   * a scan of the whole table) are planned again only then — without it, the next statement's 150,000 key checks each
   * scanned the 50,000 new runs (seen: > 120 s, once the tables had been small when the pool's connections first used them).
   */
  async function copyRun(template: string, copies: number): Promise<void> {
    const series = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${copies})`
    await executeBeside(env.store, `${series} INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger", status, next_step,
        available_at, lease_owner, lease_expires_at, attempts, error, created_at, started_at, finished_at, retry_of)
      SELECT r.id || '-' || n.i, r.workflow_id, r.workflow_version_id, r.environment_id, r.record_id, r.user_id, r.token_id, r."trigger", r.status, r.next_step,
        r.available_at, r.lease_owner, r.lease_expires_at, r.attempts, r.error, r.created_at, r.started_at, r.finished_at - 1000000 - n.i, r.retry_of
      FROM runs r, n WHERE r.id = ?`, template)
    await analyze('runs')
    await executeBeside(env.store, `${series} INSERT INTO run_steps (run_id, step_index, name, type, status, attempts, output, error, started_at, finished_at)
      SELECT s.run_id || '-' || n.i, s.step_index, s.name, s.type, s.status, s.attempts, s.output, s.error, s.started_at, s.finished_at FROM run_steps s, n WHERE s.run_id = ?`, template)
    await analyze('run_steps')
    await executeBeside(env.store, `${series} INSERT INTO idempotency_keys (workflow_id, user_id, key, request_hash, run_id, created_at)
      SELECT k.workflow_id, k.user_id, k.key || '-' || n.i, k.request_hash, k.run_id || '-' || n.i, k.created_at FROM idempotency_keys k, n WHERE k.run_id = ?`, template)
    await analyze('idempotency_keys')
  }

  /** PostgreSQL's statistics of `table` taken now (see `copyRun`); nothing on SQLite. */
  async function analyze(table: string): Promise<void> {
    if (env.store.kind === 'postgres') await executeBeside(env.store, `ANALYZE ${table}`)
  }

  /** A Stamp run on `recordId` with a key, finished: its id and finish time. */
  async function stampedRun(recordId: string): Promise<{ id: string; finished: number }> {
    const id = await trigger('Stamp', recordId, `stamp-${recordId}-${crypto.randomUUID()}`)
    await reaches(id, 'succeeded')
    return { id, finished: finishedAt(id) }
  }

  test(`in batches of ${FINISHED_RUNS_PER_BATCH}, each a short write: 2,345 runs of three steps and a key each`, async () => {
    const template = await stampedRun('rh-10')
    const copies = 2_345
    await copyRun(template.id, copies)
    const copyIds = `(SELECT id FROM runs WHERE id LIKE '${template.id}-%')`
    expect(count(`SELECT count(*) AS n FROM runs WHERE id IN ${copyIds}`)).toBe(copies)
    expect(count(`SELECT count(*) AS n FROM run_steps WHERE run_id IN ${copyIds}`)).toBe(3 * copies)
    expect(count(`SELECT count(*) AS n FROM idempotency_keys WHERE run_id IN ${copyIds}`)).toBe(copies)

    const expected = count(`SELECT count(*) AS n FROM runs WHERE status IN ${FINISHED} AND finished_at < ${template.finished}`)
    expect(expected).toBeGreaterThanOrEqual(copies)
    const pruned = await pruneRunHistory(env.store, at(template.finished + retention), retention)
    expect(pruned).toMatchObject({ runs: expected, batches: Math.floor(expected / FINISHED_RUNS_PER_BATCH) + 1 })
    console.log(`pruning ${pruned.runs} runs (three steps and a key each) on ${TEST_STORE}: ${pruned.batches} batches of up to ${FINISHED_RUNS_PER_BATCH}, the longest ${pruned.longestBatchMs.toFixed(1)} ms from queued to committed`)
    expect(count(`SELECT count(*) AS n FROM run_steps WHERE run_id LIKE '${template.id}-%'`)).toBe(0)
    expect(count(`SELECT count(*) AS n FROM idempotency_keys WHERE run_id LIKE '${template.id}-%'`)).toBe(0)
    expect(runsLeft([template.id])).toEqual([template.id])
  }, 60_000)

  postgresOnlyTest(POSTGRES_ONLY.queryPlan, 'the pruning statement walks runs_finished_idx on PostgreSQL, whether few runs or most are past the cutoff (SQLite: test/query-plans.test.ts)', async () => {
    const store = env.store
    if (store.kind !== 'postgres') throw new Error('PostgreSQL only')
    // The statement as the store runs it: built by its dialect; EXPLAINed with the cutoff bound.
    const step = deleteFinishedRunBatch(0).next().value as unknown as { query: QueryCall }
    const text = (step.query.build(postgresDialect(store.db)) as unknown as { toSQL(): { sql: string } }).toSQL().sql
    const plan = async (cutoff: number) => ((await store.sql.unsafe(`EXPLAIN ${text}`, [cutoff])) as { 'QUERY PLAN': string }[]).map((row) => row['QUERY PLAN']).join('\n')
    // 50,000 finished runs, their statistics taken: ten past the first cutoff (a pass at steady state), all past the
    // second (retention turned on over an old history). Each batch walks the index's oldest entries and deletes them
    // by primary key. (On a table of a few thousand runs PostgreSQL rightly hashes the whole table instead.)
    const template = await stampedRun('rh-11')
    await copyRun(template.id, 50_000)
    for (const cutoff of [template.finished - 1_000_000 - 49_990, template.finished]) {
      const shown = await plan(cutoff)
      if (process.env.SHOW_PLANS) console.log(`PLAN pruning, cutoff ${cutoff}:\n${shown}`)
      expect(shown).toContain('Index Scan using runs_finished_idx on runs')
      expect(shown).toContain('Index Scan using runs_pkey on runs')
      expect(shown).not.toMatch(/Seq Scan on runs|Sort Key/)
    }
    expect((await pruneRunHistory(store, at(template.finished + retention), retention)).runs).toBeGreaterThanOrEqual(50_000)
  }, 120_000)
})

// ── Real servers ────────────────────────────────────────────────────────────

/** A retention of seconds: passes every second (half of it). */
const SHORT_RETENTION = { TRELLIS_RUN_RETENTION: '2s', TRELLIS_HTTP_ALLOW: '127.0.0.1', TRELLIS_LOG_LEVEL: 'info', ...HIGH_API_BUDGETS }
const RETENTION_MS = 2_000
const PASS_MS = 1_000
/** The file-size test's trigger rate. */
const TRIGGERS_PER_SECOND = 40
/** A run of one `http` step, on any record id (nothing is read): a step's output and a key to prune with each run. */
// A call that hangs ends the run (failed) within 3 s, well inside the loops' 10 s wait for each run: one such call
// in ~6,000 to this process's receiver was seen to hang, which these tests (of the history's size) are not about; the
// loop says so when a run fails.
const PING = ordersWorkflow('Ping', [{ type: 'http', name: 'ping', method: 'POST', url: `${receiverUrl}/ok/{{record.id}}`, retries: 0, timeoutSeconds: 3 }], { webhook: FAST })

const servers: ServeProcess[] = []
const cleanups: (() => void)[] = []
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop('SIGKILL')))
  for (const cleanup of cleanups) cleanup()
})

/** The deployment under test: one `serve` on a SQLite data directory, or two instances on one PostgreSQL database. */
interface Deployment {
  urls: string[]
  hook: string
  token: string
  /** The SQLite file (null on PostgreSQL). */
  file: string | null
  /** A statement on the deployment's database (portable SQL); the first column of its first row, as a number. */
  number(statement: string): number
  /** Everything the instances logged. */
  output(): string
  close(): Promise<void>
}

async function deployment(): Promise<Deployment> {
  if (TEST_STORE === 'postgres') {
    const url = await freshDatabase()
    const document = acmeDocument()
    acmeProject(document).workflows!.push(PING)
    const set = await startInstances({ url, document, count: 2, env: SHORT_RETENTION })
    return {
      urls: set.instances.map((instance) => instance.url),
      hook: set.hooks.Ping!,
      token: await set.token('bob@example.com', 'history', 'workflows:trigger'),
      file: null,
      number: (statement) => Number(psqlSync(url, statement).trim()),
      output: () => set.instances.map((instance) => instance.stdout()).join(''),
      close: () => set.close(),
    }
  }
  const seeded = await seedDataDir('history', [PING], cleanups, async (store, report) => ({
    hook: hookPath(report.workflows.find((w) => w.name === 'Ping')!.webhook.url),
    token: (await tokenFor(store, systemClock, 'bob', ['workflows:trigger'])).value,
  }))
  const server = await startServe({ dataDir: seeded.dataDir, cwd: seeded.cwd, env: SHORT_RETENTION, timeoutMs: 20_000 })
  servers.push(server)
  const file = databasePath(seeded.dataDir)
  return {
    urls: [server.url],
    hook: seeded.hook,
    token: seeded.token,
    file,
    number: (statement) => {
      const db = new Database(file, { readonly: true })
      try {
        return Number(db.prepare(statement).values()[0]![0])
      } finally {
        db.close()
      }
    },
    output: () => server.stdout(),
    close: async () => void (await server.stop('SIGTERM')),
  }
}

/**
 * `clients` loops, each triggering Ping on a fresh record with a fresh Idempotency-Key (round robin over the
 * deployment's instances) until `stop(calls sent)` says so; every answer must be 202. With `eachToItsEnd`, a client
 * waits for its run to finish (read through the API) before the next trigger: a steady load the server keeps up with,
 * whatever the machine. `perSecond`: at most that many triggers a second, all clients together. Their run ids, in order.
 */
async function triggerLoop(deployed: Deployment, clients: number, stop: (sent: number) => boolean, eachToItsEnd = false, perSecond = Infinity): Promise<string[]> {
  const started: string[] = []
  let sequence = 0
  // Paced: trigger n is sent no sooner than n / perSecond after the start. A client that falls behind sends at once
  // but never faster than that, so the rate is the pace wherever the machine can keep it, and less where it cannot.
  const loopStart = performance.now()
  const client = async () => {
    while (!stop(sequence)) {
      const n = sequence++
      const due = loopStart + (n * 1000) / perSecond - performance.now()
      if (due > 0) await Bun.sleep(due)
      const url = deployed.urls[n % deployed.urls.length]
      const response = await fetch(`${url}${deployed.hook}`, {
        method: 'POST',
        headers: { ...bearer(deployed.token), 'content-type': 'application/json', 'idempotency-key': `loop-${n}` },
        body: JSON.stringify({ record_id: `loop-${n}` }),
      })
      const text = await response.text()
      expect(response.status, text).toBe(202)
      const runId = (JSON.parse(text) as { runId: string }).runId
      started.push(runId)
      if (!eachToItsEnd) continue
      const run = await until(
        `run ${runId} to finish`,
        async () => {
          const body = (await (await fetch(`${url}/v1/workflow-runs/${runId}`, { headers: bearer(deployed.token) })).json()) as { status: string; finishedAt: string | null }
          return body.finishedAt !== null && body
        },
        10_000,
        5,
      )
      if (run.status !== 'succeeded') console.log(`run ${runId} of the loop ended ${run.status}: ${JSON.stringify(run)}`)
    }
  }
  await Promise.all(Array.from({ length: clients }, client))
  return started
}

/** `trellis_runs_pruned_total` summed over the deployment's instances. */
async function prunedOnMetrics(deployed: Deployment): Promise<number> {
  let total = 0
  for (const url of deployed.urls) {
    const text = await (await fetch(`${url}/metrics`)).text()
    const value = /^trellis_runs_pruned_total (\d+)$/m.exec(text)
    expect(value).not.toBeNull()
    total += Number(value![1])
  }
  return total
}

test(`real servers (PostgreSQL: two instances): a retention of ${RETENTION_MS / 1000} s prunes finished runs by itself, every second, with their steps and keys`, async () => {
  const deployed = await deployment()
  try {
    // A first burst, then a steady loop for a few seconds.
    const first = await triggerLoop(deployed, 4, (sent) => sent >= 40)
    // Every run of the burst ends; on a busy host the first may already be pruned when the last ends, so each run still
    // there is checked for its key in one statement (one snapshot), and the entries, which stay, for all of them.
    await until('the first runs to finish', () => deployed.number(`SELECT count(*) FROM runs WHERE id IN ${idList(first)} AND status NOT IN ${FINISHED}`) === 0, 20_000)
    expect(deployed.number(`SELECT count(*) FROM runs r WHERE r.id IN ${idList(first)} AND (r.status <> 'succeeded' OR NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.run_id = r.id))`)).toBe(0)
    const entries = deployed.number(`SELECT count(*) FROM activity_logs WHERE run_id IN ${idList(first)}`)
    expect(entries).toBe(2 * first.length) // triggerWorkflow, completeWorkflow
    const deadline = Date.now() + 5_000
    const more = await triggerLoop(deployed, 4, () => Date.now() >= deadline, true)
    // Within the retention and a pass (and a second's slack), every run of the first burst went, with its steps and keys.
    await until('the first runs to be pruned', () => deployed.number(`SELECT count(*) FROM runs WHERE id IN ${idList(first)}`) === 0, RETENTION_MS + PASS_MS + 5_000)
    expect(deployed.number(`SELECT count(*) FROM run_steps WHERE run_id IN ${idList(first)}`)).toBe(0)
    expect(deployed.number(`SELECT count(*) FROM idempotency_keys WHERE run_id IN ${idList(first)}`)).toBe(0)
    // Their activity entries stay.
    expect(deployed.number(`SELECT count(*) FROM activity_logs WHERE run_id IN ${idList(first)}`)).toBe(entries)
    for (const id of first.slice(0, 3)) {
      const response = await fetch(`${deployed.urls[0]}/v1/workflow-runs/${id}`, { headers: bearer(deployed.token) })
      expect(response.status).toBe(404)
    }
    // No finished run is older than the retention and a pass, give or take a second: the history stays bounded.
    const now = Date.now()
    expect(deployed.number(`SELECT count(*) FROM runs WHERE status IN ${FINISHED} AND finished_at < ${now - RETENTION_MS - PASS_MS - 1_000}`)).toBe(0)
    const kept = deployed.number('SELECT count(*) FROM runs')
    const pruned = await prunedOnMetrics(deployed)
    console.log(`${TEST_STORE}: ${first.length + more.length} runs started, ${pruned} pruned (trellis_runs_pruned_total), ${kept} kept`)
    expect(pruned).toBeGreaterThanOrEqual(first.length)
    expect(kept).toBeLessThan(more.length)
    expect(deployed.output()).toContain('"pruned run history"')
  } finally {
    await deployed.close()
  }
}, 120_000)

const MB = 1024 * 1024
const sizeOf = (file: string) => {
  try {
    return statSync(file).size
  } catch {
    return 0
  }
}
const mb = (bytes: number) => (bytes / MB).toFixed(2)

sqliteOnlyTest(SQLITE_ONLY.fileSize, 'a steady trigger loop with a retention of 2 s: the SQLite file stops growing but for the activity log (measured, printed)', async () => {
  const deployed = await deployment()
  const file = deployed.file!
  // A reader of the served file: its size in pages (what the file is once checkpointed), its free pages, and the pages
  // of the activity log's tables and indexes — which log retention governs, in days, and which grow with every run.
  const reader = new Database(file, { readonly: true })
  const logTrees = (reader.prepare("SELECT name FROM sqlite_master WHERE tbl_name IN ('activity_logs', 'activity_log_records')").all() as { name: string }[]).map((r) => r.name)
  const pragma = (name: string) => Number(Object.values(reader.prepare(`PRAGMA ${name}`).get() as Record<string, number>)[0])
  const logBytes = reader.prepare(`SELECT coalesce(sum(pgsize), 0) AS bytes FROM dbstat WHERE name IN (${logTrees.map(() => '?').join(', ')})`)
  const runCount = reader.prepare('SELECT count(*) AS n FROM runs')
  const started = Date.now()
  const sample = () => {
    const size = pragma('page_count') * pragma('page_size')
    const logs = Number((logBytes.get(...logTrees) as { bytes: number }).bytes)
    return { at: (Date.now() - started) / 1000, size, logs, rest: size - logs, free: pragma('freelist_count') * pragma('page_size'), file: sizeOf(file), wal: sizeOf(`${file}-wal`), runs: Number((runCount.get() as { n: number }).n) }
  }
  const samples: ReturnType<typeof sample>[] = []
  const sampler = setInterval(() => samples.push(sample()), 1_000)
  try {
    const loadMs = Number(process.env.LOAD_MS ?? 24_000)
    // A steady rate, below what a 2-core machine running other test files beside this one keeps (≈ 65 runs/s seen at the
    // slowest): the runs a retention holds go with the rate, and a closed loop's rate rises as the machine frees up.
    const runs = await triggerLoop(deployed, 4, () => Date.now() - started >= loadMs, true, TRIGGERS_PER_SECOND)
    clearInterval(sampler)
    samples.push(sample())
    // After a warm-up (the retention, a pass and some), the rest of the time in thirds.
    const measured = samples.filter((s) => s.at >= 6)
    const third = Math.floor(measured.length / 3)
    const [firstThird, lastThird] = [measured.slice(0, third), measured.slice(-third)]
    const max = (values: number[]) => Math.max(...values)
    console.log(`SQLite file under ${loadMs / 1000} s of triggers with a run retention of ${RETENTION_MS / 1000} s: ${runs.length} runs (${Math.round(runs.length / (loadMs / 1000))}/s), each with a step and a key`)
    console.log('   t(s)  size(MB)  activity log(MB)  rest(MB)  free(MB)  main file(MB)  -wal(MB)  runs kept')
    for (const s of samples) console.log(`  ${s.at.toFixed(1).padStart(5)}  ${mb(s.size).padStart(8)}  ${mb(s.logs).padStart(16)}  ${mb(s.rest).padStart(8)}  ${mb(s.free).padStart(8)}  ${mb(s.file).padStart(13)}  ${mb(s.wal).padStart(8)}  ${String(s.runs).padStart(9)}`)
    // What the runs, their steps and keys hold (all but the log and the free pages), and the free pages the passes leave
    // for the next writes: the free list swings with the passes (0 to ~0.4 MB and back over a minute, measured with
    // LOAD_MS=72000), so a third of 24 s can catch it rising; the pages in use cannot.
    const live = (s: (typeof samples)[number]) => s.rest - s.free
    const [firstMax, lastMax] = [max(firstThird.map(live)), max(lastThird.map(live))]
    const freeMax = max(measured.map((s) => s.free))
    const grown = { size: measured.at(-1)!.size - measured[0]!.size, logs: measured.at(-1)!.logs - measured[0]!.logs, free: measured.at(-1)!.free - measured[0]!.free }
    console.log(`  all but the activity log and the free pages: ${mb(firstMax)} MB at most in the first third after the warm-up, ${mb(lastMax)} MB in the last; free pages at most ${mb(freeMax)} MB; the file grew ${mb(grown.size)} MB, the activity log ${mb(grown.logs)} MB, the free pages ${mb(grown.free)} MB`)
    expect(third).toBeGreaterThanOrEqual(4)
    expect(runs.length).toBeGreaterThan((TRIGGERS_PER_SECOND * loadMs) / 1000 / 2)
    // The runs, their steps and keys: flat (within a quarter: on a busy machine the passes come late and hold a few more
    // runs at a time — 1.05 → 1.17 MB seen — where runs never pruned would triple it). The free pages they leave: reused,
    // never more than half of what they hold.
    expect(lastMax).toBeLessThanOrEqual(firstMax * 1.25)
    expect(freeMax).toBeLessThanOrEqual(firstMax * 0.5)
    // The file grows by the activity log's entries and the free list's swing, no more (free pages go to the log too).
    expect(grown.size).toBeLessThanOrEqual(grown.logs + Math.max(0, grown.free) + 0.1 * firstMax)
    // The runs kept: about the last retention and pass worth of them, not the whole loop's.
    expect(max(lastThird.map((s) => s.runs))).toBeLessThan(runs.length / 3)
  } finally {
    clearInterval(sampler)
    reader.close()
    await deployed.close()
  }
}, 90_000)

/**
 * Issue 27, item 3: a bounded run history (README "Run history retention"). Through the app with the executor running,
 * on the store the pass gives (both passes: this file is in POSTGRES_PASS): the finished runs older than the retention
 * go with their steps and idempotency keys, in batches; newer ones stay, and active ones (queued, running, waiting)
 * whatever their age; activity and admin logs are not touched; a pruned run is 404, and a retry whose retried run was
 * pruned still renders. Then through real `trellis serve` processes with a retention of seconds: the runs go by
 * themselves, counted on /metrics (PostgreSQL: two instances); and on SQLite, under a steady trigger loop, the file
 * stops growing but for the activity log's own entries (measured, printed).
 *
 * Acme: bob is an editor in team Support; his runs are on Support's `orders` in production.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { statSync } from 'node:fs'
import { databasePath } from '../src/db/open.ts'
import type { QueryCall } from '../src/db/query.ts'
import { deleteFinishedRunBatch, FINISHED_RUNS_PER_BATCH } from '../src/db/maintenance.ts'
import { postgresDialect } from '../src/db/postgres/dialect.ts'
import { Executor } from '../src/executor/executor.ts'
import { type Clock, systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { pruneRunHistory } from '../src/modules/runs/history.ts'
import {
  bearer,
  execute,
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
const RECORDS = Array.from({ length: 12 }, (_, i) => `rh-${i + 1}`)
const FINISHED = "('succeeded', 'failed', 'cancelled')"

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
  const idList = (ids: string[]) => `(${ids.map((id) => `'${id}'`).join(', ')})`
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
    execute(env.store, `UPDATE runs SET created_at = 1, started_at = 1, finished_at = 1 WHERE id IN ${idList(active)}`)

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
    // A pruned run's key went with it: the same call starts a new run (README "Idempotency keys").
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
   * `copies` copies of the run `template`, each with its steps and key, finished before it (the oldest first in the
   * index's order); their ids are the template's with `-<n>` after it.
   */
  function copyRun(template: string, copies: number): void {
    const series = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${copies})`
    execute(env.store, `${series} INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger", status, next_step,
        available_at, lease_owner, lease_expires_at, attempts, error, created_at, started_at, finished_at, retry_of)
      SELECT r.id || '-' || n.i, r.workflow_id, r.workflow_version_id, r.environment_id, r.record_id, r.user_id, r.token_id, r."trigger", r.status, r.next_step,
        r.available_at, r.lease_owner, r.lease_expires_at, r.attempts, r.error, r.created_at, r.started_at, r.finished_at - 1000000 - n.i, r.retry_of
      FROM runs r, n WHERE r.id = ?`, template)
    execute(env.store, `${series} INSERT INTO run_steps (run_id, step_index, name, type, status, attempts, output, error, started_at, finished_at)
      SELECT s.run_id || '-' || n.i, s.step_index, s.name, s.type, s.status, s.attempts, s.output, s.error, s.started_at, s.finished_at FROM run_steps s, n WHERE s.run_id = ?`, template)
    execute(env.store, `${series} INSERT INTO idempotency_keys (workflow_id, user_id, key, request_hash, run_id, created_at)
      SELECT k.workflow_id, k.user_id, k.key || '-' || n.i, k.request_hash, k.run_id || '-' || n.i, k.created_at FROM idempotency_keys k, n WHERE k.run_id = ?`, template)
    if (env.store.kind === 'postgres') execute(env.store, 'ANALYZE runs')
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
    copyRun(template.id, copies)
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
    const step = deleteFinishedRunBatch(0).next().value as { args: [QueryCall] }
    const text = (step.args[0].build(postgresDialect(store.db)) as unknown as { toSQL(): { sql: string } }).toSQL().sql
    const plan = async (cutoff: number) => ((await store.sql.unsafe(`EXPLAIN ${text}`, [cutoff])) as { 'QUERY PLAN': string }[]).map((row) => row['QUERY PLAN']).join('\n')
    // 50,000 finished runs, their statistics taken: ten past the first cutoff (a pass at steady state), all past the
    // second (retention turned on over an old history). Each batch walks the index's oldest entries and deletes them
    // by primary key. (On a table of a few thousand runs PostgreSQL rightly hashes the whole table instead.)
    const template = await stampedRun('rh-11')
    copyRun(template.id, 50_000)
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

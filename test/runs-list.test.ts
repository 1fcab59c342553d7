/**
 * `GET /v1/project/{p}/environment/{e}/workflow-runs`: project admins list runs newest first with the shared
 * envelope, `limit` rules and filters (`workflowName`, `teamName`, `recordId`, `status`, `createdAt.*`).
 */
import { afterAll, expect, test } from 'bun:test'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, reportHook, tokenFor } from './support/acme.ts'
import { fillPlaceholders } from 'drizzle-orm/sql'
import type { QueryCall } from '../src/db/op.ts'
import { postgresDialect } from '../src/db/postgres/dialect.ts'
import { loadRunsToRender } from '../src/db/runs.ts'
import { bearer, execute, POSTGRES_ONLY, postgresOnlyTest, request, testApp, testEnv } from './helpers.ts'

const env = testEnv({ TRELLIS_WEBHOOK_RATE_PER_MIN: '100000' })
afterAll(() => env.cleanup())

const document = acmeDocument()
acmeProject(document).workflows!.push(ordersWorkflow('Second', [{ type: 'load' }]))
const report = await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
const app = testApp(env)
const alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
const bob = (await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])).value

interface RunPage {
  hasMore: boolean
  data: { id: string; status: string; recordId: string; createdAt: string; workflow: { name: string } }[]
  parameters: Record<string, unknown>
}

async function list(query: Record<string, string>, token = alice) {
  const response = await app.handle(request(`/v1/project/Acme/environment/production/workflow-runs?${new URLSearchParams(query)}`, { headers: bearer(token) }))
  return { status: response.status, body: (await response.json()) as RunPage & { code?: string } }
}

test('filters, order, envelope, limit rules and access', async () => {
  const started: { id: string; workflow: string; record: string; at: number }[] = []
  for (const [workflow, record] of [
    ['Refund order', 'ord_1001'],
    ['Second', 'ord_1001'],
    ['Refund order', 'ord_1002'],
    ['Second', 'ord_1003'],
    ['Refund order', 'ord_1003'],
  ] as const) {
    env.clock.advance(1_000)
    const response = await app.handle(request(reportHook(report, workflow), { method: 'POST', headers: bearer(bob), json: { record_id: record } }))
    expect(response.status).toBe(202)
    started.push({ id: ((await response.json()) as { runId: string }).runId, workflow, record, at: env.clock.now() })
  }
  execute(env.store, "UPDATE runs SET status = 'failed' WHERE id = ?", started[0]!.id)
  const newestFirst = [...started].reverse()
  const ids = (page: RunPage) => page.data.map((r) => r.id)

  const all = await list({})
  expect(all.status).toBe(200)
  expect(ids(all.body)).toEqual(newestFirst.map((r) => r.id))
  expect(all.body).toMatchObject({ hasMore: false, parameters: { projectName: 'Acme', environmentName: 'production', limit: 10 } })

  expect(ids((await list({ workflowName: 'Second' })).body)).toEqual(newestFirst.filter((r) => r.workflow === 'Second').map((r) => r.id))
  expect(ids((await list({ workflowName: 'Second', teamName: 'Billing' })).body)).toEqual([])
  expect(ids((await list({ workflowName: 'Nope' })).body)).toEqual([])
  expect(ids((await list({ recordId: 'ord_1003' })).body)).toEqual(newestFirst.filter((r) => r.record === 'ord_1003').map((r) => r.id))
  expect(ids((await list({ status: 'failed' })).body)).toEqual([started[0]!.id])
  expect(ids((await list({ status: 'queued', workflowName: 'Refund order' })).body)).toEqual(
    newestFirst.filter((r) => r.workflow === 'Refund order' && r.id !== started[0]!.id).map((r) => r.id),
  )
  const third = started[2]!
  expect(ids((await list({ 'createdAt.lt': new Date(third.at).toISOString() })).body)).toEqual([started[1]!.id, started[0]!.id])
  expect(ids((await list({ 'createdAt.gte': new Date(third.at).toISOString(), 'createdAt.lte': new Date(started[3]!.at).toISOString() })).body)).toEqual([
    started[3]!.id,
    third.id,
  ])
  // A filter with microseconds compares with the exact instant, no rounding either way.
  const justAfterThird = new Date(third.at).toISOString().replace('Z', '001Z') // third.at + 1 µs
  expect(ids((await list({ 'createdAt.lt': justAfterThird })).body)).toEqual([third.id, started[1]!.id, started[0]!.id])
  expect(ids((await list({ 'createdAt.gt': justAfterThird })).body)).toEqual(newestFirst.slice(0, 2).map((r) => r.id))
  expect(ids((await list({ 'createdAt.eq': justAfterThird })).body)).toEqual([])
  expect(ids((await list({ 'createdAt.lte': new Date(third.at - 1).toISOString().replace('Z', '999Z') })).body)).toEqual([started[1]!.id, started[0]!.id])

  const page = await list({ limit: '2' })
  expect(page.body.hasMore).toBe(true)
  expect(ids(page.body)).toEqual(newestFirst.slice(0, 2).map((r) => r.id))
  const exact = await list({ limit: '5' })
  expect(exact.body.hasMore).toBe(false)

  const refusals: Record<string, string>[] = [{ limit: '0' }, { limit: '101' }, { status: 'sleeping' }, { 'createdAt.lt': 'yesterday' }]
  for (const bad of refusals) {
    const refused = await list(bad)
    expect(refused.status).toBe(400)
    expect(refused.body.code).toBe('invalid_parameter')
  }
  expect((await list({}, bob)).status).toBe(403) // bob is not a project admin
})

test('runs triggered together (one group commit, one millisecond) each get their own createdAt: createdAt.lt paging returns every run once', async () => {
  const records = Array.from({ length: 30 }, (_, i) => `together-${i}`)
  const responses = await Promise.all(
    records.map((record) => app.handle(request(reportHook(report, 'Refund order'), { method: 'POST', headers: bearer(bob), json: { record_id: record } }))),
  )
  expect(responses.map((r) => r.status)).toEqual(records.map(() => 202))
  const triggered = new Set(await Promise.all(responses.map(async (r) => ((await r.json()) as { runId: string }).runId)))
  const seen: { id: string; createdAt: string }[] = []
  let query: Record<string, string> = { limit: '7' }
  for (let pages = 0; pages < 20; pages++) {
    const { status, body } = await list(query)
    expect(status).toBe(200)
    seen.push(...body.data.map((r) => ({ id: r.id, createdAt: r.createdAt })))
    if (!body.hasMore) break
    query = { limit: '7', 'createdAt.lt': body.data.at(-1)!.createdAt }
  }
  const ids = seen.map((r) => r.id)
  expect(new Set(ids).size).toBe(ids.length)
  for (const id of triggered) expect(ids).toContain(id)
  // Newest first, each strictly older than the one before, in valid ISO 8601 with microseconds.
  for (let i = 1; i < seen.length; i++) expect(seen[i]!.createdAt < seen[i - 1]!.createdAt).toBe(true)
  for (const run of seen) expect(run.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/)
})

postgresOnlyTest(POSTGRES_ONLY.queryPlan, 'a page of runs is rendered by looking each id up, however many runs the table holds', async () => {
  const store = env.store
  if (store.kind !== 'postgres') throw new Error('PostgreSQL only')
  // A run to copy (202, or 409 when one is active on the record already).
  const started = await app.handle(request(reportHook(report, 'Refund order'), { method: 'POST', headers: bearer(bob), json: { record_id: 'ord_1002' } }))
  expect([202, 409]).toContain(started.status)
  const rolledBack = new Error('rolled back')
  let plan = ''
  const done = store.sql.begin(async (tx) => {
    // 20,000 more runs (copies of one, finished, each its own id), and the statistics that say so.
    await tx.unsafe(`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger", status, next_step,
        available_at, attempts, created_at, finished_at)
      SELECT 'bulk-' || g, workflow_id, workflow_version_id, environment_id, 'bulk-' || g, user_id, token_id, "trigger", 'succeeded', next_step,
        available_at, attempts, created_at - g, created_at
      FROM runs, generate_series(1, 20000) g WHERE id = (SELECT min(id) FROM runs)`)
    await tx.unsafe('ANALYZE runs')
    const ids = Array.from({ length: 100 }, (_, i) => `bulk-${i * 197 + 1}`)
    const call = (loadRunsToRender(ids).next().value as { query: QueryCall }).query
    const built = call.build(postgresDialect(store.db)).prepare('explained' as never) as unknown as { queryString: string; params: unknown[] }
    const rows = (await tx.unsafe(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${built.queryString}`, fillPlaceholders(built.params, call.values ?? {}) as never[])) as { 'QUERY PLAN': string }[]
    plan = rows.map((row) => row['QUERY PLAN']).join('\n')
    throw rolledBack
  })
  expect(await done.catch((error: unknown) => error)).toBe(rolledBack)
  // The ids once, each looked up in the primary key: never every run read and hashed against them.
  expect(plan).toMatch(/Index Scan using runs_pkey on runs r/)
  expect(plan).not.toMatch(/Seq Scan on runs r|Hash Semi Join/)
}, 60_000)

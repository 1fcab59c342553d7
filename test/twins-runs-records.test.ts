/**
 * The runs-read and records twins (src/db/postgres/runs.ts, records.ts) answer as src/db/runs.ts and
 * src/db/records.ts: runs with steps, tokens and workflows seeded on both stores, every page (each filter, `before`
 * ids canonical or not, createdAt operators), render and find compared; records written through the records service
 * and the face with keys whose byte order differs from a locale's, every page, find and project listing compared;
 * and two writers creating the same record at once on PostgreSQL both succeed (one creates, the other updates).
 */
import { describe, expect, test } from 'bun:test'
import { manualClock } from '../src/lib/clock.ts'
import { writeNow } from '../src/db/write.ts'
import { findRecordByKey, insertRecord, listProjectCollections, listProjectParts, pageRecords, type ProjectPart, setRecordData } from '../src/db/records.ts'
import { findRunWithWorkflow, loadRunsToRender, pageRunIds, type RunFilters } from '../src/db/runs.ts'
import { upsertRecord } from '../src/modules/records/service.ts'
import { bothStores, postgresOrSkip } from './support/both-stores.ts'
import { all, dateFiltersAround, seedBoth, seedOrganization, T0, targetsOf, withSeededPostgres } from './support/lists.ts'

const runId = (n: number) => `0190a1b2-${String(n).padStart(4, '0')}-7000-8000-${n % 2 ? 'a' : 'f'}00000000000`

describe.skipIf(!postgresOrSkip('runs and records twins'))('runs and records twins', () => {
  const stores = bothStores()

  test('runs: every page, render and find answer alike', async () => {
    await seedOrganization(targetsOf(stores))
    const runs = Array.from({ length: 12 }, (_, i) => ({
      id: runId(i + 1),
      workflow_id: (i % 3) + 1,
      workflow_version_id: [1, 3, 4][i % 3]!,
      environment_id: i % 3 === 2 ? 2 : 1,
      record_id: `order-${i % 4}`,
      user_id: (i % 2) + 1,
      token_id: i % 4 === 0 ? 1 : null,
      trigger: i % 4 === 0 ? 'webhook' : 'manual',
      status: ['queued', 'running', 'succeeded', 'failed', 'waiting', 'succeeded'][i % 6]!,
      next_step: i % 3,
      available_at: T0 + i,
      lease_owner: i % 6 === 1 ? 'instance-a' : null,
      lease_expires_at: i % 6 === 1 ? T0 + 60_000 : null,
      attempts: i % 3,
      error: i % 6 === 3 ? '{"code":"http_error","message":"boom"}' : null,
      created_at: T0 * 1000 + Math.floor(i / 2) * 1000 + (i % 2),
      started_at: i % 6 === 0 ? null : T0 + 10,
      finished_at: i % 6 >= 2 && i % 6 !== 4 ? T0 + 20 : null,
    }))
    // Active runs are one per (workflow, record): keep the seed valid by giving each its own record.
    for (const r of runs) if (['queued', 'running', 'waiting'].includes(r.status)) r.record_id = `active-${r.id.slice(9, 13)}`
    await seedBoth(targetsOf(stores), 'runs', runs)
    await seedBoth(targetsOf(stores), 'run_steps', [
      { run_id: runId(3), step_index: 1, name: 'b', type: 'http', status: 'failed', attempts: 2, output: '{"status":500}', error: '{"code":"x"}', started_at: T0, finished_at: T0 + 5 },
      { run_id: runId(3), step_index: 0, name: 'a', type: 'condition', status: 'succeeded', attempts: 1, output: 'true', error: null, started_at: T0, finished_at: T0 + 1 },
      { run_id: runId(1), step_index: 0, name: 'a', type: 'note', status: 'skipped', attempts: 1, output: null, error: null, started_at: T0, finished_at: T0 },
    ])
    const ids = runs.map((r) => r.id)
    const [reads, readsPg] = await stores.both(function* () {
      return {
        find: yield* all([...ids, 'missing'], (id) => findRunWithWorkflow(id)),
        render: yield* loadRunsToRender([...ids, 'missing']),
        renderSome: yield* loadRunsToRender([ids[5]!, ids[2]!]),
        renderNone: yield* loadRunsToRender([]),
      }
    })
    expect(readsPg).toEqual(reads)
    expect(reads.render.rows).toHaveLength(12)
    expect(reads.render.steps).toHaveLength(3)
    expect(reads.render.rows[0]).toMatchObject({ version: 1, token: { id: 1, name: 'ci', prefix: 'trl_ab12' }, user: { id: 1, username: 'alice' } })
    expect(reads.find[2]!.answer).toMatchObject({ projectId: 1, workflowName: 'ship', teamId: 1, collectionId: 2 })

    const filters: RunFilters[] = [
      {},
      { workflowIds: [] },
      { workflowIds: [1] },
      { workflowIds: [1, 2] },
      { recordId: 'order-0' },
      { status: 'succeeded' },
      { userId: 2 },
      { beforeId: ids[7] },
      { beforeId: ids[0] },
      { beforeId: '0190a1b2-0006' },
      { beforeId: '0190A1B2-0006-7000-8000-F00000000000' },
      { beforeId: 'zzz' },
      { workflowIds: [2], userId: 2, status: 'succeeded', beforeId: ids[11] },
    ]
    const times = runs.map((r) => r.created_at)
    const queries = [1, 2, 3].flatMap((environmentId) =>
      filters.flatMap((f, i) => dateFiltersAround('createdAt', times, i === 0 ? 1 : 3).flatMap((dates) => (i === 0 ? [1, 2, 50] : [50]).map((limit) => ({ environmentId, f, dates, limit })))),
    )
    const [pages, pagesPg] = await stores.both(() => all(queries, (q) => pageRunIds(q.environmentId, q.f, q.dates, q.limit)))
    expect(pagesPg).toEqual(pages)
    expect(new Set(pages.map((p) => p.answer.join())).size).toBeGreaterThan(20)
  }, 120_000)

  test('records: service and face writes, every page, find and project listing alike', async () => {
    const clock = manualClock(T0)
    const keys = ['a', 'B', 'b', 'Z', 'é', 'e', '10', '9', 'a|b', 'A|b', ' lead', 'ß', 'a-b']
    for (const [i, recordKey] of keys.entries()) {
      clock.set(T0 + i * 1000)
      const input = { environmentId: 1, collectionId: 1, recordKey, data: { n: i, name: recordKey }, userId: 1, teamId: 1, via: 'by test' }
      const [result, resultPg] = await stores.both(() => upsertRecord(clock, input))
      expect([result.outcome, resultPg.outcome]).toEqual(['created', 'created'])
      const changed = function* () {
        return (yield* upsertRecord(clock, { ...input, data: { n: i, changed: true } })).outcome
      }
      if (i % 4 === 0) expect([await stores.both(changed), await stores.both(changed)]).toEqual([['updated', 'updated'], ['unchanged', 'unchanged']])
    }
    await stores.both(function* () {
      yield* insertRecord({ environmentId: 2, collectionId: 1, recordKey: 'a', data: '{"other":"env"}', now: T0 })
      yield* insertRecord({ environmentId: 1, collectionId: 2, recordKey: 'a', data: '{"other":"collection"}', now: T0 })
      yield* setRecordData(1, '{"set":"directly"}', T0 + 99, { environmentId: 1, collectionId: 1, recordKey: 'x' })
    })
    const scopes = [
      { environmentId: 1, collectionId: 1 },
      { environmentId: 2, collectionId: 1 },
      { environmentId: 1, collectionId: 2 },
      { environmentId: 3, collectionId: 4 },
    ]
    const afters = [undefined, '', 'A', 'a', 'B', 'Z', 'b', 'zz', 'é', '9', 'a|b']
    const parts: ProjectPart[] = ['environment', 'team', 'collection']
    const [reads, readsPg] = await stores.both(function* () {
      return {
        pages: yield* all(scopes.flatMap((scope) => afters.flatMap((after) => [1, 3, 100].map((limit) => ({ scope, after, limit })))), (q) => pageRecords(q.scope, q.after, q.limit)),
        find: yield* all(scopes.flatMap((scope) => [...keys, 'A', 'missing'].map((key) => ({ scope, key }))), (q) => findRecordByKey(q.scope, q.key)),
        collections: yield* all([1, 2, 3, 99], (projectId) => listProjectCollections(projectId)),
        parts: yield* all(parts.flatMap((part) => [1, 2, 99].map((projectId) => ({ part, projectId }))), (q) => listProjectParts(q.part, q.projectId)),
      }
    })
    expect(readsPg).toEqual(reads)
    expect(reads.pages[2]!.answer.map((r) => r.recordKey)).toEqual([' lead', '10', '9', 'A|b', 'B', 'Z', 'a', 'a-b', 'a|b', 'b', 'e', 'ß', 'é'])
    expect(reads.find[0]!.answer).toMatchObject({ id: 1, data: '{"set":"directly"}', updatedAt: T0 + 99 })
    expect(reads.collections[0]!.answer.map((c) => c.name)).toEqual(['Customers', 'customers', 'orders', 'éléments'])
    expect(reads.parts.find((p) => p.query.part === 'environment' && p.query.projectId === 1)!.answer.map((e) => e.name)).toEqual(['Staging', 'prod', 'äußere'])
  }, 120_000)
})

describe.skipIf(!postgresOrSkip('records twins, concurrency'))('records with concurrent writers', () => {
  test('two writers create the same record at once: one creates, the other runs again and updates', async () => {
    await withSeededPostgres(4, async (pg) => {
      const clock = manualClock(T0)
      const upsert = (n: number) =>
        writeNow(pg, () => upsertRecord(clock, { environmentId: 1, collectionId: 1, recordKey: 'same', data: { writer: n }, userId: 1, teamId: 1, via: `by writer ${n}` })).then((r) => r.outcome)
      const results = await Promise.all([upsert(1), upsert(2), upsert(3), upsert(4)])
      expect(results.filter((r) => r === 'created')).toHaveLength(1)
      expect(results.filter((r) => r === 'updated').length + results.filter((r) => r === 'created').length).toBe(4)
      const [row] = (await pg.sql`SELECT count(*)::float8 AS n FROM records`) as { n: number }[]
      expect(row!.n).toBe(1)
      const [logs] = (await pg.sql`SELECT count(*)::float8 AS n FROM activity_logs`) as { n: number }[]
      expect(logs!.n).toBe(4)
    })
  }, 60_000)
})

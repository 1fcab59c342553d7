/**
 * The activity-log and admin-log twins (src/db/postgres/logs.ts) answer as src/db/activity-logs.ts and
 * src/db/admin-logs.ts: entries appended on both stores, then every page (each filter, extensions shown and hidden,
 * each date operator around every entry's time, limits), render and record-id answer compared. Then the list time
 * rule with real concurrency: 20 transactions on a pool of 10 append to one environment at the same instant.
 */
import { describe, expect, test } from 'bun:test'
import {
  type ActivityPageFilters,
  findActivityLogRecordIds,
  findActivityLogsForRender,
  insertActivityLog,
  type NewActivityLogRow,
  pageActivityLogIds,
} from '../src/db/activity-logs.ts'
import { writeNow } from '../src/db/write.ts'
import { allProjectIds, type AdminLogPageFilters, findAdminLogsForRender, insertAdminLog, type NewAdminLogRow, pageAdminLogIds, pageInstanceAdminLogIds } from '../src/db/admin-logs.ts'
import { savepoint } from '../src/db/op.ts'
import { trackListLocks } from '../src/db/postgres/monotonic.ts'
import { runOpOnPostgres, savepointOnPostgres } from '../src/db/postgres/op-runner.ts'
import { clientOf } from '../src/db/postgres/store.ts'
import { bothStores, postgresOrSkip } from './support/both-stores.ts'
import { all, dateFiltersAround, seedOrganization, T0, targetsOf, withSeededPostgres } from './support/lists.ts'

const ENTRY: NewActivityLogRow = {
  environmentId: 1, type: 'write', action: 'createNote', label: null, userId: 1, teamId: 1, collectionId: 1, tokenId: null,
  workflowName: null, runId: null, stepName: null, extension: false,
}

const ADMIN: NewAdminLogRow = {
  projectId: 1, type: 'add', resource: 'team', initiator: 'administrator', userId: 1, subjectUserId: null, previousValue: null, newValue: '{"name":"ops"}', extension: false,
}

describe.skipIf(!postgresOrSkip('log twins'))('activity and admin log twins', () => {
  const stores = bothStores()

  test('activity entries: every page, render and record-id answer alike', async () => {
    await seedOrganization(targetsOf(stores))
    const entries: [Partial<NewActivityLogRow>, string[], number][] = [
      [{}, ['order-1'], T0],
      [{ type: 'read', action: 'readRecord', userId: 2, teamId: 2 }, ['order-2', 'order-1'], T0],
      [{ action: 'createRun', extension: true, workflowName: 'approve', runId: '0190a1b2-0000-7000-8000-000000000001', stepName: 'go' }, [], T0],
      [{ label: 'updated in the console', tokenId: 1, collectionId: null }, ['zeta', 'Alpha', 'beta', 'zeta'], T0 + 1000],
      [{ teamId: null, collectionId: 2, userId: 3 }, ['order-3'], T0 + 1000],
      [{ environmentId: 2, action: 'update' }, ['order-1'], T0 + 500],
      [{ type: 'read', action: 'readRecord', extension: false }, ['order-1', 'Order-1'], T0 + 9000],
      [{ action: 'archiveNote', userId: 2, tokenId: 1 }, [], T0 + 8000],
      [{ action: 'createRun', extension: true, userId: 2 }, ['order-2'], T0 + 9000],
      [{ environmentId: 3, teamId: 3, collectionId: 4 }, ['x'], T0],
      [{ action: 'update', collectionId: 5 }, ['order-5'], T0 + 20_000],
    ]
    for (const [over, recordIds, now] of entries) await stores.both(() => insertActivityLog({ ...ENTRY, ...over }, recordIds, now))
    // Both number the entries from 1; PostgreSQL's are dated and chained by the lists' pass, to the same times and hashes.
    const ids = entries.map((_, i) => i + 1)
    expect(await stores.pg.awaitListed('activity_logs')).toBe(true)
    const [render, renderPg] = await stores.both(function* () {
      return {
        all: yield* findActivityLogsForRender([...ids, 999]),
        none: yield* findActivityLogsForRender([]),
        records: [...(yield* findActivityLogRecordIds([...ids, 999]))],
        recordsNone: [...(yield* findActivityLogRecordIds([]))],
      }
    })
    expect(renderPg).toEqual(render)
    expect(render.all).toHaveLength(ids.length)
    expect(render.records.find(([id]) => id === ids[3])![1]).toEqual(['Alpha', 'beta', 'zeta'])
    // Same instant: the next microsecond; another environment keeps its own times.
    expect(render.all.slice(0, 3).map((r) => r.log.createdAt - T0 * 1000)).toEqual([0, 1, 2])

    for (const environmentId of [1, 2, 3, 4]) {
      const times = render.all.filter((r) => r.environment === ['prod', 'Staging', 'prod', 'x'][environmentId - 1]).map((r) => r.log.createdAt)
      const filters: ActivityPageFilters[] = [
        { withExtensions: false },
        { withExtensions: true },
        { userId: 2, withExtensions: true },
        { userId: 2, withExtensions: false },
        { teamId: 1, withExtensions: true },
        { collectionId: 2, withExtensions: false },
        { action: 'readRecord', withExtensions: false },
        { action: 'createRun', withExtensions: true },
        { type: 'read', withExtensions: true },
        { type: 'write', userId: 1, withExtensions: false },
        { recordId: 'order-1', withExtensions: false },
        { recordId: 'order-2', withExtensions: true },
        { recordId: 'Order-1', withExtensions: true },
        { recordId: 'zeta', teamId: 1, withExtensions: true },
        { recordId: 'none', withExtensions: true },
      ]
      const queries = filters.flatMap((f, i) =>
        dateFiltersAround('createdAt', times, i < 2 ? 1 : 3).flatMap((dates) => (i < 2 ? [1, 2, 50] : [50]).map((limit) => ({ f, dates, limit }))),
      )
      const [pages, pagesPg] = await stores.both(() => all(queries, (q) => pageActivityLogIds(environmentId, q.f, q.dates, q.limit)))
      expect(pagesPg).toEqual(pages)
      if (environmentId === 1) expect(new Set(pages.map((p) => p.answer.join())).size).toBeGreaterThan(30)
    }
  }, 120_000)

  test('admin entries: project and instance-wide pages, render and project ids alike', async () => {
    const entries: [Partial<NewAdminLogRow>, number][] = [
      [{}, T0],
      [{ type: 'update', previousValue: '{"a":1}', newValue: '{"a":2}' }, T0],
      [{ projectId: null, resource: 'user', subjectUserId: 4, userId: 1 }, T0],
      [{ initiator: 'identityProvider', userId: null, resource: 'member', extension: true }, T0],
      [{ initiator: 'system', userId: null, type: 'remove', resource: 'logs', extension: true }, T0 + 2000],
      [{ projectId: 2, userId: 2 }, T0 + 1000],
      [{ projectId: null, type: 'remove', resource: 'invitation', userId: 2 }, T0 + 1000],
      [{ userId: 2, type: 'initial', resource: 'sso' }, T0 + 1000],
      [{ userId: 3, resource: 'team' }, T0 + 5000],
    ]
    for (const [over, now] of entries) await stores.both(() => insertAdminLog({ ...ADMIN, ...over }, now))
    const [render, renderPg] = await stores.both(function* () {
      return {
        all: yield* findAdminLogsForRender([...Array.from({ length: entries.length }, (_, i) => i + 1), 999]),
        none: yield* findAdminLogsForRender([]),
        instance: yield* all([0, 1, 2, 10], (limit) => pageInstanceAdminLogIds(limit)),
        projects: yield* allProjectIds(),
      }
    })
    expect(renderPg).toEqual(render)
    expect(render.all).toHaveLength(entries.length)
    expect(render.all[3]).toMatchObject({ log: { extension: true, userId: null }, user: null })
    expect(render.projects).toEqual([2, 3, 1])
    expect(render.all.slice(0, 4).map((r) => r.log.createdAt - T0 * 1000)).toEqual([0, 1, 0, 2])

    for (const projectId of [1, 2, 3]) {
      const times = render.all.filter((r) => r.log.projectId === projectId).map((r) => r.log.createdAt)
      const filters: AdminLogPageFilters[] = [
        { withExtensions: false },
        { withExtensions: true },
        { userId: 2, withExtensions: false },
        { type: 'update', withExtensions: true },
        { initiator: 'system', withExtensions: true },
        { initiator: 'system', withExtensions: false },
        { resource: 'team', withExtensions: false },
        { resource: 'team', userId: 3, type: 'add', initiator: 'administrator', withExtensions: true },
      ]
      const queries = filters.flatMap((f, i) => dateFiltersAround('createdAt', times, i < 2 ? 1 : 2).flatMap((dates) => [1, 50].map((limit) => ({ f, dates, limit }))))
      const [pages, pagesPg] = await stores.both(() => all(queries, (q) => pageAdminLogIds(projectId, q.f, q.dates, q.limit)))
      expect(pagesPg).toEqual(pages)
    }
  }, 120_000)
})

describe.skipIf(!postgresOrSkip('log twins, concurrency'))('activity log times with concurrent writers', () => {
  test('20 concurrent transactions on a pool of 10 append at the same instant: once the pass has listed them, createdAt strictly increasing in id order', async () => {
    await withSeededPostgres(10, async (pg) => {
      // One existing entry later than `now`: every new one must come after it too.
      await writeNow(pg, () => insertActivityLog(ENTRY, [], T0 + 5))
      await Promise.all(Array.from({ length: 20 }, (_, i) => writeNow(pg, () => insertActivityLog({ ...ENTRY, label: `writer ${i}` }, [`r${i}`], T0))))
      expect(await pg.awaitListed('activity_logs')).toBe(true)
      const rows = (await pg.sql`SELECT id::float8 AS id, created_at::float8 AS at, chain_position::float8 AS position FROM activity_logs WHERE environment_id = 1 ORDER BY id`) as { id: number; at: number; position: number }[]
      expect(rows).toHaveLength(21)
      for (let i = 1; i < rows.length; i++) expect(rows[i]!.at).toBeGreaterThan(rows[i - 1]!.at)
      expect(new Set(rows.map((r) => r.at)).size).toBe(21)
      expect(rows[0]!.at).toBe((T0 + 5) * 1000)
      expect(rows.at(-1)!.at).toBe((T0 + 5) * 1000 + 20)
      expect(rows.map((r) => r.position)).toEqual(rows.map((_, i) => i + 1))
    })
  }, 60_000)

  test('several entries per transaction, one in a savepoint that fails: 20 such transactions at once keep createdAt strictly increasing in id order, and each writer\'s entries in its order', async () => {
    await withSeededPostgres(10, async (pg) => {
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          writeNow(pg, function* () {
            yield* insertActivityLog({ ...ENTRY, label: `writer ${i} first` }, [], T0)
            try {
              yield* savepoint(function* () {
                yield* insertActivityLog({ ...ENTRY, label: `writer ${i} rolled back` }, [], T0)
                throw new Error('the step failed')
              })
            } catch {
              // the step's savepoint rolled back, and its entry with it
            }
            yield* insertActivityLog({ ...ENTRY, label: `writer ${i} second` }, [], T0)
            yield* insertActivityLog({ ...ENTRY, label: `writer ${i} third` }, [], T0)
          }),
        ),
      )
      expect(await pg.awaitListed('activity_logs')).toBe(true)
      const rows = (await pg.sql`SELECT label, created_at::float8 AS at FROM activity_logs WHERE environment_id = 1 ORDER BY id`) as { label: string; at: number }[]
      expect(rows).toHaveLength(60)
      expect(rows.filter((r) => r.label.endsWith('rolled back'))).toEqual([])
      for (let i = 1; i < rows.length; i++) expect(rows[i]!.at).toBeGreaterThan(rows[i - 1]!.at)
      // No lock holds a transaction's entries together: they interleave with the others', each writer's in its order.
      for (let i = 0; i < 20; i++) expect(rows.filter((r) => r.label.startsWith(`writer ${i} `)).map((r) => r.label.split(' ')[2])).toEqual(['first', 'second', 'third'])
    })
  }, 60_000)

  test('an activity entry takes no lock and reads nothing: its transaction proposes `now`, then 1 µs after its own entry; a savepoint rolled back forgets it', async () => {
    await withSeededPostgres(4, async (pg) => {
      await pg.db.transaction(async (tx) => {
        trackListLocks(tx)
        const { pid } = ((await clientOf(tx).unsafe('SELECT pg_backend_pid() AS pid')) as { pid: number }[])[0]!
        const held = async () => ((await pg.sql`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = ${pid} AND granted`) as { n: number }[])[0]!.n
        await savepointOnPostgres(tx, function* () {
          yield* insertActivityLog(ENTRY, [], T0)
          throw new Error('the step failed')
        }).catch(() => {})
        await runOpOnPostgres(tx, insertActivityLog(ENTRY, ['a'], T0))
        await runOpOnPostgres(tx, insertActivityLog(ENTRY, ['b'], T0))
        expect(await held()).toBe(0)
        const proposed = (await clientOf(tx).unsafe("SELECT created_at::float8 AS at, chain_position FROM activity_logs WHERE environment_id = 1 AND action = 'createNote' ORDER BY id")) as { at: number; chain_position: null }[]
        expect(proposed).toEqual([{ at: T0 * 1000, chain_position: null }, { at: T0 * 1000 + 1, chain_position: null }])
      })
      expect(await pg.awaitListed('activity_logs')).toBe(true)
      const rows = (await pg.sql`SELECT created_at::float8 AS at, chain_position::float8 AS position FROM activity_logs WHERE environment_id = 1 AND action = 'createNote' ORDER BY id`) as { at: number; position: number }[]
      expect(rows).toEqual([{ at: T0 * 1000, position: 1 }, { at: T0 * 1000 + 1, position: 2 }])
    })
  }, 60_000)
})

/**
 * PostgreSQL twins of workflows' and webhook triggers' storage (src/db/workflows.ts, webhooks.ts): the same ops on
 * SQLite and PostgreSQL answer alike and leave the same rows — renderings made once, places and lists in the same
 * order (names byte-wise), trigger targets, version numbering. On PostgreSQL alone: publishers racing for the same new
 * workflow all succeed, one workflow and consecutive versions (a unique violation reruns the loser's transaction),
 * and a webhook change through one instance is seen by another's next lookup (no cache).
 */
import { describe, expect, test } from 'bun:test'
import { writeNow } from '../src/db/write.ts'
import type { Op } from '../src/db/op.ts'
import { read } from '../src/db/read.ts'
import { findWebhookTrigger, insertWebhookTrigger, updateWebhookTrigger } from '../src/db/webhooks.ts'
import {
  ensureRendering,
  findTriggerTarget,
  findWorkflowIdByNames,
  findWorkflowIdsNamed,
  findWorkflowInRendering,
  findWorkflowVersion,
  insertWorkflow,
  latestWorkflowVersion,
  listProjectWorkflowPlaces,
  listRenderingWorkflows,
  publishWorkflowVersion,
} from '../src/db/workflows.ts'
import { bothStores, postgresOrSkip } from './support/both-stores.ts'
import { freshDatabase, openProductPostgres } from './support/postgres-cluster.ts'
import { SEEDED_AT, seedOrganization } from './support/seed-both.ts'

const T = SEEDED_AT

function* each<T>(ops: Op<T>[]): Op<T[]> {
  const answers: T[] = []
  for (const work of ops) answers.push(yield* work)
  return answers
}

/** A new workflow with its webhook trigger, as publishing makes it. */
function* createWorkflow(renderingId: number, name: string, collectionId: number, now: number) {
  const workflow = yield* insertWorkflow({ renderingId, name, collectionId, now })
  yield* insertWebhookTrigger(workflow.id, now)
  return workflow
}

/** Publishing's storage steps (src/modules/workflows/service.ts without its admin log entry): the next version, made active. */
function* publishNext(workflowId: number, definition: string, collectionId: number, now: number) {
  const version = (yield* latestWorkflowVersion(workflowId)) + 1
  const id = yield* publishWorkflowVersion({ workflowId, version, definition, definitionHash: `h-${definition}`, publishedBy: 2, collectionId, now })
  return { id, version }
}

describe.skipIf(!postgresOrSkip('workflows twins'))('workflows and webhook triggers twins', () => {
  const stores = bothStores()
  const alike = async <T>(body: () => Op<T>): Promise<T> => {
    const [sqlite, pg] = await stores.both(body)
    expect(pg).toEqual(sqlite)
    return sqlite
  }

  test('renderings are made once; workflows and triggers inserted; places, ids and lists in the same order', async () => {
    await seedOrganization(stores)
    // (environment, team): prod/ops, prod/Sales, prod/dev-team, dev/ops, Stage/Sales, project 2's prod/team, prod/ops again.
    const renderingIds = await alike(() =>
      each([[1, 1], [1, 2], [1, 3], [2, 1], [3, 2], [4, 4], [1, 1], [1, 3]].map(([e, t]) => ensureRendering(e!, t!))),
    )
    expect(renderingIds).toEqual([1, 2, 3, 4, 5, 6, 1, 3])

    const created = await alike(() =>
      each(
        (
          [
            [1, 'b', 1], [1, 'B', 2], [1, 'a_x', 1], [1, 'a-x', 1], [2, 'b', 1], [3, 'b', 2], [4, 'deploy', 1], [5, 'z', 1], [6, 'w', 3],
          ] as const
        ).map(([r, name, c], i) => createWorkflow(r, name, c, T + i)),
      ),
    )
    expect(created.map((w) => w.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9])
    expect(created[0]).toMatchObject({ renderingId: 1, name: 'b', activeVersionId: null, createdAt: T, updatedAt: T })

    const places = await alike(() => each([listProjectWorkflowPlaces(1), listProjectWorkflowPlaces(2), listProjectWorkflowPlaces(3)]))
    expect(places[0]!.map((p) => `${p.environment}/${p.team}/${p.name}`)).toEqual([
      'Stage/Sales/z', 'dev/ops/deploy', 'prod/ops/B', 'prod/ops/a-x', 'prod/ops/a_x', 'prod/ops/b', 'prod/Sales/b', 'prod/dev-team/b',
    ])
    expect(places.slice(1)).toEqual([[{ name: 'w', environment: 'prod', team: 'team', teamId: 4, collection: 'c', published: false }], []])

    const lists = await alike(() => each([listRenderingWorkflows(1, 1), listRenderingWorkflows(1, 2), listRenderingWorkflows(2, 2)]))
    expect(lists[0]!.map((w) => w.name)).toEqual(['B', 'a-x', 'a_x', 'b'])
    expect(lists[0]![0]).toEqual({ id: 2, name: 'B', collectionId: 2, collectionName: 'customers', activeVersionId: null })
    expect(lists[2]).toEqual([])

    const named = await alike(() =>
      each([
        findWorkflowIdsNamed(1, 'b'),
        findWorkflowIdsNamed(1, 'b', 'Sales'),
        findWorkflowIdsNamed(1, 'b', 'sales'),
        findWorkflowIdsNamed(1, 'B'),
        findWorkflowIdsNamed(2, 'b'),
      ]),
    )
    expect(named).toEqual([[1, 5, 6], [5], [], [2], []])

    const byNames = await alike(() =>
      each(
        [
          { projectId: 1, environment: 'prod', team: 'dev-team', workflow: 'b' },
          { projectId: 1, environment: 'Stage', team: 'Sales', workflow: 'z' },
          { projectId: 2, environment: 'prod', team: 'ops', workflow: 'b' },
          { projectId: 1, environment: 'prod', team: 'ops', workflow: 'missing' },
        ].map((names) => findWorkflowIdByNames(names)),
      ),
    )
    expect(byNames).toEqual([6, 8, undefined, undefined])

    const inRendering = await alike(() => each([findWorkflowInRendering(1, 'B'), findWorkflowInRendering(1, 'b'), findWorkflowInRendering(2, 'B')]))
    expect(inRendering.map((w) => w?.id)).toEqual([2, 1, undefined])
  })

  test('trigger targets and webhook triggers: found, changed one field at a time, missing', async () => {
    const target = await alike(() => findTriggerTarget(6))
    expect(target).toEqual({
      workflowId: 6, workflowName: 'b', activeVersionId: null, renderingId: 3, environmentId: 1, teamId: 3, projectId: 1, collectionId: 2,
      webhookEnabled: false, webhookGeneration: 1, webhookRatePerMinute: null,
    })
    // A workflow without its trigger row is no trigger target.
    const bare = await alike(() => insertWorkflow({ renderingId: 4, name: 'bare', collectionId: 1, now: T }))
    expect(await alike(() => each<unknown>([findTriggerTarget(bare.id), findTriggerTarget(999), findWebhookTrigger(bare.id)]))).toEqual([
      undefined, undefined, undefined,
    ])

    const changes = await alike(() =>
      each([
        findWebhookTrigger(6),
        updateWebhookTrigger(6, { enabled: true }, T + 10),
        updateWebhookTrigger(6, { ratePerMinute: 30 }, T + 11),
        updateWebhookTrigger(6, { generation: 2, enabled: false }, T + 12),
        updateWebhookTrigger(6, { ratePerMinute: null, enabled: undefined }, T + 13),
        updateWebhookTrigger(6, {}, T + 14),
        findWebhookTrigger(6),
        findWebhookTrigger(7),
      ]),
    )
    expect(changes.map((t) => t && [t.enabled, t.generation, t.ratePerMinute, t.updatedAt])).toEqual([
      [false, 1, null, T + 5],
      [true, 1, null, T + 10],
      [true, 1, 30, T + 11],
      [false, 2, 30, T + 12],
      [false, 2, null, T + 13],
      [false, 2, null, T + 14],
      [false, 2, null, T + 14],
      [false, 1, null, T + 6],
    ])
    await alike(() => updateWebhookTrigger(6, { enabled: true, ratePerMinute: 12 }, T + 15))
    expect(await alike(() => findTriggerTarget(6))).toMatchObject({ webhookEnabled: true, webhookGeneration: 2, webhookRatePerMinute: 12 })
  })

  test('versions: numbered from 1 per workflow, the newest made active with its collection', async () => {
    expect(await alike(() => each<unknown>([latestWorkflowVersion(1), latestWorkflowVersion(999), findWorkflowVersion(1)]))).toEqual([0, 0, undefined])
    const published = await alike(() =>
      each([publishNext(1, 'one', 1, T + 20), publishNext(1, 'two', 2, T + 21), publishNext(5, 'other', 1, T + 22), publishNext(1, 'three', 2, T + 23)]),
    )
    expect(published).toEqual([{ id: 1, version: 1 }, { id: 2, version: 2 }, { id: 3, version: 1 }, { id: 4, version: 3 }])
    const rows = await alike(() =>
      each<unknown>([
        latestWorkflowVersion(1),
        latestWorkflowVersion(5),
        findWorkflowVersion(2),
        findWorkflowVersion(5),
        findWorkflowInRendering(1, 'b'),
        findWorkflowInRendering(2, 'b'),
        findTriggerTarget(1),
      ]),
    )
    expect(rows.slice(0, 2)).toEqual([3, 1])
    expect(rows[2]).toEqual({ id: 2, workflowId: 1, version: 2, definition: 'two', definitionHash: 'h-two', publishedBy: 2, createdAt: T + 21 })
    expect(rows[3]).toBeUndefined()
    expect(rows[4]).toMatchObject({ id: 1, activeVersionId: 4, collectionId: 2, updatedAt: T + 23, createdAt: T })
    expect(rows[5]).toMatchObject({ id: 5, activeVersionId: 3, collectionId: 1, updatedAt: T + 22 })
    expect(rows[6]).toMatchObject({ activeVersionId: 4, collectionId: 2 })
    // A version with no publisher (the CLI).
    const cli = await alike(() => publishWorkflowVersion({ workflowId: 7, version: 1, definition: 'd', definitionHash: 'h', publishedBy: null, collectionId: 1, now: T }))
    expect(await alike(() => findWorkflowVersion(cli))).toMatchObject({ publishedBy: null, version: 1 })
  })
})

describe.skipIf(!postgresOrSkip('workflow publication races'))('publishing on several instances at once (PostgreSQL)', () => {
  test('publishers racing for one new workflow all succeed: one rendering, one workflow, one trigger, versions 1…n', async () => {
    const url = await freshDatabase()
    const instances = [openProductPostgres(url), openProductPostgres(url), openProductPostgres(url)]
    try {
      const [first] = instances
      const t = T
      await first!.sql.unsafe(`INSERT INTO projects (name, created_at) VALUES ('p', ${t})`)
      await first!.sql.unsafe(`INSERT INTO users (email, username, created_at, updated_at) VALUES ('u@example.com', 'u', ${t}, ${t}), ('v@example.com', 'v', ${t}, ${t})`)
      await first!.sql.unsafe(`INSERT INTO environments (project_id, name, created_at) VALUES (1, 'prod', ${t})`)
      await first!.sql.unsafe(`INSERT INTO teams (project_id, name, created_at) VALUES (1, 'ops', ${t}), (1, 'sales', ${t})`)
      await first!.sql.unsafe(`INSERT INTO collections (project_id, name, created_at) VALUES (1, 'orders', ${t})`)
      // Publishing's storage steps, as src/modules/workflows/service.ts takes them: find or create, then the next version.
      function* publish(teamId: number, definition: string) {
        const renderingId = yield* ensureRendering(1, teamId)
        const workflow = (yield* findWorkflowInRendering(renderingId, 'raced')) ?? (yield* createWorkflow(renderingId, 'raced', 1, t))
        return yield* publishNext(workflow.id, definition, 1, t)
      }
      // Rendering (1, 1) exists beforehand (the workflow insert races); (1, 2) does not (the rendering insert races too).
      await writeNow(first!, () => ensureRendering(1, 1))
      for (const teamId of [1, 2]) {
        const publishers = Array.from({ length: 5 }, (_, i) => writeNow(instances[i % instances.length]!, () => publish(teamId, `d${i}`)))
        const versions = (await Promise.all(publishers)).map((p) => p.version)
        expect(versions.toSorted()).toEqual([1, 2, 3, 4, 5])
      }
      const counts = await first!.sql.unsafe(`SELECT
          (SELECT count(*)::float8 FROM renderings) AS renderings, (SELECT count(*)::float8 FROM workflows) AS workflows,
          (SELECT count(*)::float8 FROM webhook_triggers) AS triggers, (SELECT count(*)::float8 FROM workflow_versions) AS versions`)
      expect(counts[0]).toEqual({ renderings: 2, workflows: 2, triggers: 2, versions: 10 })
      // By team: the racing inserts of the second rendering took sequence values too, so its id is not known beforehand.
      const renderingIds = ((await first!.sql.unsafe('SELECT id FROM renderings ORDER BY team_id')) as { id: number }[]).map((r) => Number(r.id))
      const active = await read(first!, each(renderingIds.map((id) => findWorkflowInRendering(id, 'raced'))))
      expect(active.every((workflow) => workflow !== undefined && workflow !== null)).toBe(true)
      for (const workflow of active) {
        const version = await read(first!, findWorkflowVersion(workflow!.activeVersionId!))
        expect(version?.version).toBe(5)
      }
    } finally {
      await Promise.all(instances.map((s) => s.close()))
    }
  })

  test("a webhook change through one instance is the other instance's next trigger target", async () => {
    const url = await freshDatabase()
    const [one, two] = [openProductPostgres(url), openProductPostgres(url)]
    try {
      await one.sql.unsafe(`INSERT INTO projects (name, created_at) VALUES ('p', ${T})`)
      await one.sql.unsafe(`INSERT INTO environments (project_id, name, created_at) VALUES (1, 'prod', ${T})`)
      await one.sql.unsafe(`INSERT INTO teams (project_id, name, created_at) VALUES (1, 'ops', ${T})`)
      await one.sql.unsafe(`INSERT INTO collections (project_id, name, created_at) VALUES (1, 'orders', ${T})`)
      const workflow = await writeNow(one, function* () {
        return yield* createWorkflow(yield* ensureRendering(1, 1), 'w', 1, T)
      })
      for (let i = 0; i < 3; i++) expect((await read(two, findTriggerTarget(workflow.id)))?.webhookEnabled).toBe(false)
      await writeNow(one, () => updateWebhookTrigger(workflow.id, { enabled: true, generation: 2 }, T + 1))
      expect(await read(two, findTriggerTarget(workflow.id))).toMatchObject({ webhookEnabled: true, webhookGeneration: 2 })
      await one.sql.unsafe(`UPDATE workflows SET active_version_id = NULL, name = 'renamed'`)
      expect(await read(two, findTriggerTarget(workflow.id))).toMatchObject({ workflowName: 'renamed', activeVersionId: null })
      await one.sql.unsafe(`DELETE FROM workflows`)
      expect(await read(two, findTriggerTarget(workflow.id))).toBeUndefined()
    } finally {
      await Promise.all([one.close(), two.close()])
    }
  })
})

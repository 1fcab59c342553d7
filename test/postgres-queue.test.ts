/**
 * The queue's transitions — the very ops the executor yields (`claimRuns(…)`, `advanceRun(…)`…) —
 * run on PostgreSQL (src/db/queue.ts: queries written once, and the claim's plans), on the product's PostgreSQL schema migrated for
 * real in a throw-away cluster: batched claims that concurrent claimers split, lease guards that roll the op back,
 * park and wake, finish, lease renewal, recovery of expired leases and give-back; a workflow's concurrency limit that
 * eight concurrent claimers never overstep; a run's queueing, its dating by the lists' pass, its record's read by key
 * a notes page's render and a member's inbox reading by index even under a plan made while the table was tiny or empty.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUIDv7, SQL } from 'bun'
import { writeNow } from '../src/db/write.ts'
import type { Op } from '../src/db/op.ts'
import { migratePostgres } from '../src/db/postgres/migrate.ts'
import { openPostgres, type PgStore } from '../src/db/postgres/store.ts'
import { findNotesForRender } from '../src/db/notes.ts'
import { pageTaskIds } from '../src/db/tasks.ts'
import { findRecordByKey, findRecordByKeyToChange } from '../src/db/records.ts'
import { advanceRun, claimRuns, finishRun, LeaseLostError, parkRun, recoverExpiredRuns, releaseOwnedRuns, renewLease, type RunRow } from '../src/db/queue.ts'
import { type Cluster, postgresInstalled, psql, startCluster } from './support/postgres-cluster.ts'

if (!postgresInstalled) {
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') throw new Error('initdb/pg_ctl not found (apt-get install postgresql)')
  console.warn('postgres-queue: SKIPPED, PostgreSQL is not installed (apt-get install postgresql)')
}

/** The rows a run refers to: one user, project, environment, team, collection and workflow, each id 1. */
const SEED = [
  "INSERT INTO users (id, email, username, created_at, updated_at) VALUES (1, 'a@example.com', 'a', 1, 1)",
  "INSERT INTO projects (id, name, created_at) VALUES (1, 'Acme', 1)",
  "INSERT INTO environments (id, project_id, name, created_at) VALUES (1, 1, 'production', 1)",
  "INSERT INTO teams (id, project_id, name, created_at) VALUES (1, 1, 'Support', 1)",
  'INSERT INTO renderings (id, environment_id, team_id) VALUES (1, 1, 1)',
  "INSERT INTO collections (id, project_id, name, created_at) VALUES (1, 1, 'orders', 1)",
  "INSERT INTO workflows (id, rendering_id, name, collection_id, created_at, updated_at) VALUES (1, 1, 'wf', 1, 1, 1)",
  "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, created_at) VALUES (1, 1, 1, '{}', 'h', 1)",
]

const LEASE = 30_000
const now = Date.UTC(2026, 10, 23, 12, 0, 0)

describe.skipIf(!postgresInstalled)('the queue on PostgreSQL: the executor\'s own ops through their twins', () => {
  let cluster: Cluster
  let store: PgStore
  const run = <T>(body: () => Op<T>) => writeNow(store, body)
  const statusOf = async (id: string) =>
    ((await store.sql`SELECT status, lease_owner, next_step::float8 AS next_step, available_at::float8 AS available_at FROM runs WHERE id = ${id}`) as Record<string, unknown>[])[0]

  /** Queued runs on distinct records, due at `at`. */
  async function queue(count: number, at = now): Promise<string[]> {
    const ids = Array.from({ length: count }, () => randomUUIDv7())
    for (const [i, id] of ids.entries()) {
      await store.sql`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, "trigger", status, next_step, available_at, attempts, created_at)
        VALUES (${id}, 1, 1, 1, ${`rec-${id}-${i}`}, 1, 'webhook', 'queued', 0, ${at}, 0, ${at * 1000 + i})`
    }
    return ids
  }

  /** `count` finished runs, then the table analyzed: statistics taken while no run is due. */
  async function finishedRunsAnalyzed(count: number): Promise<void> {
    await store.sql.unsafe(`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, "trigger", status, next_step, available_at, attempts, created_at, finished_at)
      SELECT gen_random_uuid()::text, 1, 1, 1, 'done-' || i, 1, 'webhook', 'succeeded', 3, ${now - 60_000}, 1, i, ${now - 1_000} FROM generate_series(1, ${count}) i`)
    await store.sql.unsafe('ANALYZE runs')
  }

  /** The runs table emptied and analyzed again, for the tests after. */
  async function noRunsAnalyzed(): Promise<void> {
    await store.sql`DELETE FROM runs`
    await store.sql.unsafe('ANALYZE runs')
  }

  /**
   * `work` in one write on a connection of its own with auto_explain (`settings`: more of them), and the plans its
   * statements were run with, as the server logged them.
   */
  async function explained<T>(work: () => Op<T>, settings = ''): Promise<{ answer: T; plans: string }> {
    const log = join(cluster.local!.dataDir, '..', 'log')
    const logged = statSync(log).size
    const one = openPostgres(cluster.url, { max: 1 })
    let answer: T
    try {
      await one.sql.unsafe("LOAD 'auto_explain'")
      await one.sql.unsafe(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_timing = off; ${settings}`)
      answer = await writeNow(one, work)
    } finally {
      await one.sql.close()
    }
    const plans = readFileSync(log, 'utf8').slice(logged)
    if (process.env.SHOW_PLANS) console.log(plans)
    return { answer, plans }
  }

  beforeAll(async () => {
    cluster = startCluster()
    store = openPostgres(cluster.url, { max: 10 })
    await migratePostgres(store.sql)
    for (const statement of SEED) await store.sql.unsafe(statement)
  }, 60_000)

  afterAll(async () => {
    await store?.sql.close()
    cluster?.stop()
  })

  test('a claim takes at most its limit even when the statistics were taken while no run was due (the plan that claimed every due run)', async () => {
    // The bench's burst: a table of finished runs, analyzed while none is due, then a burst queued. With those
    // statistics the planner runs a `WHERE id IN (SELECT … LIMIT … FOR UPDATE SKIP LOCKED)` claim as a nested loop
    // that rescans the sub-select once per due run, and the claim took all 200 (src/db/postgres/queue.ts).
    await finishedRunsAnalyzed(5000)
    const burst = await queue(200)
    const batch = await run(() => claimRuns('A', now, LEASE, 4))
    expect(batch.map((r) => r.id)).toEqual(burst.slice(0, 4))
    const [counts] = (await store.sql`SELECT count(*) FILTER (WHERE status = 'running')::int AS running,
      count(*) FILTER (WHERE status = 'queued')::int AS queued FROM runs`) as { running: number; queued: number }[]
    expect(counts).toEqual({ running: 4, queued: 196 })
    await noRunsAnalyzed()
  })

  test("a claim reads the due runs it may start and no more, whatever the statistics: by the claim's index in its order, the pick by primary key", async () => {
    // Statistics taken while no run was due, then a burst of 300. A plan that trusted them would sort every due run
    // of the environment at each claim, or walk them all through the claim's partial index to pick four. One
    // connection with auto_explain: the plans of its claim go to the server's log.
    await finishedRunsAnalyzed(2000)
    const burst = await queue(300)
    const { answer: batch, plans } = await explained(() => claimRuns('A', now, LEASE, 4))
    expect(batch.map((r) => r.id)).toEqual(burst.slice(0, 4))
    const dueRead = /Index Scan using runs_claim_(?:env_)?idx on runs[^\n]*actual rows=(\d+)/.exec(plans)
    expect(Number(dueRead?.[1])).toBeLessThanOrEqual(16) // 4 candidates a free worker
    expect(plans).not.toMatch(/Sort Key: runs\.available_at/)
    expect(plans).toMatch(/Index Scan (using|on) runs_pkey/)
    // Past the read of the due runs, no walk of them: the pick and the start by primary key.
    expect([...plans.matchAll(/runs_claim_(?:env_)?idx on runs[^\n]*actual rows=(\d+)/g)].map((m) => Number(m[1])).filter((rows) => rows > 16)).toEqual([])
    await noRunsAnalyzed()
  })

  test("a run's record, read by its key, is one seek on the key's index whatever the statistics: never the walk of a collection's live records", async () => {
    // Statistics taken while the table was empty (a new deployment), then 3,000 records (an import, an apply): the plan
    // made on those statistics answered from the live-records index and filtered the key, reading every live record of
    // the collection at every step.
    await store.sql.unsafe('ANALYZE records')
    await store.sql.unsafe(`INSERT INTO records (environment_id, collection_id, record_key, data, created_at, updated_at)
      SELECT 1, 1, 'many-' || i, '{}', 100 + i, 100 + i FROM generate_series(1, 3000) i`)
    await store.sql`UPDATE records SET deleted_at = 1 WHERE record_key = 'many-7'`
    const scope = { environmentId: 1, collectionId: 1 }
    const { answer: found, plans } = await explained(function* () {
      return [yield* findRecordByKeyToChange(scope, 'many-2999'), yield* findRecordByKey(scope, 'many-5'), yield* findRecordByKeyToChange(scope, 'many-7'), yield* findRecordByKey(scope, 'many-7')]
    }, 'SET plan_cache_mode = force_generic_plan')
    expect(found.map((row) => row?.recordKey ?? null)).toEqual(['many-2999', 'many-5', null, null])
    expect([...plans.matchAll(/Index Scan using records_env_collection_key_unique on records/g)]).toHaveLength(4)
    expect(plans).not.toMatch(/records_env_collection_created_idx|Seq Scan on records/)
    await store.sql`DELETE FROM records`
  })

  test("a notes page's render seeks its notes by id whatever the statistics: never the walk of an environment's notes", async () => {
    // Statistics taken while the table was empty, then 3,000 notes: planned as one join, the render started from the
    // environment, its teams and users (each looking like one row) and read every note of the environment through
    // another of its indexes (by team, by author).
    await store.sql.unsafe('ANALYZE users, environments, teams, collections, notes')
    await store.sql.unsafe(`INSERT INTO notes (environment_id, team_id, collection_id, record_id, title, user_id, created_at, updated_at)
      SELECT 1, 1, 1, 'rec-' || i, 'note ' || i, 1, i, i FROM generate_series(1, 3000) i`)
    const { first } = ((await store.sql`SELECT min(id)::float8 AS first FROM notes`) as { first: number }[])[0]!
    const ids = Array.from({ length: 10 }, (_, i) => first + 2990 - i * 7)
    const { answer: rendered, plans } = await explained(() => findNotesForRender(ids), 'SET plan_cache_mode = force_generic_plan')
    expect(rendered.map((row) => row.note.id)).toEqual([...ids].sort((a, b) => a - b))
    expect(plans).toMatch(/Index Scan (using|on) notes_pkey/)
    expect(plans).not.toMatch(/notes_env_\w+|Seq Scan on notes/)
    await store.sql`DELETE FROM notes`
  })

  test("a member's inbox walks their own assignments whatever the statistics: never every open task of the environment", async () => {
    // Statistics taken while the tables were empty, then 3,000 open tasks, ten of them assigned to one member: as an
    // EXISTS, the page's test of each assignment became a join that read every open task of the environment first.
    await store.sql.unsafe(`INSERT INTO users (id, email, username, created_at, updated_at) VALUES (2, 'b@example.com', 'b', 1, 1);
      INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, "trigger", status, next_step, available_at, attempts, created_at)
        VALUES ('tasks-run', 1, 1, 1, 'rec-tasks', 1, 'webhook', 'waiting', 0, ${now}, 0, ${now * 1000})`)
    await store.sql.unsafe('ANALYZE tasks, task_assignees, task_decisions, tasks_unlisted')
    await store.sql.unsafe(`INSERT INTO tasks (id, run_id, step_index, step_name, environment_id, workflow_id, team_id, record_id, requester_id, title, approvals_required, status, created_at)
        SELECT 'task-' || lpad(i::text, 5, '0'), 'tasks-run', i, 'approve', 1, 1, 1, 'rec-tasks', 1, 'Approve', 1, 'open', i FROM generate_series(1, 3000) i;
      INSERT INTO task_assignees (task_id, user_id, task_created_at)
        SELECT 'task-' || lpad(i::text, 5, '0'), CASE WHEN i % 300 = 0 THEN 2 ELSE 1 END, i FROM generate_series(1, 3000) i`)
    const { answer: page, plans } = await explained(() => pageTaskIds(1, { status: 'open', decidableBy: { userId: 2, asAdmin: false } }, [], 50), 'SET plan_cache_mode = force_generic_plan')
    expect(page).toEqual(Array.from({ length: 10 }, (_, i) => `task-${String(3000 - i * 300).padStart(5, '0')}`))
    // The member's assignments walked newest first, each task looked up by its id: no step of the page's plan reads
    // more rows than the page holds.
    const pagePlan = plans.split(/\n(?=\S.*LOG:)/).find((entry) => entry.includes('from "task_assignees"'))!
    expect(pagePlan).toMatch(/Scan Backward using task_assignees_user_idx/)
    expect(Math.max(...[...pagePlan.matchAll(/actual rows=(\d+)/g)].map((m) => Number(m[1])))).toBeLessThanOrEqual(51)
    await store.sql.unsafe("DELETE FROM runs WHERE id = 'tasks-run'; DELETE FROM users WHERE id = 2")
  })

  test('concurrent claimers take every due run exactly once between them, in batches, and leave the runs not yet due', async () => {
    const due = await queue(24)
    const later = await queue(3, now + 60_000)
    const claimed = await Promise.all(['A', 'B', 'C', 'D'].map(async (owner) => {
      const mine: RunRow[] = []
      for (;;) {
        const batch = await run(() => claimRuns(owner, now, LEASE, 4))
        if (batch.length === 0) return mine
        mine.push(...batch)
      }
    }))
    const ids = claimed.flat().map((r) => r.id)
    expect(ids.sort()).toEqual([...due].sort())
    for (const [i, owner] of ['A', 'B', 'C', 'D'].entries()) for (const r of claimed[i]!) expect(r).toMatchObject({ status: 'running', lease_owner: owner, attempts: 1 })
    for (const id of later) expect(await statusOf(id)).toMatchObject({ status: 'queued', lease_owner: null })
    await store.sql`UPDATE runs SET status = 'cancelled'`
  })

  test('a workflow limited to two: eight concurrent claimers, round after round, never start a third run; each run ended lets one more start', async () => {
    await store.sql.unsafe(`INSERT INTO workflows (id, rendering_id, name, collection_id, created_at, updated_at, concurrency_limit) VALUES (2, 1, 'limited', 1, 1, 1, 2);
      INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, created_at) VALUES (2, 2, 1, '{}', 'h', 1)`)
    const limited = Array.from({ length: 10 }, () => randomUUIDv7())
    for (const [i, id] of limited.entries()) {
      await store.sql`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, "trigger", status, next_step, available_at, attempts, created_at)
        VALUES (${id}, 2, 2, 1, ${`limited-${i}`}, 1, 'webhook', 'queued', 0, ${now}, 0, ${now * 1000 + i})`
    }
    const owners = ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H']
    const running = async () =>
      (await store.sql`SELECT id, lease_owner FROM runs WHERE workflow_id = 2 AND status = 'running' ORDER BY id`) as { id: string; lease_owner: string }[]
    const round = () => Promise.all(owners.map((owner) => run(() => claimRuns(owner, now, LEASE, 4))))
    for (let finished = 0; finished < limited.length; finished++) {
      const claimed = (await round()).flat()
      const now_ = await running()
      expect(now_).toHaveLength(Math.min(2, limited.length - finished))
      // What this round claimed is what runs now beyond what ran before it: at most the room the limit left.
      expect(claimed.length).toBeLessThanOrEqual(finished === 0 ? 2 : 1)
      const [first] = now_
      await run(() => finishRun(first!.id, first!.lease_owner, now + 1, 1))
    }
    expect(await running()).toEqual([])
    expect(((await store.sql`SELECT count(*)::int AS n FROM runs WHERE workflow_id = 2 AND status = 'succeeded'`) as { n: number }[])[0]!.n).toBe(limited.length)
  })

  test('a lease guard rolls the whole op back: the step recorded before it is undone when another owner holds the run', async () => {
    const [id] = await queue(1)
    const [claimed] = await run(() => claimRuns('A', now, LEASE, 1))
    expect(claimed!.id).toBe(id!)
    // B's op advances someone else's run after a first write of its own: LeaseLostError, and nothing of B stays.
    await expect(
      run(function* () {
        yield* renewLease(id!, 'A', now + 1, LEASE)
        yield* advanceRun(id!, 'B', 2)
      }),
    ).rejects.toBeInstanceOf(LeaseLostError)
    expect(await statusOf(id!)).toMatchObject({ status: 'running', lease_owner: 'A', next_step: 0 })
    // The renewal made inside the failed op was rolled back with it.
    expect(await store.sql`SELECT lease_expires_at::float8 AS until FROM runs WHERE id = ${id!}`).toEqual([{ until: now + LEASE }])
    await run(() => advanceRun(id!, 'A', 2))
    expect(await statusOf(id!)).toMatchObject({ next_step: 2 })
    // Park, wake when due (the claim), finish; a finished run's lease cannot be renewed.
    await run(() => parkRun(id!, 'A', 3, now + 5_000))
    expect(await statusOf(id!)).toMatchObject({ status: 'waiting', lease_owner: null, available_at: now + 5_000 })
    expect(await run(() => claimRuns('B', now + 4_999, LEASE, 5))).toEqual([])
    const [woken] = await run(() => claimRuns('B', now + 5_000, LEASE, 5))
    expect(woken).toMatchObject({ id, status: 'running', lease_owner: 'B', next_step: 3, attempts: 2 })
    await run(() => finishRun(id!, 'B', now + 6_000, 4))
    expect(await statusOf(id!)).toMatchObject({ status: 'succeeded', lease_owner: null, next_step: 4 })
    expect(await run(() => renewLease(id!, 'B', now + 7_000, LEASE))).toBe(false)
  })

  test('recovery requeues runs whose lease expired (their instance died); give-back requeues what an owner holds', async () => {
    const [dead, alive] = await queue(2)
    await store.sql`UPDATE runs SET status = 'running', lease_owner = 'gone', lease_expires_at = ${now - 1} WHERE id = ${dead!}`
    await store.sql`UPDATE runs SET status = 'running', lease_owner = 'live', lease_expires_at = ${now + LEASE} WHERE id = ${alive!}`
    expect(await run(() => recoverExpiredRuns(now))).toBe(1)
    expect(await statusOf(dead!)).toMatchObject({ status: 'queued', lease_owner: null })
    expect(await statusOf(alive!)).toMatchObject({ status: 'running', lease_owner: 'live' })
    expect(await run(() => releaseOwnedRuns('live', now))).toBe(1)
    expect(await statusOf(alive!)).toMatchObject({ status: 'queued', lease_owner: null })
  })

  test("a run's queueing and its dating by the lists' pass read by index under a generic plan made while the table was tiny", async () => {
    // A plan a connection caches is kept until the table's next ANALYZE: one made on a table of a few rows (a seq scan
    // is cheapest there) would read the whole table at every call once it has grown. A database of its own, its runs
    // table two rows when analyzed; auto_explain shows each nested statement's plan to the session (as notices), and
    // plan_cache_mode makes the generic plan at once.
    await store.sql`CREATE DATABASE plans`
    const url = cluster.url.replace(/\/postgres$/, '/plans')
    const plans = new SQL({ url, max: 1 })
    try {
      await migratePostgres(plans)
      for (const statement of SEED) await plans.unsafe(statement)
      const call = (i: number) => `SELECT trellis_queue_run('${randomUUIDv7()}', 1, 1, 1, 'rec-${i}', 1, NULL, 'webhook', ${now}, 0, NULL, NULL, NULL, NULL)`
      await plans.unsafe(`${call(1)}; ${call(2)}; ANALYZE`)
      const statements = [
        "LOAD 'auto_explain'", 'SET auto_explain.log_min_duration = 0', 'SET auto_explain.log_nested_statements = on',
        'SET auto_explain.log_level = notice', 'SET plan_cache_mode = force_generic_plan', call(3), call(4),
        // Twice: a pass lists what the one before it saw drawn.
        'SELECT count(*) FROM trellis_list_pass(1, 16)', 'SELECT count(*) FROM trellis_list_pass(1, 16)',
      ]
      const session = Bun.spawnSync([psql!, '-X', '-v', 'ON_ERROR_STOP=1', url, ...statements.flatMap((s) => ['-c', s])], { stdout: 'pipe', stderr: 'pipe' })
      const notices = session.stderr.toString()
      expect(session.exitCode).toBe(0)
      expect(notices).toMatch(/Index Only Scan Backward using runs_env_created_idx on runs r/)
      expect(notices).toMatch(/trellis_date_runs/)
      expect(notices).not.toMatch(/Seq Scan on runs /)
    } finally {
      await plans.close()
    }
  })
})

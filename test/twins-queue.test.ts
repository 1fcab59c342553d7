/**
 * The queue on PostgreSQL (src/db/queue.ts, maintenance.ts: the ops written once and the queue's plans) answers as on SQLite
 * and leave the same rows — start (and its 409 answer), a retry's start (and its steps carried), cancel, step outcomes, what a run acts on, when the next run
 * is due, log retention's batch — and hold under real concurrency: 30 concurrent starts on one record queue one run
 * and name it to the other 29; 50 concurrent starts on distinct records, their ids committed out of order, keep
 * `createdAt` strictly increasing in id order per environment, so the runs list's `createdAt.lt` paging (DESIGN §3)
 * walks every run exactly once. The claim's choice is the same on both: the fair share between two
 * projects, a workflow's concurrency limit, and the runs behind a held-back backlog.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { writeNow } from '../src/db/write.ts'
import { pageRunIds } from '../src/db/runs.ts'
import { read } from '../src/db/read.ts'
import { insertActivityLog, type NewActivityLogRow } from '../src/db/activity-logs.ts'
import { deleteLogBatch } from '../src/db/maintenance.ts'
import { auditSigningKey } from '../src/lib/audit-key.ts'
import type { Op } from '../src/db/op.ts'
import {
  cancelActiveRun,
  carryRunSteps,
  claimRuns,
  findRetryOf,
  finishRun,
  insertRun,
  type NewRun,
  nextRunAvailableAt,
  parkRun,
  recordStepOutcomes,
  type StepOutcome,
  runWorkflow,
} from '../src/db/queue.ts'
import type { Micros } from '../src/lib/time.ts'
import { type AcmeOnBoth, acmeOnBoth } from './support/acme-on-postgres.ts'
import { acmeProject, acmeWithGlobex, ordersWorkflow, refundRunBase, runBaseOf } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'

/** What retention signs its anchors with: a key of its own, witnessed nowhere. */
const TEST_SIGNING = { key: auditSigningKey(Buffer.from('twins-test-secret-0123456789abcdef')), witnesses: [] }

const now = Date.UTC(2026, 10, 23, 12, 0, 0)
const LEASE = 30_000

describe.skipIf(!postgresOrSkip('twins-queue'))('queue twins: PostgreSQL answers as SQLite', () => {
  let stores: AcmeOnBoth
  let base: Omit<NewRun, 'id' | 'recordId' | 'createdAt'>
  /** Every row of `table` matching `where` on each store, as SQLite's `SELECT *` shapes them (to_jsonb: int8 as numbers). */
  async function rowsOf(table: string, where: string, value: unknown): Promise<[unknown[], unknown[]]> {
    const sqlite = stores.sqlite.store.sqlite.prepare(`SELECT * FROM ${table} WHERE ${where} = ? ORDER BY rowid`).all(value as string)
    const pg = (await stores.pg.sql.unsafe(`SELECT to_jsonb(t) AS row FROM ${table} t WHERE ${where} = $1 ORDER BY ctid`, [value])) as { row: unknown }[]
    return [sqlite, pg.map((r) => r.row)]
  }
  const run = (id: string, recordId: string, at = now): NewRun => ({ ...base, id, recordId, createdAt: at })
  /** `body`'s op answers `answer` on both stores. */
  const bothAnswer = async <T>(body: () => Op<T>, answer: T) => expect(await stores.both(body)).toEqual([answer, answer])

  beforeAll(async () => {
    stores = await acmeOnBoth()
    base = refundRunBase(stores.sqlite.store)
  }, 60_000)
  afterAll(() => stores?.close())

  test('insertRun: the run, then the 409 answer naming it; cancelActiveRun frees the record; rows alike', async () => {
    const first = randomUUIDv7()
    await bothAnswer(() => insertRun(run(first, 'ord_1')), { inserted: true, id: first })
    const [sqliteRows, pgRows] = await rowsOf('runs', 'id', first)
    expect(pgRows).toEqual(sqliteRows)
    expect(pgRows).toHaveLength(1)
    // Another start on the record: nothing stored, the active run named; the same time and id do not matter.
    const second = randomUUIDv7()
    await bothAnswer(() => insertRun(run(second, 'ord_1', now + 5)), { inserted: false, activeRunId: first })
    expect(await rowsOf('runs', 'id', second)).toEqual([[], []])
    // A run of the same id (the primary key) is a conflict too, as SQLite's unique-or-primary-key check has it.
    await bothAnswer(() => insertRun(run(first, 'ord_2')), { inserted: false, activeRunId: null })
    // Cancel: true once, false for a run no longer active and for an unknown one.
    await bothAnswer(() => cancelActiveRun(first, now + 10), true)
    await bothAnswer(() => cancelActiveRun(first, now + 11), false)
    await bothAnswer(() => cancelActiveRun(randomUUIDv7(), now + 11), false)
    const [afterCancel, afterCancelPg] = await rowsOf('runs', 'id', first)
    expect(afterCancelPg).toEqual(afterCancel)
    expect(afterCancelPg).toMatchObject([{ status: 'cancelled', finished_at: now + 10 }])
    // The record is free: a new start queues, its createdAt 1 µs after the environment's newest (same millisecond).
    const third = randomUUIDv7()
    await bothAnswer(() => insertRun(run(third, 'ord_1')), { inserted: true, id: third })
    const [thirdRows, thirdPg] = await rowsOf('runs', 'id', third)
    expect(thirdPg).toEqual(thirdRows)
    expect(thirdPg).toMatchObject([{ created_at: now * 1000 + 1 }])
  })

  test('a retry: queued at the step given, the steps before it carried; a second retry of the run names the first', async () => {
    const old = randomUUIDv7()
    await bothAnswer(() => insertRun(run(old, 'ord_retry')), { inserted: true, id: old })
    for (const index of [0, 1]) {
      await stores.both(() =>
        recordStepOutcomes([{ runId: old, index, name: `step-${index}`, type: 'load', status: index === 0 ? 'succeeded' : 'failed', output: { index }, error: null, startedAt: now, finishedAt: now + 1 }]),
      )
    }
    await bothAnswer(() => cancelActiveRun(old, now + 2), true)
    const retry = randomUUIDv7()
    await bothAnswer(function* () {
      const result = yield* insertRun({ ...run(retry, 'ord_retry', now + 3), nextStep: 1, retryOf: old })
      yield* carryRunSteps(old, retry, 1)
      return result
    }, { inserted: true, id: retry })
    const [rows, rowsPg] = await rowsOf('runs', 'id', retry)
    expect(rowsPg).toEqual(rows)
    expect(rowsPg).toMatchObject([{ status: 'queued', next_step: 1, retry_of: old }])
    const [steps, stepsPg] = await rowsOf('run_steps', 'run_id', retry)
    expect(stepsPg).toEqual(steps)
    expect(stepsPg).toMatchObject([{ run_id: retry, step_index: 0, name: 'step-0', status: 'succeeded', output: '{"index":0}', started_at: now, finished_at: now + 1 }])
    // Once retried, never again (the unique index on retry_of), even on another record: the retry is named.
    await bothAnswer(() => insertRun({ ...run(randomUUIDv7(), 'ord_other', now + 4), retryOf: old }), { inserted: false, activeRunId: null, retriedBy: retry })
    await bothAnswer(() => findRetryOf(old), { id: retry })
    await bothAnswer(() => cancelActiveRun(retry, now + 5), true) // nothing left queued for the claim below
  })

  test('the claim of the runs, their step outcomes, what they act on and when the next is due', async () => {
    await bothAnswer(() => nextRunAvailableAt(), now)
    const [claimed, claimedPg] = await stores.both(() => claimRuns('A', now, LEASE, 10))
    expect(claimedPg).toEqual(claimed)
    expect(claimedPg).toHaveLength(1)
    const runId = claimedPg[0]!.id
    await bothAnswer(() => nextRunAvailableAt(), null)
    const [target, targetPg] = await stores.both(() => runWorkflow(claimedPg[0]!))
    expect(targetPg).toEqual(target)
    expect(targetPg).toMatchObject({ workflowName: 'Refund order', environmentId: base.environmentId })
    expect(JSON.parse(targetPg!.definition)).toHaveProperty('steps')
    // A workflow that is gone: undefined on both.
    await bothAnswer(() => runWorkflow({ workflow_id: 999_999, workflow_version_id: base.workflowVersionId }), undefined)
    // Outcomes with and without output and error, then a park: the rows read back alike.
    const outcomes = [
      { index: 0, name: '1-load', type: 'load', status: 'succeeded' as const, output: { id: 'ord_1' }, error: null },
      { index: 1, name: 'check', type: 'condition', status: 'succeeded' as const, output: undefined, error: null },
      { index: 2, name: 'call', type: 'http', status: 'failed' as const, output: { status: 500 }, error: { code: 'http_failed', message: 'boom' } },
    ]
    type Outcome = Omit<StepOutcome, 'runId' | 'startedAt' | 'finishedAt'>
    const row = (outcome: Outcome): StepOutcome => ({ runId, ...outcome, startedAt: now + outcome.index, finishedAt: now + 10 + outcome.index })
    // One step alone, then a group of two in one statement, then a group longer than one statement takes (8 rows).
    await bothAnswer(() => recordStepOutcomes([row(outcomes[0]!)]), undefined)
    await bothAnswer(() => recordStepOutcomes(outcomes.slice(1).map(row)), undefined)
    const notes = Array.from({ length: 10 }, (_, i): Outcome => ({ index: 3 + i, name: `note-${i}`, type: 'note', status: 'succeeded', output: { noteId: i }, error: null }))
    await bothAnswer(() => recordStepOutcomes(notes.map(row)), undefined)
    const [steps, stepsPg] = await rowsOf('run_steps', 'run_id', runId)
    expect(stepsPg).toEqual(steps)
    expect(stepsPg).toHaveLength(13)
    expect((stepsPg as { step_index: number }[]).map((step) => Number(step.step_index)).sort((a, b) => a - b)).toEqual(Array.from({ length: 13 }, (_, i) => i))
    // The same step twice is the primary key's: both refuse it.
    const again = { runId, ...outcomes[0]!, startedAt: now, finishedAt: now }
    expect(() => stores.sqlite.store.commitNow(() => recordStepOutcomes([again]))).toThrow()
    await expect(writeNow(stores.pg, () => recordStepOutcomes([again]))).rejects.toThrow()
    await stores.both(() => parkRun(runId, 'A', 3, now + 60_000))
    await bothAnswer(() => nextRunAvailableAt(), now + 60_000)
  })

  test('deleteLogBatch: the oldest entries before the cutoff, in batches, record rows with them; the count answered', async () => {
    const { sqlite } = stores.sqlite.store
    const environmentId = base.environmentId
    // Activity entries at times 1..7 ms (µs values), each with a record row; the apply's admin entries stay.
    for (let i = 1; i <= 7; i++) {
      const at = i * 1000
      const values = [environmentId, 'read', 'read', 'seen', base.userId, at]
      sqlite.prepare("INSERT INTO activity_logs (environment_id, type, action, label, user_id, extension, created_at) VALUES (?, ?, ?, ?, ?, 0, ?)").run(...values)
      const { id } = sqlite.prepare('SELECT max(id) AS id FROM activity_logs').get() as { id: number }
      sqlite.prepare('INSERT INTO activity_log_records (log_id, environment_id, record_id) VALUES (?, ?, ?)').run(id, environmentId, `ord_${i}`)
      // Each store's own id (the rows above hold others on each).
      const [row] = (await stores.pg.sql.unsafe(
        'INSERT INTO activity_logs (environment_id, type, action, label, user_id, extension, created_at) VALUES ($1, $2, $3, $4, $5, false, $6) RETURNING id::float8 AS id',
        values,
      )) as { id: number }[]
      await stores.pg.sql.unsafe('INSERT INTO activity_log_records (log_id, environment_id, record_id) VALUES ($1, $2, $3)', [row!.id, environmentId, `ord_${i}`])
    }
    const cutoff = 6000 as Micros // entries 1..5 are older
    expect(await stores.pg.awaitListed('activity_logs')).toBe(true) // PostgreSQL's retention cuts listed entries only
    await bothAnswer(() => deleteLogBatch('activity_logs', cutoff, 3, TEST_SIGNING, 0), 3)
    await bothAnswer(() => deleteLogBatch('activity_logs', cutoff, 3, TEST_SIGNING, 0), 2)
    await bothAnswer(() => deleteLogBatch('activity_logs', cutoff, 3, TEST_SIGNING, 0), 0)
    // The apply's own entries (its record imports) are far newer than the cutoff and stay, on both.
    const left = [
      sqlite.prepare("SELECT l.created_at, r.record_id FROM activity_logs l JOIN activity_log_records r ON r.log_id = l.id WHERE l.label = 'seen' ORDER BY l.id").all(),
      [...(await stores.pg.sql`SELECT l.created_at::float8 AS created_at, r.record_id FROM activity_logs l JOIN activity_log_records r ON r.log_id = l.id WHERE l.label = 'seen' ORDER BY l.id`)],
    ]
    expect(left[1]).toEqual(left[0]!)
    expect(left[1]).toEqual([
      { created_at: 6000, record_id: 'ord_6' },
      { created_at: 7000, record_id: 'ord_7' },
    ])
    // Admin logs: the apply's entries are far newer than the cutoff (none go); a cutoff past them takes them all.
    const adminCount = (sqlite.prepare('SELECT count(*) AS n FROM admin_logs').get() as { n: number }).n
    expect(adminCount).toBeGreaterThan(0)
    await bothAnswer(() => deleteLogBatch('admin_logs', cutoff, 100, TEST_SIGNING, 0), 0)
    // Past every row: the fixed `now`'s and the apply's, written at the real time (whatever today's date is).
    const future = ((Math.max(now, Date.now()) + 86_400_000) * 1000) as Micros
    await bothAnswer(() => deleteLogBatch('admin_logs', future, 100_000, TEST_SIGNING, 0), adminCount)
    const activityCount = (sqlite.prepare('SELECT count(*) AS n FROM activity_logs').get() as { n: number }).n
    await bothAnswer(() => deleteLogBatch('activity_logs', future, 100_000, TEST_SIGNING, 0), activityCount)
    expect([...(await stores.pg.sql`SELECT count(*)::float8 AS n FROM activity_log_records`)]).toEqual([{ n: 0 }])
  })

  test('30 concurrent starts on one record (a pool of 10): exactly one run queued, the other 29 name it', async () => {
    const ids = Array.from({ length: 30 }, () => randomUUIDv7())
    const answers = await Promise.all(ids.map((id) => writeNow(stores.pg, () => insertRun(run(id, 'contested')))))
    const inserted = answers.filter((a) => a.inserted)
    expect(inserted).toHaveLength(1)
    const winner = (inserted[0] as { id: string }).id
    expect(answers.filter((a) => !a.inserted)).toEqual(Array.from({ length: 29 }, () => ({ inserted: false, activeRunId: winner })))
    expect([...(await stores.pg.sql`SELECT id FROM runs WHERE record_id = 'contested'`)]).toEqual([{ id: winner }])
  })

  test('50 concurrent starts on distinct records over two environments, ids committed out of order: each under its own id, once listed createdAt strictly increasing in the list\'s order, paging exact', async () => {
    const staging = stores.sqlite.store.sqlite
      .prepare("SELECT w.id, w.active_version_id AS v, r.environment_id AS e FROM workflows w JOIN renderings r ON r.id = w.rendering_id WHERE w.name = 'Start dunning'")
      .get() as { id: number; v: number; e: number }
    const stagingBase = { ...base, workflowId: staging.id, workflowVersionId: staging.v, environmentId: staging.e }
    // Ids made first, in order, then started in reverse: as instances whose ids were made before each other's commits.
    const ids = Array.from({ length: 50 }, () => randomUUIDv7())
    const starts = ids.map((id, i) => ({ ...(i % 2 === 0 ? base : stagingBase), id, recordId: `burst_${i}`, createdAt: now + 1 }))
    const clockBefore = Date.now()
    const answers = await Promise.all(starts.reverse().map((start) => writeNow(stores.pg, () => insertRun(start))))
    expect(answers.map((a) => (a.inserted ? a.id : null))).toEqual(starts.map((start) => start.id))
    expect(await stores.pg.awaitListed('runs')).toBe(true) // dated by the lists' pass
    for (const environmentId of [base.environmentId, stagingBase.environmentId]) {
      const listed = (await stores.pg.sql`SELECT id, created_at::float8 AS created_at FROM runs WHERE environment_id = ${environmentId} ORDER BY created_at, id`) as {
        id: string
        created_at: number
      }[]
      for (let i = 1; i < listed.length; i++) expect(listed[i]!.created_at).toBeGreaterThan(listed[i - 1]!.created_at)
      // Never ahead of the clock by more than a microsecond per run of the burst.
      expect(listed.at(-1)!.created_at).toBeLessThanOrEqual(Math.max(now + 1, clockBefore) * 1000 + 50)
      // The runs list's own walk (src/db/runs.ts: newest first, the next page below the last createdAt), pages of 7.
      const walked: string[] = []
      let before: number | undefined
      for (;;) {
        const dates = before === undefined ? [] : [{ field: 'createdAt', op: 'lt' as const, at: before as Micros }]
        const page = (await read(stores.pg, pageRunIds(environmentId, {}, dates, 7))).slice(0, 7)
        if (page.length === 0) break
        walked.push(...page)
        before = listed.find((r) => r.id === page.at(-1))!.created_at
      }
      expect(walked).toEqual(listed.map((r) => r.id).reverse())
    }
  })

  test("30 triggers and 30 other entries of one environment at once: once listed, every entry's createdAt strictly increasing in id order, after the newest before them", async () => {
    const entry = (label: string, runId: string | null): NewActivityLogRow => ({
      environmentId: base.environmentId, type: 'write', action: 'update', label, userId: base.userId, teamId: null, collectionId: null,
      tokenId: null, workflowName: null, runId, stepName: null, extension: false,
    })
    const newest = ((await stores.pg.sql`SELECT coalesce(max(created_at), 0)::float8 AS newest FROM activity_logs WHERE environment_id = ${base.environmentId}`) as { newest: number }[])[0]!.newest
    // A trigger's op: the run, then its entry, as src/modules/runs/service.ts queueRun.
    const trigger = (i: number) =>
      writeNow(stores.pg, function* () {
        const result = yield* insertRun(run(randomUUIDv7(), `dated_${i}`))
        if (!result.inserted) throw new Error(`trigger ${i} not queued`)
        return yield* insertActivityLog(entry(`trigger ${i}`, result.id), [`dated_${i}`], now)
      })
    const other = (i: number) => writeNow(stores.pg, () => insertActivityLog(entry(`other ${i}`, null), [], now))
    await Promise.all(Array.from({ length: 30 }, (_, i) => [trigger(i), other(i)]).flat())
    expect(await stores.pg.awaitListed('activity_logs')).toBe(true) // dated by the lists' pass
    const rows = (await stores.pg.sql`SELECT created_at::float8 AS at FROM activity_logs WHERE environment_id = ${base.environmentId} AND created_at > ${newest} ORDER BY id`) as { at: number }[]
    expect(rows).toHaveLength(60)
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.at).toBeGreaterThan(rows[i - 1]!.at)
    // Every entry after the newest before the burst, one microsecond apart (they all share the burst's `now`).
    expect(rows[0]!.at).toBe(Math.max(newest + 1, now * 1000))
    expect(rows.at(-1)!.at).toBe(rows[0]!.at + 59)
  })
})

describe.skipIf(!postgresOrSkip('twins-queue'))('the claim\'s choice: PostgreSQL picks as SQLite', () => {
  let stores: AcmeOnBoth
  const bases: Record<string, Omit<NewRun, 'id' | 'recordId' | 'createdAt'>> = {}

  beforeAll(async () => {
    const document = acmeWithGlobex()
    acmeProject(document).workflows!.push(ordersWorkflow('Serial', [{ type: 'load' }], { concurrency: 1 }))
    const globex = document.projects.find((p) => p.name === 'Globex')!
    globex.collections = [{ name: 'tickets' }]
    globex.workflows = [{ name: 'Globex load', environment: 'production', team: 'Ops', collection: 'tickets', steps: [{ type: 'load' }] }]
    stores = await acmeOnBoth(document)
    for (const name of ['Refund order', 'Serial', 'Globex load']) bases[name] = runBaseOf(stores.sqlite.store, name)
  }, 60_000)
  afterAll(() => stores?.close())

  /** Queues `count` runs of `workflow` on both stores, due a millisecond apart from `at`; their ids in order. */
  async function queueBoth(workflow: string, count: number, at: number): Promise<string[]> {
    const ids: string[] = []
    for (let i = 0; i < count; i++) {
      const id = randomUUIDv7()
      const start = { ...bases[workflow]!, id, recordId: `${workflow}-${at}-${i}`, createdAt: at + i }
      expect(await stores.both(() => insertRun(start))).toEqual([{ inserted: true, id }, { inserted: true, id }])
      ids.push(id)
    }
    return ids
  }
  const claimBoth = async (owner: string, free: number) => {
    const [sqlite, pg] = await stores.both(() => claimRuns(owner, now + 10_000, LEASE, free))
    expect(pg).toEqual(sqlite)
    return sqlite.map((run): string | undefined => run.id)
  }

  test('fair share, a limit, and the runs behind a backlog the limit holds back', async () => {
    // Serial's backlog is the oldest of Acme's production runs; then Refund's, then Globex's, the newest.
    const serial = await queueBoth('Serial', 6, now)
    const refund = await queueBoth('Refund order', 4, now + 100)
    const globex = await queueBoth('Globex load', 3, now + 200)
    // Four workers of instance A: one Serial run (its limit), then turns between Acme and Globex, oldest first in each.
    expect(await claimBoth('A', 4)).toEqual([serial[0], refund[0], globex[0], globex[1]])
    // Instance B's four: Serial is at its limit, so its older runs wait and Refund's behind them start; Acme and Globex
    // hold none of B's workers and take turns again, Globex with its one run left.
    expect(await claimBoth('B', 4)).toEqual([refund[1], refund[2], refund[3], globex[2]])
    // The Serial run ends: the next one may start, and nothing else is due.
    await stores.both(() => finishRun(serial[0]!, 'A', now + 20_000))
    expect(await claimBoth('A', 4)).toEqual([serial[1]])
    expect(await claimBoth('A', 4)).toEqual([])
  })
})

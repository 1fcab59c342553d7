/**
 * The queue's guarded transitions (src/db/queue.ts) on a test env's store, SQLite or PostgreSQL: each one changes a run only from the
 * state it leaves and, after the claim, only for the lease owner; anything else changes nothing and says so
 * (LeaseLostError inside the caller's transaction, which then rolls back whole, or false).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import {
  advanceRun,
  cancelActiveRun,
  failRun,
  finishRun,
  LeaseLostError,
  type NewRun,
  parkRun,
  recordStepOutcomes,
  type RunRow,
  runWorkflow,
} from '../src/db/queue.ts'
import { ACTIVE_RUN_STATUSES, RUN_STATUSES, type RunStatus } from '../src/db/schema.ts'
import { type Op, savepoint } from '../src/db/op.ts'
import { read } from '../src/db/read.ts'
import { write, writeNow } from '../src/db/write.ts'
import { execute, queryAll, queryOne, testEnv, type TestEnv } from './helpers.ts'
import { acmeDocument, applyAcme, refundRunBase } from './support/acme.ts'
import { queueOn } from './support/queue.ts'

const now = Date.UTC(2026, 10, 21, 12, 0, 0)
const LEASE = 30_000

let env: TestEnv
let queue: ReturnType<typeof queueOn>
let base: Omit<NewRun, 'id' | 'recordId' | 'createdAt'>
let counter = 0

beforeAll(async () => {
  env = testEnv()
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
  queue = queueOn(env.store)
  base = refundRunBase(env.store)
})
afterAll(() => env.cleanup())

const row = (id: string) => queryOne<RunRow>(env.store, 'SELECT * FROM runs WHERE id = ?', id)!
const stepsOf = (id: string) => queryAll(env.store, 'SELECT step_index FROM run_steps WHERE run_id = ?', id)
/** Forces a run into a state (lease owner kept) to try a transition from it. */
const force = (id: string, status: RunStatus, owner: string | null = 'A') =>
  execute(env.store, 'UPDATE runs SET status = ?, lease_owner = ? WHERE id = ?', status, owner, id)
/** Leaves nothing claimable, so the next claim takes the run just inserted. */
const drain = () => execute(env.store, "UPDATE runs SET status = 'cancelled', lease_owner = NULL WHERE status <> 'cancelled'")

/** A run claimed by owner A (running, lease until now + LEASE). */
async function held(): Promise<string> {
  drain()
  const id = randomUUIDv7() // time-ordered, as the app's run ids are: PostgreSQL stores a run after its newest by id

  expect(await queue.insert({ ...base, id, recordId: `g-${++counter}`, createdAt: now })).toEqual({ inserted: true, id })
  expect((await queue.claim('A', now, LEASE))!.id).toBe(id)
  return id
}

/** Each lease-guarded transition, as a worker calls it inside its transaction. */
const guardedTransitions: Record<string, (id: string, owner: string) => Op<void>> = {
  advance: (id, owner) => advanceRun(id, owner, 2),
  park: (id, owner) => parkRun(id, owner, 1, now + 60_000),
  finish: (id, owner) => finishRun(id, owner, now + 5, 3),
  fail: (id, owner) => failRun(id, owner, now + 5, { code: 'http_failed', message: 'no', step: 'call' }, 1),
}

/** `op` in one write transaction of the env's store, at once. */
const commit = <T>(op: () => Op<T>) => writeNow(env.store, op)

describe('lease-guarded transitions', () => {
  test('by the owner of a running run: advance, park, finish, fail each change exactly their columns', async () => {
    const advanced = await held()
    await commit(() => advanceRun(advanced, 'A', 2))
    expect(row(advanced)).toMatchObject({ status: 'running', next_step: 2, lease_owner: 'A', lease_expires_at: now + LEASE })

    const parked = await held()
    await commit(() => parkRun(parked, 'A', 1, now + 60_000))
    expect(row(parked)).toMatchObject({ status: 'waiting', next_step: 1, available_at: now + 60_000, lease_owner: null, lease_expires_at: null, finished_at: null })
    // The wake is the claim: nobody takes it before its time, anybody after.
    expect(await queue.claim('B', now + 59_999, LEASE)).toBeNull()
    expect(await queue.claim('B', now + 60_000, LEASE)).toMatchObject({ id: parked, status: 'running', lease_owner: 'B', next_step: 1, attempts: 2 })

    const finished = await held()
    await commit(() => finishRun(finished, 'A', now + 5, 3))
    expect(row(finished)).toMatchObject({ status: 'succeeded', next_step: 3, finished_at: now + 5, error: null, lease_owner: null, lease_expires_at: null })

    const finishedAsIs = await held()
    await commit(() => finishRun(finishedAsIs, 'A', now + 5))
    expect(row(finishedAsIs)).toMatchObject({ status: 'succeeded', next_step: 0 })

    const failed = await held()
    await commit(() => failRun(failed, 'A', now + 5, { code: 'http_failed', message: 'no', step: 'call' }, 1))
    expect(row(failed)).toMatchObject({ status: 'failed', next_step: 1, finished_at: now + 5, lease_owner: null, lease_expires_at: null })
    expect(JSON.parse(row(failed).error!)).toEqual({ code: 'http_failed', message: 'no', step: 'call' })
  })

  for (const [name, transition] of Object.entries(guardedTransitions)) {
    test(`${name}: another owner, or a run not running, changes nothing and throws LeaseLostError`, async () => {
      const id = await held()
      const before = row(id)
      await expect(commit(() => transition(id, 'B'))).rejects.toBeInstanceOf(LeaseLostError)
      expect(row(id)).toEqual(before)
      for (const status of RUN_STATUSES.filter((s) => s !== 'running')) {
        force(id, status) // the owner's name left on the row: only the state guard stands in the way
        const forced = row(id)
        await expect(commit(() => transition(id, 'A'))).rejects.toBeInstanceOf(LeaseLostError)
        expect(row(id)).toEqual(forced)
      }
      await expect(commit(() => transition(crypto.randomUUID(), 'A'))).rejects.toBeInstanceOf(LeaseLostError)
    })
  }

  test('a lost lease rolls back the whole step transaction: the step record and its effects with it', async () => {
    const id = await held()
    force(id, 'running', 'B') // recovered and claimed elsewhere meanwhile
    const before = row(id)
    await expect(
      write(env.store, function* () {
        yield* recordStepOutcomes([{ runId: id, index: 0, name: 'load', type: 'load', status: 'succeeded', output: { loaded: true }, error: null, startedAt: now, finishedAt: now + 1 }])
        yield* advanceRun(id, 'A', 1)
      }),
    ).rejects.toBeInstanceOf(LeaseLostError)
    expect(stepsOf(id)).toEqual([])
    expect(row(id)).toEqual(before)
    // The owner records and advances in one transaction.
    await write(env.store, function* () {
      yield* recordStepOutcomes([{ runId: id, index: 0, name: 'load', type: 'load', status: 'succeeded', output: { loaded: true }, error: null, startedAt: now, finishedAt: now + 1 }])
      yield* advanceRun(id, 'B', 1)
    })
    expect(stepsOf(id)).toEqual([{ step_index: 0 }])
    expect(row(id).next_step).toBe(1)
  })

  test('heartbeat renews only the owner\'s lease on a running run', async () => {
    const id = await held()
    expect(await queue.heartbeat(id, 'B', now + 1_000, LEASE)).toBe(false)
    expect(row(id).lease_expires_at).toBe(now + LEASE)
    expect(await queue.heartbeat(id, 'A', now + 1_000, LEASE)).toBe(true)
    expect(row(id).lease_expires_at).toBe(now + 1_000 + LEASE)
    force(id, 'waiting')
    expect(await queue.heartbeat(id, 'A', now + 2_000, LEASE)).toBe(false)
    expect(row(id).lease_expires_at).toBe(now + 1_000 + LEASE)
  })
})

describe('cancel', () => {
  test('ends a run in any active state, whoever holds it; its worker has lost the lease', async () => {
    for (const status of ACTIVE_RUN_STATUSES) {
      const id = await held()
      force(id, status)
      expect(await commit(() => cancelActiveRun(id, now + 7))).toBe(true)
      expect(row(id)).toMatchObject({ status: 'cancelled', finished_at: now + 7, lease_owner: null, lease_expires_at: null })
      await expect(commit(() => advanceRun(id, 'A', 1))).rejects.toBeInstanceOf(LeaseLostError)
    }
  })

  test('a finished or unknown run is not cancelled: false, nothing changed', async () => {
    for (const status of RUN_STATUSES.filter((s) => !(ACTIVE_RUN_STATUSES as readonly string[]).includes(s))) {
      const id = await held()
      force(id, status, null)
      const before = row(id)
      expect(await commit(() => cancelActiveRun(id, now + 7))).toBe(false)
      expect(row(id)).toEqual(before)
    }
    expect(await commit(() => cancelActiveRun(crypto.randomUUID(), now))).toBe(false)
  })
})

describe('step outcomes and the run workflow', () => {
  test('a step outcome in a savepoint that rolls back leaves nothing; the transaction goes on', async () => {
    const id = await held()
    await commit(function* () {
      let failed: unknown = null
      try {
        yield* savepoint(function* () {
          yield* recordStepOutcomes([{ runId: id, index: 0, name: 'a', type: 'load', status: 'succeeded', output: undefined, error: null, startedAt: now, finishedAt: now }])
          throw new Error('step failed')
        })
      } catch (error) {
        failed = error
      }
      expect(failed).toEqual(new Error('step failed'))
      yield* recordStepOutcomes([{ runId: id, index: 0, name: 'a', type: 'load', status: 'failed', output: undefined, error: { code: 'x', message: 'y' }, startedAt: now, finishedAt: now + 2 }])
      yield* failRun(id, 'A', now + 2, { code: 'x', message: 'y', step: 'a' }, 0)
    })
    expect(queryAll(env.store, 'SELECT status, output, error, finished_at FROM run_steps WHERE run_id = ?', id)).toEqual([
      { status: 'failed', output: null, error: JSON.stringify({ code: 'x', message: 'y' }), finished_at: now + 2 },
    ])
    expect(row(id).status).toBe('failed')
  })

  // On PostgreSQL the step rows are sent without waiting for their answer (src/db/query.ts `send`), and read with the
  // COMMIT's: a failure there must still fail the write with its own error, and leave nothing.
  const foreignKeyFailure = (error: unknown) => {
    const messages: string[] = []
    for (let e = error; e instanceof Error; e = e.cause) messages.push(e.message)
    return /foreign key/i.test(messages.join(' | '))
  }
  const step = (runId: string, index: number) => ({ runId, index, name: `s${index}`, type: 'load' as const, status: 'succeeded' as const, output: undefined, error: null, startedAt: now, finishedAt: now })

  test('a step row that cannot be written fails the whole write with its own error: nothing of it is stored', async () => {
    const id = await held()
    const failed = await commit(function* () {
      yield* recordStepOutcomes([step(id, 0)])
      yield* recordStepOutcomes([step(crypto.randomUUID(), 1)]) // no such run
      yield* advanceRun(id, 'A', 2)
    }).then(() => null, (error: unknown) => error)
    expect(foreignKeyFailure(failed)).toBe(true)
    expect(stepsOf(id)).toEqual([])
    expect(row(id).next_step).toBe(0)
  })

  test('such a failure inside a savepoint fails the savepoint with its own error; the transaction goes on and commits', async () => {
    const id = await held()
    let caught: unknown = null
    await commit(function* () {
      try {
        yield* savepoint(function* () {
          yield* recordStepOutcomes([step(crypto.randomUUID(), 0)]) // no such run
          yield* recordStepOutcomes([step(id, 5)])
        })
      } catch (error) {
        caught = error
      }
      yield* recordStepOutcomes([step(id, 0)])
      yield* advanceRun(id, 'A', 1)
    })
    expect(foreignKeyFailure(caught)).toBe(true)
    expect(stepsOf(id)).toEqual([{ step_index: 0 }])
    expect(row(id).next_step).toBe(1)
  })

  test('runWorkflow: what a claimed run acts on, from its workflow, rendering and version', async () => {
    const id = await held()
    const workflow = (await read(env.store, runWorkflow(row(id))))!
    const expected = queryOne<{ name: string; c: number; t: number; e: number; p: number; d: string }>(
      env.store,
      `SELECT w.name, w.collection_id AS c, r.team_id AS t, r.environment_id AS e, tm.project_id AS p, v.definition AS d
       FROM workflows w JOIN renderings r ON r.id = w.rendering_id JOIN teams tm ON tm.id = r.team_id
       JOIN workflow_versions v ON v.id = w.active_version_id WHERE w.id = ?`,
      base.workflowId,
    )!
    expect(workflow).toEqual({
      workflowName: 'Refund order',
      collectionId: expected.c,
      teamId: expected.t,
      environmentId: expected.e,
      projectId: expected.p,
      definition: expected.d,
    })
    expect(await read(env.store, runWorkflow({ workflow_id: -1, workflow_version_id: base.workflowVersionId }))).toBeUndefined()
  })
})

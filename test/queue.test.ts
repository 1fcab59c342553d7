/**
 * The queue's guarded transitions (src/db/queue.ts) on a real SQLite file: each one changes a run only from the
 * state it leaves and, after the claim, only for the lease owner; anything else changes nothing and says so
 * (LeaseLostError inside the caller's transaction, which then rolls back whole, or false).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  advanceRun,
  cancelActiveRun,
  failRun,
  finishRun,
  LeaseLostError,
  type NewRun,
  parkRun,
  recordStepOutcome,
  type RunRow,
  runWorkflow,
} from '../src/db/queue.ts'
import { ACTIVE_RUN_STATUSES, RUN_STATUSES, type RunStatus } from '../src/db/schema.ts'
import { runOp } from '../src/db/op.ts'
import type { Db } from '../src/db/open.ts'
import { inSavepoint } from '../src/db/savepoint.ts'
import { write, writeTransaction } from '../src/db/write.ts'
import { type SqliteTestEnv, sqliteTestEnv } from './helpers.ts'
import { acmeDocument, applyAcme, refundRunBase } from './support/acme.ts'
import { queueOn } from './support/queue.ts'

const now = Date.UTC(2026, 10, 21, 12, 0, 0)
const LEASE = 30_000

let env: SqliteTestEnv
let queue: ReturnType<typeof queueOn>
let base: Omit<NewRun, 'id' | 'recordId' | 'createdAt'>
let counter = 0

beforeAll(async () => {
  env = sqliteTestEnv()
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
  queue = queueOn(env.store.sqlite)
  base = refundRunBase(env.store)
})
afterAll(() => env.cleanup())

const row = (id: string) => env.store.sqlite.prepare('SELECT * FROM runs WHERE id = ?').get(id) as RunRow
const stepsOf = (id: string) => env.store.sqlite.prepare('SELECT step_index FROM run_steps WHERE run_id = ?').all(id)
/** Forces a run into a state (lease owner kept) to try a transition from it. */
const force = (id: string, status: RunStatus, owner: string | null = 'A') =>
  env.store.sqlite.prepare('UPDATE runs SET status = ?, lease_owner = ? WHERE id = ?').run(status, owner, id)
/** Leaves nothing claimable, so the next claim takes the run just inserted. */
const drain = () => env.store.sqlite.run("UPDATE runs SET status = 'cancelled', lease_owner = NULL WHERE status <> 'cancelled'")

/** A run claimed by owner A (running, lease until now + LEASE). */
function held(): string {
  drain()
  const id = crypto.randomUUID()
  expect(queue.insert({ ...base, id, recordId: `g-${++counter}`, createdAt: now })).toEqual({ inserted: true, id })
  expect(queue.claim('A', now, LEASE)!.id).toBe(id)
  return id
}

/** Each lease-guarded transition, as a worker calls it inside its transaction. */
const guardedTransitions: Record<string, (tx: Db, id: string, owner: string) => void> = {
  advance: (tx, id, owner) => runOp(tx, advanceRun(id, owner, 2)),
  park: (tx, id, owner) => runOp(tx, parkRun(id, owner, 1, now + 60_000)),
  finish: (tx, id, owner) => runOp(tx, finishRun(id, owner, now + 5, 3)),
  fail: (tx, id, owner) => runOp(tx, failRun(id, owner, now + 5, { code: 'http_failed', message: 'no', step: 'call' }, 1)),
}

describe('lease-guarded transitions', () => {
  test('by the owner of a running run: advance, park, finish, fail each change exactly their columns', () => {
    const advanced = held()
    writeTransaction(env.store, (tx) => runOp(tx, advanceRun(advanced, 'A', 2)))
    expect(row(advanced)).toMatchObject({ status: 'running', next_step: 2, lease_owner: 'A', lease_expires_at: now + LEASE })

    const parked = held()
    writeTransaction(env.store, (tx) => runOp(tx, parkRun(parked, 'A', 1, now + 60_000)))
    expect(row(parked)).toMatchObject({ status: 'waiting', next_step: 1, available_at: now + 60_000, lease_owner: null, lease_expires_at: null, finished_at: null })
    // The wake is the claim: nobody takes it before its time, anybody after.
    expect(queue.claim('B', now + 59_999, LEASE)).toBeNull()
    expect(queue.claim('B', now + 60_000, LEASE)).toMatchObject({ id: parked, status: 'running', lease_owner: 'B', next_step: 1, attempts: 2 })

    const finished = held()
    writeTransaction(env.store, (tx) => runOp(tx, finishRun(finished, 'A', now + 5, 3)))
    expect(row(finished)).toMatchObject({ status: 'succeeded', next_step: 3, finished_at: now + 5, error: null, lease_owner: null, lease_expires_at: null })

    const finishedAsIs = held()
    writeTransaction(env.store, (tx) => runOp(tx, finishRun(finishedAsIs, 'A', now + 5)))
    expect(row(finishedAsIs)).toMatchObject({ status: 'succeeded', next_step: 0 })

    const failed = held()
    writeTransaction(env.store, (tx) => runOp(tx, failRun(failed, 'A', now + 5, { code: 'http_failed', message: 'no', step: 'call' }, 1)))
    expect(row(failed)).toMatchObject({ status: 'failed', next_step: 1, finished_at: now + 5, lease_owner: null, lease_expires_at: null })
    expect(JSON.parse(row(failed).error!)).toEqual({ code: 'http_failed', message: 'no', step: 'call' })
  })

  for (const [name, transition] of Object.entries(guardedTransitions)) {
    test(`${name}: another owner, or a run not running, changes nothing and throws LeaseLostError`, () => {
      const id = held()
      const before = row(id)
      expect(() => writeTransaction(env.store, (tx) => transition(tx, id, 'B'))).toThrow(LeaseLostError)
      expect(row(id)).toEqual(before)
      for (const status of RUN_STATUSES.filter((s) => s !== 'running')) {
        force(id, status) // the owner's name left on the row: only the state guard stands in the way
        const forced = row(id)
        expect(() => writeTransaction(env.store, (tx) => transition(tx, id, 'A'))).toThrow(LeaseLostError)
        expect(row(id)).toEqual(forced)
      }
      expect(() => writeTransaction(env.store, (tx) => transition(tx, crypto.randomUUID(), 'A'))).toThrow(LeaseLostError)
    })
  }

  test('a lost lease rolls back the whole step transaction: the step record and its effects with it', async () => {
    const id = held()
    force(id, 'running', 'B') // recovered and claimed elsewhere meanwhile
    const before = row(id)
    await expect(
      write(env.store, function* () {
        yield* recordStepOutcome({ runId: id, index: 0, name: 'load', type: 'load', status: 'succeeded', output: { loaded: true }, error: null, startedAt: now, finishedAt: now + 1 })
        yield* advanceRun(id, 'A', 1)
      }),
    ).rejects.toBeInstanceOf(LeaseLostError)
    expect(stepsOf(id)).toEqual([])
    expect(row(id)).toEqual(before)
    // The owner records and advances in one transaction.
    await write(env.store, function* () {
      yield* recordStepOutcome({ runId: id, index: 0, name: 'load', type: 'load', status: 'succeeded', output: { loaded: true }, error: null, startedAt: now, finishedAt: now + 1 })
      yield* advanceRun(id, 'B', 1)
    })
    expect(stepsOf(id)).toEqual([{ step_index: 0 }])
    expect(row(id).next_step).toBe(1)
  })

  test('heartbeat renews only the owner\'s lease on a running run', () => {
    const id = held()
    expect(queue.heartbeat(id, 'B', now + 1_000, LEASE)).toBe(false)
    expect(row(id).lease_expires_at).toBe(now + LEASE)
    expect(queue.heartbeat(id, 'A', now + 1_000, LEASE)).toBe(true)
    expect(row(id).lease_expires_at).toBe(now + 1_000 + LEASE)
    force(id, 'waiting')
    expect(queue.heartbeat(id, 'A', now + 2_000, LEASE)).toBe(false)
    expect(row(id).lease_expires_at).toBe(now + 1_000 + LEASE)
  })
})

describe('cancel', () => {
  test('ends a run in any active state, whoever holds it; its worker has lost the lease', () => {
    for (const status of ACTIVE_RUN_STATUSES) {
      const id = held()
      force(id, status)
      expect(writeTransaction(env.store, (tx) => runOp(tx, cancelActiveRun(id, now + 7)))).toBe(true)
      expect(row(id)).toMatchObject({ status: 'cancelled', finished_at: now + 7, lease_owner: null, lease_expires_at: null })
      expect(() => writeTransaction(env.store, (tx) => runOp(tx, advanceRun(id, 'A', 1)))).toThrow(LeaseLostError)
    }
  })

  test('a finished or unknown run is not cancelled: false, nothing changed', () => {
    for (const status of RUN_STATUSES.filter((s) => !(ACTIVE_RUN_STATUSES as readonly string[]).includes(s))) {
      const id = held()
      force(id, status, null)
      const before = row(id)
      expect(writeTransaction(env.store, (tx) => runOp(tx, cancelActiveRun(id, now + 7)))).toBe(false)
      expect(row(id)).toEqual(before)
    }
    expect(writeTransaction(env.store, (tx) => runOp(tx, cancelActiveRun(crypto.randomUUID(), now)))).toBe(false)
  })
})

describe('step outcomes and the run workflow', () => {
  test('a step outcome in a savepoint that rolls back leaves nothing; the transaction goes on', () => {
    const id = held()
    writeTransaction(env.store, (tx) => {
      expect(() =>
        inSavepoint(tx, (savepoint) => {
          runOp(savepoint, recordStepOutcome({ runId: id, index: 0, name: 'a', type: 'load', status: 'succeeded', output: undefined, error: null, startedAt: now, finishedAt: now }))
          throw new Error('step failed')
        }),
      ).toThrow('step failed')
      runOp(tx, recordStepOutcome({ runId: id, index: 0, name: 'a', type: 'load', status: 'failed', output: undefined, error: { code: 'x', message: 'y' }, startedAt: now, finishedAt: now + 2 }))
      runOp(tx, failRun(id, 'A', now + 2, { code: 'x', message: 'y', step: 'a' }, 0))
    })
    expect(env.store.sqlite.prepare('SELECT status, output, error, finished_at FROM run_steps WHERE run_id = ?').all(id)).toEqual([
      { status: 'failed', output: null, error: JSON.stringify({ code: 'x', message: 'y' }), finished_at: now + 2 },
    ])
    expect(row(id).status).toBe('failed')
  })

  test('runWorkflow: what a claimed run acts on, from its workflow, rendering and version', () => {
    const id = held()
    const workflow = runOp(env.store.db, runWorkflow(row(id)))!
    const expected = env.store.sqlite
      .prepare(
        `SELECT w.name, w.collection_id AS c, r.team_id AS t, r.environment_id AS e, tm.project_id AS p, v.definition AS d
         FROM workflows w JOIN renderings r ON r.id = w.rendering_id JOIN teams tm ON tm.id = r.team_id
         JOIN workflow_versions v ON v.id = w.active_version_id WHERE w.id = ?`,
      )
      .get(base.workflowId) as { name: string; c: number; t: number; e: number; p: number; d: string }
    expect(workflow).toEqual({
      workflowName: 'Refund order',
      collectionId: expected.c,
      teamId: expected.t,
      environmentId: expected.e,
      projectId: expected.p,
      definition: expected.d,
    })
    expect(runOp(env.store.db, runWorkflow({ workflow_id: -1, workflow_version_id: base.workflowVersionId }))).toBeUndefined()
  })
})

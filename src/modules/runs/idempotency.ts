/**
 * Idempotency keys on run starts (docs/workflows.md "Idempotency keys"), Stripe's behaviour: the first call with a key
 * that creates a run records the key, its body's hash and the run in the transaction that inserts the run; a repeat
 * with the same key and body within the window creates nothing and is answered that run (a replay), whatever the run
 * has become since; the same key with another body is 422. A call answered 4xx records nothing (its transaction
 * rolled back). Keys belong to a workflow and a user.
 */
import { randomUUIDv7 } from 'bun'
import { createHash } from 'node:crypto'
import { deleteExpiredIdempotencyKeys, findLiveIdempotencyKey, type IdempotencyScope, recordIdempotencyKey } from '../../db/idempotency-keys.ts'
import { type Op, savepoint } from '../../db/op.ts'
import type { Store } from '../../db/store.ts'
import { write } from '../../db/write.ts'
import type { Clock } from '../../lib/clock.ts'
import { HttpError, unprocessable } from '../../lib/errors.ts'
import { queueRun, type RunStart } from './service.ts'
import { currentTraceparent } from '../../lib/tracing.ts'

/** A call that carries an `Idempotency-Key`: the key, the SHA-256 of what it asked (`requestHash`), and the window (ms). */
export interface IdempotentCall {
  key: string
  requestHash: string
  windowMs: number
}

/** A run start's answer: the run, and whether an earlier call with the same key created it (a replay). */
export interface RunStarted {
  runId: string
  replayed: boolean
}

/**
 * The call with `key` (null without one): `body` — the webhook's raw text as received, or the manual start's
 * `canonicalStartBody` — as its SHA-256 (hex), and the window in which it is replayed.
 */
export function idempotentCall(key: string | null, body: string, windowMs: number): IdempotentCall | null {
  return key === null ? null : { key, requestHash: createHash('sha256').update(body).digest('hex'), windowMs }
}

/**
 * The manual start's body as it is hashed: its three fields in a fixed order (validation refuses any other field),
 * so the same request hashes alike however its JSON was spaced or ordered.
 */
export function canonicalStartBody(body: { workflowName: string; teamName: string; recordId: string }): string {
  return JSON.stringify([body.workflowName, body.teamName, body.recordId])
}

/** Whose key a start's is: its workflow's and its user's. */
export const idempotencyScope = (input: Pick<RunStart, 'target' | 'userId'>): IdempotencyScope => ({ workflowId: input.target.workflowId, userId: input.userId })

/**
 * The run an earlier call with this key created for the workflow and user (null when the key is new, or older than
 * the window even if not yet pruned); 422 `idempotency_key_reused` when that call sent another body.
 */
export function* replayedRunId(scope: IdempotencyScope, call: IdempotentCall, now: number): Op<string | null> {
  const stored = yield* findLiveIdempotencyKey(scope, call.key, now - call.windowMs)
  if (stored === undefined) return null
  if (stored.requestHash !== call.requestHash) {
    throw unprocessable(
      'idempotency_key_reused',
      `This Idempotency-Key was used with another request body in the last ${call.windowMs / 3_600_000} hours: send a new key for a new request`,
    )
  }
  return stored.runId
}

/** Another call with the key started its run first (the primary key said so): this start's writes roll back. */
class KeyTakenMeanwhile extends Error {}

const isRunInProgress = (error: unknown) => error instanceof HttpError && error.code === 'run_in_progress'

/**
 * Starts a run in one transaction: without a key, `queueRun`; with an idempotency key, `queueRunOnce`, which answers
 * the key's run when it is live, else queues the run and records the key with it.
 */
export function startRunOnce(store: Store, clock: Clock, start: RunStart, call: IdempotentCall | null): Promise<RunStarted> {
  const id = randomUUIDv7()
  // Read here, in the request's turn: the transaction may run in another (SQLite's group commit), outside its span.
  const input: RunStart = { ...start, traceContext: currentTraceparent() }
  return write(store, () => (call === null ? started(queueRun(clock, id, input)) : queueRunOnce(clock, id, input, call)))
}

function* started(run: Op<string>): Op<RunStarted> {
  return { runId: yield* run, replayed: false }
}

/**
 * The replay, or the run queued and the key recorded beside it. Two first calls with one key may both find no key:
 * the later one to write then meets the earlier one's — its run insert meets the earlier run on the record (409), or
 * its key insert meets the earlier key (PostgreSQL waits for the earlier transaction to end) — and in a savepoint
 * rolled back its run and entry go, and it reads the key again and answers the earlier call's run. On PostgreSQL that
 * read is a new statement, so it sees the earlier transaction, committed by then (an insert that meets another's row in
 * a unique index waits for that transaction to end).
 */
export function* queueRunOnce(clock: Clock, id: string, input: RunStart, call: IdempotentCall): Op<RunStarted> {
  const scope = idempotencyScope(input)
  const earlier = yield* replayedRunId(scope, call, clock.now())
  if (earlier !== null) return { runId: earlier, replayed: true }
  try {
    return yield* savepoint(function* () {
      const runId = yield* queueRun(clock, id, input)
      const now = clock.now()
      if (!(yield* recordIdempotencyKey(scope, call.key, { requestHash: call.requestHash, runId }, now, now - call.windowMs))) throw new KeyTakenMeanwhile()
      return { runId, replayed: false }
    })
  } catch (error) {
    if (!(error instanceof KeyTakenMeanwhile || isRunInProgress(error))) throw error
    const winner = yield* replayedRunId(scope, call, clock.now())
    if (winner !== null) return { runId: winner, replayed: true }
    if (error instanceof KeyTakenMeanwhile) throw new Error(`idempotency key of workflow ${scope.workflowId} taken, then not found`)
    throw error
  }
}

/** Keys deleted per transaction when pruning: short write locks. */
const PRUNE_BATCH = 1000

/** Deletes every key older than the window, in batches; how many. `serve` calls it on each pass of ./history.ts. */
export async function pruneIdempotencyKeys(store: Store, clock: Clock, windowMs: number): Promise<number> {
  const cutoff = clock.now() - windowMs
  let pruned = 0
  for (let n = PRUNE_BATCH; n >= PRUNE_BATCH; pruned += n) n = await write(store, () => deleteExpiredIdempotencyKeys(cutoff, PRUNE_BATCH))
  return pruned
}

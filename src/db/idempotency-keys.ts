/**
 * Idempotency keys of run starts (docs/workflows.md "Idempotency keys"): which run a call with `Idempotency-Key`
 * created, per workflow, user and key, with the hash of the call's body. Written once for both stores (./query.ts).
 *
 * A key is live while its `created_at` lies after the cutoff (now − the window): a live key is never replaced, so the
 * primary key decides which of two concurrent first calls keeps its run; an expired one, even before it is pruned, is
 * replaced by the next call that starts a run with it.
 */
import { and, asc, eq, gt, lte, sql } from 'drizzle-orm'
import type { Op } from './op.ts'
import { constantLimit, placeholders, statement } from './query.ts'

/** Whose key it is: keys of two workflows, or of two users, never meet. */
export interface IdempotencyScope {
  workflowId: number
  userId: number
}

/** What a live key holds: the hash of the body it was first sent with, and the run that call created. */
export interface StoredIdempotencyKey {
  requestHash: string
  runId: string
}

const LIVE_KEY = statement('idempotency-keys.live', ({ db, t }) => {
  const k = t.idempotencyKeys
  return db
    .select({ requestHash: k.requestHash, runId: k.runId })
    .from(k)
    .where(and(eq(k.workflowId, sql.placeholder('workflowId')), eq(k.userId, sql.placeholder('userId')), eq(k.key, sql.placeholder('key')), gt(k.createdAt, sql.placeholder('cutoff'))))
})

/** The key's row while it is live (created after `cutoff`, epoch ms), else undefined. */
export function findLiveIdempotencyKey(scope: IdempotencyScope, key: string, cutoff: number): Op<StoredIdempotencyKey | undefined> {
  return LIVE_KEY.row({ ...scope, key, cutoff })
}

// An expired row (at or before the cutoff) is taken over; a live one is left as it is and nothing is returned. On
// PostgreSQL a concurrent insert of the same key makes this one wait for that transaction: once it commits, its live
// row is left alone (and locked), so a read after this statement sees it.
const RECORD_KEY = statement('idempotency-keys.record', ({ db, t }) => {
  const k = t.idempotencyKeys
  return db
    .insert(k)
    .values(placeholders('workflowId', 'userId', 'key', 'requestHash', 'runId', 'createdAt'))
    .onConflictDoUpdate({
      target: [k.workflowId, k.userId, k.key],
      set: { requestHash: sql`excluded.request_hash`, runId: sql`excluded.run_id`, createdAt: sql`excluded.created_at` },
      setWhere: lte(k.createdAt, sql.placeholder('cutoff')),
    })
    .returning({ runId: k.runId })
})

/**
 * Records that the call with `key` created `runId` (in the transaction that inserted the run); false when the key is
 * live already — another call with it created a run first — and nothing was written.
 */
export function* recordIdempotencyKey(scope: IdempotencyScope, key: string, stored: StoredIdempotencyKey, now: number, cutoff: number): Op<boolean> {
  // `.rows()`, not `.row()`: a write's RETURNING read with get() keeps SQLite's statement open (STYLE "Known traps").
  return (yield* RECORD_KEY.rows({ ...scope, key, ...stored, createdAt: now, cutoff })).length === 1
}

// Index range scans on `created_at` on both stores: the batch's last time is read first (SQLite and PostgreSQL both
// run the uncorrelated subquery once), then every key up to it goes — a few more than `batch` when several share that
// millisecond. (Picking the batch's keys by primary key, `(workflow_id, user_id, key) IN (…)`, made PostgreSQL scan
// the whole table for each batch.)
const PRUNE_BATCH = statement('idempotency-keys.prune', ({ db, t }) => {
  const k = t.idempotencyKeys
  const cutoff = sql.placeholder('cutoff')
  const batchEnd = db.select({ createdAt: k.createdAt }).from(k).where(lte(k.createdAt, cutoff)).orderBy(asc(k.createdAt)).limit(constantLimit(1)).offset(sql.placeholder('skip'))
  return db.delete(k).where(lte(k.createdAt, sql`coalesce((${batchEnd}), ${cutoff})`)).returning({ key: k.key })
})

/** Deletes about `batch` keys created at or before `cutoff` (epoch ms), oldest first; returns how many. A short write. */
export function* deleteExpiredIdempotencyKeys(cutoff: number, batch: number): Op<number> {
  return (yield* PRUNE_BATCH.rows({ cutoff, skip: batch - 1 })).length
}

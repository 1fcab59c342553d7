/**
 * The queue's operations (src/db/queue.ts) run at once on a store, SQLite or PostgreSQL, for the tests that drive the
 * queue without an executor: each in its own write transaction (`writeNow`; on SQLite IMMEDIATE, as the executor's
 * claim is), answered once committed.
 */
import { claimRuns, insertRun, type NewRun, nextRunAvailableAt, recoverExpiredRuns, releaseOwnedRuns, renewLease, type RunRow } from '../../src/db/queue.ts'
import type { Store } from '../../src/db/store.ts'
import { writeNow } from '../../src/db/write.ts'

export function queueOn(store: Store) {
  return {
    insert: (run: NewRun) => writeNow(store, () => insertRun(run)),
    /** The next due run, claimed by `owner` under a lease, or null. */
    claim: async (owner: string, now: number, leaseMs: number): Promise<RunRow | null> =>
      (await writeNow(store, () => claimRuns(owner, now, leaseMs, 1)))[0] ?? null,
    heartbeat: (runId: string, owner: string, now: number, leaseMs: number) => writeNow(store, () => renewLease(runId, owner, now, leaseMs)),
    recoverExpired: (now: number) => writeNow(store, () => recoverExpiredRuns(now)),
    releaseOwned: (owner: string, now: number) => writeNow(store, () => releaseOwnedRuns(owner, now)),
    nextAvailableAt: () => writeNow(store, () => nextRunAvailableAt()),
  }
}

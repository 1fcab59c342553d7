/**
 * The queue's operations (src/db/queue.ts) run at once on one SQLite connection, for the tests that drive the queue
 * without an executor: each a `runOp`, the claim in its own IMMEDIATE transaction as the executor's write is.
 */
import type { Database } from 'bun:sqlite'
import { drizzle } from 'drizzle-orm/bun-sqlite'
import { runOp } from '../../src/db/op.ts'
import type { Db } from '../../src/db/open.ts'
import { claimRuns, insertRun, type NewRun, nextRunAvailableAt, recoverExpiredRuns, releaseOwnedRuns, renewLease, type RunRow } from '../../src/db/queue.ts'
import * as schema from '../../src/db/schema.ts'

export function queueOn(connection: Database) {
  const db = drizzle({ client: connection, schema }) as unknown as Db
  return {
    insert: (run: NewRun) => runOp(db, insertRun(run)),
    /** The next due run, claimed by `owner` under a lease, or null. */
    claim: (owner: string, now: number, leaseMs: number): RunRow | null =>
      db.transaction((tx) => runOp(tx as unknown as Db, claimRuns(owner, now, leaseMs, 1)), { behavior: 'immediate' })[0] ?? null,
    heartbeat: (runId: string, owner: string, now: number, leaseMs: number) => runOp(db, renewLease(runId, owner, now, leaseMs)),
    recoverExpired: (now: number) => runOp(db, recoverExpiredRuns(now)),
    releaseOwned: (owner: string, now: number) => runOp(db, releaseOwnedRuns(owner, now)),
    nextAvailableAt: () => runOp(db, nextRunAvailableAt()),
  }
}

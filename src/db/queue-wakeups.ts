/**
 * How an executor hears that a run was queued elsewhere. On PostgreSQL several instances share the queue: a run
 * queued (or given back) on one sends `NOTIFY trellis_runs` on commit (src/db/postgres/queue.ts) and every instance's
 * executor LISTENs, so it claims at once instead of at its next poll. On SQLite one process queues and runs: its
 * routes wake its executor directly (`Executor.notify`), and there is nothing to listen to.
 */
import type { Store } from './open.ts'
import { listenForQueuedRuns } from './postgres/queue.ts'

export interface QueueWakeups {
  stop(): Promise<void>
}

/** Calls `wake` whenever a run is queued on another connection or instance; resolves once listening. */
export function listenForQueuedRunsOn(store: Store, wake: () => void): Promise<QueueWakeups> {
  if (store.kind === 'postgres') return listenForQueuedRuns(store.sql, wake)
  return Promise.resolve({ stop: () => Promise.resolve() })
}

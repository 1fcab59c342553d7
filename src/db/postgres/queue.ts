/**
 * How an executor hears of runs queued on other instances, and a delivery worker of callbacks queued there
 * (./store.ts `listenForQueuedRuns`, `listenForCallbacks`): a run queued (or given back) sends
 * `NOTIFY trellis_runs` inside its transaction, a run's end that queued callbacks (or a resend) `NOTIFY
 * trellis_callbacks` (the PostgreSQL halves of ../queue.ts's and ../callbacks.ts's announcing plans), delivered to
 * every listener on commit.
 */
import type { SQL } from 'bun'
import { listenOn } from './listen.ts'

/** The channel a queued run is announced on (payload empty): every instance's executor listens. */
export const RUNS_CHANNEL = 'trellis_runs'
/** The channel queued callback deliveries are announced on (payload empty): every instance's delivery worker listens. */
export const CALLBACKS_CHANNEL = 'trellis_callbacks'
/** The channel a task opened with a deadline is announced on (payload empty): every instance's deadline timer listens. */
export const TASKS_CHANNEL = 'trellis_tasks'

/**
 * Calls `wake` whenever something is announced on `channel` by any instance (and once more after a dropped
 * listening connection is back, since notifications sent meanwhile are lost). Bun's client keeps the subscription on
 * one dedicated connection beside the pool and re-subscribes after a reconnect. Resolves once the server listens.
 */
export function listenOnPostgres(sql: SQL, channel: string, wake: () => void): Promise<{ stop(): Promise<void> }> {
  return listenOn(sql, channel, () => wake())
}

/**
 * How an executor hears of runs queued on other instances (../store.ts `listenForQueuedRunsOn`): a run queued (or
 * given back) sends `NOTIFY trellis_runs` inside its transaction (./per-dialect.ts), delivered to every listener on
 * commit. The queue's own PostgreSQL operations are in ./per-dialect.ts.
 */
import type { SQL } from 'bun'
import { listenOn } from './listen.ts'

/** The channel a queued run is announced on (payload empty): every instance's executor listens. */
export const RUNS_CHANNEL = 'trellis_runs'

/**
 * Calls `wake` whenever a run is queued or given back on any instance (and once more after a dropped listening
 * connection is back, since notifications sent meanwhile are lost). Bun's client keeps the subscription on one
 * dedicated connection beside the pool and re-subscribes after a reconnect. Resolves once the server listens.
 */
export function listenForQueuedRuns(sql: SQL, wake: () => void): Promise<{ stop(): Promise<void> }> {
  return listenOn(sql, RUNS_CHANNEL, () => wake())
}

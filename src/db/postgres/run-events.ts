/**
 * Run events across instances (../run-events.ts, docs/workflows.md "Run events (SSE)"): after a transaction that appended events
 * commits, its instance sends `NOTIFY trellis_run_events` naming the environments; every instance LISTENs and reads
 * those environments' new events from the table (a notification only says where to look: a subscriber never takes
 * an event from it).
 *
 * The NOTIFY is sent after the commit, one for all the commits of a turn of the event loop or, under load, of 10 ms (./notify.ts):
 * every step of every run appends events. A notification lost to a crash between the commit and the NOTIFY, or sent
 * while a listener was reconnecting, is made up by the subscribers' periodic read.
 */
import type { SQL } from 'bun'
import { listenOn } from './listen.ts'
import { notifySoon } from './notify.ts'

/** The channel; the payload: the environment ids, comma-separated (empty: any environment). */
export const RUN_EVENTS_CHANNEL = 'trellis_run_events'

/** Announces to every instance that events of `environmentIds` committed: a NOTIFY on the pool `sql` soon (./notify.ts `notifySoon`). */
export function notifyRunEventsCommitted(sql: SQL, environmentIds: readonly number[]): void {
  if (environmentIds.length > 0) notifySoon(sql, RUN_EVENTS_CHANNEL, environmentIds)
}

/** Calls `wake` with the environments of each notification, and with null (any) after a reconnect. Resolves once listening. */
export function listenForRunEvents(sql: SQL, wake: (environmentIds: number[] | null) => void): Promise<{ stop(): Promise<void> }> {
  return listenOn(sql, RUN_EVENTS_CHANNEL, (payload) => wake(payload ? payload.split(',').map(Number) : null))
}

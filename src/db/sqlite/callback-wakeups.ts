/**
 * How a delivery worker hears of callbacks queued on SQLite: one process writes, so the worker listens on the
 * store's own connection, and the transaction that queued deliveries wakes it once committed (the SQLite half of
 * ../callbacks.ts's `announceCallbacks`). PostgreSQL's: `NOTIFY trellis_callbacks` (../postgres/queue.ts).
 */
import type { Database } from 'bun:sqlite'
import type { Db } from '../dialect.ts'
import type { Listening } from '../store.ts'
import { connectionOf } from './prepared.ts'

/** Listeners of SQLite connections (the delivery worker of the process that opened it), woken after a commit. */
const listenersOf = new WeakMap<Database, Set<() => void>>()

/**
 * Wakes the connection's listeners on the next turn of the event loop: the commit is synchronous, so it is done by
 * then (a rolled-back transaction wakes them for nothing).
 */
export function wakeCallbackListeners(db: Db): void {
  const listeners = listenersOf.get(connectionOf(db))
  if (listeners && listeners.size > 0) setImmediate(() => listeners.forEach((wake) => wake()))
}

/** Calls `wake` whenever a transaction on this connection queued deliveries. */
export function listenForCallbacks(connection: Database, wake: () => void): Listening {
  const listeners = listenersOf.get(connection) ?? new Set()
  listenersOf.set(connection, listeners)
  listeners.add(wake)
  return { stop: async () => void listeners.delete(wake) }
}

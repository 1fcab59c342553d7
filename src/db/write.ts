/**
 * Writing (docs/operations.md "Storage faults"): an op in one transaction, all of it committed or none. Each store
 * runs it its own way (./store.ts): SQLite commits the writes of one turn of the event loop together, each in its own
 * savepoint, and waits asynchronously while another process holds the lock (./sqlite/group-commit.ts); PostgreSQL
 * runs each in its own `BEGIN … COMMIT` on a pooled connection (./postgres/op-runner.ts). A full disk is
 * `storage_full` at once. The CLI writes at once (`writeNow`), its connection waiting in the driver.
 */
import type { Op } from './op.ts'
import type { Store } from './store.ts'

/**
 * The server's write: `body`'s op in one transaction, its caller answered only after the COMMIT. A transaction that
 * did not commit rolled back entirely, and its op may run again from scratch (`body` makes a fresh one): an op must
 * have no effect outside the transaction.
 */
export function write<T>(store: Store, body: () => Op<T>): Promise<T> {
  return store.write(body)
}

/**
 * `write`, for the executor's share of the event loop (docs/workflows.md "Executor"): on SQLite one group commit runs
 * such writes for `shareMs` at most (and at least one); those past it go back to the front of the queue for the
 * next turn, while the other writes of the batch go on. So a busy turn gives HTTP its request slice
 * (src/http/turn-slices.ts) and the executor `shareMs` of step groups, whatever the backlog. PostgreSQL runs the
 * executor's statements in the database server, not on the event loop: there it is `write`.
 */
export function writeInShare<T>(store: Store, body: () => Op<T>, shareMs: number): Promise<T> {
  return store.write(body, shareMs)
}

/** An op in one write transaction, at once, on either store: the CLI's write. */
export function writeNow<T>(store: Store, body: () => Op<T>): Promise<T> {
  return store.writeNow(body)
}

/** `writeNow` answered synchronously (see `readSync`): SQLite's; PostgreSQL is refused by name (`what`). */
export function writeSync<T>(store: Store, body: () => Op<T>, what: string): T {
  return store.writeSync(body, what)
}

/** A write that may be skipped (a `lastUsedAt` stamp): one attempt, no wait; false when the database is busy or full. */
export function tryWrite(store: Store, body: () => Op<unknown>): boolean {
  return store.tryWrite(body)
}

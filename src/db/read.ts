/**
 * Reading. A request's reads (`read`) run on the server's connection as they come, each statement its own snapshot,
 * as every request's writes commit whole (`write`). Outside a request (the CLI, the server's start-up),
 * `readTransaction` gives an op one consistent snapshot: a deferred transaction takes no write lock, so in WAL mode
 * it neither waits for a writer nor holds one up.
 */
import { type Op, runOp } from './op.ts'
import type { Store } from './open.ts'
import { transaction } from './write.ts'

/** A request's read: `work` run on the store's connection. */
export async function read<T>(store: Store, work: Op<T>): Promise<T> {
  return runOp(store.db, work)
}

/** `work` in one read (deferred) transaction, synchronously; storage faults as in `writeTransaction`. */
export function readTransaction<T>(store: Store, work: Op<T>): T {
  return transaction(store, 'deferred', (db) => runOp(db, work))
}

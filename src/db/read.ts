/**
 * Reading outside a request (the CLI, the server's start-up): `fn` sees one consistent snapshot of the database.
 * A deferred transaction takes no write lock, so in WAL mode it neither waits for a writer nor holds one up.
 */
import type { Db, Store } from './open.ts'
import { transaction } from './write.ts'

/** Runs the synchronous `fn` in one read (deferred) transaction and returns its result; storage faults as in `writeTransaction`. */
export function readTransaction<T>(store: Store, fn: (db: Db) => T): T {
  return transaction(store, 'deferred', fn)
}

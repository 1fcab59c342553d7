/**
 * Reading. A request's reads (`read`) run on the server's connection as they come, each statement its own snapshot,
 * as every request's writes commit whole (`write`). Outside a request (the CLI, the server's start-up),
 * `readTransaction` gives an op one consistent snapshot: a deferred transaction takes no write lock, so in WAL mode
 * it neither waits for a writer nor holds one up.
 */
import type { Op } from './op.ts'
import { runOp } from './sqlite/op-runner.ts'
import { type SqliteStore, sqliteOnly, type Store } from './open.ts'
import { readOnPostgres, snapshotOnPostgres } from './postgres/op-runner.ts'
import { transaction } from './write.ts'

/** A request's read: `work` run on the store's connection (PostgreSQL: on the pool). */
export async function read<T>(store: Store, work: Op<T>): Promise<T> {
  return store.kind === 'postgres' ? readOnPostgres(store, work) : runOp(store.db, work)
}

/** `work` over one consistent snapshot, on either store (the CLI's reads, the server's start). */
export async function readSnapshot<T>(store: Store, work: Op<T>): Promise<T> {
  return store.kind === 'postgres' ? snapshotOnPostgres(store, work) : readTransaction(store, work)
}

/**
 * `work` over one snapshot, answered synchronously, for callers that need the answer at once (tests, the bench's
 * seeding): SQLite's `readTransaction`; a store that answers only later (PostgreSQL) is refused by name (`what`).
 */
export function readSync<T>(store: Store, work: Op<T>, what: string): T {
  return readTransaction(sqliteOnly(store, what), work)
}

/** `work` in one read (deferred) transaction, synchronously; storage faults as in `writeTransaction`. */
export function readTransaction<T>(store: SqliteStore, work: Op<T>): T {
  return transaction(store, 'deferred', (db) => runOp(db, work))
}

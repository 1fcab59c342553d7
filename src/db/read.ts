/**
 * Reading. A request's reads (`read`) run on the server's connection as they come, each statement its own snapshot,
 * as every request's writes commit whole (./write.ts). Outside a request (the CLI, the server's start-up),
 * `readSnapshot` gives an op one consistent snapshot (SQLite: a deferred transaction, which takes no write lock, so
 * in WAL mode it neither waits for a writer nor holds one up). Each store runs them its own way (./store.ts).
 */
import type { WatermarkedList } from './dialect.ts'
import type { Op } from './op.ts'
import type { Store } from './store.ts'

/** A request's read: `work` run on the store's connection (PostgreSQL: on the pool). */
export function read<T>(store: Store, work: Op<T>): Promise<T> {
  return store.read(work)
}

/** `work` over one consistent snapshot, on either store (the CLI's reads, the server's start). */
export function readSnapshot<T>(store: Store, work: Op<T>): Promise<T> {
  return store.readSnapshot(work)
}

/**
 * `work` over one snapshot, answered synchronously, for callers that need the answer at once (tests, the bench's
 * seeding): SQLite's read transaction; a store that answers only later (PostgreSQL) is refused by name (`what`).
 */
export function readSync<T>(store: Store, work: Op<T>, what: string): T {
  return store.readSync(work, what)
}

/**
 * `read` of a watermarked list (PostgreSQL's lists whose writers commit at once: ./postgres/list-watermark.ts): first
 * the passes that list what was committed before the read was asked for, so a client reads its own writes whichever
 * instance it asks. Past a second (a long transaction holds the list back) it reads what is listed.
 */
export async function readListed<T>(store: Store, list: WatermarkedList, work: Op<T>): Promise<T> {
  await store.awaitListed(list)
  return store.read(work)
}

/**
 * The one rule for writing (README "Storage faults"): every write is an IMMEDIATE transaction; a process with an
 * event loop to keep free (the server) never lets the driver wait for another process's lock — `write()` waits
 * asynchronously, retrying, up to the store's budget, then gives up with `database_busy`; a full disk is
 * `storage_full` at once. The CLI has no event loop to protect: its `writeTransaction` waits in the driver.
 */
import { statfsSync } from 'node:fs'
import { dirname } from 'node:path'
import { StorageUnavailableError } from '../lib/storage-unavailable.ts'
import { type Op, runOp } from './op.ts'
import type { Db, Store } from './open.ts'

/** Seconds a client should wait before retrying a write refused for the lock, or for a full disk. */
export const BUSY_RETRY_AFTER_SECONDS = 1
export const FULL_RETRY_AFTER_SECONDS = 60

/** Free space below which a disk that refused a write still counts as full (/readyz). */
export const ROOM_TO_WRITE_BYTES = 1024 * 1024

const FIRST_RETRY_MS = 5
const LONGEST_RETRY_MS = 50

/**
 * A driver error as the storage fault it is (the lock is held elsewhere, the disk is full), else null. A full
 * disk also marks the store full until a write commits again or /readyz finds room (`storageFullNow`).
 */
export function storageErrorOf(store: Store, error: unknown): StorageUnavailableError | null {
  if (error instanceof StorageUnavailableError) return error
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code !== 'string') return null
  if (code.startsWith('SQLITE_BUSY')) {
    return new StorageUnavailableError('database_busy', 'Another process holds the database write lock', BUSY_RETRY_AFTER_SECONDS)
  }
  if (code === 'SQLITE_FULL') {
    store.storageFull = true
    return new StorageUnavailableError('storage_full', 'The disk holding the database is full: nothing was written', FULL_RETRY_AFTER_SECONDS)
  }
  return null
}

/**
 * Runs `fn` in an IMMEDIATE transaction, once, and returns its result. The driver waits for another process's lock
 * as long as the connection's busy_timeout says (the CLI's: seconds; the server's: not at all). `fn` must be
 * synchronous — bun:sqlite transactions are. Storage faults are thrown as StorageUnavailableError.
 */
export function writeTransaction<T>(store: Store, fn: (tx: Db) => T): T {
  const result = transaction(store, 'immediate', fn)
  store.storageFull = false
  return result
}

/** An op in one IMMEDIATE transaction, at once: the CLI's write (its connection waits in the driver for a lock). */
export function commitNow<T>(store: Store, body: () => Op<T>): T {
  return writeTransaction(store, (tx) => runOp(tx, body()))
}

/** `fn` in one transaction of the given kind; a driver error that is a storage fault is thrown as one. */
export function transaction<T>(store: Store, behavior: 'immediate' | 'deferred', fn: (tx: Db) => T): T {
  try {
    return store.db.transaction((tx) => fn(tx as unknown as Db), { behavior })
  } catch (error) {
    throw storageErrorOf(store, error) ?? error
  }
}

/**
 * The server's write: `writeTransaction`, retried while another process holds the lock — sleeping between
 * attempts (5 ms doubling to 50 ms) so the event loop serves everything else meanwhile — until the store's
 * `writeWaitMs`, then `database_busy`. A failed attempt rolled back entirely, so the op runs again from scratch
 * (`body` makes a fresh one): it must have no effect outside the transaction.
 */
export async function write<T>(store: Store, body: () => Op<T>): Promise<T> {
  const deadline = performance.now() + store.writeWaitMs
  for (let pause = FIRST_RETRY_MS; ; pause = Math.min(LONGEST_RETRY_MS, pause * 2)) {
    try {
      return writeTransaction(store, (tx) => runOp(tx, body()))
    } catch (error) {
      const left = deadline - performance.now()
      if (!(error instanceof StorageUnavailableError) || error.code !== 'database_busy' || left <= 0) throw error
      await Bun.sleep(Math.min(pause, left))
    }
  }
}

/**
 * Runs `fn` in a savepoint of the transaction `tx`: when it throws, its writes alone roll back and the error goes on,
 * the rest of the transaction stays (the executor's steps, one savepoint each).
 */
export function inSavepoint<T>(tx: Db, fn: (savepoint: Db) => T): T {
  return tx.transaction((savepoint) => fn(savepoint as unknown as Db))
}

/** A write that may be skipped (a `lastUsedAt` stamp): one attempt, no wait; false when the database is busy or full. */
export function tryWrite(store: Store, body: () => Op<unknown>): boolean {
  try {
    writeTransaction(store, (tx) => runOp(tx, body()))
    return true
  } catch (error) {
    if (error instanceof StorageUnavailableError) return false
    throw error
  }
}

/**
 * Whether the store is full now (/readyz): a write failed for space and, since, nothing committed and the disk
 * (and SQLite's page limit) still has less than ROOM_TO_WRITE_BYTES free. Finding room clears the mark.
 */
export function storageFullNow(store: Store): boolean {
  if (!store.storageFull) return false
  if (roomToWrite(store) < ROOM_TO_WRITE_BYTES) return true
  store.storageFull = false
  return false
}

function roomToWrite(store: Store): number {
  const { bavail, bsize } = statfsSync(dirname(store.path))
  const pragma = (name: string) => Object.values(store.sqlite.query(`PRAGMA ${name}`).all()[0] as Record<string, number>)[0]!
  const pages = pragma('max_page_count') - pragma('page_count') + pragma('freelist_count')
  return Math.min(bavail * bsize, pages * pragma('page_size'))
}

/**
 * SQLite's transactions and storage faults (docs/operations.md "Storage faults"): every write is an IMMEDIATE
 * transaction, every consistent read a deferred one; a driver error that is a storage fault (the lock is held by
 * another process, the disk is full, the files are read-only) is thrown as the StorageUnavailableError it is.
 * The server's writes go through the group commit (./group-commit.ts); the CLI's wait in the driver.
 */
import { accessSync, constants, existsSync, statfsSync } from 'node:fs'
import { dirname } from 'node:path'
import { StorageUnavailableError, storageFull } from '../../lib/storage-unavailable.ts'
import type { Db } from '../dialect.ts'
import { countListTimes } from '../monotonic.ts'
import type { SqliteFile } from './open.ts'

/** Seconds a client should wait before retrying a write refused for the lock. */
export const BUSY_RETRY_AFTER_SECONDS = 1
/** A file system made read-only rarely comes back within seconds either (an operator remounts it). */
export const READ_ONLY_RETRY_AFTER_SECONDS = 60

/** A driver error as the storage fault it is (the lock is held elsewhere, the disk is full), else null. */
export function sqliteFaultOf(file: SqliteFile, error: unknown): StorageUnavailableError | null {
  if (error instanceof StorageUnavailableError) return error
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code !== 'string') return null
  if (code.startsWith('SQLITE_BUSY')) {
    return new StorageUnavailableError('database_busy', 'Another process holds the database write lock', BUSY_RETRY_AFTER_SECONDS)
  }
  if (code === 'SQLITE_FULL') return storageFull()
  // A read-only file system (or immutable files) fails SQLite's write() with EROFS/EPERM, which it reports as an
  // I/O error: it is one only when the files are still writable; else it is the read-only storage it is.
  if (code.startsWith('SQLITE_READONLY') || (code.startsWith('SQLITE_IOERR') && filesReadOnly(file))) {
    return new StorageUnavailableError('storage_read_only', 'The database files cannot be written (a read-only file system or files): nothing was written', READ_ONLY_RETRY_AFTER_SECONDS)
  }
  return null
}

/** Whether the database's files refuse writes now: a read-only mount, immutable or read-only files. */
export function filesReadOnly(file: SqliteFile): boolean {
  for (const path of [file.path, `${file.path}-wal`]) {
    try {
      if (existsSync(path)) accessSync(path, constants.W_OK)
    } catch {
      return true
    }
  }
  return false
}

/**
 * The room left to write: free space on the data directory's filesystem, or within SQLite's page limit, whichever
 * is less. Measured at each call (a statfs and three PRAGMAs, microseconds).
 */
export function roomToWrite(file: SqliteFile): number {
  const { bavail, bsize } = statfsSync(dirname(file.path))
  const pragma = (name: string) => Object.values(file.sqlite.query(`PRAGMA ${name}`).all()[0] as Record<string, number>)[0]!
  const pages = pragma('max_page_count') - pragma('page_count') + pragma('freelist_count')
  return Math.min(bavail * bsize, pages * pragma('page_size'))
}

/**
 * `fn` in one transaction of the given kind, once, and its result. The driver waits for another process's lock as
 * long as the connection's busy_timeout says (the CLI's: seconds; the server's: not at all). `fn` must be
 * synchronous — bun:sqlite transactions are. A driver error that is a storage fault is thrown as one.
 */
export function transaction<T>(file: SqliteFile, behavior: 'immediate' | 'deferred', fn: (tx: Db) => T): T {
  try {
    return file.db.transaction((tx) => countListTimes(file.db, () => fn(tx as unknown as Db)), { behavior })
  } catch (error) {
    throw sqliteFaultOf(file, error) ?? error
  }
}

/**
 * The database cannot take a write now: another process holds the write lock past the wait budget
 * (`database_busy`), the disk is full (`storage_full`), its files cannot be written (`storage_read_only`: a read-only
 * file system or files), or the PostgreSQL server cannot be reached (`database_unavailable`). Thrown by src/db;
 * answered 503 with Retry-After.
 */
export class StorageUnavailableError extends Error {
  constructor(
    readonly code: 'database_busy' | 'storage_full' | 'storage_read_only' | 'database_unavailable',
    message: string,
    /** A hint for the client's Retry-After, in whole seconds. */
    readonly retryAfterSeconds: number,
  ) {
    super(message)
    this.name = 'StorageUnavailableError'
  }
}

/** Seconds a client should wait before retrying a write refused for a full disk (space rarely comes back sooner). */
export const FULL_RETRY_AFTER_SECONDS = 60

/** The disk holding the database is full (SQLite's SQLITE_FULL, PostgreSQL's 53100 disk_full): the one answer of both stores. */
export function storageFull(): StorageUnavailableError {
  return new StorageUnavailableError('storage_full', 'The disk holding the database is full: nothing was written', FULL_RETRY_AFTER_SECONDS)
}

/**
 * The database cannot take a write now: another process holds the write lock past the wait budget
 * (`database_busy`), the disk is full (`storage_full`), or the PostgreSQL server cannot be reached (`database_unavailable`). Thrown by src/db; answered 503 with Retry-After.
 */
export class StorageUnavailableError extends Error {
  constructor(
    readonly code: 'database_busy' | 'storage_full' | 'database_unavailable',
    message: string,
    /** A hint for the client's Retry-After, in whole seconds. */
    readonly retryAfterSeconds: number,
  ) {
    super(message)
    this.name = 'StorageUnavailableError'
  }
}

/**
 * The database cannot take a write now: another process holds the write lock past the wait budget
 * (`database_busy`), or the disk is full (`storage_full`). Thrown by src/db; answered 503 with Retry-After.
 */
export class StorageUnavailableError extends Error {
  constructor(
    readonly code: 'database_busy' | 'storage_full',
    message: string,
    /** A hint for the client's Retry-After, in whole seconds. */
    readonly retryAfterSeconds: number,
  ) {
    super(message)
    this.name = 'StorageUnavailableError'
  }
}

/**
 * One serving process per SQLite data directory (docs/operations.md "Deploy"). `serve` holds an exclusive lock on
 * `<dataDir>/serve.lock` (a SQLite file of its own, in an exclusive transaction never committed) for as long as it
 * lives; the kernel drops the lock when the process ends, however it ends (`kill -9` included). A second `serve` on the
 * same directory is refused at start. The CLI commands never take it: they work while `serve` runs (DESIGN §9).
 * Holding it is what lets a starting server take back every run still marked running (`Store.servesAlone`). The
 * lock is `tryExclusiveFileLock` (../file-lock.ts), which also keeps a witness file's search and append to one process
 * at a time.
 */
import { join } from 'node:path'
import { type FileLock, tryExclusiveFileLock } from '../file-lock.ts'

export const SERVING_LOCK_FILE = 'serve.lock'

export class DataDirServedError extends Error {
  constructor(dataDir: string) {
    super(`another trellis serve is already serving ${dataDir} (it holds ${join(dataDir, SERVING_LOCK_FILE)}): run one serve per data directory`)
  }
}

export type ServingLock = FileLock

/** Takes the data directory's serving lock at once, or throws DataDirServedError when another process holds it. */
export function holdServingLock(dataDir: string): ServingLock {
  const lock = tryExclusiveFileLock(join(dataDir, SERVING_LOCK_FILE))
  if (lock === null) throw new DataDirServedError(dataDir)
  return lock
}

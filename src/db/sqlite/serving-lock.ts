/**
 * One serving process per SQLite data directory (docs/operations.md "Deploy"). `serve` holds an exclusive lock on
 * `<dataDir>/serve.lock` (a SQLite file of its own, in an exclusive transaction never committed) for as long as it
 * lives; the kernel drops the lock when the process ends, however it ends (`kill -9` included). A second `serve` on the
 * same directory is refused at start. The CLI commands never take it: they work while `serve` runs (DESIGN §9).
 * Holding it is what lets a starting server take back every run still marked running (`Store.servesAlone`). The
 * same kind of lock keeps a witness file's search and append to one process at a time (src/executor/witness-delivery.ts).
 */
import { Database } from 'bun:sqlite'
import { join } from 'node:path'

export const SERVING_LOCK_FILE = 'serve.lock'

export class DataDirServedError extends Error {
  constructor(dataDir: string) {
    super(`another trellis serve is already serving ${dataDir} (it holds ${join(dataDir, SERVING_LOCK_FILE)}): run one serve per data directory`)
  }
}

export interface ServingLock {
  release(): void
}

/** Takes the data directory's serving lock at once, or throws DataDirServedError when another process holds it. */
export function holdServingLock(dataDir: string): ServingLock {
  const lock = tryExclusiveFileLock(join(dataDir, SERVING_LOCK_FILE))
  if (lock === null) throw new DataDirServedError(dataDir)
  return lock
}

/**
 * An exclusive lock on `path` (a SQLite file of its own, made when missing, in an exclusive transaction never
 * committed), or null at once when another connection — of this process or another — holds it. The kernel drops it
 * when its process ends, however it ends: no lock outlives its holder. Never waited for in the driver (its busy wait
 * stops the event loop): a caller that waits polls.
 */
export function tryExclusiveFileLock(path: string): ServingLock | null {
  const lock = new Database(path, { create: true })
  try {
    lock.run('PRAGMA busy_timeout = 0')
    lock.run('PRAGMA locking_mode = EXCLUSIVE')
    lock.run('BEGIN EXCLUSIVE')
  } catch (error) {
    lock.close()
    if ((error as { code?: string }).code === 'SQLITE_BUSY') return null
    throw error
  }
  return { release: () => lock.close() }
}

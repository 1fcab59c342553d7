/**
 * A lock one process at a time holds on a file, the kernel's: the data directory's serving lock (./sqlite/serving-lock.ts)
 * and an audit witness file's search-then-append (src/executor/witness-delivery.ts). SQLite's file locking does the
 * work, whichever store holds the data.
 */
import { Database } from 'bun:sqlite'

export interface FileLock {
  release(): void
}

/**
 * An exclusive lock on `path` (a SQLite file of its own, made when missing, in an exclusive transaction never
 * committed), or null at once when another connection — of this process or another — holds it. The kernel drops it
 * when its process ends, however it ends: no lock outlives its holder. Never waited for in the driver (its busy wait
 * stops the event loop): a caller that waits polls.
 */
export function tryExclusiveFileLock(path: string): FileLock | null {
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

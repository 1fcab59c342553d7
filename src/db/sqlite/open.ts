/** Opens the one SQLite file with its pragmas in a fixed order (DESIGN §3). */
import { Database } from 'bun:sqlite'
import { chmodSync, closeSync, openSync } from 'node:fs'
import { join } from 'node:path'
import { drizzle } from 'drizzle-orm/bun-sqlite'
import { ensurePrivateDir } from '../../lib/private-dir.ts'
import type { Db } from '../dialect.ts'
import * as schema from '../schema.ts'

export const DATABASE_FILE = 'trellis.db'

/** The CLI's connection: no event loop to keep free, so the driver itself waits this long for another's lock. */
export const CLI_BUSY_TIMEOUT_MS = 5000

/** An open SQLite file: the raw connection (prepared hot-path statements, maintenance), its Drizzle handle, its path. */
export interface SqliteFile {
  readonly sqlite: Database
  readonly db: Db
  readonly path: string
}

export function databasePath(dataDir: string): string {
  return join(dataDir, DATABASE_FILE)
}

/**
 * The database holds password and token hashes: its files are the owner's only (0600). SQLite creates `-wal`
 * and `-shm` with the database file's own mode, so the file is made 0600 before SQLite opens it; files left
 * wider by an older version are narrowed at the next open.
 */
function keepPrivate(file: string): void {
  try {
    chmodSync(file, 0o600)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    // Absent (no -wal yet), or another user's file in a shared directory: nothing this process may change.
    if (code !== 'ENOENT' && code !== 'EPERM') throw error
  }
}

/**
 * Opens (creating if needed) `<dataDir>/trellis.db` for the CLI: the driver waits up to CLI_BUSY_TIMEOUT_MS for a
 * lock. Does not migrate (./migrate.ts). A serving store then keeps its event loop free (./store.ts `serve`).
 */
export function openDatabaseFile(dataDir: string): SqliteFile {
  ensurePrivateDir(dataDir)
  const path = databasePath(dataDir)
  closeSync(openSync(path, 'a', 0o600)) // creates it 0600 when new; an existing file keeps its content
  for (const suffix of ['', '-wal', '-shm']) keepPrivate(path + suffix)
  const sqlite = new Database(path, { create: true, strict: true })
  // busy_timeout first so the following pragmas already wait for a concurrent writer.
  sqlite.run(`PRAGMA busy_timeout = ${CLI_BUSY_TIMEOUT_MS}`)
  sqlite.run('PRAGMA journal_mode = WAL')
  sqlite.run('PRAGMA synchronous = NORMAL')
  sqlite.run('PRAGMA foreign_keys = ON')
  return { sqlite, db: drizzle({ client: sqlite, schema }), path }
}

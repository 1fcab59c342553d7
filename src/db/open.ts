/** Opens the one SQLite file with its pragmas in a fixed order (DESIGN §3). */
import { Database } from 'bun:sqlite'
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs'
import { join } from 'node:path'
import { drizzle, type BunSQLiteDatabase } from 'drizzle-orm/bun-sqlite'
import * as schema from './schema.ts'

export type Db = BunSQLiteDatabase<typeof schema>

export interface Store {
  /** The raw connection, for prepared hot-path statements and maintenance. */
  sqlite: Database
  db: Db
  path: string
  close(): void
}

export const DATABASE_FILE = 'trellis.db'

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

/** Opens (creating if needed) `<dataDir>/trellis.db`. Does not migrate: see `migrate()`. */
export function openStore(dataDir: string): Store {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const path = databasePath(dataDir)
  closeSync(openSync(path, 'a', 0o600)) // creates it 0600 when new; an existing file keeps its content
  for (const suffix of ['', '-wal', '-shm']) keepPrivate(path + suffix)
  const sqlite = new Database(path, { create: true, strict: true })
  // busy_timeout first so the following pragmas already wait for a concurrent writer.
  sqlite.run('PRAGMA busy_timeout = 5000')
  sqlite.run('PRAGMA journal_mode = WAL')
  sqlite.run('PRAGMA synchronous = NORMAL')
  sqlite.run('PRAGMA foreign_keys = ON')
  const db = drizzle({ client: sqlite, schema })
  return {
    sqlite,
    db,
    path,
    close: () => sqlite.close(),
  }
}

/**
 * Runs `fn` in an IMMEDIATE transaction: a concurrent writer (another process, the CLI) waits on
 * busy_timeout instead of failing half-way. `fn` must be synchronous — bun:sqlite transactions are.
 */
export function writeTransaction<T>(store: Store, fn: (tx: Db) => T): T {
  return store.db.transaction((tx) => fn(tx as unknown as Db), { behavior: 'immediate' })
}

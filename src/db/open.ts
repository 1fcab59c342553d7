/** Opens the one SQLite file with its pragmas in a fixed order (DESIGN §3). */
import { Database } from 'bun:sqlite'
import { mkdirSync } from 'node:fs'
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

/** Opens (creating if needed) `<dataDir>/trellis.db`. Does not migrate: see `migrate()`. */
export function openStore(dataDir: string): Store {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const path = databasePath(dataDir)
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

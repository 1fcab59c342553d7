/** Opens the one SQLite file with its pragmas in a fixed order (DESIGN §3). */
import { Database } from 'bun:sqlite'
import { chmodSync, closeSync, openSync } from 'node:fs'
import { ensurePrivateDir } from '../lib/private-dir.ts'
import { join } from 'node:path'
import { drizzle, type BunSQLiteDatabase } from 'drizzle-orm/bun-sqlite'
import * as schema from './schema.ts'
import type { PgStore } from './postgres/client.ts'
import type { ServingLock } from './sqlite/serving-lock.ts'

export type Db = BunSQLiteDatabase<typeof schema>

/** Where Trellis keeps its data: the embedded SQLite file (the default), or PostgreSQL (TRELLIS_DATABASE_URL). */
export type Store = SqliteStore | PgStore

export interface SqliteStore {
  readonly kind: 'sqlite'
  /** The raw connection, for prepared hot-path statements and maintenance. */
  sqlite: Database
  db: Db
  path: string
  close(): void
  /** How long `write()` waits, asynchronously, for another process's write lock before `database_busy`. */
  writeWaitMs: number
  /** Writes waiting for the next group commit, oldest first, and whether one is scheduled (src/db/write.ts). */
  queuedWrites: QueuedWrite[]
  commitScheduled: boolean
  /** Group commits since the store opened: transactions committed and the writes they carried. */
  committed: { transactions: number; writes: number }
  /** Held while this store serves its data directory (`serveFrom`, ./store.ts): no other process serves it. */
  servingLock: ServingLock | null
}

/** A write waiting for the store's next group commit: its op's run, and how to answer its caller. */
export interface QueuedWrite {
  readonly run: (tx: Db) => unknown
  readonly resolve: (value: unknown) => void
  readonly reject: (error: unknown) => void
  /** `performance.now()` after which a write still refused for another process's lock gives up. */
  readonly deadline: number
  /** A write of the executor's (`writeInShare`, ./write.ts): the ms of such writes one group commit runs at most. */
  readonly shareMs?: number
}

export const DATABASE_FILE = 'trellis.db'

/** The store as the SQLite store it must be for `what` (a file-level operation); PostgreSQL is refused by name. */
export function sqliteOnly(store: Store, what: string): SqliteStore {
  if (store.kind !== 'sqlite') throw new Error(`${what} works on the embedded SQLite database only`)
  return store
}

/** The CLI's connection: no event loop to keep free, so the driver itself waits this long for another's lock. */
export const CLI_BUSY_TIMEOUT_MS = 5000

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
 * lock. Does not migrate: see `migrate()`. The server then calls `keepEventLoopFree` (through `serveFrom`, ./store.ts).
 */
export function openStore(dataDir: string): SqliteStore {
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
  const db = drizzle({ client: sqlite, schema })
  return {
    kind: 'sqlite',
    sqlite,
    db,
    path,
    close: () => sqlite.close(),
    // The CLI waits in the driver (above); only the server's connection waits in `write()`.
    writeWaitMs: 0,
    queuedWrites: [],
    commitScheduled: false,
    committed: { transactions: 0, writes: 0 },
    servingLock: null,
  }
}

/**
 * The server's connection from now on: the driver never waits for a lock (busy_timeout 0 — its wait is synchronous
 * and would stop every request); `write()` waits instead, asynchronously, up to `writeWaitMs`.
 */
export function keepEventLoopFree(store: SqliteStore, writeWaitMs: number): void {
  store.sqlite.run('PRAGMA busy_timeout = 0')
  store.writeWaitMs = writeWaitMs
}

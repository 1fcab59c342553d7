/**
 * Online backup: `VACUUM INTO` copies the database as one read transaction sees it, so the copy is consistent
 * while other connections (the server, the CLI) keep writing, and it includes what the WAL holds. Never copy
 * the `.db` file itself: recent commits may still be only in the WAL.
 */
import type { SqliteStore } from './open.ts'

/** Writes a consistent copy of the store's database to `target`, which must not exist or be an empty file. */
export function backupInto(store: SqliteStore, target: string): void {
  store.sqlite.run('VACUUM INTO ?', [target])
}

/**
 * Online backup: `VACUUM INTO` copies the database as one read transaction sees it, so the copy is consistent
 * while other connections (the server, the CLI) keep writing, and it includes what the WAL holds. Never copy
 * the `.db` file itself: recent commits may still be only in the WAL.
 */
import type { DatabaseSettings } from './connect.ts'
import type { SqliteStore } from './open.ts'

/**
 * How to back up the configured database when `trellis backup` cannot copy it (`backupInto` copies the SQLite file):
 * a PostgreSQL database is backed up with PostgreSQL's own tools. Null for the SQLite file.
 */
export function backupElsewhere(config: DatabaseSettings): string | null {
  if (config.databaseUrl === null) return null
  return [
    'the database is PostgreSQL (--database-url / TRELLIS_DATABASE_URL): back it up with PostgreSQL\'s own tools, e.g.',
    '  pg_dump --format=custom --file trellis.dump "$TRELLIS_DATABASE_URL"   (restore: pg_restore --dbname URL trellis.dump)',
    'or continuous archiving / a replica (docs/scaling-out.md "Scaling out"). Keep TRELLIS_SECRET with it: webhook URLs depend on it.',
  ].join('\n')
}

/** Writes a consistent copy of the store's database to `target`, which must not exist or be an empty file. */
export function backupInto(store: SqliteStore, target: string): void {
  store.sqlite.run('VACUUM INTO ?', [target])
}

/**
 * The one place that picks the database (docs/scaling-out.md "Scaling out"): PostgreSQL when the configuration has a URL
 * (`--database-url` / TRELLIS_DATABASE_URL), else the embedded SQLite file in the data directory. Either way the
 * schema is brought up to date first; several instances starting at once on PostgreSQL migrate once (an advisory
 * lock, ./postgres/migrate.ts).
 */
import { migratePostgres } from './postgres/migrate.ts'
import { migrate } from './sqlite/migrate.ts'
import { openMigrated, openStore } from './sqlite/store.ts'
import type { Store } from './store.ts'

/** Where the data lives (the fields of the configuration, src/config.ts, that say so). */
export interface DatabaseSettings {
  dataDir: string
  databaseUrl: string | null
  databasePoolSize: number
  /** A direct connection for LISTEN when `databaseUrl` goes through a transaction pooler (../config.ts). */
  databaseListenUrl?: string | null
}

/**
 * The module that opens PostgreSQL stores, loaded on the first call: with it Bun loads its PostgreSQL client, which a
 * start on SQLite never needs (./postgres/client.ts).
 */
const postgresStores = () => import('./postgres/store.ts')

/** The configured database, migrated. A PostgreSQL server that cannot be reached is an error naming the host, never the URL. */
export async function openConfiguredStore(config: DatabaseSettings): Promise<Store> {
  if (config.databaseUrl === null) return openMigrated(config.dataDir)
  const store = (await postgresStores()).openPostgres(config.databaseUrl, { max: config.databasePoolSize, listenUrl: config.databaseListenUrl ?? undefined })
  try {
    await migratePostgres(store.sql)
    return store
  } catch (error) {
    await store.close()
    throw new Error(`cannot use the PostgreSQL database at ${describeDatabase(config.databaseUrl)}: ${(error as Error).message}`)
  }
}

/** Applies the configured database's pending migrations (`trellis migrate`); the names of those this call applied. */
export async function migrateConfiguredStore(config: DatabaseSettings): Promise<string[]> {
  if (config.databaseUrl === null) {
    const store = openStore(config.dataDir)
    try {
      return migrate(store.sqlite)
    } finally {
      store.close()
    }
  }
  const store = (await postgresStores()).openPostgres(config.databaseUrl, { max: 1, listenUrl: config.databaseListenUrl ?? undefined })
  try {
    return await migratePostgres(store.sql)
  } finally {
    await store.close()
  }
}

/** The database a URL names, for messages and logs: host, port and database, never the user or password. */
export function describeDatabase(url: string | null): string {
  if (url === null) return 'embedded SQLite'
  try {
    const parsed = new URL(url)
    return `postgres://${parsed.host}${parsed.pathname}`
  } catch {
    return 'postgres (unparsable URL)'
  }
}

/**
 * How to back up the configured database when `trellis backup` cannot copy it (`backupInto`, ./sqlite/backup.ts,
 * copies the SQLite file): a PostgreSQL database is backed up with PostgreSQL's own tools. Null for the SQLite file.
 */
export function backupElsewhere(config: DatabaseSettings): string | null {
  if (config.databaseUrl === null) return null
  return [
    'the database is PostgreSQL (--database-url / TRELLIS_DATABASE_URL): back it up with PostgreSQL\'s own tools, e.g.',
    '  pg_dump --format=custom --file trellis.dump "$TRELLIS_DATABASE_URL"   (restore: pg_restore --dbname URL trellis.dump)',
    'or continuous archiving / a replica (docs/scaling-out.md "Scaling out"). Keep TRELLIS_SECRET with it: webhook URLs depend on it.',
  ].join('\n')
}

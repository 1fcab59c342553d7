/**
 * Acme on PostgreSQL: examples/acme.yaml (plus what a test adds) applied to a SQLite test env through the
 * real apply service, then moved into a fresh migrated PostgreSQL database with `trellis db copy`'s own function
 * (src/db/sqlite-to-postgres.ts, verified per table). So both stores hold the same rows with the same ids, whichever
 * twins exist yet, and a test can run one op on both (`both`) or open more PostgreSQL stores on the database (`url`:
 * more instances).
 */
import { writeNow } from '../../src/db/write.ts'
import type { Op } from '../../src/db/op.ts'
import { copySqliteToPostgres } from '../../src/db/sqlite-to-postgres.ts'
import type { PgStore } from '../../src/db/postgres/store.ts'
import { systemClock } from '../../src/lib/clock.ts'
import { sqliteTestEnv, type SqliteTestEnv } from '../helpers.ts'
import { type AcmeDocument, acmeDocument, applyAcme } from './acme.ts'
import { freshDatabase, openProductPostgres } from './postgres-cluster.ts'

export interface AcmeOnBoth {
  sqlite: SqliteTestEnv
  /** The PostgreSQL database's URL (another store on it is another instance). */
  url: string
  pg: PgStore
  /** `body`'s op in one write transaction on each store; the two answers, SQLite's first. */
  both<T>(body: () => Op<T>): Promise<[T, T]>
  close(): Promise<void>
}

/** Acme (`document`) on SQLite and in the PostgreSQL database at `url` (default: a fresh one of the shared cluster). */
export async function acmeOnBoth(document: AcmeDocument = acmeDocument(), env: Record<string, string> = {}, url?: string): Promise<AcmeOnBoth> {
  const sqlite = sqliteTestEnv(env)
  await applyAcme({ store: sqlite.store, clock: systemClock, secret: sqlite.secret, baseUrl: sqlite.config.baseUrl }, document)
  url ??= await freshDatabase()
  await copySqliteToPostgres(sqlite.store.path, url)
  const pg = openProductPostgres(url, { max: 10 })
  return {
    sqlite,
    url,
    pg,
    both: async <T>(body: () => Op<T>) => [sqlite.store.commitNow(body), await writeNow(pg, body)] as [T, T],
    close: async () => {
      await pg.close()
      sqlite.cleanup()
    },
  }
}

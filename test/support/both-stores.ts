/**
 * Twin tests: the same op on a SQLite store and on a PostgreSQL store, so a test can demand that a face
 * function and its PostgreSQL twin (src/db/postgres) answer alike. Seed both with the same ops in the same order and
 * ids, times and answers line up: both number rows from 1 and take every time from the op's arguments.
 */
import { afterAll, beforeAll, expect } from 'bun:test'
import { writeNow } from '../../src/db/write.ts'
import type { Op } from '../../src/db/op.ts'
import type { PgStore } from '../../src/db/postgres/store.ts'
import { sqliteTestEnv, type SqliteTestEnv } from '../helpers.ts'
import { freshPostgresStore, postgresInstalled } from './postgres-cluster.ts'

/** Skip a PostgreSQL suite on a machine without PostgreSQL, unless TRELLIS_REQUIRE_POSTGRES=1 (CI) demands it. */
export function postgresOrSkip(what: string): boolean {
  if (postgresInstalled) return true
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') throw new Error('initdb/pg_ctl not found (apt-get install postgresql)')
  console.warn(`${what}: SKIPPED, PostgreSQL is not installed (apt-get install postgresql)`)
  return false
}

export interface BothStores {
  sqlite: SqliteTestEnv
  pg: PgStore
  /** `body`'s op in one write transaction on each store; the two answers, SQLite's first. */
  both<T>(body: () => Op<T>): Promise<[T, T]>
}

/**
 * A fresh SQLite test env and a fresh migrated PostgreSQL database for the enclosing describe block (beforeAll), closed
 * after it. Use the returned object's fields inside tests.
 */
export function bothStores(): BothStores {
  const stores = {} as BothStores
  beforeAll(async () => {
    stores.sqlite = sqliteTestEnv()
    stores.pg = await freshPostgresStore()
    stores.both = async <T>(body: () => Op<T>) => [stores.sqlite.store.commitNow(body), await writeNow(stores.pg, body)] as [T, T]
  }, 120_000) // the first block of a test process starts the shared cluster: seconds on a busy machine
  afterAll(async () => {
    stores.sqlite?.cleanup()
    await stores.pg?.close()
  })
  return stores
}

/** Each op of `ops` on both stores; every pair of answers must agree. Returns SQLite's answers. */
export async function alike<T>(stores: BothStores, ops: (() => Op<T>)[]): Promise<T[]> {
  const answers: T[] = []
  for (const body of ops) {
    const [sqlite, pg] = await stores.both(body)
    expect(pg).toEqual(sqlite)
    answers.push(sqlite)
  }
  return answers
}

/**
 * Trellis behind PgBouncer in transaction pooling mode (Debian's `pgbouncer`, test/support/pgbouncer.ts), as a
 * deployment with a pooler runs it: TRELLIS_DATABASE_URL through the pooler, TRELLIS_DATABASE_LISTEN_URL direct.
 * Instances' many client connections share the pooler's few server connections, each transaction on whichever is free
 * (so nothing of a session may outlive a transaction: no named prepared statement, no session lock, no LISTEN there);
 * notifications sent through the pooler are heard on the direct connection. The rest of the PostgreSQL pass runs
 * through the pooler too (scripts/test.ts), the three-instance tests among it.
 */
import { afterEach, beforeAll, expect } from 'bun:test'
import { SQL } from 'bun'
import { RUNS_CHANNEL } from '../src/db/postgres/queue.ts'
import type { PgStore } from '../src/db/postgres/store.ts'
import { POSTGRES_ONLY, postgresOnlyTest, TEST_STORE, until } from './helpers.ts'
import { directUrlOf, freshDatabase, openProductPostgres, productConnection, psqlSync } from './support/postgres-cluster.ts'

// Through the shared cluster's pooler whatever the pass: `npm test` hands its pooler down; alone, this process starts one.
process.env.TRELLIS_TEST_PGBOUNCER = '1'

/** The pooler's server connections per database (test/support/pgbouncer.ts `default_pool_size`). */
const SERVER_POOL = 20

beforeAll(async () => {
  if (TEST_STORE === 'postgres') await freshDatabase()
}, 60_000)

const opened: PgStore[] = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()))
})

function instances(url: string, count: number, max: number): PgStore[] {
  const stores = Array.from({ length: count }, () => openProductPostgres(url, { max }))
  opened.push(...stores)
  return stores
}

/**
 * The database's server connections in a transaction or a statement now, other than this query's own (the pooler
 * keeps idle ones open, and may be replacing one: those are not in use).
 */
const serverConnections = (url: string) =>
  Number(psqlSync(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' AND query NOT LIKE 'LISTEN%'").trim())

postgresOnlyTest(POSTGRES_ONLY.pooler, 'the product connects through the pooler, and listens directly', async () => {
  const url = await freshDatabase()
  const connection = productConnection(url)
  expect(connection.listenUrl).toBe(url)
  expect(new URL(connection.url).port).not.toBe(new URL(url).port)
  expect(directUrlOf(connection.url)).toBe(url)
})

postgresOnlyTest(
  POSTGRES_ONLY.pooler,
  'three instances of 20 connections each hold 60 transactions at once on the pooler\'s 20 server connections: each transaction on any of them, none lost',
  async () => {
    const url = await freshDatabase()
    const stores = instances(url, 3, 20)
    let most = 0
    let running = true
    const watch = (async () => {
      while (running) {
        most = Math.max(most, serverConnections(url))
        await Bun.sleep(20)
      }
    })()
    // Every transaction takes a transaction-level advisory lock, writes and reads back through a statement with
    // parameters (an unnamed statement: a named one would live on one server connection, and the next transaction
    // may run on another).
    psqlSync(url, 'CREATE TABLE pooled_writes (n int PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())')
    const started = performance.now()
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, n) =>
        stores[n % 3]!.sql.begin(async (tx) => {
          await tx.unsafe('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [900, n % 7])
          await tx.unsafe('INSERT INTO pooled_writes (n) VALUES ($1)', [n])
          await tx.unsafe('SELECT pg_sleep(0.1)')
          const [row] = (await tx.unsafe('SELECT n FROM pooled_writes WHERE n = $1', [n])) as { n: number }[]
          return row!.n
        }),
      ),
    )
    running = false
    await watch
    expect(results).toEqual(Array.from({ length: 60 }, (_, n) => n))
    expect(Number(psqlSync(url, 'SELECT count(*) FROM pooled_writes').trim())).toBe(60)
    expect(most).toBeGreaterThan(0)
    expect(most).toBeLessThanOrEqual(SERVER_POOL)
    // 60 transactions of 0.1 s on 20 server connections: three waves at least.
    expect(performance.now() - started).toBeGreaterThanOrEqual(250)
  },
  60_000,
)

postgresOnlyTest(
  POSTGRES_ONLY.pooler,
  'named prepared statements break through the pooler (a server connection holds another client\'s), so the product\'s pool sends unnamed ones',
  async () => {
    const url = await freshDatabase()
    const pooled = productConnection(url).url
    const failuresOf = async (sql: SQL) => {
      const failures: string[] = []
      await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          sql.unsafe(`SELECT $1::int + ${i % 13} AS x, pg_sleep(0.002)`, [i]).catch((error: Error) => failures.push(error.message)),
        ),
      )
      await sql.close()
      return failures
    }
    const named = await failuresOf(new SQL({ url: pooled, max: 20 }))
    expect(named.length).toBeGreaterThan(0)
    expect(named[0]).toMatch(/prepared statement "\w+" (already exists|does not exist)/)
    expect(await failuresOf(instances(url, 1, 20)[0]!.sql)).toEqual([])
  },
  60_000,
)

postgresOnlyTest(POSTGRES_ONLY.pooler, 'a NOTIFY sent through the pooler wakes another instance, which listens on its direct connection', async () => {
  const url = await freshDatabase()
  const [sender, listener] = instances(url, 2, 4)
  let woken = 0
  const listening = await listener!.listenForQueuedRuns(() => woken++)
  try {
    const listens = psqlSync(url, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "${RUNS_CHANNEL}"'`).trim()
    expect(Number(listens)).toBeGreaterThanOrEqual(1)
    // Sent in transactions of their own, on whichever server connections the pooler hands out.
    for (let i = 0; i < 3; i++) await sender!.sql.unsafe(`NOTIFY ${RUNS_CHANNEL}`)
    await until('three wake-ups', () => woken >= 3, 5_000)
    expect(woken).toBe(3)
  } finally {
    await listening.stop()
  }
})

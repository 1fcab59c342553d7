/**
 * `bun bench/pg-drivers.ts [--quick]`: which PostgreSQL client should Trellis use? The same three
 * workloads through Bun's built-in `SQL`, `postgres` (porsager) and `pg` (node-postgres), each with a pool of 10, on a
 * throw-away local cluster (test/support/postgres-cluster.ts; fsync off: the question is the client's cost, not the
 * disk's). Prints operations per second and this process's CPU µs per operation (the driver's own cost: parsing,
 * protocol, pooling). Asserts nothing; loopback only.
 */
import { SQL } from 'bun'
import pg from 'pg'
import postgres from 'postgres'
import { startCluster } from '../test/support/postgres-cluster.ts'

const quick = process.argv.includes('--quick')
const N = quick ? { point: 3_000, concurrent: 10_000, tx: 2_000 } : { point: 20_000, concurrent: 60_000, tx: 10_000 }
const IN_FLIGHT = 64
const POOL = 10

/** What a driver must offer the measurement: a query with parameters, a transaction, a close. */
interface Driver {
  name: string
  query(text: string, values: unknown[]): Promise<unknown[]>
  transaction(work: (query: (text: string, values: unknown[]) => Promise<unknown[]>) => Promise<void>): Promise<void>
  close(): Promise<void>
}

function bunSql(url: string): Driver {
  const sql = new SQL(url, { max: POOL })
  return {
    name: "Bun's built-in SQL",
    query: (text, values) => sql.unsafe(text, values as never[]) as unknown as Promise<unknown[]>,
    transaction: (work) => sql.begin(async (tx) => work((text, values) => tx.unsafe(text, values as never[]) as unknown as Promise<unknown[]>)) as Promise<void>,
    close: () => sql.close(),
  }
}

function porsager(url: string): Driver {
  const sql = postgres(url, { max: POOL, prepare: true })
  return {
    name: 'postgres (porsager) 3',
    query: (text, values) => sql.unsafe(text, values as never[], { prepare: true }) as unknown as Promise<unknown[]>,
    transaction: (work) =>
      sql.begin(async (tx) => {
        await work((text, values) => tx.unsafe(text, values as never[], { prepare: true }) as unknown as Promise<unknown[]>)
      }) as unknown as Promise<void>,
    close: () => sql.end(),
  }
}

function nodePostgres(url: string): Driver {
  const pool = new pg.Pool({ connectionString: url, max: POOL })
  // A name per statement text: node-postgres prepares named statements once per connection.
  const names = new Map<string, string>()
  const named = (text: string) => {
    let name = names.get(text)
    if (!name) names.set(text, (name = `s${names.size}`))
    return name
  }
  return {
    name: 'pg (node-postgres) 8',
    query: async (text, values) => (await pool.query({ name: named(text), text, values })).rows,
    transaction: async (work) => {
      const client = await pool.connect()
      try {
        await client.query('BEGIN')
        await work(async (text, values) => (await client.query({ name: named(text), text, values })).rows)
        await client.query('COMMIT')
      } catch (error) {
        await client.query('ROLLBACK')
        throw error
      } finally {
        client.release()
      }
    },
    close: () => pool.end(),
  }
}

/** Runs `count` operations with `inFlight` at once; ops/s and this process's CPU µs per operation. */
async function measure(count: number, inFlight: number, operation: (i: number) => Promise<unknown>) {
  let next = 0
  const cpu = process.cpuUsage()
  const started = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await operation(next++)
    }),
  )
  const seconds = (performance.now() - started) / 1000
  const used = process.cpuUsage(cpu)
  return { opsPerSecond: count / seconds, cpuUsPerOp: (used.user + used.system) / count }
}

async function main() {
  const cluster = startCluster()
  const log = (line: string) => process.stderr.write(`${line}\n`)
  try {
    const setup = new SQL(cluster.url)
    await setup.unsafe('CREATE TABLE items (id bigserial PRIMARY KEY, k text NOT NULL, v int NOT NULL)')
    await setup.unsafe(`INSERT INTO items (k, v) SELECT 'key-' || g, g FROM generate_series(1, 10000) g`)
    await setup.close()
    const rows: string[] = []
    for (const make of [bunSql, porsager, nodePostgres]) {
      const driver = make(cluster.url)
      log(`measuring ${driver.name}`)
      await driver.query('SELECT v FROM items WHERE id = $1', [1]) // connect and prepare before measuring
      const point = await measure(N.point, 1, (i) => driver.query('SELECT k, v FROM items WHERE id = $1', [(i % 10_000) + 1]))
      const concurrent = await measure(N.concurrent, IN_FLIGHT, (i) => driver.query('SELECT k, v FROM items WHERE id = $1', [(i % 10_000) + 1]))
      const tx = await measure(N.tx, IN_FLIGHT, (i) =>
        driver.transaction(async (query) => {
          const [row] = (await query('INSERT INTO items (k, v) VALUES ($1, $2) RETURNING id', [`tx-${i}`, i])) as { id: string }[]
          await query('UPDATE items SET v = v + 1 WHERE id = $1', [row!.id])
        }),
      )
      await driver.close()
      const cell = (m: { opsPerSecond: number; cpuUsPerOp: number }) => `${Math.round(m.opsPerSecond).toLocaleString('en-US')} / ${m.cpuUsPerOp.toFixed(1)}`
      rows.push(`| ${driver.name} | ${cell(point)} | ${cell(concurrent)} | ${cell(tx)} |`)
    }
    console.log(`PostgreSQL clients, pool of ${POOL}, local cluster (fsync off), ops/s / client CPU µs per op:`)
    console.log('')
    console.log(`| client | point SELECT, one at a time (${N.point.toLocaleString('en-US')}) | point SELECT, ${IN_FLIGHT} in flight (${N.concurrent.toLocaleString('en-US')}) | transaction INSERT … RETURNING + UPDATE, ${IN_FLIGHT} in flight (${N.tx.toLocaleString('en-US')}) |`)
    console.log('|---|---:|---:|---:|')
    for (const row of rows) console.log(row)
  } finally {
    cluster.stop()
  }
}

await main()

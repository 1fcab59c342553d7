/**
 * The watermark protocol of bench/list-watermark.ts (the design docs/scaling-out.md "Next step" describes; not yet in
 * the product) under adversarial writers on a cluster of its own: eight writers draw one to three ids each with
 * random pauses before, between and after their draws, some after an earlier write, some inside a savepoint rolled
 * back, a quarter of them rolling back whole; two sequencers race for each pass; a reader follows the watermark. No
 * row may ever appear at or below a watermark the reader has seen, and every committed row is listed in the end. The
 * same writers drawing before their transaction takes its id (a plain `nextval`) must break it: the test can fail.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { registerList, WATERMARK_SCHEMA, watermarkPass } from '../bench/list-watermark.ts'
import { type Cluster, postgresInstalled, startCluster } from './support/postgres-cluster.ts'

if (!postgresInstalled) {
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') throw new Error('initdb/pg_ctl not found (apt-get install postgresql)')
  console.warn('postgres-list-watermark: SKIPPED, PostgreSQL is not installed (apt-get install postgresql)')
}

const SCHEMA = `${WATERMARK_SCHEMA}
  CREATE SEQUENCE items_seq CACHE 1;
  CREATE TABLE items (id int8 PRIMARY KEY, writer int NOT NULL);
  CREATE TABLE other_writes (n int NOT NULL);
  ${registerList('items', 'items_seq')}`

const WRITERS = 8
const SEQUENCER_LOCK = 42
const rolledBack = new Error('rolled back on purpose')
const pause = (maxMs: number) => Bun.sleep(Math.random() * maxMs)

type Draw = 'the transaction id first' | 'nextval first'

interface Race {
  committed: number[]
  /** Rows that appeared at or below a watermark the reader had already seen. */
  late: number
  reads: number
  through: number
  listed: number
}

/** Writers, two sequencers and a reader for `ms` (or until the first late row, with `untilLate`). */
async function race(url: string, draw: Draw, ms: number, untilLate: boolean): Promise<Race> {
  const admin = new SQL({ url, max: 1 })
  await admin.unsafe("TRUNCATE items; ALTER SEQUENCE items_seq RESTART; UPDATE list_sequencer SET through = 0, marks_through = '{}', marks_xid = '{}'")
  const drawn = draw === 'nextval first' ? "SELECT nextval('items_seq') AS id" : "SELECT trellis_sequenced_id('items_seq') AS id"
  const committed: number[] = []
  let late = 0
  let reads = 0
  const until = performance.now() + ms
  const going = () => performance.now() < until && !(untilLate && late > 0)

  const writer = async (n: number) => {
    const sql = new SQL({ url, max: 1 })
    while (going()) {
      const ids: number[] = []
      const outcome = await sql
        .begin(async (tx) => {
          await pause(2)
          if (Math.random() < 0.3) await tx.unsafe('INSERT INTO other_writes VALUES (1)')
          const draws = 1 + Math.floor(Math.random() * 3)
          for (let i = 0; i < draws; i++) {
            const inSavepoint = Math.random() < 0.15
            const take = async (on: typeof tx) => {
              const [row] = (await on.unsafe(drawn)) as { id: string }[]
              await on.unsafe('INSERT INTO items (id, writer) VALUES ($1, $2)', [row!.id, n])
              return Number(row!.id)
            }
            if (inSavepoint) {
              // Drawn and written in a savepoint that is rolled back: the id is lost, the transaction goes on.
              await tx.savepoint(async (sp) => {
                await take(sp as typeof tx)
                throw rolledBack
              }).catch((error: unknown) => {
                if (error !== rolledBack) throw error
              })
            } else {
              ids.push(await take(tx))
            }
            await pause(2)
          }
          await pause(3)
          if (Math.random() < 0.25) throw rolledBack
        })
        .then(() => 'committed' as const, (error: unknown) => {
          if (error !== rolledBack) throw error
          return 'rolled back' as const
        })
      if (outcome === 'committed') committed.push(...ids)
    }
    await sql.close()
  }

  const sequencer = async () => {
    const sql = new SQL({ url, max: 1 })
    while (going()) {
      await watermarkPass(sql, SEQUENCER_LOCK)
      await pause(2)
    }
    await sql.close()
  }

  // One statement, one snapshot: the watermark and the rows at or below the one seen before.
  const reader = async () => {
    const sql = new SQL({ url, max: 1 })
    let seenThrough = 0
    let seenCount = 0
    while (going()) {
      const [row] = (await sql.unsafe(
        `SELECT l.through::float8 AS through, (SELECT count(*) FROM items WHERE id <= $1)::int AS "atSeen", (SELECT count(*) FROM items WHERE id <= l.through)::int AS "atNow"
         FROM list_sequencer l WHERE l.list = 'items'`,
        [seenThrough],
      )) as { through: number; atSeen: number; atNow: number }[]
      reads++
      if (row!.atSeen !== seenCount) late += row!.atSeen - seenCount
      seenThrough = row!.through
      seenCount = row!.atNow
      await pause(1)
    }
    await sql.close()
  }

  await Promise.all([...Array.from({ length: WRITERS }, (_, n) => writer(n)), sequencer(), sequencer(), reader()])
  // Everything committed is listed once no transaction is open: a mark set, then settled (a few passes).
  const sql = new SQL({ url, max: 1 })
  for (let i = 0; i < 4; i++) await watermarkPass(sql, SEQUENCER_LOCK)
  const [end] = (await sql.unsafe(`SELECT l.through::float8 AS through, (SELECT count(*) FROM items WHERE id <= l.through)::int AS listed FROM list_sequencer l WHERE l.list = 'items'`)) as { through: number; listed: number }[]
  await sql.close()
  await admin.close()
  return { committed, late, reads, through: end!.through, listed: end!.listed }
}

describe.skipIf(!postgresInstalled)('the list watermark on PostgreSQL', () => {
  let cluster: Cluster
  let url: string

  beforeAll(async () => {
    cluster = startCluster()
    url = cluster.url
    const sql = new SQL({ url, max: 1 })
    await sql.unsafe(SCHEMA)
    await sql.close()
  })
  afterAll(() => cluster?.stop())

  test('drawn after the transaction id: no row ever appears below a watermark seen, every committed row is listed', async () => {
    const result = await race(url, 'the transaction id first', 4_000, false)
    console.log(`list-watermark: ${result.committed.length} rows committed, ${result.reads} reads, ${result.late} late`)
    expect(result.committed.length).toBeGreaterThan(100)
    expect(result.reads).toBeGreaterThan(100)
    expect(result.late).toBe(0)
    expect(result.listed).toBe(result.committed.length)
    expect(result.through).toBeGreaterThanOrEqual(Math.max(...result.committed))
  }, 30_000)

  test('a transaction holding an id holds the watermark back until it ends; a read-only one (a report, a pg_dump) does not', async () => {
    const sql = new SQL({ url, max: 1 })
    const write = async () => Number(((await sql.unsafe("INSERT INTO items (id, writer) VALUES (trellis_sequenced_id('items_seq'), 0) RETURNING id")) as { id: string }[])[0]!.id)
    const listedAfter = async (id: number, passes: number) => {
      for (let i = 0; i < passes; i++) await watermarkPass(sql, SEQUENCER_LOCK)
      return Number(((await sql.unsafe("SELECT through FROM list_sequencer WHERE list = 'items'")) as { through: string }[])[0]!.through) >= id
    }
    const hold = (statement: string) => {
      const other = new SQL({ url, max: 1 })
      let release = () => {}
      const ends = new Promise<void>((resolve) => (release = resolve))
      let begun = () => {}
      const started = new Promise<void>((resolve) => (begun = resolve))
      const done = other.begin('ISOLATION LEVEL REPEATABLE READ', async (tx) => {
        await tx.unsafe(statement)
        begun()
        await ends
      })
      return started.then(() => ({ end: async () => { release(); await done; await other.close() } }))
    }
    const report = await hold('SELECT count(*) FROM items')
    expect(await listedAfter(await write(), 3)).toBe(true)
    const writing = await hold('INSERT INTO other_writes VALUES (1)')
    const held = await write()
    expect(await listedAfter(held, 10)).toBe(false)
    await writing.end()
    expect(await listedAfter(held, 3)).toBe(true)
    await report.end()
    await sql.close()
  }, 30_000)

  test('drawn before the transaction has an id (plain nextval): a row appears below a watermark seen — the check catches it', async () => {
    const result = await race(url, 'nextval first', 10_000, true)
    expect(result.late).toBeGreaterThan(0)
  }, 30_000)
})

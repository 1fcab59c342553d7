/**
 * WAL checkpoints never run on a request's path (docs/operations.md "Data"): a real `trellis serve` turns SQLite's own
 * checkpoints off on its connection and checkpoints on a timer. Under sustained writes (webhook triggers, their
 * runs, note writes; localhost, bounded in time) the `-wal` file stays under 64 MB, and with the timer held back
 * it grows past what SQLite's own checkpoint (1,000 pages) would have allowed: no commit checkpointed.
 */
import { Database } from 'bun:sqlite'
import { afterEach, expect, test } from 'bun:test'
import { statSync } from 'node:fs'
import { databasePath } from '../src/db/sqlite/open.ts'
import { systemClock } from '../src/lib/clock.ts'
import { type ServeProcess, SQLITE_ONLY, sqliteOnlyDescribe, startServe, until } from './helpers.ts'
import { ordersWorkflow, reportHook, seedDataDir, tokenFor } from './support/acme.ts'
import { checkpointCounts } from './support/wal-metrics.ts'

const MB = 1024 * 1024
const cleanups: (() => void | Promise<void>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const HIGH_RATES = {
  TRELLIS_API_RATE_PER_MIN: '1000000',
  TRELLIS_API_RATE_PER_HOUR: '1000000',
  TRELLIS_API_RATE_PER_DAY: '1000000',
  TRELLIS_LOG_LEVEL: 'warn',
}

/** A served database with a two-step workflow (load, update) behind a fast webhook, and alice's token. */
async function serveSeeded(env: Record<string, string>): Promise<{ server: ServeProcess; wal: string; hook: string; token: string }> {
  const touch = ordersWorkflow('Touch', [{ type: 'load' }, { type: 'update', set: { touched: 'yes' } }], { webhook: { enabled: true, ratePerMinute: 100_000 } })
  const seeded = await seedDataDir('wal', [touch], cleanups, async (store, report) => ({
    hook: reportHook(report, 'Touch'),
    token: (await tokenFor(store, systemClock, 'alice', ['notes:read', 'notes:write', 'workflows:trigger'])).value,
  }))
  const server = await startServe({ dataDir: seeded.dataDir, cwd: seeded.cwd, env: { ...HIGH_RATES, ...env } })
  cleanups.push(async () => void (await server.stop('SIGKILL')))
  return { server, wal: `${databasePath(seeded.dataDir)}-wal`, hook: seeded.hook, token: seeded.token }
}

const sizeOf = (file: string) => {
  try {
    return statSync(file).size
  } catch {
    return 0
  }
}

/**
 * `clients` loops, each alternating a webhook trigger (a fresh record id: a run the executor then takes) and a note
 * with a message, until `stop()` says so. Every answer must be 202 or 201. Returns how many writes were answered.
 */
function writeLoad(server: ServeProcess, hook: string, token: string, clients: number, stop: () => boolean): Promise<number> {
  let answered = 0
  let sequence = 0
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  const note = JSON.stringify({ recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Load', content: `<p>${'x'.repeat(2000)}</p>` })
  const client = async () => {
    while (!stop()) {
      const trigger = await fetch(`${server.url}${hook}`, { method: 'POST', headers, body: JSON.stringify({ record_id: `wal-${sequence++}` }) })
      expect(trigger.status).toBe(202)
      await trigger.arrayBuffer()
      const created = await fetch(`${server.url}/v1/project/Acme/environment/production/notes`, { method: 'POST', headers, body: note })
      expect(created.status).toBe(201)
      await created.arrayBuffer()
      answered += 2
    }
  }
  return Promise.all(Array.from({ length: clients }, client)).then(() => answered)
}

sqliteOnlyDescribe(SQLITE_ONLY.wal, 'WAL checkpoints off the request path (a real `trellis serve`)', () => {
  test('20 s of sustained writes: the -wal file stays under 64 MB, checkpointed by the timer', async () => {
    const { server, wal, hook, token } = await serveSeeded({})
    let largest = 0
    const sampler = setInterval(() => (largest = Math.max(largest, sizeOf(wal))), 25)
    const deadline = Date.now() + 20_000
    const writes = await writeLoad(server, hook, token, 8, () => Date.now() >= deadline)
    clearInterval(sampler)
    largest = Math.max(largest, sizeOf(wal))
    const counts = await checkpointCounts(server)
    console.log(`WAL under 20 s of writes: ${writes} writes answered, largest -wal ${(largest / MB).toFixed(1)} MB, checkpoints ${JSON.stringify(counts)}`)
    expect(writes).toBeGreaterThan(1_000)
    expect(largest).toBeGreaterThan(0)
    expect(largest).toBeLessThan(64 * MB)
    // Every 250 ms for 20 s: about 80 timed checkpoints, every one of them finished (no other process reads) — PASSIVE
    // on the thread, or TRUNCATE on the server's connection while the file is past 16 MB (a fast host's writes pass it
    // often: 68 of 95 in one CI run).
    expect((counts['passive,done'] ?? 0) + (counts['truncate,done'] ?? 0)).toBeGreaterThanOrEqual(40)
    expect(counts['passive,busy'] ?? 0).toBe(0)
    // A graceful stop checkpoints and truncates: the database file alone is complete.
    expect(await server.stop('SIGTERM')).toBe(0)
    expect(sizeOf(wal)).toBe(0)
  }, 60_000)

  test('a reader of another connection that pauses between long reads: the WAL still starts over in its pauses', async () => {
    const { server, wal, hook, token } = await serveSeeded({})
    // Each of its reads holds a snapshot for 300 ms, then it pauses 150 ms: a TRUNCATE tried at a random moment finds
    // it busy two times in three, and the writes add several MB to the file during each read. The server must find
    // the pauses: a busy TRUNCATE is tried again at the next 25 ms poll. With 60 ms pauses the file reached 31–44 MB
    // here on a quiet host and 101 MB once in CI (108–160 MB when a busy TRUNCATE waited for the next 250 ms tick, as
    // before; the bench's own count of runs, every 200 ms, grew it to 600 MB that way): the retry's own latency on a
    // loaded event loop decides how short a pause it finds, so this test asks for pauses it always finds.
    const reader = new Database(wal.slice(0, -'-wal'.length), { readonly: true })
    cleanups.push(() => reader.close())
    const count = reader.query('SELECT count(*) AS n FROM runs')
    let reading = true
    const reads = (async () => {
      let n = 0
      while (reading) {
        reader.run('BEGIN')
        count.get()
        await Bun.sleep(300)
        reader.run('COMMIT')
        n++
        await Bun.sleep(150)
      }
      return n
    })()
    let largest = 0
    const sampler = setInterval(() => (largest = Math.max(largest, sizeOf(wal))), 25)
    const deadline = Date.now() + 15_000
    const writes = await writeLoad(server, hook, token, 8, () => Date.now() >= deadline)
    reading = false
    const readCount = await reads
    clearInterval(sampler)
    const counts = await checkpointCounts(server)
    console.log(`WAL beside a pausing reader: ${writes} writes, ${readCount} reads, largest -wal ${(largest / MB).toFixed(1)} MB, checkpoints ${JSON.stringify(counts)}`)
    expect(readCount).toBeGreaterThan(15)
    expect(counts['truncate,busy'] ?? 0).toBeGreaterThan(0) // the reader did get in the way
    expect(counts['truncate,done'] ?? 0).toBeGreaterThan(0)
    expect(largest).toBeLessThan(64 * MB)
  }, 60_000)

  test('with the timer held back, no commit checkpoints: the WAL grows past SQLite’s own 1,000-page checkpoint', async () => {
    const { server, wal, hook, token } = await serveSeeded({ TRELLIS_WAL_CHECKPOINT_MS: '60000' })
    let grown = false
    const load = writeLoad(server, hook, token, 4, () => grown)
    // SQLite's default would checkpoint (inside a commit) and restart the WAL at 1,000 pages of 4 KiB, about 4 MB.
    await until('the WAL to grow past 8 MB', () => (grown = sizeOf(wal) > 8 * MB), 20_000, 25)
    await load
    expect(await checkpointCounts(server)).toEqual({})
    expect(await server.stop('SIGTERM')).toBe(0)
    expect(sizeOf(wal)).toBe(0)
  }, 60_000)
})

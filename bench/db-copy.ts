/**
 * `bun bench/db-copy.ts [--notes N] [--data DIR] [--rounds R] [CHECKOUT…]`: times `trellis db copy`
 * on a seeded SQLite database (bench/seed.ts; kept in DIR and reused when it is already there) into a throw-away
 * PostgreSQL cluster with the bench's settings, a fresh database per copy. Each CHECKOUT (a directory holding
 * src/main.ts; default: this one) copies in turn, the whole sequence `rounds` times (back to back, so that a busy
 * machine slows each alike). Prints one line per copy: seconds, rows/s and the copy process's peak RSS.
 */
import { SQL } from 'bun'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { startCluster } from '../test/support/postgres-cluster.ts'
import { repoRoot } from './procs.ts'
import { seedDatabase } from './seed.ts'

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { notes: { type: 'string', default: '200000' }, data: { type: 'string', default: '/tmp/trellis-copy-bench' }, rounds: { type: 'string', default: '2' } },
  allowPositionals: true,
})
const checkouts = positionals.length > 0 ? positionals : [repoRoot]
const log = (line: string) => process.stderr.write(`${line}\n`)

if (!existsSync(join(values.data!, 'trellis.db'))) {
  const seed = seedDatabase(values.data!, { notes: Number(values.notes), records: 10_000, users: 1_000, workflows: 100 }, log)
  log(`seeded ${seed.notes} notes, ${seed.messages} messages in ${(seed.timings.totalMs / 1000).toFixed(1)} s`)
}

const cluster = startCluster({ fsync: true, settings: { synchronous_commit: 'off', shared_buffers: '256MB', max_connections: '200' } })
const admin = new SQL({ url: cluster.url, max: 1 })
let copies = 0
try {
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const checkout of checkouts) {
      const name = `copy_${++copies}`
      await admin.unsafe(`CREATE DATABASE ${name}`)
      const url = cluster.url.replace(/\/postgres$/, `/${name}`)
      const started = performance.now()
      const copy = Bun.spawnSync([process.execPath, join(checkout, 'src/main.ts'), 'db', 'copy', '--from', values.data!, '--to', url], { cwd: checkout, stdout: 'pipe', stderr: 'pipe' })
      const seconds = (performance.now() - started) / 1000
      if (copy.exitCode !== 0) throw new Error(`db copy failed in ${checkout}: ${copy.stderr.toString()}`)
      const rows = Number(/copied (\d+) rows/.exec(copy.stdout.toString())?.[1])
      const peakMb = (copy.resourceUsage?.maxRSS ?? 0) / 1024 / 1024
      console.log(`round ${round} ${checkout}: ${rows} rows in ${seconds.toFixed(1)} s, ${Math.round(rows / seconds)} rows/s, peak RSS ${peakMb.toFixed(0)} MB`)
      await admin.unsafe(`DROP DATABASE ${name}`)
    }
  }
} finally {
  await admin.close()
  cluster.stop()
}

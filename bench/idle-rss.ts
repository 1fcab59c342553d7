/**
 * `bun bench/idle-rss.ts --data DIR [--binary dist/trellis] [--starts 7] [--vs OTHER_BINARY] [--smaps]`: the idle
 * resident set of `trellis serve`, as `npm run bench` reads it (VmRSS one second after the first 200 on `/healthz`,
 * executor off, the binary evicted from the page cache first), over several starts; with `--vs`, the two binaries
 * started in turn (A, B, A, B…) on the same data directory, so that the machine's noise falls on both. `--smaps`
 * prints the largest mappings of the last start.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { evictFromPageCache, memoryOf, repoRoot, startServer } from './procs.ts'

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    binary: { type: 'string', default: join(repoRoot, 'dist/trellis') },
    vs: { type: 'string' },
    starts: { type: 'string', default: '7' },
    smaps: { type: 'boolean', default: false },
  },
})
if (!values.data) throw new Error('--data DIR is required (a seeded data directory, e.g. from npm run bench -- --keep)')
const dataDir = values.data
const binaries = [values.binary, ...(values.vs ? [values.vs] : [])]
const starts = Number(values.starts)
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)

/** VmRSS and its parts (anonymous, file-backed) one second after the server answered. */
async function idle(binary: string, smaps: boolean): Promise<{ rss: number; anon: number; file: number; startMs: number }> {
  evictFromPageCache(binary) // as npm run bench does before its idle start
  const server = await startServer({
    name: 'trellis',
    command: (port) => [binary, 'serve', '--host', '127.0.0.1', '--port', String(port), '--data', dataDir],
    env: { TRELLIS_EXECUTOR_CONCURRENCY: '0' },
    stderrFile: '/dev/null',
  })
  try {
    await Bun.sleep(1000)
    if (smaps) printSmaps(server.pid)
    const { rss, anon, file } = memoryOf(server.pid)
    return { rss, anon, file, startMs: server.startMs }
  } finally {
    await server.stop()
  }
}

/** The mappings holding the most resident memory, by name (anonymous ones together). */
function printSmaps(pid: number) {
  const bySource = new Map<string, number>()
  let name = ''
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head) name = head[1] || '[anonymous]'
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss) bySource.set(name, (bySource.get(name) ?? 0) + Number(rss[1]) * 1024)
  }
  for (const [source, bytes] of [...bySource].sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log(`  ${mb(bytes).padStart(7)} MB  ${source}`)
}

const samples = new Map<string, Awaited<ReturnType<typeof idle>>[]>(binaries.map((b) => [b, []]))
for (let i = 0; i < starts; i++) for (const binary of binaries) samples.get(binary)!.push(await idle(binary, values.smaps && i === starts - 1))
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
for (const [binary, runs] of samples) {
  console.log(
    `${binary}: idle VmRSS median ${mb(median(runs.map((r) => r.rss)))} MB (anonymous ${mb(median(runs.map((r) => r.anon)))}, file ${mb(median(runs.map((r) => r.file)))}) ` +
      `over ${runs.length} starts [${runs.map((r) => mb(r.rss)).join(', ')}]; start ${median(runs.map((r) => r.startMs)).toFixed(0)} ms`,
  )
}

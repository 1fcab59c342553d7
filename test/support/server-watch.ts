/**
 * A watcher of a running `serve`, in a process of its own so that the load a test generates cannot slow it down:
 * `bun test/support/server-watch.ts <url> <pid> <intervalMs>` asks `<url>/healthz` at a steady rate (one ask every
 * interval, the next one as soon as the previous answered if it answered late) and reads the server's resident memory
 * (VmRSS of /proc/<pid>/status) at the same rate. When its stdin closes it prints one JSON line, a `Watch`, and exits.
 * Start it through `watchServer` (test/support/overload.ts).
 */
import { readFileSync } from 'node:fs'

export interface Watch {
  /** Client-side wait of each /healthz ask, in ms, in order. */
  healthzMs: number[]
  /** Statuses other than 200 (and failed asks, as 0) /healthz answered. */
  healthzFailures: number[]
  /** The server's VmRSS at each tick, in KiB. */
  rssKiB: number[]
}

function rssKiB(pid: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1] ?? Number.NaN)
}

if (import.meta.main) {
  const [url, pid, interval] = process.argv.slice(2)
  const intervalMs = Number(interval)
  if (!url || !pid || !(intervalMs > 0)) throw new Error('usage: server-watch.ts <url> <pid> <intervalMs>')
  const watch: Watch = { healthzMs: [], healthzFailures: [], rssKiB: [] }
  let watching = true
  const done = (async () => {
    for await (const _ of Bun.stdin.stream()) {
      // the test writes nothing: the end of stdin is the signal
    }
    watching = false
  })()
  let next = performance.now()
  while (watching) {
    watch.rssKiB.push(rssKiB(pid))
    const started = performance.now()
    try {
      const answer = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) })
      await answer.arrayBuffer()
      if (answer.status !== 200) watch.healthzFailures.push(answer.status)
    } catch {
      watch.healthzFailures.push(0)
    }
    watch.healthzMs.push(performance.now() - started)
    next += intervalMs
    const wait = next - performance.now()
    if (wait > 0) await Promise.race([Bun.sleep(wait), done])
    else next = performance.now()
  }
  process.stdout.write(`${JSON.stringify(watch)}\n`)
}

/**
 * What open run event streams (SSE) cost the server. On a running Trellis (executor on, heartbeats every
 * second — fifteen times the default's rate, so the idle figure bounds it), it measures the server's resident memory
 * and CPU while idle, then opens `streams` streams on the environment (bare sockets: `fetch` holds at most 256), waits
 * for every stream's first heartbeat, and measures them again while the streams sit idle, beating; then one webhook
 * run's events reach every stream (fan-out: trigger → the last stream has the run's last event). Asserts nothing.
 */
import { cpuTimeUs, memoryOf, post, type Server } from './procs.ts'
import type { SeedResult } from './seed.ts'
import { rawStream } from '../test/support/sse.ts'

export interface EventStreamsResult {
  streams: number
  heartbeatSeconds: number
  idleSeconds: number
  /** Seconds to open every stream (100 at a time) and see each one's first heartbeat. */
  openSeconds: number
  rssBeforeBytes: number
  rssWithStreamsBytes: number
  /** The server's CPU over the idle window, as a share of one core: without streams, and with them all beating. */
  idleCpuBefore: number
  idleCpuWithStreams: number
  /** From the trigger's 202 to the run's last event on the last of the streams. */
  fanOutMs: number
}

export async function measureEventStreams(options: {
  server: Server
  seed: SeedResult
  streams: number
  heartbeatSeconds: number
  idleSeconds: number
  log: (line: string) => void
}): Promise<EventStreamsResult> {
  const { server, seed } = options
  const path = `/v1/project/${seed.project}/environment/production/workflow-runs/events`
  const idleCpu = async () => {
    const before = cpuTimeUs(server.pid)
    await Bun.sleep(options.idleSeconds * 1000)
    return (cpuTimeUs(server.pid) - before) / (options.idleSeconds * 1e6)
  }
  await Bun.sleep(1000)
  const rssBeforeBytes = memoryOf(server.pid).rss
  const idleCpuBefore = await idleCpu()

  const opening = performance.now()
  const streams = []
  for (let opened = 0; opened < options.streams; opened += 100) {
    streams.push(...(await Promise.all(Array.from({ length: Math.min(100, options.streams - opened) }, () => rawStream(server.url, path, seed.adminToken)))))
  }
  await Promise.all(streams.map((stream) => stream.until(': heartbeat', 30_000)))
  const openSeconds = (performance.now() - opening) / 1000
  const refused = streams.filter((stream) => !stream.text().startsWith('HTTP/1.1 200'))
  if (refused.length > 0) throw new Error(`${refused.length} event streams refused: ${refused[0]!.text().slice(0, 300)}`)
  const rssWithStreamsBytes = memoryOf(server.pid).rss
  const idleCpuWithStreams = await idleCpu()
  options.log(`  ${options.streams} streams open in ${openSeconds.toFixed(1)} s; RSS +${((rssWithStreamsBytes - rssBeforeBytes) / 2 ** 20).toFixed(1)} MB; idle CPU ${(idleCpuBefore * 100).toFixed(1)} % → ${(idleCpuWithStreams * 100).toFixed(1)} %`)

  const recordId = seed.productionRecords[seed.workflowCollections[0]!]![0]!
  const triggered = performance.now()
  const response = await post(server.url, seed.webhookPaths[0]!, recordId, { authorization: `Bearer ${seed.adminToken}` })
  if (response.status !== 202) throw new Error(`event streams: the trigger answered ${response.status} ${await response.text()}`)
  await Promise.all(streams.map((stream) => stream.until(/event: run\.(succeeded|failed)/, 30_000)))
  const fanOutMs = performance.now() - triggered
  for (const stream of streams) stream.close()
  return { streams: options.streams, heartbeatSeconds: options.heartbeatSeconds, idleSeconds: options.idleSeconds, openSeconds, rssBeforeBytes, rssWithStreamsBytes, idleCpuBefore, idleCpuWithStreams, fanOutMs }
}

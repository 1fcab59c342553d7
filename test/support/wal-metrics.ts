/** What a running `serve` says of its WAL checkpoints on /metrics (test/wal-checkpoints.test.ts, test/litestream.test.ts). */
import type { ServeProcess } from '../helpers.ts'

/** The `trellis_wal_checkpoints_total` samples of /metrics, `mode,outcome` → count. */
export async function checkpointCounts(server: ServeProcess): Promise<Record<string, number>> {
  const text = await (await fetch(`${server.url}/metrics`)).text()
  const counts: Record<string, number> = {}
  for (const [, mode, outcome, value] of text.matchAll(/^trellis_wal_checkpoints_total\{mode="(\w+)",outcome="(\w+)"\} (\d+)$/gm)) counts[`${mode},${outcome}`] = Number(value)
  return counts
}

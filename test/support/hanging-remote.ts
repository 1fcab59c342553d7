/**
 * A destination for `http` steps on loopback that records every call (the run it came from, its path) and lets the
 * first call of each run to `/hang` hang until its caller dies or gives up (at most `hangMs`): a run caught mid-step,
 * its lease held, for crash and restart tests. Every other call answers 200 `{ok: true}` at once.
 */
export interface HangingRemote {
  url: string
  hits: { runId: string | null; path: string }[]
  /** Calls made to `/hang` by run `runId`. */
  hangsOf(runId: string): number
  stop(): void
}

export function hangingRemote(hangMs = 20_000): HangingRemote {
  const hits: HangingRemote['hits'] = []
  const hangsOf = (runId: string) => hits.filter((h) => h.runId === runId && h.path === '/hang').length
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname
      const runId = req.headers.get('x-trellis-run-id')
      hits.push({ runId, path })
      if (path === '/hang' && runId !== null && hangsOf(runId) === 1) {
        await Promise.race([Bun.sleep(hangMs), new Promise((resolve) => req.signal.addEventListener('abort', resolve))])
      }
      return Response.json({ ok: true })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, hits, hangsOf, stop: () => server.stop(true) }
}

/**
 * Baseline (a): the HTTP ceiling. A bare `Bun.serve` answering every request with 202 and a JSON body of the
 * same size as Trellis's webhook answer (`{"runId":"<uuid v7>"}`). Informational: the generator saturates near it.
 * Usage: bun bench/baselines/bare.ts <port>
 */
const port = Number(process.argv[2] ?? 0)
const body = JSON.stringify({ runId: '019aa5c4-2d3e-7b1f-9c3a-5e6f7a8b9c0d' })

const server = Bun.serve({
  hostname: '127.0.0.1',
  port,
  fetch: () => new Response(body, { status: 202, headers: { 'content-type': 'application/json' } }),
})
console.log(`listening ${server.port}`)

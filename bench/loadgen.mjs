// The load generator, run by Node in its own process: autocannon with a warm-up, then one bounded measured run.
// Usage: node bench/loadgen.mjs '<json spec>'  → prints one JSON summary line on stdout.
// spec: { url, connections, duration, warmup, maxRequests, headers, expect, rate?, requests }
// requests: { kind: 'get', paths: [...] }                         GET, the paths in turn
//         | { kind: 'unique', paths: [...], prefix }              POST {"record_id": "<prefix>-<n>"} to paths[n % len]
//         | { kind: 'fixed', paths: [...], recordIds: [...] }     POST {"record_id": recordIds[n % len]} to paths[n % len]
import autocannon from 'autocannon'

const spec = JSON.parse(process.argv[2])

function requestsFor(phase) {
  const r = spec.requests
  let n = 0
  if (r.kind === 'get') {
    return [{ method: 'GET', setupRequest: (req) => ({ ...req, method: 'GET', path: r.paths[n++ % r.paths.length] }) }]
  }
  const headers = { ...spec.headers, 'content-type': 'application/json' }
  return [
    {
      method: 'POST',
      headers,
      setupRequest: (req) => {
        const i = n++
        const recordId = r.kind === 'unique' ? `${r.prefix}-${phase}-${i}` : r.recordIds[i % r.recordIds.length]
        return { ...req, method: 'POST', headers, path: r.paths[i % r.paths.length], body: JSON.stringify({ record_id: recordId }) }
      },
    },
  ]
}

function run(phase, duration, onResponse) {
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    duration,
    maxOverallRequests: spec.maxRequests,
    ...(spec.rate ? { overallRate: spec.rate } : {}),
    headers: spec.headers,
    timeout: 10,
    requests: requestsFor(phase),
  })
  if (onResponse) instance.on('response', onResponse)
  return instance
}

// autocannon's own histogram has whole-millisecond resolution: keep every response time (ms, float) instead.
const times = new Float64Array(spec.maxRequests + spec.connections)
let count = 0
const percentile = (sorted, p) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))])

if (spec.warmup > 0) await run('w', spec.warmup)
const result = await run('m', spec.duration, (_client, _status, _bytes, ms) => {
  if (count < times.length) times[count++] = ms
})
const sorted = times.subarray(0, count).sort()
const round = (ms) => Math.round(ms * 100) / 100
const codes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, v]) => [code, Number(v.count)]))
const total = Object.values(codes).reduce((a, b) => a + b, 0)
const expected = codes[String(spec.expect)] ?? 0
console.log(
  JSON.stringify({
    generator: 'autocannon',
    connections: result.connections,
    duration: result.duration,
    responses: total,
    // In flight when the run ended (a starved server leaves them all unanswered).
    unanswered: Math.max(0, (result.requests.sent ?? total) - total - result.errors - result.timeouts),
    rps: total / result.duration,
    latency: {
      p50: round(percentile(sorted, 50)),
      p90: round(percentile(sorted, 90)),
      p99: round(percentile(sorted, 99)),
      max: round(sorted[sorted.length - 1] ?? 0),
      mean: round(sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length)),
    },
    statusCodes: codes,
    unexpected: total - expected + result.errors + result.timeouts,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    bytesPerResponse: total > 0 ? result.throughput.total / total : 0,
  }),
)

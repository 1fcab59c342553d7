/**
 * OpenTelemetry traces, end to end with real `trellis serve` processes (docs/tracing.md): an OTLP/HTTP receiver in the
 * test (127.0.0.1, the JSON encoding the exporter sends) gets the webhook call's request span — a child of the
 * caller's `traceparent` —, the run's span in a trace of its own linked to it, and the step spans under the run; an
 * `http` step's destination sees the step's `traceparent`; the link survives a restart between trigger and execution;
 * no attribute holds the webhook URL's signature or the token; a task step spans from its opening to its decision; a
 * callback delivery is a span of its run's trace and sends its `traceparent`. Both stores, and the compiled binary. Off
 * (no endpoint), nothing is sent and no log line carries a trace id.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { join } from 'node:path'
import pkg from '../package.json' with { type: 'json' }
import { loadInstanceSecret } from '../src/lib/secret.ts'
import { systemClock } from '../src/lib/clock.ts'
import { tracingWanted } from '../src/lib/tracing.ts'
import { bearer, processEnv, repoRoot, type ServeProcess, startServe, tempDir, testEnv, type TestEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, reportHook, tokenFor } from './support/acme.ts'

/** A span as the OTLP JSON encoding carries it (ids in hex). */
interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  startTimeUnixNano: string
  endTimeUnixNano: string
  attributes?: { key: string; value: Record<string, unknown> }[]
  links?: { traceId: string; spanId: string }[]
  status?: { code?: number; message?: string }
}

/** The OTLP/HTTP receiver: every span posted to /v1/traces, with its resource's service name. */
function otlpReceiver() {
  const spans: (OtlpSpan & { service: string })[] = []
  const bodies: string[] = []
  /** The `x-collector-key` header of each export (OTEL_EXPORTER_OTLP_HEADERS). */
  const keys: (string | null)[] = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      if (new URL(request.url).pathname !== '/v1/traces' || request.method !== 'POST') return new Response(null, { status: 404 })
      expect(request.headers.get('content-type')).toContain('application/json')
      const text = await request.text()
      bodies.push(text)
      keys.push(request.headers.get('x-collector-key'))
      const body = JSON.parse(text) as { resourceSpans: { resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: { spans: OtlpSpan[] }[] }[] }
      for (const resourceSpans of body.resourceSpans) {
        const service = String(resourceSpans.resource.attributes?.find((a) => a.key === 'service.name')?.value.stringValue)
        for (const scope of resourceSpans.scopeSpans) for (const span of scope.spans) spans.push({ ...span, service })
      }
      return Response.json({})
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, spans, bodies, keys, stop: () => server.stop(true) }
}

/** The destination of `http` steps and callbacks: the `traceparent` each call carried, and the callbacks' bodies. */
function destination() {
  const traceparents: (string | null)[] = []
  const callbacks: { traceparent: string | null; body: { type: string; data: Record<string, unknown> } }[] = []
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const traceparent = request.headers.get('traceparent')
      if (new URL(request.url).pathname === '/callback') callbacks.push({ traceparent, body: (await request.json()) as (typeof callbacks)[number]['body'] })
      else traceparents.push(traceparent)
      return Response.json({ ok: true })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, traceparents, callbacks, stop: () => server.stop(true) }
}

const attribute = (span: OtlpSpan, key: string): unknown => {
  const value = span.attributes?.find((a) => a.key === key)?.value
  return value === undefined ? undefined : (value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue)))
}

const receiver = otlpReceiver()
const remote = destination()
const servers: ServeProcess[] = []
let env: TestEnv
let hook: string
let token: string
let admin: string
let approver: string
const cwd = tempDir('trellis-tracing-cwd-')

const traced = ordersWorkflow('Traced', [
  { type: 'update', name: 'mark', set: { status: 'shipped' } },
  { type: 'http', name: 'tell erp', method: 'POST', url: `${remote.url}/orders/{{record.id}}`, body: { order: '{{record.id}}' }, retries: 0 },
])

/** A task (opened, then decided by a person) and a completion callback. */
const asking = ordersWorkflow('Traced task', [
  { type: 'task', name: 'approve', title: 'Ship {{record.id}}?', assignees: { teams: ['Billing'] } },
  { type: 'update', name: 'mark', set: { status: 'approved' } },
])

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  acmeProject(document).workflows!.push(traced, asking)
  const report = await applyAcme({ store: env.store, clock: systemClock, secret: loadInstanceSecret(env.dataDir), baseUrl: 'http://127.0.0.1' }, document)
  hook = reportHook(report, 'Traced')
  token = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
  admin = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
  approver = (await tokenFor(env.store, systemClock, 'dave', ['all'])).value
}, 120_000) // PostgreSQL: the shared cluster may start here

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop('SIGKILL')))
  receiver.stop()
  remote.stop()
  env?.cleanup()
  cwd.cleanup()
})

const tracingEnv = (extra: Record<string, string> = {}) => ({
  ...processEnv(env),
  TRELLIS_HTTP_ALLOW: '127.0.0.1',
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_SERVICE_NAME: 'trellis-under-test',
  OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=k-123',
  OTEL_BSP_SCHEDULE_DELAY: '50',
  ...extra,
})

async function serve(extra: Record<string, string> = {}, binary?: string): Promise<ServeProcess> {
  const server = await startServe({ dataDir: env.dataDir, cwd: cwd.path, env: tracingEnv(extra), timeoutMs: 30_000, binary })
  servers.push(server)
  return server
}

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'

async function trigger(server: ServeProcess, recordId: string): Promise<string> {
  const answer = await fetch(`${server.url}${hook}?note=secret-query-value`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json', traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` },
    body: JSON.stringify({ record_id: recordId }),
  })
  expect(answer.status).toBe(202)
  return ((await answer.json()) as { runId: string }).runId
}

const runTraceId = (runId: string) => runId.replaceAll('-', '')
const spansOfTrace = (traceId: string) => receiver.spans.filter((span) => span.traceId === traceId)

/** The webhook call's request span (a child of the caller's span) and the run's trace: its root and its steps. */
async function traceOf(runId: string) {
  const run = await until('the run span', () => spansOfTrace(runTraceId(runId)).find((span) => span.name === 'run Traced'), 20_000)
  const steps = await until('both step spans', () => {
    const found = spansOfTrace(runTraceId(runId)).filter((span) => span.name.startsWith('step '))
    return found.length === 2 ? found : null
  })
  return { run, steps }
}

/** No span attribute, name or status holds the webhook URL's signature, the token or a query value. */
function expectNoSecrets(): void {
  const signature = hook.split('.').pop()!
  expect(signature.length).toBeGreaterThan(10)
  for (const body of receiver.bodies) {
    expect(body).not.toContain(signature)
    expect(body).not.toContain(token)
    expect(body).not.toContain('secret-query-value')
    expect(body).not.toContain(hook)
  }
}

test('tracing is on only when an OTLP endpoint is named, and OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turn it off', () => {
  expect(tracingWanted({})).toBe(false)
  expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBe(false)
  expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true)
  expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true)
  expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' })).toBe(false)
  expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'false' })).toBe(true)
  expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false)
})

test('a webhook call with traceparent: its request span under the caller, a run trace linked to it, step spans under the run, traceparent sent out, ids in the log', async () => {
  const server = await serve()
  const runId = await trigger(server, 'ord_1001')
  const { run, steps } = await traceOf(runId)
  const request = await until('the request span', () => receiver.spans.find((span) => span.traceId === CALLER_TRACE && span.kind === 2))

  // The request span: a server span under the caller's, named by the route template, never the path.
  expect(request.parentSpanId).toBe(CALLER_SPAN)
  expect(request.name).toBe('POST /v1/hooks/:token')
  expect(attribute(request, 'http.route')).toBe('/v1/hooks/:token')
  expect(attribute(request, 'http.request.method')).toBe('POST')
  expect(attribute(request, 'http.response.status_code')).toBe(202)
  expect(request.service).toBe('trellis-under-test')
  // Every export carried the configured header.
  expect(new Set(receiver.keys)).toEqual(new Set(['k-123']))

  // The run: a trace of its own (its id), its root span linked to the request span, spanning from the trigger.
  expect(run.parentSpanId ?? '').toBe('')
  expect(run.links).toEqual([expect.objectContaining({ traceId: CALLER_TRACE, spanId: request.spanId })])
  expect(attribute(run, 'trellis.run.id')).toBe(runId)
  expect(attribute(run, 'trellis.run.status')).toBe('succeeded')
  expect(attribute(run, 'trellis.run.trigger')).toBe('webhook')
  expect(BigInt(run.startTimeUnixNano)).toBeLessThanOrEqual(BigInt(steps[0]!.startTimeUnixNano))

  // The steps, children of the run's span, in order.
  const byName = Object.fromEntries(steps.map((span) => [span.name, span]))
  for (const step of steps) {
    expect(step.parentSpanId).toBe(run.spanId)
    expect(attribute(step, 'trellis.step.status')).toBe('succeeded')
  }
  expect(attribute(byName['step mark']!, 'trellis.step.type')).toBe('update')
  expect(attribute(byName['step tell erp']!, 'trellis.step.type')).toBe('http')
  // The database's time: one span per step group's commit, under the run.
  const commits = spansOfTrace(runTraceId(runId)).filter((span) => span.name === 'commit steps')
  expect(commits.length).toBeGreaterThanOrEqual(1)
  for (const commit of commits) expect(commit.parentSpanId).toBe(run.spanId)

  // The http step's destination saw the step's span as the parent: the run's trace goes on there.
  const sent = remote.traceparents.at(-1)!
  expect(sent).toBe(`00-${runTraceId(runId)}-${byName['step tell erp']!.spanId}-01`)

  // The request's log line carries its trace and span ids.
  const requestLine = server.stdout().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
    .find((line) => line.msg === 'request' && line.status === 202)
  expect(requestLine).toMatchObject({ trace_id: CALLER_TRACE, span_id: request.spanId })
  expectNoSecrets()
  expect(await server.stop()).toBe(0)
}, 60_000)

test('across a restart between trigger and execution, the run span still links to the trigger\'s request span', async () => {
  // The first server queues the run but runs nothing (no executor); it stops; the second one executes it.
  // Its batch processor would wait a minute: only the graceful stop's flush can send its spans.
  const first = await serve({ TRELLIS_EXECUTOR_CONCURRENCY: '0', OTEL_BSP_SCHEDULE_DELAY: '60000' })
  const seen = receiver.spans.length
  const runId = await trigger(first, 'ord_1002')
  expect(await first.stop()).toBe(0)
  // Its request span was exported by the graceful stop, before the process ended; the run has no span yet.
  const request = receiver.spans.slice(seen).find((span) => span.traceId === CALLER_TRACE && span.kind === 2)!
  expect(request).toBeDefined()
  expect(spansOfTrace(runTraceId(runId))).toEqual([])
  const second = await serve()
  const { run, steps } = await traceOf(runId)
  expect(run.links).toEqual([expect.objectContaining({ traceId: CALLER_TRACE, spanId: request.spanId })])
  for (const step of steps) expect(step.parentSpanId).toBe(run.spanId)
  expect(remote.traceparents.at(-1)).toStartWith(`00-${runTraceId(runId)}-`)
  expectNoSecrets()
  expect(await second.stop()).toBe(0)
}, 60_000)

test('a task step spans from its opening to its decision; a callback delivery is a span of the run\'s trace and sends its traceparent', async () => {
  const server = await serve()
  const production = '/v1/project/Acme/environment/production'
  const endpoint = await fetch(`${server.url}${production}/team/Support/workflows/${encodeURIComponent('Traced task')}/callbacks`, {
    method: 'POST',
    headers: { ...bearer(admin), 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${remote.url}/callback`, events: ['task.opened', 'workflow_run.succeeded'] }),
  })
  expect(endpoint.status).toBe(201)
  const started = await fetch(`${server.url}${production}/workflow-runs`, {
    method: 'POST',
    headers: { ...bearer(admin), 'content-type': 'application/json' },
    body: JSON.stringify({ workflowName: 'Traced task', teamName: 'Support', recordId: 'ord_1003' }),
  })
  expect(started.status).toBe(202)
  const runId = ((await started.json()) as { runId: string }).runId
  const opened = await until('task.opened to arrive', () => remote.callbacks.find((c) => c.body.type === 'task.opened'))
  const taskId = (opened.body.data as { id: string }).id
  await Bun.sleep(300) // the task is open a while: its span is that long
  const decided = await fetch(`${server.url}/v1/tasks/${taskId}/decisions`, {
    method: 'POST',
    headers: { ...bearer(approver), 'content-type': 'application/json' },
    body: JSON.stringify({ decision: 'approve' }),
  })
  expect(decided.status).toBe(200)
  const run = await until('the run span', () => spansOfTrace(runTraceId(runId)).find((span) => span.name === 'run Traced task'))
  // The run was started by an API call: linked to that request's span.
  const request = receiver.spans.find((span) => span.spanId === run.links?.[0]?.spanId)!
  expect(request.name).toBe('POST /v1/project/:projectName/environment/:environmentName/workflow-runs')
  const task = spansOfTrace(runTraceId(runId)).find((span) => span.name === 'step approve')!
  expect(task.parentSpanId).toBe(run.spanId)
  expect(attribute(task, 'trellis.step.type')).toBe('task')
  // One span, from the opening to the decision (not one per execution of the step).
  expect(spansOfTrace(runTraceId(runId)).filter((span) => span.name === 'step approve')).toHaveLength(1)
  expect(Number(BigInt(task.endTimeUnixNano) - BigInt(task.startTimeUnixNano)) / 1e6).toBeGreaterThanOrEqual(300)

  // The callbacks carried a traceparent in the run's trace, whose span is the delivery's (a child of the run's span).
  const succeeded = await until('workflow_run.succeeded to arrive', () => remote.callbacks.find((c) => c.body.type === 'workflow_run.succeeded'))
  for (const callback of [opened, succeeded]) {
    const [, traceId, spanId] = callback.traceparent!.split('-')
    expect(traceId).toBe(runTraceId(runId))
    const delivery = await until('the delivery span', () => receiver.spans.find((span) => span.spanId === spanId))
    expect(delivery.name).toBe('callback delivery')
    expect(delivery.parentSpanId).toBe(run.spanId)
    expect(attribute(delivery, 'http.response.status_code')).toBe(200)
  }
  expectNoSecrets()
  expect(await server.stop()).toBe(0)
}, 60_000)

test('OTEL_TRACES_SAMPLER=always_off: nothing is exported, and the http step still passes the run\'s trace on, not sampled', async () => {
  const server = await serve({ OTEL_TRACES_SAMPLER: 'always_off' })
  const seen = receiver.spans.length
  const runId = await trigger(server, 'ord_1003')
  await until('the run to end', async () => {
    const answer = await fetch(`${server.url}/v1/workflow-runs/${runId}`, { headers: bearer(token) })
    return ((await answer.json()) as { status: string }).status === 'succeeded'
  })
  expect(remote.traceparents.at(-1)).toMatch(new RegExp(`^00-${runTraceId(runId)}-[0-9a-f]{16}-00$`))
  expect(await server.stop()).toBe(0)
  expect(receiver.spans.length).toBe(seen)
}, 60_000)

test('off (no OTLP endpoint): no span is sent and no log line carries a trace id', async () => {
  const before = receiver.bodies.length
  const server = await serve({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })
  const runId = await trigger(server, 'ord_1003')
  await until('the run to end', async () => {
    const answer = await fetch(`${server.url}/v1/workflow-runs/${runId}`, { headers: bearer(token) })
    return ((await answer.json()) as { status: string }).status === 'succeeded'
  })
  expect(remote.traceparents.at(-1)).toBeNull()
  expect(await server.stop()).toBe(0)
  expect(server.stdout()).not.toContain('trace_id')
  expect(receiver.bodies.length).toBe(before)
}, 60_000)

test('the compiled binary exports spans too (the SDK is bundled, loaded on demand)', async () => {
  const built = process.env.TRELLIS_TEST_BINARY
  const dir = tempDir('trellis-tracing-binary-')
  try {
    let binary = built
    if (!binary) {
      binary = join(dir.path, 'trellis')
      const build = pkg.scripts.build.replace('dist/trellis', binary).split(' ')
      const proc = Bun.spawn([process.execPath, ...build.slice(1)], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
      expect(await proc.exited).toBe(0)
    }
    const server = await serve({ OTEL_SERVICE_NAME: 'trellis-binary' }, binary)
    const runId = await trigger(server, 'ord_1001')
    const { run } = await traceOf(runId)
    expect(run.service).toBe('trellis-binary')
    expect(await server.stop()).toBe(0)
  } finally {
    dir.cleanup()
  }
}, 180_000)

/**
 * OpenTelemetry traces (docs/tracing.md), off by default. This module is the whole cost of tracing when it is off:
 * every entry point checks one module variable and does nothing more. The SDK (./tracing-sdk.ts, the OpenTelemetry
 * packages) is imported only by `startTracing`, when the standard `OTEL_*` variables turn tracing on.
 *
 * What the rest of Trellis sees is this small face, never the OpenTelemetry API: a span is a handle that ends, and a
 * trace context crosses process and database boundaries as its W3C `traceparent` text (stored on a run, sent on an
 * `http` step's call and on a callback delivery).
 */
import type { Logger } from './logger.ts'

/** A span under way: its `traceparent` (for a child elsewhere, or a call out) and its end. */
export interface SpanHandle {
  readonly traceparent: string
  /** Ends it at `at` (epoch ms; default now); `error` marks it failed with that description. */
  end(outcome?: { error?: string; attributes?: SpanAttributes }, at?: number): void
}

export type SpanAttributes = Record<string, string | number | boolean>

/** What a run's trace needs to know of the run (a `runs` row as the queue hands it over). */
export interface TracedRun {
  id: string
  /** Epoch µs. */
  created_at: number
  trigger: string
  trace_context: string | null
}

/**
 * A run's trace: its own trace (the run's id is its trace id, so every execution of the run, on any instance and
 * after any restart, lands in the same trace), whose root span — the run — is recorded when the run ends, linked to
 * the span that started it. Its steps and database commits are children of that root.
 */
export interface RunTrace {
  readonly traceparent: string
  /** A step's span, started at `startedAt` (epoch ms). */
  step(name: string, type: string, index: number, startedAt: number): SpanHandle
  /** Another child of the run (a group's commit), started now. */
  child(name: string, attributes?: SpanAttributes): SpanHandle
  /** Records the run's root span (named by its workflow): from the run's creation to `at`. */
  finish(workflowName: string, status: 'succeeded' | 'failed', error: string | null, at: number): void
  /** `fn` with the run's context current: log lines written meanwhile carry its trace id. */
  within<T>(fn: () => T): T
}

/** What ./tracing-sdk.ts implements. */
export interface Tracer {
  /** `handle` inside the request's span (its parent the inbound `traceparent`, if any); the span ends with the answer. */
  request(request: Request, handle: () => Promise<Response>): Promise<Response>
  /** The route template the request matched: the span's name and `http.route`. */
  route(request: Request, route: string): void
  /** The current span's ids, for a log line. */
  logFields(): { trace_id: string; span_id: string } | undefined
  /** The current span's `traceparent` (a request's, when a run is queued from it). */
  currentTraceparent(): string | null
  run(run: TracedRun): RunTrace
  /** The `traceparent` of a run's root span (computed from its id: see ./tracing-sdk.ts `runRoot`). */
  runTraceparent(runId: string): string
  /** A span of its own (a callback delivery), a child of `parent` (a `traceparent`) when given, else a new trace. */
  span(name: string, parent: string | null, attributes: SpanAttributes): SpanHandle
  /** Exports what is still buffered, then stops. */
  shutdown(): Promise<void>
}

let tracer: Tracer | null = null

/**
 * On when an OTLP endpoint is configured — `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` not
 * empty — unless `OTEL_SDK_DISABLED` is `true` or `OTEL_TRACES_EXPORTER` is `none`.
 */
export function tracingWanted(env: Record<string, string | undefined>): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return false
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim())
}

/** Starts tracing when `env` asks for it (`tracingWanted`), loading the SDK then; answers whether it is on. */
export async function startTracing(env: Record<string, string | undefined>, logger: Logger): Promise<boolean> {
  if (tracer !== null || !tracingWanted(env)) return tracer !== null
  const { createTracer } = await import('./tracing-sdk.ts')
  tracer = createTracer(env, logger)
  return true
}

/**
 * Where the spans go, for the start's log line: the traces URL the exporter posts to, without credentials or query.
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`.)
 */
export function otlpTracesEndpoint(env: Record<string, string | undefined>): string {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim()
  const text = own || `${(env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '').trim().replace(/\/+$/, '')}/v1/traces`
  try {
    const url = new URL(text)
    return `${url.origin}${url.pathname}`
  } catch {
    return '(not a URL)'
  }
}

/** How long a graceful stop waits for the last spans to be exported (within `serve`'s shutdown budget). */
const FLUSH_BUDGET_MS = 1_500

/** Exports the spans still buffered (bounded: an unreachable collector does not hold the stop) and turns tracing off. */
export async function stopTracing(): Promise<void> {
  const stopping = tracer
  tracer = null
  if (stopping !== null) await Promise.race([stopping.shutdown().catch(() => {}), Bun.sleep(FLUSH_BUDGET_MS)])
}

/** The tracer, when tracing is on. */
export function activeTracer(): Tracer | null {
  return tracer
}

/** Wraps a request handler: each request in its span when tracing is on, untouched (one check) when it is off. */
export function traceRequests(handle: (request: Request) => Promise<Response>): (request: Request) => Promise<Response> {
  return (request) => (tracer === null ? handle(request) : tracer.request(request, () => handle(request)))
}

/** The header a call out carries to continue the trace: `traceparent`, when there is a span to continue. */
export function traceHeaders(traceparent: string | null): Record<string, string> {
  return traceparent === null ? {} : { traceparent }
}

/** The current span's `traceparent`, stored on a run queued now (null when tracing is off or no span is current). */
export function currentTraceparent(): string | null {
  return tracer === null ? null : tracer.currentTraceparent()
}

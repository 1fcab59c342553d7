/**
 * OpenTelemetry traces (docs/tracing.md), off by default. This module is the whole cost of tracing when it is off:
 * every entry point checks one module variable and does nothing more. The SDK (./tracing-sdk.ts, the OpenTelemetry
 * packages) is imported only by `startTracing`, when the standard `OTEL_*` variables turn tracing on.
 *
 * What the rest of Trellis sees is this small face, never the OpenTelemetry API: a span is a handle that ends, and a
 * trace context crosses process and database boundaries as its W3C `traceparent` text (stored on a run, sent on an
 * `http` step's call and on a callback delivery).
 */
import { type Logger, logContextFrom } from './logger.ts'
import type { Tracer } from './tracing-types.ts'

export type { RunTrace, SpanAttributes, SpanHandle, TracedRun, Tracer } from './tracing-types.ts'

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
  const started = createTracer(env, logger)
  tracer = started
  logContextFrom(() => started.logFields())
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
  logContextFrom(null)
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

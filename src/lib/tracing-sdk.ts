/**
 * The OpenTelemetry side of ./tracing.ts, imported only when tracing is on: a tracer provider with a batch span
 * processor exporting OTLP over HTTP (JSON), configured by the standard variables — the exporter reads
 * `OTEL_EXPORTER_OTLP_*` (endpoint, headers, timeout), the batch processor `OTEL_BSP_*`, the resource
 * `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`; the sampler is `OTEL_TRACES_SAMPLER`/`_ARG`, built here because
 * a run's trace asks it directly (see `run`).
 *
 * The current span is kept in an AsyncLocalStorage of this module (no global context manager is registered): only the
 * log lines (`logFields`) and a run queued from a request (`currentTraceparent`) read it; every other parent is passed.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import {
  type Context, diag, DiagLogLevel, type Link, ROOT_CONTEXT, type Span, type SpanContext, SpanKind, SpanStatusCode, trace, type TextMapGetter,
} from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, type IdGenerator, ParentBasedSampler, RandomIdGenerator, type Sampler,
  SamplingDecision, TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base'
import { ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE, ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import pkg from '../../package.json' with { type: 'json' }
import type { Logger } from './logger.ts'
import type { RunTrace, SpanHandle, TracedRun, Tracer } from './tracing-types.ts'

/** The methods HTTP semantic conventions name; any other is recorded as `_OTHER` (a method is the client's free text). */
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE'])

const headersGetter: TextMapGetter<Headers> = {
  get: (carrier, key) => carrier.get(key) ?? undefined,
  keys: (carrier) => [...carrier.keys()],
}

const recordGetter: TextMapGetter<Record<string, string>> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
}

/**
 * Ids as the SDK draws them, but for the one span `withIds` starts: a run's root span has the ids its steps were
 * given as parent before it existed (the run's id is its trace id).
 */
class RunRootIds implements IdGenerator {
  private readonly random = new RandomIdGenerator()
  private fixed: { traceId: string; spanId: string } | null = null
  generateTraceId(): string {
    return this.fixed?.traceId ?? this.random.generateTraceId()
  }
  generateSpanId(): string {
    return this.fixed?.spanId ?? this.random.generateSpanId()
  }
  withIds<T>(ids: { traceId: string; spanId: string }, start: () => T): T {
    this.fixed = ids
    try {
      return start()
    } finally {
      this.fixed = null
    }
  }
}

/** `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` as the specification reads them (default: parentbased_always_on). */
export function samplerFromEnv(env: Record<string, string | undefined>, logger: Logger): Sampler {
  const name = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || 'parentbased_always_on'
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim() ? Number(env.OTEL_TRACES_SAMPLER_ARG) : 1
  const ratio = Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1
  switch (name) {
    case 'always_on': return new AlwaysOnSampler()
    case 'always_off': return new AlwaysOffSampler()
    case 'traceidratio': return new TraceIdRatioBasedSampler(ratio)
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) })
    default:
      logger.warn('OTEL_TRACES_SAMPLER is not a sampler this build knows: parentbased_always_on', { sampler: name })
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }
}

/** A span context as its `traceparent` header value. */
function traceparentOf(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`
}

function handleOf(span: Span): SpanHandle {
  return {
    traceparent: traceparentOf(span.spanContext()),
    end(outcome, at) {
      if (outcome?.attributes) span.setAttributes(outcome.attributes)
      if (outcome?.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error })
      span.end(at)
    },
  }
}

export function createTracer(env: Record<string, string | undefined>, logger: Logger): Tracer {
  // The SDK's own complaints (an export refused, a collector unreachable) as warnings in our log, never thrown.
  const complain = (message: string) => logger.warn(`tracing: ${message}`)
  const quiet = () => {}
  diag.setLogger({ error: complain, warn: complain, info: quiet, debug: quiet, verbose: quiet }, DiagLogLevel.WARN)
  const sampler = samplerFromEnv(env, logger)
  const ids = new RunRootIds()
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'trellis', [ATTR_SERVICE_VERSION]: pkg.version }))
    .merge(detectResources({ detectors: [envDetector] }))
  const provider = new BasicTracerProvider({ resource, sampler, idGenerator: ids, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] })
  const tracer = provider.getTracer('trellis', pkg.version)
  const propagator = new W3CTraceContextPropagator()
  const current = new AsyncLocalStorage<Context>()
  const requestSpans = new WeakMap<Request, Span>()
  const contextOf = (traceparent: string): Context => propagator.extract(ROOT_CONTEXT, { traceparent }, recordGetter)
  const currentContext = () => trace.getSpanContext(current.getStore() ?? ROOT_CONTEXT)

  return {
    async request(request, handle) {
      const parent = propagator.extract(ROOT_CONTEXT, request.headers, headersGetter)
      const method = KNOWN_METHODS.has(request.method) ? request.method : '_OTHER'
      // Named by its method until the route is known (`route`): never by its path, which may be a credential.
      const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { [ATTR_HTTP_REQUEST_METHOD]: method } }, parent)
      requestSpans.set(request, span)
      try {
        const response = await current.run(trace.setSpan(parent, span), handle)
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, response.status)
        if (response.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
        return response
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name })
        throw error
      } finally {
        span.end()
      }
    },
    route(request, route) {
      const span = requestSpans.get(request)
      if (span === undefined) return
      const method = KNOWN_METHODS.has(request.method) ? request.method : '_OTHER'
      span.updateName(`${method} ${route}`)
      span.setAttribute(ATTR_HTTP_ROUTE, route)
    },
    logFields() {
      const context = currentContext()
      return context === undefined ? undefined : { trace_id: context.traceId, span_id: context.spanId }
    },
    currentTraceparent() {
      const context = currentContext()
      return context === undefined ? null : traceparentOf(context)
    },
    run(run) {
      return runTrace(run)
    },
    runTraceparent(runId) {
      return traceparentOf(runRoot(runId).rootContext)
    },
    span(name, parent, attributes) {
      return handleOf(tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent === null ? ROOT_CONTEXT : contextOf(parent)))
    },
    async shutdown() {
      await provider.shutdown()
    },
  }

  /**
   * A run's trace id and root span id, and whether the sampler keeps its trace. The run's id (a UUIDv7) is its trace
   * id, and the id's random half its root span's id: any instance executing the run, or delivering its callbacks,
   * computes the same ones, so no span id needs storing for a later execution's steps to find their parent. An id that
   * is not a valid trace id (none is made so) gets a trace of its own for this execution.
   */
  function runRoot(runId: string): { root: { traceId: string; spanId: string }; rootContext: SpanContext; parent: Context } {
    const traceId = runId.replaceAll('-', '').toLowerCase()
    const root = /^[0-9a-f]{32}$/.test(traceId) && !/^0+$/.test(traceId.slice(16))
      ? { traceId, spanId: traceId.slice(16) }
      : { traceId: ids.generateTraceId(), spanId: ids.generateSpanId() }
    // The decision the root span will get when it is recorded: its children, recorded first, follow it.
    const sampled = sampler.shouldSample(ROOT_CONTEXT, root.traceId, 'run', SpanKind.INTERNAL, {}, []).decision === SamplingDecision.RECORD_AND_SAMPLED
    const rootContext: SpanContext = { ...root, traceFlags: sampled ? 1 : 0 }
    return { root, rootContext, parent: trace.setSpanContext(ROOT_CONTEXT, rootContext) }
  }

  function runTrace(run: TracedRun): RunTrace {
    const { root, rootContext, parent } = runRoot(run.id)
    const runAttributes = { 'trellis.run.id': run.id }
    return {
      traceparent: traceparentOf(rootContext),
      step(name, type, index, startedAt) {
        const attributes = { ...runAttributes, 'trellis.step.name': name, 'trellis.step.type': type, 'trellis.step.index': index }
        return handleOf(tracer.startSpan(`step ${name}`, { startTime: startedAt, attributes }, parent))
      },
      child(name, attributes = {}) {
        return handleOf(tracer.startSpan(name, { attributes: { ...runAttributes, ...attributes } }, parent))
      },
      finish(workflowName, status, error, at) {
        const trigger = run.trace_context === null ? undefined : trace.getSpanContext(contextOf(run.trace_context))
        const links: Link[] = trigger === undefined ? [] : [{ context: trigger }]
        const attributes = { ...runAttributes, 'trellis.workflow.name': workflowName, 'trellis.run.trigger': run.trigger, 'trellis.run.status': status }
        const span = ids.withIds(root, () => tracer.startSpan(`run ${workflowName}`, { startTime: run.created_at / 1000, links, attributes }, ROOT_CONTEXT))
        if (error !== null) span.setStatus({ code: SpanStatusCode.ERROR, message: error })
        span.end(at)
      },
      within(fn) {
        return current.run(parent, fn)
      },
    }
  }
}


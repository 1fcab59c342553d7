/** The face of tracing the rest of Trellis sees (./tracing.ts), implemented by ./tracing-sdk.ts when tracing is on. */

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

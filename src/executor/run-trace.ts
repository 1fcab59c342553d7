/**
 * What the executor records in a run's trace while tracing is on (docs/tracing.md): a span per step, ended by the
 * commit that records the step's outcome, and the run's own span when a commit ends the run.
 */
import type { NewRunEvent } from '../db/run-events.ts'
import type { RunTrace, SpanHandle } from '../lib/tracing.ts'
import type { Step } from '../modules/workflows/definition.ts'
import type { RunTarget, StepContext } from './step.ts'

/** A step's span under way, with what its end needs to know. */
export interface TracedStep {
  ctx: StepContext
  type: Step['type']
  startedAt: number
  span: SpanHandle | null
}

/** What a step group's commit records in its run's trace: the spans of its steps, and the run's own when it ended. */
export interface GroupTrace {
  run: RunTrace
  committed(events: readonly NewRunEvent[]): void
}

/**
 * Starts a step's span; answers its `traceparent`. A task step's span is recorded at its decision instead, from its
 * opening (`ctx.openedAt`): a run parked on a task holds no span open, whatever restarts come meanwhile.
 */
export function startStepSpan(traced: RunTrace, spans: Map<number, TracedStep>, ctx: StepContext, type: Step['type'], startedAt: number): string {
  const span = type === 'task' ? null : traced.step(ctx.stepName, type, ctx.stepIndex, startedAt)
  spans.set(ctx.stepIndex, { ctx, type, startedAt, span })
  return span?.traceparent ?? traced.traceparent
}

/** A group given up before it was recorded (shutdown, cancel): its spans end now, as stopped. */
export function endUnrecordedSpans(spans: Map<number, TracedStep>): void {
  for (const { span } of spans.values()) span?.end({ attributes: { 'trellis.step.status': 'stopped' } })
  spans.clear()
}

/** Ends the group's step spans from the events its commit wrote, and records the run's span when the run ended. */
export function groupTrace(traced: RunTrace | null, target: RunTarget, spans: Map<number, TracedStep>): GroupTrace | null {
  if (traced === null) return null
  return {
    run: traced,
    committed(events) {
      for (const event of events) {
        const error = (event.data?.error as { code?: string } | undefined)?.code ?? null
        if (event.type === 'run.succeeded' || event.type === 'run.failed') {
          traced.finish(target.workflowName, event.type === 'run.succeeded' ? 'succeeded' : 'failed', error, event.at)
          continue
        }
        const step = event.stepIndex == null ? undefined : spans.get(event.stepIndex)
        if (step === undefined || !event.type.startsWith('step.')) continue
        const status = event.type.slice('step.'.length)
        // A task step parked on its task: its span is recorded when the task is decided.
        if (step.span === null && status === 'waiting') continue
        const span = step.span ?? traced.step(step.ctx.stepName, step.type, step.ctx.stepIndex, step.ctx.openedAt ?? step.startedAt)
        span.end({ attributes: { 'trellis.step.status': status }, ...(error === null ? {} : { error }) }, event.at)
        spans.delete(event.stepIndex!)
      }
      endUnrecordedSpans(spans)
    },
  }
}

import type { Step } from '../../modules/workflows/definition.ts'
import type { StepRunner } from '../step.ts'

type Wait = Extract<Step, { type: 'wait' }>

/** Parks the run (`waiting` until `availableAt`) without holding a worker. */
export const runWait: StepRunner<Wait> = async (ctx, step) => function* () {
  const until = ctx.clock.now() + step.seconds * 1000
  return { next: { waitUntil: until }, output: { until: new Date(until).toISOString() } }
}

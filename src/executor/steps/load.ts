import type { StepRunner } from '../step.ts'
import { loadRecordAs } from './data-access.ts'

/** Reads the record as the run's user. */
export const runLoad: StepRunner = async (ctx) => function* (reads) {
  const { data } = yield* loadRecordAs(ctx.target, 'read', reads)
  return { next: 'continue', record: data, output: { loaded: true } }
}

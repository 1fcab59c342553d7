import { logRunActivity, type StepRunner } from '../step.ts'
import { loadRecordAs } from './data-access.ts'

/** Reads the record as the run's user: a `read` entry, as a console view of the record writes one. */
export const runLoad: StepRunner = async (ctx) => function* (reads) {
  const { data } = yield* loadRecordAs(ctx.target, 'read', reads)
  yield* logRunActivity(ctx.clock, ctx.target, { type: 'read', action: 'read', label: 'read by the workflow run', stepName: ctx.stepName })
  return { next: 'continue', record: data, output: { loaded: true } }
}

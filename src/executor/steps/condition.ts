import type { Step } from '../../modules/workflows/definition.ts'
import { taskNameOf } from '../../modules/workflows/definition.ts'
import { StepFailure, type StepRunner } from '../step.ts'
import { recordField, taskField } from '../../lib/template.ts'
import { conditionHolds } from '../../modules/workflows/typed-steps.ts'
import { loadRecordAs } from './data-access.ts'

type Condition = Extract<Step, { type: 'condition' }>

/**
 * Tests one field of the record, read afresh as the run's user (a `wait` may have passed since the load), or of a
 * closed task's outcome (`tasks.<step>.…`: no record read); every test given must hold (numbers and dates compared by
 * what they are: ../../modules/workflows/typed-steps.ts). When false, `else` ends the run (default) or fails it.
 */
export const runCondition: StepRunner<Condition> = async (ctx, step) => function* (reads) {
  const ofTask = taskNameOf(step.if.field) !== null
  const data = ofTask ? undefined : (yield* loadRecordAs(ctx.target, 'read', reads)).data
  const value = ofTask ? taskField(ctx.tasks, step.if.field) : recordField(data ?? null, step.if.field)
  const matched = conditionHolds(step.if, value)
  if (matched) return { next: 'continue', record: data, output: { matched } }
  if (step.else === 'fail') {
    throw new StepFailure('condition_failed', `Condition on ${step.if.field} was not met`, { matched })
  }
  return { next: 'end', output: { matched } }
}

import type { Step } from '../../modules/workflows/definition.ts'
import { taskNameOf } from '../../modules/workflows/definition.ts'
import { StepFailure, type StepRunner } from '../step.ts'
import { recordField, taskField } from '../template.ts'
import { compareOrdered, containsValue, ORDER_OPERATORS } from '../../modules/workflows/typed-steps.ts'
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
  const checks: boolean[] = []
  if (step.if.equals !== undefined) checks.push(value === step.if.equals)
  if (step.if.notEquals !== undefined) checks.push(value !== step.if.notEquals)
  if (step.if.in !== undefined) checks.push(step.if.in.includes(value as never))
  if (step.if.exists !== undefined) checks.push((value !== undefined && value !== null) === step.if.exists)
  for (const op of ORDER_OPERATORS) if (step.if[op] !== undefined) checks.push(compareOrdered(op, value, step.if[op]))
  if (step.if.contains !== undefined) checks.push(containsValue(value, step.if.contains))
  const matched = checks.every(Boolean)
  if (matched) return { next: 'continue', record: data, output: { matched } }
  if (step.else === 'fail') {
    throw new StepFailure('condition_failed', `Condition on ${step.if.field} was not met`, { matched })
  }
  return { next: 'end', output: { matched } }
}

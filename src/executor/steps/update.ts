import { collectionFields, recordProblems, replaceRecordData } from '../../modules/records/service.ts'
import type { Step } from '../../modules/workflows/definition.ts'
import { logRunActivity, type StepRunner, StepFailure } from '../step.ts'
import { typedChanges } from '../../modules/workflows/typed-steps.ts'
import { renderTemplate } from '../../lib/template.ts'
import { loadRecordAs } from './data-access.ts'
import { templateVariables } from './variables.ts'

type Update = Extract<Step, { type: 'update' }>

/**
 * Sets fields of the record (templated values) as the run's user, with an `update` activity entry. The record as
 * changed must conform to its collection's schema (docs/records.md), a templated value read as its field's type
 * first (`typedChanges`): else the step fails `invalid_field`, naming each field, and writes nothing.
 */
export const runUpdate: StepRunner<Update> = async (ctx, step) => function* (reads) {
  const { row, data } = yield* loadRecordAs(ctx.target, 'edit', reads)
  const scope = { environmentId: ctx.target.environmentId, collectionId: ctx.target.collectionId }
  const fields = yield* collectionFields(scope.collectionId, 'write')
  const changes = typedChanges(step.set, renderTemplate(step.set, templateVariables(ctx, data)), fields)
  const updated = { ...data, ...changes }
  const problems = yield* recordProblems(scope, fields, updated)
  if (problems.length > 0) {
    const named = problems.map((p) => `${p.field} ${p.message}`).join('; ')
    throw new StepFailure('invalid_field', `The record as updated does not conform to its collection's schema: ${named}`, { details: problems })
  }
  yield* replaceRecordData(row, updated, ctx.clock.now(), ctx.target.run.id)
  reads.data = updated
  yield* logRunActivity(ctx.clock, ctx.target, { action: 'update', label: `updated ${Object.keys(changes).join(', ')}`, stepName: ctx.stepName })
  return { next: 'continue', record: updated, output: { updated: Object.keys(changes) } }
}

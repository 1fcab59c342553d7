import { eq } from 'drizzle-orm'
import { records } from '../../db/schema.ts'
import type { Step } from '../../modules/workflows/definition.ts'
import { canonicalJson } from '../../lib/json.ts'
import { logRunActivity, type StepRunner } from '../step.ts'
import { renderTemplate } from '../template.ts'
import { loadRecordAs } from './data-access.ts'
import { templateVariables } from './variables.ts'

type Update = Extract<Step, { type: 'update' }>

/** Sets fields of the record (templated values) as the run's user, with an `update` activity entry. */
export const runUpdate: StepRunner<Update> = async (ctx, step) => (tx) => {
  const { row, data } = loadRecordAs(tx, ctx.target, 'edit')
  const changes = renderTemplate(step.set, templateVariables(ctx, data))
  const updated = { ...data, ...changes }
  const now = ctx.clock.now()
  tx.update(records).set({ data: canonicalJson(updated), updatedAt: now }).where(eq(records.id, row.id)).run()
  logRunActivity(tx, ctx.clock, ctx.target, { action: 'update', label: `updated ${Object.keys(changes).join(', ')}`, stepName: ctx.stepName })
  return { next: 'continue', record: updated, output: { updated: Object.keys(changes) } }
}

import { eq } from 'drizzle-orm'
import { records } from '../../db/schema.ts'
import { appendActivityLog } from '../../modules/activity-logs/service.ts'
import type { Step } from '../../modules/workflows/definition.ts'
import { canonicalJson } from '../../lib/json.ts'
import type { StepRunner } from '../step.ts'
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
  appendActivityLog(tx, ctx.clock, {
    environmentId: ctx.target.environmentId,
    type: 'write',
    action: 'update',
    label: `updated ${Object.keys(changes).join(', ')}`,
    userId: ctx.target.run.user_id,
    teamId: ctx.target.teamId,
    collectionId: ctx.target.collectionId,
    tokenId: ctx.target.run.token_id,
    recordIds: [ctx.target.run.record_id],
    workflow: { name: ctx.target.workflowName, runId: ctx.target.run.id, stepName: ctx.stepName },
  })
  return { next: 'continue', record: updated, output: { updated: Object.keys(changes) } }
}

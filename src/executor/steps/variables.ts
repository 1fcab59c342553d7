import { toIso } from '../../lib/time.ts'
import type { StepContext } from '../step.ts'
import type { TemplateVariables } from '../../lib/template.ts'

export function templateVariables(ctx: StepContext, record: Record<string, unknown> | null = ctx.record): TemplateVariables {
  return {
    recordId: ctx.target.run.record_id,
    record,
    workflowName: ctx.target.workflowName,
    runId: ctx.target.run.id,
    now: toIso(ctx.clock.now()),
    tasks: ctx.tasks,
  }
}

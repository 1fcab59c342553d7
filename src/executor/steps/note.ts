import { createNote } from '../../modules/notes/service.ts'
import type { Step } from '../../modules/workflows/definition.ts'
import type { StepRunner } from '../step.ts'
import { renderTemplate } from '../../lib/template.ts'
import { loadRecordAs } from './data-access.ts'
import { templateVariables } from './variables.ts'

type NoteStep = Extract<Step, { type: 'note' }>

/** Leaves a note on the record, as the run's user (needs edit access), in the workflow's rendering. */
export const runNote: StepRunner<NoteStep> = async (ctx, step) => function* (reads) {
  const { data } = yield* loadRecordAs(ctx.target, 'edit', reads)
  const vars = templateVariables(ctx, data)
  const note = (yield* createNote(ctx.clock, {
      environmentId: ctx.target.environmentId,
      teamId: ctx.target.teamId,
      collectionId: ctx.target.collectionId,
      recordId: ctx.target.run.record_id,
      title: renderTemplate(step.title, vars),
      content: renderTemplate(step.content, vars),
    }, {
      userId: ctx.target.run.user_id,
      tokenId: ctx.target.run.token_id,
      workflow: { name: ctx.target.workflowName, runId: ctx.target.run.id, stepName: ctx.stepName },
  }))
  return { next: 'continue', record: data, output: { noteId: note.id } }
}

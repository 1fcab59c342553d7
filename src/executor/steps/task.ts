import { findTaskOfStep } from '../../db/tasks.ts'
import { openTask, readTaskOutcome, resolvePeople } from '../../modules/tasks/service.ts'
import { dueInSeconds, type Step } from '../../modules/workflows/definition.ts'
import { logRunActivity, StepFailure, type StepResult, type StepRunner } from '../step.ts'
import { renderTemplate } from '../../lib/template.ts'
import { templateVariables } from './variables.ts'

type TaskStep = Extract<Step, { type: 'task' }>

/**
 * Asks people (docs/workflows.md "Task steps"). The first time, it opens the step's task (with its `createApproval`
 * entry and `task.opened` event) and parks the run until the task closes, holding no worker. Woken, it runs again
 * and reads the closed task — decided, or closed at its deadline (src/executor/task-deadlines.ts) —: approved goes on;
 * rejected follows `onReject` (fail: `task_rejected`, end, continue); expired fails with `task_expired`. Its recorded output is the outcome later steps read as `tasks.<name>.…`.
 */
export const runTask: StepRunner<TaskStep> = async (ctx, step) => function* (reads) {
  const { run } = ctx.target
  const existing = yield* findTaskOfStep(run.id, ctx.stepIndex)
  if (existing?.status === 'open') return { next: { awaitTask: existing.id } }
  if (existing === undefined) {
    const people = yield* resolvePeople(ctx.target.projectId, step.assignees)
    if (people.unknown.length > 0) {
      throw new StepFailure('task_assignee_unknown', `The task's assignees are not in the project: ${people.unknown.join(', ')}`)
    }
    const escalateTo = step.escalateTo === undefined ? null : JSON.stringify(step.escalateTo)
    const due = dueInSeconds(step)
    // The record as the group's steps before it left it (a load just before), else as the run last read it.
    const title = renderTemplate(step.title, templateVariables(ctx, reads.data ?? ctx.record)).slice(0, 500)
    const id = yield* openTask(ctx.clock, ctx.mail, {
      workflowName: ctx.target.workflowName,
      runId: run.id,
      stepIndex: ctx.stepIndex,
      stepName: ctx.stepName,
      environmentId: ctx.target.environmentId,
      workflowId: run.workflow_id,
      teamId: ctx.target.teamId,
      collectionId: ctx.target.collectionId,
      recordId: run.record_id,
      requesterId: run.user_id,
      title,
      approvalsRequired: step.approvals ?? 1,
      allowRequester: step.allowRequester ?? false,
      form: step.form === undefined ? null : JSON.stringify(step.form),
      dueInMs: due === null ? null : due * 1000,
      onTimeout: step.onTimeout ?? 'fail',
      escalateTo,
      ...people,
    })
    yield* logRunActivity(ctx.clock, ctx.target, { action: 'createApproval', label: `opened task "${ctx.stepName}": ${title}`, stepName: ctx.stepName })
    const result: StepResult = {
      next: { awaitTask: id },
      events: [{ type: 'task.opened', data: { taskId: id, title, approvalsRequired: step.approvals ?? 1 } }],
    }
    return result
  }
  ctx.openedAt = Math.floor(existing.createdAt / 1000)
  const outcome = yield* readTaskOutcome(existing.id, existing.status)
  ctx.tasks.set(step.name, outcome)
  if (existing.status === 'approved' || (existing.status === 'rejected' && step.onReject === 'continue')) return { next: 'continue', output: outcome }
  if (existing.status === 'rejected' && step.onReject === 'end') return { next: 'end', output: outcome }
  if (existing.status === 'rejected') {
    const by = outcome.decidedBy === '' ? 'at its deadline' : `by ${outcome.decidedBy}`
    throw new StepFailure('task_rejected', `Task "${ctx.stepName}" was rejected ${by}`, outcome)
  }
  if (existing.status === 'expired') throw new StepFailure('task_expired', `Task "${ctx.stepName}" expired before it was decided`, outcome)
  throw new StepFailure('task_cancelled', `Task "${ctx.stepName}" was cancelled`, outcome)
}

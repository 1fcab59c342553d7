/**
 * A task's deadline and its reminder (docs/workflows.md "Task steps"), as the executor's deadline timer
 * (src/executor/task-deadlines.ts) acts on them: each in its own transaction, claimed by a conditional UPDATE
 * (src/db/tasks.ts), so whichever instance's timer comes first acts, once, and a decision racing the deadline either
 * closes the task first (the deadline then does nothing) or finds it closed (`409 task_closed`).
 *
 * At the deadline, by `onTimeout`: `fail` expires the task, `reject` and `approve` close it so — each wakes the run,
 * whose task step then reads the outcome — and `escalate` adds `escalateTo` to the assignees, marks it escalated and
 * tells them; it stays open, and is escalated once. No one decided: the activity entries are the run's user's, as the
 * run's own are, with why in the label.
 */
import type { Op } from '../../db/op.ts'
import { wakeRunOfTask } from '../../db/queue.ts'
import { appendRunEvents } from '../../db/run-events.ts'
import { claimReminder, closeAtDeadline, decidersToTell, escalateAtDeadline, findTask } from '../../db/tasks.ts'
import type { Clock } from '../../lib/clock.ts'
import type { MailSettings } from '../mail/service.ts'
import { logTaskActivity, queueTaskCallbacks, resolvePeople, taskEvent, tellOfTask } from './service.ts'

/** What a passed deadline closes the task as, by `onTimeout` (`escalate` keeps it open). */
const CLOSED_AT_DEADLINE = { fail: 'expired', reject: 'rejected', approve: 'approved' } as const

/**
 * Acts on the task's passed deadline, as its `onTimeout` says, with its activity entry, run event and mail; false
 * when there was nothing to do (decided, closed or escalated meanwhile, by this or another instance).
 */
export function* actOnDeadline(clock: Clock, mail: MailSettings | null, taskId: string): Op<boolean> {
  const found = yield* findTask(taskId)
  if (!found) return false
  const { task, workflowName } = found
  const now = clock.now()
  const entry = { clock, task, workflowName, userId: task.requesterId, tokenId: null }
  const subject = { ...task, workflowName }
  if (task.onTimeout === 'escalate') {
    const named = task.escalateTo === null ? {} : (JSON.parse(task.escalateTo) as { teams?: string[]; users?: string[] })
    // Published names that left the project since are skipped (the label says which); the others are told.
    const people = yield* resolvePeople(found.projectId, named)
    if (!(yield* escalateAtDeadline(taskId, people, now))) return false
    const to = [...(named.teams ?? []).map((name) => `team ${name}`), ...(named.users ?? []).map((email) => `user ${email}`)].filter((who) => !people.unknown.includes(who))
    const skipped = people.unknown.length === 0 ? '' : ` (not in the project: ${people.unknown.join(', ')})`
    yield* logTaskActivity(entry, 'assignUserToInboxTask', `task "${task.stepName}" escalated at its deadline to ${to.join(', ') || 'no one'}${skipped}`)
    yield* tellOfTask(mail, now, 'task.escalated', subject, yield* decidersToTell(task, true))
    yield* appendRunEvents([taskEvent(task, 'task.escalated', 'waiting', now, { assignees: { teams: named.teams ?? [], users: named.users ?? [] } })])
    return true
  }
  const status = CLOSED_AT_DEADLINE[task.onTimeout as keyof typeof CLOSED_AT_DEADLINE] ?? 'expired'
  if (!(yield* closeAtDeadline(taskId, status, now))) return false
  yield* logTaskActivity(entry, 'closeTask', `task "${task.stepName}" ${status} at its deadline (onTimeout: ${task.onTimeout})`)
  yield* wakeRunOfTask(task.runId, now)
  yield* tellOfTask(mail, now, 'task.closed', subject, [task.requesterId], { status, why: 'at its deadline, undecided' })
  yield* appendRunEvents([taskEvent(task, 'task.closed', 'waiting', now, { status, reason: 'deadline' })])
  yield* queueTaskCallbacks(task, ['task.closed'], now)
  return true
}

/** Reminds the task's assignees who have not decided (a `task.reminder` mail), once; false when it was sent already or the task closed. */
export function* remindOfTask(clock: Clock, mail: MailSettings | null, taskId: string): Op<boolean> {
  const found = yield* findTask(taskId)
  if (!found) return false
  const now = clock.now()
  if (!(yield* claimReminder(taskId, now))) return false
  yield* tellOfTask(mail, now, 'task.reminder', { ...found.task, workflowName: found.workflowName }, yield* decidersToTell(found.task))
  return true
}

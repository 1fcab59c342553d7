/**
 * Tasks (docs/workflows.md "Task steps"): a `task` step asks people to approve or reject, with a form; the run waits,
 * holding no worker, until the task closes. Here: opening a task (the step's transaction), who sees and who may decide
 * one, a decision with its quorum, cancelling a cancelled run's task, and the task as the API shows it. Each change
 * writes its activity entry and its run event in its own transaction; the rules many deciders race on are the
 * database's (src/db/tasks.ts).
 */
import { createHash } from 'node:crypto'
import { queueCallbacks } from '../../db/callbacks.ts'
import { findMemberRole } from '../../db/members.ts'
import type { Op } from '../../db/op.ts'
import { findTeamByName } from '../../db/projects.ts'
import { wakeRunOfTask } from '../../db/queue.ts'
import { appendRunEvents, type NewRunEvent } from '../../db/run-events.ts'
import {
  cancelOpenTasksOfRun,
  closeTask,
  countApprovals,
  decidersToTell,
  type DecisionToRender,
  findDecision,
  findDecisions,
  findTask,
  insertDecision,
  insertTask,
  isAssignee,
  lockTask,
  type NewTask,
  nextDecisionCreatedAt,
  loadTasksToRender,
  pageTaskIds,
  type TaskRow,
  type TaskToRender,
} from '../../db/tasks.ts'
import { findUserByStoredEmail } from '../../db/users.ts'
import { findWorkflowIdsNamed } from '../../db/workflows.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import { someHoldUnstorableText } from '../../lib/storable-text.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { type TaskCallbackEvent, taskCallbackPayload } from '../../lib/callbacks.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict, forbidden, HttpError, notFound, unprocessable } from '../../lib/errors.ts'
import { formInputProblems } from '../../lib/form-schema.ts'
import { canonicalJson } from '../../lib/json.ts'
import type { RunStatus } from '../../lib/run-statuses.ts'
import type { TaskStatus } from '../../lib/task-statuses.ts'
import { toIso, toIsoMicros, toIsoOrNull } from '../../lib/time.ts'
import { inIdOrder } from '../../lib/id-order.ts'
import { type ActivityAction, appendActivityLog, type Channel } from '../activity-logs/service.ts'
import { requireProjectAccess } from '../auth/service.ts'
import { type MailSettings, queueTaskMail, type TaskMailKind } from '../mail/service.ts'
import { isAdminOf } from '../directory/projects.ts'
import { normalizeEmail, userObject } from '../directory/users.ts'

// ── Opening ───────────────────────────────────────────────────────────────────

/** Who a task step names (teams by name, users by email), as ids of the workflow's project. */
export interface ResolvedPeople {
  teamIds: number[]
  userIds: number[]
}

/**
 * The teams and members a task step names, in the workflow's project: `unknown` lists each name that is not one of its
 * teams, and each email that is not one of its members (the step then fails the run, naming them).
 */
export function* resolvePeople(projectId: number, people: { teams?: string[]; users?: string[] }): Op<ResolvedPeople & { unknown: string[] }> {
  const resolved: ResolvedPeople & { unknown: string[] } = { teamIds: [], userIds: [], unknown: [] }
  for (const name of people.teams ?? []) {
    const team = yield* findTeamByName(projectId, name)
    if (team) resolved.teamIds.push(team.id)
    else resolved.unknown.push(`team ${name}`)
  }
  for (const email of people.users ?? []) {
    const user = yield* findUserByStoredEmail(normalizeEmail(email))
    if (user && (yield* findMemberRole(projectId, user.id)) !== undefined) resolved.userIds.push(user.id)
    else resolved.unknown.push(`user ${email}`)
  }
  return resolved
}

/** A task a step opens: the row to insert but its reminder's time (`reminderAt` sets it), and its workflow's name. */
export interface TaskToOpen extends Omit<NewTask, 'remindAt' | 'dueAt'> {
  workflowName: string
  /** How long after it opens the task is due (ms); null: no deadline. Dated with its opening, at one reading of the clock. */
  dueInMs: number | null
}

/** A task just opened, as those it concerns are told of it. */
export interface OpenedTask extends Omit<TaskToOpen, 'dueInMs'> {
  id: string
  dueAt: number | null
}

/** Before a deadline the assignees are reminded this long at most: an hour, or a fifth of the time it gives, if less. */
export const REMINDER_LEAD_MS = 3_600_000

/**
 * When a task due at `dueAt`, opened at `openedAt`, reminds its assignees: a fifth of its time before the deadline
 * (4 s before a 20 s deadline, 12 min before an hour's), an hour before at most (a day's: 23 h after it opened).
 */
export function reminderAt(openedAt: number, dueAt: number): number {
  return dueAt - Math.min(REMINDER_LEAD_MS, Math.floor((dueAt - openedAt) / 5))
}

/**
 * Tells a new task's assignees it waits for them, in the transaction that opens it (so the telling commits with the
 * task, or neither does): a `task.opened` mail to each who may decide it (teams as their members; not the run's user
 * when they may not decide), beside the inbox (`GET …/tasks?assignee=me`) and the run-events stream (`task.opened`).
 */
export function* taskOpened(mail: MailSettings | null, now: number, task: OpenedTask): Op<void> {
  const userIds = yield* decidersToTell(task)
  yield* tellOfTask(mail, now, 'task.opened', task, userIds)
}

/** Opens a step's task (in the step's transaction), with what tells of it: answers its id. */
export function* openTask(clock: Clock, mail: MailSettings | null, task: TaskToOpen): Op<string> {
  const now = clock.now()
  const { workflowName, dueInMs, ...row } = task
  const dueAt = dueInMs === null ? null : now + dueInMs
  const { id } = yield* insertTask({ ...row, dueAt, remindAt: dueAt === null ? null : reminderAt(now, dueAt) }, now)
  yield* taskOpened(mail, now, { ...row, workflowName, dueAt, id })
  yield* queueTaskCallbacks({ ...task, id }, ['task.opened'], now)
  return id
}

/**
 * The task's events for the workflow's callback endpoints that chose them (docs/workflows.md "Completion callbacks"),
 * in the transaction that makes them happen: each body the task as `GET /v1/tasks/{id}` shows it once that
 * transaction's changes are made, rendered only when some endpoint wants it.
 */
export function* queueTaskCallbacks(task: { id: string; runId: string }, types: readonly TaskCallbackEvent[], now: number): Op<void> {
  let rendered: object | undefined
  for (const type of types) {
    yield* queueCallbacks({ id: task.runId }, type, now, function* () {
      rendered ??= (yield* renderTasks([task.id]))[0]
      if (rendered === undefined) throw new Error(`task ${task.id} vanished in its own transaction`)
      return taskCallbackPayload(type, now, rendered)
    })
  }
}

/** What each task mail says: its subject and first lines (the link to the task and the way to stop them follow). */
function taskMailWords(kind: TaskMailKind, task: { title: string; workflowName: string; dueAt: number | null }, closed?: { status: TaskStatus; why: string }) {
  const due = task.dueAt === null ? '' : `\nDue: ${toIso(task.dueAt)}`
  switch (kind) {
    case 'task.opened':
      return { subject: `Task for you: ${task.title}`, text: `The workflow "${task.workflowName}" asks you to decide:\n\n${task.title}\n${due}` }
    case 'task.reminder':
      return { subject: `Reminder: ${task.title}`, text: `This task of the workflow "${task.workflowName}" still waits for your decision:\n\n${task.title}\n${due}` }
    case 'task.escalated':
      return {
        subject: `Escalated to you: ${task.title}`,
        text: `This task of the workflow "${task.workflowName}" passed its deadline undecided and was escalated to you:\n\n${task.title}\n${due}`,
      }
    case 'task.closed':
      return { subject: `Task ${closed!.status}: ${task.title}`, text: `The task of your run of "${task.workflowName}" was ${closed!.status} ${closed!.why}:\n\n${task.title}\n` }
  }
}

/** Queues a task mail of `kind` about `task` to `userIds` (those who want it), in the caller's transaction. */
export function* tellOfTask(
  mail: MailSettings | null,
  now: number,
  kind: TaskMailKind,
  task: { id: string; title: string; workflowName: string; dueAt: number | null },
  userIds: readonly number[],
  closed?: { status: TaskStatus; why: string },
): Op<void> {
  if (mail === null || userIds.length === 0) return
  yield* queueTaskMail(mail, now, { kind, userIds, taskId: task.id, ...taskMailWords(kind, task, closed) })
}

// ── Seeing ────────────────────────────────────────────────────────────────────

/** Whether the user may decide the task as an assignee: named, or in a named team, or an admin of its project. */
function* mayDecide(task: Pick<TaskRow, 'id'>, userId: number, projectId: number): Op<boolean> {
  return (yield* isAdminOf(userId, projectId)) || (yield* isAssignee(task.id, userId))
}

/**
 * A task the caller may see: past the project's access decision (`requireProjectAccess`: its members, the SSO rule),
 * then a project admin sees every task, a member those assigned to them or one of their teams and those of runs they
 * started. Others are 404, never 403.
 */
export function* visibleTask(caller: AccountCaller, taskId: string) {
  const hidden = () => notFound(`Task ${taskId} not found`)
  const found = yield* findTask(taskId)
  if (!found) throw hidden()
  yield* requireProjectAccess(caller, found.project, hidden)
  if (found.task.requesterId !== caller.user.id && !(yield* mayDecide(found.task, caller.user.id, found.projectId))) throw hidden()
  return found
}

/** A task list's filters as the query names them. */
export interface TaskListFilters {
  status?: TaskStatus
  /** `me`: only the tasks the caller may decide now. */
  assignee?: 'me'
  workflowName?: string
  teamName?: string
  recordId?: string
}

/**
 * One page of an environment's task ids (limit + 1) as `viewer` sees them: a project admin every task, a member those
 * assigned to them or one of their teams and those of runs they started. A name that matches nothing, or a text
 * filter no row can hold, is an empty page.
 */
export function* listTaskIds(
  environment: { id: number; projectId: number },
  filters: TaskListFilters,
  dates: DateFilter[],
  limit: number,
  viewer: { userId: number; admin: boolean },
): Op<string[]> {
  if (someHoldUnstorableText(filters)) return []
  const team = filters.teamName === undefined ? undefined : yield* findTeamByName(environment.projectId, filters.teamName)
  if (filters.teamName !== undefined && team === undefined) return []
  const workflowIds = filters.workflowName === undefined ? undefined : yield* findWorkflowIdsNamed(environment.id, filters.workflowName, filters.teamName)
  return yield* pageTaskIds(
    environment.id,
    {
      status: filters.status,
      workflowIds,
      teamId: team?.id,
      recordId: filters.recordId,
      visibleTo: viewer.admin ? undefined : viewer.userId,
      decidableBy: filters.assignee === 'me' ? { userId: viewer.userId, asAdmin: viewer.admin } : undefined,
    },
    dates,
    limit,
  )
}

// ── Deciding ──────────────────────────────────────────────────────────────────

/** A decision as sent: approve or reject, why, and the form's values. */
export interface DecisionInput {
  decision: 'approve' | 'reject'
  comment?: string
  input?: Record<string, unknown>
}

/** Who decides, through which token, how the call came in, the `Idempotency-Key` it carried, and where mail goes. */
export interface Decider {
  caller: AccountCaller
  via?: Channel
  idempotencyKey: string | null
  /** The app's mail settings (`deps.mail`): the run's user is told of the outcome (null: no mail is sent). */
  mail: MailSettings | null
}

/** What a decision did: whether it was a repeat of an earlier call with the same key, and whether it closed the task and woke its run. */
export interface Decided {
  replayed: boolean
  closed: boolean
}

/** The SHA-256 of a decision's body as it is compared for an `Idempotency-Key` (key order and spacing aside). */
export const decisionHash = (body: DecisionInput) => createHash('sha256').update(canonicalJson([body.decision, body.comment ?? null, body.input ?? null])).digest('hex')

/**
 * A decision on a task, in one transaction holding the task's row: 404 unless the caller sees it; a repeat with the
 * same `Idempotency-Key` and body is answered again (422 `idempotency_key_reused` with another body), 409
 * `already_decided` otherwise; 403 `not_an_assignee`, 403 `requester_cannot_decide`; 409 `task_closed` with the
 * task's status; 422 `invalid_input` naming each field (a JSON pointer). One rejection rejects; the approvals needed
 * approve. A task that closes wakes its run.
 */
export function* decideTask(clock: Clock, taskId: string, body: DecisionInput, by: Decider): Op<Decided> {
  const { caller } = by
  const found = yield* visibleTask(caller, taskId)
  const task = yield* lockTask(taskId)
  if (!task) throw notFound(`Task ${taskId} not found`)
  const hash = decisionHash(body)
  const earlier = yield* findDecision(taskId, caller.user.id)
  if (earlier) {
    if (by.idempotencyKey === null || earlier.idempotencyKey !== by.idempotencyKey) throw conflict('already_decided', `You have already decided task ${taskId}`)
    if (earlier.requestHash !== hash) throw unprocessable('idempotency_key_reused', 'This Idempotency-Key was used with another decision: send a new key for a new request')
    return { replayed: true, closed: false }
  }
  if (!(yield* mayDecide(task, caller.user.id, found.projectId))) throw forbidden('You are not an assignee of this task', 'not_an_assignee')
  if (task.requesterId === caller.user.id && !task.allowRequester) throw forbidden('The run this task belongs to is yours: someone else decides it', 'requester_cannot_decide')
  if (task.status !== 'open') throw conflict('task_closed', `Task ${taskId} is ${task.status}`, { status: task.status })
  const problems = body.decision === 'approve' || body.input !== undefined ? formInputProblems(task.form, body.input) : []
  if (problems.length > 0) {
    const details = problems.map((p) => ({ field: p.path, message: p.message }))
    throw new HttpError(422, 'invalid_input', `Invalid input '${details[0]!.field}': ${details[0]!.message}`, { details })
  }
  const now = clock.now()
  const recorded = yield* insertDecision({
    taskId,
    userId: caller.user.id,
    decision: body.decision,
    comment: body.comment ?? null,
    input: body.input === undefined ? null : JSON.stringify(body.input),
    idempotencyKey: by.idempotencyKey,
    requestHash: hash,
    createdAt: yield* nextDecisionCreatedAt(taskId, now),
  })
  if (!recorded) throw conflict('already_decided', `You have already decided task ${taskId}`)
  const entry = { clock, task, workflowName: found.workflowName, userId: caller.user.id, tokenId: caller.token?.tokenId ?? null, via: by.via }
  const verb = body.decision === 'approve' ? 'approved' : 'rejected'
  yield* logTaskActivity(entry, body.decision === 'approve' ? 'approveApproval' : 'rejectApproval', `${verb} task "${task.stepName}"${body.comment ? `: ${body.comment}` : ''}`)
  const events: NewRunEvent[] = [taskEvent(task, 'task.decided', 'waiting', now, { decision: body.decision, user: userObject(caller.user) })]
  const closing: TaskStatus | null = body.decision === 'reject' ? 'rejected' : (yield* countApprovals(taskId)) >= task.approvalsRequired ? 'approved' : null
  if (closing !== null) {
    if (!(yield* closeTask(taskId, closing, now))) throw conflict('task_closed', `Task ${taskId} is closed`, { status: task.status })
    yield* logTaskActivity(entry, 'closeTask', `task "${task.stepName}" ${closing}: ${closing === 'rejected' ? 'rejected by' : 'the last approval by'} ${caller.user.email}`)
    events.push(taskEvent(task, 'task.closed', 'waiting', now, { status: closing }))
    yield* wakeRunOfTask(task.runId, now)
    // The run's user is told by mail (none without mail settings: then the approvers are not read either).
    if (by.mail !== null && task.requesterId !== caller.user.id) {
      const deciders = closing === 'rejected' ? [caller.user.email] : (yield* findDecisions([taskId])).filter((d) => d.decision === 'approve').map((d) => d.user.email)
      const why = `by ${deciders.join(', ')}`
      yield* tellOfTask(by.mail, now, 'task.closed', { ...task, workflowName: found.workflowName }, [task.requesterId], { status: closing, why })
    }
  }
  yield* appendRunEvents(events)
  yield* queueTaskCallbacks(task, closing === null ? ['task.decided'] : ['task.decided', 'task.closed'], now)
  return { replayed: false, closed: closing !== null }
}

/** The run a task belongs to, as its events and entries name it. */
export type TaskSubject = Pick<TaskRow, 'id' | 'runId' | 'environmentId' | 'workflowId' | 'recordId' | 'stepIndex' | 'stepName' | 'teamId' | 'collectionId'>

/** An event of the task's run about the task (`status`: the run's, then). */
export function taskEvent(task: TaskSubject, type: 'task.opened' | 'task.decided' | 'task.escalated' | 'task.closed', status: RunStatus, at: number, data: Record<string, unknown>): NewRunEvent {
  return {
    runId: task.runId,
    environmentId: task.environmentId,
    workflowId: task.workflowId,
    recordId: task.recordId,
    type,
    status,
    stepIndex: task.stepIndex,
    stepName: task.stepName,
    data: { taskId: task.id, ...data },
    at,
  }
}

/** An activity entry about a task, by the user who acted (a decider, a canceller; at a deadline, the run's user), on the task's record. */
export function* logTaskActivity(
  entry: { clock: Clock; task: TaskSubject; workflowName: string; userId: number; tokenId: number | null; via?: Channel },
  action: ActivityAction,
  label: string,
): Op<void> {
  const { task } = entry
  yield* appendActivityLog(entry.clock, {
    environmentId: task.environmentId,
    type: 'write',
    action,
    label,
    userId: entry.userId,
    teamId: task.teamId,
    collectionId: task.collectionId,
    tokenId: entry.tokenId,
    via: entry.via,
    recordIds: [task.recordId],
    workflow: { name: entry.workflowName, runId: task.runId, stepName: task.stepName },
  })
}

// ── A cancelled run ───────────────────────────────────────────────────────────

/**
 * Cancels the open task of a run being cancelled (before the run itself: every transaction that changes both takes
 * the task's row first), with its `closeTask` entry by `actor` and, as a decision's closing does, its outcome mail to
 * the run's user unless they cancelled it themselves; answers its `task.closed` events, for the caller to append with
 * the run's.
 */
export function* cancelTasksOfRun(
  clock: Clock,
  mail: MailSettings | null,
  run: { id: string; environmentId: number; workflowId: number; recordId: string },
  place: { workflowName: string; teamId: number; collectionId: number },
  actor: { userId: number; tokenId: number | null; via?: Channel },
): Op<NewRunEvent[]> {
  const now = clock.now()
  const events: NewRunEvent[] = []
  for (const closed of yield* cancelOpenTasksOfRun(run.id, now)) {
    const task: TaskSubject = { ...closed, runId: run.id, environmentId: run.environmentId, workflowId: run.workflowId, recordId: run.recordId, teamId: place.teamId, collectionId: place.collectionId }
    yield* logTaskActivity({ clock, task, workflowName: place.workflowName, ...actor }, 'closeTask', `task "${closed.stepName}" cancelled with its run`)
    if (closed.requesterId !== actor.userId) {
      yield* tellOfTask(mail, now, 'task.closed', { ...closed, workflowName: place.workflowName }, [closed.requesterId], { status: 'cancelled', why: 'with its run' })
    }
    events.push(taskEvent(task, 'task.closed', 'cancelled', now, { status: 'cancelled' }))
    yield* queueTaskCallbacks({ id: closed.id, runId: run.id }, ['task.closed'], now)
  }
  return events
}

// ── Outcome and rendering ─────────────────────────────────────────────────────

/** A closed task as later steps read it (`tasks.<step>.…`): its decision, the closing decision's input, the deciders. */
export function taskOutcomeOf(taskId: string, status: TaskStatus, decisions: readonly DecisionToRender[]) {
  const closing = decisions.at(-1)
  return {
    taskId,
    decision: status,
    input: closing?.input ? (JSON.parse(closing.input) as Record<string, unknown>) : null,
    decidedBy: decisions.map((d) => d.user.email).join(','),
  }
}

/** The outcome of a closed task, read for the step that resumes on it. */
export function* readTaskOutcome(taskId: string, status: TaskStatus) {
  return taskOutcomeOf(taskId, status, yield* findDecisions([taskId]))
}

function taskView(task: TaskToRender) {
  return {
    object: 'task' as const,
    id: task.id,
    status: task.status,
    step: task.step,
    title: task.title,
    run: { id: task.runId, workflow: { name: task.workflowName, version: task.version } },
    recordId: task.recordId,
    collection: task.collection === null ? null : { object: 'collection' as const, name: task.collection },
    environment: { object: 'environment' as const, name: task.environment },
    team: { object: 'team' as const, name: task.team },
    assignees: { teams: task.teams, users: task.users.map(userObject) },
    approvalsRequired: task.approvalsRequired,
    approvals: task.decisions.filter((d) => d.decision === 'approve').length,
    decisions: task.decisions.map((d) => ({
      user: userObject(d.user),
      decision: d.decision,
      comment: d.comment,
      input: d.input === null ? null : (JSON.parse(d.input) as Record<string, unknown>),
      createdAt: toIsoMicros(d.createdAt),
    })),
    form: task.form === null ? null : (JSON.parse(task.form) as Record<string, unknown>),
    dueAt: toIsoOrNull(task.dueAt),
    escalated: task.escalated,
    createdAt: toIsoMicros(task.createdAt),
    closedAt: toIsoOrNull(task.closedAt),
  }
}

/** `{object: "task", …}` for the given ids, in that order (a task deleted meanwhile, with its run, is left out). */
export function* renderTasks(ids: string[]) {
  const tasks = yield* loadTasksToRender(ids)
  return inIdOrder(ids, tasks, (task) => task.id).map(taskView)
}

/**
 * Tasks' storage (docs/workflows.md "Task steps"): a `task` step's task, its assignees and its decisions, written
 * once for both stores (./query.ts). The rules many writers race on are the database's:
 * - one decision per user per task: the primary key of `task_decisions` (`insertDecision` answers whether it wrote);
 * - a task closes exactly once: every change of its status is an UPDATE guarded by `status = 'open'` (`closeTask`,
 *   `cancelOpenTasksOfRun`, `closeAtDeadline`);
 * - a deadline is acted on once and a reminder sent once, whichever instance's timer sees them first: each is claimed
 *   by an UPDATE guarded by what it changes (`closeAtDeadline`, `escalateAtDeadline`: open and not escalated, the
 *   deadline passed; `claimReminder`: its time set and come) — the timers read the next one from an index
 *   (`tasks_due_idx`, `tasks_remind_idx`), never every task;
 * - the quorum is counted in the deciding transaction, under the task's row lock (`lockTask`: PostgreSQL's
 *   `FOR UPDATE`; SQLite's one writer holds it already), so two approvals committing at once both see each other.
 *
 * A task's id is a UUIDv7 made from the `createdAt` it was opened with (µs, the microseconds in the version's twelve
 * spare bits). The lists order by `(createdAt, id)` and page by `createdAt` exactly, as the runs list does: on
 * PostgreSQL the lists' pass may move a new task's `createdAt` past one committed meanwhile, and its id stays.
 */
import { type AnyColumn, and, asc, count, eq, lte, type SQL, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import type { Db, Dialect } from './dialect.ts'
import { type Micros, type Millis, microsFromMillis } from '../lib/time.ts'
import type { RunStatus } from '../lib/run-statuses.ts'
import type { TaskStatus } from '../lib/task-statuses.ts'
import { teamIdsOfMemberIn } from './members.ts'
import { nextCreatedAt } from './monotonic.ts'
import { type Op, plan, runPlan } from './op.ts'
import { notifyOnCommit, sendRaw } from './postgres/monotonic.ts'
import { TASKS_CHANNEL } from './postgres/queue.ts'
import { type PageCondition, pageIds, pageRows, rawNumber, statementOfShape, type TimeOrderedList } from './pages.ts'
import { placeholders, statement } from './query.ts'
import type { tasks } from './schema.ts'

export type TaskRow = typeof tasks.$inferSelect

/** An environment's tasks: their createdAt order. */
const TASK_TIMES = { name: 'tasks', table: 'tasks', scope: 'environmentId' } as const satisfies TimeOrderedList

const ph = (name: string) => sql.placeholder(name)

/** A UUIDv7 whose time is `createdAt`: its milliseconds in the 48-bit field, the microseconds in the next 12 bits. */
export function taskIdAt(createdAt: Micros): string {
  const ms = Math.floor(createdAt / 1000)
  const hex = ms.toString(16).padStart(12, '0')
  const sub = (createdAt - ms * 1000).toString(16).padStart(3, '0')
  const random = crypto.getRandomValues(new Uint8Array(8))
  random[0] = (random[0]! & 0x3f) | 0x80
  const tail = [...random].map((b) => b.toString(16).padStart(2, '0')).join('')
  return `${hex.slice(0, 8)}-${hex.slice(8)}-7${sub}-${tail.slice(0, 4)}-${tail.slice(4)}`
}

// ── Opening ───────────────────────────────────────────────────────────────────

/** A task to open: the step and run it belongs to, the question, who may decide (ids resolved), the deadline. */
export interface NewTask {
  runId: string
  stepIndex: number
  stepName: string
  environmentId: number
  workflowId: number
  teamId: number
  collectionId: number
  recordId: string
  requesterId: number
  title: string
  approvalsRequired: number
  allowRequester: boolean
  /** JSON text of the form's schema, or null. */
  form: string | null
  dueAt: number | null
  /** When the assignees are reminded (before `dueAt`), or null. */
  remindAt: number | null
  onTimeout: string
  /** JSON text of `escalateTo` as written, or null. */
  escalateTo: string | null
  teamIds: number[]
  userIds: number[]
}

const INSERT_TASK = statement('tasks.insert', ({ db, t }) =>
  db
    .insert(t.tasks)
    .values({
      ...placeholders('id', 'runId', 'stepIndex', 'stepName', 'environmentId', 'workflowId', 'teamId', 'collectionId', 'recordId', 'requesterId', 'title'),
      ...placeholders('approvalsRequired', 'allowRequester', 'form', 'dueAt', 'remindAt', 'onTimeout', 'escalateTo', 'createdAt'),
      status: 'open',
    }),
)
const INSERT_TEAM_ASSIGNEE = statement('tasks.assign-team', ({ db, t }) => db.insert(t.taskAssignees).values(placeholders('taskId', 'teamId', 'taskCreatedAt')))
const INSERT_USER_ASSIGNEE = statement('tasks.assign-user', ({ db, t }) => db.insert(t.taskAssignees).values(placeholders('taskId', 'userId', 'taskCreatedAt')))

/**
 * Opens the task (in the transaction of the step that asks), its assignees with it; answers its id and `createdAt`.
 * On SQLite its time is final; on PostgreSQL it is the time the task proposes, under no lock, and the lists' pass
 * lists the task (moving its time by the microseconds needed: its id stays).
 */
export function* insertTask(task: NewTask, now: Millis): Op<{ id: string; createdAt: Micros }> {
  const createdAt = yield* nextCreatedAt(TASK_TIMES, task.environmentId, now)
  const id = taskIdAt(createdAt)
  const { teamIds, userIds, ...columns } = task
  yield* INSERT_TASK.exec({ ...columns, id, createdAt })
  for (const teamId of teamIds) yield* INSERT_TEAM_ASSIGNEE.exec({ taskId: id, teamId, taskCreatedAt: createdAt })
  for (const userId of userIds) yield* INSERT_USER_ASSIGNEE.exec({ taskId: id, userId, taskCreatedAt: createdAt })
  yield* runPlan(announceTaskOpened, id, task.dueAt !== null)
  return { id, createdAt }
}

/**
 * What other writers and instances learn of an opened task. PostgreSQL's task waits in `tasks_unlisted` with the list
 * position it draws (after its transaction took its transaction id) until the lists' pass lists it — sent without
 * waiting for its answer —, and one with a deadline wakes every instance's deadline timer (`NOTIFY trellis_tasks`, once
 * the transaction committed: ./postgres/notify.ts), so that one armed for a later time re-reads the next. SQLite's one
 * writer lists each task at its commit, and its timer is this process's, told by the executor that opened the task.
 */
const announceTaskOpened = plan({
  sqlite: (_db: Db, _id: string, _withDeadline: boolean): void => {},
  postgres: async (db, id, withDeadline) => {
    await sendRaw(db, 'INSERT INTO tasks_unlisted (task_id) VALUES ($1)', [id])
    if (withDeadline) await notifyOnCommit(db, TASKS_CHANNEL)
  },
  why: "PostgreSQL's tasks commit at once, listed by the lists' pass in the order of their positions, and a NOTIFY after the commit wakes every instance's deadline timer; SQLite's one writer lists each at its commit and its timer is this process's",
})

const TASK_OF_STEP = statement('tasks.of-step', ({ db, t }) =>
  db
    .select({ id: t.tasks.id, status: t.tasks.status, createdAt: t.tasks.createdAt })
    .from(t.tasks)
    .where(and(eq(t.tasks.runId, ph('runId')), eq(t.tasks.stepIndex, ph('stepIndex')))),
)

/** The task a run's step opened, if any (`tasks_run_step_unique`: at most one). */
export function findTaskOfStep(runId: string, stepIndex: number): Op<{ id: string; status: TaskStatus; createdAt: number } | undefined> {
  return TASK_OF_STEP.row({ runId, stepIndex }) as Op<{ id: string; status: TaskStatus; createdAt: number } | undefined>
}

// ── Deciding ──────────────────────────────────────────────────────────────────

const TASK = statement('tasks.find', ({ db, t }) =>
  db
    .select({ task: t.tasks, workflowName: t.workflows.name, projectId: t.environments.projectId, project: { id: t.projects.id, name: t.projects.name, sso: t.projects.sso } })
    .from(t.tasks)
    .innerJoin(t.workflows, eq(t.workflows.id, t.tasks.workflowId))
    .innerJoin(t.environments, eq(t.environments.id, t.tasks.environmentId))
    .innerJoin(t.projects, eq(t.projects.id, t.environments.projectId))
    .where(eq(t.tasks.id, ph('id'))),
)

/** A task with its workflow's name and its project (the access decision's), or undefined. */
export function findTask(id: string) {
  return TASK.row({ id })
}

const LOCK_TASK = statement('tasks.lock', (d) => d.forUpdate(d.db.select().from(d.t.tasks).where(eq(d.t.tasks.id, ph('id')))))

/** The task, its row held until the transaction ends (PostgreSQL: `FOR UPDATE`): decisions on one task take turns. */
export function lockTask(id: string): Op<TaskRow | undefined> {
  return LOCK_TASK.row({ id })
}

const MAY_DECIDE = statement('tasks.assigned', ({ db, t }) =>
  db
    .select({ n: count() })
    .from(t.taskAssignees)
    .where(
      and(
        eq(t.taskAssignees.taskId, ph('taskId')),
        sql`(${t.taskAssignees.userId} = ${ph('userId')} OR ${t.taskAssignees.teamId} IN (SELECT team_id FROM team_members WHERE user_id = ${ph('userId')}))`,
      ),
    ),
)

/** Whether the task names the user, or one of the user's teams, among its assignees. */
export function* isAssignee(taskId: string, userId: number): Op<boolean> {
  return ((yield* MAY_DECIDE.row({ taskId, userId }))?.n ?? 0) > 0
}

/** A decision to record. */
export interface NewDecision {
  taskId: string
  userId: number
  decision: 'approve' | 'reject'
  comment: string | null
  /** JSON text of the form's values, or null. */
  input: string | null
  idempotencyKey: string | null
  requestHash: string | null
  createdAt: Micros
}

const INSERT_DECISION = statement('tasks.decide', ({ db, t }) =>
  db
    .insert(t.taskDecisions)
    .values(placeholders('taskId', 'userId', 'decision', 'comment', 'input', 'idempotencyKey', 'requestHash', 'createdAt'))
    .onConflictDoNothing({ target: [t.taskDecisions.taskId, t.taskDecisions.userId] })
    .returning({ userId: t.taskDecisions.userId }),
)

/** Records the decision; false when the user already decided the task (the primary key said so) and nothing was written. */
export function* insertDecision(decision: NewDecision): Op<boolean> {
  return (yield* INSERT_DECISION.rows({ ...decision })).length === 1
}

const DECISION_OF = statement('tasks.decision-of', ({ db, t }) =>
  db
    .select({ idempotencyKey: t.taskDecisions.idempotencyKey, requestHash: t.taskDecisions.requestHash })
    .from(t.taskDecisions)
    .where(and(eq(t.taskDecisions.taskId, ph('taskId')), eq(t.taskDecisions.userId, ph('userId')))),
)

/** The user's decision on the task: the key and body hash it was sent with. */
export function findDecision(taskId: string, userId: number) {
  return DECISION_OF.row({ taskId, userId })
}

const LATEST_DECISION = statement('tasks.latest-decision', ({ db, t }) =>
  db
    .select({ at: sql<number | null>`max(${t.taskDecisions.createdAt})`.mapWith(Number) })
    .from(t.taskDecisions)
    .where(eq(t.taskDecisions.taskId, ph('taskId'))),
)

/** A new decision's `createdAt` (µs): after every earlier decision on the task (read under the task's lock), so their order is time order. */
export function* nextDecisionCreatedAt(taskId: string, now: Millis): Op<Micros> {
  const latest = (yield* LATEST_DECISION.row({ taskId }))?.at ?? null
  const at = microsFromMillis(now)
  return (latest === null || latest < at ? at : latest + 1) as Micros
}

const APPROVALS = statement('tasks.approvals', ({ db, t }) =>
  db
    .select({ n: count() })
    .from(t.taskDecisions)
    .where(and(eq(t.taskDecisions.taskId, ph('taskId')), eq(t.taskDecisions.decision, 'approve'))),
)

/** The approvals the task has (this transaction's own included). */
export function* countApprovals(taskId: string): Op<number> {
  return (yield* APPROVALS.row({ taskId }))?.n ?? 0
}

const CLOSE = statement('tasks.close', ({ db, t }) =>
  db
    .update(t.tasks)
    .set({ status: sql`${ph('status')}`, closedAt: sql`${ph('now')}` })
    .where(and(eq(t.tasks.id, ph('id')), eq(t.tasks.status, 'open')))
    .returning({ id: t.tasks.id }),
)

/** Closes an open task with `status`; false when it was no longer open (nothing written). */
export function* closeTask(id: string, status: Exclude<TaskStatus, 'open'>, now: number): Op<boolean> {
  return (yield* CLOSE.rows({ id, status, now })).length === 1
}

const CANCEL_OF_RUN = statement('tasks.cancel-of-run', ({ db, t }) =>
  db
    .update(t.tasks)
    .set({ status: 'cancelled', closedAt: sql`${ph('now')}` })
    .where(and(eq(t.tasks.runId, ph('runId')), eq(t.tasks.status, 'open')))
    .returning({ id: t.tasks.id, stepIndex: t.tasks.stepIndex, stepName: t.tasks.stepName, title: t.tasks.title, dueAt: t.tasks.dueAt, requesterId: t.tasks.requesterId }),
)

/** Cancels the run's open task (a run waits on one at most); answers what it cancelled, as its outcome mail names it. */
export function cancelOpenTasksOfRun(runId: string, now: number) {
  return CANCEL_OF_RUN.rows({ runId, now })
}

// ── Deadlines and reminders ───────────────────────────────────────────────────

/** An open task's deadline not yet acted on: `tasks_due_idx`'s condition, word for word (SQLite matches it so). */
const DEADLINE_AHEAD = "status = 'open' and due_at is not null and not escalated"
/** An open task's reminder not yet sent: `tasks_remind_idx`'s condition. */
const REMINDER_AHEAD = "status = 'open' and remind_at is not null"
const deadlineAhead = () => sql.raw(DEADLINE_AHEAD)
const reminderAhead = () => sql.raw(REMINDER_AHEAD)

const NEXT_DUE = statement('tasks.next-due', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT
    ${n(`(SELECT due_at FROM tasks WHERE ${DEADLINE_AHEAD} ORDER BY due_at LIMIT 1)`)},
    ${n(`(SELECT remind_at FROM tasks WHERE ${REMINDER_AHEAD} ORDER BY remind_at LIMIT 1)`)}`)
})

/** When the next deadline or reminder of any task comes (epoch ms), or null: two index look-ups. */
export function* nextTaskDueAt(): Op<number | null> {
  const [[due, remind] = [null, null]] = (yield* NEXT_DUE.rows({})) as [number | null, number | null][]
  return due === null ? remind : remind === null ? due : Math.min(due, remind)
}

const DUE_DEADLINES = statement('tasks.due-deadlines', ({ db, t }) =>
  db
    .select({ id: t.tasks.id })
    .from(t.tasks)
    .where(and(deadlineAhead(), lte(t.tasks.dueAt, ph('now'))))
    .orderBy(asc(t.tasks.dueAt))
    .limit(ph('limit')),
)
const DUE_REMINDERS = statement('tasks.due-reminders', ({ db, t }) =>
  db
    .select({ id: t.tasks.id })
    .from(t.tasks)
    .where(and(reminderAhead(), lte(t.tasks.remindAt, ph('now'))))
    .orderBy(asc(t.tasks.remindAt))
    .limit(ph('limit')),
)

/** Up to `limit` tasks whose deadline has passed, and up to `limit` whose reminder is due, at `now`, earliest first. */
export function* dueTaskIds(now: number, limit: number): Op<{ deadlines: string[]; reminders: string[] }> {
  const deadlines = (yield* DUE_DEADLINES.rows({ now, limit })).map((row) => row.id)
  const reminders = (yield* DUE_REMINDERS.rows({ now, limit })).map((row) => row.id)
  return { deadlines, reminders }
}

const CLOSE_AT_DEADLINE = statement('tasks.close-at-deadline', ({ db, t }) =>
  db
    .update(t.tasks)
    .set({ status: sql`${ph('status')}`, closedAt: sql`${ph('now')}`, remindAt: null })
    .where(and(eq(t.tasks.id, ph('id')), deadlineAhead(), lte(t.tasks.dueAt, ph('now'))))
    .returning({ id: t.tasks.id }),
)

/** Closes the task with `status` because its deadline passed; false when another timer or a decision came first. */
export function* closeAtDeadline(id: string, status: 'expired' | 'approved' | 'rejected', now: number): Op<boolean> {
  return (yield* CLOSE_AT_DEADLINE.rows({ id, status, now })).length === 1
}

const ESCALATE = statement('tasks.escalate', ({ db, t }) =>
  db
    .update(t.tasks)
    .set({ escalated: true, remindAt: null })
    .where(and(eq(t.tasks.id, ph('id')), deadlineAhead(), lte(t.tasks.dueAt, ph('now'))))
    .returning({ id: t.tasks.id }),
)
const ADD_TEAM_ASSIGNEE = statement('tasks.escalate-team', (d) =>
  d.valueRows(sql`INSERT INTO task_assignees (task_id, team_id, escalated, task_created_at) SELECT ${ph('taskId')}, ${ph('teamId')}, true, created_at FROM tasks WHERE id = ${ph('taskId')} ON CONFLICT DO NOTHING RETURNING task_id`),
)
const ADD_USER_ASSIGNEE = statement('tasks.escalate-user', (d) =>
  d.valueRows(sql`INSERT INTO task_assignees (task_id, user_id, escalated, task_created_at) SELECT ${ph('taskId')}, ${ph('userId')}, true, created_at FROM tasks WHERE id = ${ph('taskId')} ON CONFLICT DO NOTHING RETURNING task_id`),
)

/**
 * Marks the task escalated because its deadline passed, and adds `people` to its assignees (marked as added by the
 * escalation; those it has already are left as they are); false when another timer or a decision came first.
 */
export function* escalateAtDeadline(id: string, people: { teamIds: number[]; userIds: number[] }, now: number): Op<boolean> {
  if ((yield* ESCALATE.rows({ id, now })).length === 0) return false
  for (const teamId of people.teamIds) yield* ADD_TEAM_ASSIGNEE.rows({ taskId: id, teamId })
  for (const userId of people.userIds) yield* ADD_USER_ASSIGNEE.rows({ taskId: id, userId })
  return true
}

const CLAIM_REMINDER = statement('tasks.remind', ({ db, t }) =>
  db
    .update(t.tasks)
    .set({ remindAt: null, remindedAt: sql`${ph('now')}` })
    .where(and(eq(t.tasks.id, ph('id')), reminderAhead(), lte(t.tasks.remindAt, ph('now'))))
    .returning({ id: t.tasks.id }),
)

/** Marks the task's reminder sent; false when it was (another timer came first) or the task is no longer open. */
export function* claimReminder(id: string, now: number): Op<boolean> {
  return (yield* CLAIM_REMINDER.rows({ id, now })).length === 1
}

const DECIDERS_TO_TELL = statement('tasks.deciders-to-tell', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT ${n('coalesce(a.user_id, m.user_id)')}, a.escalated
  FROM task_assignees a LEFT JOIN team_members m ON m.team_id = a.team_id
  WHERE a.task_id = ${ph('taskId')}
    AND coalesce(a.user_id, m.user_id) IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM task_decisions x WHERE x.task_id = a.task_id AND x.user_id = coalesce(a.user_id, m.user_id))`)
})

/**
 * The users a task waits for: its assignees, each team as its members, but those who decided already and the run's
 * user where they may not decide (`requesterId` unless `allowRequester`). `escalatedOnly`: those the escalation added.
 */
export function* decidersToTell(task: Pick<TaskRow, 'id' | 'requesterId' | 'allowRequester'>, escalatedOnly = false): Op<number[]> {
  const found = (yield* DECIDERS_TO_TELL.rows({ taskId: task.id })) as [number, boolean | number][]
  const ids = found.filter(([, escalated]) => !escalatedOnly || Boolean(escalated)).map(([userId]) => userId)
  return [...new Set(ids)].filter((userId) => task.allowRequester || userId !== task.requesterId)
}

/** Two halves, each naming its partial index's condition (`task_assignees_team_unique`, `…_user_unique`): else a scan of every assignee. */
const TASK_VIEWERS = statement('tasks.viewers', (d) => {
  const n = rawNumber(d)
  const ofTasks = d.inJsonArray(sql.raw('a.task_id'), 'ids', 'text')
  return d.valueRows(sql`SELECT a.task_id, ${n('m.user_id')} FROM task_assignees a JOIN team_members m ON m.team_id = a.team_id WHERE a.team_id IS NOT NULL AND ${ofTasks}
  UNION ALL SELECT a.task_id, ${n('a.user_id')} FROM task_assignees a WHERE a.user_id IS NOT NULL AND ${ofTasks}`)
})

/**
 * The users each of these tasks names as assignees, each team as its members (`namesAsAssignee`, for many tasks at
 * once): by task id; a task without any (or gone) is left out.
 */
export function* assigneeUsersOf(taskIds: readonly string[]): Op<Map<string, Set<number>>> {
  const byTask = new Map<string, Set<number>>()
  if (taskIds.length === 0) return byTask
  for (const [taskId, userId] of (yield* TASK_VIEWERS.rows({ ids: JSON.stringify(taskIds) })) as [string, number][]) {
    let users = byTask.get(taskId)
    if (users === undefined) byTask.set(taskId, (users = new Set()))
    users.add(userId)
  }
  return byTask
}

// ── Reading ───────────────────────────────────────────────────────────────────

/** A decision as rendered and as templates read it (`decidedBy`), oldest first. */
export interface DecisionToRender {
  taskId: string
  user: { id: number; username: string; email: string }
  decision: 'approve' | 'reject'
  comment: string | null
  input: string | null
  createdAt: Micros
}

const DECISIONS = statement('tasks.decisions', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT x.task_id, ${n('u.id')}, u.username, u.email, x.decision, x.comment, x.input, ${n('x.created_at')}
  FROM task_decisions x JOIN users u ON u.id = x.user_id
  WHERE ${d.inJsonArray(sql.raw('x.task_id'), 'ids', 'text')}
  ORDER BY x.created_at, u.id`)
})

/** The decisions on these tasks, oldest first. */
export function* findDecisions(taskIds: string[]): Op<DecisionToRender[]> {
  if (taskIds.length === 0) return []
  const found = (yield* DECISIONS.rows({ ids: JSON.stringify(taskIds) })) as [string, number, string, string, 'approve' | 'reject', string | null, string | null, Micros][]
  return found.map(([taskId, id, username, email, decision, comment, input, createdAt]) => ({ taskId, user: { id, username, email }, decision, comment, input, createdAt }))
}

// The project's name in a scalar subquery: with one more joined table PostgreSQL plans the joins apart from the ids'
// subquery (past its from_collapse_limit of 8) and joined every task to its run before picking the page's (600 ms at
// 200,000 tasks, where this reads 50 by their keys in 2 ms).
const TASKS_TO_RENDER = statement('tasks.render', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT k.id, k.status, k.step_name, k.title, k.run_id, w.name, ${n('v.version')}, k.record_id, c.name, e.name, tm.name,
    ${n('k.approvals_required')}, k.form, ${n('k.due_at')}, k.escalated, ${n('k.created_at')}, ${n('k.closed_at')},
    (SELECT p.name FROM projects p WHERE p.id = e.project_id), r.status, ${n('r.user_id')}
  FROM tasks k
    JOIN runs r ON r.id = k.run_id
    JOIN workflows w ON w.id = k.workflow_id
    JOIN workflow_versions v ON v.id = r.workflow_version_id
    JOIN environments e ON e.id = k.environment_id
    JOIN teams tm ON tm.id = k.team_id
    LEFT JOIN collections c ON c.id = k.collection_id
  WHERE ${d.inJsonArray(sql.raw('k.id'), 'ids', 'text')}`)
})

const ASSIGNEES_TO_RENDER = statement('tasks.render.assignees', (d) => {
  const n = rawNumber(d)
  return d.valueRows(sql`SELECT a.task_id, tm.name, ${n('u.id')}, u.username, u.email
  FROM task_assignees a LEFT JOIN teams tm ON tm.id = a.team_id LEFT JOIN users u ON u.id = a.user_id
  WHERE ${d.inJsonArray(sql.raw('a.task_id'), 'ids', 'text')}
  ORDER BY tm.name, u.email`)
})

/** A task as its rendering reads it. */
export interface TaskToRender {
  id: string
  status: TaskStatus
  step: string
  title: string
  runId: string
  workflowName: string
  version: number
  recordId: string
  collection: string | null
  environment: string
  team: string
  approvalsRequired: number
  form: string | null
  dueAt: number | null
  escalated: boolean
  createdAt: Micros
  closedAt: number | null
  project: string
  /** The run's status now and its user (the console's task page shows the run to those who may open it). */
  runStatus: RunStatus
  runUserId: number
  teams: string[]
  users: { id: number; username: string; email: string }[]
  decisions: DecisionToRender[]
}

/** The tasks with these ids (in no order), each with its names, assignees and decisions. */
export function* loadTasksToRender(ids: string[]): Op<TaskToRender[]> {
  if (ids.length === 0) return []
  const values = { ids: JSON.stringify(ids) }
  const rows = (yield* TASKS_TO_RENDER.rows(values)) as unknown[][]
  const assignees = (yield* ASSIGNEES_TO_RENDER.rows(values)) as [string, string | null, number | null, string | null, string | null][]
  const decisions = yield* findDecisions(ids)
  return rows.map((row) => {
    const [id, status, step, title, runId, workflowName, version, recordId, collection, environment, team, approvalsRequired, form, dueAt, escalated, createdAt, closedAt, project, runStatus, runUserId] = row as [
      string, TaskStatus, string, string, string, string, number, string, string | null, string, string, number, string | null, number | null, boolean | number, Micros, number | null,
      string, RunStatus, number,
    ]
    const mine = assignees.filter((a) => a[0] === id)
    return {
      id, status, step, title, runId, workflowName, version, recordId, collection, environment, team, approvalsRequired, form, dueAt,
      escalated: Boolean(escalated), createdAt, closedAt, project, runStatus, runUserId,
      teams: mine.flatMap(([, name]) => (name === null ? [] : [name])),
      users: mine.flatMap(([, , userId, username, email]) => (userId === null ? [] : [{ id: userId, username: username!, email: email! }])),
      decisions: decisions.filter((x) => x.taskId === id),
    }
  })
}

/** A task list's filters (names resolved to ids); undefined ones are left out. */
export interface TaskFilters {
  status?: TaskStatus
  workflowIds?: number[]
  teamId?: number
  recordId?: string
  /** Only the tasks this user may see (a member who is not a project admin): assigned to them or their teams, or asked by them. */
  visibleTo?: number
  /** Only the open tasks this user may decide now; `asAdmin`: a project admin, who may decide any. */
  decidableBy?: { userId: number; asAdmin: boolean }
}

/**
 * The task `taskId` names the user of placeholder `user`, or one of their teams, among its assignees: who sees a task
 * as a member (beside the run's user), for the lists, the inbox and a member's run-events stream.
 */
export const namesAsAssignee = (taskId: AnyColumn | SQL, user: string): SQL =>
  sql`EXISTS (SELECT 1 FROM task_assignees a WHERE a.task_id = ${taskId} AND (a.user_id = ${ph(user)} OR a.team_id IN (SELECT team_id FROM team_members WHERE user_id = ${ph(user)})))`

/** The task names the user or one of the user's teams (placeholder `me`). */
const assignedTo = (d: { t: { tasks: { id: AnyColumn } } }) => namesAsAssignee(d.t.tasks.id, 'me')

/**
 * One page of an environment's task ids, newest first (limit + 1 of them); a statement per shape of present filters.
 * A member's `decidableBy` page walks their own assignments (`throughAssignments`), every other page the
 * environment's tasks.
 */
export function* pageTaskIds(environmentId: number, filters: TaskFilters, dates: DateFilter[], limit: number): Op<string[]> {
  const { workflowIds, status, teamId, recordId, visibleTo, decidableBy } = filters
  if (workflowIds?.length === 0) return []
  const ofWorkflows: PageCondition | undefined =
    workflowIds === undefined
      ? undefined
      : { condition: ({ t, inJsonArray }) => inJsonArray(t.tasks.workflowId, 'workflowIds', 'integer'), values: { workflowIds: JSON.stringify(workflowIds) } }
  const visible: PageCondition | undefined =
    visibleTo === undefined ? undefined : { condition: (d) => sql`(${d.t.tasks.requesterId} = ${ph('me')} OR ${assignedTo(d)})`, values: { me: visibleTo } }
  const decidable: PageCondition | undefined =
    decidableBy === undefined
      ? undefined
      : {
          condition: (d) =>
            sql`${d.t.tasks.status} = 'open' AND (${d.t.tasks.allowRequester} OR ${d.t.tasks.requesterId} <> ${ph('me')})
              AND NOT EXISTS (SELECT 1 FROM task_decisions x WHERE x.task_id = ${d.t.tasks.id} AND x.user_id = ${ph('me')})`,
          values: { me: decidableBy.userId },
        }
  const query = { name: 'tasks', table: 'tasks', equal: { environmentId, status, teamId, recordId }, dates, watermark: 'tasks', byTime: true } as const
  if (decidableBy !== undefined && !decidableBy.asAdmin) {
    // Every task of these walks names the member: `visible` holds already.
    return yield* throughAssignments(environmentId, decidableBy.userId, limit, (through) =>
      pageRows<string, 'tasks'>({ ...query, extra: { workflowIds: ofWorkflows, decidable }, through }, limit),
    )
  }
  return yield* pageIds<string, 'tasks'>({ ...query, extra: { workflowIds: ofWorkflows, visible, decidable } }, limit)
}

/**
 * The newest `limit + 1` of a member's tasks a page picks, walked from their assignments rather than from the
 * environment's tasks (among which theirs may lie far apart): one walk of `task_assignees_user_idx` for the tasks that
 * name them and one of `task_assignees_team_idx` per team of theirs in the project, each newest first and stopping
 * at `limit + 1`, then merged. The cost follows the member's own assignments, not everyone's open tasks.
 */
function* throughAssignments(
  environmentId: number,
  userId: number,
  limit: number,
  page: (through: { table: 'taskAssignees'; key: 'taskId'; column: 'userId' | 'teamId'; value: number; time: 'taskCreatedAt' }) => Op<{ id: string; at?: number }[]>,
): Op<string[]> {
  const walks = [yield* page({ table: 'taskAssignees', key: 'taskId', column: 'userId', value: userId, time: 'taskCreatedAt' })]
  for (const teamId of yield* teamIdsOfMemberIn(environmentId, userId)) walks.push(yield* page({ table: 'taskAssignees', key: 'taskId', column: 'teamId', value: teamId, time: 'taskCreatedAt' }))
  // Merged in the list's order, (createdAt, id) newest first, by the times the walks read beside the ids.
  const merged = new Map(walks.flat().map((row) => [row.id, row.at!]))
  const newestFirst = (a: string, b: string) => merged.get(b)! - merged.get(a)! || (a < b ? 1 : a > b ? -1 : 0)
  return [...merged.keys()].sort(newestFirst).slice(0, limit + 1)
}

const RECORDED_TASK_STEPS = statement('tasks.recorded-outputs', ({ db, t }) =>
  db
    .select({ name: t.runSteps.name, output: t.runSteps.output })
    .from(t.runSteps)
    .where(and(eq(t.runSteps.runId, ph('runId')), eq(t.runSteps.type, 'task')))
    .orderBy(asc(t.runSteps.stepIndex)),
)

/** The outputs recorded by a run's task steps (its own and those a retry carried over), by step name. */
export function* recordedTaskOutputs(runId: string): Op<Map<string, unknown>> {
  return new Map((yield* RECORDED_TASK_STEPS.rows({ runId })).flatMap((row) => (row.output === null ? [] : [[row.name, JSON.parse(row.output) as unknown] as const])))
}

// ── A person's inbox ──────────────────────────────────────────────────────────

/** Which open tasks an inbox shows: `mine` those the person may decide now, `teams` those assigned to one of their teams, `all` every one of the projects they administer. */
export type InboxScope = 'mine' | 'teams' | 'all'

/** An inbox's filters: its scope, a workflow's name, only those past their deadline at `overdueAt` (ms), only ids before `before` (the next page). */
export interface InboxFilters {
  scope: InboxScope
  workflowName?: string
  overdueAt?: number
  before?: string
}

/**
 * Where an inbox finds its tasks, each source walked newest first and stopped at the page (or the count's cap), so the
 * cost follows the person's own projects and assignments, never everyone's open tasks:
 * - `administered`: the open tasks of the environments of the projects they administer (`tasks_open_env_idx`);
 * - `named`: the tasks naming them (`task_assignees_user_idx`, in task order);
 * - `teams`: the tasks naming one of their teams (`task_assignees_team_idx` per team).
 * Each joins the task's project and the person's membership in it: a task of a project they left is not theirs.
 */
const PLACE = sql`JOIN environments e ON e.id = k.environment_id
    JOIN projects p ON p.id = e.project_id
    JOIN project_members m ON m.project_id = e.project_id AND m.user_id = ${ph('me')}`
interface InboxSource {
  name: string
  from: SQL
  where: SQL
  /** The task's id as the walk reads it, in the order of its index (an assignment's own `task_id`). */
  id: SQL
  /** The task's createdAt as the walk reads it (an assignment's own copy): the walk's order is (at, id). */
  at: SQL
  /** A task may come twice (named to two of their teams). */
  distinct?: boolean
}
const ADMINISTERED: InboxSource = { name: 'administered', from: sql`FROM tasks k ${PLACE}`, where: sql`m.role = 'admin'`, id: sql`k.id`, at: sql`k.created_at` }
const NAMED: InboxSource = {
  name: 'named',
  from: sql`FROM task_assignees a JOIN tasks k ON k.id = a.task_id ${PLACE}`,
  where: sql`a.user_id = ${ph('me')}`,
  id: sql`a.task_id`,
  at: sql`a.task_created_at`,
}
const OF_TEAMS: InboxSource = {
  name: 'of_teams',
  from: sql`FROM team_members tm JOIN task_assignees a ON a.team_id = tm.team_id JOIN tasks k ON k.id = a.task_id ${PLACE}`,
  where: sql`tm.user_id = ${ph('me')}`,
  id: sql`a.task_id`,
  at: sql`a.task_created_at`,
  distinct: true,
}

/** Open, and this sign-in may open its project (an SSO project only with SSO: `viaSso` 1 or 0). */
const MAY_OPEN = sql`k.status = 'open' AND (NOT p.sso OR ${ph('viaSso')} = 1)`
/**
 * Each scope's sources and what a task of them must be. `mine` is the tasks API's `assignee=me`: assigned to them or
 * one of their teams (any, in a project they administer), not decided by them yet, not their own request unless the
 * step allows it; `teams` those assigned to one of their teams; `all` every open one of the projects they administer.
 */
const INBOX_SCOPES: Record<InboxScope, { sources: InboxSource[]; condition: SQL }> = {
  mine: {
    sources: [ADMINISTERED, NAMED, OF_TEAMS],
    condition: sql`${MAY_OPEN} AND (k.allow_requester OR k.requester_id <> ${ph('me')})
        AND NOT EXISTS (SELECT 1 FROM task_decisions x WHERE x.task_id = k.id AND x.user_id = ${ph('me')})`,
  },
  teams: { sources: [OF_TEAMS], condition: MAY_OPEN },
  all: { sources: [ADMINISTERED], condition: MAY_OPEN },
}

/**
 * The ids (and times) of a scope's tasks, each source's first `cap` (after `filters`, given the walked source), one
 * source after another, duplicates left in: for a page (`page`), its newest by (createdAt, id) of the listed tasks
 * (`Dialect.listed`: a page is paged on); for a count, any — a task opened a moment ago counts before it is listed.
 */
function inboxSourceIds(d: Dialect, scope: InboxScope, filters: (source: InboxSource) => SQL, cap: number, page: boolean): SQL {
  const { sources, condition } = INBOX_SCOPES[scope]
  const walks = sources.map(
    (s) => sql`SELECT id, at FROM (SELECT ${s.distinct ? sql`DISTINCT ` : sql``}${s.id} AS id, ${s.at} AS at ${s.from}
      WHERE ${s.where} AND ${condition} ${page ? sql`AND ${d.listed('tasks', s.id)} ` : sql``}${filters(s)} ${page ? sql`ORDER BY ${s.at} DESC, ${s.id} DESC ` : sql``}LIMIT ${sql.raw(String(cap))}) AS ${sql.raw(s.name)}`,
  )
  return sql.join(walks, sql` UNION ALL `)
}

/** The header's count stops here (shown as `99+`): counting further would walk every task waiting for a busy person. */
export const INBOX_COUNT_CAP = 100

const INBOX_COUNT = statement('tasks.inbox-count', (d) =>
  d.valueRows(sql`SELECT ${rawNumber(d)('count(DISTINCT id)')} FROM (${inboxSourceIds(d, 'mine', () => sql``, INBOX_COUNT_CAP, false)}) AS waiting`),
)

/** How many tasks wait for the person now (the console header's `Inbox`): the inbox's `mine`, counted up to `INBOX_COUNT_CAP`. */
export function* countInboxTasks(userId: number, viaSso: boolean): Op<number> {
  const [row] = (yield* INBOX_COUNT.rows({ me: userId, viaSso: viaSso ? 1 : 0 })) as [number][]
  return Math.min(Number(row?.[0] ?? 0), INBOX_COUNT_CAP)
}

/** One page of a person's inbox (limit + 1 ids), newest first; a statement per shape of present filters. */
export function* pageInboxTaskIds(userId: number, viaSso: boolean, filters: InboxFilters, limit: number): Op<string[]> {
  const { scope, workflowName, overdueAt, before } = filters
  const shape = `tasks.inbox.${scope}.${workflowName === undefined ? '' : 'w'}${overdueAt === undefined ? '' : 'o'}${before === undefined ? '' : 'b'}.${limit}`
  const narrowed = (source: InboxSource) => sql`
    ${workflowName === undefined ? sql`` : sql`AND k.workflow_id IN (SELECT w.id FROM workflows w WHERE w.name = ${ph('workflowName')})`}
    ${overdueAt === undefined ? sql`` : sql`AND k.due_at IS NOT NULL AND k.due_at < ${ph('overdueAt')}`}
    ${before === undefined ? sql`` : sql`AND (${source.at}, ${source.id}) < (SELECT b.created_at, b.id FROM tasks b WHERE b.id = ${ph('before')})`}`
  const query = statementOfShape(shape, (d) =>
    d.valueRows(sql`SELECT DISTINCT id, at FROM (${inboxSourceIds(d, scope, narrowed, limit + 1, true)}) AS inbox ORDER BY at DESC, id DESC LIMIT ${sql.raw(String(limit + 1))}`),
  )
  const values = { me: userId, viaSso: viaSso ? 1 : 0, ...(workflowName === undefined ? {} : { workflowName }), ...(overdueAt === undefined ? {} : { overdueAt }), ...(before === undefined ? {} : { before }) }
  return ((yield* query.rows(values)) as [string, number][]).map(([id]) => id)
}

const OPEN_TASK_OF_RUN = statement('tasks.open-of-run', ({ db, t }) =>
  db
    .select({ id: t.tasks.id })
    .from(t.tasks)
    .where(and(eq(t.tasks.runId, ph('runId')), eq(t.tasks.status, 'open'))),
)

/** The run's open task (none or one: a run waits on one task at most), as a list of ids. */
export function* openTaskOfRun(runId: string): Op<string[]> {
  return (yield* OPEN_TASK_OF_RUN.rows({ runId })).map((row) => row.id)
}

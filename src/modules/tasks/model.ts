/** Tasks as the API renders them, and a decision's body. */
import { t } from 'elysia'
import { EnvironmentPageParameters, pageSchema } from '../../http/list-schema.ts'
import { Integer, IsoDateTime, IsoDateTimeOrNull, renderedAnswer } from '../../http/schemas.ts'
import { TASK_DECISIONS, TASK_STATUSES } from '../../lib/task-statuses.ts'
import { EnvironmentRef, TeamRef, UserObject } from '../directory/model.ts'

export const TaskIdParams = t.Object({ taskId: t.String({ format: 'uuid' }) })

/** The longest comment a decision takes. */
export const MAX_DECISION_COMMENT = 10_000

export const DecisionBody = t.Object(
  {
    decision: t.Union(TASK_DECISIONS.map((d) => t.Literal(d)), { description: 'approve or reject (one rejection rejects the task)' }),
    comment: t.Optional(t.String({ maxLength: MAX_DECISION_COMMENT, description: 'Why (the activity log records it)' })),
    input: t.Optional(t.Record(t.String(), t.Unknown(), { description: "The form's values (an object), validated against the task's `form`" })),
  },
  { additionalProperties: false },
)

const Decision = t.Object({
  user: UserObject,
  decision: t.UnionEnum(TASK_DECISIONS),
  comment: t.Union([t.String(), t.Null()]),
  input: t.Union([t.Record(t.String(), t.Unknown()), t.Null()], { description: "The form's values as sent" }),
  createdAt: IsoDateTime,
})

export const Task = renderedAnswer(
  t.Object(
    {
      object: t.Literal('task'),
      id: t.String({ format: 'uuid' }),
      status: t.UnionEnum(TASK_STATUSES),
      step: t.String({ description: "The task step's name" }),
      title: t.String(),
      run: t.Object({ id: t.String({ format: 'uuid' }), workflow: t.Object({ name: t.String(), version: Integer() }) }),
      recordId: t.String(),
      collection: t.Union([t.Object({ object: t.Literal('collection'), name: t.String() }), t.Null()], { description: 'null when the collection was deleted' }),
      environment: EnvironmentRef,
      team: TeamRef,
      assignees: t.Object({ teams: t.Array(t.String()), users: t.Array(UserObject) }, { description: 'Who may decide besides the project admins' }),
      approvalsRequired: Integer({ minimum: 1 }),
      approvals: Integer({ minimum: 0 }),
      decisions: t.Array(Decision, { description: 'Oldest first' }),
      form: t.Union([t.Record(t.String(), t.Unknown()), t.Null()], { description: 'The JSON Schema a decider fills in, or null' }),
      dueAt: IsoDateTimeOrNull,
      escalated: t.Boolean(),
      createdAt: IsoDateTime,
      closedAt: IsoDateTimeOrNull,
    },
    { $id: 'Task' },
  ),
)

export const TaskPage = renderedAnswer(pageSchema(Task, EnvironmentPageParameters, 'A page of tasks, newest first'))

/**
 * Tasks through the API (docs/api.md "Tasks"): an environment's tasks as the caller sees them, one task, and a
 * decision. A console session or any live token (scopes `tasks:read`, `tasks:write`; `all` holds both), past the
 * project access decision (the SSO rule included) for the project the path names or the task is found in.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { idempotencyKeyOf } from '../../http/idempotency-key.ts'
import { environmentPage, MAX_NAME_LENGTH, parseDateFilters, parseEnumParameter, parseStringParameter, queryOf } from '../../http/list.ts'
import { enumQuery, listParameters, textFilter } from '../../http/list-schema.ts'
import { notFound } from '../../lib/errors.ts'
import { TASK_STATUSES } from '../../lib/task-statuses.ts'
import { callerProject, requireCallerScope } from '../auth/service.ts'
import { environmentOf, isAdminOf } from '../directory/projects.ts'
import { DecisionBody, Task, TaskIdParams, TaskPage } from './model.ts'
import { decideTask, listTaskIds, renderTasks, visibleTask } from './service.ts'

const TASK_DATE_FIELDS = ['createdAt'] as const

export function tasksModule(deps: AppDeps) {
  /** The task as the API shows it now (404 when its run was deleted meanwhile). */
  const rendered = async (taskId: string) => {
    const [task] = await read(deps.store, renderTasks([taskId]))
    if (task === undefined) throw notFound(`Task ${taskId} not found`)
    return task
  }
  return new Elysia({ name: 'tasks', tags: ['tasks'] })
    .use(authPlugin(deps))
    .get(
      '/v1/project/:projectName/environment/:environmentName/tasks',
      ({ params, request, caller }) => {
        let viewer: { userId: number; admin: boolean }
        return environmentPage(queryOf(request), params, {
          filters: (query) => ({
            status: parseEnumParameter(query, 'status', TASK_STATUSES),
            assignee: parseEnumParameter(query, 'assignee', ['me'] as const),
            workflowName: parseStringParameter(query, 'workflowName', MAX_NAME_LENGTH),
            teamName: parseStringParameter(query, 'teamName', MAX_NAME_LENGTH),
            recordId: parseStringParameter(query, 'recordId'),
          }),
          authorize: async () => {
            requireCallerScope(caller, 'tasks:read')
            const project = await read(deps.store, callerProject(caller, params.projectName))
            viewer = { userId: caller.user.id, admin: await read(deps.store, isAdminOf(caller.user.id, project.id)) }
          },
          where: environmentOf(deps.store),
          ids: ({ environment }, filters, query, limit) => read(deps.store, listTaskIds(environment, filters, parseDateFilters(query, TASK_DATE_FIELDS), limit, viewer)),
          render: (ids) => read(deps.store, renderTasks(ids)),
        })
      },
      {
        userCall: true,
        response: { 200: TaskPage, ...errorResponses(400, 404) },
        detail: {
          operationId: 'listTasks',
          summary: 'List the tasks of an environment the caller sees, newest first',
          description:
            'Project admins see every task; a member sees the tasks assigned to them or to one of their teams, and those of runs they started. ' +
            'Same envelope, `limit` rules and paging (`createdAt.lt`) as notes. Scope `tasks:read`.',
          parameters: listParameters(
            {
              status: enumQuery('Only tasks in this status', TASK_STATUSES),
              assignee: enumQuery('`me`: only the open tasks the caller may decide now (assigned to them or their teams, or any for a project admin; not decided by them yet; not their own request unless allowed)', ['me']),
              workflowName: { description: 'Only tasks of this workflow', schema: textFilter(MAX_NAME_LENGTH) },
              teamName: { description: "Only tasks of workflows of this team", schema: textFilter(MAX_NAME_LENGTH) },
              recordId: { description: 'Only tasks on this record' },
            },
            TASK_DATE_FIELDS,
          ),
        },
      },
    )
    .get(
      '/v1/tasks/:taskId',
      async ({ params, caller }) => {
        requireCallerScope(caller, 'tasks:read')
        await read(deps.store, visibleTask(caller, params.taskId))
        return rendered(params.taskId)
      },
      {
        userCall: true,
        params: TaskIdParams,
        response: { 200: Task, ...errorResponses(400, 404) },
        detail: { operationId: 'getTask', summary: 'Read a task: its question, assignees, decisions and form (404 unless the caller sees it). Scope `tasks:read`.' },
      },
    )
    .post(
      '/v1/tasks/:taskId/decisions',
      async ({ params, body, caller, request, set }) => {
        requireCallerScope(caller, 'tasks:write')
        const idempotencyKey = idempotencyKeyOf(request)
        const decided = await write(deps.store, () => decideTask(deps.clock, params.taskId, body, { caller, idempotencyKey, mail: deps.mail }))
        if (decided.closed) deps.executor?.notify()
        if (decided.replayed) set.headers['idempotent-replayed'] = 'true'
        return rendered(params.taskId)
      },
      {
        userCall: true,
        params: TaskIdParams,
        body: DecisionBody,
        response: { 200: Task, ...errorResponses(400, 403, 404, 409, 422) },
        detail: {
          operationId: 'decideTask',
          summary: 'Approve or reject a task (each assignee once); answers the task',
          description:
            'One decision per user per task, whatever races: the database decides. A rejection closes the task `rejected`; the approval that reaches ' +
            '`approvalsRequired` closes it `approved`; either wakes the waiting run. 403 `not_an_assignee` (project admins may always decide), ' +
            "403 `requester_cannot_decide` (the run's user, unless the step allows it), 409 `already_decided`, 409 `task_closed` (with the task's `status`), " +
            '422 `invalid_input` naming each field of `input` that the form refuses as a JSON pointer (`details`). With an `Idempotency-Key`, a repeat of the ' +
            'same decision answers 200 again with `Idempotent-Replayed: true`; the same key with another body is 422 `idempotency_key_reused`. Scope `tasks:write`.',
          parameters: [
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              description: 'Makes the decision safe to retry: a repeat with the same key and body is answered again instead of 409 already_decided',
              schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
            },
          ],
        },
      },
    )
}

/**
 * Tasks through the API (docs/api.md "Tasks"): an environment's tasks as the caller sees them, one task, and a
 * decision. A console session or any live token (scopes `tasks:read`, `tasks:write`; `all` holds both), past the
 * project access decision (the SSO rule included) for the project the path names or the task is found in.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { idempotencyKeyOf } from '../../http/idempotency-key.ts'
import { queryOf } from '../../http/list.ts'
import { DecisionBody, Task, TaskIdParams, TaskPage } from './model.ts'
import { decideTaskAs, readTaskAs } from './calls.ts'
import { TASK_LIST_PARAMETERS, tasksPageAs } from './query.ts'

export function tasksModule(deps: AppDeps) {
  return new Elysia({ name: 'tasks', tags: ['tasks'] })
    .use(authPlugin(deps))
    .get(
      '/v1/project/:projectName/environment/:environmentName/tasks',
      ({ params, request, caller }) => tasksPageAs(deps.store, caller, params, queryOf(request)),
      {
        userCall: true,
        response: { 200: TaskPage, ...errorResponses(400, 404) },
        detail: {
          operationId: 'listTasks',
          summary: 'List the tasks of an environment the caller sees, newest first',
          description:
            'Project admins see every task; a member sees the tasks assigned to them or to one of their teams, and those of runs they started. ' +
            'Same envelope, `limit` rules and paging (`createdAt.lt`) as notes. Scope `tasks:read`.',
          parameters: TASK_LIST_PARAMETERS,
        },
      },
    )
    .get(
      '/v1/tasks/:taskId',
      ({ params, caller }) => readTaskAs(deps.store, caller, params.taskId),
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
        const { task, replayed } = await decideTaskAs(deps, caller, params.taskId, body, idempotencyKeyOf(request))
        if (replayed) set.headers['idempotent-replayed'] = 'true'
        return task
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

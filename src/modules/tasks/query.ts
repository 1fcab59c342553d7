/** The tasks list as the API route and the MCP tool run it: its query parameters, parsed and documented. */
import type { Store } from '../../db/store.ts'
import { read, readListed } from '../../db/read.ts'
import { enumQuery, listParameters, textFilter } from '../../http/list-schema.ts'
import { environmentPage, MAX_NAME_LENGTH, parseDateFilters, parseEnumParameter, parseStringParameter, type Query } from '../../http/list.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { TASK_STATUSES } from '../../lib/task-statuses.ts'
import { callerProject, requireCallerScope } from '../auth/service.ts'
import { environmentOf, isAdminOf } from '../directory/projects.ts'
import { listTaskIds, renderTasks } from './service.ts'

const TASK_DATE_FIELDS = ['createdAt'] as const

/** The list's documented query parameters (/openapi.json, and the MCP tool's arguments). */
export const TASK_LIST_PARAMETERS = listParameters(
  {
    status: enumQuery('Only tasks in this status', TASK_STATUSES),
    assignee: enumQuery('`me`: only the open tasks the caller may decide now (assigned to them or their teams, or any for a project admin; not decided by them yet; not their own request unless allowed)', ['me']),
    workflowName: { description: 'Only tasks of this workflow', schema: textFilter(MAX_NAME_LENGTH) },
    teamName: { description: 'Only tasks of workflows of this team', schema: textFilter(MAX_NAME_LENGTH) },
    recordId: { description: 'Only tasks on this record' },
  },
  TASK_DATE_FIELDS,
)

/**
 * One page of an environment's tasks as the caller sees them, newest first (scope `tasks:read`): 400 naming a bad
 * parameter, 404 an unknown project or environment, the project's access decision (the SSO rule included).
 */
export function tasksPageAs(store: Store, caller: AccountCaller, place: { projectName: string; environmentName: string }, query: Query) {
  let viewer: { userId: number; admin: boolean }
  return environmentPage(query, place, {
    filters: (query) => ({
      status: parseEnumParameter(query, 'status', TASK_STATUSES),
      assignee: parseEnumParameter(query, 'assignee', ['me'] as const),
      workflowName: parseStringParameter(query, 'workflowName', MAX_NAME_LENGTH),
      teamName: parseStringParameter(query, 'teamName', MAX_NAME_LENGTH),
      recordId: parseStringParameter(query, 'recordId'),
    }),
    authorize: async () => {
      requireCallerScope(caller, 'tasks:read')
      const project = await read(store, callerProject(caller, place.projectName))
      viewer = { userId: caller.user.id, admin: await read(store, isAdminOf(caller.user.id, project.id)) }
    },
    where: environmentOf(store),
    ids: ({ environment }, filters, query, limit) => readListed(store, 'tasks', listTaskIds(environment, filters, parseDateFilters(query, TASK_DATE_FIELDS), limit, viewer)),
    render: (ids) => read(store, renderTasks(ids)),
  })
}

/**
 * The MCP tools: each one REST operation of the public API, called through the same function its route calls, with the
 * route's rights (`need`: the scope, and the role where the route asks one) and its answers — a 4xx becomes a tool
 * error with the same status, code and message. Arguments: a list tool takes the route's query parameters (parsed by
 * the route's own parsers), the others the route's body fields and path names (its TypeBox model, checked here).
 * Every tool acts in the token's project; its writes log `via MCP`.
 */
import type { TSchema } from 'elysia'
import { read, readListed } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import type { ProjectNeed, TokenIdentity } from '../../lib/callers.ts'
import { invalidField, invalidFields } from '../../lib/errors.ts'
import { unstorableTextPath } from '../../lib/storable-text.ts'
import { schemaProblems } from '../../lib/validation.ts'
import { ACTIVITY_LOG_PARAMETERS, activityLogsPage } from '../activity-logs/query.ts'
import { ADMIN_LOG_PARAMETERS, adminLogsPage } from '../admin-logs/query.ts'
import { tokenAccountCaller } from '../auth/service.ts'
import { requireProject } from '../directory/projects.ts'
import { NOTE_LIST_PARAMETERS, notesPage } from '../notes/query.ts'
import { addMessageToNote, createNoteNamed, renderNotes } from '../notes/service.ts'
import { cancelRunAs, readRunAs, retryRunAs, type RunCallDeps, startRunAs } from '../runs/calls.ts'
import { decideTaskAs, readTaskAs, type TaskCallDeps } from '../tasks/calls.ts'
import { TASK_LIST_PARAMETERS, tasksPageAs } from '../tasks/query.ts'
import { workflowsReachableBy } from '../workflows/service.ts'
import { patchRecordAs, readRecordAs, type RecordCallDeps } from '../records/calls.ts'
import { recordsPageAs } from '../records/query.ts'
import {
  AddNoteMessageArguments,
  CreateNoteArguments,
  DecideTaskArguments,
  ListRecordsArguments,
  ListWorkflowsArguments,
  RecordArguments,
  RunArguments,
  TaskArguments,
  TOOL_ANSWERS,
  TriggerWorkflowArguments,
  UpdateRecordArguments,
} from './model.ts'

/** A JSON Schema object, as tools/list hands it out. */
export type JsonSchema = Record<string, unknown>

/** A tool's arguments: their JSON Schema, and how a call's arguments become what the tool takes (400 naming a bad one). */
interface Arguments<A> {
  schema: JsonSchema
  parse(raw: Record<string, unknown>): A
}

export interface ToolCall {
  deps: RunCallDeps & TaskCallDeps & RecordCallDeps
  identity: TokenIdentity
}

export interface Tool<A = never> {
  name: keyof typeof TOOL_ANSWERS
  title: string
  description: string
  /** What the route requires of a token; undefined: any live token of an active user (as reading a run). */
  need?: ProjectNeed
  args: Arguments<A>
  call(call: ToolCall, args: A): Promise<unknown>
}

/** A tool's answer schema for tools/list: the route's model as plain JSON Schema, each `$id` left out (one validator per tool). */
export function plainSchema(schema: TSchema): JsonSchema {
  return JSON.parse(JSON.stringify(schema), (key, value) => (key === '$id' ? undefined : value)) as JsonSchema
}

/** Arguments checked against a TypeBox model, and no text a store cannot hold (as the routes' bodies). */
function modelArguments<S extends TSchema>(model: S): Arguments<S['static']> {
  return {
    schema: plainSchema(model),
    parse(raw) {
      const problems = schemaProblems(model, raw)
      if (problems.length > 0) throw invalidFields(problems.map((p) => ({ field: p.path, message: p.message })))
      const unstorable = unstorableTextPath(raw)
      if (unstorable !== null) throw invalidField(unstorable.path, unstorable.message)
      return raw as S['static']
    },
  }
}

type Query = Record<string, string | undefined>
interface ListParameter {
  name: string
  description?: string
  schema?: unknown
}

/**
 * A list's arguments: its route's query parameters (and the environment, for an environment's list), each a string,
 * number or boolean handed to the route's parsers as the query string would carry it.
 */
function listArguments(parameters: readonly object[], withEnvironment: boolean): Arguments<{ environment: string; query: Query }> {
  const documented = parameters as ListParameter[]
  const properties: JsonSchema = Object.fromEntries(documented.map((p) => [p.name, { ...(p.schema as object), description: p.description }]))
  if (withEnvironment) properties.environment = plainSchema(CreateNoteArguments.properties.environment)
  return {
    schema: { type: 'object', properties, ...(withEnvironment ? { required: ['environment'] } : {}), additionalProperties: false },
    parse(raw) {
      const query: Query = {}
      for (const [name, value] of Object.entries(raw)) {
        if (!Object.hasOwn(properties, name)) throw invalidField(name, 'unknown field')
        if (!['string', 'number', 'boolean'].includes(typeof value)) throw invalidField(name, 'must be a string, a number or a boolean')
        query[name] = String(value)
      }
      const { environment, ...rest } = query
      if (withEnvironment && !environment) throw invalidField('environment', 'is required (a non-empty string)')
      return { environment: environment ?? '', query: rest }
    },
  }
}

const tool = <A>(definition: Tool<A>) => definition as unknown as Tool<unknown>

const placeOf = (identity: TokenIdentity, environment: string) => ({ projectName: identity.projectName, environmentName: environment })
const actorOf = (identity: TokenIdentity) => ({ userId: identity.userId, tokenId: identity.tokenId, via: 'mcp' as const })
const recordPlace = (identity: TokenIdentity, args: { environment: string; collection: string }) => ({ ...placeOf(identity, args.environment), collectionName: args.collection })
const withEtag = ({ record, etag }: { record: object; etag: string }) => ({ ...record, etag })
const renderNote = async (call: ToolCall, id: number) => (await readListed(call.deps.store, 'notes', renderNotes([id])))[0]!

export const TOOLS: Tool<unknown>[] = [
  tool({
    name: 'listNotes',
    title: 'List notes',
    description: 'Notes on records of an environment, newest first, with their messages (GET …/notes). Filters as the REST list; '
      + 'for the next page, repeat with createdAt.lt set to the last note\'s createdAt while hasMore is true.',
    need: { scope: 'notes:read', role: 'admin' },
    args: listArguments(NOTE_LIST_PARAMETERS, true),
    call: ({ deps, identity }, { environment, query }) => notesPage(deps.store, placeOf(identity, environment), query),
  }),
  tool({
    name: 'createNote',
    title: 'Create a note',
    description: 'A note on a record, its first message the HTML content (sanitised) (POST …/notes).',
    need: { scope: 'notes:write', role: 'admin' },
    args: modelArguments(CreateNoteArguments),
    call: async (call, { environment, ...note }) =>
      renderNote(call, await write(call.deps.store, () => createNoteNamed(call.deps.clock, placeOf(call.identity, environment), note, actorOf(call.identity)))),
  }),
  tool({
    name: 'addNoteMessage',
    title: 'Add a message to a note',
    description: 'Appends an HTML message (sanitised) to a note\'s thread (POST …/notes/{id}/messages).',
    need: { scope: 'notes:write', role: 'admin' },
    args: modelArguments(AddNoteMessageArguments),
    call: async (call, { environment, noteId, content }) => {
      await write(call.deps.store, () => addMessageToNote(call.deps.clock, placeOf(call.identity, environment), noteId, content, actorOf(call.identity)))
      return renderNote(call, noteId)
    },
  }),
  tool({
    name: 'listActivityLogs',
    title: 'List activity log entries',
    description: 'What happened to the records of an environment, newest first (GET …/activity-logs); paging as listNotes.',
    need: { scope: 'activity_logs:read', role: 'admin' },
    args: listArguments(ACTIVITY_LOG_PARAMETERS, true),
    call: ({ deps, identity }, { environment, query }) => activityLogsPage(deps.store, placeOf(identity, environment), query),
  }),
  tool({
    name: 'listAdminLogs',
    title: 'List admin log entries',
    description: 'Changes to the project\'s configuration, newest first (GET …/admin-logs); paging as listNotes.',
    need: { scope: 'admin_logs:read', role: 'admin' },
    args: listArguments(ADMIN_LOG_PARAMETERS, false),
    call: ({ deps, identity }, { query }) => adminLogsPage(deps.store, identity.projectName, query),
  }),
  tool({
    name: 'listWorkflows',
    title: 'List the workflows you can trigger',
    description: 'The project\'s workflows (of one environment when named) whose team the token\'s user can reach; only a published one can be triggered.',
    need: { scope: 'workflows:trigger' },
    args: modelArguments(ListWorkflowsArguments),
    call: async ({ deps, identity }, { environment }) => {
      const workflows = await read(
        deps.store,
        (function* () {
          return yield* workflowsReachableBy(identity.userId, (yield* requireProject(identity.projectName)).id, environment)
        })(),
      )
      return { workflows }
    },
  }),
  tool({
    name: 'triggerWorkflow',
    title: 'Trigger a workflow run',
    description: 'Starts a run of a published workflow on a record, as the token\'s user (POST …/workflow-runs). One active run per record and '
      + 'workflow: a tool error 409 run_in_progress names the active run. Follow it with getWorkflowRun.',
    need: { scope: 'workflows:trigger' },
    args: modelArguments(TriggerWorkflowArguments),
    call: async ({ deps, identity }, args) => {
      const start = { workflowName: args.workflow, teamName: args.team, recordId: args.recordId }
      const started = await startRunAs(deps, tokenAccountCaller(identity), placeOf(identity, args.environment), start, () => args.idempotencyKey ?? null, 'mcp')
      return { runId: started.runId, replayed: started.replayed }
    },
  }),
  tool({
    name: 'getWorkflowRun',
    title: 'Read a workflow run',
    description: 'A run\'s status, steps (with their output and error) and error, as now (GET /v1/workflow-runs/{runId}): runs the token\'s user started, or any run of the project for its admins.',
    args: modelArguments(RunArguments),
    call: ({ deps, identity }, { runId }) => readRunAs(deps, tokenAccountCaller(identity), runId),
  }),
  tool({
    name: 'cancelWorkflowRun',
    title: 'Cancel a workflow run',
    description: 'Cancels an active run (POST /v1/workflow-runs/{runId}/cancel); a tool error 409 run_finished once it has finished.',
    need: { scope: 'workflows:trigger' },
    args: modelArguments(RunArguments),
    call: ({ deps, identity }, { runId }) => cancelRunAs(deps, tokenAccountCaller(identity), runId, 'mcp'),
  }),
  tool({
    name: 'retryWorkflowRun',
    title: 'Retry a failed or cancelled run',
    description: 'A new run of the same version on the same record that resumes at the step the run stopped at (POST /v1/workflow-runs/{runId}/retry). '
      + 'Tool errors 409: run_not_retryable, already_retried, run_in_progress, workflow_withdrawn.',
    need: { scope: 'workflows:trigger' },
    args: modelArguments(RunArguments),
    call: ({ deps, identity }, { runId }) => retryRunAs(deps, tokenAccountCaller(identity), runId, 'mcp'),
  }),
  tool({
    name: 'listTasks',
    title: 'List tasks',
    description: 'Tasks of an environment the token\'s user sees, newest first (GET …/tasks): assignee "me" for those waiting for their decision. '
      + 'Filters as the REST list; paging as listNotes.',
    need: { scope: 'tasks:read' },
    args: listArguments(TASK_LIST_PARAMETERS, true),
    call: ({ deps, identity }, { environment, query }) => tasksPageAs(deps.store, tokenAccountCaller(identity), placeOf(identity, environment), query),
  }),
  tool({
    name: 'getTask',
    title: 'Read a task',
    description: 'A task: its question, assignees, decisions, form (a JSON Schema) and deadline (GET /v1/tasks/{taskId}); 404 unless the token\'s user sees it.',
    need: { scope: 'tasks:read' },
    args: modelArguments(TaskArguments),
    call: ({ deps, identity }, { taskId }) => readTaskAs(deps.store, tokenAccountCaller(identity), taskId),
  }),
  tool({
    name: 'decideTask',
    title: 'Approve or reject a task',
    description: 'The token\'s user\'s decision on a task, with the form\'s values as input (POST /v1/tasks/{taskId}/decisions); answers the task. '
      + 'Tool errors: 403 not_an_assignee, 403 requester_cannot_decide, 409 already_decided, 409 task_closed, 422 invalid_input naming each field (details).',
    need: { scope: 'tasks:write' },
    args: modelArguments(DecideTaskArguments),
    call: async ({ deps, identity }, { taskId, idempotencyKey, ...body }) =>
      (await decideTaskAs(deps, tokenAccountCaller(identity), taskId, body, idempotencyKey ?? null, 'mcp')).task,
  }),
  tool({
    name: 'listRecords',
    title: 'List records',
    description: "A collection's records in an environment, filtered on its schema's fields, sorted, a page at a time (GET …/collection/{c}/records); "
      + 'for the next page, repeat with cursor set to nextCursor while hasMore is true.',
    need: { scope: 'records:read' },
    args: modelArguments(ListRecordsArguments),
    call: ({ deps, identity }, { filters, limit, sort, cursor, ...place }) => {
      const query = Object.fromEntries(Object.entries({ ...filters, limit, sort, cursor }).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)]))
      return recordsPageAs(deps.store, tokenAccountCaller(identity), recordPlace(identity, place), query)
    },
  }),
  tool({
    name: 'getRecord',
    title: 'Read a record',
    description: 'One record and its etag (GET …/records/{id}); 404 unless the token\'s user may read the collection.',
    need: { scope: 'records:read' },
    args: modelArguments(RecordArguments),
    call: async ({ deps, identity }, { recordId, ...place }) => withEtag(await readRecordAs(deps.store, tokenAccountCaller(identity), { ...recordPlace(identity, place), recordId })),
  }),
  tool({
    name: 'updateRecord',
    title: 'Change fields of a record',
    description: 'Sets the fields given in data, a null removing one (PATCH …/records/{id}); answers the record and its new etag. With ifMatch, only if the record is '
      + 'unchanged since (tool error 412 precondition_failed). Tool errors 403 (a team that may only read), 422 invalid_record naming each field (details).',
    need: { scope: 'records:write' },
    args: modelArguments(UpdateRecordArguments),
    call: async ({ deps, identity }, { recordId, data, ifMatch, ...place }) =>
      withEtag(await patchRecordAs(deps, tokenAccountCaller(identity), { ...recordPlace(identity, place), recordId }, data, ifMatch ?? null, 'mcp')),
  }),
]

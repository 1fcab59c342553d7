/**
 * The MCP endpoint's schemas: the JSON-RPC message `POST /mcp` takes and answers (/openapi.json), and each tool's
 * arguments and answer, made from the models of the REST routes the tools stand for — one model per operation.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { type Static, type TSchema, t } from 'elysia'
import { MAX_NAME_LENGTH } from '../../http/list.ts'
import { Integer } from '../../http/schemas.ts'
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '../../http/idempotency-key.ts'
import { AddMessageBody, CreateNoteBody, Note, NotePage } from '../notes/model.ts'
import { ActivityLogPage } from '../activity-logs/model.ts'
import { AdminLogPage } from '../admin-logs/model.ts'
import { RetryAccepted, Run, StartRunBody } from '../runs/model.ts'
import { DecisionBody, Task, TaskPage } from '../tasks/model.ts'
import { PatchRecordBody, RecordBody, RecordPage, RecordReadParams } from '../records/model.ts'

/**
 * One JSON-RPC 2.0 message of the Model Context Protocol (a request, or a notification without `id`). The current
 * revision sends no batches, and this server sends no requests a client could answer.
 */
export const McpMessage = t.Object(
  {
    jsonrpc: t.Literal('2.0'),
    id: t.Optional(t.Union([t.String({ maxLength: 200 }), Integer()], { description: 'Absent in a notification' })),
    method: t.String({ minLength: 1, maxLength: 200, examples: ['initialize', 'tools/list', 'tools/call'] }),
    params: t.Optional(t.Object({}, { additionalProperties: true })),
  },
  { description: 'A JSON-RPC 2.0 request or notification of the Model Context Protocol' },
)

/** A JSON-RPC response: the method's `result`, or its `error` (an unknown method, bad params). */
export const McpAnswer = t.Object(
  {
    jsonrpc: t.Literal('2.0'),
    id: t.Union([t.String(), Integer(), t.Null()]),
    result: t.Optional(t.Object({}, { additionalProperties: true })),
    error: t.Optional(t.Object({ code: Integer(), message: t.String(), data: t.Optional(t.Unknown()) })),
  },
  { description: 'The JSON-RPC response to the request' },
)

const EnvironmentName = t.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: 'The environment, by name (e.g. production)' })
const RunId = t.String({ format: 'uuid', description: 'The run' })

export const CreateNoteArguments = t.Object({ environment: EnvironmentName, ...CreateNoteBody.properties }, { additionalProperties: false })
export const AddNoteMessageArguments = t.Object(
  { environment: EnvironmentName, noteId: Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'The note' }), ...AddMessageBody.properties },
  { additionalProperties: false },
)
export const ListWorkflowsArguments = t.Object({ environment: t.Optional(EnvironmentName) }, { additionalProperties: false })
/** An `Idempotency-Key` as an argument: `what` says what a repeat does. */
const IdempotencyKey = (what: string) =>
  t.Optional(t.String({ minLength: 1, maxLength: IDEMPOTENCY_KEY_MAX_LENGTH, pattern: '^[\\x20-\\x7e]+$', description: `As the REST call's Idempotency-Key: ${what}` }))

export const TriggerWorkflowArguments = t.Object(
  {
    environment: EnvironmentName,
    team: StartRunBody.properties.teamName,
    workflow: StartRunBody.properties.workflowName,
    recordId: StartRunBody.properties.recordId,
    idempotencyKey: IdempotencyKey('a repeat with the same key and arguments starts nothing and answers the first run (replayed: true)'),
  },
  { additionalProperties: false },
)
export const RunArguments = t.Object({ runId: RunId }, { additionalProperties: false })
const TaskId = t.String({ format: 'uuid', description: 'The task' })
export const TaskArguments = t.Object({ taskId: TaskId }, { additionalProperties: false })
export const DecideTaskArguments = t.Object(
  { taskId: TaskId, ...DecisionBody.properties, idempotencyKey: IdempotencyKey('a repeat with the same key and decision answers the task again instead of 409 already_decided') },
  { additionalProperties: false },
)

const CollectionName = t.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: 'The collection' })
const RecordId = RecordReadParams.properties.recordId
export const ListRecordsArguments = t.Object(
  {
    environment: EnvironmentName,
    collection: CollectionName,
    limit: t.Optional(Integer({ minimum: 1, maximum: 100, description: 'At most this many records (default 10)' })),
    sort: t.Optional(t.String({ maxLength: 65, description: '`createdAt` or a field of the schema, `-` first for descending (default `-createdAt`)' })),
    cursor: t.Optional(t.String({ maxLength: 4096, description: "The previous answer's nextCursor (same filters and sort): the next page" })),
    filters: t.Optional(
      t.Record(t.String({ maxLength: 200 }), t.Union([t.String(), t.Number(), t.Boolean()]), {
        description: 'As the REST list\'s query: `{"status.eq": "paid", "amount.gte": 100}` (`<field>.<op>` on the schema\'s fields)',
      }),
    ),
  },
  { additionalProperties: false },
)
export const RecordArguments = t.Object({ environment: EnvironmentName, collection: CollectionName, recordId: RecordId }, { additionalProperties: false })
export const UpdateRecordArguments = t.Object(
  {
    environment: EnvironmentName,
    collection: CollectionName,
    recordId: RecordId,
    ...PatchRecordBody.properties,
    ifMatch: t.Optional(t.String({ minLength: 1, maxLength: 1024, description: "As the REST call's If-Match: the etag getRecord gave; a record changed since is a tool error 412 precondition_failed" })),
  },
  { additionalProperties: false },
)
/** A record and its ETag (a header of the REST answer). */
export const RecordWithEtag = t.Object({ ...RecordBody.properties, etag: t.String({ description: "The record's ETag: pass it as ifMatch to change it only if unchanged" }) })

export type CreateNoteArguments = Static<typeof CreateNoteArguments>
export type AddNoteMessageArguments = Static<typeof AddNoteMessageArguments>
export type ListWorkflowsArguments = Static<typeof ListWorkflowsArguments>
export type TriggerWorkflowArguments = Static<typeof TriggerWorkflowArguments>
export type RunArguments = Static<typeof RunArguments>
export type TaskArguments = Static<typeof TaskArguments>
export type DecideTaskArguments = Static<typeof DecideTaskArguments>

export const WorkflowList = t.Object({
  workflows: t.Array(
    t.Object({
      name: t.String(),
      environment: t.String(),
      team: t.String(),
      collection: t.String(),
      published: t.Boolean({ description: 'Whether it has an active version (only a published workflow can be triggered)' }),
    }),
  ),
})
export const RunTriggered = t.Object({
  runId: t.String({ format: 'uuid' }),
  replayed: t.Boolean({ description: 'An earlier call with the same idempotencyKey started this run (the REST answer\'s Idempotent-Replayed)' }),
})

/** Each tool's answer: the REST route's 2xx body (the run start adds `replayed`, a header there). */
export const TOOL_ANSWERS = {
  listNotes: NotePage,
  createNote: Note,
  addNoteMessage: Note,
  listActivityLogs: ActivityLogPage,
  listAdminLogs: AdminLogPage,
  listWorkflows: WorkflowList,
  triggerWorkflow: RunTriggered,
  getWorkflowRun: Run,
  cancelWorkflowRun: Run,
  retryWorkflowRun: RetryAccepted,
  listTasks: TaskPage,
  getTask: Task,
  decideTask: Task,
  listRecords: RecordPage,
  getRecord: RecordWithEtag,
  updateRecord: RecordWithEtag,
} satisfies Record<string, TSchema>

/**
 * A tool's refusal as the agent reads it: the REST error body and its HTTP status (`httpStatus`), as text. No
 * structured content: clients check that against the tool's output schema, which describes its answer.
 */
export function toolError(httpStatus: number, body: Record<string, unknown>): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ httpStatus, ...body }) }] }
}

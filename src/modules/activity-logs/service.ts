/** Appends activity log entries (DESIGN §7), always inside the transaction of the change they record. */
import { findActivityLogRecordIds, findActivityLogsForRender, insertActivityLog, insertActivityLogs, type NewActivityLogRow, pageActivityLogIds } from '../../db/activity-logs.ts'
import { chainField } from '../../lib/audit-chain.ts'
import { inIdOrder } from '../../lib/id-order.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIsoMicros } from '../../lib/time.ts'
import { resolveNameFilters } from '../directory/projects.ts'
import { userObject } from '../directory/users.ts'
import { type Op, within } from '../../db/op.ts'

/**
 * The compatibility document's whole `action` enum. A client may filter on any of them, even those Trellis never
 * writes (that is an empty page, not a 400).
 */
export const DOCUMENTED_ACTIVITY_ACTIONS = [
  'create',
  'read',
  'update',
  'delete',
  'action',
  'search',
  'filter',
  'listRelatedData',
  'describeCollection',
  'index',
  'select',
  'dashboard',
  'workspace',
  'export',
  'createNote',
  'openNote',
  'deleteNote',
  'createMessage',
  'createApproval',
  'approveApproval',
  'rejectApproval',
  'ignoreApprovalWarning',
  'markApprovalAsFailed',
  'startProcessingInboxTask',
  'completeInboxTask',
  'cancelInboxTask',
  'cancelInboxTaskNotTreated',
  'autoCancelInboxTask',
  'assignUserToInboxTask',
  'unassignUserFromInboxTask',
  'sendApprovalBackInReview',
  'triggerWorkflow',
  'abortWorkflow',
  'completeWorkflow',
  'selectWorkflowOption',
  'completeWorkflowStep',
  'reviseWorkflowStep',
  'resumeWorkflow',
] as const
/** Trellis's extension actions (DESIGN §7): what the document has no value for. Listed only with `extensions=true`. */
export const EXTENSION_ACTIVITY_ACTIONS = ['updateNote', 'archiveNote', 'unarchiveNote', 'failWorkflow', 'retryWorkflow', 'closeTask'] as const
export const ACTIVITY_ACTIONS = [...DOCUMENTED_ACTIVITY_ACTIONS, ...EXTENSION_ACTIVITY_ACTIONS] as const
export type ActivityAction = (typeof ACTIVITY_ACTIONS)[number]

/** Whether the compatibility document has no value for this action (DESIGN "Wire compatibility"). */
export function isExtensionAction(action: ActivityAction): boolean {
  return (EXTENSION_ACTIVITY_ACTIONS as readonly string[]).includes(action)
}

/**
 * How a change came in, when not through the REST API, the console or a workflow run: `mcp`, a tool call of the MCP
 * endpoint. The entry is otherwise exactly the REST call's; the channel is marked at the end of its label, before
 * the token the list names (`created note "Refund" · via MCP · token "agent" (trl_AbCd1234…)`): the compatibility
 * document has no field for it, and the label already tells how a change was made.
 */
export type Channel = 'mcp'
const CHANNEL_MARKS: Record<Channel, string> = { mcp: 'via MCP' }

export interface ActivityEntry {
  environmentId: number
  type: 'read' | 'write'
  action: ActivityAction
  label?: string
  userId: number
  teamId: number | null
  collectionId: number | null
  tokenId?: number | null
  recordIds: string[]
  workflow?: { name: string; runId: string; stepName?: string }
  via?: Channel
}

function markedLabel(label: string | undefined, via: Channel | undefined): string | null {
  if (via === undefined) return label ?? null
  return label === undefined ? CHANNEL_MARKS[via] : `${label} · ${CHANNEL_MARKS[via]}`
}

/** Appends the entry in the op's transaction: at once, or at the end of the `withEntriesLast` it runs in. */
export function* appendActivityLog(clock: Clock, entry: ActivityEntry): Op<void> {
  if (heldBack !== null) heldBack.push(entry)
  else yield* appendActivityLogNow(clock, entry)
}

/** Appends the entry at once, even inside a `withEntriesLast`. */
export function* appendActivityLogNow(clock: Clock, entry: ActivityEntry): Op<void> {
  yield* insertActivityLog(logRow(entry), entry.recordIds, clock.now())
}

/**
 * Entries of one environment, in order, as `appendActivityLog` appends each, in fewer statements (a CSV import's
 * batch: one entry per record written).
 */
export function* appendActivityLogs(clock: Clock, environmentId: number, entries: readonly ActivityEntry[]): Op<void> {
  if (heldBack !== null) heldBack.push(...entries)
  else yield* insertActivityLogs(environmentId, entries.map((entry) => ({ entry: logRow(entry), recordIds: entry.recordIds })), clock.now())
}

/** The entries the running `withEntriesLast` holds back (null: none runs). Set only while its body's code runs (`within`). */
let heldBack: ActivityEntry[] | null = null

/**
 * `body`, with the activity entries it appends written after everything else it wrote, in the order it appended them
 * (one statement per environment on PostgreSQL), dated then. Entries are the environment's most contended list: on
 * PostgreSQL the first one takes the environment's lock, held to the commit, so a transaction that writes other rows
 * too (a workflow's step group: its record, steps and run) holds it over its last few statements instead of all of
 * them. What the entries record is in the same transaction either way; nobody reads an entry back before its commit.
 */
export function* withEntriesLast<T>(clock: Clock, body: Op<T>): Op<T> {
  const entries: ActivityEntry[] = []
  const answer = yield* within(body, (resume) => {
    const outer = heldBack
    heldBack = entries
    try {
      return resume()
    } finally {
      heldBack = outer
    }
  })
  for (const environmentId of new Set(entries.map((entry) => entry.environmentId))) {
    yield* appendActivityLogs(clock, environmentId, entries.filter((entry) => entry.environmentId === environmentId))
  }
  return answer
}

/** An entry as its row stores it. */
function logRow(entry: ActivityEntry): NewActivityLogRow {
  return {
    environmentId: entry.environmentId,
    type: entry.type,
    action: entry.action,
    label: markedLabel(entry.label, entry.via),
    userId: entry.userId,
    teamId: entry.teamId,
    collectionId: entry.collectionId,
    tokenId: entry.tokenId ?? null,
    workflowName: entry.workflow?.name ?? null,
    runId: entry.workflow?.runId ?? null,
    stepName: entry.workflow?.stepName ?? null,
    extension: isExtensionAction(entry.action),
  }
}

export interface ActivityFilters {
  userEmail?: string
  userId?: number
  teamName?: string
  collectionName?: string
  recordId?: string
  action?: ActivityAction
  type?: 'read' | 'write'
  /** Include the extension entries (`extensions=true`; the console always does). */
  extensions: boolean
}

/** Ids of one page (limit + 1), newest first. Names that match nothing give an empty page. */
export function* listActivityLogIds(projectId: number, environmentId: number, filters: ActivityFilters, dates: DateFilter[], limit: number): Op<number[]> {
  const names = yield* resolveNameFilters(projectId, filters)
  if (!names) return []
  return yield* pageActivityLogIds(environmentId, {
    userId: names.userId,
    teamId: names.teamId,
    collectionId: names.collectionId,
    action: filters.action,
    type: filters.type,
    recordId: filters.recordId,
    // An `action` filter names the entries it wants: an extension action lists them even without extensions=true.
    // A documented one has nothing to hide, and its page walks the smaller index of documented entries.
    withExtensions: filters.extensions || (filters.action !== undefined && isExtensionAction(filters.action)),
  }, dates, limit)
}

/** The compatibility document's activity log objects, in the order of `ids`. */
/** `options.chain`: each entry's link in its environment's chain (`chain: { position, hash }`, an `extensions=true` field). */
export function* renderActivityLogs(ids: number[], options: { chain?: boolean } = {}) {
  if (ids.length === 0) return []
  const rows = yield* findActivityLogsForRender(ids)
  const recordIds = yield* findActivityLogRecordIds(ids)
  return inIdOrder(ids, rows, (r) => r.log.id).map((r) => {
    const { log } = r
    const id = log.id
    return {
      object: 'activityLog' as const,
      id: String(log.id),
      type: log.type,
      action: log.action as ActivityAction,
      ...labelOf(log.label, r.token),
      recordIds: recordIds.get(id) ?? [],
      createdAt: toIsoMicros(log.createdAt),
      user: userObject(r.user),
      environment: { object: 'environment' as const, name: r.environment },
      // Every writer records a team; an entry whose team was deleted keeps a readable placeholder.
      team: { object: 'team' as const, name: r.team ?? '(deleted team)' },
      ...(r.collection !== null ? { collection: { object: 'collection' as const, name: r.collection } } : {}),
      ...(log.workflowName !== null && log.runId !== null
        ? {
            workflow: {
              object: 'workflow' as const,
              name: log.workflowName,
              runId: log.runId,
              ...(log.stepName !== null ? { stepName: log.stepName } : {}),
            },
          }
        : {}),
      ...(options.chain ? chainField(log) : {}),
    }
  })
}

/**
 * The entry's label, naming the application token the change came through (the compatibility document has no
 * field for it; `extensions=true` adds only the `chain` link): `triggered via webhook · token "ci" (trl_AbCd1234…)`.
 * Only the display prefix is ever shown.
 */
function labelOf(label: string | null, token: { name: string | null; prefix: string | null } | null): { label?: string } {
  const via = token?.prefix ? `token "${token.name}" (${token.prefix}…)` : null
  if (label === null) return via ? { label: via } : {}
  return { label: via ? `${label} · ${via}` : label }
}

/** Appends activity log entries (DESIGN §7), always inside the transaction of the change they record. */
import { asc, desc, eq, inArray } from 'drizzle-orm'
import { nextCreatedAt } from '../../db/monotonic.ts'
import type { Db } from '../../db/open.ts'
import { activityLogRecords, activityLogs, apiTokens, collections, environments, teams, users } from '../../db/schema.ts'
import { allOf, createdAtAsIdRange, parseDateFilters, type Query } from '../../http/list.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIso } from '../../lib/time.ts'
import { resolveNameFilters } from '../projects/service.ts'
import { userObject } from '../users/service.ts'

/**
 * The `action` values: the compatibility document's whole enum (a client may filter on any of them, even those
 * Trellis never writes: that is an empty page, not a 400), plus the documented extensions `updateNote`,
 * `archiveNote`, `unarchiveNote`, `failWorkflow`.
 */
export const ACTIVITY_ACTIONS = [
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
  'updateNote',
  'archiveNote',
  'unarchiveNote',
  'failWorkflow',
] as const
export type ActivityAction = (typeof ACTIVITY_ACTIONS)[number]

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
}

export function appendActivityLog(db: Db, clock: Clock, entry: ActivityEntry): number {
  const [row] = db
    .insert(activityLogs)
    .values({
      environmentId: entry.environmentId,
      type: entry.type,
      action: entry.action,
      label: entry.label ?? null,
      userId: entry.userId,
      teamId: entry.teamId,
      collectionId: entry.collectionId,
      tokenId: entry.tokenId ?? null,
      workflowName: entry.workflow?.name ?? null,
      runId: entry.workflow?.runId ?? null,
      stepName: entry.workflow?.stepName ?? null,
      createdAt: nextCreatedAt(db, activityLogs, eq(activityLogs.environmentId, entry.environmentId), clock.now(), true),
    })
    .returning({ id: activityLogs.id })
    .all()
  for (const recordId of new Set(entry.recordIds)) {
    db.insert(activityLogRecords).values({ logId: row!.id, environmentId: entry.environmentId, recordId }).run()
  }
  return row!.id
}

export interface ActivityFilters {
  userEmail?: string
  userId?: number
  teamName?: string
  collectionName?: string
  recordId?: string
  action?: ActivityAction
  type?: 'read' | 'write'
}

/** Ids of one page (limit + 1), newest first. Names that match nothing give an empty page. */
export function listActivityLogIds(db: Db, projectId: number, environmentId: number, filters: ActivityFilters, query: Query, limit: number): number[] {
  const names = resolveNameFilters(db, projectId, filters)
  if (!names) return []
  const byRecord =
    filters.recordId === undefined
      ? undefined
      : inArray(
          activityLogs.id,
          db
            .select({ id: activityLogRecords.logId })
            .from(activityLogRecords)
            .where(allOf([eq(activityLogRecords.environmentId, environmentId), eq(activityLogRecords.recordId, filters.recordId)])),
        )
  return db
    .select({ id: activityLogs.id })
    .from(activityLogs)
    .where(
      allOf([
        eq(activityLogs.environmentId, environmentId),
        names.userId === undefined ? undefined : eq(activityLogs.userId, names.userId),
        names.teamId === undefined ? undefined : eq(activityLogs.teamId, names.teamId),
        names.collectionId === undefined ? undefined : eq(activityLogs.collectionId, names.collectionId),
        filters.action === undefined ? undefined : eq(activityLogs.action, filters.action),
        filters.type === undefined ? undefined : eq(activityLogs.type, filters.type),
        byRecord,
        // Entries take createdAt strictly after the previous one in their environment, so ids stand in.
        ...createdAtAsIdRange(
          db,
          parseDateFilters(query, ['createdAt']),
          { table: activityLogs, id: activityLogs.id, createdAt: activityLogs.createdAt },
          eq(activityLogs.environmentId, environmentId),
        ),
      ]),
    )
    .orderBy(desc(activityLogs.id))
    .limit(limit + 1)
    .all()
    .map((r) => r.id)
}

/** The compatibility document's activity log objects, in the order of `ids`. */
export function renderActivityLogs(db: Db, ids: number[]) {
  if (ids.length === 0) return []
  const rows = db
    .select({
      log: activityLogs,
      user: { id: users.id, username: users.username, email: users.email },
      environment: environments.name,
      team: teams.name,
      collection: collections.name,
      token: { name: apiTokens.name, prefix: apiTokens.prefix },
    })
    .from(activityLogs)
    .innerJoin(users, eq(users.id, activityLogs.userId))
    .innerJoin(environments, eq(environments.id, activityLogs.environmentId))
    .leftJoin(teams, eq(teams.id, activityLogs.teamId))
    .leftJoin(collections, eq(collections.id, activityLogs.collectionId))
    .leftJoin(apiTokens, eq(apiTokens.id, activityLogs.tokenId))
    .where(inArray(activityLogs.id, ids))
    .all()
  const recordRows = db
    .select()
    .from(activityLogRecords)
    .where(inArray(activityLogRecords.logId, ids))
    .orderBy(asc(activityLogRecords.logId))
    .all()
  const recordIds = new Map<number, string[]>()
  for (const r of recordRows) recordIds.set(r.logId, [...(recordIds.get(r.logId) ?? []), r.recordId])
  const byId = new Map(rows.map((r) => [r.log.id, r]))
  return ids.flatMap((id) => {
    const r = byId.get(id)
    if (!r) return []
    const { log } = r
    return [
      {
        object: 'activityLog' as const,
        id: String(log.id),
        type: log.type,
        action: log.action as ActivityAction,
        ...labelOf(log.label, r.token),
        recordIds: recordIds.get(id) ?? [],
        createdAt: toIso(log.createdAt),
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
      },
    ]
  })
}

/**
 * The entry's label, naming the application token the change came through (the compatibility document has no
 * field for it, and extensions add no fields): `triggered via webhook · token "ci" (trl_AbCd1234…)`.
 * Only the display prefix is ever shown.
 */
function labelOf(label: string | null, token: { name: string | null; prefix: string | null } | null): { label?: string } {
  const via = token?.prefix ? `token "${token.name}" (${token.prefix}…)` : null
  if (label === null) return via ? { label: via } : {}
  return { label: via ? `${label} · ${via}` : label }
}

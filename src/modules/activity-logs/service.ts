/** Appends activity log entries (DESIGN §7), always inside the transaction of the change they record. */
import { nextCreatedAt } from '../../db/monotonic.ts'
import type { Db } from '../../db/open.ts'
import { activityLogRecords, activityLogs } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'

/**
 * Actions of the compatibility document's enum that Trellis writes, plus the documented extensions
 * `updateNote`, `archiveNote`, `unarchiveNote`, `failWorkflow`.
 */
export type ActivityAction =
  | 'create'
  | 'read'
  | 'update'
  | 'delete'
  | 'createNote'
  | 'createMessage'
  | 'triggerWorkflow'
  | 'abortWorkflow'
  | 'completeWorkflow'
  | 'completeWorkflowStep'
  | 'updateNote'
  | 'archiveNote'
  | 'unarchiveNote'
  | 'failWorkflow'

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
      createdAt: nextCreatedAt(db, activityLogs, clock.now(), false),
    })
    .returning({ id: activityLogs.id })
    .all()
  for (const recordId of new Set(entry.recordIds)) {
    db.insert(activityLogRecords).values({ logId: row!.id, environmentId: entry.environmentId, recordId }).run()
  }
  return row!.id
}

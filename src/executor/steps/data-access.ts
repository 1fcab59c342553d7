/** Data steps read and write the record as the run's user, with that user's permissions now (DESIGN §8). */
import { and, eq, sql } from 'drizzle-orm'
import type { Db } from '../../db/open.ts'
import { prepared } from '../../db/prepared.ts'
import { records } from '../../db/schema.ts'
import { collectionAccess } from '../../modules/projects/service.ts'
import type { RunTarget } from '../step.ts'
import { StepFailure } from '../step.ts'

export type RecordRow = typeof records.$inferSelect

export function loadRecordAs(tx: Db, target: RunTarget, need: 'read' | 'edit'): { row: RecordRow; data: Record<string, unknown> } {
  const row = prepared(tx, 'records.by-key', () =>
    tx
      .select()
      .from(records)
      .where(
        and(
          eq(records.environmentId, sql.placeholder('environmentId')),
          eq(records.collectionId, sql.placeholder('collectionId')),
          eq(records.recordKey, sql.placeholder('key')),
        ),
      )
      .prepare(),
  ).all({ environmentId: target.environmentId, collectionId: target.collectionId, key: target.run.record_id })[0]
  const access = collectionAccess(tx, {
    userId: target.run.user_id,
    projectId: target.projectId,
    teamId: target.teamId,
    collectionId: target.collectionId,
  })
  // Forbidden before not-found: a user who may not read the collection learns nothing about its records.
  if (!access.read || (need === 'edit' && !access.edit)) {
    throw new StepFailure('record_forbidden', `The run's user may not ${need} records of this collection`)
  }
  if (!row) throw new StepFailure('record_not_found', `Record ${target.run.record_id} not found`)
  return { row, data: JSON.parse(row.data) as Record<string, unknown> }
}

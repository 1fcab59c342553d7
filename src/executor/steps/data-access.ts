/** Data steps read and write the record as the run's user, with that user's permissions now (DESIGN §8). */
import type { Db } from '../../db/open.ts'
import { collectionAccess } from '../../modules/projects/service.ts'
import { findRecord, type RecordRow } from '../../modules/records/service.ts'
import type { RunTarget } from '../step.ts'
import { StepFailure } from '../step.ts'

export function loadRecordAs(tx: Db, target: RunTarget, need: 'read' | 'edit'): { row: RecordRow; data: Record<string, unknown> } {
  const row = findRecord(tx, { environmentId: target.environmentId, collectionId: target.collectionId }, target.run.record_id)
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

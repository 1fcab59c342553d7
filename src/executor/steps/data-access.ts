/** Data steps read and write the record as the run's user, with that user's permissions now (DESIGN §8). */
import { collectionAccess } from '../../modules/projects/service.ts'
import { findRecord, type RecordRow } from '../../modules/records/service.ts'
import type { RunTarget } from '../step.ts'
import { StepFailure } from '../step.ts'
import { type Op } from '../../db/op.ts'

export function* loadRecordAs(target: RunTarget, need: 'read' | 'edit'): Op<{ row: RecordRow; data: Record<string, unknown> }> {
  const row = yield* findRecord({ environmentId: target.environmentId, collectionId: target.collectionId }, target.run.record_id)
  const access = yield* collectionAccess({
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

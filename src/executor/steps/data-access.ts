/** Data steps read and write the record as the run's user, with that user's permissions now (DESIGN §8). */
import { type Op } from '../../db/op.ts'
import { collectionAccess } from '../../modules/directory/projects.ts'
import { findRecordToChange, type RecordRow } from '../../modules/records/service.ts'
import type { GroupReads, RunTarget } from '../step.ts'
import { StepFailure } from '../step.ts'

/**
 * The record as the run's user may see it (`need`: read, or edit). Within one step group's transaction the record
 * and the user's access cannot change but by the group's own `update` (which keeps `reads` current), so they are
 * read once per group: `reads` holds them. The record is read to be changed (locked until the group commits): an
 * `update` writes the whole record from what the group read, and a run of another workflow on the same record must
 * not write in between (on PostgreSQL its update would be lost).
 */
export function* loadRecordAs(
  target: RunTarget,
  need: 'read' | 'edit',
  reads: GroupReads = {},
): Op<{ row: RecordRow; data: Record<string, unknown> }> {
  reads.access ??= yield* collectionAccess({
    userId: target.run.user_id,
    projectId: target.projectId,
    teamId: target.teamId,
    collectionId: target.collectionId,
  })
  if (reads.row === undefined) {
    reads.row = (yield* findRecordToChange({ environmentId: target.environmentId, collectionId: target.collectionId }, target.run.record_id)) ?? null
  }
  // Forbidden before not-found: a user who may not read the collection learns nothing about its records.
  if (!reads.access.read || (need === 'edit' && !reads.access.edit)) {
    throw new StepFailure('record_forbidden', `The run's user may not ${need} records of this collection`)
  }
  if (!reads.row) throw new StepFailure('record_not_found', `Record ${target.run.record_id} not found`)
  reads.data ??= JSON.parse(reads.row.data) as Record<string, unknown>
  return { row: reads.row, data: reads.data }
}

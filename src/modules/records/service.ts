/**
 * Records as people see them in the console: a collection's records in one environment, one record, and the
 * `type: "read"` activity entry every console view of record data writes (reads are audited too).
 */
import {
  findRecordByKey,
  findRecordByKeyToChange,
  findRecordIdsIn,
  insertRecord,
  listProjectCollections,
  listProjectParts,
  pageRecords,
  type RecordRow,
  type RecordScope,
  type RecordSearch,
  searchRecords,
  setRecordData,
} from '../../db/records.ts'
import { listRenderingWorkflows } from '../../db/workflows.ts'
import type { Clock } from '../../lib/clock.ts'
import { canonicalJson } from '../../lib/json.ts'
import { appendActivityLog } from '../activity-logs/service.ts'
import type { Op } from '../../db/op.ts'

export type { RecordRow, RecordScope, RecordSearch }
/** One page of a collection's records, by record id; one record by its id (prepared: the executor's data steps use it too). */
export const findRecord = findRecordByKey
/** One record by its id, locked until the transaction ends where several writers run at once (PostgreSQL): read to be changed. */
export const findRecordToChange = findRecordByKeyToChange
export const listRecords = pageRecords
/** One page of a collection's records matching a search (id contains, field = value), by record id; records whose id contains a text in many collections. */
export const listMatchingRecords = searchRecords
export const findMatchingRecordIds = findRecordIdsIn
/** The collections of a project, by name; the workflows of one rendering (environment, team), by name, with their collection. */
export const projectCollections = listProjectCollections
export const renderingWorkflows = listRenderingWorkflows

/** Replaces one record's data (the executor's `update` step, which writes its own activity entry); prepared. */
export function* replaceRecordData(id: number, data: Record<string, unknown>, now: number): Op<void> {
  yield* setRecordData(id, canonicalJson(data), now)
}

export const RECORD_ID_MAX_LENGTH = 1024

/**
 * Creates or replaces one record's data, with its `write` activity entry (`create` or `update`) attributed to
 * `userId` as `teamId`; `via` ends the entry's label ("created by trellis apply", "updated in the console").
 * Data equal to what is stored (canonical JSON) changes nothing and logs nothing.
 */
export function* upsertRecord(
  clock: Clock,
  input: RecordScope & { recordKey: string; data: Record<string, unknown>; userId: number; teamId: number; via: string },
): Op<'created' | 'updated' | 'unchanged'> {
  const existing = yield* findRecord(input, input.recordKey)
  const data = canonicalJson(input.data)
  const now = clock.now()
  let action: 'create' | 'update'
  if (!existing) {
    yield* insertRecord({ environmentId: input.environmentId, collectionId: input.collectionId, recordKey: input.recordKey, data, now })
    action = 'create'
  } else if (canonicalJson(JSON.parse(existing.data)) !== data) {
    yield* setRecordData(existing.id, data, now)
    action = 'update'
  } else {
    return 'unchanged'
  }
  yield* appendActivityLog(clock, {
    environmentId: input.environmentId,
    type: 'write',
    action,
    label: `${action === 'create' ? 'created' : 'updated'} ${input.via}`,
    userId: input.userId,
    teamId: input.teamId,
    collectionId: input.collectionId,
    recordIds: [input.recordKey],
  })
  return action === 'create' ? 'created' : 'updated'
}

/** Who saw which records, as which team: `read` for one record's page, `index` for a list. Nothing shown, nothing logged. */
export function* logRecordView(
  clock: Clock,
  view: RecordScope & { userId: number; teamId: number; action: 'read' | 'index'; recordIds: string[] },
): Op<void> {
  if (view.recordIds.length === 0) return
  yield* appendActivityLog(clock, {
    environmentId: view.environmentId,
    type: 'read',
    action: view.action,
    label: view.action === 'read' ? 'viewed in the console' : `listed ${view.recordIds.length} in the console`,
    userId: view.userId,
    teamId: view.teamId,
    collectionId: view.collectionId,
    recordIds: view.recordIds,
  })
}

/** A project's environments and teams, by name. */
export function* projectLayout(projectId: number) {
  return { environments: (yield* listProjectParts('environment', projectId)), teams: (yield* listProjectParts('team', projectId)) }
}

/**
 * The records API's calls made by a caller (docs/records.md "Reading records", "Writing records"): who may read a
 * collection's records, one record with its ETag, and the writes, as the routes (./index.ts) and the MCP tools make
 * them; the list: ./query.ts. Writes need scope `records:write` and a team that may edit the collection. Scope `records:read`;
 * the caller must be a member who may read the collection through one of their teams (project admins always), past
 * the project access decision (the SSO rule included). A collection the caller may not read is answered as one that
 * does not exist (404).
 */
import type { Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import type { RecordScope } from '../../db/records.ts'
import type { Store } from '../../db/store.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import type { Clock } from '../../lib/clock.ts'
import { forbidden, notFound } from '../../lib/errors.ts'
import { write } from '../../db/write.ts'
import type { Channel } from '../activity-logs/service.ts'
import { toIso } from '../../lib/time.ts'
import { callerProject, requireCallerScope } from '../auth/service.ts'
import { collectionWriter, findCollection, isAdminOf, mayReadCollection, requireEnvironment } from '../directory/projects.ts'
import { createRecord, deleteRecord, findRecord, patchRecord, recordEtag, type RecordWriter, restoreRecord, type WrittenRecord } from './service.ts'

/** A record as the API shows it. */
export interface RecordBody {
  id: string
  data: Record<string, unknown>
  createdAt: string
  updatedAt: string
}

export const recordBody = (row: { recordKey: string; data: string; createdAt: number; updatedAt: number }): RecordBody => ({
  id: row.recordKey,
  data: JSON.parse(row.data) as Record<string, unknown>,
  createdAt: toIso(row.createdAt),
  updatedAt: toIso(row.updatedAt),
})

/** The collection the path names and its project, if the caller may read its records (404 otherwise, as an unknown one). */
function* readableCollectionOf(caller: AccountCaller, place: RecordPlace): Op<RecordScope & { projectId: number }> {
  const { project, environment } = yield* requireEnvironment(place.projectName, place.environmentName)
  const collection = yield* findCollection(project.id, place.collectionName)
  const hidden = () => notFound(`Collection ${place.collectionName} not found in project ${project.name}`)
  if (!collection) throw hidden()
  if (!(yield* mayReadCollection({ userId: caller.user.id, projectId: project.id, collectionId: collection.id }))) throw hidden()
  return { environmentId: environment.id, collectionId: collection.id, projectId: project.id }
}

/** The collection the path names, if the caller may read its records (404 otherwise, as an unknown one). */
export function* readableCollection(caller: AccountCaller, place: RecordPlace): Op<RecordScope> {
  const { environmentId, collectionId } = yield* readableCollectionOf(caller, place)
  return { environmentId, collectionId }
}

export interface RecordPlace {
  projectName: string
  environmentName: string
  collectionName: string
}

/** Scope, then the project access decision (403 or 404 before anything of the collection is read). */
export async function authorizeRead(store: Store, caller: AccountCaller, projectName: string) {
  requireCallerScope(caller, 'records:read')
  await read(store, callerProject(caller, projectName))
}

/** One record the caller may read, and its ETag (changes whenever its data or updatedAt does); 404 otherwise. */
export async function readRecordAs(store: Store, caller: AccountCaller, place: RecordPlace & { recordId: string }) {
  await authorizeRead(store, caller, place.projectName)
  const row = await read(store, (function* () {
    const scope = yield* readableCollection(caller, place)
    return yield* findRecord(scope, place.recordId)
  })())
  if (!row) throw notFound(`Record ${place.recordId} not found in collection ${place.collectionName}`)
  return { record: recordBody(row), etag: recordEtag(row) }
}

// ── Writes ────────────────────────────────────────────────────────────────────

/** What a records API write needs besides the caller: the store and clock, the restore window. */
export interface RecordCallDeps {
  store: Store
  clock: Clock
  config: { recordRetentionDays: number }
}

/** How the write came in: the REST API, or a tool of the MCP endpoint (its entries marked `via MCP`). */
export type RecordChannel = 'api' | Channel

/**
 * Scope `records:write` and the project access decision, then, in the write's transaction, the collection: 404 unless
 * the caller may read it, 403 when they may only read it (`admin`: unless they are a project admin); with the writer
 * their activity entry names (the team through which they may write).
 */
async function writeAs<T>(
  deps: RecordCallDeps,
  caller: AccountCaller,
  place: RecordPlace,
  channel: RecordChannel,
  need: 'write' | 'admin',
  body: (scope: RecordScope, writer: RecordWriter) => Op<T>,
): Promise<T> {
  requireCallerScope(caller, 'records:write')
  await read(deps.store, callerProject(caller, place.projectName))
  return write(deps.store, function* () {
    const { projectId, ...scope } = yield* readableCollectionOf(caller, place)
    const granted = yield* collectionWriter({ userId: caller.user.id, projectId, collectionId: scope.collectionId })
    if (!granted) throw forbidden(`None of your teams may change records of ${place.collectionName}`)
    if (need === 'admin' && !(yield* isAdminOf(caller.user.id, projectId))) throw forbidden('Only project admins restore records')
    return yield* body(scope, {
      userId: caller.user.id,
      teamId: granted.teamId,
      via: 'via the records API',
      tokenId: caller.token?.tokenId ?? null,
      ...(channel === 'api' ? {} : { channel }),
    })
  })
}

/** A written record as the API answers it, and its ETag. */
const answered = (w: WrittenRecord) => ({
  record: { id: w.recordKey, data: w.data, createdAt: toIso(w.createdAt), updatedAt: toIso(w.updatedAt) } satisfies RecordBody,
  etag: w.etag,
})

/** `POST …/records`: a new record, its id given or generated. */
export async function createRecordAs(deps: RecordCallDeps, caller: AccountCaller, place: RecordPlace, body: { id?: string; data: Record<string, unknown> }, channel: RecordChannel = 'api') {
  return answered(await writeAs(deps, caller, place, channel, 'write', (scope, writer) => createRecord(deps.clock, { ...scope, ...writer, recordKey: body.id, data: body.data })))
}

/** `PATCH …/records/{id}`: some fields changed (null removes one), under `If-Match` when given. */
export async function patchRecordAs(
  deps: RecordCallDeps, caller: AccountCaller, place: RecordPlace & { recordId: string }, changes: Record<string, unknown>, ifMatch: string | null, channel: RecordChannel = 'api',
) {
  return answered(await writeAs(deps, caller, place, channel, 'write', (scope, writer) => patchRecord(deps.clock, { ...scope, ...writer, recordKey: place.recordId, changes, ifMatch })))
}

/** `DELETE …/records/{id}`: soft, under `If-Match` when given. */
export async function deleteRecordAs(deps: RecordCallDeps, caller: AccountCaller, place: RecordPlace & { recordId: string }, ifMatch: string | null) {
  await writeAs(deps, caller, place, 'api', 'write', (scope, writer) => deleteRecord(deps.clock, { ...scope, ...writer, recordKey: place.recordId, ifMatch }))
}

/** `POST …/records/{id}/restore`: a project admin brings back a record deleted within the retention period. */
export async function restoreRecordAs(deps: RecordCallDeps, caller: AccountCaller, place: RecordPlace & { recordId: string }) {
  const retentionDays = deps.config.recordRetentionDays
  return answered(await writeAs(deps, caller, place, 'api', 'admin', (scope, writer) => restoreRecord(deps.clock, { ...scope, ...writer, recordKey: place.recordId, retentionDays })))
}

/**
 * The records API's calls made by a caller (docs/records.md "Reading records"): who may read a collection's records,
 * and one record with its ETag, as the route (./index.ts) makes them; the list: ./query.ts. Scope `records:read`;
 * the caller must be a member who may read the collection through one of their teams (project admins always), past
 * the project access decision (the SSO rule included). A collection the caller may not read is answered as one that
 * does not exist (404).
 */
import { createHash } from 'node:crypto'
import type { Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import type { RecordScope } from '../../db/records.ts'
import type { Store } from '../../db/store.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { notFound } from '../../lib/errors.ts'
import { toIso } from '../../lib/time.ts'
import { callerProject, requireCallerScope } from '../auth/service.ts'
import { findCollection, mayReadCollection, requireEnvironment } from '../directory/projects.ts'
import { findRecord } from './service.ts'

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

/** The collection the path names, if the caller may read its records (404 otherwise, as an unknown one). */
export function* readableCollection(caller: AccountCaller, place: RecordPlace): Op<RecordScope> {
  const { project, environment } = yield* requireEnvironment(place.projectName, place.environmentName)
  const collection = yield* findCollection(project.id, place.collectionName)
  const hidden = () => notFound(`Collection ${place.collectionName} not found in project ${project.name}`)
  if (!collection) throw hidden()
  if (!(yield* mayReadCollection({ userId: caller.user.id, projectId: project.id, collectionId: collection.id }))) throw hidden()
  return { environmentId: environment.id, collectionId: collection.id }
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
  const etag = `"${createHash('sha256').update(`${row.updatedAt}\n${row.data}`).digest('base64url').slice(0, 27)}"`
  return { record: recordBody(row), etag }
}

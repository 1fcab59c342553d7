/**
 * Records as people see them in the console: a collection's records in one environment, one record, and the
 * `type: "read"` activity entry every console view of record data writes (reads are audited too).
 */
import {
  createFieldIndex,
  dropFieldIndex,
  findCollectionSchema,
  findRecordByKey,
  findRecordByKeyToChange,
  findRecordIdsIn,
  findRecordsByKeys,
  insertRecord,
  insertRecords,
  listProjectCollections,
  listProjectParts,
  pageRecords,
  type RecordRow,
  type RecordScope,
  type RecordSearch,
  searchRecords,
  setCollectionSchema,
  setRecordData,
} from '../../db/records.ts'
import { listRenderingWorkflows } from '../../db/workflows.ts'
import type { Clock } from '../../lib/clock.ts'
import { canonicalJson } from '../../lib/json.ts'
import { HttpError, invalidFields } from '../../lib/errors.ts'
import { toIso } from '../../lib/time.ts'
import { appendActivityLog } from '../activity-logs/service.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import type { Op } from '../../db/op.ts'
import { checkRecord, RECORD_ID_MAX_LENGTH, type SchemaField, schemaFieldProblems, shownFields, type StoredField, storedFields, withDefaults } from './schema.ts'

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

export { RECORD_ID_MAX_LENGTH }

/**
 * Creates or replaces one record's data, with its `write` activity entry (`create` or `update`) attributed to
 * `userId` as `teamId`; `via` ends the entry's label ("created by trellis apply", "updated in the console").
 * The collection's schema fills absent fields that have a default and must accept the result (422 `invalid_record`).
 * Data equal to what is stored (canonical JSON) changes nothing and logs nothing. Answers the data as stored.
 * `fields`: the collection's fields already read for writing in this transaction (`collectionFields(…, 'write')`),
 * by a caller writing many records (a CSV import), so that each does not read them again.
 */
export function* upsertRecord(
  clock: Clock,
  input: RecordScope & { recordKey: string; data: Record<string, unknown>; userId: number; teamId: number; via: string },
  fields?: readonly StoredField[],
): Op<{ outcome: 'created' | 'updated' | 'unchanged'; data: Record<string, unknown> }> {
  const checked = yield* checkedRecordData(input, input.data, fields)
  if (checked.problems.length > 0) throw invalidRecord(checked.problems)
  const existing = yield* findRecord(input, input.recordKey)
  const data = canonicalJson(checked.data)
  const now = clock.now()
  let action: 'create' | 'update'
  if (!existing) {
    yield* insertRecord({ environmentId: input.environmentId, collectionId: input.collectionId, recordKey: input.recordKey, data, now })
    action = 'create'
  } else if (canonicalJson(JSON.parse(existing.data)) !== data) {
    yield* setRecordData(existing.id, data, now)
    action = 'update'
  } else {
    return { outcome: 'unchanged', data: checked.data }
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
  return { outcome: action === 'create' ? 'created' : 'updated', data: checked.data }
}

/** What one record of a batch came to: written (or equal to what is stored), or refused for `problems` and not written. */
export type BatchOutcome = { outcome: 'created' | 'updated' | 'unchanged' } | { problems: FieldProblem[] }

/**
 * `upsertRecord` for many records of one collection (a CSV import's batch), in order, with the same defaults, checks
 * and outcomes, in fewer statements: one read of the stored records, one insert of the new ones, and one activity
 * entry per action (`create`, `update`) naming every record it wrote. A record that does not conform is not written.
 * A relation may name a record created earlier in the batch. `fields`: read for writing in this transaction; the
 * ids must be distinct.
 */
export function* upsertRecords(
  clock: Clock,
  input: RecordScope & { userId: number; teamId: number; via: string },
  batch: readonly { recordKey: string; data: Record<string, unknown> }[],
  fields: readonly StoredField[],
): Op<BatchOutcome[]> {
  const stored = new Map((yield* findRecordsByKeys(input, batch.map((r) => r.recordKey))).map((r) => [r.recordKey, r]))
  const inserts: { recordKey: string; data: string }[] = []
  const created = new Set<string>()
  const updates: { id: number; recordKey: string; data: string }[] = []
  const outcomes: BatchOutcome[] = []
  for (const record of batch) {
    const filled = withDefaults(fields, record.data)
    const problems = yield* recordProblems(input, fields, filled, created)
    if (problems.length > 0) {
      outcomes.push({ problems })
      continue
    }
    const data = canonicalJson(filled)
    const existing = stored.get(record.recordKey)
    if (!existing) {
      inserts.push({ recordKey: record.recordKey, data })
      created.add(record.recordKey)
      outcomes.push({ outcome: 'created' })
    } else if (canonicalJson(JSON.parse(existing.data)) !== data) {
      updates.push({ id: existing.id, recordKey: record.recordKey, data })
      outcomes.push({ outcome: 'updated' })
    } else outcomes.push({ outcome: 'unchanged' })
  }
  const now = clock.now()
  if (inserts.length > 0) yield* insertRecords(input, inserts, now)
  for (const update of updates) yield* setRecordData(update.id, update.data, now)
  for (const [action, keys] of [['create', inserts.map((r) => r.recordKey)], ['update', updates.map((r) => r.recordKey)]] as const) {
    if (keys.length === 0) continue
    yield* appendActivityLog(clock, {
      environmentId: input.environmentId, type: 'write', action, label: `${action === 'create' ? 'created' : 'updated'} ${input.via}`,
      userId: input.userId, teamId: input.teamId, collectionId: input.collectionId, recordIds: keys,
    })
  }
  return outcomes
}

// ── Schemas ───────────────────────────────────────────────────────────────────

/** One thing a record's data breaks of its collection's schema: the field as a JSON pointer (`/total`). */
export interface FieldProblem {
  field: string
  message: string
}

/** 422 `invalid_record`: the message names the first field, `details` every one (the error body's one list of field problems). */
export function invalidRecord(problems: FieldProblem[]): HttpError {
  const first = problems[0]!
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more: see details)` : ''
  return new HttpError(422, 'invalid_record', `Invalid record field '${first.field}': ${first.message}${more}`, { details: problems })
}

/** A collection's fields as stored (none: untyped), read as `purpose` says (src/db/records.ts `findCollectionSchema`). */
export function* collectionFields(collectionId: number, purpose: 'read' | 'write' | 'change'): Op<StoredField[]> {
  return fieldsOf((yield* findCollectionSchema(collectionId, purpose))?.schema)
}

/** The fields of a stored schema column (null or absent: untyped, no fields). */
const fieldsOf = (schema: string | null | undefined): StoredField[] => (schema ? (JSON.parse(schema) as StoredField[]) : [])

/**
 * What `data` breaks of `fields`, a relation's target looked up in the record's environment (none: it conforms);
 * `pending`: ids of the scope's collection written by the same statement still to come (a batch), which count as existing.
 */
export function* recordProblems(scope: RecordScope, fields: readonly StoredField[], data: Record<string, unknown>, pending?: ReadonlySet<string>): Op<FieldProblem[]> {
  const check = checkRecord(fields, data)
  for (const relation of check.relations) {
    if (relation.collectionId === scope.collectionId && pending?.has(relation.id)) continue
    if (!(yield* findRecord({ environmentId: scope.environmentId, collectionId: relation.collectionId }, relation.id))) {
      check.problems.push({ field: relation.field, message: `must be the id of an existing record of the related collection: there is no record ${relation.id}` })
    }
  }
  return check.problems
}

/**
 * A whole record about to be written: its data with the schema's defaults filled in, and what that breaks. The
 * schema is held for the write (PostgreSQL: `FOR SHARE`), so a concurrent schema change waits for it.
 */
export function* checkedRecordData(
  scope: RecordScope,
  data: Record<string, unknown>,
  known?: readonly StoredField[],
): Op<{ data: Record<string, unknown>; problems: FieldProblem[] }> {
  const fields = known ?? (yield* collectionFields(scope.collectionId, 'write'))
  const filled = withDefaults(fields, data)
  return { data: filled, problems: yield* recordProblems(scope, fields, filled) }
}

/** A collection's schema as the API shows it: no fields when it has none; `version` counts its changes. */
export interface CollectionSchemaView {
  fields: SchemaField[]
  version: number
  updatedAt: string | null
}

function* collectionIdsByName(projectId: number): Op<Map<string, number>> {
  return new Map((yield* listProjectParts('collection', projectId)).map((c) => [c.name, c.id]))
}

/** A collection's schema, relation targets by their collection's name. */
export function* readCollectionSchema(projectId: number, collectionId: number): Op<CollectionSchemaView> {
  const row = yield* findCollectionSchema(collectionId, 'read')
  const names = new Map([...(yield* collectionIdsByName(projectId))].map(([name, id]) => [id, name]))
  const fields = fieldsOf(row?.schema)
  return { fields: shownFields(fields, names), version: row?.schemaVersion ?? 0, updatedAt: row?.schemaUpdatedAt == null ? null : toIso(row.schemaUpdatedAt) }
}

/** The admin log value of a schema: the document's `{name}` shape, readable. */
function schemaValue(collectionName: string, version: number, fields: readonly StoredField[]) {
  if (fields.length === 0) return { name: `${collectionName}: no schema (any JSON object), version ${version}` }
  const names = fields.slice(0, 20).map((f) => `${f.name} (${f.type})`).join(', ')
  return { name: `${collectionName}: schema version ${version}, ${fields.length} field${fields.length === 1 ? '' : 's'}: ${names}${fields.length > 20 ? ', …' : ''}` }
}

/**
 * Sets a collection's schema (no fields: untyped), with its admin log entry (resource `collection`) and the index of
 * each `indexed` field (an index no longer wanted is dropped). A field list with a problem is 400 naming it
 * (`fields[2].options`, under `field`); the same fields as stored change nothing. Existing records are never
 * changed: `nonConformingRecords` reports those the new schema refuses.
 */
export function* setCollectionFields(
  clock: Clock,
  input: { projectId: number; collectionId: number; collectionName: string; fields: SchemaField[]; actorId: number | null; field?: string },
): Op<'updated' | 'unchanged'> {
  const current = yield* findCollectionSchema(input.collectionId, 'change')
  if (!current) throw new Error(`collection ${input.collectionId} vanished`)
  const ids = yield* collectionIdsByName(input.projectId)
  const problems = schemaFieldProblems(input.fields, new Set(ids.keys()), input.field ?? 'fields')
  if (problems.length > 0) throw invalidFields(problems.map((p) => ({ field: p.path, message: p.message })))
  const fields = storedFields(input.fields, ids)
  const text = fields.length === 0 ? null : canonicalJson(fields)
  if (text === current.schema) return 'unchanged'
  const before = fieldsOf(current.schema)
  const version = current.schemaVersion + 1
  yield* setCollectionSchema(input.collectionId, text, version, clock.now())
  const indexed = (list: readonly StoredField[]) => new Set(list.filter((f) => f.indexed).map((f) => f.name))
  const [was, is] = [indexed(before), indexed(fields)]
  for (const name of was) if (!is.has(name)) yield* dropFieldIndex(input.collectionId, name)
  for (const name of is) if (!was.has(name)) yield* createFieldIndex(input.collectionId, name)
  yield* appendAdminLog(clock, {
    projectId: input.projectId, type: 'update', resource: 'collection', actorId: input.actorId,
    previousValue: schemaValue(input.collectionName, current.schemaVersion, before), newValue: schemaValue(input.collectionName, version, fields),
  })
  return 'updated'
}

/** The records a collection's schema refuses, in every environment of its project: how many, and the ids of the first `limit`. */
export function* nonConformingRecords(projectId: number, collectionId: number, limit = 100): Op<{ count: number; ids: string[] }> {
  const fields = yield* collectionFields(collectionId, 'read')
  const report = { count: 0, ids: [] as string[] }
  if (fields.length === 0) return report
  const PAGE = 500
  for (const environment of yield* listProjectParts('environment', projectId)) {
    const scope = { environmentId: environment.id, collectionId }
    let after: string | undefined
    for (;;) {
      const page = yield* pageRecords(scope, after, PAGE)
      for (const record of page.slice(0, PAGE)) {
        if ((yield* recordProblems(scope, fields, JSON.parse(record.data) as Record<string, unknown>)).length === 0) continue
        report.count++
        if (report.ids.length < limit) report.ids.push(record.recordKey)
      }
      if (page.length <= PAGE) break
      after = page[PAGE - 1]!.recordKey
    }
  }
  return report
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

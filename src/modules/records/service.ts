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
  findRecordRowToChange,
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
  setRecordDeleted,
} from '../../db/records.ts'
import { listRenderingWorkflows } from '../../db/workflows.ts'
import type { Clock } from '../../lib/clock.ts'
import { canonicalJson } from '../../lib/json.ts'
import { createHash, randomBytes } from 'node:crypto'
import { conflict, HttpError, invalidFields, notFound } from '../../lib/errors.ts'
import { toIso } from '../../lib/time.ts'
import { type ActivityEntry, appendActivityLog, appendActivityLogs, type Channel } from '../activity-logs/service.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import type { Op } from '../../db/op.ts'
import { checkRecord, RECORD_ID_MAX_LENGTH, type SchemaField, schemaFieldProblems, shownFields, type StoredField, storedFields, valueKindOf, withDefaults } from './schema.ts'

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

/** Replaces one record's data (the executor's `update` step of run `runId`, which writes its own activity entry); prepared. */
export function* replaceRecordData(row: RecordRow, data: Record<string, unknown>, now: number, runId: string): Op<void> {
  const written = { environmentId: row.environmentId, collectionId: row.collectionId, recordKey: row.recordKey, changedFields: changedFieldNames(parsed(row), data), byRun: { runId } }
  yield* setRecordData(row.id, canonicalJson(data), now, written)
}

export { RECORD_ID_MAX_LENGTH }

/** Who writes a record, as its activity entry names them; `via` ends the entry's label ("by trellis apply"). */
export interface RecordWriter {
  userId: number
  teamId: number | null
  via: string
  tokenId?: number | null
  channel?: Channel
}

/**
 * A record's ETag: a hash of its data and `updatedAt`, so it changes with every write of the record (the data
 * alone would come back to an older value). Quoted, as the header carries it.
 */
export const recordEtag = (row: { updatedAt: number; data: string }) =>
  `"${createHash('sha256').update(`${row.updatedAt}\n${row.data}`).digest('base64url').slice(0, 27)}"`

/**
 * The `If-Match` precondition against the record as read to be changed (locked until the write commits, so a
 * concurrent writer checks against this write's result): absent passes; `*` passes for an existing record; else one
 * of its ETags (weak ones too) must be the record's. 412 `precondition_failed` otherwise.
 */
export function requireMatch(ifMatch: string | null | undefined, row: { updatedAt: number; data: string } | undefined): void {
  if (ifMatch === null || ifMatch === undefined) return
  const tags = ifMatch.split(',').map((tag) => tag.trim().replace(/^W\//, ''))
  if (row && (tags.includes('*') || tags.includes(recordEtag(row)))) return
  throw new HttpError(412, 'precondition_failed', row ? 'If-Match: the record has changed since that ETag was read (read it again)' : 'If-Match: the record does not exist')
}

/** A generated record id: `rec_` and 20 base32 characters (100 random bits), lowercase. */
export function newRecordId(): string {
  const bytes = randomBytes(13)
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567'
  let bits = 0
  let value = 0
  let out = ''
  for (const byte of bytes) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5 && out.length < 20) {
      out += alphabet[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  return `rec_${out}`
}

type Data = Record<string, unknown>
type Action = 'create' | 'update' | 'delete'

/** The longest a value is shown in an activity label, and how many fields one names. */
const SHOWN_VALUE_LENGTH = 80
const SHOWN_FIELDS = 20

const shownValue = (value: unknown) => {
  if (value === undefined) return '(none)'
  const text = JSON.stringify(value)
  return text.length > SHOWN_VALUE_LENGTH ? `${text.slice(0, SHOWN_VALUE_LENGTH - 1)}…` : text
}

// Own fields only: a field named `toString` absent from one side is absent, not Object.prototype's function.
const own = (data: Data, name: string) => (Object.hasOwn(data, name) ? data[name] : undefined)

/** The top-level fields whose value differs between two versions of a record (added and removed ones too). */
export function changedFieldNames(before: Data, after: Data): string[] {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])].filter(
    (name) => canonicalJson(own(before, name) ?? null) !== canonicalJson(own(after, name) ?? null) || Object.hasOwn(before, name) !== Object.hasOwn(after, name),
  )
}

/**
 * What a write changed, for its activity label (the published activity entry has no field for it): each changed
 * top-level field with its value before and after, `(none)` where it is absent — `status "pending" → "paid"`.
 */
export function describeChanges(before: Data, after: Data): string {
  const names = changedFieldNames(before, after)
  const shown = names.slice(0, SHOWN_FIELDS).map((name) => `${name} ${shownValue(own(before, name))} → ${shownValue(own(after, name))}`)
  if (names.length > SHOWN_FIELDS) shown.push(`and ${names.length - SHOWN_FIELDS} more fields`)
  return shown.join('; ')
}

const PAST: Record<Action | 'restore', string> = { create: 'created', update: 'updated', delete: 'deleted', restore: 'restored' }

/** The one activity entry of a record write, naming the changed fields with their values before and after. */
function* logRecordWrite(clock: Clock, scope: RecordScope & { recordKey: string }, writer: RecordWriter, action: Action | 'restore', before: Data, after: Data) {
  yield* appendActivityLog(clock, recordWriteEntry(scope, writer, action, before, after))
}

/** The `write` activity entry of a record's change, naming its changed fields, attributed to the writer. */
function recordWriteEntry(scope: RecordScope & { recordKey: string }, writer: RecordWriter, action: Action | 'restore', before: Data, after: Data): ActivityEntry {
  const changes = describeChanges(before, after)
  return {
    environmentId: scope.environmentId,
    type: 'write',
    // A restore is an update of the compatibility document's enum: the record is back with the data it held.
    action: action === 'restore' ? 'update' : action,
    label: `${PAST[action]} ${writer.via}${changes ? `: ${changes}` : ''}`,
    userId: writer.userId,
    teamId: writer.teamId,
    collectionId: scope.collectionId,
    tokenId: writer.tokenId ?? null,
    recordIds: [scope.recordKey],
    via: writer.channel,
  }
}

const parsed = (row: { data: string }) => JSON.parse(row.data) as Data
/** The scope alone of an input that carries more (a write's events are keyed by it). */
const scopeOf = (input: RecordScope): RecordScope => ({ environmentId: input.environmentId, collectionId: input.collectionId })

/** 409: the id is held by a deleted record, which only a restore brings back (or the purge frees). */
const heldByDeleted = (recordKey: string) => conflict('conflict', `Record ${recordKey} was deleted: restore it (POST …/records/${recordKey}/restore) or use another id`)

/** A record as written: its row's fields the API shows, and its new ETag. */
export interface WrittenRecord {
  recordKey: string
  data: Data
  createdAt: number
  updatedAt: number
  etag: string
}

const written = (row: { recordKey: string; data: string; createdAt: number; updatedAt: number }): WrittenRecord => ({
  recordKey: row.recordKey, data: parsed(row), createdAt: row.createdAt, updatedAt: row.updatedAt, etag: recordEtag(row),
})

/**
 * Creates or replaces one record's data, with its `write` activity entry (`create` or `update`, naming the changed
 * fields) attributed to the writer. The collection's schema fills absent fields that have a default and must accept
 * the result (422 `invalid_record`). Data equal to what is stored (canonical JSON) changes nothing and logs nothing.
 * `ifMatch`: the `If-Match` header (412 when stale); a deleted record's id is 409 `conflict`. Answers the data as
 * stored and the record's ETag.
 */
export function* upsertRecord(
  clock: Clock,
  input: RecordScope & RecordWriter & { recordKey: string; data: Data; ifMatch?: string | null },
): Op<{ outcome: 'created' | 'updated' | 'unchanged'; data: Data; etag: string }> {
  const checked = yield* checkedRecordData(input, input.data)
  if (checked.problems.length > 0) throw invalidRecord(checked.problems)
  const existing = yield* findRecordRowToChange(input, input.recordKey)
  if (existing?.deletedAt != null) throw heldByDeleted(input.recordKey)
  requireMatch(input.ifMatch, existing)
  const data = canonicalJson(checked.data)
  const now = clock.now()
  if (!existing) {
    yield* insertRecord({ environmentId: input.environmentId, collectionId: input.collectionId, recordKey: input.recordKey, data, now })
    yield* logRecordWrite(clock, input, input, 'create', {}, checked.data)
    return { outcome: 'created', data: checked.data, etag: recordEtag({ updatedAt: now, data }) }
  }
  if (canonicalJson(parsed(existing)) === data) return { outcome: 'unchanged', data: checked.data, etag: recordEtag(existing) }
  yield* setRecordData(existing.id, data, now, { ...scopeOf(input), recordKey: input.recordKey, changedFields: changedFieldNames(parsed(existing), checked.data) })
  yield* logRecordWrite(clock, input, input, 'update', parsed(existing), checked.data)
  return { outcome: 'updated', data: checked.data, etag: recordEtag({ updatedAt: now, data }) }
}

/**
 * A new record (`POST …/records`): its id given (409 `conflict` when a record, even a deleted one, holds it) or
 * generated (`newRecordId`); defaults filled, the schema must accept it (422). One `create` activity entry.
 */
export function* createRecord(clock: Clock, input: RecordScope & RecordWriter & { recordKey?: string; data: Data }): Op<WrittenRecord> {
  const recordKey = input.recordKey ?? newRecordId()
  const checked = yield* checkedRecordData(input, input.data)
  if (checked.problems.length > 0) throw invalidRecord(checked.problems)
  const existing = yield* findRecordRowToChange(input, recordKey)
  if (existing) throw existing.deletedAt === null ? conflict('conflict', `Record ${recordKey} already exists`) : heldByDeleted(recordKey)
  const data = canonicalJson(checked.data)
  const now = clock.now()
  yield* insertRecord({ environmentId: input.environmentId, collectionId: input.collectionId, recordKey, data, now })
  yield* logRecordWrite(clock, { ...input, recordKey }, input, 'create', {}, checked.data)
  return { recordKey, data: checked.data, createdAt: now, updatedAt: now, etag: recordEtag({ updatedAt: now, data }) }
}

/** The live record to change, locked (404 when there is none), past the `If-Match` precondition. */
function* recordToChange(scope: RecordScope & { recordKey: string; ifMatch?: string | null }) {
  const row = yield* findRecordToChange(scope, scope.recordKey)
  if (!row) throw notFound(`Record ${scope.recordKey} not found`)
  requireMatch(scope.ifMatch, row)
  return row
}

/**
 * Changes some fields of a record (`PATCH`): each key of `changes` replaces that field, `null` removes it (a required
 * field so removed fails the schema: 422 naming it). No defaults are filled (as a workflow's `update` step); the
 * whole record as it would be must conform. No change: nothing written, nothing logged.
 */
export function* patchRecord(
  clock: Clock,
  input: RecordScope & RecordWriter & { recordKey: string; changes: Data; ifMatch?: string | null },
): Op<WrittenRecord> {
  const row = yield* recordToChange(input)
  const before = parsed(row)
  // Built as entries: an assignment to a key named `__proto__` would set the prototype rather than the field.
  const after: Data = Object.fromEntries([
    ...Object.entries(before).filter(([name]) => !Object.hasOwn(input.changes, name)),
    ...Object.entries(input.changes).filter(([, value]) => value !== null),
  ])
  const problems = yield* recordProblems(input, yield* collectionFields(input.collectionId, 'write'), after)
  if (problems.length > 0) throw invalidRecord(problems)
  const data = canonicalJson(after)
  if (data === canonicalJson(before)) return written(row)
  const now = clock.now()
  yield* setRecordData(row.id, data, now, { ...scopeOf(input), recordKey: input.recordKey, changedFields: changedFieldNames(before, after) })
  yield* logRecordWrite(clock, input, input, 'update', before, after)
  return written({ ...row, data, updatedAt: now })
}

/** Deletes a record (soft: restorable for the retention period); one `delete` activity entry. 404, 412 as a change. */
export function* deleteRecord(clock: Clock, input: RecordScope & RecordWriter & { recordKey: string; ifMatch?: string | null }): Op<void> {
  const row = yield* recordToChange(input)
  yield* setRecordDeleted(row.id, clock.now(), { ...scopeOf(input), recordKey: input.recordKey })
  yield* logRecordWrite(clock, input, input, 'delete', parsed(row), {})
}

/**
 * Brings back a record deleted less than `retentionDays` ago, as it was (404 for a live record, an unknown one, or one
 * deleted longer ago: the purge may have taken it). One activity entry (`update`, labelled `restored`).
 */
export function* restoreRecord(clock: Clock, input: RecordScope & RecordWriter & { recordKey: string; retentionDays: number }): Op<WrittenRecord> {
  const row = yield* findRecordRowToChange(input, input.recordKey)
  if (!row || row.deletedAt === null || row.deletedAt < clock.now() - input.retentionDays * 86_400_000) {
    throw notFound(`No deleted record ${input.recordKey} to restore (records can be restored for ${input.retentionDays} days)`)
  }
  yield* setRecordDeleted(row.id, null, { ...scopeOf(input), recordKey: input.recordKey })
  yield* logRecordWrite(clock, input, input, 'restore', {}, parsed(row))
  return written(row)
}

/** What one record of a batch came to: written (or equal to what is stored), or refused for `problems` and not written. */
export type BatchOutcome = { outcome: 'created' | 'updated' | 'unchanged' } | { problems: FieldProblem[] }

/**
 * `upsertRecord` for many records of one collection (a CSV import's batch), in order, with the same defaults, checks
 * and outcomes, in fewer statements: one read of the stored records (a deleted one's id is refused, as by `upsertRecord`)
 * and one insert of the new ones; one activity entry per record written, naming its changes. A record that does not
 * conform is not written.
 * A relation may name a record created earlier in the batch. `fields`: read for writing in this transaction; the
 * ids must be distinct.
 */
export function* upsertRecords(
  clock: Clock,
  input: RecordScope & RecordWriter,
  batch: readonly { recordKey: string; data: Record<string, unknown> }[],
  fields: readonly StoredField[],
): Op<BatchOutcome[]> {
  const stored = new Map((yield* findRecordsByKeys(input, batch.map((r) => r.recordKey))).map((r) => [r.recordKey, r]))
  const inserts: { recordKey: string; data: string; after: Data }[] = []
  const created = new Set<string>()
  const updates: { id: number; recordKey: string; data: string; before: Data; after: Data }[] = []
  const outcomes: BatchOutcome[] = []
  for (const record of batch) {
    const existing = stored.get(record.recordKey)
    if (existing?.deletedAt != null) {
      outcomes.push({ problems: [{ field: '/id', message: `record ${record.recordKey} was deleted: restore it or use another id` }] })
      continue
    }
    const filled = withDefaults(fields, record.data)
    const problems = yield* recordProblems(input, fields, filled, created)
    if (problems.length > 0) {
      outcomes.push({ problems })
      continue
    }
    const data = canonicalJson(filled)
    if (!existing) {
      inserts.push({ recordKey: record.recordKey, data, after: filled })
      created.add(record.recordKey)
      outcomes.push({ outcome: 'created' })
    } else if (canonicalJson(parsed(existing)) !== data) {
      updates.push({ id: existing.id, recordKey: record.recordKey, data, before: parsed(existing), after: filled })
      outcomes.push({ outcome: 'updated' })
    } else outcomes.push({ outcome: 'unchanged' })
  }
  const now = clock.now()
  if (inserts.length > 0) yield* insertRecords(input, inserts, now)
  for (const update of updates) yield* setRecordData(update.id, update.data, now, { ...scopeOf(input), recordKey: update.recordKey, changedFields: changedFieldNames(update.before, update.after) })
  // One entry per record written, as every other write: the audit trail names each record's changes.
  yield* appendActivityLogs(clock, input.environmentId, [
    ...inserts.map((insert) => recordWriteEntry({ ...input, recordKey: insert.recordKey }, input, 'create', {}, insert.after)),
    ...updates.map((update) => recordWriteEntry({ ...input, recordKey: update.recordKey }, input, 'update', update.before, update.after)),
  ])
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
  // An index holds its field's values as their kind compares them (on PostgreSQL): a field whose kind changed is indexed anew.
  const indexed = (list: readonly StoredField[]) => new Map(list.filter((f) => f.indexed).map((f) => [f.name, valueKindOf(f.type)]))
  const [was, is] = [indexed(before), indexed(fields)]
  for (const [name, kind] of was) if (is.get(name) !== kind) yield* dropFieldIndex(input.collectionId, name)
  for (const [name, kind] of is) if (was.get(name) !== kind) yield* createFieldIndex(input.collectionId, name, kind)
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

/** Records as the records API renders them: one record, a page of them. */
import { type DocumentDecoration, t } from 'elysia'
import { pageSchema } from '../../http/list-schema.ts'
import { Integer, IsoDateTime } from '../../http/schemas.ts'
import { RECORD_ID_MAX_LENGTH } from './schema.ts'

export const RecordListParams = t.Object({ projectName: t.String(), environmentName: t.String(), collectionName: t.String() })
export const RecordReadParams = t.Object({ ...RecordListParams.properties, recordId: t.String({ minLength: 1, maxLength: RECORD_ID_MAX_LENGTH }) })

export const RecordBody = t.Object(
  {
    id: t.String({ description: "The record's own id" }),
    data: t.Record(t.String(), t.Unknown(), { description: 'The JSON object as stored' }),
    createdAt: IsoDateTime,
    updatedAt: IsoDateTime,
  },
  { $id: 'Record' },
)

export const RecordPage = pageSchema(
  RecordBody,
  t.Object({ projectName: t.String(), environmentName: t.String(), collectionName: t.String(), limit: Integer(), sort: t.String({ description: 'The sort used' }) }),
  'A page of records, in the order `sort` asks (default newest first)',
  'Whether more records follow: repeat with `cursor` set to `nextCursor`',
  { nextCursor: t.Optional(t.String({ description: 'Send back as `cursor` (with the same filters and sort) for the next page; absent on the last page' })) },
)

const Data = t.Record(t.String(), t.Unknown(), { description: 'The record: a JSON object' })

/** `POST …/records`: the data, and the id unless one is generated (`rec_` and 20 lowercase base32 characters). */
export const CreateRecordBody = t.Object({
  id: t.Optional(t.String({ minLength: 1, maxLength: RECORD_ID_MAX_LENGTH, description: "The new record's id; absent: one is generated (`rec_…`)" })),
  data: Data,
})

/** `PATCH …/records/{id}`: the fields to change; `null` removes a field. */
export const PatchRecordBody = t.Object({
  data: t.Record(t.String(), t.Unknown(), { description: 'The fields to change, each replacing its value; a field set to null is removed' }),
})

/** The optional `If-Match` header of a change or a deletion. */
export const IF_MATCH: Pick<DocumentDecoration, 'parameters'> = {
  parameters: [
    {
      name: 'If-Match',
      in: 'header',
      required: false,
      description: "An `ETag` of the record as last read: the write happens only if the record has not changed since (412 `precondition_failed` otherwise); `*`: any existing record",
      schema: { type: 'string', maxLength: 1024 },
    },
  ],
}
const ColumnMapping = t.Object({
  column: t.String({ description: 'The header cell' }),
  field: t.Union([t.String(), t.Null()], { description: 'The field it fills (`id`: the record id; `data`: an untyped collection\'s JSON); null: not imported' }),
  type: t.Union([t.String(), t.Null()], { description: "The field's type" }),
  ignored: t.Optional(t.UnionEnum(['read-only', 'unknown'], { description: '`read-only`: createdAt, updatedAt; `unknown`: the schema has no such field' })),
})

export const ImportReport = t.Object(
  {
    dryRun: t.Boolean(),
    allOrNothing: t.Boolean(),
    columns: t.Array(ColumnMapping, { description: 'Every column of the header and where it goes' }),
    unknownColumns: t.Array(t.String()),
    lines: Integer({ description: 'Records in the file (lines after the header)' }),
    created: Integer(),
    updated: Integer(),
    unchanged: Integer({ description: 'Lines equal to the stored record: nothing written' }),
    invalid: Integer({ description: 'Lines not written, each listed in `errors` (the first 1,000)' }),
    written: t.Boolean({ description: 'Whether anything was written (never for a dry run)' }),
    errors: t.Array(t.Object({ line: Integer({ description: 'The line of the file where the record starts (the header is line 1)' }), field: t.String(), reason: t.String() })),
  },
  { $id: 'RecordImportReport' },
)

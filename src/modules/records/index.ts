/**
 * The records API (docs/records.md "Reading records", "Writing records"): a collection's records in an environment,
 * one record with its ETag, its writes (create, change under If-Match, soft delete, restore), and CSV export and
 * import ("CSV export and import"). A console session or
 * any live token with scope `records:read` to read, `records:write` to write (`all` holds both), past the project
 * access decision (the SSO rule included); `PUT …/records/{id}` is project management (../projects/index.ts).
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { listParameters } from '../../http/list-schema.ts'
import { MAX_NAME_LENGTH, queryOf } from '../../http/list.ts'
import { CSV_IMPORT_MAX_BYTES, type CsvBody, requireCsvBody } from '../../http/body.ts'
import { CreateRecordBody, IF_MATCH, ImportReport, PatchRecordBody, RecordBody, RecordListParams, RecordPage, RecordReadParams } from './model.ts'
import { createRecordAs, deleteRecordAs, patchRecordAs, readRecordAs, restoreRecordAs } from './calls.ts'
import { exportRecordsAs, importRecordsAs, MAX_LISTED_ERRORS } from './csv-calls.ts'
import { CSV_CONTENT_TYPE } from './csv.ts'
import { importOptions, MAX_IN_VALUES, RECORD_FILTER_OPERATORS, recordsPageAs } from './query.ts'

/** Who may write, in every write's description. */
const WRITERS =
  'Members write the collections one of their teams may edit, project admins every one; a collection the caller may not read is 404, ' +
  'one they may only read 403. Scope `records:write`.'
const BASE = '/v1/project/:projectName/environment/:environmentName/collection/:collectionName/records'
/** The records as CSV: a static segment of its own, so no record id (`export`…) is shadowed by it. */
const CSV = `${BASE}.csv`
const CSV_TEXT = { 'text/csv': { schema: { type: 'string' as const } } }
const BOOLEAN_PARAMETER = (name: string, description: string) => ({ name, in: 'query' as const, required: false, description, schema: { type: 'string' as const, enum: ['true', 'false'] } })

const LIST_PARAMETERS = listParameters(
  {
    sort: { description: '`createdAt` or a field of the schema (not multiselect or json); `-` first for descending. Default `-createdAt` (newest first)', schema: { type: 'string', maxLength: 65 } },
    cursor: { description: "The previous page's `nextCursor`: the page after it (same filters and sort)", schema: { type: 'string', maxLength: 4096 } },
  },
  [],
)

/** The filter parameters in words: their names come from the collection's schema, so no fixed list documents them. */
const FILTERS =
  `Filters: \`<field>.<op>=<value>\` on the schema's fields, op one of ${RECORD_FILTER_OPERATORS.join(', ')} (\`in\`: up to ${MAX_IN_VALUES} comma-separated values; ` +
  "`contains`: text, email and url fields, ASCII letters in any case). Values are read as the field's type: numbers as numbers, dates and " +
  'date-times as instants, booleans as true or false. A collection without a schema takes no filter. '

export function recordsModule(deps: AppDeps) {
  return new Elysia({ name: 'records', tags: ['records'] })
    .use(authPlugin(deps))
    .get(BASE, ({ params, request, caller }) => recordsPageAs(deps.store, caller, params, queryOf(request)), {
      userCall: true,
      params: RecordListParams,
      response: { 200: RecordPage, ...errorResponses(400, 403, 404) },
      detail: {
        operationId: 'listRecords',
        summary: "List a collection's records in an environment: filtered on its schema's fields, sorted, paged by cursor",
        description:
          FILTERS +
          'Keyset paging on (sort value, record): a record written while a client pages is never returned twice nor makes another one skipped. ' +
          '400 `invalid_parameter` names a bad parameter (an unknown field, an operator its type does not take, a value not of its type, a foreign cursor). ' +
          'Members read the collections one of their teams may read; project admins every one; otherwise 404. Scope `records:read`.',
        parameters: LIST_PARAMETERS,
      },
    })
    .get(
      `${BASE}/:recordId`,
      async ({ params, caller, set }) => {
        const { record, etag } = await readRecordAs(deps.store, caller, params)
        set.headers.etag = etag
        return record
      },
      {
        userCall: true,
        params: RecordReadParams,
        response: { 200: RecordBody, ...errorResponses(400, 403, 404) },
        detail: { operationId: 'getRecord', summary: 'Read one record, with an `ETag` that changes whenever it does (404 unless the caller may read its collection). Scope `records:read`.' },
      },
    )
    .post(
      BASE,
      async ({ params, body, caller, set }) => {
        const { record, etag } = await createRecordAs(deps, caller, params, body)
        set.status = 201
        set.headers.etag = etag
        return record
      },
      {
        userCall: true,
        params: RecordListParams,
        body: CreateRecordBody,
        response: { 201: RecordBody, ...errorResponses(400, 403, 404, 409, 422) },
        detail: {
          operationId: 'createRecord',
          summary: 'Create a record (its id given or generated), with its `ETag`',
          description:
            'Absent fields that have a default take it; with a schema the data must conform: 422 `invalid_record` naming each field in `details`. ' +
            '409 `conflict` when a record holds the id, a deleted one too (restore it, or wait for the purge). ' + WRITERS,
        },
      },
    )
    .patch(
      `${BASE}/:recordId`,
      async ({ params, body, caller, request, set }) => {
        const { record, etag } = await patchRecordAs(deps, caller, params, body.data, request.headers.get('if-match'))
        set.headers.etag = etag
        return record
      },
      {
        userCall: true,
        params: RecordReadParams,
        body: PatchRecordBody,
        response: { 200: RecordBody, ...errorResponses(400, 403, 404, 412, 422) },
        detail: {
          operationId: 'updateRecord',
          summary: "Change some of a record's fields (`null` removes one), under `If-Match` when given",
          description: 'No defaults are filled; the record as it would be must conform to the schema (422 `invalid_record`, a required field set to null too). ' + WRITERS,
          ...IF_MATCH,
        },
      },
    )
    .delete(
      `${BASE}/:recordId`,
      async ({ params, caller, request, set }) => {
        await deleteRecordAs(deps, caller, params, request.headers.get('if-match'))
        set.status = 204
      },
      {
        userCall: true,
        params: RecordReadParams,
        response: { 204: t.Void(), ...errorResponses(400, 403, 404, 412) },
        detail: {
          operationId: 'deleteRecord',
          summary: 'Delete a record: it leaves every list and read at once, a project admin may restore it within the retention period, then it is purged',
          description: WRITERS,
          ...IF_MATCH,
        },
      },
    )
    .post(
      `${BASE}/:recordId/restore`,
      async ({ params, caller, set }) => {
        const { record, etag } = await restoreRecordAs(deps, caller, params)
        set.headers.etag = etag
        return record
      },
      {
        userCall: true,
        params: RecordReadParams,
        response: { 200: RecordBody, ...errorResponses(400, 403, 404) },
        detail: {
          operationId: 'restoreRecord',
          summary: 'Bring back a deleted record as it was (project admins), within TRELLIS_RECORD_RETENTION_DAYS of its deletion (404 after, or for a live record). Scope `records:write`.',
        },
      },
    )
    .get(
      CSV,
      async ({ params, request, caller }) =>
        new Response(await exportRecordsAs(deps.store, caller, params, queryOf(request)), {
          headers: { 'content-type': CSV_CONTENT_TYPE, 'content-disposition': `attachment; filename="${params.collectionName.replace(/[^\w.-]/g, '_')}.csv"` },
        }),
      {
        userCall: true,
        params: RecordListParams,
        response: errorResponses(400, 403, 404),
        detail: {
          operationId: 'exportRecords',
          summary: "A collection's records as CSV (docs/records.md \"CSV export and import\"), streamed: same filters and sort as the list, every page. Scope `records:read`.",
          description:
            FILTERS +
            'Header `id,<fields in schema order>,createdAt,updatedAt` (untyped: `id,data,createdAt,updatedAt`, data as JSON). ' +
            "RFC 4180 quoting; a cell a spreadsheet would run as a formula (= + - @ tab CR first) starts with `'`. `limit` and `cursor` are not taken.",
          parameters: [LIST_PARAMETERS.find((p) => (p as { name: string }).name === 'sort')!],
          responses: { 200: { description: 'The records as CSV', content: CSV_TEXT } },
        },
      },
    )
    .post(
      CSV,
      ({ params, request, caller, body }) =>
        importRecordsAs(deps.store, deps.clock, caller, params, importOptions(queryOf(request)), () => requireCsvBody(body as CsvBody | undefined)),
      {
        userCall: true,
        params: RecordListParams,
        response: { 200: ImportReport, ...errorResponses(400, 403, 404, 413, 415, 422) },
        detail: {
          operationId: 'importRecords',
          summary: 'Import records from CSV (the export\'s format): each valid line upserted by its id; `dryRun=true` previews (docs/records.md "CSV export and import"). Scope `records:write`.',
          description:
            `A body of at most ${CSV_IMPORT_MAX_BYTES} bytes (413 beyond). The header maps columns to fields (an unknown column: 400, listed by a dry run); ` +
            'each cell is read as its field\'s type and each line must conform to the schema, else it is reported `{line, field, reason}` ' +
            `(the first ${MAX_LISTED_ERRORS}; \`invalid\` counts them all) and not written. A line equal to the stored record changes nothing. ` +
            'Without `allOrNothing` the valid lines are written, a transaction per 1,000; with it, all lines or none (422 `import_refused` with the report). ' +
            'Writers: project admins, and members one of whose teams may edit the collection (403 otherwise; 404 unless they may read it); `teamName` chooses the team the activity entries name.',
          parameters: [
            BOOLEAN_PARAMETER('dryRun', 'Check and report, write nothing (the whole file in one transaction, rolled back)'),
            BOOLEAN_PARAMETER('allOrNothing', 'Write every line or, if one is bad, none'),
            { name: 'teamName', in: 'query' as const, required: false, description: 'The team the writes are made as (default: the first of yours that may edit the collection)', schema: { type: 'string' as const, maxLength: MAX_NAME_LENGTH } },
          ],
          requestBody: { required: true, content: CSV_TEXT },
        },
      },
    )
}

/**
 * The records API (docs/records.md "Reading records"): a collection's records in an environment, and one record
 * with its ETag. A console session or any live token with scope `records:read` (`all` holds it), past the project
 * access decision (the SSO rule included); the writes (`PUT …/records/{id}`) are project management
 * (../projects/index.ts).
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { listParameters } from '../../http/list-schema.ts'
import { queryOf } from '../../http/list.ts'
import { RecordBody, RecordListParams, RecordPage, RecordReadParams } from './model.ts'
import { readRecordAs } from './calls.ts'
import { MAX_IN_VALUES, RECORD_FILTER_OPERATORS, recordsPageAs } from './query.ts'

const BASE = '/v1/project/:projectName/environment/:environmentName/collection/:collectionName/records'

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
}

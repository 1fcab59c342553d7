/**
 * The list machinery's side of /openapi.json: the `{hasMore, data, parameters}` envelope as a schema and the
 * documented query parameters (`limit`, filters, `<field>.<op>` dates). Parsing stays in list.ts.
 */
import { type DocumentDecoration, type TSchema, t } from 'elysia'
import type { TProperties } from '@sinclair/typebox'
import { ID_SCHEMA } from './params.ts'
import { Integer } from './schemas.ts'
import { DATE_OPERATORS, type DateOperator, DEFAULT_LIMIT, MAX_EMAIL_LENGTH, MAX_FILTER_LENGTH, MAX_LIMIT, MAX_NAME_LENGTH } from './list.ts'

/** The envelope's schema: `{hasMore, data: item[], parameters}` (and a list's own further keys, `extra`). */
export function pageSchema<Item extends TSchema, Parameters extends TSchema, Extra extends TProperties = {}>(
  item: Item,
  parameters: Parameters,
  description: string,
  hasMore = 'Whether more items follow: repeat with `createdAt.lt` set to the last item\'s `createdAt`',
  extra: Extra = {} as Extra,
) {
  return t.Object(
    {
      hasMore: t.Boolean({ description: hasMore }),
      data: t.Array(item),
      parameters,
      ...extra,
    },
    { description },
  )
}

/** `parameters` of a page: the path's names and the limit used. */
export const EnvironmentPageParameters = t.Object({ projectName: t.String(), environmentName: t.String(), limit: Integer() })
export const ProjectPageParameters = t.Object({ projectName: t.String(), limit: Integer() })

const OPERATOR_SIGNS: Record<DateOperator, string> = { eq: '=', lt: '<', lte: '≤', gt: '>', gte: '≥' }

type Parameter = NonNullable<DocumentDecoration['parameters']>[number]
type QueryDoc = { description: string; schema?: Record<string, unknown> }

/**
 * The documented query parameters of a list route (OpenAPI `parameters`): `limit`, its filters and the
 * `<field>.<op>` date filters. Handlers parse the query themselves with list.ts.
 */
export function listParameters(filters: Record<string, QueryDoc>, dateFields: readonly string[]): Parameter[] {
  const query = (name: string, description: string, schema: Record<string, unknown> = { type: 'string', maxLength: MAX_FILTER_LENGTH }): Parameter => ({
    name,
    in: 'query',
    required: false,
    description,
    schema: schema as Extract<Parameter, { in: string }>['schema'],
  })
  return [
    query('limit', `Items per page, 1 to ${MAX_LIMIT} (default ${DEFAULT_LIMIT})`, { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }),
    ...Object.entries(filters).map(([name, doc]) => query(name, doc.description, doc.schema)),
    ...dateFields.flatMap((field) =>
      DATE_OPERATORS.map((op) =>
        query(`${field}.${op}`, `${field} ${OPERATOR_SIGNS[op]} this ISO 8601 date-time (any offset; compared in UTC)`, {
          type: 'string',
          format: 'date-time',
        }),
      ),
    ),
  ]
}

/** A string filter of at most `maxLength` characters (list.ts refuses longer ones). */
export function textFilter(maxLength: number) {
  return { type: 'string', maxLength }
}

/** Filter docs shared by the notes and activity-log lists. */
export const PEOPLE_AND_PLACES: Record<string, QueryDoc> = {
  userEmail: { description: 'Only items of the user with this email', schema: textFilter(MAX_EMAIL_LENGTH) },
  userId: { description: 'Only items of the user with this id', schema: ID_SCHEMA },
  teamName: { description: 'Only items of this team', schema: textFilter(MAX_NAME_LENGTH) },
  collectionName: { description: 'Only items of this collection', schema: textFilter(MAX_NAME_LENGTH) },
  recordId: { description: 'Only items of this record' },
}

/** A query parameter that takes one of `values`. */
export function enumQuery(description: string, values: readonly string[]): QueryDoc {
  return { description, schema: { type: 'string', enum: [...values] } }
}

/** The log lists' `extensions` switch (DESIGN "Wire compatibility"). */
export const EXTENSIONS_QUERY: QueryDoc = {
  description:
    'true: also list the entries the compatibility document cannot describe (Trellis extension actions, resources and initiators). ' +
    'Without it a page holds only entries that validate against that document.',
  schema: { type: 'boolean', default: false },
}

/** A filter on a compatibility-document enum that Trellis extends: every value, the extensions only with `extensions=true`. */
export function extensibleEnumQuery(description: string, values: { documented: readonly string[]; extensions: readonly string[] }): QueryDoc {
  return enumQuery(`${description}. Trellis extensions, accepted only with extensions=true (otherwise 400): ${values.extensions.join(', ')}`, [
    ...values.documented,
    ...values.extensions,
  ])
}

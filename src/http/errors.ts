/**
 * The one error body (DESIGN §5): `{ error: <HTTP reason>, code: <snake_case>, message, details? }`.
 * Services throw the errors of src/lib/errors.ts; the root app's onError renders every one of them, and every Elysia
 * error, the same way.
 */
import { type Static, t } from 'elysia'
import { type ErrorBody as ErrorFields, HttpError, reasonPhrase, retryLater } from '../lib/errors.ts'
import { StorageUnavailableError } from '../lib/storage-unavailable.ts'
import { Integer } from './schemas.ts'

/**
 * The error body as a schema: `components/schemas/Error` of /openapi.json. Routes list the statuses they can
 * answer with `errorResponses(…)`; the auth plugin adds its own (401/403/429), the document builder the ones every
 * route shares (body rules, 500).
 */
export const ErrorBodySchema = t.Object(
  {
    error: t.String({ description: 'The HTTP reason phrase', examples: ['Bad Request'] }),
    code: t.String({ description: 'What went wrong, in snake_case', examples: ['invalid_parameter'] }),
    message: t.String({ description: 'A readable explanation' }),
    details: t.Optional(
      t.Array(t.Object({ field: t.String(), message: t.String() }), { description: 'Validation failures, one per field' }),
    ),
    runId: t.Optional(t.String({ description: '`409 run_in_progress`: the run already active on the record' })),
    retry_after: t.Optional(
      Integer({ description: '`429 rate_limited` and every `503` storage fault (`database_busy`, `storage_full`, `storage_read_only`, `database_unavailable`): seconds to wait, as in Retry-After' }),
    ),
  },
  { $id: 'Error', additionalProperties: true },
)

export type ErrorBody = Static<typeof ErrorBodySchema> & ErrorFields

/** `response` entries for the error statuses a route can answer, all with the one error body. */
export function errorResponses<const S extends readonly number[]>(...statuses: S): { [K in S[number]]: typeof ErrorBodySchema } {
  return Object.fromEntries(statuses.map((status) => [status, ErrorBodySchema])) as { [K in S[number]]: typeof ErrorBodySchema }
}

export function errorBody(status: number, code: string, message: string, extra: Record<string, unknown> = {}): ErrorBody {
  return { error: reasonPhrase(status), code, message, ...extra }
}

export function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  })
}

export function errorResponse(error: HttpError): Response {
  return jsonResponse(error.status, error.toBody(), error.headers)
}

/**
 * The error as the HTTP answer it maps to, or null when it is not ours: an HttpError itself, or 503
 * `database_busy` / `storage_full` / `storage_read_only` / `database_unavailable` for a storage fault (docs/operations.md "Storage faults").
 */
export function asHttpError(error: unknown): HttpError | null {
  if (error instanceof HttpError) return error
  if (error instanceof StorageUnavailableError) return retryLater(503, error.code, error.message, error.retryAfterSeconds)
  return null
}

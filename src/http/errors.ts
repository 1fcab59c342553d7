/**
 * The one error body (DESIGN §5): `{ error: <HTTP reason>, code: <snake_case>, message, details? }`.
 * Services throw these; the root app's onError renders every one of them, and every Elysia error, the same way.
 */
import { STATUS_CODES } from 'node:http'
import { type Static, t } from 'elysia'
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
      Integer({ description: '`429 rate_limited`, `503 database_busy` and `503 storage_full`: seconds to wait, as in Retry-After' }),
    ),
  },
  { $id: 'Error', additionalProperties: true },
)

export type ErrorBody = Static<typeof ErrorBodySchema> & Record<string, unknown>

/** `response` entries for the error statuses a route can answer, all with the one error body. */
export function errorResponses<const S extends readonly number[]>(...statuses: S): { [K in S[number]]: typeof ErrorBodySchema } {
  return Object.fromEntries(statuses.map((status) => [status, ErrorBodySchema])) as { [K in S[number]]: typeof ErrorBodySchema }
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Extra fields merged into the body (e.g. `runId`, `retry_after`, `details`). */
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
    this.name = new.target.name
  }

  toBody(): ErrorBody {
    return { error: reasonPhrase(this.status), code: this.code, message: this.message, ...this.extra }
  }
}

export const badRequest = (code: string, message: string, extra?: Record<string, unknown>) =>
  new HttpError(400, code, message, extra)
/**
 * 400 `validation_failed` for fields a schema cannot judge (blank after trimming, an unknown name…): the message
 * names the first field as schema messages do (DESIGN §5), `details` lists them all.
 */
export function invalidFields(details: { field: string; message: string }[]): HttpError {
  const first = details[0]!
  return new HttpError(400, 'validation_failed', `Invalid field '${first.field}': ${first.message}`, { details })
}
export const invalidField = (field: string, message: string) => invalidFields([{ field, message }])

export const unauthorized = (message = 'Invalid or missing token') => new HttpError(401, 'unauthorized', message)
export const forbidden = (message = 'Insufficient permissions for the operation', code = 'forbidden') =>
  new HttpError(403, code, message)
export const notFound = (message = 'Not found', code = 'not_found') => new HttpError(404, code, message)
export const conflict = (code: string, message: string, extra?: Record<string, unknown>) =>
  new HttpError(409, code, message, extra)
export const payloadTooLarge = (limit: number) =>
  new HttpError(413, 'payload_too_large', `Request body exceeds the limit of ${limit} bytes`)

export function reasonPhrase(status: number): string {
  return STATUS_CODES[status] ?? 'Error'
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

/** `status` with `Retry-After` in whole seconds (≥ 1) and the same number in the body as `retry_after`. */
function retryLater(status: number, code: string, message: string, retryAfterSeconds: number): HttpError {
  const seconds = Math.max(1, Math.ceil(retryAfterSeconds))
  return new HttpError(status, code, `${message}; retry in ${seconds} s`, { retry_after: seconds }, { 'retry-after': String(seconds) })
}

/** 429 rate_limited. */
export const tooManyRequests = (retryAfterSeconds: number, message = 'Too many requests') =>
  retryLater(429, 'rate_limited', message, retryAfterSeconds)

/**
 * The error as the HTTP answer it maps to, or null when it is not ours: an HttpError itself, or 503
 * `database_busy` / `storage_full` for a storage fault (README "Storage faults").
 */
export function asHttpError(error: unknown): HttpError | null {
  if (error instanceof HttpError) return error
  if (error instanceof StorageUnavailableError) return retryLater(503, error.code, error.message, error.retryAfterSeconds)
  return null
}

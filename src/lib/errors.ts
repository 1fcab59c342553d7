/**
 * The errors services throw: a status, a snake_case code and a message (DESIGN §5), no Elysia. The one error body
 * is `{ error: <HTTP reason>, code, message, …extra }`; src/http/errors.ts renders it (onError, its schema).
 */
import { STATUS_CODES } from 'node:http'

/** The error body; its schema (`components/schemas/Error`) is src/http/errors.ts's ErrorBodySchema. */
export interface ErrorBody {
  error: string
  code: string
  message: string
  [field: string]: unknown
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
/** 422: the request is well formed but cannot be honoured as sent (an idempotency key reused with another body). */
export const unprocessable = (code: string, message: string) => new HttpError(422, code, message)
export const payloadTooLarge = (limit: number) =>
  new HttpError(413, 'payload_too_large', `Request body exceeds the limit of ${limit} bytes`)

export function reasonPhrase(status: number): string {
  return STATUS_CODES[status] ?? 'Error'
}

/** `status` with `Retry-After` in whole seconds (≥ 1) and the same number in the body as `retry_after`. */
export function retryLater(status: number, code: string, message: string, retryAfterSeconds: number): HttpError {
  const seconds = Math.max(1, Math.ceil(retryAfterSeconds))
  return new HttpError(status, code, `${message}; retry in ${seconds} s`, { retry_after: seconds }, { 'retry-after': String(seconds) })
}

/** 429 rate_limited. */
export const tooManyRequests = (retryAfterSeconds: number, message = 'Too many requests') =>
  retryLater(429, 'rate_limited', message, retryAfterSeconds)

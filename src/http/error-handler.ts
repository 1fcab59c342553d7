/** Maps every error — ours and Elysia's — to the one JSON body of DESIGN §5. */
import type { Logger } from '../lib/logger.ts'
import type { ValueError } from '@sinclair/typebox/errors'
import { explainErrors } from '../lib/validation.ts'
import { methodNotAllowed } from './allowed-methods.ts'
import { asHttpError, errorBody, errorResponse, jsonResponse } from './errors.ts'
import { redactPath } from './request-log.ts'
import { requestPath } from './server-request.ts'

interface ValidationLike {
  type: string
  /** TypeBox's errors, as the compiled checker reports them. */
  all: ValueError[]
}

function validationResponse(error: ValidationLike): Response {
  const where = error.type === 'query' ? 'query parameter' : error.type === 'params' ? 'path parameter' : error.type === 'headers' ? 'header' : 'field'
  const details = explainErrors(error.all, '', error.type).map((p) => ({ field: p.path, message: p.message }))
  const first = details[0] ?? { field: error.type, message: 'invalid value' }
  const code = error.type === 'body' ? 'validation_failed' : 'invalid_parameter'
  return jsonResponse(400, errorBody(400, code, `Invalid ${where} '${first.field}': ${first.message}`, { details }))
}

/**
 * `allowedFor` names the methods a path is served with: a known path asked with another method is 405, not 404.
 */
export function renderError(
  code: string | number,
  error: unknown,
  request: Request,
  logger: Logger,
  allowedFor: (pathname: string) => string[] = () => [],
): Response {
  // Elysia wraps what a parser throws (our 413 and invalid_json) in its ParseError.
  const ours = asHttpError(error) ?? asHttpError((error as { cause?: unknown } | null)?.cause)
  if (ours) return errorResponse(ours)
  switch (code) {
    case 'VALIDATION':
      // A handler's answer that does not match its documented schema is our bug, not the caller's.
      if ((error as unknown as ValidationLike).type === 'response') return responseMismatch(error as unknown as ValidationLike, request, logger)
      return validationResponse(error as unknown as ValidationLike)
    case 'NOT_FOUND': {
      const pathname = requestPath(request)
      const allowed = allowedFor(pathname)
      if (allowed.length > 0) return methodNotAllowed(request.method, pathname, allowed)
      return jsonResponse(404, errorBody(404, 'not_found', `No route for ${request.method} ${pathname}`))
    }
    case 'PARSE':
      return jsonResponse(400, errorBody(400, 'invalid_body', 'Request body could not be parsed'))
    case 'INVALID_COOKIE_SIGNATURE':
      return jsonResponse(401, errorBody(401, 'unauthorized', 'Invalid session cookie'))
    default:
      return internalError(error, request, logger)
  }
}

/** Logs where the answer differs from its schema — never the answer itself (it may hold a new token's value). */
function responseMismatch(error: ValidationLike, request: Request, logger: Logger): Response {
  logger.error('response does not match its schema', {
    method: request.method,
    path: redactPath(requestPath(request)),
    problems: error.all.slice(0, 5).map((e) => `${e.path || '/'}: ${e.message}`),
  })
  return jsonResponse(500, errorBody(500, 'internal_error', 'Internal server error'))
}

function internalError(error: unknown, request: Request, logger: Logger): Response {
  logger.error('unhandled error', {
    method: request.method,
    path: redactPath(requestPath(request)),
    error: error instanceof Error ? (error.stack ?? error.message) : String(error),
  })
  return jsonResponse(500, errorBody(500, 'internal_error', 'Internal server error'))
}

/** Headers a hook already set (the rate-limit headers) are kept on error responses too. */
export function withHeaders(response: Response, headers: Record<string, unknown>): Response {
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === 'string' && !response.headers.has(name)) response.headers.set(name, value)
  }
  return response
}

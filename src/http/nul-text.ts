/**
 * beforeHandle hook for every route: a path parameter or a JSON body field holding U+0000 is refused with a 400
 * naming it (src/lib/nul.ts says why). It runs after the auth macros' authentication and the schema validation, so a
 * caller without a valid token learns nothing from it.
 */
import { NUL_MESSAGE, nulPath } from '../lib/nul.ts'
import { RAW_BODY_PATHS } from './body.ts'
import { badRequest, invalidField } from './errors.ts'
import { requestPath } from './server-request.ts'

/**
 * Routes that authenticate with their body and check it themselves, first: the webhook (its raw body; its
 * `record_id` is refused there), the first-start setup (its token; its email and username refuse control
 * characters, its password is only hashed) and an invitation (its link and password are only hashed).
 */
const OWN_BODY_CHECKS = [...RAW_BODY_PATHS, '/setup', '/auth/invitation']

export function refuseNulText({ request, params, body }: { request: Request; params?: unknown; body?: unknown }): void {
  const path = requestPath(request)
  if (OWN_BODY_CHECKS.some((prefix) => path.startsWith(prefix))) return
  for (const [name, value] of Object.entries((params ?? {}) as Record<string, unknown>)) {
    if (nulPath(value) !== null) {
      throw badRequest('invalid_parameter', `Invalid path parameter '${name}': ${NUL_MESSAGE}`, { details: [{ field: name, message: NUL_MESSAGE }] })
    }
  }
  const field = body !== null && typeof body === 'object' ? nulPath(body) : null
  if (field !== null) throw invalidField(field, NUL_MESSAGE)
}

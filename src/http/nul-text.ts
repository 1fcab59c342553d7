/**
 * A path parameter or a JSON body field holding U+0000 is refused with a 400 naming it (src/lib/nul.ts says why).
 * Run once the caller is known: as the auth macros' beforeHandle (after authentication and schema validation), by
 * the console's pages after their session check, and by password login. Routes that authenticate with their own
 * body check it themselves: the webhook (its raw body; its `record_id` is refused there), the first-start setup
 * (its email and username refuse control characters, its password is only hashed) and an invitation (its link and
 * password are only hashed).
 */
import { NUL_MESSAGE, nulPath } from '../lib/nul.ts'
import { badRequest, invalidField } from './errors.ts'

export function refuseNulText({ params, body }: { params?: unknown; body?: unknown }): void {
  for (const [name, value] of Object.entries((params ?? {}) as Record<string, unknown>)) {
    if (nulPath(value) !== null) {
      throw badRequest('invalid_parameter', `Invalid path parameter '${name}': ${NUL_MESSAGE}`, { details: [{ field: name, message: NUL_MESSAGE }] })
    }
  }
  const field = body !== null && typeof body === 'object' ? nulPath(body) : null
  if (field !== null) throw invalidField(field, NUL_MESSAGE)
}

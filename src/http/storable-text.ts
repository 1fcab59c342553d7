/**
 * A path parameter or a JSON body field holding text no store holds (U+0000, a lone surrogate: src/lib/storable-text.ts
 * says why) is refused with a 400 naming it.
 * Run once the caller is known: as the auth macros' beforeHandle (after authentication and schema validation), by
 * the console's pages after their session check, and by password login. Routes that authenticate with their own
 * body check it themselves: the webhook (its raw body; its `record_id` is refused there), the first-start setup
 * (its email and username refuse control characters and lone surrogates, its password is only hashed) and an
 * invitation (its link and password are only hashed).
 */
import { unstorableTextPath, unstorableTextProblem } from '../lib/storable-text.ts'
import { badRequest, invalidField } from '../lib/errors.ts'

export function refuseUnstorableText({ params, body }: { params?: unknown; body?: unknown }): void {
  for (const [name, value] of Object.entries((params ?? {}) as Record<string, unknown>)) {
    const problem = unstorableTextProblem(value)
    if (problem !== null) {
      throw badRequest('invalid_parameter', `Invalid path parameter '${name}': ${problem}`, { details: [{ field: name, message: problem }] })
    }
  }
  const found = body !== null && typeof body === 'object' ? unstorableTextPath(body) : null
  if (found !== null) throw invalidField(found.path, found.message)
}

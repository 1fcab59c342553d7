/**
 * The `Idempotency-Key` request header of the run starts (IETF draft "The Idempotency-Key HTTP Header Field";
 * docs/workflows.md "Idempotency keys"): read and checked here, its meaning is the runs module's. Also how /openapi.json
 * documents it, and the `Idempotent-Replayed` answer header.
 */
import type { DocumentDecoration } from 'elysia'
import { badRequest } from '../lib/errors.ts'

export const IDEMPOTENCY_KEY_MAX_LENGTH = 255

/** 1 to 255 printable ASCII characters (space to tilde): as the header arrives, its surrounding whitespace already trimmed. */
const VALID_KEY = new RegExp(`^[\\x20-\\x7e]{1,${IDEMPOTENCY_KEY_MAX_LENGTH}}$`)

/** The call's idempotency key, or null without the header; 400 `invalid_idempotency_key` when it is not a valid key. */
export function idempotencyKeyOf(request: Request): string | null {
  const key = request.headers.get('idempotency-key')
  if (key === null) return null
  if (!VALID_KEY.test(key)) {
    throw badRequest('invalid_idempotency_key', `Header 'Idempotency-Key' must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters`)
  }
  return key
}

/** A run start's 202: `{runId}`, with `Idempotent-Replayed: true` when an earlier call with the same key created the run. */
export function runAccepted(set: { status?: number | string; headers: Record<string, unknown> }, started: { runId: string; replayed: boolean }): { runId: string } {
  set.status = 202
  if (started.replayed) set.headers['idempotent-replayed'] = 'true'
  return { runId: started.runId }
}

/** The header parameter and the `Idempotent-Replayed` header of the 202, for a run start's `detail` (its 422 is in its `response`). */
export function idempotencyDocs(where: string): Pick<DocumentDecoration, 'parameters' | 'responses'> {
  return {
    parameters: [
      {
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description:
          `Makes the start safe to retry: a repeat with the same key and ${where} within the retention window (TRELLIS_IDEMPOTENCY_KEY_HOURS, 24 h by default) ` +
          'starts nothing and answers the first call’s 202 again, with `Idempotent-Replayed: true`, whatever the run has become; the same key with another body is 422. ' +
          'Keys belong to the workflow and the caller’s user. A call answered with an error records nothing.',
        schema: { type: 'string', minLength: 1, maxLength: IDEMPOTENCY_KEY_MAX_LENGTH, pattern: '^[\\x20-\\x7e]+$' },
      },
    ],
    responses: {
      202: {
        description: 'Accepted',
        headers: {
          'Idempotent-Replayed': {
            description: '`true` when an earlier call with the same Idempotency-Key created the run (a replay); absent otherwise',
            schema: { type: 'string', enum: ['true'] },
          },
        },
      },
    },
  }
}

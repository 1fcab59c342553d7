/** Console login sessions: random ids in an HttpOnly cookie, only their SHA-256 stored, absolute expiry. */
import { createHash, randomBytes } from 'node:crypto'
import { deleteExpiredSessions, deleteSessionByHash, findSessionByHash, insertSession } from '../../db/sessions.ts'
import type { User } from '../../db/users.ts'
import type { Clock } from '../../lib/clock.ts'
import type { Op } from '../../db/op.ts'

export const SESSION_TTL_MS = 7 * 24 * 3600 * 1000

export type SessionUser = User

function hashSessionId(id: string): string {
  return createHash('sha256').update(id).digest('hex')
}

/** Returns the cookie value; the only place the raw id exists. */
export function* createSession(clock: Clock, userId: number, viaSso: boolean): Op<{ id: string; expiresAt: number }> {
  const id = randomBytes(32).toString('base64url')
  const now = clock.now()
  const expiresAt = now + SESSION_TTL_MS
  // Expired sessions are swept as new ones are made: the table never grows without bound.
  yield* deleteExpiredSessions(now)
  yield* insertSession({ idHash: hashSessionId(id), userId, viaSso, createdAt: now, expiresAt })
  return { id, expiresAt }
}

/** The live session's user, or null (unknown, expired, or the user was deactivated). */
export function* findSession(clock: Clock, id: string | undefined): Op<{ user: SessionUser; viaSso: boolean } | null> {
  if (!id || id.length > 100) return null
  const row = yield* findSessionByHash(hashSessionId(id))
  if (!row || row.expiresAt <= clock.now() || row.user.disabledAt !== null) return null
  return { user: row.user, viaSso: row.viaSso }
}

export function* deleteSession(id: string): Op<void> {
  yield* deleteSessionByHash(hashSessionId(id))
}

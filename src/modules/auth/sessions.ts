/** Console login sessions: random ids in an HttpOnly cookie, only their SHA-256 stored, absolute expiry. */
import { eq, lt } from 'drizzle-orm'
import { createHash, randomBytes } from 'node:crypto'
import type { Db } from '../../db/open.ts'
import { sessions, users } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'

export { SESSION_COOKIE } from '../../http/session-cookie.ts'
export const SESSION_TTL_MS = 7 * 24 * 3600 * 1000

export type SessionUser = typeof users.$inferSelect

function hashSessionId(id: string): string {
  return createHash('sha256').update(id).digest('hex')
}

/** Returns the cookie value; the only place the raw id exists. */
export function createSession(db: Db, clock: Clock, userId: number, viaSso: boolean): { id: string; expiresAt: number } {
  const id = randomBytes(32).toString('base64url')
  const now = clock.now()
  const expiresAt = now + SESSION_TTL_MS
  // Expired sessions are swept as new ones are made: the table never grows without bound.
  db.delete(sessions).where(lt(sessions.expiresAt, now)).run()
  db.insert(sessions).values({ idHash: hashSessionId(id), userId, viaSso, createdAt: now, expiresAt }).run()
  return { id, expiresAt }
}

/** The live session's user, or null (unknown, expired, or the user was deactivated). */
export function findSession(db: Db, clock: Clock, id: string | undefined): { user: SessionUser; viaSso: boolean } | null {
  if (!id || id.length > 100) return null
  const row = db
    .select({ user: users, viaSso: sessions.viaSso, expiresAt: sessions.expiresAt })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(eq(sessions.idHash, hashSessionId(id)))
    .get()
  if (!row || row.expiresAt <= clock.now() || row.user.disabledAt !== null) return null
  return { user: row.user, viaSso: row.viaSso }
}

export function deleteSession(db: Db, id: string): void {
  db.delete(sessions).where(eq(sessions.idHash, hashSessionId(id))).run()
}

/** Ends every session of a user (deactivation, password change). */
export function deleteUserSessions(db: Db, userId: number): void {
  db.delete(sessions).where(eq(sessions.userId, userId)).run()
}

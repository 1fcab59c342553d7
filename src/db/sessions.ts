/**
 * Sign-in storage: console sessions (by the SHA-256 of their id), and the instance settings (`instance_settings`, one
 * JSON value per name: the identity provider's `sso`, the outbound allow-list's `http-allow`). Hashing and expiry
 * rules stay in the auth services, the settings' meaning with their modules.
 */
import { eq, lt, sql } from 'drizzle-orm'
import type { Op } from './op.ts'
import { exec, row, statement } from './query.ts'

/** Removes sessions that expired before `now` (swept as new ones are made). */
export function deleteExpiredSessions(now: number) {
  return exec(({ db, t }) => db.delete(t.sessions).where(lt(t.sessions.expiresAt, now)))
}

export function insertSession(session: { idHash: string; userId: number; viaSso: boolean; createdAt: number; expiresAt: number }) {
  return exec(({ db, t }) => db.insert(t.sessions).values(session))
}

const SESSION_BY_HASH = statement('sessions.by-hash', ({ db, t }) =>
  db
    .select({ user: t.users, viaSso: t.sessions.viaSso, expiresAt: t.sessions.expiresAt })
    .from(t.sessions)
    .innerJoin(t.users, eq(t.users.id, t.sessions.userId))
    .where(eq(t.sessions.idHash, sql.placeholder('idHash'))),
)

/** The session stored under this id hash, with its user (a statement: every console request asks). */
export function findSessionByHash(idHash: string) {
  return SESSION_BY_HASH.row({ idHash })
}

export function deleteSessionByHash(idHash: string) {
  return exec(({ db, t }) => db.delete(t.sessions).where(eq(t.sessions.idHash, idHash)))
}

export function deleteSessionsOfUser(userId: number) {
  return exec(({ db, t }) => db.delete(t.sessions).where(eq(t.sessions.userId, userId)))
}

/** An instance setting's stored text, or undefined. */
export function* readInstanceSetting(name: string): Op<string | undefined> {
  return (yield* row(({ db, t }) => db.select({ value: t.instanceSettings.value }).from(t.instanceSettings).where(eq(t.instanceSettings.name, name))))?.value
}

export function writeInstanceSetting(name: string, value: string, now: number) {
  return exec(({ db, t }) =>
    db
      .insert(t.instanceSettings)
      .values({ name, value, updatedAt: now })
      .onConflictDoUpdate({ target: t.instanceSettings.name, set: { value, updatedAt: now } }),
  )
}

export function deleteInstanceSetting(name: string) {
  return exec(({ db, t }) => db.delete(t.instanceSettings).where(eq(t.instanceSettings.name, name)))
}

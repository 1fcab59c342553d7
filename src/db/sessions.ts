/**
 * Sign-in storage: console sessions (by the SHA-256 of their id) and the stored identity provider settings
 * (`instance_settings` row `sso`, JSON). Hashing and expiry rules stay in the auth services.
 */
import { eq, lt } from 'drizzle-orm'
import type { Db } from './open.ts'
import { statementOn } from './prepared.ts'
import { instanceSettings, sessions } from './schema.ts'
import type { User } from './users.ts'

/** Removes sessions that expired before `now` (swept as new ones are made). */
export function deleteExpiredSessions(db: Db, now: number): void {
  db.delete(sessions).where(lt(sessions.expiresAt, now)).run()
}

export function insertSession(db: Db, row: { idHash: string; userId: number; viaSso: boolean; createdAt: number; expiresAt: number }): void {
  db.insert(sessions).values(row).run()
}

const SESSION_BY_HASH = `SELECT u.id, u.email, u.username, u.password_hash, u.is_instance_admin, u.disabled_at, u.created_at, u.updated_at,
    s.via_sso, s.expires_at
  FROM sessions s JOIN users u ON u.id = s.user_id
  WHERE s.id_hash = ?`

/** The session stored under this id hash, with its user (prepared: every console request asks; shaped here). */
export function findSessionByHash(db: Db, idHash: string): { user: User; viaSso: boolean; expiresAt: number } | undefined {
  const row = statementOn(db, 'sessions.by-hash', SESSION_BY_HASH).values(idHash)[0] as
    | [number, string, string, string | null, number, number | null, number, number, number, number]
    | undefined
  if (!row) return undefined
  const [id, email, username, passwordHash, isInstanceAdmin, disabledAt, createdAt, updatedAt, viaSso, expiresAt] = row
  return { user: { id, email, username, passwordHash, isInstanceAdmin: isInstanceAdmin === 1, disabledAt, createdAt, updatedAt }, viaSso: viaSso === 1, expiresAt }
}

export function deleteSessionByHash(db: Db, idHash: string): void {
  db.delete(sessions).where(eq(sessions.idHash, idHash)).run()
}

export function deleteSessionsOfUser(db: Db, userId: number): void {
  db.delete(sessions).where(eq(sessions.userId, userId)).run()
}

/** An instance setting's stored text, or undefined. */
export function readInstanceSetting(db: Db, name: string): string | undefined {
  return db.select({ value: instanceSettings.value }).from(instanceSettings).where(eq(instanceSettings.name, name)).get()?.value
}

export function writeInstanceSetting(db: Db, name: string, value: string, now: number): void {
  db.insert(instanceSettings)
    .values({ name, value, updatedAt: now })
    .onConflictDoUpdate({ target: instanceSettings.name, set: { value, updatedAt: now } })
    .run()
}

export function deleteInstanceSetting(db: Db, name: string): void {
  db.delete(instanceSettings).where(eq(instanceSettings.name, name)).run()
}

/**
 * Sign-in storage: console sessions (by the SHA-256 of their id) and the stored identity provider settings
 * (`instance_settings` row `sso`, JSON). Hashing and expiry rules stay in the auth services.
 */
import { eq, lt } from 'drizzle-orm'
import type { Db } from './open.ts'
import { instanceSettings, sessions, users } from './schema.ts'
import type { User } from './users.ts'

/** Removes sessions that expired before `now` (swept as new ones are made). */
export function deleteExpiredSessions(db: Db, now: number): void {
  db.delete(sessions).where(lt(sessions.expiresAt, now)).run()
}

export function insertSession(db: Db, row: { idHash: string; userId: number; viaSso: boolean; createdAt: number; expiresAt: number }): void {
  db.insert(sessions).values(row).run()
}

/** The session stored under this id hash, with its user. */
export function findSessionByHash(db: Db, idHash: string): { user: User; viaSso: boolean; expiresAt: number } | undefined {
  return db
    .select({ user: users, viaSso: sessions.viaSso, expiresAt: sessions.expiresAt })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(eq(sessions.idHash, idHash))
    .get()
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

/**
 * Issue 18: sign-in storage as PostgreSQL twins of src/db/sessions.ts — console sessions by the hash of their id,
 * and the instance settings. The session lookup (prepared and shaped by hand on SQLite) is a plain query here.
 */
import { eq, lt } from 'drizzle-orm'
import {
  deleteExpiredSessions,
  deleteInstanceSetting,
  deleteSessionByHash,
  deleteSessionsOfUser,
  findSessionByHash,
  insertSession,
  readInstanceSetting,
  writeInstanceSetting,
} from '../sessions.ts'
import type { User } from '../users.ts'
import { instanceSettings, sessions, users } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

async function deleteExpiredSessionsOnPostgres(db: PgDb, now: number): Promise<void> {
  await db.delete(sessions).where(lt(sessions.expiresAt, now))
}

async function insertSessionOnPostgres(db: PgDb, row: { idHash: string; userId: number; viaSso: boolean; createdAt: number; expiresAt: number }): Promise<void> {
  await db.insert(sessions).values(row)
}

async function findSessionByHashOnPostgres(db: PgDb, idHash: string): Promise<{ user: User; viaSso: boolean; expiresAt: number } | undefined> {
  const [row] = await db
    .select({ user: users, viaSso: sessions.viaSso, expiresAt: sessions.expiresAt })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(eq(sessions.idHash, idHash))
  return row
}

async function deleteSessionByHashOnPostgres(db: PgDb, idHash: string): Promise<void> {
  await db.delete(sessions).where(eq(sessions.idHash, idHash))
}

async function deleteSessionsOfUserOnPostgres(db: PgDb, userId: number): Promise<void> {
  await db.delete(sessions).where(eq(sessions.userId, userId))
}

async function readInstanceSettingOnPostgres(db: PgDb, name: string): Promise<string | undefined> {
  const [row] = await db.select({ value: instanceSettings.value }).from(instanceSettings).where(eq(instanceSettings.name, name))
  return row?.value
}

async function writeInstanceSettingOnPostgres(db: PgDb, name: string, value: string, now: number): Promise<void> {
  await db
    .insert(instanceSettings)
    .values({ name, value, updatedAt: now })
    .onConflictDoUpdate({ target: instanceSettings.name, set: { value, updatedAt: now } })
}

async function deleteInstanceSettingOnPostgres(db: PgDb, name: string): Promise<void> {
  await db.delete(instanceSettings).where(eq(instanceSettings.name, name))
}

/** The twins of the sign-in storage, by the SQLite function they stand for. */
export const SESSIONS_TWINS = twins(
  twin(deleteExpiredSessions, deleteExpiredSessionsOnPostgres),
  twin(insertSession, insertSessionOnPostgres),
  twin(findSessionByHash, findSessionByHashOnPostgres),
  twin(deleteSessionByHash, deleteSessionByHashOnPostgres),
  twin(deleteSessionsOfUser, deleteSessionsOfUserOnPostgres),
  twin(readInstanceSetting, readInstanceSettingOnPostgres),
  twin(writeInstanceSetting, writeInstanceSettingOnPostgres),
  twin(deleteInstanceSetting, deleteInstanceSettingOnPostgres),
)

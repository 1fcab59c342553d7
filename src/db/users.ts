/**
 * The users domain's storage: users (found by id or stored email, counted, created, changed), their invitations,
 * and the user columns other domains' queries select to build the compatibility document's user object.
 * Emails arrive here already normalized (the users service owns that rule).
 */
import { and, asc, count, eq, isNull, ne, sql } from 'drizzle-orm'
import type { Db } from './open.ts'
import { prepared } from './prepared.ts'
import { invitations, users } from './schema.ts'

export type User = typeof users.$inferSelect

/** The columns the user object is made of: other domains' queries select them (then `userObject`). */
export const userColumns = { id: users.id, username: users.username, email: users.email }

export function findUserById(db: Db, id: number): User | undefined {
  return db.select().from(users).where(eq(users.id, id)).get()
}

/** The user with this stored (normalized) email. */
export function findUserByStoredEmail(db: Db, email: string): User | undefined {
  return db.select().from(users).where(eq(users.email, email)).get()
}

export function countAllUsers(db: Db): number {
  return db.select({ n: count() }).from(users).get()?.n ?? 0
}

/** Every user, by email. */
export function allUsersByEmail(db: Db): User[] {
  return db.select().from(users).orderBy(asc(users.email)).all()
}

/**
 * Holds the instance administrators' rule for the rest of the write transaction: a write that may leave the instance
 * without an active instance administrator (revoking, deactivating) or that makes the first one (setup) takes it
 * before it reads what it checks. SQLite's one writer already runs every write transaction alone: nothing to take.
 * The PostgreSQL twin is an advisory lock (README "Instance administrators, people and project settings").
 */
export function lockInstanceAdmins(_db: Db): void {}

/** How many active instance administrators there are besides this user. */
export function countOtherActiveInstanceAdmins(db: Db, userId: number): number {
  return (
    db
      .select({ n: count() })
      .from(users)
      .where(and(eq(users.isInstanceAdmin, true), isNull(users.disabledAt), ne(users.id, userId)))
      .get()?.n ?? 0
  )
}

export function insertUserRow(
  db: Db,
  row: { email: string; username: string; passwordHash: string | null; isInstanceAdmin: boolean; disabledAt: number | null; now: number },
): User {
  const [user] = db
    .insert(users)
    .values({
      email: row.email,
      username: row.username,
      passwordHash: row.passwordHash,
      isInstanceAdmin: row.isInstanceAdmin,
      disabledAt: row.disabledAt,
      createdAt: row.now,
      updatedAt: row.now,
    })
    .returning()
    .all()
  if (!user) throw new Error('user insert returned no row')
  return user
}

/** Changes some of a user's fields and stamps `updatedAt`. */
export function updateUser(
  db: Db,
  userId: number,
  now: number,
  change: Partial<Pick<User, 'username' | 'passwordHash' | 'isInstanceAdmin' | 'disabledAt'>>,
): void {
  db.update(users).set({ ...change, updatedAt: now }).where(eq(users.id, userId)).run()
}

export type Invitation = typeof invitations.$inferSelect

/** Marks every unused invitation of the user used (only the newest link works). */
export function spendUserInvitations(db: Db, userId: number, now: number): void {
  db.update(invitations).set({ usedAt: now }).where(and(eq(invitations.userId, userId), isNull(invitations.usedAt))).run()
}

export function insertInvitation(db: Db, row: { tokenHash: string; userId: number; createdBy: number | null; createdAt: number; expiresAt: number }): void {
  db.insert(invitations).values(row).run()
}

export function findInvitationByHash(db: Db, tokenHash: string): Invitation | undefined {
  return db.select().from(invitations).where(eq(invitations.tokenHash, tokenHash)).get()
}

/**
 * Spends the invitation if it is still unused, in one conditional statement: false when it was already used (another
 * acceptance, or a newer link, committed first). On PostgreSQL a concurrent acceptance waits for the row and then
 * finds `used_at` set, so a link is accepted once.
 */
export function spendInvitation(db: Db, invitationId: number, now: number): boolean {
  return (
    db
      .update(invitations)
      .set({ usedAt: now })
      .where(and(eq(invitations.id, invitationId), isNull(invitations.usedAt)))
      .returning({ id: invitations.id })
      .all().length > 0
  )
}

/** When the user was deactivated (null: active), or undefined when unknown. Prepared: record access asks per request. */
export function findUserDisabledAt(db: Db, id: number): { disabledAt: number | null } | undefined {
  return prepared(db, 'users.disabled-at', () =>
    db.select({ disabledAt: users.disabledAt }).from(users).where(eq(users.id, sql.placeholder('id'))).prepare(),
  ).all({ id })[0]
}

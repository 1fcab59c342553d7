/**
 * The users domain's storage: users (found by id or stored email, counted, created, changed), their invitations,
 * and the user columns other domains' queries select to build the compatibility document's user object.
 * Emails arrive here already normalized (the users service owns that rule); they list in byte order on both stores.
 */
import { and, count, eq, isNull, ne, type SQL, sql } from 'drizzle-orm'
import type { Tables } from './dialect.ts'
import type { Op } from './op.ts'
import { lockRule } from './rule-locks.ts'
import { exec, inserted, row, rows, statement } from './query.ts'
import { type invitations, users } from './schema.ts'

export type User = typeof users.$inferSelect

/** The columns the user object is made of: other domains' queries select them (then `userObject`). */
export const userColumns = { id: users.id, username: users.username, email: users.email }

const USER_BY_ID = statement('users.by-id', ({ db, t }) => db.select().from(t.users).where(eq(t.users.id, sql.placeholder('id'))))

export function findUserById(id: number) {
  return USER_BY_ID.row({ id })
}

const USER_BY_EMAIL = statement('users.by-email', ({ db, t }) => db.select().from(t.users).where(eq(t.users.email, sql.placeholder('email'))))

/** The user with this stored (normalized) email. */
export function findUserByStoredEmail(email: string) {
  return USER_BY_EMAIL.row({ email })
}

/** How many users `where` selects (all of them without it). */
function* countUsers(where?: (t: Tables) => SQL | undefined): Op<number> {
  return (yield* row(({ db, t }) => db.select({ n: count() }).from(t.users).where(where?.(t))))?.n ?? 0
}

export function countAllUsers(): Op<number> {
  return countUsers()
}

/** Every user, by email. */
export function allUsersByEmail() {
  return rows(({ db, t, byteOrder }) => db.select().from(t.users).orderBy(byteOrder(t.users.email)))
}

/**
 * Holds the instance administrators' rule for the rest of the write transaction: a write that may leave the instance
 * without an active instance administrator (revoking, deactivating) or that makes the first one (setup) takes it
 * before it reads what it checks (./rule-locks.ts).
 */
export function lockInstanceAdmins(): Op<void> {
  return lockRule('instanceAdmins')
}

/** How many active instance administrators there are besides this user. */
export function countOtherActiveInstanceAdmins(userId: number): Op<number> {
  return countUsers((t) => and(eq(t.users.isInstanceAdmin, true), isNull(t.users.disabledAt), ne(t.users.id, userId)))
}

export function insertUserRow({
  now,
  ...user
}: {
  email: string
  username: string
  passwordHash: string | null
  isInstanceAdmin: boolean
  disabledAt: number | null
  now: number
}): Op<User> {
  return inserted(row(({ db, t }) => db.insert(t.users).values({ ...user, createdAt: now, updatedAt: now }).returning()), 'user')
}

/** Changes some of a user's fields and stamps `updatedAt`. */
export function updateUser(userId: number, now: number, change: Partial<Pick<User, 'username' | 'passwordHash' | 'isInstanceAdmin' | 'disabledAt'>>) {
  return exec(({ db, t }) => db.update(t.users).set({ ...change, updatedAt: now }).where(eq(t.users.id, userId)))
}

export type Invitation = typeof invitations.$inferSelect

/** Marks every unused invitation of the user used (only the newest link works). */
export function spendUserInvitations(userId: number, now: number) {
  return exec(({ db, t }) => db.update(t.invitations).set({ usedAt: now }).where(and(eq(t.invitations.userId, userId), isNull(t.invitations.usedAt))))
}

export function insertInvitation(invitation: { tokenHash: string; userId: number; createdBy: number | null; createdAt: number; expiresAt: number }) {
  return exec(({ db, t }) => db.insert(t.invitations).values(invitation))
}

export function findInvitationByHash(tokenHash: string) {
  return row(({ db, t }) => db.select().from(t.invitations).where(eq(t.invitations.tokenHash, tokenHash)))
}

/**
 * Spends the invitation if it is still unused, in one conditional statement: false when it was already used (another
 * acceptance, or a newer link, committed first). On PostgreSQL a concurrent acceptance waits for the row and then
 * finds `used_at` set (zero rows), so a link is accepted once.
 */
export function* spendInvitation(invitationId: number, now: number): Op<boolean> {
  const spent = yield* rows(({ db, t }) =>
    db
      .update(t.invitations)
      .set({ usedAt: now })
      .where(and(eq(t.invitations.id, invitationId), isNull(t.invitations.usedAt)))
      .returning({ id: t.invitations.id }),
  )
  return spent.length > 0
}


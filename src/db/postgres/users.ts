/**
 * Issue 18: the users domain's storage (src/db/users.ts) as PostgreSQL twins — users found by id or stored email,
 * counted, created and changed, and their invitations. Emails list in byte order, as SQLite does.
 */
import { and, count, eq, isNull, ne, sql } from 'drizzle-orm'
import {
  allUsersByEmail,
  countAllUsers,
  countOtherActiveInstanceAdmins,
  findInvitationByHash,
  findUserById,
  findUserByStoredEmail,
  findUserDisabledAt,
  insertInvitation,
  insertUserRow,
  lockInstanceAdmins,
  spendInvitation,
  spendUserInvitations,
  updateUser,
  type User,
} from '../users.ts'
import { byteOrder } from './byte-order.ts'
import { preparedOn } from './prepared.ts'
import { lockRule } from './rule-locks.ts'
import { firstRow, insertedRow } from './rows.ts'
import { invitations, users } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const findUserByIdOnPostgres = (db: PgDb, id: number) =>
  firstRow(preparedOn(db, 'users.by-id', (db) => db.select().from(users).where(eq(users.id, sql.placeholder('id'))).limit(1)).execute({ id }))

const findUserByStoredEmailOnPostgres = (db: PgDb, email: string) =>
  firstRow(preparedOn(db, 'users.by-email', (db) => db.select().from(users).where(eq(users.email, sql.placeholder('email'))).limit(1)).execute({ email }))

const countAllUsersOnPostgres = async (db: PgDb) => (await firstRow(db.select({ n: count() }).from(users)))?.n ?? 0

const allUsersByEmailOnPostgres = (db: PgDb) => db.select().from(users).orderBy(byteOrder(users.email))

const lockInstanceAdminsOnPostgres = (db: PgDb) => lockRule(db, 'instanceAdmins')

const countOtherActiveInstanceAdminsOnPostgres = async (db: PgDb, userId: number) =>
  (await firstRow(db.select({ n: count() }).from(users).where(and(eq(users.isInstanceAdmin, true), isNull(users.disabledAt), ne(users.id, userId)))))?.n ?? 0

const insertUserRowOnPostgres = (
  db: PgDb,
  { now, ...row }: { email: string; username: string; passwordHash: string | null; isInstanceAdmin: boolean; disabledAt: number | null; now: number },
): Promise<User> => insertedRow(db.insert(users).values({ ...row, createdAt: now, updatedAt: now }).returning(), 'user')

const updateUserOnPostgres = async (
  db: PgDb,
  userId: number,
  now: number,
  change: Partial<Pick<User, 'username' | 'passwordHash' | 'isInstanceAdmin' | 'disabledAt'>>,
) => {
  await db.update(users).set({ ...change, updatedAt: now }).where(eq(users.id, userId))
}

const spendUserInvitationsOnPostgres = async (db: PgDb, userId: number, now: number) => {
  await db.update(invitations).set({ usedAt: now }).where(and(eq(invitations.userId, userId), isNull(invitations.usedAt)))
}

const insertInvitationOnPostgres = async (db: PgDb, row: { tokenHash: string; userId: number; createdBy: number | null; createdAt: number; expiresAt: number }) => {
  await db.insert(invitations).values(row)
}

const findInvitationByHashOnPostgres = (db: PgDb, tokenHash: string) => firstRow(db.select().from(invitations).where(eq(invitations.tokenHash, tokenHash)).limit(1))

/** One conditional statement: a concurrent acceptance waits for the row, then finds `used_at` set (zero rows). */
const spendInvitationOnPostgres = async (db: PgDb, invitationId: number, now: number) =>
  (
    await db
      .update(invitations)
      .set({ usedAt: now })
      .where(and(eq(invitations.id, invitationId), isNull(invitations.usedAt)))
      .returning({ id: invitations.id })
  ).length > 0

const findUserDisabledAtOnPostgres = (db: PgDb, id: number) =>
  firstRow(
    preparedOn(db, 'users.disabled-at', (db) => db.select({ disabledAt: users.disabledAt }).from(users).where(eq(users.id, sql.placeholder('id'))).limit(1)).execute({ id }),
  )

/** The twins of the users domain's storage, by the SQLite function they stand for. */
export const USERS_TWINS = twins(
  twin(findUserById, findUserByIdOnPostgres),
  twin(findUserByStoredEmail, findUserByStoredEmailOnPostgres),
  twin(countAllUsers, countAllUsersOnPostgres),
  twin(allUsersByEmail, allUsersByEmailOnPostgres),
  twin(lockInstanceAdmins, lockInstanceAdminsOnPostgres),
  twin(countOtherActiveInstanceAdmins, countOtherActiveInstanceAdminsOnPostgres),
  twin(insertUserRow, insertUserRowOnPostgres),
  twin(updateUser, updateUserOnPostgres),
  twin(spendUserInvitations, spendUserInvitationsOnPostgres),
  twin(insertInvitation, insertInvitationOnPostgres),
  twin(findInvitationByHash, findInvitationByHashOnPostgres),
  twin(spendInvitation, spendInvitationOnPostgres),
  twin(findUserDisabledAt, findUserDisabledAtOnPostgres),
)

/** The SSO identities' storage (src/db/sso-identities.ts) as PostgreSQL twins. */
import { and, eq } from 'drizzle-orm'
import { deleteUserSsoIdentity, findSsoIdentity, findUserSsoIdentity, insertSsoIdentity, type SsoIdentity } from '../sso-identities.ts'
import { firstRow } from './rows.ts'
import { ssoIdentities } from './schema.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const findSsoIdentityOnPostgres = (db: PgDb, issuer: string, subject: string) =>
  firstRow(db.select({ userId: ssoIdentities.userId }).from(ssoIdentities).where(and(eq(ssoIdentities.issuer, issuer), eq(ssoIdentities.subject, subject))))

const findUserSsoIdentityOnPostgres = (db: PgDb, userId: number, issuer: string) =>
  firstRow(db.select({ subject: ssoIdentities.subject }).from(ssoIdentities).where(and(eq(ssoIdentities.userId, userId), eq(ssoIdentities.issuer, issuer))))

/** ON CONFLICT DO NOTHING waits for a concurrent insert of either pair to end, and binds nothing if it committed. */
const insertSsoIdentityOnPostgres = async (db: PgDb, identity: SsoIdentity, now: number) =>
  (await db.insert(ssoIdentities).values({ ...identity, createdAt: now }).onConflictDoNothing().returning({ id: ssoIdentities.id })).length > 0

const deleteUserSsoIdentityOnPostgres = (db: PgDb, userId: number, issuer: string) =>
  firstRow(db.delete(ssoIdentities).where(and(eq(ssoIdentities.userId, userId), eq(ssoIdentities.issuer, issuer))).returning({ subject: ssoIdentities.subject }))

/** The twins of the SSO identities' storage, by the SQLite function they stand for. */
export const SSO_IDENTITIES_TWINS = twins(
  twin(findSsoIdentity, findSsoIdentityOnPostgres),
  twin(findUserSsoIdentity, findUserSsoIdentityOnPostgres),
  twin(insertSsoIdentity, insertSsoIdentityOnPostgres),
  twin(deleteUserSsoIdentity, deleteUserSsoIdentityOnPostgres),
)

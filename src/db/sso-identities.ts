/**
 * The SSO identities' storage: which user an (issuer, subject) pair of an OpenID Connect provider signs in as, and
 * which account of an issuer a user has. Both pairs are unique in the database (sso_identities' two unique indexes),
 * so two instances binding at once never bind one account twice or give a user two accounts of one issuer.
 */
import { and, eq } from 'drizzle-orm'
import type { Db } from './open.ts'
import { ssoIdentities } from './schema.ts'

export interface SsoIdentity {
  issuer: string
  subject: string
  userId: number
}

/** The user the provider's account (issuer, subject) is bound to, or undefined. */
export function findSsoIdentity(db: Db, issuer: string, subject: string): { userId: number } | undefined {
  return db
    .select({ userId: ssoIdentities.userId })
    .from(ssoIdentities)
    .where(and(eq(ssoIdentities.issuer, issuer), eq(ssoIdentities.subject, subject)))
    .get()
}

/** The account of `issuer` bound to the user, or undefined. */
export function findUserSsoIdentity(db: Db, userId: number, issuer: string): { subject: string } | undefined {
  return db
    .select({ subject: ssoIdentities.subject })
    .from(ssoIdentities)
    .where(and(eq(ssoIdentities.userId, userId), eq(ssoIdentities.issuer, issuer)))
    .get()
}

/**
 * Binds the pair to the user; false, binding nothing, when the pair is bound already or the user has an account of
 * this issuer already (either unique index: never a second binding, whoever wrote first).
 */
export function insertSsoIdentity(db: Db, identity: SsoIdentity, now: number): boolean {
  return db.insert(ssoIdentities).values({ ...identity, createdAt: now }).onConflictDoNothing().returning({ id: ssoIdentities.id }).all().length > 0
}

/** Unbinds the user's account of `issuer`; its subject, or undefined when there was none. */
export function deleteUserSsoIdentity(db: Db, userId: number, issuer: string): { subject: string } | undefined {
  return db
    .delete(ssoIdentities)
    .where(and(eq(ssoIdentities.userId, userId), eq(ssoIdentities.issuer, issuer)))
    .returning({ subject: ssoIdentities.subject })
    .all()[0]
}

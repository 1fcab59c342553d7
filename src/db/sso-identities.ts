/**
 * The SSO identities' storage: which user an (issuer, subject) pair of an OpenID Connect provider signs in as, and
 * which account of an issuer a user has. Both pairs are unique in the database (sso_identities' two unique indexes),
 * so two instances binding at once never bind one account twice or give a user two accounts of one issuer.
 */
import { and, eq } from 'drizzle-orm'
import type { Op } from './op.ts'
import { row, rows } from './query.ts'

export interface SsoIdentity {
  issuer: string
  subject: string
  userId: number
}

/** The user the provider's account (issuer, subject) is bound to, or undefined. */
export function findSsoIdentity(issuer: string, subject: string) {
  return row(({ db, t }) =>
    db
      .select({ userId: t.ssoIdentities.userId })
      .from(t.ssoIdentities)
      .where(and(eq(t.ssoIdentities.issuer, issuer), eq(t.ssoIdentities.subject, subject))),
  )
}

/** The account of `issuer` bound to the user, or undefined. */
export function findUserSsoIdentity(userId: number, issuer: string) {
  return row(({ db, t }) =>
    db
      .select({ subject: t.ssoIdentities.subject })
      .from(t.ssoIdentities)
      .where(and(eq(t.ssoIdentities.userId, userId), eq(t.ssoIdentities.issuer, issuer))),
  )
}

/**
 * Binds the pair to the user; false, binding nothing, when the pair is bound already or the user has an account of
 * this issuer already (either unique index: never a second binding, whoever wrote first). On PostgreSQL, ON CONFLICT
 * DO NOTHING waits for a concurrent insert of either pair to end, and binds nothing if it committed.
 */
export function* insertSsoIdentity(identity: SsoIdentity, now: number): Op<boolean> {
  const bound = yield* rows(({ db, t }) =>
    db
      .insert(t.ssoIdentities)
      .values({ ...identity, createdAt: now })
      .onConflictDoNothing()
      .returning({ id: t.ssoIdentities.id }),
  )
  return bound.length > 0
}

/** Unbinds the user's account of `issuer`; its subject, or undefined when there was none. */
export function deleteUserSsoIdentity(userId: number, issuer: string) {
  return row(({ db, t }) =>
    db
      .delete(t.ssoIdentities)
      .where(and(eq(t.ssoIdentities.userId, userId), eq(t.ssoIdentities.issuer, issuer)))
      .returning({ subject: t.ssoIdentities.subject }),
  )
}

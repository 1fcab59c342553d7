/**
 * Who an SSO sign-in is. The provider's account is its (issuer, `sub`) pair, which the provider never reassigns;
 * an email is never trusted alone (it may change hands, and some providers let anyone claim one):
 * (a) a bound pair signs in as its user, whatever the email says now;
 * (b) an unknown pair whose verified email no user has: refused, or — auto-create on — the user is created on the
 *     spot (one admin log entry, initiator `identityProvider`) and bound to the pair;
 * (c) an unknown pair whose verified email is a user's: not signed in. 409 "link your account" (SsoLinkRequired):
 *     the person links it once with their password (POST /auth/sso/link, the pending link sealed in this browser's
 *     cookie), or an operator links it (`trellis user link-sso`); a user with another account of this issuer bound
 *     is refused (409 sso_identity_conflict), never re-bound.
 * An unverified or missing email is refused wherever the email is needed; a deactivated user stays refused.
 */
import { deleteUserSsoIdentity, findSsoIdentity, findUserSsoIdentity, insertSsoIdentity } from '../../db/sso-identities.ts'
import { conflict } from '../../lib/errors.ts'
import type { Clock } from '../../lib/clock.ts'
import { holdsUnstorableText } from '../../lib/storable-text.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { checkNewUser, findUser, findUserByEmail, insertUser, normalizeEmail, type User, UserInputError } from '../users/service.ts'
import { type SsoClaims, SsoRefusal } from './oidc.ts'
import type { Op } from '../../db/op.ts'

/** An account of an identity provider (its issuer and `sub`). */
export interface SsoAccount {
  issuer: string
  subject: string
}

/** Rule (c): the verified email is `user`'s, and this provider account is not bound to it. */
export class SsoLinkRequired extends SsoRefusal {
  constructor(
    readonly user: User,
    readonly account: SsoAccount,
  ) {
    super(
      409,
      'sso_link_required',
      `A Trellis account with the email ${user.email} exists, but this account of ${account.issuer} is not linked to it, and Trellis never links accounts by email alone`,
    )
  }
}

export function* resolveSsoUser(clock: Clock, claims: SsoClaims, autoCreate: boolean): Op<User> {
  if ([claims.issuer, claims.subject, claims.email].some(holdsUnstorableText)) {
    throw new SsoRefusal(403, 'sso_identity_invalid', "The identity provider's account or email holds text that is not valid Unicode")
  }
  const bound = yield* findSsoIdentity(claims.issuer, claims.subject)
  if (bound) return activeUser((yield* findUser(bound.userId))!)
  if (claims.email === undefined) {
    throw new SsoRefusal(403, 'sso_email_missing', 'The identity provider sent no email address: it must release the email claim (scope "email")')
  }
  if (!claims.emailVerified) {
    throw new SsoRefusal(403, 'sso_email_unverified', `The identity provider has not verified the email ${claims.email}: Trellis only trusts verified emails`)
  }
  const existing = yield* findUserByEmail(claims.email)
  if (existing) {
    activeUser(existing)
    // Created and bound by a concurrent first sign-in of this very account that committed between the two looks (on
    // PostgreSQL each statement sees the latest commits): it is this user's already, so this is a sign-in.
    if ((yield* findSsoIdentity(claims.issuer, claims.subject))?.userId === existing.id) return existing
    const why = yield* whyNotLinkable(existing, claims)
    if (why) throw new SsoRefusal(409, 'sso_identity_conflict', why)
    throw new SsoLinkRequired(existing, claims)
  }
  if (!autoCreate) {
    throw new SsoRefusal(403, 'sso_unknown_user', `No Trellis user has the email ${claims.email}: ask an administrator to create yours`)
  }
  const user = yield* createSsoUser(clock, claims, claims.email)
  if (!(yield* insertSsoIdentity({ issuer: claims.issuer, subject: claims.subject, userId: user.id }, clock.now()))) {
    // Bound by a sign-in that committed after this one looked (another instance): this one creates nothing.
    throw new SsoRefusal(409, 'sso_identity_conflict', 'This account was signed in elsewhere at the same moment: sign in again')
  }
  return user
}

function activeUser(user: User): User {
  if (user.disabledAt !== null) throw new SsoRefusal(403, 'user_deactivated', 'User is not authorized for the organization')
  return user
}

/** Why `account` cannot be linked to `user` (bound to someone else, or `user` has another account of its issuer), or null. */
function* whyNotLinkable(user: User, account: SsoAccount): Op<string | null> {
  const owner = yield* findSsoIdentity(account.issuer, account.subject)
  if (owner && owner.userId !== user.id) return `This account of ${account.issuer} is already linked to another Trellis user`
  const other = yield* findUserSsoIdentity(user.id, account.issuer)
  if (other && other.subject !== account.subject) {
    return `The Trellis account ${user.email} is linked to another account of ${account.issuer} (subject ${other.subject}), and is never re-linked silently: an operator may unlink it (trellis user unlink-sso --email ${user.email} --issuer ${account.issuer})`
  }
  return null
}

/** How a link was made, for its admin log entry. */
export type LinkedBy = { actorId: number; initiator: 'identityProvider'; how: 'with their password at an SSO sign-in' } | { actorId: null; initiator: 'administrator'; how: 'by an operator (CLI)' }

/**
 * Binds the provider account to `user`, with an admin log entry; false when it was bound to them already (nothing
 * written). 409 sso_identity_conflict when it is another user's, or `user` has another account of its issuer. Call
 * in a write transaction.
 */
export function* linkSsoIdentity(clock: Clock, user: User, account: SsoAccount, by: LinkedBy): Op<boolean> {
  const why = yield* whyNotLinkable(user, account)
  if (why) throw conflict('sso_identity_conflict', why)
  if (!(yield* insertSsoIdentity({ ...account, userId: user.id }, clock.now()))) {
    // Both unique indexes refused it: bound to this user already, or (another instance, just now) to someone else.
    if ((yield* findSsoIdentity(account.issuer, account.subject))?.userId === user.id) return false
    throw conflict('sso_identity_conflict', `This account of ${account.issuer} was linked elsewhere at the same moment`)
  }
  yield* appendAdminLog(clock, {
    projectId: null,
    type: 'update',
    resource: 'user',
    initiator: by.initiator,
    actorId: by.actorId,
    subjectUserId: user.id,
    newValue: { name: `${user.email} linked to the SSO account ${account.subject} of ${account.issuer} ${by.how}` },
  })
  return true
}

/** Unbinds `user`'s account of `issuer`, with an admin log entry; its subject, or null when there was none. Call in a write transaction. */
export function* unlinkSsoIdentity(clock: Clock, user: User, issuer: string): Op<string | null> {
  const removed = yield* deleteUserSsoIdentity(user.id, issuer)
  if (!removed) return null
  yield* appendAdminLog(clock, {
    projectId: null,
    type: 'update',
    resource: 'user',
    actorId: null,
    subjectUserId: user.id,
    previousValue: { name: `${user.email} linked to the SSO account ${removed.subject} of ${issuer}` },
    newValue: { name: `${user.email} unlinked from ${issuer} by an operator (CLI)` },
  })
  return removed.subject
}

/** Just-in-time creation: no password (SSO only until one is set), no project (an administrator adds them). */
function* createSsoUser(clock: Clock, claims: SsoClaims, email: string): Op<User> {
  const username = usernameFor(claims, email)
  try {
    checkNewUser({ email, username })
  } catch (error) {
    if (error instanceof UserInputError) throw new SsoRefusal(403, 'sso_identity_invalid', `The identity provider's ${error.message}`)
    throw error
  }
  const user = yield* insertUser(clock, { email, username })
  yield* appendAdminLog(clock, {
    projectId: null,
    type: 'add',
    resource: 'user',
    initiator: 'identityProvider',
    actorId: null,
    subjectUserId: user.id,
    newValue: { name: `${user.email} created at first SSO sign-in (${claims.issuer})` },
  })
  return user
}

function usernameFor(claims: SsoClaims, email: string): string {
  const name = claims.name?.trim()
  return name ? name.slice(0, 100) : normalizeEmail(email).split('@')[0]!
}

/**
 * Who an SSO sign-in is: the Trellis user with the provider's verified email. An unverified or missing email is
 * refused (anyone can type an address at many providers); an unknown person is refused, or created on the spot
 * when auto-create is on (one admin log entry, initiator `identityProvider`); a deactivated user stays refused.
 */
import type { Clock } from '../../lib/clock.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { checkNewUser, findUserByEmail, insertUser, normalizeEmail, type User, UserInputError } from '../users/service.ts'
import { type SsoClaims, SsoRefusal } from './oidc.ts'
import { type Op } from '../../db/op.ts'

export function* resolveSsoUser(clock: Clock, claims: SsoClaims, autoCreate: boolean): Op<User> {
  if (claims.email === undefined) {
    throw new SsoRefusal(403, 'sso_email_missing', 'The identity provider sent no email address: it must release the email claim (scope "email")')
  }
  if (!claims.emailVerified) {
    throw new SsoRefusal(403, 'sso_email_unverified', `The identity provider has not verified the email ${claims.email}: Trellis only trusts verified emails`)
  }
  const existing = yield* findUserByEmail(claims.email)
  if (existing) {
    if (existing.disabledAt !== null) throw new SsoRefusal(403, 'user_deactivated', 'User is not authorized for the organization')
    return existing
  }
  if (!autoCreate) {
    throw new SsoRefusal(403, 'sso_unknown_user', `No Trellis user has the email ${claims.email}: ask an administrator to create yours`)
  }
  return yield* createSsoUser(clock, claims, claims.email)
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

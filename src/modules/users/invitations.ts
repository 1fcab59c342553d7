/**
 * One-time invitation links: an instance administrator makes one for a user (shown once), the person opens
 * `/invite?token=…`, chooses a password and is signed in. Only the token's SHA-256 is stored; a link works once and
 * for INVITATION_TTL_MS; a new invitation of the same user cancels the older ones. Both acts are admin log entries
 * (resource `invitation`, instance-wide).
 */
import { createHash, randomBytes } from 'node:crypto'
import { findInvitationByHash, insertInvitation, spendInvitation, spendUserInvitations } from '../../db/users.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIso } from '../../lib/time.ts'
import { conflict, notFound } from '../../lib/errors.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { findUser, setUserPasswordHash, type User } from './service.ts'
import type { Op } from '../../db/op.ts'

export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000

const hashInvitation = (token: string) => createHash('sha256').update(token).digest('hex')

/** The link for a token, on the public base URL. */
export function invitationUrl(baseUrl: string, token: string): string {
  return new URL(`/invite?token=${encodeURIComponent(token)}`, baseUrl).toString()
}

/** Makes a user's invitation: the returned token exists nowhere else. A deactivated user cannot be invited (409). */
export function* createInvitation(clock: Clock, input: { user: User; actorId: number | null }): Op<{ token: string; expiresAt: number }> {
  if (input.user.disabledAt !== null) throw conflict('user_deactivated', `${input.user.email} is deactivated: reactivate them before inviting them`)
  const now = clock.now()
  // Older links of the user stop working: only the newest one shown is valid.
  yield* spendUserInvitations(input.user.id, now)
  const token = randomBytes(32).toString('base64url')
  const expiresAt = now + INVITATION_TTL_MS
  yield* insertInvitation({ tokenHash: hashInvitation(token), userId: input.user.id, createdBy: input.actorId, createdAt: now, expiresAt })
  yield* appendAdminLog(clock, {
    projectId: null, type: 'add', resource: 'invitation', actorId: input.actorId, subjectUserId: input.user.id,
    newValue: { name: `${input.user.email} invited until ${toIso(expiresAt)}` },
  })
  return { token, expiresAt }
}

const invalidInvitation = () => notFound('This invitation link is invalid, already used or expired: ask an administrator for a new one', 'invalid_invitation')

/** The user a live invitation is for (unused, unexpired, user active), or 404 `invalid_invitation`. */
export function* invitedUser(clock: Clock, token: string): Op<{ user: User; invitationId: number }> {
  const row = token.length > 100 ? undefined : (yield* findInvitationByHash(hashInvitation(token)))
  const user = row && (yield* findUser(row.userId))
  if (!row || !user || row.usedAt !== null || row.expiresAt <= clock.now() || user.disabledAt !== null) throw invalidInvitation()
  return { user, invitationId: row.id }
}

/** Uses an invitation: sets the password (ending other sessions) and spends the link. Returns the user to sign in. */
export function* acceptInvitation(clock: Clock, token: string, passwordHash: string): Op<User> {
  const { user, invitationId } = yield* invitedUser(clock, token)
  // Spent by one conditional statement: of concurrent acceptances (PostgreSQL) one spends it, the others find it used.
  if (!(yield* spendInvitation(invitationId, clock.now()))) throw invalidInvitation()
  yield* setUserPasswordHash(clock, user.id, passwordHash)
  yield* appendAdminLog(clock, {
    projectId: null, type: 'update', resource: 'invitation', actorId: user.id, subjectUserId: user.id,
    newValue: { name: `${user.email} accepted the invitation` },
  })
  return user
}

/**
 * A user as other domains show and find it: the compatibility document's user object, the columns it is built
 * from, the normalized email every lookup uses, and the instance administrators' view of a person. Depends on no
 * other service, so the admin log and projects read it without an import circle through the users service.
 */
import type { User } from '../../db/users.ts'
import { toIso } from '../../lib/time.ts'

/** The user columns other domains' queries select live with the users' storage; re-exported for their services. */

/** The compatibility document's user object. */
export function userObject(user: Pick<User, 'id' | 'username' | 'email'>) {
  return { object: 'user' as const, id: user.id, username: user.username, email: user.email }
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

/** A user as the instance administrators see them. */
export function instanceUserView(user: User) {
  return {
    id: user.id,
    email: user.email,
    username: user.username,
    instanceAdmin: user.isInstanceAdmin,
    deactivated: user.disabledAt !== null,
    hasPassword: user.passwordHash !== null,
    createdAt: toIso(user.createdAt),
  }
}

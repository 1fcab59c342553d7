/**
 * A user as other domains show and find it: the compatibility document's user object, the columns it is built
 * from, the normalized email every lookup uses, and the instance administrators' view of a person. Depends on no
 * other service, so the admin log and projects read it without an import circle through the users service.
 */
import { users } from '../../db/schema.ts'
import { toIso } from '../../lib/time.ts'

export const userColumns = { id: users.id, username: users.username, email: users.email }

/** The compatibility document's user object. */
export function userObject(user: Pick<typeof users.$inferSelect, 'id' | 'username' | 'email'>) {
  return { object: 'user' as const, id: user.id, username: user.username, email: user.email }
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

/** A user as the instance administrators see them. */
export function instanceUserView(user: typeof users.$inferSelect) {
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

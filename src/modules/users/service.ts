/** Users of the organization: creation, passwords, deactivation. */
import { count, eq } from 'drizzle-orm'
import { availableParallelism } from 'node:os'
import pLimit from 'p-limit'
import type { Db } from '../../db/open.ts'
import { users } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import { deleteUserSessions } from '../auth/sessions.ts'

export type User = typeof users.$inferSelect

export const PASSWORD_MIN_LENGTH = 12
export const PASSWORD_MAX_LENGTH = 1024
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
const CONTROL = /[\u0000-\u001f\u007f]/

export class UserInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message)
  }
}

/** Emails compare case-insensitively: they are stored trimmed and lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function emailProblem(email: string): string | null {
  const normalized = normalizeEmail(email)
  if (normalized.length > 320) return 'is longer than 320 characters'
  if (CONTROL.test(normalized)) return 'must not contain control characters'
  return EMAIL.test(normalized) ? null : `"${email}" is not an email address`
}

export function passwordProblem(password: string): string | null {
  if (password.length < PASSWORD_MIN_LENGTH) return `must be at least ${PASSWORD_MIN_LENGTH} characters`
  if (password.length > PASSWORD_MAX_LENGTH) return `must be at most ${PASSWORD_MAX_LENGTH} characters`
  return null
}

export function usernameProblem(username: string): string | null {
  const trimmed = username.trim()
  if (trimmed.length === 0) return 'must not be empty'
  if (trimmed.length > 100) return 'must be at most 100 characters'
  if (CONTROL.test(trimmed)) return 'must not contain control characters'
  return null
}

export function hashPassword(password: string): string {
  return Bun.password.hashSync(password, { algorithm: 'argon2id' })
}

/**
 * One argon2 check at a time per core but one, on Bun's worker threads (≈ 100 ms and 64 MiB each): the event loop
 * keeps a core, so a flood of logins queues here instead of slowing every other request (measured: /healthz p99
 * 7–24 ms during a flood this way, 21–60 ms with every core checking passwords, at the same login throughput).
 */
const passwordChecks = pLimit(Math.max(1, availableParallelism() - 1))

/**
 * For login, off the event loop. Without a hash a throwaway one is checked, so the time taken does not reveal
 * whether the user exists.
 */
export function verifyPassword(password: string, hash: string | null): Promise<boolean> {
  return passwordChecks(async () => {
    if (!hash) {
      await Bun.password.verify(password, await dummyHash())
      return false
    }
    return Bun.password.verify(password, hash)
  })
}

/** For the CLI (`apply`), which has no event loop to keep free. */
export function verifyPasswordSync(password: string, hash: string): boolean {
  return Bun.password.verifySync(password, hash)
}

let dummy: Promise<string> | undefined
/** Made on first use, not at import: hashing costs ~200 ms and 64 MiB, which every CLI start would pay. */
function dummyHash(): Promise<string> {
  dummy ??= Bun.password.hash('trellis-dummy-password', { algorithm: 'argon2id' })
  return dummy
}

export function findUserByEmail(db: Db, email: string): User | undefined {
  return db.select().from(users).where(eq(users.email, normalizeEmail(email))).get()
}

export function countUsers(db: Db): number {
  return db.select({ n: count() }).from(users).get()?.n ?? 0
}

export interface NewUser {
  email: string
  username: string
  /** Already hashed with `hashPassword`, so the slow hash happens outside any write transaction. */
  passwordHash?: string | null
  isInstanceAdmin?: boolean
  disabled?: boolean
}

/** Validates the fields of a new user; throws UserInputError naming the field. */
export function checkNewUser(input: { email: string; username: string; password?: string | null }): void {
  const email = emailProblem(input.email)
  if (email) throw new UserInputError('email', `email ${email}`)
  const username = usernameProblem(input.username)
  if (username) throw new UserInputError('username', `username ${username}`)
  if (input.password != null) {
    const password = passwordProblem(input.password)
    if (password) throw new UserInputError('password', `password ${password}`)
  }
}

export function insertUser(db: Db, clock: Clock, input: NewUser): User {
  const now = clock.now()
  const [user] = db
    .insert(users)
    .values({
      email: normalizeEmail(input.email),
      username: input.username.trim(),
      passwordHash: input.passwordHash ?? null,
      isInstanceAdmin: input.isInstanceAdmin ?? false,
      disabledAt: input.disabled ? now : null,
      createdAt: now,
      updatedAt: now,
    })
    .returning()
    .all()
  if (!user) throw new Error('user insert returned no row')
  return user
}

export function setUserDisabled(db: Db, clock: Clock, userId: number, disabled: boolean): void {
  const now = clock.now()
  db.update(users)
    .set({ disabledAt: disabled ? now : null, updatedAt: now })
    .where(eq(users.id, userId))
    .run()
  if (disabled) deleteUserSessions(db, userId)
}

/** Sets a new password and ends the user's sessions. */
export function setUserPasswordHash(db: Db, clock: Clock, userId: number, passwordHash: string): void {
  db.update(users).set({ passwordHash, updatedAt: clock.now() }).where(eq(users.id, userId)).run()
  deleteUserSessions(db, userId)
}

/** The columns the compatibility document's user object is made of (select them, then `userObject`). */
export const userColumns = { id: users.id, username: users.username, email: users.email }

/** The compatibility document's user object. */
export function userObject(user: Pick<User, 'id' | 'username' | 'email'>) {
  return { object: 'user' as const, id: user.id, username: user.username, email: user.email }
}

/** Users of the organization: creation, passwords, deactivation. */
import { availableParallelism } from 'node:os'
import pLimit from 'p-limit'
import {
  allUsersByEmail,
  countAllUsers,
  countOtherActiveInstanceAdmins,
  findUserById,
  findUserByStoredEmail,
  insertUserRow,
  lockInstanceAdmins,
  updateUser,
  type User,
} from '../../db/users.ts'
import { deleteSessionsOfUser } from '../../db/sessions.ts'
import type { Clock } from '../../lib/clock.ts'
import { LONE_SURROGATE_MESSAGE } from '../../lib/storable-text.ts'
import { conflict, invalidField, notFound } from '../../lib/errors.ts'
import { appendAdminLog } from '../admin-logs/service.ts'
import { normalizeEmail } from '../directory/users.ts'
import type { Op } from '../../db/op.ts'

export { normalizeEmail, userObject } from '../directory/users.ts'

export type { User } from '../../db/users.ts'

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
export function emailProblem(email: string): string | null {
  const normalized = normalizeEmail(email)
  if (normalized.length > 320) return 'is longer than 320 characters'
  if (CONTROL.test(normalized)) return 'must not contain control characters'
  if (!normalized.isWellFormed()) return LONE_SURROGATE_MESSAGE
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
  if (!trimmed.isWellFormed()) return LONE_SURROGATE_MESSAGE
  return null
}

/**
 * For a request: on Bun's worker threads, queued with the checks (≈ 100 ms and 64 MiB each), so the event loop keeps
 * answering meanwhile (on it, each new user's or invitee's password held every request, /healthz included).
 */
export function hashPassword(password: string): Promise<string> {
  return passwordChecks(() => Bun.password.hash(password, hashing))
}

/** For the CLI (`apply`, `user`), which has no event loop to keep free. */
export function hashPasswordSync(password: string): string {
  return Bun.password.hashSync(password, hashing)
}

/** argon2id at Bun's defaults, 64 MiB and 2 passes (≈ 100 ms a hash): what every deployment uses. */
const PRODUCTION_HASHING = { algorithm: 'argon2id' } as const
/**
 * argon2id at 1 MiB and 1 pass (≈ 1 ms): for test processes only (TRELLIS_TEST_WEAK_PASSWORD_HASHES=1, set by
 * test/helpers.ts), whose thousands of seeded users and sign-ins cost seconds of CPU apiece at the production cost.
 * A hash records its own cost, so either kind verifies whatever this is set to.
 */
const WEAK_HASHING = { algorithm: 'argon2id', memoryCost: 1024, timeCost: 1 } as const
let hashing: typeof PRODUCTION_HASHING | typeof WEAK_HASHING = PRODUCTION_HASHING

/** Which cost new hashes (and the throwaway hash of a login without a user) are made at in this process. */
export function usePasswordHashing(kind: 'production' | 'weak-for-tests'): void {
  const next = kind === 'production' ? PRODUCTION_HASHING : WEAK_HASHING
  if (next !== hashing) dummy = undefined
  hashing = next
}

/**
 * One argon2 check at a time per core but one, on Bun's worker threads (≈ 100 ms and 64 MiB each): the event loop
 * keeps a core, so a flood of logins queues here instead of slowing every other request (measured: /healthz p99
 * 7–24 ms during a flood this way, 21–60 ms with every core checking passwords, at the same login throughput).
 */
const passwordChecks = pLimit(Math.max(1, availableParallelism() - 1))

/**
 * Password checks that may wait for a worker: about 1.6 s of waiting at ≈ 100 ms a check (measured 300 ms a check on
 * a loaded 2-core machine: 5 s, still well under Bun's 10 s idle timeout). Past that a check is refused at once rather than queued: the throttle counts per
 * client address, so logins from many addresses all reach the check, and an unbounded queue grows — measured in a
 * mixed load with one request in ten a login: answers after 7 s (median) and up to 14 s, most clients of the load
 * waiting there.
 */
export const MAX_WAITING_PASSWORD_CHECKS = 16 * passwordChecks.concurrency

/**
 * For login, off the event loop: whether the password is right, or null when it was not checked because
 * MAX_WAITING_PASSWORD_CHECKS wait already. Without a hash a throwaway one is checked, so the time taken does not
 * reveal whether the user exists.
 */
export function verifyPassword(password: string, hash: string | null): Promise<boolean | null> {
  if (passwordChecks.pendingCount >= MAX_WAITING_PASSWORD_CHECKS) return Promise.resolve(null)
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
  dummy ??= Bun.password.hash('trellis-dummy-password', hashing)
  return dummy
}

export function* findUserByEmail(email: string): Op<User | undefined> {
  return yield* findUserByStoredEmail(normalizeEmail(email))
}

export function* countUsers(): Op<number> {
  return yield* countAllUsers()
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

export function* insertUser(clock: Clock, input: NewUser): Op<User> {
  const now = clock.now()
  return yield* insertUserRow({
    email: normalizeEmail(input.email),
    username: input.username.trim(),
    passwordHash: input.passwordHash ?? null,
    isInstanceAdmin: input.isInstanceAdmin ?? false,
    disabledAt: input.disabled ? now : null,
    now,
  })
}

export function* setUserDisabled(clock: Clock, userId: number, disabled: boolean): Op<void> {
  const now = clock.now()
  yield* updateUser(userId, now, { disabledAt: disabled ? now : null })
  if (disabled) yield* deleteSessionsOfUser(userId)
}

/** Sets a new password and ends the user's sessions. */
export function* setUserPasswordHash(clock: Clock, userId: number, passwordHash: string): Op<void> {
  yield* updateUser(userId, clock.now(), { passwordHash })
  yield* deleteSessionsOfUser(userId)
}

/** Every user of the instance, by email (the instance administrators' people page). */
export function* listUsers(): Op<User[]> {
  return yield* allUsersByEmail()
}

export function* findUser(id: number): Op<User | undefined> {
  return yield* findUserById(id)
}

/** The user with this id (a path parameter), or 404. */
export function* requireUser(id: number | string): Op<User> {
  const user = yield* findUserById(Number(id))
  if (!user) throw notFound(`User ${id} not found`)
  return user
}

/** An instance-wide admin log entry about a user (resource `user`, no project; shown on the console's people page). */
function* logUserChange(clock: Clock, user: User, actorId: number | null, change: { type: 'add' | 'update'; previous?: string; next: string }) {
  yield* appendAdminLog(clock, {
    projectId: null,
    type: change.type,
    resource: 'user',
    actorId,
    subjectUserId: user.id,
    previousValue: change.previous === undefined ? undefined : { name: `${user.email} ${change.previous}` },
    newValue: { name: `${user.email} ${change.next}` },
  })
}

/**
 * Creates a user (CLI `user create`, the console, `apply`): 400 naming a bad field, 409 `user_exists`.
 * `passwordHash` is made beforehand (hashing is slow; never inside a write transaction).
 */
export function* createUser(clock: Clock, input: NewUser & { actorId: number | null }): Op<User> {
  try {
    checkNewUser(input)
  } catch (error) {
    if (error instanceof UserInputError) throw invalidField(error.field, error.message)
    throw error
  }
  if ((yield* findUserByEmail(input.email))) throw conflict('user_exists', `A user with email ${normalizeEmail(input.email)} already exists`)
  const user = yield* insertUser(clock, input)
  yield* logUserCreated(clock, user, input.actorId)
  return user
}

/** The instance admin log entry of a new user ("… created as instance administrator", and how when it says). */
export function* logUserCreated(clock: Clock, user: User, actorId: number | null, how?: string): Op<void> {
  const state = [user.isInstanceAdmin ? 'instance administrator' : 'user', user.disabledAt !== null ? '(deactivated)' : '', how].filter(Boolean).join(' ')
  yield* logUserChange(clock, user, actorId, { type: 'add', next: `created as ${state}` })
}

/**
 * The instance administrators' rule: never zero active instance administrators. A write that may revoke or deactivate
 * one calls this first: it takes the rule's lock (PostgreSQL: an advisory lock held to commit; SQLite's one writer
 * holds it already), reads the user as committed now, and answers 409 `last_instance_admin` when they are the only
 * active instance administrator. The one check behind revoking and deactivating (console, API, CLI and apply alike);
 * what it answers is the user as the change must see them (undefined: unknown id).
 */
export function* requireAnotherInstanceAdmin(userId: number): Op<User | undefined> {
  yield* holdInstanceAdminRule()
  const user = yield* findUserById(userId)
  if (!user?.isInstanceAdmin || user.disabledAt !== null) return user
  if ((yield* countOtherActiveInstanceAdmins(user.id)) === 0) throw conflict('last_instance_admin', `${user.email} is the last instance administrator: name another one first`)
  return user
}

/**
 * Takes the instance administrators' lock for the rest of the write (see `requireAnotherInstanceAdmin`). A write
 * that will revoke or deactivate takes it before it locks anything else (an admin log entry's list lock), so two
 * such writes never hold one lock each and wait for the other's.
 */
export function* holdInstanceAdminRule(): Op<void> {
  yield* lockInstanceAdmins()
}

/** Grants or revokes instance administration (409 for the last one); false when nothing changed. */
export function* setInstanceAdmin(clock: Clock, user: User, instanceAdmin: boolean, actorId: number | null): Op<boolean> {
  if (user.isInstanceAdmin === instanceAdmin) return false
  // Revoking reads the user again under the rule's lock: a change another writer committed meanwhile counts.
  const current = instanceAdmin ? user : yield* requireAnotherInstanceAdmin(user.id)
  if (!current || current.isInstanceAdmin === instanceAdmin) return false
  yield* updateUser(current.id, clock.now(), { isInstanceAdmin: instanceAdmin })
  const label = (on: boolean) => (on ? 'instance administrator' : 'not instance administrator')
  yield* logUserChange(clock, current, actorId, { type: 'update', previous: label(!instanceAdmin), next: label(instanceAdmin) })
  return true
}

/** Renames a user (the display name; the email is the identity). */
export function* setUsername(clock: Clock, user: User, username: string, actorId: number | null): Op<boolean> {
  const problem = usernameProblem(username)
  if (problem) throw invalidField('username', `username ${problem}`)
  const trimmed = username.trim()
  if (trimmed === user.username) return false
  yield* updateUser(user.id, clock.now(), { username: trimmed })
  yield* logUserChange(clock, user, actorId, { type: 'update', previous: `named ${user.username}`, next: `named ${trimmed}` })
  return true
}

/** First start with no users: a one-time link (printed by `serve`) opens a page that creates the first admin. */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Store } from '../../db/store.ts'
import { write } from '../../db/write.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict, forbidden, invalidField } from '../../lib/errors.ts'
import { checkNewUser, countUsers, hashPassword, holdInstanceAdminRule, insertUser, logUserCreated, UserInputError, userObject } from '../users/service.ts'

/** Holds the hash of the one-time setup token, in memory only: a restart prints a new link. */
export class SetupGate {
  private hash: Buffer | null
  /** The hash while one attempt holds the token (its write may wait for the database). */
  private taken: Buffer | null = null

  private constructor(token: string) {
    this.hash = sha256(token)
  }

  static open(): { gate: SetupGate; token: string } {
    const token = randomBytes(24).toString('base64url')
    return { gate: new SetupGate(token), token }
  }

  matches(candidate: string): boolean {
    return this.hash !== null && timingSafeEqual(sha256(candidate), this.hash)
  }

  /** Takes the token for one attempt: other attempts are refused until it is given back (the attempt failed). */
  take(candidate: string): boolean {
    if (!this.matches(candidate)) return false
    this.taken = this.hash
    this.hash = null
    return true
  }

  giveBack(): void {
    this.hash ??= this.taken
    this.taken = null
  }

  close(): void {
    this.hash = null
    this.taken = null
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest()
}

export interface FirstAdminInput {
  token: string
  email: string
  username: string
  password: string
}

export async function createFirstAdmin(store: Store, clock: Clock, gate: SetupGate | undefined, input: FirstAdminInput) {
  // Taken for the whole attempt, which may wait for the database: a request racing this one is refused (403).
  if (!gate?.take(input.token)) throw forbidden('The setup link is invalid or has already been used', 'invalid_setup_token')
  try {
    checkNewUser(input)
    const passwordHash = await hashPassword(input.password)
    const user = await write(store, function* () {
      // Checked inside the write lock, and (PostgreSQL: instances sharing the database each print a link of their
      // own) under the instance administrators' lock: the first administrator is made once.
      yield* holdInstanceAdminRule()
      if ((yield* countUsers()) > 0) throw conflict('already_set_up', 'Trellis already has users; sign in instead')
      const admin = yield* insertUser(clock, { email: input.email, username: input.username, passwordHash, isInstanceAdmin: true })
      // In the same transaction: the instance admin log starts with its first administrator.
      yield* logUserCreated(clock, admin, admin.id, 'through the setup link')
      return admin
    })
    gate.close()
    return userObject(user)
  } catch (error) {
    gate.giveBack()
    if (error instanceof UserInputError) throw invalidField(error.field, error.message)
    throw error
  }
}

/**
 * The password check of a sign-in — a password login (POST /auth/login) and the linking of an SSO account to an
 * existing one (POST /auth/sso/link) — in one place: throttled per email and client address (throttle.ts), the
 * argon2 check off the event loop, failures counted in `trellis_login_failures_total` and never logged.
 */
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import { forbidden, HttpError, retryLater, tooManyRequests } from '../../lib/errors.ts'
import { findUserByEmail, type User, verifyPassword } from '../users/service.ts'
import { type LoginAttempt, LoginThrottle } from './throttle.ts'

export class PasswordCheck {
  private readonly throttle: LoginThrottle

  constructor(private readonly deps: AppDeps) {
    this.throttle = new LoginThrottle(deps.clock, deps.rateCounters)
  }

  /**
   * The active user whose email and password these are: 429 while the attempt's email and address are throttled,
   * 401 for an unknown email or a wrong password (slowed down after a few), 403 for a deactivated user; 503
   * `server_busy` while too many checks wait already (the attempt, not made, counts nothing).
   */
  async user(attempt: LoginAttempt, password: string): Promise<User> {
    const retryAfter = await this.throttle.begin(attempt)
    if (retryAfter > 0) throw tooManyRequests(retryAfter, 'Too many failed logins')
    const user = await read(this.deps.store, findUserByEmail(attempt.email))
    const passwordOk = await verifyPassword(password, user?.passwordHash ?? null)
    if (passwordOk === null) {
      await this.throttle.withdraw(attempt)
      throw retryLater(503, 'server_busy', 'Too many sign-ins are being checked at once', 1)
    }
    if (!user || !passwordOk) {
      this.deps.metrics.loginFailures.inc({ reason: user ? 'bad_password' : 'unknown_user' })
      await Bun.sleep(await this.throttle.delayMs(attempt))
      throw new HttpError(401, 'invalid_credentials', 'Invalid email or password')
    }
    await this.throttle.succeeded(attempt)
    if (user.disabledAt !== null) {
      this.deps.metrics.loginFailures.inc({ reason: 'deactivated' })
      throw forbidden('User is not authorized for the organization', 'user_deactivated')
    }
    return user
  }
}

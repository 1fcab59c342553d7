/**
 * Password login throttling that nobody can turn against someone else. Failures are counted
 * - per (email, client address): answers slow down after SLOW_AFTER (a growing delay, up to 2 s) and get 429 after
 *   BLOCK_AFTER, until the window passes;
 * - per client address over every email: 429 after ADDRESS_BLOCK_AFTER (one address trying many accounts).
 * Nothing is counted per email alone, so failures from one address never lock the account out for its owner at
 * another. An attempt counts as a failure from the moment it starts (concurrent attempts cannot overshoot a limit
 * while their password checks run) until it succeeds. Windows are fixed, from the first failure.
 * The counts live where the store keeps the counters (src/lib/rate-counters.ts): this process's memory on SQLite (a
 * restart forgets, which is acceptable for a single-process appliance), PostgreSQL shared by every instance.
 */
import type { Clock } from '../../lib/clock.ts'
import { after, type Maybe, type RateCounters, type RateKey, retryAfterOf, type WindowRule } from '../../lib/rate-counters.ts'

export const WINDOW_MS = 15 * 60 * 1000
export const SLOW_AFTER = 3
export const BLOCK_AFTER = 10
export const ADDRESS_BLOCK_AFTER = 50
const MAX_DELAY_MS = 2000

/** One password login attempt: the normalised email and the client address (see `clientAddressOf`). */
export interface LoginAttempt {
  email: string
  address: string
}

const pairKey = (attempt: LoginAttempt): RateKey => ({ scope: 'login-pair', id: `${attempt.address} ${attempt.email}` })
const addressKey = (attempt: LoginAttempt): RateKey => ({ scope: 'login-address', id: attempt.address })

export class LoginThrottle {
  constructor(
    private readonly clock: Clock,
    private readonly counters: RateCounters,
  ) {}

  /**
   * Seconds to wait when the attempt is refused (at least 1). Otherwise 0, and the attempt is counted as a failure of
   * its pair and its address until `succeeded` says otherwise.
   */
  begin(attempt: LoginAttempt): Maybe<number> {
    const now = this.clock.now()
    const rules: WindowRule[] = [
      { ...pairKey(attempt), sizeMs: WINDOW_MS, limit: BLOCK_AFTER },
      { ...addressKey(attempt), sizeMs: WINDOW_MS, limit: ADDRESS_BLOCK_AFTER },
    ]
    return after(this.counters.take(rules, now), (take) => retryAfterOf(take, now))
  }

  /** How long to hold the answer to a failed attempt: grows with its pair's failures, capped. */
  delayMs(attempt: LoginAttempt): Maybe<number> {
    return after(this.counters.count(pairKey(attempt), this.clock.now()), (count) =>
      count <= SLOW_AFTER ? 0 : Math.min(MAX_DELAY_MS, 250 * 2 ** (count - SLOW_AFTER - 1)),
    )
  }

  /** The attempt was not made after all (its password was not checked): it counts nothing. */
  async withdraw(attempt: LoginAttempt): Promise<void> {
    const now = this.clock.now()
    await Promise.all([this.counters.giveBack(pairKey(attempt), now), this.counters.giveBack(addressKey(attempt), now)])
  }

  /** The password was right: the pair starts afresh; the address keeps its other failures (a success resets nothing else). */
  async succeeded(attempt: LoginAttempt): Promise<void> {
    await Promise.all([this.counters.forget(pairKey(attempt)), this.counters.giveBack(addressKey(attempt), this.clock.now())])
  }
}

/**
 * Password login throttling that nobody can turn against someone else. Failures are counted
 * - per (email, client address): answers slow down after SLOW_AFTER (a growing delay, up to 2 s) and get 429 after
 *   BLOCK_AFTER, until the window passes;
 * - per client address over every email: 429 after ADDRESS_BLOCK_AFTER (one address trying many accounts).
 * Nothing is counted per email alone, so failures from one address never lock the account out for its owner at
 * another. An attempt counts as a failure from the moment it starts (concurrent attempts cannot overshoot a limit
 * while their password checks run) until it succeeds. Windows are fixed, from the first failure.
 * In memory: a restart forgets, which is acceptable for a single-process appliance.
 */
import type { Clock } from '../../lib/clock.ts'

export const WINDOW_MS = 15 * 60 * 1000
export const SLOW_AFTER = 3
export const BLOCK_AFTER = 10
export const ADDRESS_BLOCK_AFTER = 50
const MAX_DELAY_MS = 2000
const MAX_KEYS = 100_000

/** One password login attempt: the normalised email and the client address (see `clientAddressOf`). */
export interface LoginAttempt {
  email: string
  address: string
}

interface Failures {
  count: number
  windowStart: number
}

const pairKey = (attempt: LoginAttempt) => `pair ${attempt.address} ${attempt.email}`
const addressKey = (attempt: LoginAttempt) => `address ${attempt.address}`

export class LoginThrottle {
  private readonly failures = new Map<string, Failures>()

  constructor(private readonly clock: Clock) {}

  private current(key: string): Failures | undefined {
    const entry = this.failures.get(key)
    if (entry && this.clock.now() - entry.windowStart >= WINDOW_MS) {
      this.failures.delete(key)
      return undefined
    }
    return entry
  }

  /** Whole seconds until `key` unblocks (at least 1), or 0 when it is under `limit`. */
  private waitFor(key: string, limit: number): number {
    const entry = this.current(key)
    if (!entry || entry.count < limit) return 0
    return Math.max(1, Math.ceil((entry.windowStart + WINDOW_MS - this.clock.now()) / 1000))
  }

  /**
   * Seconds to wait when the attempt is refused. Otherwise 0, and the attempt is counted as a failure of its pair and
   * its address until `succeeded` says otherwise.
   */
  begin(attempt: LoginAttempt): number {
    const wait = Math.max(this.waitFor(pairKey(attempt), BLOCK_AFTER), this.waitFor(addressKey(attempt), ADDRESS_BLOCK_AFTER))
    if (wait > 0) return wait
    if (this.failures.size >= MAX_KEYS) this.sweep()
    for (const key of [pairKey(attempt), addressKey(attempt)]) {
      const entry = this.current(key)
      if (entry) entry.count++
      else this.failures.set(key, { count: 1, windowStart: this.clock.now() })
    }
    return 0
  }

  /** How long to hold the answer to a failed attempt: grows with its pair's failures, capped. */
  delayMs(attempt: LoginAttempt): number {
    const count = this.current(pairKey(attempt))?.count ?? 0
    if (count <= SLOW_AFTER) return 0
    return Math.min(MAX_DELAY_MS, 250 * 2 ** (count - SLOW_AFTER - 1))
  }

  /** The password was right: the pair starts afresh; the address keeps its other failures (a success resets nothing else). */
  succeeded(attempt: LoginAttempt): void {
    this.failures.delete(pairKey(attempt))
    const address = this.current(addressKey(attempt))
    if (address && address.count > 0) address.count--
  }

  /** Drops expired windows; if the table is still full, forgets everything rather than grow without bound. */
  private sweep(): void {
    for (const key of [...this.failures.keys()]) this.current(key)
    if (this.failures.size >= MAX_KEYS) this.failures.clear()
  }
}

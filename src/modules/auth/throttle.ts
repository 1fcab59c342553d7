/**
 * Password login throttling: failures are counted per email and per client address over a window.
 * After SLOW_AFTER failures answers slow down; after BLOCK_AFTER the key gets 429 until the window passes.
 * In memory: a restart forgets, which is acceptable for a single-process appliance.
 */
import type { Clock } from '../../lib/clock.ts'

export const WINDOW_MS = 15 * 60 * 1000
export const SLOW_AFTER = 3
export const BLOCK_AFTER = 10
const MAX_DELAY_MS = 2000
const MAX_KEYS = 100_000

interface Failures {
  count: number
  windowStart: number
}

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

  /** Seconds until the first blocked key unblocks, or 0 when the attempt may proceed. */
  retryAfterSeconds(keys: string[]): number {
    let wait = 0
    for (const key of keys) {
      const entry = this.current(key)
      if (entry && entry.count >= BLOCK_AFTER) {
        wait = Math.max(wait, Math.ceil((entry.windowStart + WINDOW_MS - this.clock.now()) / 1000))
      }
    }
    return Math.max(wait, wait > 0 ? 1 : 0)
  }

  /** How long to hold the answer to a failed attempt: grows with the failures, capped. */
  delayMs(keys: string[]): number {
    const worst = Math.max(0, ...keys.map((k) => this.current(k)?.count ?? 0))
    if (worst <= SLOW_AFTER) return 0
    return Math.min(MAX_DELAY_MS, 250 * 2 ** (worst - SLOW_AFTER - 1))
  }

  recordFailure(keys: string[]): void {
    if (this.failures.size > MAX_KEYS) this.failures.clear()
    for (const key of keys) {
      const entry = this.current(key)
      if (entry) entry.count++
      else this.failures.set(key, { count: 1, windowStart: this.clock.now() })
    }
  }

  recordSuccess(keys: string[]): void {
    for (const key of keys) this.failures.delete(key)
  }
}

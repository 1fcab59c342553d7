/**
 * Per-token rate limit on the public API (DESIGN §6): three fixed windows (minute, hour, day) counted
 * together. A request is refused (and not counted) when any window is full. In memory: one process serves
 * an instance; a PostgreSQL deployment would keep these counters in the database (DESIGN §13).
 */
import type { Clock } from '../lib/clock.ts'
import { tooManyRequests } from './errors.ts'

export interface RateLimits {
  perMinute: number
  perHour: number
  perDay: number
}

interface Window {
  size: number
  limit: number
  start: number
  count: number
}

export interface RateDecision {
  headers: Record<string, string>
  /** Seconds to wait when refused; 0 when allowed. */
  retryAfter: number
}

const MAX_TRACKED = 100_000

export class TokenRateLimiter {
  private readonly windows = new Map<number, Window[]>()

  constructor(
    private readonly clock: Clock,
    private readonly limits: RateLimits,
  ) {}

  private windowsOf(tokenId: number, now: number): Window[] {
    let windows = this.windows.get(tokenId)
    if (!windows) {
      if (this.windows.size >= MAX_TRACKED) this.windows.clear()
      windows = [
        { size: 60_000, limit: this.limits.perMinute, start: now, count: 0 },
        { size: 3_600_000, limit: this.limits.perHour, start: now, count: 0 },
        { size: 86_400_000, limit: this.limits.perDay, start: now, count: 0 },
      ]
      this.windows.set(tokenId, windows)
    }
    for (const w of windows) {
      if (now >= w.start + w.size) {
        w.start = now
        w.count = 0
      }
    }
    return windows
  }

  /** Counts one request for the token, or refuses it. Headers describe the tightest window. */
  consume(tokenId: number): RateDecision {
    const now = this.clock.now()
    const windows = this.windowsOf(tokenId, now)
    const full = windows.filter((w) => w.count >= w.limit)
    if (full.length === 0) for (const w of windows) w.count++
    const tightest = windows.reduce((a, b) => (b.limit - b.count < a.limit - a.count ? b : a))
    const headers = {
      'x-ratelimit-limit': String(tightest.limit),
      'x-ratelimit-remaining': String(Math.max(0, tightest.limit - tightest.count)),
      'x-ratelimit-reset': String(Math.ceil((tightest.start + tightest.size) / 1000)),
    }
    const retryAfter = full.length === 0 ? 0 : Math.max(...full.map((w) => Math.ceil((w.start + w.size - now) / 1000)), 1)
    return { headers, retryAfter }
  }

  /** Throws the 429 when refused; otherwise returns the headers to send. */
  enforce(tokenId: number): Record<string, string> {
    const decision = this.consume(tokenId)
    if (decision.retryAfter > 0) {
      const error = tooManyRequests(decision.retryAfter, 'API rate limit exceeded for this token')
      Object.assign(error.headers, decision.headers)
      throw error
    }
    return decision.headers
  }
}

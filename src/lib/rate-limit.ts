/**
 * Per-token rate limit on the public API (DESIGN §6): three fixed windows (minute, hour, day) counted
 * together. A request is refused (and not counted) when any window is full. The counts live where the store keeps
 * them (src/lib/rate-counters.ts): this process's memory on SQLite, PostgreSQL shared by every instance.
 */
import type { Clock } from './clock.ts'
import { after, type Maybe, type RateCounters, retryAfterOf, type WindowRule, type WindowsTake } from './rate-counters.ts'
import { tooManyRequests } from './errors.ts'

export interface RateLimits {
  perMinute: number
  perHour: number
  perDay: number
}

export interface RateDecision {
  headers: Record<string, string>
  /** Seconds to wait when refused; 0 when allowed. */
  retryAfter: number
}


export class TokenRateLimiter {
  constructor(
    private readonly clock: Clock,
    private readonly limits: RateLimits,
    private readonly counters: RateCounters,
  ) {}

  private rulesOf(tokenId: number): WindowRule[] {
    return [
      { scope: 'api-minute', id: tokenId, sizeMs: 60_000, limit: this.limits.perMinute },
      { scope: 'api-hour', id: tokenId, sizeMs: 3_600_000, limit: this.limits.perHour },
      { scope: 'api-day', id: tokenId, sizeMs: 86_400_000, limit: this.limits.perDay },
    ]
  }

  /** Counts one request for the token, or refuses it. Headers describe the tightest window. */
  consume(tokenId: number): Maybe<RateDecision> {
    const now = this.clock.now()
    return after(this.counters.take(this.rulesOf(tokenId), now), (take) => decisionOf(take, now))
  }

  /** Throws the 429 when refused; otherwise returns the headers to send. */
  enforce(tokenId: number): Maybe<Record<string, string>> {
    return after(this.consume(tokenId), (decision) => {
      if (decision.retryAfter > 0) {
        const error = tooManyRequests(decision.retryAfter, 'API rate limit exceeded for this token')
        Object.assign(error.headers, decision.headers)
        throw error
      }
      return decision.headers
    })
  }
}

/** The headers of the tightest window, and the wait when refused. */
function decisionOf(take: WindowsTake, now: number): RateDecision {
  const tightest = take.windows.reduce((a, b) => (b.limit - b.count < a.limit - a.count ? b : a))
  const headers = {
    'x-ratelimit-limit': String(tightest.limit),
    'x-ratelimit-remaining': String(Math.max(0, tightest.limit - tightest.count)),
    'x-ratelimit-reset': String(Math.ceil(tightest.endsAt / 1000)),
  }
  return { headers, retryAfter: retryAfterOf(take, now) }
}

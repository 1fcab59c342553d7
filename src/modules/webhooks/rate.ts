/**
 * Token bucket per webhook (DESIGN §8 check 5): capacity = rate per minute, refilled continuously; a changed rate
 * starts a full bucket. The bucket lives where the store keeps the counters (src/lib/rate-counters.ts).
 */
import type { Clock } from '../../lib/clock.ts'
import { after, bucketRetryAfter, type Maybe, type RateCounters } from '../../lib/rate-counters.ts'

export class WebhookRateLimiter {
  constructor(
    private readonly clock: Clock,
    private readonly counters: RateCounters,
  ) {}

  /** Takes one token; returns 0 when allowed, else the whole seconds until one is available (≥ 1). */
  take(workflowId: number, ratePerMinute: number): Maybe<number> {
    const rule = { scope: 'webhook', id: workflowId, capacity: ratePerMinute, perMs: ratePerMinute / 60_000 }
    return after(this.counters.takeToken(rule, this.clock.now()), (take) => bucketRetryAfter(rule, take))
  }
}

/** Token bucket per webhook (DESIGN §8 check 5): capacity = rate per minute, refilled continuously. */
import type { Clock } from '../../lib/clock.ts'

interface Bucket {
  tokens: number
  updatedAt: number
  ratePerMinute: number
}

const MAX_TRACKED = 100_000

export class WebhookRateLimiter {
  private readonly buckets = new Map<number, Bucket>()

  constructor(private readonly clock: Clock) {}

  /** Takes one token; returns 0 when allowed, else the whole seconds until one is available (≥ 1). */
  take(workflowId: number, ratePerMinute: number): number {
    const now = this.clock.now()
    let bucket = this.buckets.get(workflowId)
    if (!bucket || bucket.ratePerMinute !== ratePerMinute) {
      if (this.buckets.size >= MAX_TRACKED) this.buckets.clear()
      bucket = { tokens: ratePerMinute, updatedAt: now, ratePerMinute }
      this.buckets.set(workflowId, bucket)
    }
    const perMs = ratePerMinute / 60_000
    bucket.tokens = Math.min(ratePerMinute, bucket.tokens + (now - bucket.updatedAt) * perMs)
    bucket.updatedAt = now
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return 0
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000))
  }
}

/**
 * The counters every limit counts with (the per-token API limit, the per-webhook bucket, the login throttle): each
 * limiter writes its rule once over this interface, and the store behind it decides where the counts live. On SQLite
 * one process serves the instance, so they live in this process's memory (`MemoryRateCounters`, synchronous); on
 * PostgreSQL several instances share them in the database (src/db/postgres/rate-windows.ts, asynchronous, each
 * decision atomic). Callers `await` the answer either way.
 */

/** An answer now (memory) or later (the database). */
export type Maybe<T> = T | Promise<T>

/** `next` of the answer: at once when it is here (memory), when it comes (the database). */
export function after<T, U>(value: Maybe<T>, next: (value: T) => U): Maybe<U> {
  return value instanceof Promise ? value.then(next) : next(value)
}

/** A fixed window: it opens at its first count (or the first after it ended) and lasts `sizeMs`; at most `limit` counts. */
export interface WindowRule {
  key: string
  sizeMs: number
  limit: number
}

export interface WindowState {
  limit: number
  /** Counts in the window after the decision (a refused window is full: `count >= limit`). */
  count: number
  /** Epoch ms when the window ends. */
  endsAt: number
}

export interface WindowsTake {
  /** Every window had room, and each counted one; otherwise none counted. */
  taken: boolean
  /** The windows' states, in the rules' order. */
  windows: WindowState[]
}

/** A token bucket: `capacity` tokens, refilled continuously at `perMs` per millisecond; a new bucket is full. */
export interface BucketRule {
  key: string
  capacity: number
  perMs: number
}

export interface BucketTake {
  taken: boolean
  /** Tokens left after taking one, or (refused) the fraction of one there is. */
  tokens: number
}

export interface RateCounters {
  /** Counts one in every window, or (when any is full) in none: all or nothing. */
  take(rules: readonly WindowRule[], now: number): Maybe<WindowsTake>
  /** The count of a window now (0 when it has ended or never opened). */
  count(key: string, now: number): Maybe<number>
  /** Takes one count back from a window that is still open. */
  giveBack(key: string, now: number): Maybe<void>
  /** Closes a window: its next count opens a new one. */
  forget(key: string): Maybe<void>
  /** Takes one token from a bucket when it holds a whole one. */
  takeToken(rule: BucketRule, now: number): Maybe<BucketTake>
}

/** Whole seconds until every full window of a refused take has ended (at least 1); 0 when it was taken. */
export function retryAfterOf(take: WindowsTake, now: number): number {
  if (take.taken) return 0
  let wait = 1
  for (const w of take.windows) if (w.count >= w.limit) wait = Math.max(wait, Math.ceil((w.endsAt - now) / 1000))
  return wait
}

/** Whole seconds until a refused bucket holds a whole token again (at least 1); 0 when it was taken. */
export function bucketRetryAfter(rule: BucketRule, take: BucketTake): number {
  return take.taken ? 0 : Math.max(1, Math.ceil((1 - take.tokens) / rule.perMs / 1000))
}

interface Window {
  count: number
  endsAt: number
}

interface Bucket {
  tokens: number
  updatedAt: number
  capacity: number
}

/** Keys kept at most (windows and buckets each); past that, ended windows are dropped, then everything is forgotten. */
const MAX_TRACKED = 300_000

/** The counters of one process: a restart forgets them, which is acceptable for a single-process appliance. */
export class MemoryRateCounters implements RateCounters {
  private readonly windows = new Map<string, Window>()
  private readonly buckets = new Map<string, Bucket>()

  private open(key: string, now: number): Window | undefined {
    const window = this.windows.get(key)
    if (window && now >= window.endsAt) {
      this.windows.delete(key)
      return undefined
    }
    return window
  }

  take(rules: readonly WindowRule[], now: number): WindowsTake {
    const current = rules.map((rule) => this.open(rule.key, now))
    const taken = rules.every((rule, i) => (current[i]?.count ?? 0) < rule.limit)
    if (taken && this.windows.size >= MAX_TRACKED) this.sweep(now)
    const windows = rules.map((rule, i) => {
      let window = current[i]
      if (taken && !window) this.windows.set(rule.key, (window = { count: 0, endsAt: now + rule.sizeMs }))
      if (taken) window!.count++
      return { limit: rule.limit, count: window?.count ?? 0, endsAt: window?.endsAt ?? now + rule.sizeMs }
    })
    return { taken, windows }
  }

  count(key: string, now: number): number {
    return this.open(key, now)?.count ?? 0
  }

  giveBack(key: string, now: number): void {
    const window = this.open(key, now)
    if (window && window.count > 0) window.count--
  }

  forget(key: string): void {
    this.windows.delete(key)
  }

  takeToken(rule: BucketRule, now: number): BucketTake {
    let bucket = this.buckets.get(rule.key)
    if (!bucket || bucket.capacity !== rule.capacity) {
      if (this.buckets.size >= MAX_TRACKED) this.buckets.clear()
      bucket = { tokens: rule.capacity, updatedAt: now, capacity: rule.capacity }
      this.buckets.set(rule.key, bucket)
    }
    bucket.tokens = Math.min(rule.capacity, bucket.tokens + Math.max(0, now - bucket.updatedAt) * rule.perMs)
    bucket.updatedAt = Math.max(bucket.updatedAt, now)
    if (bucket.tokens < 1) return { taken: false, tokens: bucket.tokens }
    bucket.tokens -= 1
    return { taken: true, tokens: bucket.tokens }
  }

  /** Drops ended windows; if the map is still full, forgets everything rather than grow without bound. */
  private sweep(now: number): void {
    for (const key of [...this.windows.keys()]) this.open(key, now)
    if (this.windows.size >= MAX_TRACKED) this.windows.clear()
  }
}

/**
 * The counters every limit counts with (the per-token API limit, the per-webhook bucket, the login throttle): each
 * limiter writes its rule once over this interface, and the store behind it decides where the counts live. On SQLite
 * one process serves the instance, so they live in this process's memory (`MemoryRateCounters`, synchronous); on
 * PostgreSQL several instances share them in the database (asynchronous, each decision atomic); the store picks them
 * (`Store.rateCounters`, src/db/store.ts). Callers `await` the answer either way.
 */

/** An answer now (memory) or later (the database). */
export type Maybe<T> = T | Promise<T>

/** `next` of the answer: at once when it is here (memory), when it comes (the database). */
export function after<T, U>(value: Maybe<T>, next: (value: T) => U): Maybe<U> {
  return value instanceof Promise ? value.then(next) : next(value)
}

/**
 * What a count is of: a limit (`scope`, one constant per limit and window) and its subject (a token id, a webhook's
 * workflow id, a client address…). Kept apart so the in-memory counters look a token up by its number, never by a
 * string built per request.
 */
export interface RateKey {
  scope: string
  id: number | string
}

/** A fixed window: it opens at its first count (or the first after it ended) and lasts `sizeMs`; at most `limit` counts. */
export interface WindowRule extends RateKey {
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
export interface BucketRule extends RateKey {
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
  count(key: RateKey, now: number): Maybe<number>
  /** Takes one count back from a window that is still open. */
  giveBack(key: RateKey, now: number): Maybe<void>
  /** Closes a window: its next count opens a new one. */
  forget(key: RateKey): Maybe<void>
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

/** Subjects kept at most per scope; past that, ended windows are dropped, then the scope is forgotten. */
const MAX_TRACKED = 100_000

/** The entries of each scope, by subject. */
class Scopes<T> {
  private readonly byScope = new Map<string, Map<number | string, T>>()

  of(scope: string): Map<number | string, T> {
    let entries = this.byScope.get(scope)
    if (!entries) this.byScope.set(scope, (entries = new Map()))
    return entries
  }
}

/** The counters of one process: a restart forgets them, which is acceptable for a single-process appliance. */
export class MemoryRateCounters implements RateCounters {
  private readonly windows = new Scopes<Window>()
  private readonly buckets = new Scopes<Bucket>()

  /** The key's window while it is open (an ended one is dropped). */
  private open(key: RateKey, now: number): Window | undefined {
    const entries = this.windows.of(key.scope)
    const window = entries.get(key.id)
    if (window && now >= window.endsAt) {
      entries.delete(key.id)
      return undefined
    }
    return window
  }

  take(rules: readonly WindowRule[], now: number): WindowsTake {
    const current: (Window | undefined)[] = []
    let taken = true
    for (const rule of rules) {
      const window = this.open(rule, now)
      current.push(window)
      if ((window?.count ?? 0) >= rule.limit) taken = false
    }
    const windows: WindowState[] = []
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!
      let window = current[i]
      if (taken) {
        if (!window) this.keep(rule, (window = { count: 0, endsAt: now + rule.sizeMs }), now)
        window.count++
      }
      windows.push({ limit: rule.limit, count: window?.count ?? 0, endsAt: window?.endsAt ?? now + rule.sizeMs })
    }
    return { taken, windows }
  }

  count(key: RateKey, now: number): number {
    return this.open(key, now)?.count ?? 0
  }

  giveBack(key: RateKey, now: number): void {
    const window = this.open(key, now)
    if (window && window.count > 0) window.count--
  }

  forget(key: RateKey): void {
    this.windows.of(key.scope).delete(key.id)
  }

  takeToken(rule: BucketRule, now: number): BucketTake {
    const entries = this.buckets.of(rule.scope)
    let bucket = entries.get(rule.id)
    if (!bucket || bucket.capacity !== rule.capacity) {
      if (entries.size >= MAX_TRACKED) entries.clear()
      bucket = { tokens: rule.capacity, updatedAt: now, capacity: rule.capacity }
      entries.set(rule.id, bucket)
    }
    bucket.tokens = Math.min(rule.capacity, bucket.tokens + Math.max(0, now - bucket.updatedAt) * rule.perMs)
    bucket.updatedAt = Math.max(bucket.updatedAt, now)
    if (bucket.tokens < 1) return { taken: false, tokens: bucket.tokens }
    bucket.tokens -= 1
    return { taken: true, tokens: bucket.tokens }
  }

  /** Keeps a new window; a full scope first drops its ended windows, and is forgotten if still full. */
  private keep(key: RateKey, window: Window, now: number): void {
    const entries = this.windows.of(key.scope)
    if (entries.size >= MAX_TRACKED) {
      for (const [id, other] of entries) if (now >= other.endsAt) entries.delete(id)
      if (entries.size >= MAX_TRACKED) entries.clear()
    }
    entries.set(key.id, window)
  }
}

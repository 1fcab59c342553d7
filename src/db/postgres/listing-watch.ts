/**
 * Watches how far the lists' watermark (./list-watermark.ts) lags behind the ids drawn. Every second (a quarter of
 * the limit if shorter) each instance runs a pass itself — so a list with no reader still moves, and a lag is the
 * writers' doing, not the readers' — and reads each list's newest draw and watermark. An id stays unlisted while a
 * transaction that was running when it was drawn is still open — anywhere in the cluster, if it holds a transaction
 * id — so the lag of a list is how long its oldest unlisted draw has been seen unlisted: 0 while every draw of the
 * last sample is listed by the next, growing by a sample's interval while a transaction holds them back (measured to
 * the sample: a row listed within one never shows). `/metrics` shows it per list (`trellis_list_lag_seconds`); past
 * `limitSeconds` the instance says once in its log which session holds the oldest transaction id (where its role may
 * see it), `/readyz` answers `degraded` (`listing_delayed`), and once the list catches up an `info` line says so.
 */
import type { SQL } from 'bun'
import type { Logger } from '../../lib/logger.ts'
import { listingState, listPass } from './list-watermark.ts'
import { holderFields, holderOf } from './transaction-watch.ts'

/** Draws remembered per list while unlisted: a sample's at most; past it the newest are not added (the oldest decide the lag). */
const SIGHTINGS = 600

export class ListingWatch {
  /** Per list: draws seen unlisted (each sample's newest), oldest first, with when they were first seen (ms). */
  private readonly unlisted = new Map<string, { drawn: number; seenAt: number }[]>()
  /** The largest lag of any list at the last sample, and whether this episode was said. */
  private worst = { list: '', seconds: 0 }
  private warned = false
  private timer: ReturnType<typeof setInterval> | undefined

  constructor(
    private readonly sql: SQL,
    private readonly limitSeconds: number,
    private readonly logger: Logger,
    private readonly gauge: { set(labels: { list: string }, value: number): void },
    private readonly now: () => number = Date.now,
  ) {}

  /** Samples every `everyMs` (default: a quarter of the limit, at most a second) until `stop`. */
  start(everyMs = Math.min(1_000, (this.limitSeconds * 1000) / 4)): void {
    this.timer = setInterval(() => void this.sample().catch(() => {}), everyMs)
    this.timer.unref?.()
  }

  stop(): void {
    clearInterval(this.timer)
  }

  /** Past the limit: the list that lags most and by how long, for `/readyz`; else null. */
  overLimit(): { list: string; seconds: number } | null {
    return this.worst.seconds >= this.limitSeconds ? this.worst : null
  }

  async sample(): Promise<void> {
    await listPass(this.sql)
    const state = await listingState(this.sql)
    const now = this.now()
    let worst = { list: '', seconds: 0 }
    for (const { list, drawn, through } of state.lists) {
      const seen = (this.unlisted.get(list) ?? []).filter((sighting) => sighting.drawn > through)
      if (drawn > through && (seen.at(-1)?.drawn ?? through) < drawn && seen.length < SIGHTINGS) seen.push({ drawn, seenAt: now })
      this.unlisted.set(list, seen)
      const seconds = seen.length === 0 ? 0 : (now - seen[0]!.seenAt) / 1000
      this.gauge.set({ list }, seconds)
      if (seconds > worst.seconds) worst = { list, seconds }
    }
    this.worst = worst
    if (!this.warned && worst.seconds >= this.limitSeconds) {
      this.warned = true
      this.logger.warn('a list has been held back past TRELLIS_LISTING_DELAY_SECONDS: its newest rows are listed (and streamed) only once the transaction holding the oldest transaction id ends; /readyz says degraded until then', {
        list: worst.list,
        heldSeconds: Math.round(worst.seconds),
        limitSeconds: this.limitSeconds,
        ...holderFields(await holderOf(this.sql, state.xmin)),
      })
    } else if (this.warned && worst.seconds === 0) {
      this.warned = false
      this.logger.info('the lists caught up: every row drawn is listed')
    }
  }
}

/**
 * The limits' counters shared by every instance on one PostgreSQL (the interface and the in-memory
 * counters of SQLite are src/lib/rate-counters.ts). Each decision is one upsert whose guard is evaluated on the row's
 * latest version under its row lock (`INSERT … ON CONFLICT DO UPDATE … WHERE count < max_count`), so two instances can
 * never both take a window's last count or a bucket's last token. Decisions run on the pool, outside any request
 * transaction. Ended windows and refilled buckets are deleted by a sweep each instance runs at most once a minute.
 */
import type { SQL } from 'bun'
import type { BucketRule, BucketTake, RateCounters, RateKey, WindowRule, WindowsTake, WindowState } from '../../lib/rate-counters.ts'
import { postgresFaultOf } from './op-runner.ts'

/** How often an instance sweeps ended windows and full buckets away, and how many rows one statement deletes. */
export const SWEEP_EVERY_MS = 60_000
const SWEEP_BATCH = 5000

/** A count's row key: its scope and subject (`api-minute 42`, `login-address 10.0.0.1`). */
const keyOf = (key: RateKey) => `${key.scope} ${key.id}`

interface WindowRow {
  key: string
  count: number
  ends_at: number
  taken: boolean
}

/** `$n` placeholders for `count` values per row after `first` leading values: `($2, $3), ($4, $5)`. */
function rowsOf(rows: number, perRow: number, first: number, row: (placeholders: string[]) => string): string {
  return Array.from({ length: rows }, (_, r) => row(Array.from({ length: perRow }, (_, c) => `$${first + r * perRow + c + 1}`))).join(', ')
}

/** A statement's text by the number of windows it handles, made once per number (a decision names one to three). */
function byWindows(make: (windows: number) => string): (windows: number) => string {
  const texts = new Map<number, string>()
  return (windows) => {
    let text = texts.get(windows)
    if (text === undefined) texts.set(windows, (text = make(windows)))
    return text
  }
}

/**
 * Counts in every window the upsert finds room in; the windows it refused come back as the statement's snapshot saw
 * them. $1 is now; then key, size and limit per window.
 */
const takeStatement = byWindows((windows) => {
  const values = rowsOf(windows, 3, 1, ([key, size, limit]) => `(${key}::text, 1::bigint, ${limit}::bigint, $1::bigint + ${size}::bigint)`)
  const keys = rowsOf(windows, 3, 1, ([key]) => `${key}::text`)
  return `WITH taken AS (
      INSERT INTO rate_limit_windows AS w (key, count, max_count, ends_at) VALUES ${values}
      ON CONFLICT (key) DO UPDATE SET
        count = CASE WHEN w.ends_at <= $1::bigint THEN 1 ELSE w.count + 1 END,
        ends_at = CASE WHEN w.ends_at <= $1::bigint THEN excluded.ends_at ELSE w.ends_at END,
        max_count = excluded.max_count
      WHERE w.ends_at <= $1::bigint OR w.count < excluded.max_count
      RETURNING key, count, ends_at)
    SELECT key, count::float8 AS count, ends_at::float8 AS ends_at, true AS taken FROM taken
    UNION ALL
    SELECT key, count::float8, ends_at::float8, false FROM rate_limit_windows
    WHERE key IN (${keys}) AND key NOT IN (SELECT key FROM taken)`
})

/** Gives back the counts of a partly taken decision, in the windows they were taken in ($n: key, ends_at). */
const giveBackStatement = byWindows((windows) => {
  const values = rowsOf(windows, 2, 0, ([key, endsAt]) => `(${key}::text, ${endsAt}::bigint)`)
  return `UPDATE rate_limit_windows AS w SET count = w.count - 1 FROM (VALUES ${values}) AS t(key, ends_at)
    WHERE w.key = t.key AND w.ends_at = t.ends_at AND w.count > 0`
})

/** The bucket's tokens now ($2 capacity, $3 per ms, $4 now): a changed capacity starts a full bucket (as in memory). */
const REFILLED = `CASE WHEN b.capacity <> $2::bigint THEN $2::float8
  ELSE least($2::float8, b.tokens + greatest(0, $4::bigint - b.updated_at) * $3::float8) END`

const TAKE_TOKEN = `WITH taken AS (
    INSERT INTO rate_limit_buckets AS b (key, capacity, tokens, updated_at, ends_at)
    VALUES ($1, $2::bigint, $2::float8 - 1, $4::bigint, $4::bigint + ceil(1 / $3::float8)::bigint)
    ON CONFLICT (key) DO UPDATE SET
      tokens = ${REFILLED} - 1,
      capacity = $2::bigint,
      updated_at = greatest(b.updated_at, $4::bigint),
      ends_at = greatest(b.updated_at, $4::bigint) + ceil(($2::float8 - (${REFILLED} - 1)) / $3::float8)::bigint
    WHERE ${REFILLED} >= 1
    RETURNING tokens)
  SELECT true AS taken, tokens FROM taken
  UNION ALL
  SELECT false, ${REFILLED} FROM rate_limit_buckets b WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM taken)`

export class PgRateCounters implements RateCounters {
  private lastSweep = -Infinity
  private sweeping: Promise<number> | null = null

  constructor(private readonly sql: SQL) {}

  private async query<T>(text: string, values: unknown[]): Promise<T[]> {
    try {
      return [...((await this.sql.unsafe(text, values as never[])) as T[])]
    } catch (error) {
      throw postgresFaultOf(error) ?? error
    }
  }

  async take(rules: readonly WindowRule[], now: number): Promise<WindowsTake> {
    this.sweepNowAndThen(now)
    const keys = rules.map(keyOf)
    const rows = await this.query<WindowRow>(takeStatement(rules.length), [now, ...rules.flatMap((r, i) => [keys[i], r.sizeMs, r.limit])])
    const byKey = new Map(rows.map((row) => [row.key, row]))
    const taken = keys.every((key) => byKey.get(key)?.taken === true)
    const partly = taken ? [] : rows.filter((row) => row.taken)
    if (partly.length > 0) await this.query(giveBackStatement(partly.length), partly.flatMap((row) => [row.key, row.ends_at]))
    const windows = rules.map((rule, i): WindowState => {
      const row = byKey.get(keys[i]!)
      if (row?.taken) return { limit: rule.limit, count: taken ? row.count : row.count - 1, endsAt: row.ends_at }
      // Refused: another instance's counts filled it after this statement's snapshot, or it was full then already.
      const open = row !== undefined && row.ends_at > now
      return { limit: rule.limit, count: Math.max(rule.limit, open ? row.count : 0), endsAt: open ? row.ends_at : now + rule.sizeMs }
    })
    return { taken, windows }
  }

  async count(key: RateKey, now: number): Promise<number> {
    const [row] = await this.query<{ count: number }>('SELECT count::float8 AS count FROM rate_limit_windows WHERE key = $1 AND ends_at > $2::bigint', [keyOf(key), now])
    return row?.count ?? 0
  }

  async giveBack(key: RateKey, now: number): Promise<void> {
    await this.query('UPDATE rate_limit_windows SET count = count - 1 WHERE key = $1 AND ends_at > $2::bigint AND count > 0', [keyOf(key), now])
  }

  async forget(key: RateKey): Promise<void> {
    await this.query('DELETE FROM rate_limit_windows WHERE key = $1', [keyOf(key)])
  }

  async takeToken(rule: BucketRule, now: number): Promise<BucketTake> {
    this.sweepNowAndThen(now)
    const [row] = await this.query<{ taken: boolean; tokens: number }>(TAKE_TOKEN, [keyOf(rule), rule.capacity, rule.perMs, now])
    // No row at all: refused by a bucket another instance created after this statement's snapshot, so it was empty.
    return row ?? { taken: false, tokens: 0 }
  }

  /**
   * Deletes ended windows and buckets full again (neither says anything any more), in batches; how many. The guard
   * is repeated outside the batch's pick so a row a decision has just renewed is kept. The batch is locked as it is
   * picked, skipping rows a decision holds, so the sweep never waits for one: a decision takes its rows in its own
   * order (a login's pair, then its address), and a sweep that waited for one of them while holding another deadlocked
   * with it (PostgreSQL then failed the decision). A skipped row is the next sweep's work.
   */
  async sweep(now: number): Promise<number> {
    let deleted = 0
    for (const table of ['rate_limit_windows', 'rate_limit_buckets']) {
      for (;;) {
        const rows = await this.query(
          `WITH doomed AS MATERIALIZED (
             SELECT key AS doomed_key FROM ${table} WHERE ends_at <= $1::bigint LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED)
           DELETE FROM ${table} USING doomed WHERE key = doomed_key AND ends_at <= $1::bigint RETURNING 1`,
          [now],
        )
        deleted += rows.length
        if (rows.length < SWEEP_BATCH) break
      }
    }
    return deleted
  }

  /** At most one sweep a minute per instance, off the decision's path; a failed sweep is simply the next one's work. */
  private sweepNowAndThen(now: number): void {
    if (this.sweeping || now - this.lastSweep < SWEEP_EVERY_MS) return
    this.lastSweep = now
    this.sweeping = this.sweep(now)
      .catch(() => 0)
      .finally(() => {
        this.sweeping = null
      })
  }
}

/**
 * Watches for a long transaction anywhere in the cluster. A transaction that holds a transaction id (it wrote, or
 * asked for one) keeps PostgreSQL's oldest running id — a snapshot's `xmin` — where it is until it ends: vacuum keeps
 * every row version since (the runs table, also the queue, churns fastest), and anything that waits for the
 * transactions before a point to end waits on it. Every few seconds each instance reads its snapshot's bounds, which
 * needs no privilege: the oldest running id (`xmin`) below the first unfinished one (`xmax`: past the newest finished)
 * is a transaction that later, finished ones wait behind (while nothing finishes after it, it holds nothing back);
 * while it stays the same one, the transaction holding it is at least as old as that id's first sighting. Past
 * `limitSeconds` the instance says so once in its log (naming the session where its
 * role may see it in `pg_stat_activity`: grant it `pg_read_all_stats` to see every role's), `/readyz` answers
 * `degraded`, and `/metrics` shows the age (`trellis_database_oldest_transaction_seconds`).
 */
import type { SQL } from 'bun'
import type { Logger } from '../../lib/logger.ts'

/** The holder of the oldest running transaction id, as `pg_stat_activity` shows it to this role (never its query). */
export interface Holder {
  pid: number
  datname: string | null
  usename: string | null
  application_name: string | null
  state: string | null
  age: number | null
}

/** The session holding transaction id `xid` (a 64-bit id: the activity view shows its low 32 bits), where this role sees it. */
export async function holderOf(sql: SQL, xid: string): Promise<Holder | null> {
  const rows = (await sql.unsafe(
    `SELECT pid, datname, usename, application_name, state, extract(epoch FROM now() - xact_start)::float8 AS age
       FROM pg_stat_activity WHERE backend_xid::text = $1`,
    [String(BigInt(xid) & 0xffffffffn)],
  )) as Holder[]
  return rows[0] ?? null
}

/** A holder as a log line's fields (or why it is not named). */
export const holderFields = (holder: Holder | null) =>
  holder
    ? { pid: holder.pid, database: holder.datname, user: holder.usename, application: holder.application_name, state: holder.state }
    : { session: 'not visible to this role (grant it pg_read_all_stats)' }

export class TransactionWatch {
  /** The oldest running transaction id seen at the last sample, and when it was first seen (ms). */
  private oldest: { xmin: string; since: number; warned: boolean } | null = null
  private age = 0
  private timer: ReturnType<typeof setInterval> | undefined

  constructor(
    private readonly sql: SQL,
    private readonly limitSeconds: number,
    private readonly logger: Logger,
    private readonly gauge: { set(value: number): void },
    private readonly now: () => number = Date.now,
  ) {}

  /** Samples every `everyMs` (default: a quarter of the limit, at most 5 s) until `stop`. */
  start(everyMs = Math.min(5_000, (this.limitSeconds * 1000) / 4)): void {
    this.timer = setInterval(() => void this.sample().catch(() => {}), everyMs)
    this.timer.unref?.()
  }

  stop(): void {
    clearInterval(this.timer)
  }

  /** Past the limit: the age, for `/readyz`; else null. */
  overLimit(): number | null {
    return this.age >= this.limitSeconds ? this.age : null
  }

  async sample(): Promise<void> {
    const [bounds] = (await this.sql.unsafe('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax')) as { xmin: string; xmax: string }[]
    const now = this.now()
    // None: no running transaction is older than a finished one, nothing is held back.
    const xmin = bounds && bounds.xmin !== bounds.xmax ? bounds.xmin : null
    if (this.oldest?.xmin !== xmin) {
      if (this.oldest?.warned) this.logger.info('the long PostgreSQL transaction ended', { heldSeconds: Math.round(this.age) })
      this.oldest = xmin === null ? null : { xmin, since: now, warned: false }
    }
    const holder = this.oldest === null ? null : await holderOf(this.sql, this.oldest.xmin)
    this.age = this.oldest === null ? 0 : Math.max((now - this.oldest.since) / 1000, holder?.age ?? 0)
    this.gauge.set(this.age)
    if (this.oldest !== null && !this.oldest.warned && this.age >= this.limitSeconds) {
      this.oldest.warned = true
      this.logger.warn('a PostgreSQL transaction has been open past TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS: vacuum keeps every row version since it began; /readyz says degraded until it ends', {
        heldSeconds: Math.round(this.age),
        limitSeconds: this.limitSeconds,
        ...holderFields(holder),
      })
    }
  }
}

/**
 * The lists' watermark on PostgreSQL (drizzle/postgres/0026_run_events_watermark.sql; docs/workflows.md "The order
 * guarantee on PostgreSQL"). A list's rows take their ids from its sequence at insert, under no lock, each after its
 * transaction took its transaction id (`trellis_sequenced_id`, the id's default). Readers read at or below the list's
 * watermark (`listed` in ../dialect.ts); a pass (`trellis_list_pass`, one function call) moves it over the ids no
 * transaction can still commit. Whoever reads a list runs the passes it needs first (`awaitListed`): a reader waits
 * for every id drawn before it asked, as long as the transactions that drew them are open, up to a bound; past it, it
 * reads what is listed and the rest comes at its next read.
 */
import type { SQL } from 'bun'
import { commitsThisRequestMustSee } from '../../lib/request-arrival.ts'

import type { WatermarkedList } from '../dialect.ts'

/**
 * The pass's try-lock: a single int8 key, a space of its own (the lists' and rules' locks are pairs of int4 keys,
 * the migrations' lock another int8).
 */
const LIST_PASS_LOCK = 7_316_200

/** Marks pending at most per list: past it a pass adds none until one settles. */
const MARKS = 16

/** What a pass did to a list: the ids it listed (`from` = `to`: none), the rows whose time moved, the marks left. */
export interface ListPass {
  list: string
  from: number
  to: number
  moved: number
  pending: number
}

/**
 * One pass over every list, one function call in a transaction of its own (nothing when another pass holds the lock
 * at that moment): a `ListPass` per list. `lockKey`: the pass's lock (another only for a test's own lists).
 */
export async function listPass(sql: SQL, lockKey = LIST_PASS_LOCK): Promise<ListPass[]> {
  const rows = (await sql.unsafe('SELECT * FROM trellis_list_pass($1::int8, $2::int4)', [lockKey, MARKS])) as {
    listed: string
    listed_from: string
    listed_to: string
    moved: string
    pending: number
  }[]
  return rows.map((row) => ({ list: row.listed, from: Number(row.listed_from), to: Number(row.listed_to), moved: Number(row.moved), pending: row.pending }))
}

/**
 * The pause before the next pass while the list is behind (the transactions that drew its newest ids are still open):
 * 2 ms, doubling to 32 ms. A write transaction lasts a few milliseconds, so the first passes catch most; one held
 * longer (anywhere in the cluster) costs a pass every 32 ms, not a spin.
 */
const passAgainMs = (passes: number) => Math.min(32, 2 ** passes)

/** Each list's newest draw and its watermark, and the cluster's oldest running transaction id (its snapshot's xmin). */
export interface ListingState {
  lists: { list: string; drawn: number; through: number }[]
  xmin: string
}

/** What `ListingWatch` (./listing-watch.ts) samples: one statement. */
export async function listingState(sql: SQL): Promise<ListingState> {
  const rows = (await sql.unsafe(
    `SELECT list, coalesce(pg_sequence_last_value(seq), 0)::float8 AS drawn, through::float8 AS through,
            pg_snapshot_xmin(pg_current_snapshot())::text AS xmin
       FROM list_sequencer ORDER BY list`,
  )) as { list: string; drawn: number; through: number; xmin: string }[]
  return { lists: rows.map(({ list, drawn, through }) => ({ list, drawn, through })), xmin: rows[0]?.xmin ?? '0' }
}

/** The catch-up under way on each pool: callers at once wait for it before they check their own ids. */
const underWay = new WeakMap<SQL, Promise<boolean>>()

/**
 * Per pool and list, when the newest catch-up that succeeded read the list's newest draw (`performance.now()` as it
 * sent the read): every id drawn before then is listed.
 */
const caughtUpAt = new WeakMap<SQL, Map<WatermarkedList, number>>()

/**
 * Resolves once `list`'s watermark covers every id drawn when it was called (true), or after `boundMs` (false: a long
 * transaction holds the watermark back; the caller reads what is listed, and asks again later). Within a served
 * request (../../lib/request-arrival.ts) a catch-up that read the newest draw after the request arrived — or, once the
 * request wrote, after its own write committed — answers for it too: what was committed before then had been drawn by
 * then. Concurrent readers of a list share one read, as the lookup cache's do (./lookup-cache.ts).
 */
export async function awaitListed(sql: SQL, list: WatermarkedList, boundMs: number): Promise<boolean> {
  const until = performance.now() + boundMs
  const since = commitsThisRequestMustSee()
  const covered = () => since !== undefined && (caughtUpAt.get(sql)?.get(list) ?? -Infinity) >= since
  if (covered()) return true
  const earlier = underWay.get(sql)
  if (earlier !== undefined) await earlier.catch(() => false)
  if (covered()) return true
  const mine = catchUp(sql, list, until)
  underWay.set(sql, mine)
  try {
    return await mine
  } finally {
    if (underWay.get(sql) === mine) underWay.delete(sql)
  }
}

/** `list`'s newest draw and its watermark (none: not a list of this database). */
async function listOf(sql: SQL, list: WatermarkedList): Promise<{ drawn: number; through: number } | undefined> {
  const [state] = (await sql.unsafe('SELECT coalesce(pg_sequence_last_value(seq), 0)::float8 AS drawn, through::float8 AS through FROM list_sequencer WHERE list = $1', [list])) as {
    drawn: number
    through: number
  }[]
  return state
}

async function catchUp(sql: SQL, list: WatermarkedList, until: number): Promise<boolean> {
  const sentAt = performance.now()
  const state = await listOf(sql, list)
  const caughtUp = () => {
    let lists = caughtUpAt.get(sql)
    if (lists === undefined) caughtUpAt.set(sql, (lists = new Map()))
    lists.set(list, Math.max(lists.get(list) ?? -Infinity, sentAt))
    return true
  }
  if (state === undefined || state.through >= state.drawn) return caughtUp()
  for (let passes = 1; ; passes++) {
    const passed = (await listPass(sql)).find((pass) => pass.list === list)
    if (passed !== undefined && passed.to >= state.drawn) return caughtUp()
    if (performance.now() >= until) return false
    await Bun.sleep(Math.min(passAgainMs(passes), Math.max(0, until - performance.now())))
    if (passed === undefined) {
      // Another pass held the lock: it may have listed them.
      const now = await listOf(sql, list)
      if (now !== undefined && now.through >= state.drawn) return caughtUp()
    }
  }
}

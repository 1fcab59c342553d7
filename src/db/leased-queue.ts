/**
 * The outboxes claimed under a lease — completion callbacks' deliveries (./callbacks.ts), mail (./mail.ts), workflow events (./workflow-events.ts) and audit witness deliveries (./audit.ts): their
 * statements, written once for both stores and both tables. Each item is `pending` until settled (`succeeded`/`sent`
 * or `failed`); a worker claims due items by writing its name and an expiry into the lease, settles each attempt
 * guarded by that lease, and hands back what it holds when it stops.
 *
 * The claim is one conditional UPDATE: on PostgreSQL two instances may pick the same due rows, but the second
 * UPDATE waits for the first's row locks and then re-checks its WHERE on the rows as committed — leased now, so
 * skipped: one item is never handed to two workers at once while its lease runs.
 */
import { and, asc, eq, inArray, isNotNull, lte, type SQL, sql } from 'drizzle-orm'
import type { Tables } from './dialect.ts'
import { answer, type Op } from './op.ts'
import type { Store } from './store.ts'
import { statement } from './query.ts'

/** A table of leased items: both outboxes have these columns, named alike. */
type LeasedTable = Tables['callbackDeliveries'] | Tables['mailOutbox'] | Tables['workflowEvents'] | Tables['auditWitnessDeliveries']

/** One attempt's outcome: the item is `done` (delivered), `failed` for good, or `pending` again until `nextAttemptAt`. */
export type LeaseOutcome<Done extends string> = { status: Done | 'failed'; at: number } | { status: 'pending'; nextAttemptAt: number }

/** One attempt settled, by the worker that holds the item's lease. */
export interface LeaseSettlement<Done extends string> {
  id: string
  owner: string
  /** Attempts made so far, this one included. */
  attempts: number
  /** Written to `last_error` where the table keeps it (`recordsError`). */
  error: string | null
  outcome: LeaseOutcome<Done>
}

/** A leased outbox's operations; `Claimed` is what the claim answers of each item. */
export interface LeasedQueue<Claimed, Done extends string> {
  /** Leases up to `limit` due items to `owner` until `now + leaseMs`, oldest due first (answered in no order). */
  claim(owner: string, now: number, leaseMs: number, limit: number): Op<Claimed[]>
  /** The attempt's outcome, guarded by the lease: false (nothing written) when `owner` no longer holds the item. */
  settle(attempt: LeaseSettlement<Done>): Op<boolean>
  /** Graceful stop: what `owner` holds (attempts it gave up on) is due again for any worker; how many. */
  releaseOwned(owner: string): Op<number>
  /** Every lease handed back: only for a store no other process serves (./store.ts), where every holder is dead. */
  releaseAll(): Op<number>
  /**
   * What a starting worker takes back at once: on a store no other process serves (`Store.servesAlone`) every lease is
   * a dead process's, so all are handed back; elsewhere a lease is taken over once it has run out (the claim's own
   * rule), and nothing is done now.
   */
  recoverAtStart(store: Store): Op<number>
  /** When the next pending item comes due after `after` (ms), or null. */
  nextDueAt(after: number): Op<number | null>
  /** Removes up to `limit` items settled (done or failed) at or before `before`; how many it removed. */
  pruneFinished(before: number, limit: number): Op<number>
}

const ph = (name: string) => sql.placeholder(name)

export interface LeasedQueueOptions {
  /** The statements' names are `<name>.<operation>`: `mail.claim`, `callbacks.settle`… */
  name: string
  table: (t: Tables) => LeasedTable
  /** What the claim answers of each item: its whole row, or its id alone. */
  claimAnswers: 'rows' | 'ids'
  /** The settle writes the attempt's error to the table's `last_error`. */
  recordsError?: boolean
}

/** The statements of a leased outbox, built once per dialect and connection like every `statement`. */
export function leasedQueue<Claimed, Done extends string>({ name, table, claimAnswers, recordsError = false }: LeasedQueueOptions): LeasedQueue<Claimed, Done> {
  /** Still to be delivered: the due index's predicate (`status = 'pending'`), written as its literal. */
  const isPending = (x: LeasedTable) => sql`${x.status} = 'pending'`
  /** No worker holds the item: never leased, or its lease ran out (its holder died mid-attempt). */
  const isFree = (x: LeasedTable) => sql`(${x.leaseExpiresAt} IS NULL OR ${x.leaseExpiresAt} < ${ph('now')})`

  const CLAIM = statement(`${name}.claim`, ({ db, t }) => {
    const x = table(t)
    const due = db
      .select({ id: x.id })
      .from(x)
      .where(and(isPending(x), lte(x.nextAttemptAt, ph('now')), isFree(x)))
      .orderBy(asc(x.nextAttemptAt))
      .limit(ph('limit'))
    const update = db
      .update(x)
      .set({ leaseOwner: sql`${ph('owner')}`, leaseExpiresAt: sql`${ph('until')}` })
      .where(and(inArray(x.id, due), isPending(x), isFree(x)))
    return claimAnswers === 'rows' ? update.returning() : update.returning({ id: x.id })
  })

  const SETTLE = statement(`${name}.settle`, ({ db, t }) => {
    const x = table(t)
    return db
      .update(x)
      .set({
        status: sql`${ph('status')}`,
        attempts: sql`${ph('attempts')}`,
        ...(recordsError ? { lastError: sql`${ph('error')}` } : {}),
        finishedAt: sql`${ph('finishedAt')}`,
        nextAttemptAt: sql`coalesce(${ph('nextAttemptAt')}, ${x.nextAttemptAt})`,
        leaseOwner: null,
        leaseExpiresAt: null,
      })
      .where(and(eq(x.id, ph('id')), eq(x.leaseOwner, ph('owner')), isPending(x)))
      .returning({ id: x.id })
  })

  /** Leased pending items (those `which` picks) handed back: due when they were, nobody's. */
  const unlease = (operation: string, which: (x: LeasedTable) => SQL) =>
    statement(`${name}.${operation}`, ({ db, t }) => {
      const x = table(t)
      return db
        .update(x)
        .set({ leaseOwner: null, leaseExpiresAt: null })
        .where(and(isPending(x), isNotNull(x.leaseOwner), which(x)))
        .returning({ id: x.id })
    })
  const RELEASE_OWNED = unlease('release', (x) => eq(x.leaseOwner, ph('owner')))
  const RELEASE_ALL = unlease('release-all', () => sql`1 = 1`)

  const NEXT_DUE = statement(`${name}.next-due`, ({ db, t }) => {
    const x = table(t)
    return db
      .select({ at: sql<number | null>`min(${x.nextAttemptAt})`.mapWith(Number) })
      .from(x)
      .where(and(isPending(x), sql`${x.nextAttemptAt} > ${ph('after')}`))
  })

  const PRUNE = statement(`${name}.prune`, ({ db, t }) => {
    const x = table(t)
    return db
      .delete(x)
      .where(inArray(x.id, db.select({ id: x.id }).from(x).where(lte(x.finishedAt, ph('before'))).limit(ph('limit'))))
      .returning({ id: x.id })
  })

  function* releaseAll(): Op<number> {
    return (yield* RELEASE_ALL.rows()).length
  }

  return {
    claim: (owner, now, leaseMs, limit) => CLAIM.rows({ owner, now, until: now + leaseMs, limit }) as Op<Claimed[]>,
    *settle({ id, owner, attempts, error, outcome }) {
      const settled = yield* SETTLE.rows({
        id,
        owner,
        status: outcome.status,
        attempts,
        error,
        finishedAt: 'at' in outcome ? outcome.at : null,
        nextAttemptAt: 'nextAttemptAt' in outcome ? outcome.nextAttemptAt : null,
      })
      return settled.length > 0
    },
    *releaseOwned(owner) {
      return (yield* RELEASE_OWNED.rows({ owner })).length
    },
    releaseAll,
    recoverAtStart: (store) => (store.servesAlone ? releaseAll() : answer(0)),
    *nextDueAt(after) {
      return (yield* NEXT_DUE.row({ after }))?.at ?? null
    },
    *pruneFinished(before, limit) {
      return (yield* PRUNE.rows({ before, limit })).length
    },
  }
}

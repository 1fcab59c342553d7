/**
 * Workflow schedules' storage: one schedule per workflow, and its ticks. A tick is a row with a unique (workflow, fire
 * time): an instance claims it by moving the schedule's `next_fire_at` on — a conditional UPDATE, so of several
 * instances that read the same due schedule one alone goes on — and inserting the tick in the same transaction
 * (`ON CONFLICT DO NOTHING`: a tick is never inserted twice, whatever happened to `next_fire_at`). Its runs are
 * started in batches under the tick's lease; each batch commits with the tick's cursor and counts, or not at all.
 */
import { and, asc, desc, eq, isNull, lt, lte, or, sql } from 'drizzle-orm'
import type { Op } from './op.ts'
import { constantLimit, exec, row, rows, statement } from './query.ts'
import type { scheduleTicks, workflowSchedules } from './schema.ts'

export type ScheduleRow = typeof workflowSchedules.$inferSelect
export type TickRow = typeof scheduleTicks.$inferSelect

const SCHEDULE = statement('schedules.find', ({ db, t }) => db.select().from(t.workflowSchedules).where(eq(t.workflowSchedules.workflowId, sql.placeholder('workflowId'))))

/** A workflow's schedule, if it has one. */
export function findSchedule(workflowId: number) {
  return SCHEDULE.row({ workflowId })
}

/** Creates or replaces a workflow's schedule. */
export function saveSchedule(schedule: Omit<ScheduleRow, 'createdAt'>, now: number): Op<void> {
  const { workflowId: _, ...set } = schedule
  return exec(({ db, t }) =>
    db
      .insert(t.workflowSchedules)
      .values({ ...schedule, createdAt: now })
      .onConflictDoUpdate({ target: t.workflowSchedules.workflowId, set }),
  )
}

/** Removes a workflow's schedule (its ticks stay: their counts are the history); whether it had one. */
export function* deleteSchedule(workflowId: number): Op<boolean> {
  const gone = yield* rows(({ db, t }) => db.delete(t.workflowSchedules).where(eq(t.workflowSchedules.workflowId, workflowId)).returning({ id: t.workflowSchedules.workflowId }))
  return gone.length > 0
}

/** Enabled schedules whose next fire time has come, soonest first (`workflow_schedules_due_idx`). */
export function dueSchedules(now: number, limit: number) {
  return rows(({ db, t }) =>
    db
      .select()
      .from(t.workflowSchedules)
      .where(lte(t.workflowSchedules.nextFireAt, now))
      .orderBy(asc(t.workflowSchedules.nextFireAt))
      .limit(constantLimit(limit)),
  )
}

/** The soonest next fire time of any schedule (null: none enabled). */
export function* nextScheduleFireAt(): Op<number | null> {
  const next = yield* row(({ db, t }) =>
    db
      .select({ at: t.workflowSchedules.nextFireAt })
      .from(t.workflowSchedules)
      .where(sql`${t.workflowSchedules.nextFireAt} IS NOT NULL`)
      .orderBy(asc(t.workflowSchedules.nextFireAt))
      .limit(constantLimit(1)),
  )
  return next?.at ?? null
}

/**
 * Moves a schedule's next fire time from `expected` to `next`: true for the one transaction that does it (a
 * concurrent claim of the same fire time finds it moved and changes nothing).
 */
export function* moveNextFireAt(workflowId: number, expected: number, next: number | null): Op<boolean> {
  const moved = yield* rows(({ db, t }) =>
    db
      .update(t.workflowSchedules)
      .set({ nextFireAt: next })
      .where(and(eq(t.workflowSchedules.workflowId, workflowId), eq(t.workflowSchedules.nextFireAt, expected)))
      .returning({ id: t.workflowSchedules.workflowId }),
  )
  return moved.length > 0
}

/** The tick of (workflow, fire time), leased to `owner`; undefined when that tick exists already. */
export function insertTick(tick: { workflowId: number; fireAt: number; owner: string; leaseExpiresAt: number; now: number }) {
  return row(({ db, t }) =>
    db
      .insert(t.scheduleTicks)
      .values({ workflowId: tick.workflowId, fireAt: tick.fireAt, leaseOwner: tick.owner, leaseExpiresAt: tick.leaseExpiresAt, createdAt: tick.now })
      .onConflictDoNothing()
      .returning({ id: t.scheduleTicks.id }),
  )
}

/** Unfinished ticks whose lease has expired (their instance stopped or died): `schedule_ticks_open_idx`. */
export function* abandonedTickIds(now: number, limit: number): Op<number[]> {
  const found = yield* rows(({ db, t }) =>
    db
      .select({ id: t.scheduleTicks.id })
      .from(t.scheduleTicks)
      .where(and(isNull(t.scheduleTicks.finishedAt), lt(t.scheduleTicks.leaseExpiresAt, now)))
      .orderBy(asc(t.scheduleTicks.leaseExpiresAt))
      .limit(constantLimit(limit)),
  )
  return found.map((r) => r.id)
}

/** The soonest lease expiry of an unfinished tick (null: none open). */
export function* nextTickLeaseExpiry(): Op<number | null> {
  const next = yield* row(({ db, t }) =>
    db
      .select({ at: t.scheduleTicks.leaseExpiresAt })
      .from(t.scheduleTicks)
      .where(isNull(t.scheduleTicks.finishedAt))
      .orderBy(asc(t.scheduleTicks.leaseExpiresAt))
      .limit(constantLimit(1)),
  )
  return next?.at ?? null
}

/**
 * Takes or renews the lease of an unfinished tick for `owner`: free, already `owner`'s, or expired. The row as it now
 * is (its cursor and counts as last committed), or undefined when another holds it or it is finished. On PostgreSQL
 * the UPDATE locks the row to the end of the transaction: a batch of the tick runs alone.
 */
export function leaseTick(id: number, owner: string, now: number, leaseMs: number) {
  return row(({ db, t }) =>
    db
      .update(t.scheduleTicks)
      .set({ leaseOwner: owner, leaseExpiresAt: now + leaseMs })
      .where(
        and(
          eq(t.scheduleTicks.id, id),
          isNull(t.scheduleTicks.finishedAt),
          or(eq(t.scheduleTicks.leaseOwner, owner), isNull(t.scheduleTicks.leaseExpiresAt), lt(t.scheduleTicks.leaseExpiresAt, now)),
        ),
      )
      .returning(),
  )
}

/** What a batch of a tick did: its cursor after it, the counts added, and (when it was the last) when it finished and why it did less. */
export interface TickProgress {
  cursor: string | null
  started: number
  skipped: number
  failed: number
  warning?: string | null
  finishedAt?: number | null
}

/** Records a batch's progress on a tick still leased to `owner` (the caller leased it in this transaction). */
export function recordTickProgress(id: number, owner: string, progress: TickProgress): Op<void> {
  return exec(({ db, t }) =>
    db
      .update(t.scheduleTicks)
      .set({
        cursor: progress.cursor,
        started: sql`${t.scheduleTicks.started} + ${progress.started}`,
        skipped: sql`${t.scheduleTicks.skipped} + ${progress.skipped}`,
        failed: sql`${t.scheduleTicks.failed} + ${progress.failed}`,
        ...(progress.warning === undefined ? {} : { warning: progress.warning }),
        ...(progress.finishedAt === undefined ? {} : { finishedAt: progress.finishedAt, leaseOwner: null, leaseExpiresAt: null }),
      })
      .where(and(eq(t.scheduleTicks.id, id), eq(t.scheduleTicks.leaseOwner, owner))),
  )
}

/** A workflow's latest tick (by fire time), if it ever ticked. */
export function lastTickOf(workflowId: number) {
  return row(({ db, t }) =>
    db
      .select()
      .from(t.scheduleTicks)
      .where(eq(t.scheduleTicks.workflowId, workflowId))
      .orderBy(desc(t.scheduleTicks.fireAt))
      .limit(constantLimit(1)),
  )
}

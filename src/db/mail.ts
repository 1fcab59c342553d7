/**
 * E-mail's storage (docs/mail.md): each person's task-mail preference, and the outbox — one message per recipient,
 * written in the transaction of what caused it (an invitation made, a task opened…), claimed under a lease by the
 * sender of any instance, each attempt's outcome recorded guarded by that lease, as callback deliveries are
 * (./callbacks.ts). Written once for both stores.
 *
 * The claim is one conditional UPDATE: on PostgreSQL two instances may pick the same due rows, but the second
 * UPDATE waits for the first's row locks and then re-checks its WHERE on the rows as committed — leased now, so
 * skipped: one message is never handed to two senders at once while its lease runs.
 */
import { and, asc, eq, inArray, isNotNull, isNull, lte, or, type SQL, sql } from 'drizzle-orm'
import type { Dialect } from './dialect.ts'
import type { Op } from './op.ts'
import { placeholders, statement } from './query.ts'
import type { mailOutbox } from './schema.ts'

export type MailRow = typeof mailOutbox.$inferSelect

const ph = (name: string) => sql.placeholder(name)

// ── Preferences ──────────────────────────────────────────────────────────────

const TASK_MAIL_RECIPIENTS = statement('mail.task-mail-recipients', (d) => {
  const { db, t } = d
  return db
    .select({ id: t.users.id, email: t.users.email })
    .from(t.users)
    .leftJoin(t.userPreferences, eq(t.userPreferences.userId, t.users.id))
    .where(and(d.inJsonArray(t.users.id, 'ids', 'integer'), isNull(t.users.disabledAt), or(isNull(t.userPreferences.taskMail), eq(t.userPreferences.taskMail, true))))
    .orderBy(asc(t.users.id))
})

/** Of these users, the active ones who did not turn task mail off, with their addresses, by id. */
export function findTaskMailRecipients(userIds: readonly number[]): Op<{ id: number; email: string }[]> {
  return TASK_MAIL_RECIPIENTS.rows({ ids: JSON.stringify(userIds) })
}

const TASK_MAIL = statement('mail.task-mail', ({ db, t }) =>
  db.select({ taskMail: t.userPreferences.taskMail }).from(t.userPreferences).where(eq(t.userPreferences.userId, ph('userId'))),
)

/** The user's task-mail choice: true unless they turned it off. */
export function* findTaskMailPreference(userId: number): Op<boolean> {
  return (yield* TASK_MAIL.row({ userId }))?.taskMail ?? true
}

const SET_TASK_MAIL = statement('mail.set-task-mail', ({ db, t }) =>
  db
    .insert(t.userPreferences)
    .values(placeholders('userId', 'taskMail', 'updatedAt'))
    .onConflictDoUpdate({ target: t.userPreferences.userId, set: { taskMail: sql`excluded.task_mail`, updatedAt: sql`excluded.updated_at` } }),
)

export function setTaskMailPreference(userId: number, taskMail: boolean, now: number): Op<void> {
  return SET_TASK_MAIL.exec({ userId, taskMail, updatedAt: now })
}

// ── The outbox ───────────────────────────────────────────────────────────────

/** A message as queued: its id, its `Message-ID` and what it says, due at `createdAt`. */
export type NewMail = Pick<MailRow, 'id' | 'messageId' | 'kind' | 'recipient' | 'subject' | 'textBody' | 'htmlBody' | 'sealed' | 'createdAt'>

const INSERT_MAIL = statement('mail.insert', ({ db, t }) =>
  db.insert(t.mailOutbox).values({
    ...placeholders('id', 'messageId', 'kind', 'recipient', 'subject', 'textBody', 'htmlBody', 'sealed', 'createdAt'),
    status: 'pending',
    attempts: 0,
    nextAttemptAt: ph('createdAt'),
  }),
)

/** One pending message, due at once; it commits (and is sent) only with the caller's transaction. */
export function insertMail(mail: NewMail): Op<void> {
  return INSERT_MAIL.exec({ ...mail })
}

/** The message is still to be sent: `mail_outbox_due_idx`'s predicate, written as its literal. */
const isPending = ({ t }: Dialect) => sql`${t.mailOutbox.status} = 'pending'`
/** No sender holds the message: never leased, or its lease ran out (its holder died mid-attempt). */
const isFree = ({ t }: Dialect) => sql`(${t.mailOutbox.leaseExpiresAt} IS NULL OR ${t.mailOutbox.leaseExpiresAt} < ${ph('now')})`

const CLAIM = statement('mail.claim', (d) => {
  const { db, t } = d
  const x = t.mailOutbox
  const due = db
    .select({ id: x.id })
    .from(x)
    .where(and(isPending(d), lte(x.nextAttemptAt, ph('now')), isFree(d)))
    .orderBy(asc(x.nextAttemptAt))
    .limit(ph('limit'))
  return db
    .update(x)
    .set({ leaseOwner: sql`${ph('owner')}`, leaseExpiresAt: sql`${ph('until')}` })
    .where(and(inArray(x.id, due), isPending(d), isFree(d)))
    .returning()
})

/** Leases up to `limit` due messages to `owner` until `now + leaseMs`, oldest due first. */
export function* claimMail(owner: string, now: number, leaseMs: number, limit: number): Op<MailRow[]> {
  const claimed = yield* CLAIM.rows({ owner, now, until: now + leaseMs, limit })
  return claimed.sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || a.id.localeCompare(b.id))
}

/** One attempt's outcome: the message was `sent`, `failed` for good, or is `pending` again until `nextAttemptAt`. */
export interface MailAttempt {
  id: string
  owner: string
  /** Attempts made so far, this one included. */
  attempts: number
  error: string | null
  outcome: { status: 'sent' | 'failed'; at: number } | { status: 'pending'; nextAttemptAt: number }
}

const SETTLE = statement('mail.settle', (d) =>
  d.db
    .update(d.t.mailOutbox)
    .set({
      status: sql`${ph('status')}`,
      attempts: sql`${ph('attempts')}`,
      lastError: sql`${ph('error')}`,
      finishedAt: sql`${ph('finishedAt')}`,
      nextAttemptAt: sql`coalesce(${ph('nextAttemptAt')}, ${d.t.mailOutbox.nextAttemptAt})`,
      leaseOwner: null,
      leaseExpiresAt: null,
    })
    .where(and(eq(d.t.mailOutbox.id, ph('id')), eq(d.t.mailOutbox.leaseOwner, ph('owner')), isPending(d)))
    .returning({ id: d.t.mailOutbox.id }),
)

/** The attempt's outcome, guarded by the lease: false (nothing written) when `owner` no longer holds the message. */
export function* recordMailAttempt(attempt: MailAttempt): Op<boolean> {
  const { outcome } = attempt
  const settled = yield* SETTLE.rows({
    id: attempt.id,
    owner: attempt.owner,
    status: outcome.status,
    attempts: attempt.attempts,
    error: attempt.error,
    finishedAt: outcome.status === 'pending' ? null : outcome.at,
    nextAttemptAt: outcome.status === 'pending' ? outcome.nextAttemptAt : null,
  })
  return settled.length > 0
}

/** Leased pending messages (those `which` picks) handed back: due when they were, nobody's. */
const unlease = (name: string, which: (d: Dialect) => SQL) =>
  statement(name, (d) =>
    d.db
      .update(d.t.mailOutbox)
      .set({ leaseOwner: null, leaseExpiresAt: null })
      .where(and(isPending(d), isNotNull(d.t.mailOutbox.leaseOwner), which(d)))
      .returning({ id: d.t.mailOutbox.id }),
  )

const RELEASE_OWNED = unlease('mail.release', (d) => eq(d.t.mailOutbox.leaseOwner, ph('owner')))

/** Graceful stop: what `owner` holds (attempts it gave up on) is due again for any sender. */
export function* releaseMailLeases(owner: string): Op<number> {
  return (yield* RELEASE_OWNED.rows({ owner })).length
}

const RELEASE_ALL = unlease('mail.release-all', () => sql`1 = 1`)

/** Every lease handed back: only for a store no other process serves (./store.ts), where every holder is dead. */
export function* releaseEveryMailLease(): Op<number> {
  return (yield* RELEASE_ALL.rows()).length
}

const NEXT_DUE = statement('mail.next-due', (d) =>
  d.db
    .select({ at: sql<number | null>`min(${d.t.mailOutbox.nextAttemptAt})`.mapWith(Number) })
    .from(d.t.mailOutbox)
    .where(and(isPending(d), sql`${d.t.mailOutbox.nextAttemptAt} > ${ph('after')}`)),
)

/** When the next pending message comes due after `after` (ms), or null. */
export function* nextMailDueAt(after: number): Op<number | null> {
  return (yield* NEXT_DUE.row({ after }))?.at ?? null
}

const PRUNE = statement('mail.prune', ({ db, t }) =>
  db
    .delete(t.mailOutbox)
    .where(inArray(t.mailOutbox.id, db.select({ id: t.mailOutbox.id }).from(t.mailOutbox).where(lte(t.mailOutbox.finishedAt, ph('before'))).limit(ph('limit'))))
    .returning({ id: t.mailOutbox.id }),
)

/** Removes up to `limit` sent or failed messages finished at or before `before`; how many it removed. */
export function* pruneFinishedMail(before: number, limit: number): Op<number> {
  return (yield* PRUNE.rows({ before, limit })).length
}

const FAILED = statement('mail.failed', ({ db, t }) =>
  db
    .select({ messageId: t.mailOutbox.messageId, kind: t.mailOutbox.kind, recipient: t.mailOutbox.recipient, attempts: t.mailOutbox.attempts, lastError: t.mailOutbox.lastError, finishedAt: t.mailOutbox.finishedAt })
    .from(t.mailOutbox)
    .where(and(isNotNull(t.mailOutbox.finishedAt), sql`${t.mailOutbox.status} = 'failed'`))
    .orderBy(sql`${t.mailOutbox.finishedAt} DESC`)
    .limit(ph('limit')),
)

/** The messages given up on most recently (kept `MAIL_KEPT_MS`), newest first: what the instance admin page shows. */
export function listFailedMail(limit: number) {
  return FAILED.rows({ limit })
}

/**
 * E-mail's storage (docs/mail.md): each person's task-mail preference, and the outbox — one message per recipient,
 * written in the transaction of what caused it (an invitation made, a task opened…), claimed under a lease by the
 * sender of any instance, each attempt's outcome recorded guarded by that lease, by the statements callback
 * deliveries (./callbacks.ts) use too (./leased-queue.ts). Written once for both stores.
 */
import { and, asc, eq, isNotNull, isNull, or, sql } from 'drizzle-orm'
import { type LeaseSettlement, leasedQueue } from './leased-queue.ts'
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

/** The outbox's lease, claim and settle (./leased-queue.ts), as the callback deliveries'. */
const OUTBOX = leasedQueue<MailRow, 'sent'>({ name: 'mail', table: (t) => t.mailOutbox, claimAnswers: 'rows', recordsError: true })

/** Leases up to `limit` due messages to `owner` until `now + leaseMs`, oldest due first. */
export function* claimMail(owner: string, now: number, leaseMs: number, limit: number): Op<MailRow[]> {
  const claimed = yield* OUTBOX.claim(owner, now, leaseMs, limit)
  return claimed.sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || a.id.localeCompare(b.id))
}

/** One attempt's outcome: the message was `sent`, `failed` for good, or is `pending` again until `nextAttemptAt`. */
export type MailAttempt = LeaseSettlement<'sent'>

/** The attempt's outcome, guarded by the lease: false (nothing written) when `owner` no longer holds the message. */
export const recordMailAttempt = OUTBOX.settle

/** Graceful stop: what `owner` holds (attempts it gave up on) is due again for any sender. */
export const releaseMailLeases = OUTBOX.releaseOwned

/** Every lease handed back: only for a store no other process serves (./store.ts), where every holder is dead. */
export const releaseEveryMailLease = OUTBOX.releaseAll

/** What a starting mail sender takes back at once (./leased-queue.ts `recoverAtStart`). */
export const recoverMailAtStart = OUTBOX.recoverAtStart

/** When the next pending message comes due after `after` (ms), or null. */
export const nextMailDueAt = OUTBOX.nextDueAt

/** Removes up to `limit` sent or failed messages finished at or before `before`; how many it removed. */
export const pruneFinishedMail = OUTBOX.pruneFinished

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

/**
 * The mail sender (docs/mail.md), beside the executor in the serving process, a delivery loop (./delivery-loop.ts)
 * as the completion callbacks' worker is (./callback-delivery.ts): it claims due messages of the outbox
 * (src/db/mail.ts) under a lease, sends each through the operator's SMTP server with `nodemailer` — the `Message-ID` and `Date` made when it was
 * queued, the same on every attempt —, and records the outcome guarded by the lease: sent once the server accepted
 * it, else due again after the backoff, or failed once the attempts are spent or the server refused it for good (a
 * 5xx reply). It polls (a message waits at most `pollMs`, 1 s) and holds no SQL.
 *
 * At least once, with one dedupe key: a sender that dies after the server accepted a message and before recording it
 * leaves it leased; when the lease runs out (at once, for the next `serve` of a SQLite data directory) it is sent
 * again with the same `Message-ID`, which mail systems and clients use to recognise the copy.
 */
import nodemailer from 'nodemailer'
import type { MailConfig } from '../config.ts'
import { claimMail, type MailAttempt, type MailRow, nextMailDueAt, pruneFinishedMail, recordMailAttempt, recoverMailAtStart, releaseMailLeases } from '../db/mail.ts'
import type { Op } from '../db/op.ts'
import type { Store } from '../db/store.ts'
import { write } from '../db/write.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { describeSmtpServer, isPermanentSmtpFailure, MAIL_MAX_ATTEMPTS, mailLeaseMs, mailRetryDelayMs, smtpErrorText } from '../lib/mail.ts'
import type { Metrics } from '../lib/metrics.ts'
import { openMailBody } from '../modules/mail/service.ts'
import { DeliveryLoop } from './delivery-loop.ts'

/** Sent and failed messages are kept this long (for an operator to look at), then deleted. */
export const MAIL_KEPT_MS = 30 * 86_400_000
/** How often a sender deletes what is past `MAIL_KEPT_MS`, at most this many rows a time. */
const PRUNE_EVERY_MS = 3_600_000
const PRUNE_BATCH = 1000

export interface MailDeliveryOptions {
  store: Store
  clock: Clock
  logger: Logger
  metrics?: Metrics
  /** The SMTP server, from-address, retry and timeout settings (TRELLIS_SMTP_URL…). */
  mail: MailConfig
  /** Opens the sealed bodies (src/modules/mail/service.ts `mailSettingsOf`). */
  sealKey: Uint8Array
  /** Messages sent at once (default 4). */
  concurrency?: number
  /** Longest idle sleep between polls (default 1 s). */
  pollMs?: number
}

/** What one attempt came to: sent, or an error (`final`: not to be retried). */
type Sent = { ok: true; final: false; error: null } | { ok: false; final: boolean; error: string }
const SENT: Sent = { ok: true, final: false, error: null }

export class MailDelivery extends DeliveryLoop<MailRow, Sent, 'sent'> {
  private prunedAt = 0

  constructor(private readonly options: MailDeliveryOptions) {
    super({
      ...options,
      one: 'mail',
      many: 'mail',
      // A graceful stop hands back what it gave up on, a dead sender's leases run out: sent again, same Message-ID.
      recoveredNote: 'it is sent again with its Message-ID',
      concurrency: options.concurrency ?? 4,
      leaseMs: mailLeaseMs(options.mail.timeoutMs),
      done: 'sent',
      maxAttempts: MAIL_MAX_ATTEMPTS,
      retryDelayMs: (attempts) => mailRetryDelayMs(attempts, options.mail.retryMs),
      recoverAtStart: recoverMailAtStart,
      claim: claimMail,
      nextDueAt: nextMailDueAt,
      release: releaseMailLeases,
    })
  }

  /** The SMTP server as the start-up log line names it (no user, no password). */
  get server(): string {
    return describeSmtpServer(this.options.mail.smtpUrl)
  }

  protected record(message: MailRow, sent: Sent, outcome: MailAttempt['outcome'], attempts: number): Op<boolean> {
    return recordMailAttempt({ id: message.id, owner: this.owner, attempts, error: sent.error, outcome })
  }

  protected override recorded(message: MailRow, sent: Sent, outcome: MailAttempt['outcome'], attempts: number): void {
    this.options.metrics?.mailMessages.inc({ outcome: outcome.status === 'pending' ? 'retry' : outcome.status })
    const { logger } = this.options
    if (outcome.status === 'failed') logger.warn('mail failed for good', { messageId: message.messageId, kind: message.kind, attempts, error: sent.error })
    else if (outcome.status === 'pending') logger.info('mail not sent yet; trying again', { messageId: message.messageId, attempts, error: sent.error })
  }

  protected describeFailure(message: MailRow, error: Error): Record<string, unknown> {
    return { messageId: message.messageId, error: error.message }
  }

  /** Deletes what was sent or failed past `MAIL_KEPT_MS`, once an hour. */
  protected override async beforeClaim(now: number): Promise<void> {
    if (now - this.prunedAt < PRUNE_EVERY_MS) return
    this.prunedAt = now
    await write(this.options.store, () => pruneFinishedMail(now - MAIL_KEPT_MS, PRUNE_BATCH))
  }

  /** Hands the message to the SMTP server; null when the sender stopped meanwhile. */
  protected async send(message: MailRow, signal: AbortSignal): Promise<Sent | null> {
    const { mail, sealKey } = this.options
    const transport = nodemailer.createTransport({
      url: mail.smtpUrl,
      connectionTimeout: mail.timeoutMs,
      greetingTimeout: mail.timeoutMs,
      socketTimeout: mail.timeoutMs,
    })
    let giveUp = () => {}
    const stopped = new Promise<null>((resolve) => {
      giveUp = () => resolve(null)
      signal.addEventListener('abort', giveUp, { once: true })
    })
    try {
      const sending = transport.sendMail({
        from: mail.from,
        to: message.recipient,
        subject: message.subject,
        text: openMailBody(sealKey, message.textBody, message.sealed),
        ...(message.htmlBody === null ? {} : { html: openMailBody(sealKey, message.htmlBody, message.sealed) }),
        messageId: message.messageId,
        date: new Date(message.createdAt),
        headers: { 'auto-submitted': 'auto-generated', 'x-trellis-kind': message.kind },
      })
      return await Promise.race([sending.then(() => SENT), stopped])
    } catch (error) {
      if (signal.aborted) return null
      return { ok: false, final: isPermanentSmtpFailure(error), error: smtpErrorText(error, mail.smtpUrl) }
    } finally {
      signal.removeEventListener('abort', giveUp)
      transport.close()
    }
  }
}

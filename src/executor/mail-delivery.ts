/**
 * The mail sender (docs/mail.md), beside the executor in the serving process, built like the completion callbacks'
 * delivery worker (./callback-delivery.ts): it claims due messages of the outbox (src/db/mail.ts) under a lease,
 * sends each through the operator's SMTP server with `nodemailer` — the `Message-ID` and `Date` made when it was
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
import { claimMail, type MailRow, nextMailDueAt, pruneFinishedMail, recordMailAttempt, releaseMailLeases } from '../db/mail.ts'
import type { Store } from '../db/open.ts'
import { read } from '../db/read.ts'
import { recoverMailAtStart } from '../db/store.ts'
import { write } from '../db/write.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { describeSmtpServer, isPermanentSmtpFailure, MAIL_MAX_ATTEMPTS, mailLeaseMs, mailRetryDelayMs, smtpErrorText } from '../lib/mail.ts'
import type { Metrics } from '../lib/metrics.ts'
import { WakeSignal } from '../lib/wake-signal.ts'
import { openMailBody } from '../modules/mail/service.ts'
import { backOffAfterFailedClaim, finishOrAbort, idleWaitMs, writeOutlastingStorage } from './loop.ts'

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
type Sent = { ok: true } | { ok: false; error: string; final: boolean }

export class MailDelivery {
  readonly owner = `mail-${crypto.randomUUID()}`
  private running = false
  private loop: Promise<void> | null = null
  private readonly inFlight = new Set<Promise<void>>()
  private readonly wakeUps = new WakeSignal()
  private readonly stopController = new AbortController()
  private prunedAt = 0

  constructor(private readonly options: MailDeliveryOptions) {}

  /** The SMTP server as the start-up log line names it (no user, no password). */
  get server(): string {
    return describeSmtpServer(this.options.mail.smtpUrl)
  }

  start(): void {
    if (this.running) return
    this.running = true
    this.loop = this.run()
  }

  /** Stops claiming, lets attempts in flight finish (bounded, then gives up on them: not recorded), hands back what it holds. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.running) return
    this.running = false
    this.wakeUps.notify()
    await finishOrAbort(this.loop ?? Promise.resolve(), timeoutMs, this.stopController)
    try {
      await write(this.options.store, () => releaseMailLeases(this.owner))
    } catch (error) {
      // Not handed back: their leases run out and they are sent again, with the same Message-ID.
      this.options.logger.warn('could not hand back held mail', { error: (error as Error).message })
    }
  }

  /** Messages were queued: claim now instead of at the next poll. */
  notify(): void {
    this.wakeUps.notify()
  }

  private get concurrency(): number {
    return this.options.concurrency ?? 4
  }

  private async run(): Promise<void> {
    try {
      const recovered = await write(this.options.store, () => recoverMailAtStart(this.options.store))
      if (recovered > 0) this.options.logger.warn('took back mail no live process holds: it is sent again with its Message-ID', { count: recovered })
    } catch (error) {
      // Their leases run out and the claim takes them then.
      this.options.logger.warn('taking back mail at start failed', { error: (error as Error).message })
    }
    let failedClaims = 0
    while (this.running) {
      const free = this.concurrency - this.inFlight.size
      if (free <= 0) {
        await this.wakeUps.wait(null)
        continue
      }
      this.wakeUps.clear()
      try {
        const now = this.options.clock.now()
        await this.pruneNow(now)
        const claimed = await write(this.options.store, () => claimMail(this.owner, now, mailLeaseMs(this.options.mail.timeoutMs), free))
        failedClaims = 0
        for (const message of claimed) this.launch(message)
        if (claimed.length < free) {
          const next = await read(this.options.store, nextMailDueAt(now))
          await this.wakeUps.wait(idleWaitMs(next, this.options.clock.now(), this.options.pollMs ?? 1000))
        }
      } catch (error) {
        // The messages stay in the outbox.
        await backOffAfterFailedClaim(this.options.logger, 'claiming mail', error, ++failedClaims)
      }
    }
    await Promise.all(this.inFlight)
  }

  /** Deletes what was sent or failed past `MAIL_KEPT_MS`, once an hour. */
  private async pruneNow(now: number): Promise<void> {
    if (now - this.prunedAt < PRUNE_EVERY_MS) return
    this.prunedAt = now
    await write(this.options.store, () => pruneFinishedMail(now - MAIL_KEPT_MS, PRUNE_BATCH))
  }

  private launch(message: MailRow): void {
    const attempt: Promise<void> = this.deliver(message)
      .catch((error) => this.options.logger.error('mail delivery failed unexpectedly', { messageId: message.messageId, error: (error as Error).message }))
      .finally(() => {
        this.inFlight.delete(attempt)
        this.wakeUps.notify()
      })
    this.inFlight.add(attempt)
  }

  /** One attempt, then its record: sent, due again after the backoff, or failed for good. */
  private async deliver(message: MailRow): Promise<void> {
    const sent = await this.send(message)
    // Stopping: not recorded; `stop` hands the message back and it is sent again (same Message-ID).
    if (sent === null) return
    const now = this.options.clock.now()
    const attempts = message.attempts + 1
    const outcome = sent.ok
      ? { status: 'sent' as const, at: now }
      : sent.final || attempts >= MAIL_MAX_ATTEMPTS
        ? { status: 'failed' as const, at: now }
        : { status: 'pending' as const, nextAttemptAt: now + mailRetryDelayMs(attempts, this.options.mail.retryMs) }
    const recorded = await writeOutlastingStorage(
      this.options.store,
      () => recordMailAttempt({ id: message.id, owner: this.owner, attempts, error: sent.ok ? null : sent.error, outcome }),
      () => this.running,
      (error) => this.options.logger.warn('recording a mail attempt waits for the database', { error: error.message }),
    )
    if (!recorded) return
    this.options.metrics?.mailMessages.inc({ outcome: outcome.status === 'pending' ? 'retry' : outcome.status })
    if (outcome.status === 'failed') {
      this.options.logger.warn('mail failed for good', { messageId: message.messageId, kind: message.kind, attempts, error: sent.ok ? null : sent.error })
    } else if (outcome.status === 'pending') {
      this.options.logger.info('mail not sent yet; trying again', { messageId: message.messageId, attempts, error: sent.ok ? null : sent.error })
    }
  }

  /** Hands the message to the SMTP server; null when the sender stopped meanwhile. */
  private async send(message: MailRow): Promise<Sent | null> {
    const { mail, sealKey } = this.options
    const transport = nodemailer.createTransport({
      url: mail.smtpUrl,
      connectionTimeout: mail.timeoutMs,
      greetingTimeout: mail.timeoutMs,
      socketTimeout: mail.timeoutMs,
    })
    const { signal } = this.stopController
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
      return await Promise.race([sending.then((): Sent => ({ ok: true })), stopped])
    } catch (error) {
      if (signal.aborted) return null
      return { ok: false, error: smtpErrorText(error, mail.smtpUrl), final: isPermanentSmtpFailure(error) }
    } finally {
      signal.removeEventListener('abort', giveUp)
      transport.close()
    }
  }
}

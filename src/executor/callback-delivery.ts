/**
 * The completion callbacks' delivery worker (docs/workflows.md "Completion callbacks"), beside the executor in the
 * serving process: it claims due deliveries of the outbox (src/db/callbacks.ts) under a lease, POSTs each one's body
 * signed per Standard Webhooks (the `standardwebhooks` package) through the outbound client (the `http` step's rules),
 * and records the attempt guarded by the lease: succeeded on a 2xx within the timeout, else due again after the
 * backoff, or failed once the attempts are spent (or the destination is refused). Woken when deliveries are queued
 * (on any instance, on PostgreSQL) and by a poll; holds no SQL. A delivery whose worker died is taken again when its
 * lease runs out, or at once by the next `serve` of a SQLite data directory: at least once, same `webhook-id`.
 */
import { Webhook } from 'standardwebhooks'
import { type ClaimedDelivery, claimCallbackDeliveries, nextCallbackDueAt, recordCallbackAttempt, recoverCallbacksAtStart, releaseCallbackLeases } from '../db/callbacks.ts'
import { read } from '../db/read.ts'
import type { QueueWakeups, Store } from '../db/store.ts'
import { write } from '../db/write.ts'
import { CALLBACK_LEASE_MS, CALLBACK_MAX_ATTEMPTS, CALLBACK_TIMEOUT_MS, callbackRetryDelayMs, callbackSecret } from '../lib/callbacks.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { DestinationRefusedError, type OutboundClient } from '../lib/outbound/client.ts'
import { redactUrlsIn } from '../lib/outbound/redact.ts'
import { WakeSignal } from '../lib/wake-signal.ts'
import { backOffAfterFailedClaim, finishOrAbort, idleWaitMs, writeOutlastingStorage } from './loop.ts'

export interface CallbackDeliveryOptions {
  store: Store
  /** The time signed into `webhook-timestamp`: receivers check it against their own clock (5 minutes' tolerance). */
  clock: Clock
  logger: Logger
  /** The instance secret, from which each endpoint's signing secret is derived. */
  secret: Buffer
  /** How callbacks go out: the `http` step's client (TRELLIS_HTTP_ALLOW). */
  outbound: OutboundClient
  /** The first wait between attempts (TRELLIS_CALLBACK_RETRY_MS). */
  retryBaseMs: number
  /** Deliveries sent at once (default 8). */
  concurrency?: number
  /** Longest idle sleep between polls (default 1 s): deliveries queued wake the worker at once. */
  pollMs?: number
  /** How long an answer may take (default CALLBACK_TIMEOUT_MS). */
  timeoutMs?: number
}

/** What one attempt came to: an answer's status, or an error (`final`: not to be retried). */
type Sent = { statusCode: number; error: null; final: false } | { statusCode: null; error: string; final: boolean }

export class CallbackDelivery {
  readonly owner = `callbacks-${crypto.randomUUID()}`
  private running = false
  private loop: Promise<void> | null = null
  private readonly inFlight = new Set<Promise<void>>()
  private readonly wakeUps = new WakeSignal()
  private listening: Promise<QueueWakeups | null> | null = null
  private readonly stopController = new AbortController()

  constructor(private readonly options: CallbackDeliveryOptions) {}

  private get concurrency(): number {
    return this.options.concurrency ?? 8
  }

  start(): void {
    if (this.running) return
    this.running = true
    this.listening = this.options.store.listenForCallbacks(() => this.notify()).catch((error) => {
      // Not listening: the poll still finds every delivery, at most `pollMs` late.
      this.options.logger.warn('listening for callbacks failed; polling only', { error: (error as Error).message })
      return null
    })
    this.loop = this.run()
  }

  /** Stops claiming, lets attempts in flight finish (bounded, then aborts them: not recorded), hands back what it holds. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.running) return
    this.running = false
    this.notify()
    await (await this.listening)?.stop().catch(() => {})
    await finishOrAbort(this.loop ?? Promise.resolve(), timeoutMs, this.stopController)
    try {
      await write(this.options.store, () => releaseCallbackLeases(this.owner))
    } catch (error) {
      // Not handed back: their leases run out and they are sent again.
      this.options.logger.warn('could not hand back held callbacks', { error: (error as Error).message })
    }
  }

  /** Deliveries were queued: claim now. */
  notify(): void {
    this.wakeUps.notify()
  }

  /** The claiming loop: fills the free slots with due deliveries, else waits for one to be queued or come due. */
  private async run(): Promise<void> {
    try {
      const recovered = await write(this.options.store, () => recoverCallbacksAtStart(this.options.store))
      if (recovered > 0) this.options.logger.warn('took back callbacks no live process holds', { count: recovered })
    } catch (error) {
      // Their leases run out and the claim takes them then.
      this.options.logger.warn('taking back callbacks at start failed', { error: (error as Error).message })
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
        const claimed = await write(this.options.store, () => claimCallbackDeliveries(this.owner, now, CALLBACK_LEASE_MS, free))
        failedClaims = 0
        for (const delivery of claimed) this.launch(delivery)
        if (claimed.length < free) {
          const next = await read(this.options.store, nextCallbackDueAt(now))
          await this.wakeUps.wait(idleWaitMs(next, this.options.clock.now(), this.options.pollMs ?? 1000))
        }
      } catch (error) {
        // The deliveries stay in the outbox.
        await backOffAfterFailedClaim(this.options.logger, 'claiming callbacks', error, ++failedClaims)
      }
    }
    await Promise.all(this.inFlight)
  }

  private launch(delivery: ClaimedDelivery): void {
    const attempt: Promise<void> = this.deliver(delivery)
      .catch((error) => this.options.logger.error('callback delivery failed unexpectedly', { deliveryId: delivery.id, error: redactUrlsIn((error as Error).stack ?? String(error)) }))
      .finally(() => {
        this.inFlight.delete(attempt)
        this.notify()
      })
    this.inFlight.add(attempt)
  }

  /** One attempt, then its record: succeeded, due again after the backoff, or failed for good. */
  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    const startedAt = this.options.clock.now()
    const started = performance.now()
    const sent = await this.send(delivery)
    // Stopping: not recorded; `stop` hands the delivery back and it is sent again (at least once).
    if (sent === null) return
    const durationMs = Math.round(performance.now() - started)
    const now = this.options.clock.now()
    const attempts = delivery.attempts + 1
    const succeeded = sent.statusCode !== null && sent.statusCode >= 200 && sent.statusCode < 300
    const outcome = succeeded
      ? { status: 'succeeded' as const, at: now }
      : sent.final || attempts >= CALLBACK_MAX_ATTEMPTS
        ? { status: 'failed' as const, at: now }
        : { status: 'pending' as const, nextAttemptAt: now + callbackRetryDelayMs(attempts, this.options.retryBaseMs) }
    const recorded = await writeOutlastingStorage(
      this.options.store,
      () => recordCallbackAttempt({ deliveryId: delivery.id, owner: this.owner, attempt: delivery.recorded + 1, attempts, startedAt, durationMs, statusCode: sent.statusCode, error: sent.error, outcome }),
      () => this.running,
      (error) => this.options.logger.warn('recording a callback attempt waits for the database', { error: error.message }),
    )
    if (recorded && outcome.status === 'failed') {
      this.options.logger.warn('callback delivery failed', { deliveryId: delivery.id, attempts, error: sent.error ?? `answered ${sent.statusCode}` })
    }
  }

  /** POSTs the delivery's body, signed now; null when the worker stopped meanwhile. */
  private async send(delivery: ClaimedDelivery): Promise<Sent | null> {
    const timeoutMs = this.options.timeoutMs ?? CALLBACK_TIMEOUT_MS
    const timestamp = new Date(this.options.clock.now())
    const signature = new Webhook(callbackSecret(this.options.secret, delivery.endpointId, delivery.secretSalt)).sign(delivery.id, timestamp, delivery.payload)
    try {
      const answer = await this.options.outbound.send(new URL(delivery.url), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Trellis-Callbacks/1',
          'webhook-id': delivery.id,
          'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body: delivery.payload,
        signal: AbortSignal.any([this.stopController.signal, AbortSignal.timeout(timeoutMs)]),
        // The answer's status is all that counts: the body is not read.
        maxBodyChars: 0,
      })
      return { statusCode: answer.status, error: null, final: false }
    } catch (error) {
      if (this.stopController.signal.aborted) return null
      if (error instanceof DestinationRefusedError) return { statusCode: null, error: error.message, final: true }
      const timedOut = (error as Error).name === 'TimeoutError'
      return { statusCode: null, error: timedOut ? `no answer within ${timeoutMs} ms` : redactUrlsIn((error as Error).message), final: false }
    }
  }
}

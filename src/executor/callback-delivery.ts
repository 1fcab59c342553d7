/**
 * The completion callbacks' delivery worker (docs/workflows.md "Completion callbacks"), beside the executor in the
 * serving process, a delivery loop (./delivery-loop.ts) as the mail sender is (./mail-delivery.ts): it claims due
 * deliveries of the outbox (src/db/callbacks.ts) under a lease, POSTs each one's body signed per Standard Webhooks
 * (the `standardwebhooks` package) through the outbound client (the `http` step's rules), and records the attempt guarded by the lease: succeeded on a 2xx within the timeout, else due again after the
 * backoff, or failed once the attempts are spent (or the destination is refused). Woken when deliveries are queued
 * (on any instance, on PostgreSQL) and by a poll; holds no SQL. A delivery whose worker died is taken again when its
 * lease runs out, or at once by the next `serve` of a SQLite data directory: at least once, same `webhook-id`.
 */
import { Webhook } from 'standardwebhooks'
import { type CallbackAttempt, type ClaimedDelivery, claimCallbackDeliveries, nextCallbackDueAt, recordCallbackAttempt, recoverCallbacksAtStart, releaseCallbackLeases } from '../db/callbacks.ts'
import type { Op } from '../db/op.ts'
import type { QueueWakeups, Store } from '../db/store.ts'
import { CALLBACK_LEASE_MS, CALLBACK_MAX_ATTEMPTS, CALLBACK_TIMEOUT_MS, callbackRetryDelayMs, callbackSecret } from '../lib/callbacks.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { DestinationRefusedError, type OutboundClient } from '../lib/outbound/client.ts'
import { redactUrlsIn } from '../lib/outbound/redact.ts'
import { activeTracer, traceHeaders } from '../lib/tracing.ts'
import { DeliveryLoop } from './delivery-loop.ts'

export interface CallbackDeliveryOptions {
  store: Store
  /** The time signed into `webhook-timestamp`: receivers check it against their own clock (5 minutes' tolerance). */
  clock: Clock
  logger: Logger
  /** The instance secret, from which each endpoint's signing secret is derived. */
  secret: Buffer
  /** How callbacks go out: the `http` step's client (the outbound allow-list in effect, asked at each request). */
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

/** What one attempt came to: an answer's status (`ok`: a 2xx), or an error (`final`: not to be retried). */
type Sent = { ok: boolean; statusCode: number; error: null; final: false } | { ok: false; statusCode: null; error: string; final: boolean }

export class CallbackDelivery extends DeliveryLoop<ClaimedDelivery, Sent, 'succeeded'> {
  constructor(private readonly options: CallbackDeliveryOptions) {
    super({
      ...options,
      one: 'callback',
      many: 'callbacks',
      concurrency: options.concurrency ?? 8,
      leaseMs: CALLBACK_LEASE_MS,
      done: 'succeeded',
      maxAttempts: CALLBACK_MAX_ATTEMPTS,
      retryDelayMs: (attempts) => callbackRetryDelayMs(attempts, options.retryBaseMs),
      recoverAtStart: recoverCallbacksAtStart,
      claim: claimCallbackDeliveries,
      nextDueAt: nextCallbackDueAt,
      release: releaseCallbackLeases,
    })
  }

  protected override listen(wake: () => void): Promise<QueueWakeups | null> {
    return this.options.store.listenForCallbacks(wake)
  }

  protected record(delivery: ClaimedDelivery, sent: Sent, outcome: CallbackAttempt['outcome'], attempts: number, startedAt: number, durationMs: number): Op<boolean> {
    const { statusCode, error } = sent
    return recordCallbackAttempt({ deliveryId: delivery.id, owner: this.owner, attempt: delivery.recorded + 1, attempts, startedAt, durationMs, statusCode, error, outcome })
  }

  protected override recorded(delivery: ClaimedDelivery, sent: Sent, outcome: CallbackAttempt['outcome'], attempts: number): void {
    if (outcome.status === 'failed') this.options.logger.warn('callback delivery failed', { deliveryId: delivery.id, attempts, error: sent.error ?? `answered ${sent.statusCode}` })
  }

  protected describeFailure(delivery: ClaimedDelivery, error: Error): Record<string, unknown> {
    return { deliveryId: delivery.id, error: redactUrlsIn(error.stack ?? String(error)) }
  }

  /** POSTs the delivery's body, signed now; null when the worker stopped meanwhile. */
  protected async send(delivery: ClaimedDelivery, stop: AbortSignal): Promise<Sent | null> {
    const timeoutMs = this.options.timeoutMs ?? CALLBACK_TIMEOUT_MS
    const timestamp = new Date(this.options.clock.now())
    const signature = new Webhook(callbackSecret(this.options.secret, delivery.endpointId, delivery.secretSalt)).sign(delivery.id, timestamp, delivery.payload)
    // Its span is a child of the run's trace; the URL is not recorded (a callback URL may carry a credential).
    const tracer = activeTracer()
    const span = tracer?.span('callback delivery', delivery.runId === null ? null : tracer.runTraceparent(delivery.runId), {
      'http.request.method': 'POST', 'trellis.callback.delivery_id': delivery.id, ...(delivery.runId === null ? {} : { 'trellis.run.id': delivery.runId }),
    })
    const sent = await this.post(delivery, timestamp, signature, timeoutMs, stop, span?.traceparent ?? null)
    span?.end(sent === null || sent.statusCode === null ? { error: sent?.error ?? 'stopped' } : { attributes: { 'http.response.status_code': sent.statusCode }, ...(sent.ok ? {} : { error: `answered ${sent.statusCode}` }) })
    return sent
  }

  private async post(delivery: ClaimedDelivery, timestamp: Date, signature: string, timeoutMs: number, stop: AbortSignal, traceparent: string | null): Promise<Sent | null> {
    try {
      const answer = await this.options.outbound.send(new URL(delivery.url), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Trellis-Callbacks/1',
          'webhook-id': delivery.id,
          'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
          'webhook-signature': signature,
          ...traceHeaders(traceparent),
        },
        body: delivery.payload,
        signal: AbortSignal.any([stop, AbortSignal.timeout(timeoutMs)]),
        // The answer's status is all that counts: the body is not read.
        maxBodyChars: 0,
      })
      return { ok: answer.status >= 200 && answer.status < 300, statusCode: answer.status, error: null, final: false }
    } catch (error) {
      if (stop.aborted) return null
      if (error instanceof DestinationRefusedError) return { ok: false, statusCode: null, error: error.message, final: true }
      const timedOut = (error as Error).name === 'TimeoutError'
      return { ok: false, statusCode: null, error: timedOut ? `no answer within ${timeoutMs} ms` : redactUrlsIn((error as Error).message), final: false }
    }
  }
}

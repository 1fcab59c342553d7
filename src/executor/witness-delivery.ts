/**
 * The audit witnesses' delivery worker (docs/audit.md "Witnesses"), a delivery loop (./delivery-loop.ts) as the
 * callbacks' is: it claims due deliveries of the witness outbox (src/db/audit.ts) under a lease and sends each
 * checkpoint to its witness — `dir`: appends its line to the witness file and flushes it, under the witness lock (a
 * line already at the file's end is not appended twice: a delivery whose record was lost to a crash, or taken over when
 * its lease ran out mid-append, is attempted again); `url`: POSTs
 * `{type: 'audit.checkpoint', timestamp, data: <the witness line>}` signed per Standard Webhooks with the secret derived
 * for it (`trellis audit key --witness-secret`), `webhook-id` the checkpoint's id, through the outbound client. Retried
 * with the callbacks' backoff; holds no SQL.
 */
import { join } from 'node:path'
import { Webhook } from 'standardwebhooks'
import { type ClaimedWitnessDelivery, claimWitnessDeliveries, nextWitnessDueAt, pruneWitnessDeliveries, recordWitnessAttempt, recoverWitnessAtStart, releaseWitnessLeases } from '../db/audit.ts'
import { write } from '../db/write.ts'
import type { LeaseOutcome } from '../db/leased-queue.ts'
import type { Op } from '../db/op.ts'
import type { Store } from '../db/store.ts'
import { type SignedCheckpoint, witnessLine } from '../lib/audit-checkpoint.ts'
import { auditWitnessSecret } from '../lib/audit-key.ts'
import { tryExclusiveFileLock } from '../db/file-lock.ts'
import { appendWitnessLine, WITNESS_LOCK_FILE } from '../lib/audit-witness-file.ts'
import { CALLBACK_LEASE_MS, CALLBACK_MAX_ATTEMPTS, CALLBACK_TIMEOUT_MS, callbackRetryDelayMs } from '../lib/callbacks.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { DestinationRefusedError, type OutboundClient } from '../lib/outbound/client.ts'
import { redactUrlsIn } from '../lib/outbound/redact.ts'
import { DeliveryLoop } from './delivery-loop.ts'

/** The event type of a witness callback. */
export const AUDIT_CHECKPOINT_EVENT = 'audit.checkpoint'

export interface WitnessDeliveryOptions {
  store: Store
  clock: Clock
  logger: Logger
  /** The instance secret: the callbacks' signing secret is derived from it. */
  secret: Buffer
  outbound: OutboundClient
  /** TRELLIS_AUDIT_WITNESS_DIR, or null. */
  dir: string | null
  /** TRELLIS_AUDIT_WITNESS_URL, or null. */
  url: string | null
  /** The first wait between attempts (TRELLIS_CALLBACK_RETRY_MS, as callbacks). */
  retryBaseMs: number
  /** How long a claim holds a delivery (TRELLIS_AUDIT_WITNESS_LEASE_SECONDS; default the callbacks' lease). */
  leaseMs?: number
  pollMs?: number
}

type Sent = { ok: boolean; final: boolean; error: string | null }

/** How long a settled delivery is kept (the checkpoint itself is kept for good), and how often a worker prunes, at most this many a time. */
const WITNESS_DELIVERY_KEPT_MS = 30 * 86_400_000
const PRUNE_EVERY_MS = 3_600_000
const PRUNE_BATCH = 1000

/** How long an append waits for the witness lock, looking every `WITNESS_LOCK_POLL_MS`; then the attempt failed. */
export const WITNESS_LOCK_WAIT_MS = 10_000
const WITNESS_LOCK_POLL_MS = 20

/**
 * Appends the checkpoint's line to the witness file (../lib/audit-witness-file.ts) unless it is there, holding the
 * witness lock for the search and the append: two deliveries of one checkpoint at once — another instance took it
 * over when the lease ran out mid-append — append it once, whatever the lease. `locked`: the lock stayed held for
 * `waitMs` (a live process appending for that long), nothing done. The lock is polled, not waited for in the driver.
 */
export async function appendWitnessLineOnce(dir: string, checkpoint: SignedCheckpoint, waitMs = WITNESS_LOCK_WAIT_MS): Promise<'appended' | 'already' | 'locked'> {
  const deadline = performance.now() + waitMs
  for (;;) {
    const lock = tryExclusiveFileLock(join(dir, WITNESS_LOCK_FILE))
    if (lock !== null) {
      try {
        return appendWitnessLine(dir, checkpoint)
      } finally {
        lock.release()
      }
    }
    if (performance.now() >= deadline) return 'locked'
    await Bun.sleep(WITNESS_LOCK_POLL_MS)
  }
}

export class WitnessDelivery extends DeliveryLoop<ClaimedWitnessDelivery, Sent, 'delivered'> {
  private prunedAt = Number.NEGATIVE_INFINITY

  constructor(private readonly options: WitnessDeliveryOptions) {
    super({
      ...options,
      one: 'audit witness delivery',
      many: 'audit-witness',
      // One at a time: the witness file's lines stay in the order checkpoints were made.
      concurrency: 1,
      leaseMs: options.leaseMs ?? CALLBACK_LEASE_MS,
      done: 'delivered',
      maxAttempts: CALLBACK_MAX_ATTEMPTS,
      retryDelayMs: (attempts) => callbackRetryDelayMs(attempts, options.retryBaseMs),
      recoverAtStart: recoverWitnessAtStart,
      claim: claimWitnessDeliveries,
      nextDueAt: nextWitnessDueAt,
      release: releaseWitnessLeases,
      // Checkpoints are rare: an idle instance's poll reads the due index and writes nothing.
      readBeforeClaim: true,
    })
  }

  /** Deletes the deliveries settled past `WITNESS_DELIVERY_KEPT_MS`, once an hour. */
  protected override async beforeClaim(now: number): Promise<void> {
    if (now - this.prunedAt < PRUNE_EVERY_MS) return
    this.prunedAt = now
    await write(this.options.store, () => pruneWitnessDeliveries(now - WITNESS_DELIVERY_KEPT_MS, PRUNE_BATCH))
  }

  protected record(delivery: ClaimedWitnessDelivery, sent: Sent, outcome: LeaseOutcome<'delivered'>, attempts: number): Op<boolean> {
    return recordWitnessAttempt({ id: delivery.id, owner: this.owner, attempts, error: sent.error, outcome })
  }

  protected override recorded(delivery: ClaimedWitnessDelivery, sent: Sent, outcome: LeaseOutcome<'delivered'>, attempts: number): void {
    if (outcome.status === 'failed') this.options.logger.error('audit checkpoint not witnessed', { checkpointId: delivery.checkpoint.id, witness: delivery.witness, attempts, error: sent.error })
    else if (!sent.ok && attempts === 1) this.options.logger.warn('audit witness delivery failed; retrying', { checkpointId: delivery.checkpoint.id, witness: delivery.witness, error: sent.error })
  }

  protected describeFailure(delivery: ClaimedWitnessDelivery, error: Error): Record<string, unknown> {
    return { checkpointId: delivery.checkpoint.id, witness: delivery.witness, error: redactUrlsIn(error.stack ?? String(error)) }
  }

  protected async send(delivery: ClaimedWitnessDelivery, stop: AbortSignal): Promise<Sent | null> {
    if (delivery.witness === 'dir') return this.append(delivery)
    return this.post(delivery, stop)
  }

  private async append(delivery: ClaimedWitnessDelivery): Promise<Sent> {
    const dir = this.options.dir
    // A delivery queued while a witness directory was set, by an instance or a start that had one: kept for when it is.
    if (dir === null) return { ok: false, final: false, error: 'no witness directory is configured on this instance (TRELLIS_AUDIT_WITNESS_DIR)' }
    try {
      const appended = await appendWitnessLineOnce(dir, delivery.checkpoint)
      if (appended === 'locked') return { ok: false, final: false, error: `the witness file stayed locked for ${WITNESS_LOCK_WAIT_MS} ms (${join(dir, WITNESS_LOCK_FILE)})` }
      return { ok: true, final: false, error: null }
    } catch (error) {
      return { ok: false, final: false, error: `cannot append to the witness file: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}` }
    }
  }

  private async post(delivery: ClaimedWitnessDelivery, stop: AbortSignal): Promise<Sent | null> {
    const url = this.options.url
    if (url === null) return { ok: false, final: false, error: 'no witness URL is configured on this instance (TRELLIS_AUDIT_WITNESS_URL)' }
    const { checkpoint } = delivery
    const body = `{"type":${JSON.stringify(AUDIT_CHECKPOINT_EVENT)},"timestamp":${JSON.stringify(checkpoint.time)},"data":${witnessLine(checkpoint)}}`
    const timestamp = new Date(this.options.clock.now())
    const signature = new Webhook(auditWitnessSecret(this.options.secret)).sign(checkpoint.id, timestamp, body)
    try {
      const answer = await this.options.outbound.send(new URL(url), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Trellis-Audit-Witness/1',
          'webhook-id': checkpoint.id,
          'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body,
        signal: AbortSignal.any([stop, AbortSignal.timeout(CALLBACK_TIMEOUT_MS)]),
        maxBodyChars: 0,
      })
      const ok = answer.status >= 200 && answer.status < 300
      return { ok, final: false, error: ok ? null : `answered ${answer.status}` }
    } catch (error) {
      if (stop.aborted) return null
      // A refused destination is refused until the allow-list changes: retried on the backoff, not dropped.
      if (error instanceof DestinationRefusedError) return { ok: false, final: false, error: error.message }
      const timedOut = (error as Error).name === 'TimeoutError'
      return { ok: false, final: false, error: timedOut ? `no answer within ${CALLBACK_TIMEOUT_MS} ms` : redactUrlsIn((error as Error).message) }
    }
  }
}

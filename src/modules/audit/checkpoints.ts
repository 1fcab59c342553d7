/**
 * Signed checkpoints (docs/audit.md "Checkpoints"): `serve` looks at every chain now and then and signs its head when
 * TRELLIS_AUDIT_CHECKPOINT_EVERY entries are unsigned or the oldest unsigned one is TRELLIS_AUDIT_CHECKPOINT_SECONDS
 * old; the checkpoint is queued for every configured witness in the same transaction. Every instance of a PostgreSQL
 * deployment runs the job: the table's unique key (scope, position, kind) keeps one checkpoint per head, and an
 * instance that comes second writes nothing.
 */
import type { Config } from '../../config.ts'
import { chainHead, firstEntryAfter, insertCheckpoint, lastSignedPosition, unsignedChains, type Witness } from '../../db/audit.ts'
import type { Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import type { Store } from '../../db/store.ts'
import { write } from '../../db/write.ts'
import { type SignedCheckpoint, signCheckpoint } from '../../lib/audit-checkpoint.ts'
import type { ChainName } from '../../lib/audit-chain.ts'
import type { AuditSigningKey } from '../../lib/audit-key.ts'
import type { Clock } from '../../lib/clock.ts'
import type { Logger } from '../../lib/logger.ts'

export interface CheckpointSettings {
  /** Sign once this many entries are unsigned. */
  every: number
  /** Sign once the oldest unsigned entry is this old. */
  seconds: number
  /** Where each checkpoint is sent. */
  witnesses: readonly Witness[]
}

/** The witnesses the configuration names (TRELLIS_AUDIT_WITNESS_DIR, TRELLIS_AUDIT_WITNESS_URL). */
export function auditWitnessesOf(config: Pick<Config, 'auditWitnessDir' | 'auditWitnessUrl'>): Witness[] {
  return [...(config.auditWitnessDir === null ? [] : ['dir' as const]), ...(config.auditWitnessUrl === null ? [] : ['url' as const])]
}

/** Whether a chain with unsigned entries is to be signed now: `every` of them, or its oldest one `seconds` old. */
function* checkpointDue({ chain, head, signed }: { chain: ChainName; head: number; signed: number }, now: number, settings: CheckpointSettings): Op<boolean> {
  if (head - signed >= settings.every) return true
  const oldest = yield* firstEntryAfter(chain, signed)
  return oldest !== null && now - oldest.createdAtMicros / 1000 >= settings.seconds * 1000
}

/** The scope's head signed and stored, with its witness deliveries; null when another instance signed it first. */
function* signHead(scope: ChainName, key: AuditSigningKey, now: number, witnesses: readonly Witness[]): Op<SignedCheckpoint | null> {
  const head = yield* chainHead(scope)
  if (head === null || head.position <= (yield* lastSignedPosition(scope))) return null
  const checkpoint = signCheckpoint(key, 'checkpoint', scope, head.position, head.hash, now)
  return (yield* insertCheckpoint(checkpoint, witnesses, now)) ? checkpoint : null
}

/** One look at every chain: the checkpoints it signed (none for a chain another instance signed first). */
export async function writeDueCheckpoints(store: Store, clock: Clock, key: AuditSigningKey, settings: CheckpointSettings): Promise<SignedCheckpoint[]> {
  const now = clock.now()
  const due = await read(store, (function* () {
    const scopes: ChainName[] = []
    for (const unsigned of yield* unsignedChains()) if (yield* checkpointDue(unsigned, now, settings)) scopes.push(unsigned.chain)
    return scopes
  })())
  const written: SignedCheckpoint[] = []
  for (const scope of due) {
    const checkpoint = await write(store, () => signHead(scope, key, clock.now(), settings.witnesses))
    if (checkpoint) written.push(checkpoint)
  }
  return written
}

/** The longest pause between two looks: a count reached is signed within this, whatever the age setting. */
const LONGEST_LOOK_MS = 5_000

/** How often the job looks: a quarter of the age setting (its checkpoints come at most that late), 0.25 to 5 s. */
export const checkpointLookMs = (seconds: number) => Math.min(LONGEST_LOOK_MS, Math.max(250, (seconds * 1000) / 4))

export interface CheckpointJob {
  stop(): Promise<void>
}

/** The job `serve` runs: a look every `checkpointLookMs`, one at a time; `written` is told of each checkpoint signed. */
export function scheduleCheckpoints(
  store: Store,
  clock: Clock,
  logger: Logger,
  key: AuditSigningKey,
  settings: CheckpointSettings,
  written: (checkpoints: SignedCheckpoint[]) => void,
): CheckpointJob {
  let stopped = false
  let timer: Timer | null = null
  let running: Promise<void> = Promise.resolve()
  let failing = false
  const look = async () => {
    try {
      const checkpoints = await writeDueCheckpoints(store, clock, key, settings)
      if (checkpoints.length > 0) written(checkpoints)
      failing = false
    } catch (error) {
      // The chains stay unsigned until the next look; said once per outage.
      if (!failing) logger.warn('signing audit checkpoints failed; retrying', { error: (error as Error).message })
      failing = true
    }
  }
  const next = () => {
    if (stopped) return
    timer = setTimeout(() => {
      running = look().finally(next)
    }, checkpointLookMs(settings.seconds))
  }
  next()
  return {
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      await running
    },
  }
}

/**
 * The audit trail's storage beyond the chain columns (docs/audit.md): each chain's head and its first unsigned entry
 * (what the checkpoint job decides on), the signed checkpoints and anchors (`audit_checkpoints`, one per scope, position
 * and kind: the unique key decides between instances), and the witness outbox (`audit_witness_deliveries`, claimed
 * under a lease by the statements the callbacks and mail use: ./leased-queue.ts). Written once for both stores.
 */
import { and, asc, desc, eq, gt, isNotNull, lte, sql } from 'drizzle-orm'
import { type ChainLog, type ChainName, chainKey } from '../lib/audit-chain.ts'
import { type SignedCheckpoint, signCheckpoint } from '../lib/audit-checkpoint.ts'
import type { AuditSigningKey } from '../lib/audit-key.ts'
import { inChainScope } from './chain-pages.ts'
import type { Tables } from './dialect.ts'
import { type LeaseSettlement, leasedQueue } from './leased-queue.ts'
import type { Op } from './op.ts'
import { constantLimit, statement } from './query.ts'

const ph = (name: string) => sql.placeholder(name)

/** Which witnesses a checkpoint goes to: the witness file, the witness callback. */
export type Witness = 'dir' | 'url'

/** A log's table, and the condition naming one scope of it (the `scope` placeholder) as the chain's unique index reads it. */
function scopeOf(t: Tables, log: ChainLog) {
  return { x: log === 'activity' ? t.activityLogs : t.adminLogs, inScope: inChainScope(t, log, ph('scope')) }
}

/** One statement per log (the two tables' columns differ in name only). */
const perLog = <S>(make: (log: ChainLog) => S): Record<ChainLog, S> => ({ activity: make('activity'), admin: make('admin') })

const HEAD = perLog((log) =>
  statement(`audit.head.${log}`, ({ db, t }) => {
    const { x, inScope } = scopeOf(t, log)
    return db
      .select({ position: x.chainPosition, hash: x.chainHash })
      .from(x)
      .where(and(inScope, isNotNull(x.chainPosition)))
      .orderBy(desc(x.chainPosition))
      .limit(constantLimit(1))
  }),
)

const FIRST_AFTER = perLog((log) =>
  statement(`audit.first-after.${log}`, ({ db, t }) => {
    const { x, inScope } = scopeOf(t, log)
    return db
      .select({ position: x.chainPosition, createdAt: x.createdAt })
      .from(x)
      .where(and(inScope, gt(x.chainPosition, ph('after'))))
      .orderBy(asc(x.chainPosition))
      .limit(constantLimit(1))
  }),
)

const LINK_AT = perLog((log) =>
  statement(`audit.link-at.${log}`, ({ db, t }) => {
    const { x, inScope } = scopeOf(t, log)
    return db.select({ hash: x.chainHash }).from(x).where(and(inScope, eq(x.chainPosition, ph('position')))).limit(constantLimit(1))
  }),
)

const scopeParam = (scope: ChainName) => ({ scope: scope.scopeId ?? 0 })

/** The link of the scope's entry at `position`, or null when there is none. */
export function* chainLinkAt(scope: ChainName, position: number): Op<{ position: number; hash: string } | null> {
  const found = yield* LINK_AT[scope.log].row({ ...scopeParam(scope), position })
  return found?.hash == null ? null : { position, hash: found.hash }
}

/** The chain's newest link, or null when the scope has no chained entry. */
export function* chainHead(scope: ChainName): Op<{ position: number; hash: string } | null> {
  const head = yield* HEAD[scope.log].row(scopeParam(scope))
  return head?.position == null || head.hash == null ? null : { position: Number(head.position), hash: head.hash }
}

/** The scope's first entry past `position` (the oldest one no checkpoint covers): its position and time (epoch µs). */
export function* firstEntryAfter(scope: ChainName, position: number): Op<{ position: number; createdAtMicros: number } | null> {
  const entry = yield* FIRST_AFTER[scope.log].row({ ...scopeParam(scope), after: position })
  return entry?.position == null ? null : { position: Number(entry.position), createdAtMicros: Number(entry.createdAt) }
}

/**
 * Each environment's activity chain and each project's admin chain with its head and the newest position a
 * checkpoint or anchor covers (null: none), in one statement per log: two index seeks per chain, in the database.
 */
const HEADS_AND_SIGNED = perLog((log) =>
  statement(`audit.heads-and-signed.${log}`, ({ db, t }) => {
    const scope = log === 'activity' ? t.environments : t.projects
    // The scope's id named with its table: the builder writes a lone column unqualified, which inside a subquery
    // would name the subquery's own `id`.
    const id = sql.raw(log === 'activity' ? 'environments.id' : 'projects.id')
    // Unqualified, as the chain indexes are written (SQLite matches an expression index to the expression as it
    // stands), and `+ 0`: compared with the rowid column itself, SQLite's planner passes the expression index over.
    const head =
      log === 'activity'
        ? sql`(SELECT max(chain_position) FROM activity_logs WHERE environment_id = ${id})`
        : sql`(SELECT max(chain_position) FROM admin_logs WHERE coalesce(project_id, 0) = ${id} + 0)`
    return db
      .select({
        scopeId: scope.id,
        head: sql<number | null>`${head}`.mapWith(Number),
        signed: sql<number | null>`(SELECT max(position) FROM audit_checkpoints WHERE scope_key = ${sql.raw(`'${log}:'`)} || CAST(${id} AS text))`.mapWith(Number),
      })
      .from(scope)
  }),
)

/** The chains whose head is past their last checkpoint or anchor: the head and that position (0: none), the instance's admin chain included. */
export function* unsignedChains(): Op<{ chain: ChainName; head: number; signed: number }[]> {
  const found: { chain: ChainName; head: number; signed: number }[] = []
  for (const log of ['activity', 'admin'] as const) {
    for (const row of yield* HEADS_AND_SIGNED[log].rows()) {
      if (row.head !== null && row.head > (row.signed ?? 0)) found.push({ chain: { log, scopeId: Number(row.scopeId) }, head: row.head, signed: row.signed ?? 0 })
    }
  }
  const instance: ChainName = { log: 'admin', scopeId: null }
  const head = yield* chainHead(instance)
  const signed = yield* lastSignedPosition(instance)
  if (head !== null && head.position > signed) found.push({ chain: instance, head: head.position, signed })
  return found
}

// ── Checkpoints and anchors ───────────────────────────────────────────────────

const LAST_SIGNED = statement('audit.last-signed', ({ db, t }) =>
  db
    .select({ position: sql<number | null>`max(${t.auditCheckpoints.position})`.mapWith(Number) })
    .from(t.auditCheckpoints)
    .where(eq(t.auditCheckpoints.scopeKey, ph('scopeKey'))),
)

/** The newest position a checkpoint or anchor of the scope covers; 0 when none does. */
export function* lastSignedPosition(scope: ChainName): Op<number> {
  return (yield* LAST_SIGNED.row({ scopeKey: chainKey(scope) }))?.position ?? 0
}

const INSERT_CHECKPOINT = statement('audit.insert-checkpoint', ({ db, t }) =>
  db
    .insert(t.auditCheckpoints)
    .values({
      id: sql`${ph('id')}`,
      kind: sql`${ph('kind')}`,
      log: sql`${ph('log')}`,
      scopeId: sql`${ph('scopeId')}`,
      scopeKey: sql`${ph('scopeKey')}`,
      position: sql`${ph('position')}`,
      hash: sql`${ph('hash')}`,
      kid: sql`${ph('kid')}`,
      signature: sql`${ph('signature')}`,
      createdAt: sql`${ph('createdAt')}`,
    })
    .onConflictDoNothing()
    .returning({ id: t.auditCheckpoints.id }),
)

const INSERT_DELIVERY = statement('audit.insert-witness-delivery', ({ db, t }) =>
  db.insert(t.auditWitnessDeliveries).values({
    id: sql`${ph('id')}`,
    checkpointId: sql`${ph('checkpointId')}`,
    witness: sql`${ph('witness')}`,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: sql`${ph('now')}`,
    createdAt: sql`${ph('now')}`,
  }),
)

/**
 * Stores a signed checkpoint or anchor and queues it for each witness, in the caller's transaction; false (nothing
 * written) when the scope already has one of this kind at this position — another instance signed it first.
 */
export function* insertCheckpoint(checkpoint: SignedCheckpoint, witnesses: readonly Witness[], now: number): Op<boolean> {
  const { id, kind, log, scopeId, position, hash, kid, signature } = checkpoint
  const stored = yield* INSERT_CHECKPOINT.rows({
    id, kind, log, scopeId, scopeKey: chainKey(checkpoint), position, hash, kid, signature, createdAt: Date.parse(checkpoint.time),
  })
  if (stored.length === 0) return false
  for (const witness of witnesses) yield* INSERT_DELIVERY.exec({ id: `${id}.${witness}`, checkpointId: id, witness, now })
  return true
}

type CheckpointRow = Tables['auditCheckpoints']['$inferSelect']

/** A stored row as the checkpoint it signs (its `time` is `created_at`, as signed). */
function checkpointOf(row: CheckpointRow): SignedCheckpoint {
  return {
    v: 1,
    kind: row.kind,
    log: row.log,
    scopeId: row.scopeId === null ? null : Number(row.scopeId),
    position: Number(row.position),
    hash: row.hash,
    time: new Date(Number(row.createdAt)).toISOString(),
    kid: row.kid,
    id: row.id,
    signature: row.signature,
  }
}

const SCOPE_CHECKPOINTS = statement('audit.scope-checkpoints', ({ db, t }) =>
  db
    .select()
    .from(t.auditCheckpoints)
    .where(and(eq(t.auditCheckpoints.scopeKey, ph('scopeKey')), gt(t.auditCheckpoints.position, ph('from')), lte(t.auditCheckpoints.position, ph('to'))))
    .orderBy(asc(t.auditCheckpoints.position), asc(t.auditCheckpoints.kind)),
)

/** The scope's checkpoints and anchors past `from` up to `to` (positions), in position order. */
export function* listCheckpoints(scope: ChainName, from = 0, to = Number.MAX_SAFE_INTEGER): Op<SignedCheckpoint[]> {
  return (yield* SCOPE_CHECKPOINTS.rows({ scopeKey: chainKey(scope), from, to })).map(checkpointOf)
}

const NEWEST_ANCHOR = statement('audit.newest-anchor', ({ db, t }) =>
  db
    .select()
    .from(t.auditCheckpoints)
    .where(and(eq(t.auditCheckpoints.scopeKey, ph('scopeKey')), sql`${t.auditCheckpoints.kind} = 'anchor'`, lte(t.auditCheckpoints.position, ph('before'))))
    .orderBy(desc(t.auditCheckpoints.position))
    .limit(constantLimit(1)),
)

/** The scope's newest anchor at or below `before` (where retention stopped), or null. */
export function* newestAnchor(scope: ChainName, before = Number.MAX_SAFE_INTEGER): Op<SignedCheckpoint | null> {
  const row = yield* NEWEST_ANCHOR.row({ scopeKey: chainKey(scope), before })
  return row ? checkpointOf(row) : null
}

// ── Retention anchors ─────────────────────────────────────────────────────────

/** What signing needs: the key, and the witnesses each signed checkpoint or anchor is queued for. */
export interface AuditSigning {
  key: AuditSigningKey
  witnesses: readonly Witness[]
}

/**
 * An anchor for each scope among the entries just deleted, at its newest deleted entry, signed and queued for the
 * witnesses, in the deleting transaction: verify starts that chain from it.
 */
export function* recordAnchors(log: ChainLog, deleted: readonly PrunedEntry[], signing: AuditSigning, now: number): Op<void> {
  for (const { scope, position, hash } of lastPrunedLinks(log, deleted)) {
    yield* insertCheckpoint(signCheckpoint(signing.key, 'anchor', scope, position, hash, now), signing.witnesses, now)
  }
}

type PrunedEntry = { scopeId: number | null; position: number | null; hash: string | null }

/** The link of the newest entry of each scope among those just deleted (`deleted`: their scope, position, hash). */
function lastPrunedLinks(log: ChainLog, deleted: readonly PrunedEntry[]) {
  const newest = new Map<string, { scope: ChainName; position: number; hash: string }>()
  for (const entry of deleted) {
    if (entry.position === null || entry.hash === null) continue
    const scope = { log, scopeId: entry.scopeId === null ? null : Number(entry.scopeId) }
    const key = chainKey(scope)
    const position = Number(entry.position)
    if ((newest.get(key)?.position ?? 0) < position) newest.set(key, { scope, position, hash: entry.hash })
  }
  return [...newest.values()]
}

// ── The witness outbox ────────────────────────────────────────────────────────

const OUTBOX = leasedQueue<{ id: string }, 'delivered'>({ name: 'audit-witness', table: (t) => t.auditWitnessDeliveries, claimAnswers: 'ids', recordsError: true })

/** A delivery as the witness worker sends it: the checkpoint and where. */
export interface ClaimedWitnessDelivery {
  id: string
  witness: Witness
  attempts: number
  checkpoint: SignedCheckpoint
}

const CLAIMED = statement('audit-witness.claimed', (d) =>
  d.db
    .select({ id: d.t.auditWitnessDeliveries.id, witness: d.t.auditWitnessDeliveries.witness, attempts: d.t.auditWitnessDeliveries.attempts, checkpoint: d.t.auditCheckpoints })
    .from(d.t.auditWitnessDeliveries)
    .innerJoin(d.t.auditCheckpoints, eq(d.t.auditCheckpoints.id, d.t.auditWitnessDeliveries.checkpointId))
    .where(d.inJsonArray(d.t.auditWitnessDeliveries.id, 'ids', 'text'))
    // Oldest first: a witness file's lines are in the order checkpoints were made.
    .orderBy(asc(d.t.auditCheckpoints.createdAt), asc(d.t.auditWitnessDeliveries.id)),
)

/** Leases up to `limit` due witness deliveries to `owner` until `now + leaseMs`, oldest first. */
export function* claimWitnessDeliveries(owner: string, now: number, leaseMs: number, limit: number): Op<ClaimedWitnessDelivery[]> {
  const claimed = yield* OUTBOX.claim(owner, now, leaseMs, limit)
  if (claimed.length === 0) return []
  const found = yield* CLAIMED.rows({ ids: JSON.stringify(claimed.map((c) => c.id)) })
  return found.map((f) => ({ id: f.id, witness: f.witness, attempts: Number(f.attempts), checkpoint: checkpointOf(f.checkpoint) }))
}

/** One attempt's outcome, guarded by the lease: false (nothing written) when `owner` no longer holds the delivery. */
export const recordWitnessAttempt: (attempt: LeaseSettlement<'delivered'>) => Op<boolean> = OUTBOX.settle

/** Graceful stop: what `owner` holds is due again for any worker. */
export const releaseWitnessLeases = OUTBOX.releaseOwned

/** What a starting witness worker takes back at once (./leased-queue.ts `recoverAtStart`). */
export const recoverWitnessAtStart = OUTBOX.recoverAtStart

/** When the next pending witness delivery comes due after `after` (ms), or null. */
export const nextWitnessDueAt = OUTBOX.nextDueAt

/** Removes up to `limit` deliveries settled at or before `before` (the checkpoints stay); how many it removed. */
export const pruneWitnessDeliveries = OUTBOX.pruneFinished

// ── Where an export starts ───────────────────────────────────────────────────

const FIRST_FROM = perLog((log) =>
  statement(`audit.first-from.${log}`, ({ db, t }) => {
    const { x, inScope } = scopeOf(t, log)
    return db
      .select({ position: sql<number | null>`min(${x.chainPosition})`.mapWith(Number) })
      .from(x)
      .where(and(inScope, sql`${x.createdAt} >= ${ph('from')}`))
  }),
)

/** The position of the scope's first entry created at or after `fromMicros`, or null when none is. */
export function* firstChainPositionFrom(scope: ChainName, fromMicros: number): Op<number | null> {
  return (yield* FIRST_FROM[scope.log].row({ ...scopeParam(scope), from: fromMicros }))?.position ?? null
}

/**
 * Signed checkpoints and retention anchors of the audit trail (docs/audit.md "Checkpoints", "Anchors"): what is
 * signed, exactly, and the witness line every copy of one takes (the `checkpoints.jsonl` line, the `audit.checkpoint`
 * callback's `data`, an export's `checkpoint` line). Pure: no storage.
 */
import { randomUUIDv7 } from 'bun'
import type { ChainLog, ChainName } from './audit-chain.ts'
import { type AuditPublicJwk, type AuditSigningKey, verifyAuditSignature } from './audit-key.ts'

export type CheckpointKind = 'checkpoint' | 'anchor'

/** What a checkpoint signs, in this key order: its signature covers `JSON.stringify` of exactly this object. */
export interface CheckpointBody {
  v: 1
  kind: CheckpointKind
  log: ChainLog
  scopeId: number | null
  position: number
  hash: string
  /** When it was signed, ISO 8601 UTC (milliseconds). */
  time: string
  kid: string
}

/** A checkpoint as stored and witnessed: the body, its id and its signature (base64url). */
export type SignedCheckpoint = CheckpointBody & { id: string; signature: string }

/** The bytes a checkpoint's signature covers: its body's fields, in the contract's order, and nothing else. */
export function checkpointBytes(checkpoint: CheckpointBody): string {
  const { v, kind, log, scopeId, position, hash, time, kid } = checkpoint
  return JSON.stringify({ v, kind, log, scopeId, position, hash, time, kid } satisfies CheckpointBody)
}

/** A new checkpoint (or anchor) of `scope` at `position`, whose entry hashes to `hash`, signed at `at` (epoch ms). */
export function signCheckpoint(key: AuditSigningKey, kind: CheckpointKind, scope: ChainName, position: number, hash: string, at: number): SignedCheckpoint {
  const body: CheckpointBody = { v: 1, kind, log: scope.log, scopeId: scope.scopeId, position, hash, time: new Date(at).toISOString(), kid: key.publicJwk.kid }
  return { ...body, id: newCheckpointId(), signature: key.sign(checkpointBytes(body)) }
}

/** Whether the checkpoint's signature is `publicJwk`'s over its body (and names that key). */
export function checkpointSignatureOk(publicJwk: AuditPublicJwk, checkpoint: SignedCheckpoint): boolean {
  return checkpoint.kid === publicJwk.kid && verifyAuditSignature(publicJwk, checkpointBytes(checkpoint), checkpoint.signature)
}

/** The witness line of a checkpoint: `{ ...checkpoint, id, signature }`, one JSON object. */
export function witnessLine(checkpoint: SignedCheckpoint): string {
  const { id, signature } = checkpoint
  return JSON.stringify({ ...JSON.parse(checkpointBytes(checkpoint)), id, signature })
}

/**
 * A witness line read back (a file's line, an export's), or null when it is not one: every field of the body, an id and
 * a signature, of the right types. A line that parses is still checked by its signature.
 */
export function parseWitnessLine(value: unknown): SignedCheckpoint | null {
  if (typeof value !== 'object' || value === null) return null
  const c = value as Record<string, unknown>
  const ok =
    c.v === 1 &&
    (c.kind === 'checkpoint' || c.kind === 'anchor') &&
    (c.log === 'activity' || c.log === 'admin') &&
    (c.scopeId === null || Number.isSafeInteger(c.scopeId)) &&
    Number.isSafeInteger(c.position) &&
    typeof c.hash === 'string' &&
    typeof c.time === 'string' &&
    typeof c.kid === 'string' &&
    typeof c.id === 'string' &&
    typeof c.signature === 'string'
  if (!ok) return null
  const { v, kind, log, scopeId, position, hash, time, kid, id, signature } = c as unknown as SignedCheckpoint
  return { v, kind, log, scopeId, position, hash, time, kid, id, signature }
}

/** A checkpoint's id, `ckp_` and a UUIDv7's 32 hex digits: the witness callback's `webhook-id`, the line a witness file is searched for. */
const newCheckpointId = () => `ckp_${randomUUIDv7().replaceAll('-', '')}`

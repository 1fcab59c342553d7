/**
 * What `trellis audit verify` checks a chain against besides itself (docs/audit.md "Verifying"): the signed claims
 * made about it — the checkpoints stored in the database, the newest checkpoint a witness holds, and the retention
 * anchor it starts from — each signature checked with the public key, as the walk (src/lib/audit-verify.ts) takes them.
 * A checkpoint whose signature fails (a chain recomputed, or a checkpoint forged, by someone without the key) is a
 * claim the walk reports `altered`; a head below a signed claim is `truncated`.
 */
import { listCheckpoints } from '../../db/audit.ts'
import { read } from '../../db/read.ts'
import type { Store } from '../../db/store.ts'
import { type ChainName, chainKey } from '../../lib/audit-chain.ts'
import { checkpointSignatureOk, type SignedCheckpoint } from '../../lib/audit-checkpoint.ts'
import type { AuditPublicJwk } from '../../lib/audit-key.ts'
import type { ChainClaim } from '../../lib/audit-verify.ts'
import type { ChainClaims } from './chain-verify.ts'

/** The newest checkpoint (or anchor) of each chain in a witness's lines, by chain key. */
export function newestWitnessed(lines: readonly SignedCheckpoint[]): Map<string, SignedCheckpoint> {
  const newest = new Map<string, SignedCheckpoint>()
  for (const line of lines) {
    const key = chainKey(line)
    if ((newest.get(key)?.position ?? -1) < line.position) newest.set(key, line)
  }
  return newest
}

/** A signed checkpoint as the walk's claim: its position and hash, and whether `publicJwk` signed it. */
export function claimOf(checkpoint: SignedCheckpoint, publicJwk: AuditPublicJwk, source: ChainClaim['source']): ChainClaim {
  return { position: checkpoint.position, hash: checkpoint.hash, signatureValid: checkpointSignatureOk(publicJwk, checkpoint), source }
}

/**
 * The claims of one stored chain: every checkpoint the database holds for it, the witness's newest (when a witness is
 * given), and its newest anchor — where the walk starts when its signature holds; one that does not is a claim the
 * walk reports `altered` (the walk then starts from the chain's beginning). Without a key (`publicJwk` null) only the
 * links are walked, from the stored anchor.
 */
export function storedClaims(store: Store, publicJwk: AuditPublicJwk | null, witnessed: Map<string, SignedCheckpoint> | null) {
  return async (chain: ChainName): Promise<ChainClaims> => {
    const stored = await read(store, listCheckpoints(chain))
    const newestAnchor = stored.filter((c) => c.kind === 'anchor').at(-1)
    // Without a key the links alone are checked: the chain starts from its anchor as stored, and nothing is claimed.
    if (publicJwk === null) return { anchor: newestAnchor === undefined ? null : { position: newestAnchor.position, hash: newestAnchor.hash }, claims: [] }
    const claims = stored.filter((c) => c.kind === 'checkpoint').map((c) => claimOf(c, publicJwk, 'database'))
    const anchorHolds = newestAnchor !== undefined && checkpointSignatureOk(publicJwk, newestAnchor)
    if (newestAnchor !== undefined && !anchorHolds) claims.push(claimOf(newestAnchor, publicJwk, 'database'))
    const witness = witnessed?.get(chainKey(chain))
    if (witness !== undefined) claims.push(claimOf(witness, publicJwk, 'witness'))
    return { anchor: anchorHolds ? { position: newestAnchor.position, hash: newestAnchor.hash } : null, claims }
  }
}

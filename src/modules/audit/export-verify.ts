/**
 * Verifying a signed export (`trellis audit verify --export FILE`, docs/audit.md "Export"): the file alone and a
 * public key. Its entries are walked as the stored chains are (src/lib/audit-verify.ts) from the header's `prev` link
 * — the anchor there, when the export holds one, its signature and hash checked —, against its checkpoint lines, each
 * signature checked: an entry line edited is a link that fails (`altered`); entries recomputed to match is a signed checkpoint
 * whose hash no longer does.
 */
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import { type ActivityChainFields, type AdminChainFields, type ChainLog, canonicalActivityEntry, canonicalAdminEntry, chainKey, isLinkHash } from '../../lib/audit-chain.ts'
import { parseWitnessLine, type SignedCheckpoint } from '../../lib/audit-checkpoint.ts'
import { type AuditPublicJwk, auditJwkOf, auditJwkProblem } from '../../lib/audit-key.ts'
import { type ChainEntry, walkChain } from '../../lib/audit-verify.ts'
import { claimOf } from './claims.ts'
import type { VerifyReport } from './chain-verify.ts'

/** An export file that is not one (no header line, another version). */
export class NotAnExport extends Error {}

interface ExportHeader {
  log: ChainLog
  project: string
  environment?: string
  scopeId: number | null
  publicKey: AuditPublicJwk
  prev: { position: number; hash: string } | null
}

/** Every line of the file parsed as JSON (null for a line that is not), in order. */
async function* exportLines(path: string): AsyncGenerator<Record<string, unknown> | null> {
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity })
  for await (const line of lines) {
    if (line.trim() === '') continue
    try {
      const value: unknown = JSON.parse(line)
      yield typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null
    } catch {
      yield null
    }
  }
}

function headerOf(line: Record<string, unknown> | null): ExportHeader {
  if (line?.type !== 'header' || line.v !== 1) throw new NotAnExport('its first line is not an export header ({"type":"header","v":1,…})')
  const problem = auditJwkProblem(line.publicKey)
  if (problem) throw new NotAnExport(`its header's publicKey ${problem}`)
  if (line.log !== 'activity' && line.log !== 'admin') throw new NotAnExport('its header names no log (activity or admin)')
  const prev = line.prev as { position?: unknown; hash?: unknown } | null
  if (prev !== null && (!Number.isSafeInteger(prev?.position) || !isLinkHash(prev?.hash))) throw new NotAnExport('its header\'s prev is not a link ({position, hash})')
  return {
    log: line.log,
    project: String(line.project),
    ...(typeof line.environment === 'string' ? { environment: line.environment } : {}),
    scopeId: line.scopeId === null ? null : Number(line.scopeId),
    publicKey: auditJwkOf(line.publicKey as { x: string }),
    prev: prev as ExportHeader['prev'],
  }
}

/** An entry line as the walk reads it; null for a line that is no entry. */
function entryOf(log: ChainLog, line: Record<string, unknown>): ChainEntry | null {
  const entry = line.entry as Record<string, unknown> | undefined
  if (typeof entry !== 'object' || entry === null) return null
  const position = Number.isSafeInteger(line.position) ? (line.position as number) : null
  return {
    position,
    id: Number(entry.id),
    hash: typeof line.hash === 'string' ? line.hash : null,
    encode: (at) =>
      log === 'activity'
        ? canonicalActivityEntry({ ...(entry as unknown as ActivityChainFields), recordIds: Array.isArray(entry.recordIds) ? (entry.recordIds as string[]) : [], position: at })
        : canonicalAdminEntry({ ...(entry as unknown as AdminChainFields), position: at }),
  }
}

/**
 * Walks the export at `path` with `key` (null: the export's own header key, which proves only that the file is whole,
 * not whose it is). The report names the chain as `trellis audit verify` does.
 */
export async function verifyExport(path: string, key: AuditPublicJwk | null): Promise<VerifyReport & { key: 'given' | 'export' }> {
  // First pass: the header, the anchor and the checkpoints (the walk takes its claims before the entries).
  let header: ExportHeader | null = null
  const checkpoints: SignedCheckpoint[] = []
  for await (const line of exportLines(path)) {
    if (header === null) {
      header = headerOf(line)
      continue
    }
    if (line?.type !== 'checkpoint') continue
    const { type: _type, ...rest } = line
    const checkpoint = parseWitnessLine(rest)
    if (checkpoint) checkpoints.push(checkpoint)
  }
  if (header === null) throw new NotAnExport('it is empty')
  const publicJwk = key ?? header.publicKey
  const chain = { log: header.log, scopeId: header.scopeId }
  const anchor = checkpoints.find((c) => c.kind === 'anchor' && c.position === header!.prev?.position)
  const claims = checkpoints.filter((c) => c.kind === 'checkpoint' && chainKey(c) === chainKey(chain)).map((c) => claimOf(c, publicJwk, 'export'))
  const log = header.log
  async function* entries(): AsyncGenerator<ChainEntry> {
    for await (const line of exportLines(path)) {
      if (line?.type !== 'entry') continue
      const entry = entryOf(log, line)
      if (entry) yield entry
    }
  }
  const verdict = await walkChain({ entries: entries(), anchor: header.prev, claims })
  // The walk starts from `prev` as given: the anchor standing for it must be the instance's, at that very link.
  if (anchor !== undefined && (!claimOf(anchor, publicJwk, 'export').signatureValid || anchor.hash !== header.prev?.hash)) {
    verdict.breaks.unshift({ kind: 'altered', position: anchor.position })
  }
  const report = {
    log: header.log,
    chain: chainKey(chain),
    project: header.project,
    ...(header.environment === undefined ? {} : { environment: header.environment }),
    ...verdict,
  }
  return { ok: report.breaks.length === 0, logs: [report], key: key === null ? 'export' : 'given' }
}

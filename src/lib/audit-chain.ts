/**
 * The logs' hash chain (docs/audit.md): each scope of the activity log (an environment) and of the admin log (a
 * project, or the instance: null) is one chain. Every entry stores its position (1, 2, … per scope, gapless) and
 * `hash = hex(SHA-256(previous hash (32 bytes) ‖ utf8(canonical encoding of the entry)))`, the previous hash of the
 * first position being 32 zero bytes (`GENESIS_HASH`, or a retention anchor's hash).
 *
 * The canonical encoding is versioned (`CHAIN_ENCODING_VERSION`) and holds every stored field an entry's API body is
 * made from, as stored: ids, not names, so that a renamed user, team or collection leaves the chain whole while the
 * API still shows the new name. Pure: the writers (src/db), `trellis audit verify` and an export's reader all encode
 * and link here.
 */
import { createHash } from 'node:crypto'

/** The version of the canonical encoding: the first element of every encoded entry. */
export const CHAIN_ENCODING_VERSION = 1

/** The previous hash of a chain's first entry (when no anchor says otherwise): 32 zero bytes, in hex. */
export const GENESIS_HASH = '0'.repeat(64)

/** The two chained logs. */
export type ChainLog = 'activity' | 'admin'

/** One chain: a log and its scope (the activity log's environment id; the admin log's project id, null: the instance's). */
export interface ChainName {
  log: ChainLog
  scopeId: number | null
}

/** A chain's newest link: its position and hash. */
export interface ChainLink {
  position: number
  hash: string
}

/** `activity:<environmentId>`, `admin:<projectId>` or `admin:instance`: a chain named as one string. */
export function chainKey({ log, scopeId }: ChainName): string {
  return `${log}:${scopeId ?? 'instance'}`
}

/** An activity entry's stored fields as the canonical encoding reads them. */
export interface ActivityChainFields {
  environmentId: number
  position: number
  id: number
  /** Epoch microseconds, as stored. */
  createdAt: number
  type: string
  action: string
  label: string | null
  userId: number
  teamId: number | null
  collectionId: number | null
  tokenId: number | null
  workflowName: string | null
  runId: string | null
  stepName: string | null
  /** The action is a Trellis extension (listed only with `extensions=true`). */
  extension: boolean
  /** The record ids the entry names, in any order (encoded sorted, each once). */
  recordIds: readonly string[]
}

/** An admin entry's stored fields as the canonical encoding reads them. */
export interface AdminChainFields {
  projectId: number | null
  position: number
  id: number
  /** Epoch microseconds, as stored. */
  createdAt: number
  type: string
  resource: string
  initiator: string
  userId: number | null
  subjectUserId: number | null
  /** JSON text as stored (not re-serialised: its exact characters are hashed). */
  previousValue: string | null
  newValue: string | null
  /** The resource or initiator is a Trellis extension (listed only with `extensions=true`). */
  extension: boolean
}

/** Code-unit order, each once: the encoding's record ids. */
const sortedDistinct = (values: readonly string[]) => [...new Set(values)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))

/** An activity entry's canonical encoding v1 (docs/audit.md "Canonical encoding"). */
export function canonicalActivityEntry(row: ActivityChainFields): string {
  return `[${CHAIN_ENCODING_VERSION},"activity",${row.environmentId},${row.position},${row.id},${row.createdAt},${activityChainTail(row)}`
}

/**
 * The end of an activity entry's canonical encoding: every field after createdAt, and the closing bracket. An entry's
 * place (position, id, createdAt) comes right before it, so a writer that does not know its place yet (PostgreSQL's,
 * chained by the lists' pass: drizzle/postgres/0028_activity_chained_by_the_pass.sql) stores this and the pass
 * writes the rest.
 */
export function activityChainTail(row: Omit<ActivityChainFields, 'environmentId' | 'position' | 'id' | 'createdAt'>): string {
  return JSON.stringify([
    row.type, row.action, row.label, row.userId, row.teamId, row.collectionId, row.tokenId, row.workflowName, row.runId, row.stepName, row.extension,
    sortedDistinct(row.recordIds),
  ]).slice(1)
}

/** An admin entry's canonical encoding v1 (docs/audit.md "Canonical encoding"). */
export function canonicalAdminEntry(row: AdminChainFields): string {
  return JSON.stringify([
    CHAIN_ENCODING_VERSION, 'admin', row.projectId, row.position, row.id, row.createdAt, row.type, row.resource, row.initiator,
    row.userId, row.subjectUserId, row.previousValue, row.newValue, row.extension,
  ])
}

const HEX_HASH = /^[0-9a-f]{64}$/

/** `hex(SHA-256(prev (32 bytes) ‖ utf8(canonical)))`; a null `prevHex` is the genesis (32 zero bytes). */
export function linkHash(prevHex: string | null, canonical: string): string {
  const prev = prevHex ?? GENESIS_HASH
  if (!HEX_HASH.test(prev)) throw new Error('linkHash: the previous hash is not 64 lower-case hex digits')
  return createHash('sha256').update(Buffer.from(prev, 'hex')).update(canonical, 'utf8').digest('hex')
}

/** Whether `text` is a link hash as stored: 64 lower-case hex digits. */
export const isLinkHash = (text: unknown): text is string => typeof text === 'string' && HEX_HASH.test(text)

/** An entry's `chain` field (an `extensions=true` field of the log APIs): its stored link, when it has one. */
export function chainField(row: { chainPosition: number | null; chainHash: string | null }): { chain?: ChainLink } {
  return row.chainPosition === null || row.chainHash === null ? {} : { chain: { position: Number(row.chainPosition), hash: row.chainHash } }
}

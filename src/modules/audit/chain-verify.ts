/**
 * Verifying the stored chains (`trellis audit verify`, docs/audit.md "Verifying"): each chain's entries are read from
 * the store page by page in position order and walked by the pure walk (src/lib/audit-verify.ts), which an export
 * file or a witness feeds the same way. What the chain is compared with besides itself — the retention anchor it
 * starts from, the checkpoints signed in the database or kept by witnesses — comes from `claimsOf`.
 */
import { type ChainScope, chainEntriesPage, chainEntryCount, chainScopes, type StoredChainEntry, unpositionedChainEntries } from '../../db/chain-pages.ts'
import { read } from '../../db/read.ts'
import type { Store } from '../../db/store.ts'
import { type ChainLink, type ChainLog, canonicalActivityEntry, canonicalAdminEntry, chainKey } from '../../lib/audit-chain.ts'
import { type ChainBreak, type ChainClaim, type ChainEntry, walkChain } from '../../lib/audit-verify.ts'
import { type Progress, silentProgress } from '../../lib/progress.ts'

/** Entries read per page: a chain of any length is walked in bounded memory. */
const VERIFY_PAGE = 1000

/** One chain's verdict as `--json` prints it. */
export interface ChainReport {
  /** Which log (`--log`): an environment's activity log or a project's (or the instance's) admin log. */
  log: ChainLog
  /** The chain's key: `activity:<environmentId>`, `admin:<projectId>` or `admin:instance`. */
  chain: string
  project: string | null
  environment?: string
  entries: number
  head: ChainLink | null
  breaks: ChainBreak[]
}

export interface VerifyReport {
  ok: boolean
  logs: ChainReport[]
}

/** What a chain is checked against besides itself: where it starts (a retention anchor) and the signed claims about it. */
export interface ChainClaims {
  anchor?: ChainLink | null
  claims?: readonly ChainClaim[]
}

export interface VerifyOptions {
  /** Only this project's chains (its environments' activity logs and its admin log); null: every chain, the instance's admin log too. */
  project: string | null
  logs: readonly ChainLog[]
  /** The anchor and checkpoints of a chain (none when absent). */
  claimsOf?: (scope: ChainScope) => Promise<ChainClaims>
  progress?: Progress
}

/** An entry as stored, as the walk reads it. */
export function chainEntryOf(stored: StoredChainEntry): ChainEntry {
  return {
    position: stored.position,
    id: stored.fields.id,
    hash: stored.hash,
    encode: (position) => (stored.log === 'activity' ? canonicalActivityEntry({ ...stored.fields, position }) : canonicalAdminEntry({ ...stored.fields, position })),
  }
}

/** The chain's entries in position order (those claiming no position last), page by page. */
async function* storedEntries(store: Store, scope: ChainScope): AsyncGenerator<ChainEntry> {
  let cursor: { position: number; id: number } | null = null
  if (scope.log === 'activity') await store.awaitListed('activity_logs') // what was committed before, chained
  for (;;) {
    const page: StoredChainEntry[] = await read(store, chainEntriesPage(scope.log, scope.scopeId, cursor, VERIFY_PAGE))
    for (const entry of page) yield chainEntryOf(entry)
    if (page.length < VERIFY_PAGE) break
    const last = page[page.length - 1]!
    cursor = { position: last.position!, id: last.fields.id }
  }
  for (const entry of await read(store, unpositionedChainEntries(scope.log, scope.scopeId))) yield chainEntryOf(entry)
}

/** Walks every chain the options name; `ok` when none has a break. */
export async function verifyStoredChains(store: Store, options: VerifyOptions): Promise<VerifyReport> {
  const progress = options.progress ?? silentProgress
  const scopes = await read(store, chainScopes(options.project, options.logs))
  const logs: ChainReport[] = []
  for (const scope of scopes) {
    const key = chainKey({ log: scope.log, scopeId: scope.scopeId })
    const total = await read(store, chainEntryCount(scope.log, scope.scopeId))
    const step = progress.step(`${key}${scope.project === null ? '' : ` (${[scope.project, scope.environment].filter(Boolean).join(' / ')})`}`, total)
    let done = 0
    const claims = (await options.claimsOf?.(scope)) ?? {}
    const verdict = await walkChain({ entries: storedEntries(store, scope), anchor: claims.anchor, claims: claims.claims, onEntry: () => step.update(++done) })
    step.done(done)
    logs.push({ log: scope.log, chain: key, project: scope.project, ...(scope.environment === undefined ? {} : { environment: scope.environment }), ...verdict })
  }
  return { ok: logs.every((log) => log.breaks.length === 0), logs }
}

/**
 * The walk of one hash chain (docs/audit.md "Verifying"): pure, fed the chain's entries in position order — from the
 * database (`trellis audit verify`), an export file or anything else — and the claims made about the chain elsewhere
 * (a retention anchor to start from, checkpoints signed by the instance and kept by witnesses). It re-links every
 * entry, and says where and how the chain was broken: `altered`, `removed`, `inserted`, `reordered` or `truncated`.
 *
 * Classification, in the order the walk applies it at each entry (position p expected next, `prev` the last good hash):
 * - no position, or a position already seen → `inserted` (at the position it claims; null when it has none);
 * - a position past p → `removed` at p, the first missing one (the walk goes on from the entry's own hash);
 * - an id not above the previous entry's (the list, which orders by id, shows another order) → `reordered` at the
 *   previous entry's position;
 * - the entry does not link from `prev`, but it and the next one link when swapped → `reordered` at p;
 * - it does not link, but the next one links from `prev` one position earlier (an entry put in, the tail renumbered)
 *   → `inserted` at p, and the rest is walked one position down;
 * - it does not link, but it links one position earlier from the hash before the previous entry (that entry was put
 *   in with a correct hash, the tail renumbered) → `inserted` at the previous position, the rest walked one down;
 * - it does not link, but the next one links from it one position later (an entry taken out before it, the tail
 *   renumbered) → `removed` at p, the rest walked one up;
 * - any other entry that does not link → `altered` at p (the walk goes on from its stored hash, so one altered field
 *   is one break);
 * - a checkpoint whose signature fails, or whose hash is not the stored hash at its position → `altered` there;
 * - a head below a checkpoint's position → `truncated` at the first position missing.
 * One break per position is kept (`inserted` over `reordered` over `removed` over `altered`).
 */
import { type ChainLink, GENESIS_HASH, linkHash } from './audit-chain.ts'

/** What a break is. */
export type BreakKind = 'altered' | 'removed' | 'inserted' | 'reordered' | 'truncated'

export interface ChainBreak {
  kind: BreakKind
  /** The position where the chain breaks; null for an entry that claims none. */
  position: number | null
  /** The entry's id, when one entry is the break. */
  id?: number
}

/** One entry as the walk reads it: its stored position, id and hash, and its canonical encoding at a position. */
export interface ChainEntry {
  position: number | null
  id: number
  hash: string | null
  /** The entry's canonical encoding (src/lib/audit-chain.ts) as if it stood at `position`. */
  encode(position: number): string
}

/**
 * A checkpoint or anchor claim about the chain: the hash at a position, signed (src/modules/audit/claims.ts checks the
 * signature and says whether it holds). `source` names where it was found, for the report.
 */
export interface ChainClaim {
  position: number
  hash: string
  signatureValid: boolean
  source: 'database' | 'witness' | 'export'
}

export interface ChainWalkInput {
  entries: AsyncIterable<ChainEntry> | Iterable<ChainEntry>
  /** Where the chain starts when log retention pruned its beginning: the last pruned entry's link (its signature checked by the caller). */
  anchor?: ChainLink | null
  /** Checkpoints from the database, witnesses or an export. */
  claims?: readonly ChainClaim[]
  /** Called after each entry read (a progress bar). */
  onEntry?: () => void
}

export interface ChainVerdict {
  /** Entries read. */
  entries: number
  /** The newest entry's stored link, or null for an empty chain. */
  head: ChainLink | null
  breaks: ChainBreak[]
}

const PRIORITY: Record<BreakKind, number> = { inserted: 4, reordered: 3, removed: 2, altered: 1, truncated: 0 }

/** Walks one chain (see the file comment); the breaks in position order. */
export async function walkChain(input: ChainWalkInput): Promise<ChainVerdict> {
  const found = new Map<number | string, ChainBreak>()
  const report = (b: ChainBreak) => {
    const key = b.position ?? `id:${b.id}`
    const had = found.get(key)
    if (had === undefined || PRIORITY[b.kind] > PRIORITY[had.kind]) found.set(key, b)
  }
  const wanted = new Set((input.claims ?? []).map((claim) => claim.position))
  const storedAt = new Map<number, string | null>()

  const links = (prev: string, entry: ChainEntry, position: number) => entry.hash !== null && linkHash(prev, entry.encode(position)) === entry.hash

  let prev = input.anchor?.hash ?? GENESIS_HASH
  /** The hash the last accepted entry chained on from (an entry found to be inserted there is stepped over). */
  let beforePrev: string | null = null
  let lastAcceptedId: number | undefined
  let expected = (input.anchor?.position ?? 0) + 1
  /** Stored position minus the position the entry was written at (an insertion with the tail renumbered makes it 1). */
  let shift = 0
  let lastId = -Infinity
  let lastPosition: number | null = null
  let count = 0
  let head: ChainLink | null = null

  const iterator = (Symbol.asyncIterator in input.entries ? input.entries[Symbol.asyncIterator]() : (input.entries as Iterable<ChainEntry>)[Symbol.iterator]()) as
    | AsyncIterator<ChainEntry>
    | Iterator<ChainEntry>
  let lookahead: ChainEntry | undefined
  let done = false
  const pull = async (): Promise<ChainEntry | undefined> => {
    if (lookahead !== undefined) {
      const next = lookahead
      lookahead = undefined
      return next
    }
    if (done) return undefined
    const step = await iterator.next()
    if (step.done) {
      done = true
      return undefined
    }
    count++
    input.onEntry?.()
    return step.value
  }
  const peek = async (): Promise<ChainEntry | undefined> => (lookahead ??= await pull())

  for (let entry = await pull(); entry !== undefined; entry = await pull()) {
    if (entry.position === null) {
      report({ kind: 'inserted', position: null, id: entry.id })
      continue
    }
    const position = entry.position
    if (wanted.has(position) && !storedAt.has(position)) storedAt.set(position, entry.hash)
    if (lastPosition !== null && position <= lastPosition) {
      report({ kind: 'inserted', position, id: entry.id })
      continue
    }
    if (entry.hash !== null) head = { position, hash: entry.hash }
    if (position > expected) {
      report({ kind: 'removed', position: expected })
      accept(entry)
      continue
    }
    if (entry.id <= lastId) report({ kind: 'reordered', position: lastPosition })
    const written = position - shift
    if (links(prev, entry, written)) {
      accept(entry)
      continue
    }
    const next = await peek()
    if (next !== undefined && next.position === position + 1 && links(prev, next, written) && links(next.hash!, entry, written + 1)) {
      report({ kind: 'reordered', position })
      lookahead = undefined
      if (next.hash !== null && wanted.has(next.position!)) storedAt.set(next.position!, next.hash)
      head = next.hash === null ? head : { position: next.position!, hash: next.hash }
      accept(entry)
      lastPosition = next.position
      expected = next.position! + 1
      lastId = Math.max(entry.id, next.id)
      continue
    }
    if (next !== undefined && next.position === position + 1 && links(prev, next, written)) {
      report({ kind: 'inserted', position, id: entry.id })
      shift += 1
      lastPosition = position
      expected = position + 1
      continue
    }
    if (beforePrev !== null && links(beforePrev, entry, written - 1)) {
      report({ kind: 'inserted', position: lastPosition, id: lastAcceptedId })
      shift += 1
      accept(entry)
      continue
    }
    if (next !== undefined && next.position === position + 1 && entry.hash !== null && links(entry.hash, next, written + 2)) {
      report({ kind: 'removed', position })
      shift -= 1
      accept(entry)
      continue
    }
    report({ kind: 'altered', position, id: entry.id })
    accept(entry)
  }

  function accept(entry: ChainEntry) {
    beforePrev = prev
    lastAcceptedId = entry.id
    if (entry.hash !== null) prev = entry.hash
    lastPosition = entry.position
    expected = entry.position! + 1
    lastId = entry.id
  }

  // The chain reaches its head, or its anchor when retention pruned every entry: a claim past that is a cut tail.
  const reached = Math.max(head?.position ?? 0, input.anchor?.position ?? 0)
  for (const claim of input.claims ?? []) {
    // What retention pruned before the anchor is gone by design: the anchor vouches for it.
    if (claim.position <= (input.anchor?.position ?? 0)) continue
    if (!claim.signatureValid) report({ kind: 'altered', position: claim.position })
    else if (reached < claim.position) report({ kind: 'truncated', position: reached + 1 })
    else if (storedAt.has(claim.position) && storedAt.get(claim.position) !== claim.hash) report({ kind: 'altered', position: claim.position })
  }
  const breaks = [...found.values()].sort((a, b) => (a.position ?? Infinity) - (b.position ?? Infinity))
  return { entries: count, head, breaks }
}

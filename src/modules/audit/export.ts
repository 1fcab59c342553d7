/**
 * The signed export of one log chain (docs/audit.md "Export"), written by `trellis audit export` and
 * `GET /v1/project/{p}/audit/export` alike: JSON Lines — a header (the log, its names, the public key, and the link
 * the first entry chains on from), the anchor that link is when retention cut the chain there, each entry with its
 * position, hash and the fields its canonical encoding reads, then the checkpoints that cover them. When no stored
 * checkpoint sits at the last entry, the export ends with one signed as it is written. `trellis audit verify --export`
 * checks it with the public key alone.
 */
import { chainLinkAt, firstChainPositionFrom, listCheckpoints, newestAnchor } from '../../db/audit.ts'
import { type ChainCursor, chainEntriesPage, type StoredChainEntry } from '../../db/chain-pages.ts'
import type { Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import type { Store } from '../../db/store.ts'
import type { ChainName } from '../../lib/audit-chain.ts'
import { type SignedCheckpoint, signCheckpoint, witnessLine } from '../../lib/audit-checkpoint.ts'
import type { AuditSigningKey } from '../../lib/audit-key.ts'
import { notFound } from '../../lib/errors.ts'
import { parseIsoMicros } from '../../lib/time.ts'
import { requireEnvironment, requireProject } from '../directory/projects.ts'

/** Entries read per page: an export of any length is written in bounded memory. */
const EXPORT_PAGE = 1000

/** What an export covers: the chain, the names it is shown by, and the entries' creation times [from, to). */
export interface ExportScope {
  chain: ChainName
  project: string
  environment?: string
  fromMicros: number
  toMicros: number
}

/** The export's options as given (query string or flags). */
export interface ExportOptions {
  log?: string
  environment?: string
  from?: string
  to?: string
}

/** What is wrong with one option: which, and its rule (the route answers 400 naming it, the CLI a usage error). */
export class ExportOptionError extends Error {
  constructor(
    readonly option: keyof ExportOptions,
    readonly rule: string,
  ) {
    super(`${option} ${rule}`)
  }
}

/**
 * The chain an export names, its options checked (`ExportOptionError` naming the option) and its project's and
 * environment's names found (404 when unknown): `log` `activity` (an environment's: the default when `environment` is
 * given) or `admin` (the project's: the default without one); `from`/`to` ISO 8601 times.
 */
export function* exportScope(projectName: string, options: ExportOptions): Op<ExportScope> {
  // An environment names its activity log; without one, the project's admin log.
  const log = options.log ?? (options.environment === undefined ? 'admin' : 'activity')
  if (log !== 'activity' && log !== 'admin') throw new ExportOptionError('log', 'must be activity or admin')
  const fromMicros = options.from === undefined ? 0 : parseIsoMicros(options.from)
  if (fromMicros === null) throw new ExportOptionError('from', 'must be an ISO 8601 date-time')
  const toMicros = options.to === undefined ? Number.MAX_SAFE_INTEGER : parseIsoMicros(options.to)
  if (toMicros === null) throw new ExportOptionError('to', 'must be an ISO 8601 date-time')
  if (log === 'admin') {
    if (options.environment !== undefined) throw new ExportOptionError('environment', 'names no environment for the admin log (the project\'s)')
    const project = yield* requireProject(projectName)
    return { chain: { log, scopeId: project.id }, project: project.name, fromMicros, toMicros }
  }
  if (options.environment === undefined) throw new ExportOptionError('environment', 'is required for the activity log')
  const { project, environment } = yield* requireEnvironment(projectName, options.environment)
  return { chain: { log, scopeId: environment.id }, project: project.name, environment: environment.name, fromMicros, toMicros }
}

/** The export's lines, each one JSON object (no newline), read page by page. */
export async function* exportLines(store: Store, key: AuditSigningKey, scope: ExportScope, now: () => number): AsyncGenerator<string> {
  const { chain } = scope
  if (chain.log === 'activity') await store.awaitListed('activity_logs') // what was committed before, chained
  const start = await read(store, firstChainPositionFrom(chain, scope.fromMicros))
  // Positions rise with creation times within a chain: the export is the positions from the first entry at `from` on,
  // up to the first entry at `to`.
  const page = (cursor: ChainCursor | null) => read(store, chainEntriesPage(chain.log, chain.scopeId, cursor, EXPORT_PAGE))
  let entries = start === null ? [] : await page({ position: start - 1, id: Number.MAX_SAFE_INTEGER })
  const inRange = (entry: StoredChainEntry) => entry.fields.createdAt < scope.toMicros
  const first = entries[0] !== undefined && inRange(entries[0]) ? entries[0] : undefined
  const prev = first === undefined || first.position === 1 ? null : await read(store, linkBefore(chain, first.position!))
  yield JSON.stringify({
    type: 'header',
    v: 1,
    log: chain.log,
    project: scope.project,
    ...(scope.environment === undefined ? {} : { environment: scope.environment }),
    scopeId: chain.scopeId,
    publicKey: key.publicJwk,
    prev: prev === null ? null : { position: prev.position, hash: prev.hash },
  })
  if (prev?.anchor) yield checkpointLine(prev.anchor)
  let last: { position: number; hash: string } | null = null
  for (;;) {
    for (const entry of entries) {
      if (!inRange(entry)) break
      yield JSON.stringify({ type: 'entry', position: entry.position, hash: entry.hash, entry: { ...entry.fields, position: entry.position } })
      last = { position: entry.position!, hash: entry.hash ?? '' }
    }
    const tail = entries.at(-1)
    if (entries.length < EXPORT_PAGE || tail === undefined || !inRange(tail)) break
    entries = await page({ position: tail.position!, id: tail.fields.id })
  }
  if (first === undefined || last === null) return
  const covering = (await read(store, listCheckpoints(chain, first.position! - 1, last.position))).filter((c) => c.kind === 'checkpoint')
  for (const checkpoint of covering) yield checkpointLine(checkpoint)
  if (covering.at(-1)?.position !== last.position) yield checkpointLine(signCheckpoint(key, 'checkpoint', chain, last.position, last.hash, now()))
}

/** The link the entry at `position` chains on from: the entry before it, or the anchor retention left there. */
function* linkBefore(chain: ChainName, position: number): Op<{ position: number; hash: string; anchor: SignedCheckpoint | null }> {
  const anchor = yield* newestAnchor(chain, position - 1)
  if (anchor?.position === position - 1) return { position: anchor.position, hash: anchor.hash, anchor }
  const link = yield* chainLinkAt(chain, position - 1)
  if (link === null) throw notFound(`The entry before position ${position} is gone and no anchor stands for it`)
  return { ...link, anchor: null }
}

const checkpointLine = (checkpoint: SignedCheckpoint) => `{"type":"checkpoint",${witnessLine(checkpoint).slice(1)}`

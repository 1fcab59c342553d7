/**
 * The chained logs read back in chain order, for `trellis audit verify` (src/modules/audit/chain-verify.ts) and the
 * signed export (src/modules/audit/export.ts): which chains there are (with the names of their project and
 * environment), and a chain's entries page by page in position order — the one reader of a chain's rows, as stored,
 * whatever they hold: the walk (src/lib/audit-verify.ts) decides what is wrong. Written once for both stores; each
 * page is one seek on the chain's unique index.
 */
import { and, asc, eq, gt, isNull, or, type Placeholder, type SQL, sql } from 'drizzle-orm'
import type { ActivityChainFields, AdminChainFields, ChainLog } from '../lib/audit-chain.ts'
import { findActivityLogRecordIds, listedActivityEntry } from './activity-logs.ts'
import type { Dialect, Tables } from './dialect.ts'
import type { Op } from './op.ts'
import { rows } from './query.ts'

/** One chain of the instance, named as the CLI and its JSON name it. */
export interface ChainScope {
  log: ChainLog
  /** The environment's id (activity), the project's (admin), null for the instance's admin log. */
  scopeId: number | null
  project: string | null
  environment?: string
}

/** The chains there are: every environment's activity log and every project's admin log (of `project` alone when given), and the instance's admin log. */
export function* chainScopes(project: string | null, logs: readonly ChainLog[]): Op<ChainScope[]> {
  const found: ChainScope[] = []
  if (logs.includes('activity')) {
    const environments = yield* rows(({ db, t, byteOrder }) =>
      db
        .select({ id: t.environments.id, environment: t.environments.name, project: t.projects.name })
        .from(t.environments)
        .innerJoin(t.projects, eq(t.projects.id, t.environments.projectId))
        .where(project === null ? undefined : eq(t.projects.name, project))
        .orderBy(byteOrder(t.projects.name), byteOrder(t.environments.name)),
    )
    found.push(...environments.map((e) => ({ log: 'activity' as const, scopeId: e.id, project: e.project, environment: e.environment })))
  }
  if (logs.includes('admin')) {
    const projects = yield* rows(({ db, t, byteOrder }) =>
      db
        .select({ id: t.projects.id, name: t.projects.name })
        .from(t.projects)
        .where(project === null ? undefined : eq(t.projects.name, project))
        .orderBy(byteOrder(t.projects.name)),
    )
    found.push(...projects.map((p) => ({ log: 'admin' as const, scopeId: p.id, project: p.name })))
    if (project === null) found.push({ log: 'admin', scopeId: null, project: null })
  }
  return found
}

/** A stored entry of a chain: its fields (position as stored, maybe null) and its stored hash. */
export type StoredChainEntry =
  | { log: 'activity'; fields: Omit<ActivityChainFields, 'position'>; position: number | null; hash: string | null }
  | { log: 'admin'; fields: Omit<AdminChainFields, 'position'>; position: number | null; hash: string | null }

/** Where a page of a chain starts: after this (position, id); null: from the start. */
export interface ChainCursor {
  position: number
  id: number
}

/**
 * A chain's scope condition, as its unique index is written — the admin log's instance chain is scope 0, so that a
 * seek finds it (`coalesce(project_id, 0)`): `scope` a value, or a prepared statement's placeholder (./audit.ts).
 * Every read of a chain's rows names its chain with it.
 */
export const inChainScope = (t: Tables, log: ChainLog, scope: number | Placeholder): SQL =>
  log === 'activity' ? eq(t.activityLogs.environmentId, scope) : sql`coalesce(${t.adminLogs.projectId}, 0) = ${scope}`

const inChain = (d: Dialect, log: ChainLog, scopeId: number | null): SQL => inChainScope(d.t, log, scopeId ?? 0)

/**
 * Up to `limit` entries of a chain after `cursor`, by position then id (two entries claiming one position both come).
 * Entries with no position are not here: `unpositionedChainEntries`.
 */
export function* chainEntriesPage(log: ChainLog, scopeId: number | null, cursor: ChainCursor | null, limit: number): Op<StoredChainEntry[]> {
  if (log === 'activity') {
    const found = yield* rows((d) => {
      const l = d.t.activityLogs
      const after = cursor === null ? undefined : or(gt(l.chainPosition, cursor.position), and(eq(l.chainPosition, cursor.position), gt(l.id, cursor.id)))
      return d.db.select().from(l).where(and(inChain(d, log, scopeId), sql`${l.chainPosition} IS NOT NULL`, after)).orderBy(asc(l.chainPosition), asc(l.id)).limit(limit)
    })
    return yield* withRecordIds(found)
  }
  const found = yield* rows((d) => {
    const l = d.t.adminLogs
    const after = cursor === null ? undefined : or(gt(l.chainPosition, cursor.position), and(eq(l.chainPosition, cursor.position), gt(l.id, cursor.id)))
    return d.db.select().from(l).where(and(inChain(d, log, scopeId), sql`${l.chainPosition} IS NOT NULL`, after)).orderBy(asc(l.chainPosition), asc(l.id)).limit(limit)
  })
  return found.map(adminEntry)
}

/**
 * The chain scope's entries that claim no position (written without a link: never by Trellis itself since the chain
 * exists), by id; PostgreSQL's activity entries past the log's watermark are not yet chained, and not read.
 */
export function* unpositionedChainEntries(log: ChainLog, scopeId: number | null): Op<StoredChainEntry[]> {
  if (log === 'activity') {
    const found = yield* rows((d) =>
      d.db
        .select()
        .from(d.t.activityLogs)
        .where(and(inChain(d, log, scopeId), isNull(d.t.activityLogs.chainPosition), listedActivityEntry(d)))
        .orderBy(asc(d.t.activityLogs.id)),
    )
    return yield* withRecordIds(found)
  }
  const found = yield* rows((d) => d.db.select().from(d.t.adminLogs).where(and(inChain(d, log, scopeId), isNull(d.t.adminLogs.chainPosition))).orderBy(asc(d.t.adminLogs.id)))
  return found.map(adminEntry)
}

type ActivityRow = {
  id: number; environmentId: number; type: string; action: string; label: string | null; userId: number; teamId: number | null; collectionId: number | null
  tokenId: number | null; workflowName: string | null; runId: string | null; stepName: string | null; extension: boolean; createdAt: number
  chainPosition: number | null; chainHash: string | null
}
type AdminRow = {
  id: number; projectId: number | null; type: string; resource: string; initiator: string; userId: number | null; subjectUserId: number | null
  previousValue: string | null; newValue: string | null; extension: boolean; createdAt: number; chainPosition: number | null; chainHash: string | null
}

function* withRecordIds(found: ActivityRow[]): Op<StoredChainEntry[]> {
  const recordIds = found.length === 0 ? new Map<number, string[]>() : yield* findActivityLogRecordIds(found.map((row) => row.id))
  return found.map(({ chainPosition, chainHash, ...row }) => ({
    log: 'activity' as const,
    fields: { ...row, id: Number(row.id), createdAt: Number(row.createdAt), extension: Boolean(row.extension), recordIds: recordIds.get(row.id) ?? [] },
    position: chainPosition === null ? null : Number(chainPosition),
    hash: chainHash,
  }))
}

function adminEntry({ chainPosition, chainHash, ...row }: AdminRow): StoredChainEntry {
  return {
    log: 'admin',
    fields: { ...row, id: Number(row.id), createdAt: Number(row.createdAt), extension: Boolean(row.extension) },
    position: chainPosition === null ? null : Number(chainPosition),
    hash: chainHash,
  }
}

/** How many entries the chain scope holds (a progress bar's total). */
export function* chainEntryCount(log: ChainLog, scopeId: number | null): Op<number> {
  const [found] = yield* rows((d) => {
    const table = log === 'activity' ? d.t.activityLogs : d.t.adminLogs
    return d.db.select({ n: sql<number>`count(*)` }).from(table).where(inChain(d, log, scopeId))
  })
  return Number(found?.n ?? 0)
}

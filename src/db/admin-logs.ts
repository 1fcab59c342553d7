/**
 * What the admin log asks the database: append an entry, a page of a project's entry ids, the newest
 * instance-wide entries, and the entries of a page, written once for both stores (./query.ts; the list and render
 * statements built once per dialect and connection).
 * Append-only: nothing here updates an entry; only log retention (`deleteLogBatch`) deletes old ones.
 */
import { and, asc, desc, eq, isNull } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import { appendChained, type NewAdminLogRow } from './log-chain.ts'
import type { Op } from './op.ts'
import { createdAtBounds, hideExtensions, pageIds, type TimeOrderedList } from './pages.ts'
import { rows, statement } from './query.ts'
import type { adminLogs } from './schema.ts'

type AdminLogRow = typeof adminLogs.$inferSelect

/** A project's admin log (or the instance-wide one, scope null): its createdAt order and id bounds. */
const ADMIN_TIMES = { name: 'admin-logs', table: 'adminLogs', scope: 'projectId', chain: { log: 'admin', table: 'admin_logs', column: 'project_id', scope: 'coalesce(project_id, 0)' } } as const satisfies TimeOrderedList

export type { NewAdminLogRow } from './log-chain.ts'

/**
 * Inserts an entry; its createdAt is `now`, or strictly after the previous entry of its project (DESIGN §3), and it
 * is linked to that entry in the project's (or the instance's) hash chain (./log-chain.ts). Call inside the
 * transaction that makes the change.
 */
export function* insertAdminLog(entry: NewAdminLogRow, now: number): Op<void> {
  yield* appendChained(ADMIN_TIMES, entry.projectId, [{ log: 'admin', entry }], now)
}

/** An admin log page's `column = value` filters (names already resolved to ids); undefined ones are left out. */
export interface AdminLogPageFilters {
  userId?: number
  type?: AdminLogRow['type']
  initiator?: string
  resource?: string
  /** Include the extension entries. */
  withExtensions: boolean
}

/** Ids of one page (limit + 1) of a project's admin log, newest first. */
export function* pageAdminLogIds(projectId: number, filters: AdminLogPageFilters, dates: DateFilter[], limit: number): Op<number[]> {
  const { userId, type, initiator, resource } = filters
  // Entries take createdAt strictly after the previous one in their project, so ids stand in.
  const bounds = yield* createdAtBounds(dates, ADMIN_TIMES, projectId)
  return yield* pageIds(
    {
      name: 'admin-logs',
      table: 'adminLogs',
      equal: { projectId, userId, type, initiator, resource },
      bounds,
      extra: { documented: hideExtensions('adminLogs', filters.withExtensions) },
    },
    limit,
  )
}

/** The ids of the newest `limit` instance-wide entries (no project: people, invitations, settings), newest first; of one resource when given. */
export function* pageInstanceAdminLogIds(limit: number, resource?: string): Op<number[]> {
  const found = yield* rows(({ db, t }) =>
    db
      .select({ id: t.adminLogs.id })
      .from(t.adminLogs)
      .where(and(isNull(t.adminLogs.projectId), resource === undefined ? undefined : eq(t.adminLogs.resource, resource)))
      .orderBy(desc(t.adminLogs.id))
      .limit(limit),
  )
  return found.map((r) => r.id)
}

const ADMIN_LOGS_TO_RENDER = statement('admin-logs.render', ({ db, t, inJsonArray }) =>
  db
    .select({ log: t.adminLogs, user: { id: t.users.id, username: t.users.username, email: t.users.email } })
    .from(t.adminLogs)
    .leftJoin(t.users, eq(t.users.id, t.adminLogs.userId))
    .where(inJsonArray(t.adminLogs.id, 'ids', 'integer'))
    .orderBy(asc(t.adminLogs.id)),
)

/** The entries with these ids (by id: SQLite reads them so from the IN list, no sort), each with its acting user when there is one. */
export function findAdminLogsForRender(ids: number[]) {
  return ADMIN_LOGS_TO_RENDER.rows({ ids: JSON.stringify(ids) })
}

/** Every project's id, in name byte order (log retention writes one entry per project; SQLite reads the name's unique index). */
export function* allProjectIds(): Op<number[]> {
  const found = yield* rows(({ db, t, byteOrder }) => db.select({ id: t.projects.id }).from(t.projects).orderBy(byteOrder(t.projects.name)))
  return found.map((r) => r.id)
}

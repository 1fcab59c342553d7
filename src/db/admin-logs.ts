/**
 * What the admin log asks the database: append an entry, a page of a project's entry ids, the newest
 * instance-wide entries, and the entries of a page (the list and render statements prepared once per connection).
 * Append-only: nothing here updates an entry; only log retention (`deleteLogBatch`) deletes old ones.
 */
import { desc, eq, isNull } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import { nextCreatedAt } from './monotonic.ts'
import type { Db } from './open.ts'
import { createdAtBounds, hideExtensions, pageIds } from './pages.ts'
import { inJsonArray, prepared } from './prepared.ts'
import { adminLogs, projects, users } from './schema.ts'
import { userColumns } from './users.ts'

type AdminLogRow = typeof adminLogs.$inferSelect

/** A project's admin log (or the instance-wide one, scope null): its createdAt order and id bounds. */
const ADMIN_TIMES = { name: 'admin-logs', table: adminLogs, id: adminLogs.id, createdAt: adminLogs.createdAt, scope: adminLogs.projectId }

export interface NewAdminLogRow {
  projectId: number | null
  type: AdminLogRow['type']
  resource: string
  initiator: AdminLogRow['initiator']
  userId: number | null
  subjectUserId: number | null
  /** JSON text, or null. */
  previousValue: string | null
  newValue: string | null
  /** The resource or initiator is a Trellis extension (listed only with `extensions=true`). */
  extension: boolean
}

/**
 * Inserts an entry; its createdAt is `now`, or strictly after the previous entry of its project (DESIGN §3).
 * Call inside the transaction that makes the change.
 */
export function insertAdminLog(db: Db, entry: NewAdminLogRow, now: number): void {
  db.insert(adminLogs)
    .values({ ...entry, createdAt: nextCreatedAt(db, ADMIN_TIMES, entry.projectId, now) })
    .run()
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
export function pageAdminLogIds(db: Db, projectId: number, filters: AdminLogPageFilters, dates: DateFilter[], limit: number): number[] {
  return pageIds(
    db,
    {
      name: 'admin-logs',
      table: adminLogs,
      id: adminLogs.id,
      equal: {
        projectId: [adminLogs.projectId, projectId],
        userId: [adminLogs.userId, filters.userId],
        type: [adminLogs.type, filters.type],
        initiator: [adminLogs.initiator, filters.initiator],
        resource: [adminLogs.resource, filters.resource],
      },
      // Entries take createdAt strictly after the previous one in their project, so ids stand in.
      bounds: createdAtBounds(db, dates, ADMIN_TIMES, projectId),
      extra: { documented: hideExtensions(adminLogs.extension, filters.withExtensions) },
    },
    limit,
  )
}

/** The ids of the newest `limit` instance-wide entries (no project: people, invitations), newest first. */
export function pageInstanceAdminLogIds(db: Db, limit: number): number[] {
  return db.select({ id: adminLogs.id }).from(adminLogs).where(isNull(adminLogs.projectId)).orderBy(desc(adminLogs.id)).limit(limit).all().map((r) => r.id)
}

/** The entries with these ids (any order), each with its acting user when there is one. */
export function findAdminLogsForRender(db: Db, ids: number[]) {
  return prepared(db, 'admin-logs.render', () =>
    db
      .select({ log: adminLogs, user: userColumns })
      .from(adminLogs)
      .leftJoin(users, eq(users.id, adminLogs.userId))
      .where(inJsonArray(adminLogs.id, 'ids'))
      .prepare(),
  ).all({ ids: JSON.stringify(ids) })
}

/** Every project's id (log retention writes one entry per project). */
export function allProjectIds(db: Db): number[] {
  return db.select({ id: projects.id }).from(projects).all().map((r) => r.id)
}

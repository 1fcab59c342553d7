/** Appends admin log entries (DESIGN §7). Append-only: nothing in Trellis updates or deletes one. */
import { eq } from 'drizzle-orm'
import { nextCreatedAt } from '../../db/monotonic.ts'
import type { Db } from '../../db/open.ts'
import { inJsonArray, prepared } from '../../db/prepared.ts'
import { adminLogs, users } from '../../db/schema.ts'
import { createdAtBounds, hideExtensions, pageIds } from '../../db/pages.ts'
import { inIdOrder } from '../../http/list.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIso } from '../../lib/time.ts'
import { resolveNameFilters } from '../projects/service.ts'
import { userColumns, userObject } from '../users/view.ts'

export type AdminLogType = (typeof ADMIN_LOG_TYPES)[number]
export type AdminLogResource = (typeof ADMIN_LOG_RESOURCES)[number]
export type AdminLogInitiator = (typeof ADMIN_LOG_INITIATORS)[number]

export interface AdminLogEntry {
  projectId: number | null
  type: AdminLogType
  resource: AdminLogResource
  initiator?: (typeof ADMIN_LOG_WRITTEN_INITIATORS)[number]
  /** The acting user; null for the CLI operator or the system. */
  actorId: number | null
  subjectUserId?: number | null
  previousValue?: unknown
  newValue?: unknown
}

/** A project's admin log: its createdAt order and id bounds. */
const ADMIN_TIMES = { name: 'admin-logs', table: adminLogs, id: adminLogs.id, createdAt: adminLogs.createdAt, scope: adminLogs.projectId }

/** Call inside the transaction that makes the change. */
export function appendAdminLog(db: Db, clock: Clock, entry: AdminLogEntry): void {
  db.insert(adminLogs)
    .values({
      projectId: entry.projectId,
      type: entry.type,
      resource: entry.resource,
      initiator: entry.initiator ?? 'administrator',
      userId: entry.actorId,
      subjectUserId: entry.subjectUserId ?? null,
      previousValue: entry.previousValue === undefined ? null : JSON.stringify(entry.previousValue),
      newValue: entry.newValue === undefined ? null : JSON.stringify(entry.newValue),
      extension: isExtensionEntry(entry.resource, entry.initiator ?? 'administrator'),
      createdAt: nextCreatedAt(db, ADMIN_TIMES, entry.projectId, clock.now(), true),
    })
    .run()
}

export const ADMIN_LOG_TYPES = ['add', 'remove', 'update', 'initial'] as const
/** The compatibility document's `resource` enum. */
export const DOCUMENTED_ADMIN_LOG_RESOURCES = ['user-project', 'role', 'team', 'environment'] as const
/** Trellis's extension resources (DESIGN §7): listed only with `extensions=true`. */
export const EXTENSION_ADMIN_LOG_RESOURCES = ['user', 'api-token', 'workflow', 'workflow-webhook', 'log-retention', 'project', 'collection', 'invitation'] as const
export const ADMIN_LOG_RESOURCES = [...DOCUMENTED_ADMIN_LOG_RESOURCES, ...EXTENSION_ADMIN_LOG_RESOURCES] as const
/** What Trellis writes (the database's CHECK): the document's `administrator`, `identityProvider`, and `system`. */
export const ADMIN_LOG_WRITTEN_INITIATORS = ['administrator', 'identityProvider', 'system'] as const
/** The document's whole `initiator` enum (`forestAdmin` is never written: filtering on it is an empty page, not a 400). */
export const DOCUMENTED_ADMIN_LOG_INITIATORS = ['administrator', 'identityProvider', 'forestAdmin'] as const
/** The extension initiator (retention): listed only with `extensions=true`. */
export const EXTENSION_ADMIN_LOG_INITIATORS = ['system'] as const
export const ADMIN_LOG_INITIATORS = [...DOCUMENTED_ADMIN_LOG_INITIATORS, ...EXTENSION_ADMIN_LOG_INITIATORS] as const

/** Whether the compatibility document cannot describe an entry: its resource or its initiator is an extension. */
export function isExtensionEntry(resource: AdminLogResource, initiator: AdminLogInitiator): boolean {
  return !(DOCUMENTED_ADMIN_LOG_RESOURCES as readonly string[]).includes(resource) || !(DOCUMENTED_ADMIN_LOG_INITIATORS as readonly string[]).includes(initiator)
}

export interface AdminLogFilters {
  userEmail?: string
  userId?: number
  type?: AdminLogType
  initiator?: AdminLogInitiator
  resource?: AdminLogResource
  /** Include the extension entries (`extensions=true`; the console always does). */
  extensions: boolean
}

/** Ids of one page (limit + 1) of a project's admin log, newest first. */
export function listAdminLogIds(db: Db, projectId: number, filters: AdminLogFilters, dates: DateFilter[], limit: number): number[] {
  const names = resolveNameFilters(db, projectId, filters)
  if (!names || filters.initiator === 'forestAdmin') return []
  return pageIds(
    db,
    {
      name: 'admin-logs',
      table: adminLogs,
      id: adminLogs.id,
      equal: {
        projectId: [adminLogs.projectId, projectId],
        userId: [adminLogs.userId, names.userId],
        type: [adminLogs.type, filters.type],
        initiator: [adminLogs.initiator, filters.initiator],
        resource: [adminLogs.resource, filters.resource],
      },
      // Entries take createdAt strictly after the previous one in their project, so ids stand in.
      bounds: createdAtBounds(db, dates, ADMIN_TIMES, projectId),
      extra: { documented: hideExtensions(adminLogs.extension, filters.extensions) },
    },
    limit,
  )
}

/** The compatibility document's admin log objects, in the order of `ids`. */
export function renderAdminLogs(db: Db, ids: number[]) {
  if (ids.length === 0) return []
  const rows = prepared(db, 'admin-logs.render', () =>
    db
      .select({ log: adminLogs, user: userColumns })
      .from(adminLogs)
      .leftJoin(users, eq(users.id, adminLogs.userId))
      .where(inJsonArray(adminLogs.id, 'ids'))
      .prepare(),
  ).all({ ids: JSON.stringify(ids) })
  return inIdOrder(ids, rows, (r) => r.log.id).map((r) => {
    const { log } = r
    return {
      object: 'adminLog' as const,
      id: String(log.id),
      type: log.type,
      resource: log.resource as AdminLogResource,
      initiator: log.initiator,
      createdAt: toIso(log.createdAt),
      ...(r.user ? { user: userObject(r.user) } : {}),
      ...(log.previousValue !== null ? { previousValue: JSON.parse(log.previousValue) as unknown } : {}),
      ...(log.newValue !== null ? { newValue: JSON.parse(log.newValue) as unknown } : {}),
    }
  })
}

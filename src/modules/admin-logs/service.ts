/** Appends admin log entries (DESIGN §7). Append-only: nothing in Trellis updates or deletes one. */
import { eq } from 'drizzle-orm'
import { nextCreatedAt } from '../../db/monotonic.ts'
import type { Db } from '../../db/open.ts'
import { inJsonArray, prepared } from '../../db/prepared.ts'
import { adminLogs, users } from '../../db/schema.ts'
import { createdAtBounds, inIdOrder, MAX_EMAIL_LENGTH, pageIds, parseDateFilters, parseEnumParameter, parseIdParameter, parseStringParameter, type Query } from '../../http/list.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIso } from '../../lib/time.ts'
import { resolveNameFilters } from '../projects/service.ts'
import { userColumns, userObject } from '../users/service.ts'

export type AdminLogType = (typeof ADMIN_LOG_TYPES)[number]
/** `user-project`, `role`, `team`, `environment` come from the compatibility document; the rest are extensions. */
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
      createdAt: nextCreatedAt(db, ADMIN_TIMES, entry.projectId, clock.now(), true),
    })
    .run()
}

export const ADMIN_LOG_TYPES = ['add', 'remove', 'update', 'initial'] as const
export const ADMIN_LOG_RESOURCES = ['user-project', 'role', 'team', 'environment', 'user', 'api-token', 'workflow', 'workflow-webhook', 'log-retention'] as const
/** What Trellis writes (the database's CHECK): the document's `administrator`, `identityProvider`, and `system`. */
export const ADMIN_LOG_WRITTEN_INITIATORS = ['administrator', 'identityProvider', 'system'] as const
/** Filter values: the document's whole enum (`forestAdmin` is never written: an empty page, not a 400) + `system`. */
export const ADMIN_LOG_INITIATORS = ['administrator', 'identityProvider', 'forestAdmin', 'system'] as const

export interface AdminLogFilters {
  userEmail?: string
  userId?: number
  type?: AdminLogType
  initiator?: AdminLogInitiator
  resource?: AdminLogResource
}

/** The filters of `GET …/admin-logs` (and the console's admin log page) from the query string; 400 names a bad one. */
export function parseAdminLogFilters(query: Query): AdminLogFilters {
  return {
    userEmail: parseStringParameter(query, 'userEmail', MAX_EMAIL_LENGTH),
    userId: parseIdParameter(query, 'userId'),
    type: parseEnumParameter(query, 'type', ADMIN_LOG_TYPES),
    initiator: parseEnumParameter(query, 'initiator', ADMIN_LOG_INITIATORS),
    resource: parseEnumParameter(query, 'resource', ADMIN_LOG_RESOURCES),
  }
}

/** Ids of one page (limit + 1) of a project's admin log, newest first. */
export function listAdminLogIds(db: Db, projectId: number, filters: AdminLogFilters, query: Query, limit: number): number[] {
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
      bounds: createdAtBounds(
        db,
        parseDateFilters(query, ['createdAt']),
        ADMIN_TIMES,
        projectId,
      ),
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

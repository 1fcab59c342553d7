/** Appends admin log entries (DESIGN §7). Append-only: nothing in Trellis updates or deletes one. */
import { findAdminLogsForRender, insertAdminLog, pageAdminLogIds } from '../../db/admin-logs.ts'
import { chainField } from '../../lib/audit-chain.ts'
import { inIdOrder } from '../../lib/id-order.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Clock } from '../../lib/clock.ts'
import { toIsoMicros } from '../../lib/time.ts'
import { resolveNameFilters } from '../directory/projects.ts'
import { userObject } from '../directory/users.ts'
import type { Op } from '../../db/op.ts'

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
  /** What the resource was and became, each an object (the compatibility document's shape); null or absent: none. */
  previousValue?: object | null
  newValue?: object | null
}

/** Call inside the transaction that makes the change. */
export function* appendAdminLog(clock: Clock, entry: AdminLogEntry): Op<void> {
  const initiator = entry.initiator ?? 'administrator'
  yield* insertAdminLog({
    projectId: entry.projectId,
    type: entry.type,
    resource: entry.resource,
    initiator,
    userId: entry.actorId,
    subjectUserId: entry.subjectUserId ?? null,
    previousValue: entry.previousValue == null ? null : JSON.stringify(entry.previousValue),
    newValue: entry.newValue == null ? null : JSON.stringify(entry.newValue),
    extension: isExtensionEntry(entry.resource, initiator),
  }, clock.now())
}

export const ADMIN_LOG_TYPES = ['add', 'remove', 'update', 'initial'] as const
/** The compatibility document's `resource` enum. */
export const DOCUMENTED_ADMIN_LOG_RESOURCES = ['user-project', 'role', 'team', 'environment'] as const
/** Trellis's extension resources (DESIGN §7): listed only with `extensions=true`. */
export const EXTENSION_ADMIN_LOG_RESOURCES = [
  'user', 'api-token', 'workflow', 'workflow-webhook', 'workflow-callback', 'workflow-schedule', 'workflow-events', 'log-retention', 'project', 'collection', 'invitation', 'outbound-allow',
] as const
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
export function* listAdminLogIds(projectId: number, filters: AdminLogFilters, dates: DateFilter[], limit: number): Op<number[]> {
  const names = yield* resolveNameFilters(projectId, filters)
  if (!names || filters.initiator === 'forestAdmin') return []
  return yield* pageAdminLogIds(projectId, { userId: names.userId, type: filters.type, initiator: filters.initiator, resource: filters.resource, withExtensions: filters.extensions }, dates, limit)
}

/** The compatibility document's admin log objects, in the order of `ids`. */
/** `options.chain`: each entry's link in its project's (or the instance's) chain (`chain: { position, hash }`, an `extensions=true` field). */
export function* renderAdminLogs(ids: number[], options: { chain?: boolean } = {}) {
  if (ids.length === 0) return []
  const rows = yield* findAdminLogsForRender(ids)
  return inIdOrder(ids, rows, (r) => r.log.id).map((r) => {
    const { log } = r
    return {
      object: 'adminLog' as const,
      id: String(log.id),
      type: log.type,
      resource: log.resource as AdminLogResource,
      initiator: log.initiator,
      createdAt: toIsoMicros(log.createdAt),
      ...(r.user ? { user: userObject(r.user) } : {}),
      ...(log.previousValue !== null ? { previousValue: JSON.parse(log.previousValue) as unknown } : {}),
      ...(log.newValue !== null ? { newValue: JSON.parse(log.newValue) as unknown } : {}),
      ...(options.chain ? chainField(log) : {}),
    }
  })
}

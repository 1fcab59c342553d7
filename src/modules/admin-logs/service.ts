/** Appends admin log entries (DESIGN §7). Append-only: nothing in Trellis updates or deletes one. */
import { nextCreatedAt } from '../../db/monotonic.ts'
import type { Db } from '../../db/open.ts'
import { adminLogs } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'

export type AdminLogType = 'add' | 'remove' | 'update' | 'initial'
/** `user-project`, `role`, `team`, `environment` come from the compatibility document; the rest are extensions. */
export type AdminLogResource = 'user-project' | 'role' | 'team' | 'environment' | 'api-token' | 'workflow' | 'workflow-webhook'
export type AdminLogInitiator = 'administrator' | 'identityProvider' | 'system'

export interface AdminLogEntry {
  projectId: number | null
  type: AdminLogType
  resource: AdminLogResource
  initiator?: AdminLogInitiator
  /** The acting user; null for the CLI operator or the system. */
  actorId: number | null
  subjectUserId?: number | null
  previousValue?: unknown
  newValue?: unknown
}

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
      createdAt: nextCreatedAt(db, adminLogs, clock.now(), false),
    })
    .run()
}

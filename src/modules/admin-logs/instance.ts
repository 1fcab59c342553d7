/** The instance-wide admin log entries (no project: people, invitations), for the console's people page. */
import { desc, isNull } from 'drizzle-orm'
import type { Db } from '../../db/open.ts'
import { adminLogs } from '../../db/schema.ts'

/** The ids of the newest `limit` instance-wide entries, newest first (render them with renderAdminLogs). */
export function instanceLogIds(db: Db, limit: number): number[] {
  return db.select({ id: adminLogs.id }).from(adminLogs).where(isNull(adminLogs.projectId)).orderBy(desc(adminLogs.id)).limit(limit).all().map((r) => r.id)
}

/** The instance-wide admin log entries (no project: people, invitations), for the console's people page. */
import { pageInstanceAdminLogIds } from '../../db/admin-logs.ts'
import type { Op } from '../../db/op.ts'

/** The ids of the newest `limit` instance-wide entries, newest first (render them with renderAdminLogs). */
export function* instanceLogIds(limit: number): Op<number[]> {
  return yield* pageInstanceAdminLogIds(limit)
}

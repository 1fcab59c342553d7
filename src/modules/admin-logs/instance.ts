/** The instance-wide admin log entries (no project: people, invitations, instance settings), for the console's people and outbound pages. */
import { pageInstanceAdminLogIds } from '../../db/admin-logs.ts'
import type { Op } from '../../db/op.ts'
import type { AdminLogResource } from './service.ts'

/** The ids of the newest `limit` instance-wide entries, newest first, of one resource when given (render them with renderAdminLogs). */
export function* instanceLogIds(limit: number, resource?: AdminLogResource): Op<number[]> {
  return yield* pageInstanceAdminLogIds(limit, resource)
}

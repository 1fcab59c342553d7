/**
 * The activity log and the admin log on PostgreSQL: twins of src/db/activity-logs.ts and src/db/admin-logs.ts. An
 * entry's createdAt is the list rule under its scope's lock (./monotonic.ts: the environment's activity, the
 * project's admin log, the instance-wide admin log), so createdAt follows id and commit order with several
 * instances writing, and createdAt filters stay id bounds (./pages.ts). Render rows come in ascending id order, as
 * SQLite's `IN (json_each)` gives them, shaped by the SQLite module's own functions.
 */
import { asc, desc, eq, inArray, isNull, sql } from 'drizzle-orm'
import type { DateFilter } from '../../lib/date-filter.ts'
import {
  activityLogToRender,
  findActivityLogRecordIds,
  findActivityLogsForRender,
  insertActivityLog,
  pageActivityLogIds,
  recordIdsByEntry,
  type ActivityLogRenderValues,
  type ActivityPageFilters,
  type NewActivityLogRow,
} from '../activity-logs.ts'
import {
  allProjectIds,
  findAdminLogsForRender,
  insertAdminLog,
  pageAdminLogIds,
  pageInstanceAdminLogIds,
  type AdminLogPageFilters,
  type NewAdminLogRow,
} from '../admin-logs.ts'
import { byteOrder } from './byte-order.ts'
import { nextCreatedAtOnPostgres, PG_LISTS } from './monotonic.ts'
import { createdAtBoundsOnPostgres, hideExtensionsOnPostgres, pageIdsOnPostgres, valuesOf } from './pages.ts'
import { activityLogs, adminLogs, projects, users } from './schema.ts'
import { placeholders, preparedOn } from './prepared.ts'
import { clientOf, type PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

// ── Activity log ────────────────────────────────────────────────────────────

const ACTIVITY_TIMES = { name: 'activity-logs', table: activityLogs, id: activityLogs.id, createdAt: activityLogs.createdAt, scope: activityLogs.environmentId }

async function insertActivityLogOnPostgres(db: PgDb, entry: NewActivityLogRow, recordIds: Iterable<string>, now: number): Promise<number> {
  const createdAt = await nextCreatedAtOnPostgres(db, PG_LISTS.activityLogs, entry.environmentId, now)
  const { environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension } = entry
  const values = [environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt, [...new Set(recordIds)]]
  const [row] = (await clientOf(db).unsafe(INSERT_ENTRY, values as never[])) as { id: number }[]
  return row!.id
}

/**
 * The entry and its record ids ($14, distinct, one row each) in one statement: it runs under the environment's lock
 * (./monotonic.ts), held to commit, so every round trip saved there is one less that other writers wait out.
 */
const INSERT_ENTRY = `WITH entry AS (
    INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at)
    VALUES ($1::int8, $2, $3, $4, $5::int8, $6::int8, $7::int8, $8::int8, $9, $10, $11, $12::boolean, $13::int8)
    RETURNING id),
  entry_records AS (INSERT INTO activity_log_records (log_id, environment_id, record_id) SELECT entry.id, $1::int8, unnest($14::text[]) FROM entry)
  SELECT id::float8 AS id FROM entry`

async function pageActivityLogIdsOnPostgres(db: PgDb, environmentId: number, filters: ActivityPageFilters, dates: DateFilter[], limit: number): Promise<number[]> {
  return pageIdsOnPostgres(
    db,
    {
      name: 'activity-logs',
      table: activityLogs,
      id: activityLogs.id,
      equal: {
        environmentId: [activityLogs.environmentId, environmentId],
        userId: [activityLogs.userId, filters.userId],
        teamId: [activityLogs.teamId, filters.teamId],
        collectionId: [activityLogs.collectionId, filters.collectionId],
        action: [activityLogs.action, filters.action],
        type: [activityLogs.type, filters.type],
      },
      bounds: await createdAtBoundsOnPostgres(db, dates, ACTIVITY_TIMES, environmentId),
      extra: {
        documented: hideExtensionsOnPostgres(activityLogs.extension, filters.withExtensions),
        recordId:
          filters.recordId === undefined
            ? undefined
            : {
                condition: () =>
                  sql`${activityLogs.id} IN (SELECT log_id FROM activity_log_records WHERE environment_id = ${sql.placeholder('environmentId')} AND record_id = ${sql.placeholder('recordId')})`,
                values: { recordId: filters.recordId },
              },
      },
    },
    limit,
  )
}

const ACTIVITY_LOGS_TO_RENDER = `SELECT l.id::float8, l.type, l.action, l.label, l.created_at::float8, l.workflow_name, l.run_id, l.step_name,
    u.id::float8, u.username, u.email, e.name, t.name, c.name, k.name, k.prefix
  FROM activity_logs l
  JOIN users u ON u.id = l.user_id
  JOIN environments e ON e.id = l.environment_id
  LEFT JOIN teams t ON t.id = l.team_id
  LEFT JOIN collections c ON c.id = l.collection_id
  LEFT JOIN api_tokens k ON k.id = l.token_id
  WHERE l.id = ANY($1::int8[])
  ORDER BY l.id`

async function findActivityLogsForRenderOnPostgres(db: PgDb, ids: number[]) {
  return (await valuesOf<ActivityLogRenderValues>(db, ACTIVITY_LOGS_TO_RENDER, [ids])).map(activityLogToRender)
}

/** By entry, then record id in byte order (SQLite reads them off the primary key (log_id, record_id)). */
const RECORD_IDS_TO_RENDER = `SELECT log_id::float8, record_id FROM activity_log_records WHERE log_id = ANY($1::int8[])
  ORDER BY log_id, record_id COLLATE "C"`

async function findActivityLogRecordIdsOnPostgres(db: PgDb, ids: number[]): Promise<Map<number, string[]>> {
  return recordIdsByEntry(await valuesOf<[number, string]>(db, RECORD_IDS_TO_RENDER, [ids]))
}

// ── Admin log ───────────────────────────────────────────────────────────────

const ADMIN_TIMES = { name: 'admin-logs', table: adminLogs, id: adminLogs.id, createdAt: adminLogs.createdAt, scope: adminLogs.projectId }

async function insertAdminLogOnPostgres(db: PgDb, entry: NewAdminLogRow, now: number): Promise<void> {
  const createdAt = await nextCreatedAtOnPostgres(db, PG_LISTS.adminLogs, entry.projectId, now)
  await preparedOn(db, 'admin-logs.insert', (db) =>
    db.insert(adminLogs).values(placeholders('projectId', 'type', 'resource', 'initiator', 'userId', 'subjectUserId', 'previousValue', 'newValue', 'extension', 'createdAt')),
  ).execute({ ...entry, createdAt })
}

async function pageAdminLogIdsOnPostgres(db: PgDb, projectId: number, filters: AdminLogPageFilters, dates: DateFilter[], limit: number): Promise<number[]> {
  return pageIdsOnPostgres(
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
      bounds: await createdAtBoundsOnPostgres(db, dates, ADMIN_TIMES, projectId),
      extra: { documented: hideExtensionsOnPostgres(adminLogs.extension, filters.withExtensions) },
    },
    limit,
  )
}

async function pageInstanceAdminLogIdsOnPostgres(db: PgDb, limit: number): Promise<number[]> {
  const rows = await db.select({ id: adminLogs.id }).from(adminLogs).where(isNull(adminLogs.projectId)).orderBy(desc(adminLogs.id)).limit(limit)
  return rows.map((r) => r.id)
}

async function findAdminLogsForRenderOnPostgres(db: PgDb, ids: number[]) {
  return db
    .select({ log: adminLogs, user: { id: users.id, username: users.username, email: users.email } })
    .from(adminLogs)
    .leftJoin(users, eq(users.id, adminLogs.userId))
    .where(inArray(adminLogs.id, ids))
    .orderBy(asc(adminLogs.id))
}

/** In name byte order: SQLite reads them off the unique index on the name. */
async function allProjectIdsOnPostgres(db: PgDb): Promise<number[]> {
  const rows = await db.select({ id: projects.id }).from(projects).orderBy(byteOrder(projects.name))
  return rows.map((r) => r.id)
}

export const LOGS_TWINS = twins(
  twin(insertActivityLog, insertActivityLogOnPostgres),
  twin(pageActivityLogIds, pageActivityLogIdsOnPostgres),
  twin(findActivityLogsForRender, findActivityLogsForRenderOnPostgres),
  twin(findActivityLogRecordIds, findActivityLogRecordIdsOnPostgres),
  twin(insertAdminLog, insertAdminLogOnPostgres),
  twin(pageAdminLogIds, pageAdminLogIdsOnPostgres),
  twin(pageInstanceAdminLogIds, pageInstanceAdminLogIdsOnPostgres),
  twin(findAdminLogsForRender, findAdminLogsForRenderOnPostgres),
  twin(allProjectIds, allProjectIdsOnPostgres),
)

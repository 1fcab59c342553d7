/**
 * The activity log's own PostgreSQL steps (twins of src/db/activity-logs.ts; the admin log and the rest of the
 * activity log are written once there). An entry's createdAt is the list rule under its environment's lock
 * (../monotonic.ts, ./monotonic.ts), so createdAt follows id and commit order with several instances writing, and
 * createdAt filters stay id bounds (../pages.ts). Render rows come in ascending id order, as SQLite's
 * `IN (json_each)` gives them, shaped by the SQLite module's own functions.
 */
import type { Micros } from '../../lib/time.ts'
import {
  activityLogToRender,
  findActivityLogRecordIds,
  findActivityLogsForRender,
  insertActivityLogRows,
  recordIdsByEntry,
  type ActivityLogRenderValues,
  type NewActivityLogRow,
} from '../activity-logs.ts'
import { valuesOf } from './pages.ts'
import { clientOf, type PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

async function insertActivityLogRowsOnPostgres(db: PgDb, entry: NewActivityLogRow & { createdAt: Micros }, recordIds: string[]): Promise<number> {
  const { environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt } = entry
  const values = [environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt, recordIds]
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

export const LOGS_TWINS = twins(
  // per-dialect: one data-modifying CTE (entry and record ids in one round trip under the environment's lock); SQLite has no such CTE and needs none.
  twin(insertActivityLogRows, insertActivityLogRowsOnPostgres),
  // per-dialect: raw render rows as arrays (SQLite: json_each, no row mapping; PostgreSQL: = ANY, int8 as float8).
  twin(findActivityLogsForRender, findActivityLogsForRenderOnPostgres),
  // per-dialect: raw render rows as arrays (as above).
  twin(findActivityLogRecordIds, findActivityLogRecordIdsOnPostgres),
)

/**
 * The activity log's own PostgreSQL step: the twin of src/db/activity-logs.ts's `insertActivityLogRows` (the rest of
 * the activity log and the admin log are written once there). An entry's createdAt is the list rule under its
 * environment's lock (../monotonic.ts, ./monotonic.ts), so createdAt follows id and commit order with several
 * instances writing, and createdAt filters stay id bounds (../pages.ts).
 */
import type { Micros } from '../../lib/time.ts'
import { insertActivityLogRows, type NewActivityLogRow } from '../activity-logs.ts'
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

export const LOGS_TWINS = twins(
  // per-dialect: one data-modifying CTE (entry and record ids in one round trip under the environment's lock); SQLite has no such CTE and needs none.
  twin(insertActivityLogRows, insertActivityLogRowsOnPostgres),
)

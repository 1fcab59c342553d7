/**
 * The SQLite tables of the data model (./tables.ts, where every table and column is described): ids `INTEGER PRIMARY
 * KEY AUTOINCREMENT`, flags integers in boolean mode. drizzle.config.ts generates drizzle/ from this file.
 */
import { sql } from 'drizzle-orm'
import { check, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'
import { defineTables, type TableKit } from './tables.ts'

export { PERMISSION_LEVELS, type PermissionLevel } from '../lib/access.ts'
export { ACTIVE_RUN_STATUSES, FINISHED_RUN_STATUSES, RUN_STATUSES, type RunStatus } from '../lib/run-statuses.ts'
export { anyOfLiterals, CLAIMABLE_RUN_STATUSES, runStatusIn, sqlLiterals } from './tables.ts'

const sqliteKit: TableKit = {
  table: sqliteTable,
  id: () => integer('id').primaryKey({ autoIncrement: true }),
  integer: (name) => integer(name),
  boolean: (name) => integer(name, { mode: 'boolean' }),
  text,
  index,
  uniqueIndex,
  check,
  primaryKey,
  false: sql`0`,
}

export const {
  users, instanceSettings, ssoIdentities, sessions, invitations, projects, environments, teams, teamMembers,
  projectMembers, renderings, collections, collectionPermissions, records, notes, noteMessages, apiTokens, workflows,
  workflowVersions, webhookTriggers, workflowSchedules, scheduleTicks, workflowEventTriggers, workflowEvents, runs, runSteps, idempotencyKeys, runEvents,
  callbackEndpoints, callbackDeliveries,
  callbackAttempts, userPreferences, mailOutbox, tasks, taskAssignees, taskDecisions, activityLogs, activityLogRecords,
  adminLogs, auditCheckpoints, auditWitnessDeliveries,
} = defineTables(sqliteKit)

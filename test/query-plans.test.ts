/**
 * Every index on the tables written per request or per run is there because a real statement's plan uses it, or
 * because it enforces a constraint (src/db/schema.ts). Each statement below is the one the code prepares: it is
 * captured from a connection of this test's own while the real function runs, then `EXPLAIN QUERY PLAN`ned.
 * A filter without its own index must still walk an (environment or project, id) index: never a bare table scan,
 * never a sort of every matching row.
 */
import { abandonedTickIds, dueSchedules, lastTickOf, nextScheduleFireAt, nextTickLeaseExpiry } from '../src/db/schedules.ts'
import { Database } from 'bun:sqlite'
import { afterAll, describe, expect, test } from 'bun:test'
import { drizzle } from 'drizzle-orm/bun-sqlite'
import { findActivityLogRecordIds, insertActivityLog } from '../src/db/activity-logs.ts'
import { insertAdminLog } from '../src/db/admin-logs.ts'
import { findNoteMessagesForRender, insertNewNote, nextNoteCreatedAt } from '../src/db/notes.ts'
import { deleteFinishedRunBatch, purgeDeletedRecordBatch } from '../src/db/maintenance.ts'
import { runOp } from '../src/db/sqlite/op-runner.ts'
import type { Db } from '../src/db/dialect.ts'
import { findActiveRun, findRetryOf, nextRunAvailableAt, recoverExpiredRuns, runningRuns, SQLITE_CLAIM } from '../src/db/queue.ts'
import { createFieldIndex, fieldIndexName, findRecordByKey, findRecordIdsIn, pageRecordList, type RecordListQuery, searchRecords } from '../src/db/records.ts'
import { environmentEventsAfter, environmentEventsPage, insertRunEvents, latestEventId, type NewRunEvent, runEventsAfter } from '../src/db/run-events.ts'
import { loadRunsToRender } from '../src/db/runs.ts'
import { assigneeUsersOf, countInboxTasks, decidersToTell, loadTasksToRender, pageInboxTaskIds, pageTaskIds } from '../src/db/tasks.ts'
import * as schema from '../src/db/schema.ts'
import { countOpenTasks, longestOpenTasks, openTasksPerWorkflow, runDurationPercentiles, runsPerBucket, runsPerWorkflow, stepFigures } from '../src/db/workflow-health.ts'
import type { Micros } from '../src/lib/time.ts'
import { parseDateFilters } from '../src/http/list.ts'
import { ACTIVITY_DATE_FIELDS } from '../src/modules/activity-logs/query.ts'
import { listActivityLogIds } from '../src/modules/activity-logs/service.ts'
import { ADMIN_LOG_DATE_FIELDS } from '../src/modules/admin-logs/query.ts'
import { listAdminLogIds } from '../src/modules/admin-logs/service.ts'
import { NOTE_DATE_FIELDS } from '../src/modules/notes/model.ts'
import { listNoteIds } from '../src/modules/notes/service.ts'
import { listRunIds } from '../src/modules/runs/service.ts'
import { acmeDocument, applyAcme, projectId } from './support/acme.ts'
import { runNow, sqliteTestEnv } from './helpers.ts'

const env = sqliteTestEnv()
afterAll(() => env.cleanup())
await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: 'http://trellis.test' }, acmeDocument())
const acme = projectId(env.store, 'Acme')
const production = (env.store.sqlite.prepare("SELECT id FROM environments WHERE name = 'production'").all() as { id: number }[])[0]!.id
const at = '2026-01-01T00:00:00Z'
const orders = (env.store.sqlite.prepare("SELECT id FROM collections WHERE name = 'orders'").all() as { id: number }[])[0]!.id
// An indexed field, as a collection schema with `indexed: true` makes it (src/modules/records/service.ts).
await runNow(env.store, createFieldIndex(orders, 'amount', 'number'))
const AMOUNT_INDEX = fieldIndexName(orders, 'amount')

/** The tables written on a request's or a run's path, whose every index costs each write. */
const HOT_TABLES = ['runs', 'run_steps', 'run_events', 'activity_logs', 'activity_log_records', 'notes', 'note_messages', 'admin_logs', 'records']

/** Indexes kept for a constraint alone (their lookups are proven below too where a statement uses them). */
const CONSTRAINTS: Record<string, string> = {
  sqlite_autoindex_runs_1: 'primary key (uuid text)',
  sqlite_autoindex_run_steps_1: 'primary key (run_id, step_index)',
  sqlite_autoindex_activity_log_records_1: 'primary key (log_id, record_id): an entry names a record once; cascade from activity_logs',
  runs_one_active_per_record: 'one active run per workflow and record: decides the 409',
  records_env_collection_key_unique: 'one record per key in a collection',
}

/** The SQL texts prepared while `work` runs on a fresh connection to the test database. */
function statementsOf(work: (db: Db, connection: Database) => unknown): string[] {
  const connection = new Database(env.store.path, { strict: true })
  const texts: string[] = []
  const prepare = connection.prepare.bind(connection)
  connection.prepare = ((text: string, ...rest: never[]) => {
    texts.push(text)
    return prepare(text, ...rest)
  }) as typeof connection.prepare
  try {
    // One transaction, rolled back: the write cases (inserts) leave nothing behind.
    connection.run('BEGIN')
    work(drizzle({ client: connection, schema }) as unknown as Db, connection)
  } finally {
    connection.run('ROLLBACK')
    connection.close()
  }
  return texts
}

function planOf(text: string): string {
  return (env.store.sqlite.prepare(`EXPLAIN QUERY PLAN ${text}`).all() as { detail: string }[]).map((r) => r.detail).join(' | ')
}

/** SQLite's claim statements (src/db/queue.ts), each prepared as the claim prepares it. */
const claimStatements = (_: Db, connection: Database) => Object.values(SQLITE_CLAIM).map((text) => connection.prepare(text))

type PlanCase = [name: string, work: (db: Db, connection: Database) => unknown, statement: RegExp, plan: RegExp]

const notes = (filters: Parameters<typeof listNoteIds>[2], query: Record<string, string> = {}) => (db: Db) =>
  runOp(db, listNoteIds(acme, production, filters, parseDateFilters(query, NOTE_DATE_FIELDS), 10))
const activity = (filters: Omit<Parameters<typeof listActivityLogIds>[2], 'extensions'> & { extensions?: boolean }, query: Record<string, string> = {}) => (db: Db) =>
  runOp(db, listActivityLogIds(acme, production, { extensions: false, ...filters }, parseDateFilters(query, ACTIVITY_DATE_FIELDS), 10))
const admin = (filters: Omit<Parameters<typeof listAdminLogIds>[1], 'extensions'> & { extensions?: boolean }, query: Record<string, string> = {}) => (db: Db) =>
  runOp(db, listAdminLogIds(acme, { extensions: false, ...filters }, parseDateFilters(query, ADMIN_LOG_DATE_FIELDS), 10))
const runs = (filters: Parameters<typeof listRunIds>[1], query: Record<string, string> = {}) => (db: Db) =>
  runOp(db, listRunIds(production, filters, parseDateFilters(query, ACTIVITY_DATE_FIELDS), 10))

const tasks = (filters: Parameters<typeof pageTaskIds>[1]) => (db: Db) => runOp(db, pageTaskIds(production, filters, [], 10))

const recordList = (q: RecordListQuery) => (db: Db) => runOp(db, pageRecordList({ environmentId: production, collectionId: orders }, q, 10))
const RECORD_LIST = /^select "id", "record_key", "data", "created_at", "updated_at", .* from "records"/
const NOTES_PAGE = /^select "id" from "notes"/
const TASKS_PAGE = /^select "id", "created_at" from "tasks"/
/** A member's inbox, walked from the tasks that name them, and from those naming each of their teams. */
const TASKS_NAMING_USER = /^select "task_id", "task_created_at" from "task_assignees" where \("task_assignees"\."user_id" = \?/
const TASKS_NAMING_TEAM = /^select "task_id", "task_created_at" from "task_assignees" where \("task_assignees"\."team_id" = \?/
/** The console's inbox walks: the tasks naming the person, and those naming one of their teams, each by its index; no task scanned. */
const CONSOLE_INBOX_PLAN = /^(?!.*SCAN (k|tasks)\b)(?=.*SEARCH a USING COVERING INDEX task_assignees_user_idx \(user_id=\?\))(?=.*SEARCH a USING COVERING INDEX task_assignees_team_idx \(team_id=\?\)).*$/
const ACTIVITY_PAGE = /^select "id" from "activity_logs" where .* order by "activity_logs"\."id" desc/
const ADMIN_PAGE = /^select "id" from "admin_logs" where .* order by "admin_logs"\."id" desc/
const RUNS_PAGE = /^select "id", "created_at" from "runs"/
/** The read of an environment's run events after an id (src/db/run-events.ts). */
const ENVIRONMENT_EVENTS = /FROM run_events e JOIN runs r ON r\.id = e\.run_id JOIN workflows w ON w\.id = e\.workflow_id\s+WHERE e\.environment_id = /
/** A filtered read of them: within the range its first statement fixed. */
const FILTERED_EVENTS = /FROM run_events e JOIN runs r ON r\.id = e\.run_id JOIN workflows w ON w\.id = e\.workflow_id\s+WHERE e\.environment_id = .* AND e\.id <= /s
/** An event in production (inserted in the plan's rolled-back transaction, so that a filtered read has a range to read). */
const productionEvent: NewRunEvent = { runId: 'r', environmentId: production, workflowId: 1, recordId: 'x', type: 'run.cancelled', status: 'cancelled', at: 0 }
/** A filtered read of production's events from the start, an event there. */
const filteredEvents = (filter: Parameters<typeof environmentEventsPage>[2]) => (db: Db) => {
  insertRunEvents.sqlite(db, [productionEvent])
  return runOp(db, environmentEventsPage(production, 0, filter))
}

/** Each real statement, and the plan it must have. The index each plan names is proven used. */
const CASES: PlanCase[] = [
  // ── records: the console's searches walk the collection's records in id order through its unique index, never a sort ──
  ['records: search by id part and field (a collection page)', (db) => runOp(db, searchRecords({ environmentId: production, collectionId: 1 }, { idContains: 'ord', field: { name: 'status', value: 'paid' } }, 'a', 50)), /^select .* from "records" where .* LIKE/, /^SEARCH records USING INDEX records_env_collection_key_unique \(environment_id=\? AND collection_id=\? AND record_key>\?\)$/],
  // Not covering: each match's row is read for its deleted_at (a deleted record is found by nobody).
  ['records: ids containing a text in the collections a person may read (/search)', (db) => runOp(db, findRecordIdsIn([{ environmentId: production, collectionId: 1 }], 'ord', 10)), /^select "environment_id", "collection_id", "record_key" from "records"/, /^SEARCH records USING INDEX records_env_collection_key_unique \(environment_id=\?\) \| LIST SUBQUERY 1 \| SCAN json_each VIRTUAL TABLE INDEX 1: \| LIST SUBQUERY 2 \| SCAN json_each VIRTUAL TABLE INDEX 1:( \| CREATE BLOOM FILTER)?$/],
  // ── records: the API's list walks an index in the page's order, never a sort of the collection ──
  ['records: list, newest first (default)', recordList({ filters: [], sort: null, direction: 'desc', literalCollection: false }), RECORD_LIST, /^SEARCH records USING INDEX records_env_collection_created_idx \(environment_id=\? AND collection_id=\?\)$/],
  ['records: list after a cursor, newest first', recordList({ filters: [], sort: null, direction: 'desc', after: { key: 1, id: 9 }, literalCollection: false }), RECORD_LIST, /^SEARCH records USING INDEX records_env_collection_created_idx \(environment_id=\? AND collection_id=\? AND created_at<\?\)$/],
  ['records: list filtered and sorted on an indexed field', recordList({ filters: [{ field: 'amount', kind: 'number', op: 'gt', values: [10] }], sort: { field: 'amount', kind: 'number' }, direction: 'asc', literalCollection: true }), RECORD_LIST, new RegExp(`^SEARCH records USING INDEX ${AMOUNT_INDEX} \\(environment_id=\\? AND <expr>>\\?\\)$`)],
  ['records: list sorted on an indexed field after a cursor, descending', recordList({ filters: [], sort: { field: 'amount', kind: 'number' }, direction: 'desc', after: { key: 50, id: 9 }, literalCollection: true }), RECORD_LIST, new RegExp(`^SEARCH records USING INDEX ${AMOUNT_INDEX} \\(environment_id=\\?\\)$`)],
  // ── runs: the queue ──
  // The claim (src/db/claims.ts): the runs running, each environment's oldest due runs and, where a workflow's limit
  // holds those back, each workflow's — in their index's order, never a sort — then the start of each run picked.
  // Driven from runs_lease_idx whatever the statistics say (a join let SQLite walk every run of each environment instead).
  ['queue: claim: the runs running', (db) => runOp(db, runningRuns(null)), /^select "workflow_id", \(\(select "project_id" from "environments"/, /^SCAN runs USING INDEX runs_lease_idx \| CORRELATED SCALAR SUBQUERY \d+ \| SEARCH environments USING INTEGER PRIMARY KEY \(rowid=\?\)$/],
  ['queue: claim: the environments with due runs', claimStatements, /^SELECT e\.id, e\.project_id FROM environments e/, /^SCAN e USING COVERING INDEX environments_project_name_unique \| SEARCH r EXISTS USING INDEX runs_claim_env_idx \(environment_id=\? AND available_at<\?\)$/],
  ['queue: claim: an environment\'s oldest due runs', claimStatements, /WHERE r\.environment_id = \?1 AND r\.status IN/, /^SEARCH r USING INDEX runs_claim_env_idx \(environment_id=\? AND available_at<\?\) \| SEARCH w USING INTEGER PRIMARY KEY \(rowid=\?\)$/],
  ['queue: claim: a workflow\'s oldest due runs', claimStatements, /WHERE r\.workflow_id = \?1 AND r\.status IN/, /^SEARCH w USING INTEGER PRIMARY KEY \(rowid=\?\) \| SEARCH r USING INDEX runs_claim_workflow_idx \(workflow_id=\? AND available_at<\?\)$/],
  ['queue: claim: each workflow\'s oldest due run (an environment whose runs a limit holds back)', claimStatements, /FROM runs r WHERE r\.workflow_id = w\.id/, /SEARCH r USING INDEX runs_claim_workflow_idx \(workflow_id=\? AND available_at<\?\)$/],
  ['queue: claim: start a run picked', claimStatements, /^UPDATE runs SET status = 'running'/, /^SEARCH runs USING INDEX sqlite_autoindex_runs_1 \(id=\?\)$/],
  ['queue: the next due time', (db) => runOp(db, nextRunAvailableAt()), /^select min\("available_at"\)/, /SEARCH runs USING INDEX runs_claim_idx/],
  ['queue: recover expired leases', (db) => runOp(db, recoverExpiredRuns(0)), /^update "runs" set .* where \("runs"\."status" = 'running' and "runs"\."lease_expires_at" < \?\)/, /SEARCH runs USING (COVERING )?INDEX runs_lease_idx \(lease_expires_at<\?\)/],
  ['queue: the run retrying a run (409 already_retried)', (db) => runOp(db, findRetryOf('r')), /^select "id" from "runs" where "runs"\."retry_of" = \?/, /^SEARCH runs USING INDEX runs_retry_of_idx \(retry_of=\?\)$/],
  ['queue: the active run behind a 409', (db) => runOp(db, findActiveRun(1, 'ord_1001')), /^select "id" from "runs" where \("runs"\."workflow_id" = \?/, /SEARCH runs USING INDEX runs_one_active_per_record \(workflow_id=\? AND record_id=\?\)/],
  // ── runs: the history's retention ──
  // The oldest finished runs in the order of `runs_finished_idx` (never a sort), deleted by primary key; the cascade
  // finds each run's events, callback deliveries, idempotency keys and steps by index.
  ['runs: retention: the oldest finished runs, deleted with their keys, steps and tasks', (db) => runOp(db, deleteFinishedRunBatch(0)), /^delete from "runs" where "runs"\."id" in \(select "id" from "runs"/, /^SEARCH runs USING COVERING INDEX sqlite_autoindex_runs_1 \(id=\?\) \| LIST SUBQUERY 1 \| SEARCH runs USING INDEX runs_finished_idx \(finished_at<\?\) \| SEARCH tasks USING COVERING INDEX tasks_run_step_unique \(run_id=\?\) \| SEARCH run_events USING COVERING INDEX run_events_run_sequence_idx \(run_id=\?\) \| SEARCH callback_deliveries USING COVERING INDEX callback_deliveries_run_idx \(run_id=\?\) \| SEARCH idempotency_keys USING COVERING INDEX idempotency_keys_run_idx \(run_id=\?\) \| SEARCH run_steps USING COVERING INDEX sqlite_autoindex_run_steps_1 \(run_id=\?\)$/],
  // ── runs: the list ──
  ['runs: page', runs({}), RUNS_PAGE, /^SEARCH runs USING COVERING INDEX runs_env_created_idx \(environment_id=\?\)$/],
  ['runs: console paging (before a run: found by id, then the walk below its createdAt)', runs({ beforeId: '0' }), RUNS_PAGE, /^SEARCH runs USING COVERING INDEX runs_env_created_idx \(environment_id=\? AND created_at<\?\) \| SCALAR SUBQUERY 1 \| SEARCH b USING INDEX sqlite_autoindex_runs_1 \(id=\?\) \| REUSE SUBQUERY 1$/],
  ['runs: recordId', runs({ recordId: 'ord_1001' }), RUNS_PAGE, /^SEARCH runs USING COVERING INDEX runs_env_record_created_idx \(environment_id=\? AND record_id=\?\)$/],
  ['runs: status (walks the environment)', runs({ status: 'failed' }), RUNS_PAGE, /^SEARCH runs USING INDEX runs_env_created_idx \(environment_id=\?\)$/],
  ['runs: workflowName (walks the environment)', runs({ workflowIds: [1, 2] }), RUNS_PAGE, /^SEARCH runs USING INDEX runs_env_created_idx \(environment_id=\?\)/],
  ['runs: user (walks the environment)', runs({ userId: 1 }), RUNS_PAGE, /^SEARCH runs USING INDEX runs_env_created_idx \(environment_id=\?\)$/],
  ['runs: createdAt', runs({}, { 'createdAt.lt': at }), RUNS_PAGE, /^SEARCH runs USING COVERING INDEX runs_env_created_idx \(environment_id=\? AND created_at<\?\)$/],
  ['runs: a bulk retry\'s failed runs no run retries (walks the environment)', runs({ status: 'failed', notRetried: true }), RUNS_PAGE, /^SEARCH runs USING INDEX runs_env_created_idx \(environment_id=\?\) \| CORRELATED SCALAR SUBQUERY \d+ \| SEARCH x USING COVERING INDEX runs_retry_of_idx \(retry_of=\?\)$/],
  ['runs: render a page: the run retrying each', (db) => runOp(db, loadRunsToRender(['a', 'b'])), /from "?runs"? r\b/i, /SEARCH o USING INDEX sqlite_autoindex_runs_1 \(id=\?\) LEFT-JOIN \| SEARCH x USING INDEX runs_retry_of_idx \(retry_of=\?\) LEFT-JOIN$/],
  ['runs: render a page, with steps', (db) => runOp(db, loadRunsToRender(['a', 'b'])), /from "?run_steps"?/i, /SEARCH run_steps USING INDEX sqlite_autoindex_run_steps_1 \(run_id=\?\)/],
  ['runs: render a page', (db) => runOp(db, loadRunsToRender(['a', 'b'])), /from "?runs"? r\b/i, /SEARCH (runs|r) USING INDEX sqlite_autoindex_runs_1 \(id=\?\)/],
  // ── tasks: the list and the inbox ──
  // A member's inbox walks their own assignments newest first — the tasks naming them, then those naming each of
  // their teams — each task found by its key in a sub-select of its own and tested by the decision index: never the
  // environment's open tasks (among which a member's may lie far apart), never a sort.
  // Workflow health (src/db/workflow-health.ts): a window walks the environment's runs created in it (its workflow's too), the open tasks their own index.
  ['health: runs per bucket (walks the window)', (db) => runOp(db, runsPerBucket({ environmentId: production, workflowId: 1 }, 0 as Micros, 3_600_000_000)), /FROM runs r WHERE r\.environment_id = \?/, /^SEARCH r USING INDEX runs_env_created_idx \(environment_id=\? AND created_at>\?\)/],
  ['health: runs per workflow (walks the window)', (db) => runOp(db, runsPerWorkflow(production, 0 as Micros)), /FROM runs r WHERE r\.environment_id = \?.*GROUP BY r\.workflow_id/s, /^SEARCH r USING INDEX runs_env_created_idx \(environment_id=\? AND created_at>\?\)/],
  ['health: the duration percentiles (walks the window)', (db) => runOp(db, runDurationPercentiles({ environmentId: production }, 0 as Micros)), /row_number\(\) OVER .* FROM runs r WHERE r\.environment_id = \?/s, /SEARCH r USING INDEX runs_env_created_idx \(environment_id=\? AND created_at>\?\)/],
  ['health: steps (the window\'s runs, each one\'s steps)', (db) => runOp(db, stepFigures({ environmentId: production }, 0 as Micros)), /FROM run_steps s/, /SEARCH r USING INDEX runs_env_created_idx \(environment_id=\? AND created_at>\?\).*SEARCH s USING INDEX sqlite_autoindex_run_steps_1 \(run_id=\?\)/],
  ['health: open tasks', (db) => runOp(db, countOpenTasks({ environmentId: production })), /FROM tasks k WHERE k\.environment_id = \?/, /^SEARCH k USING INDEX tasks_open_env_idx \(environment_id=\?\)$/],
  ['health: the longest-waiting open tasks', (db) => runOp(db, longestOpenTasks({ environmentId: production })), /FROM tasks k JOIN workflows w/, /^SEARCH k USING INDEX tasks_open_env_idx \(environment_id=\?\) \| SEARCH w USING INTEGER PRIMARY KEY \(rowid=\?\) \| SEARCH tm USING INTEGER PRIMARY KEY \(rowid=\?\)$/],
  ['health: open tasks per workflow', (db) => runOp(db, openTasksPerWorkflow(production)), /FROM tasks k WHERE .* GROUP BY k\.workflow_id/s, /^SEARCH k USING INDEX tasks_open_env_idx \(environment_id=\?\)/],
  ['tasks: page', tasks({}), TASKS_PAGE, /^SEARCH tasks USING COVERING INDEX tasks_env_created_idx \(environment_id=\?\)$/],
  ['tasks: a member\'s inbox (assignee=me): the tasks naming them', tasks({ status: 'open', visibleTo: 1, decidableBy: { userId: 1, asAdmin: false } }), TASKS_NAMING_USER,
    /^SEARCH task_assignees USING COVERING INDEX task_assignees_user_idx \(user_id=\?\) \| CORRELATED SCALAR SUBQUERY \d+ \| SEARCH tasks USING INDEX (tasks_open_env_idx \(environment_id=\? AND id=\?\)|sqlite_autoindex_tasks_1 \(id=\?\)) \| CORRELATED SCALAR SUBQUERY \d+ \| SEARCH x USING COVERING INDEX sqlite_autoindex_task_decisions_1 \(task_id=\? AND user_id=\?\)$/],
  ['tasks: a member\'s inbox (assignee=me): the tasks naming their teams', tasks({ status: 'open', visibleTo: 1, decidableBy: { userId: 1, asAdmin: false } }), TASKS_NAMING_TEAM,
    /^SEARCH task_assignees USING COVERING INDEX task_assignees_team_idx \(team_id=\?\) \| CORRELATED SCALAR SUBQUERY \d+ \| SEARCH tasks USING INDEX (tasks_open_env_idx \(environment_id=\? AND id=\?\)|sqlite_autoindex_tasks_1 \(id=\?\)) \| CORRELATED SCALAR SUBQUERY \d+ \| SEARCH x USING COVERING INDEX sqlite_autoindex_task_decisions_1 \(task_id=\? AND user_id=\?\)$/],
  // A person's inbox in the console, and the header's count: their own assignments and their teams', each walk
  // stopped at the page or the cap — never a scan of the open tasks of every environment they belong to.
  ['tasks: the console inbox (mine)', (db) => runOp(db, pageInboxTaskIds(1, false, { scope: 'mine' }, 10)), /^SELECT DISTINCT id, at FROM \(SELECT id, at FROM/, CONSOLE_INBOX_PLAN],
  ['tasks: the header\'s inbox count', (db) => runOp(db, countInboxTasks(1, false)), /^SELECT count\(DISTINCT id\)/, CONSOLE_INBOX_PLAN],
  // A task's assignees, read or deleted (the cascade from its run), through their own index: never a scan of every
  // task's assignees.
  ['tasks: render a page: the assignees', (db) => runOp(db, loadTasksToRender(['a', 'b'])), /FROM task_assignees a LEFT JOIN teams/, /^SEARCH a USING INDEX task_assignees_task_idx \(task_id=\?\)/],
  ['tasks: who to tell of a task', (db) => runOp(db, decidersToTell({ id: 'a', requesterId: 1, allowRequester: false })), /FROM task_assignees a LEFT JOIN team_members m/, /^SEARCH a USING INDEX task_assignees_task_idx \(task_id=\?\)/],
  ['tasks: a deleted run\'s task: its assignees (the statement of the foreign key\'s cascade)', (_, connection) => connection.prepare('DELETE FROM task_assignees WHERE task_id = ?'), /^DELETE FROM task_assignees WHERE task_id = \?$/,
    /^SEARCH task_assignees USING (COVERING )?INDEX task_assignees_task_idx \(task_id=\?\)$/],
  ['tasks: an admin\'s inbox (assignee=me; walks the environment\'s open tasks)', tasks({ status: 'open', decidableBy: { userId: 1, asAdmin: true } }), TASKS_PAGE,
    /^SEARCH tasks USING INDEX tasks_open_env_idx \(environment_id=\?\) \| CORRELATED SCALAR SUBQUERY \d+ \| SEARCH x USING COVERING INDEX sqlite_autoindex_task_decisions_1 \(task_id=\? AND user_id=\?\)$/],
  // ── activity logs ──
  ['activity: default page (extensions hidden)', activity({}), ACTIVITY_PAGE, /^SEARCH activity_logs USING COVERING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
  ['activity: extensions=true', activity({ extensions: true }), ACTIVITY_PAGE, /^SEARCH activity_logs USING COVERING INDEX activity_logs_env_id_idx \(environment_id=\?\)$/],
  ['activity: createdAt bound', activity({}, { 'createdAt.lt': at }), /^select "id" from "activity_logs" where .*"created_at" >= \?/, /^SEARCH activity_logs USING COVERING INDEX activity_logs_env_created_idx \(environment_id=\? AND created_at>\?\)$/],
  ['activity: createdAt page', activity({}, { 'createdAt.lt': at }), ACTIVITY_PAGE, /^SEARCH activity_logs USING COVERING INDEX activity_logs_env_documented_idx \(environment_id=\?( AND id<\?)?\)$/],
  ['activity: append (the chain head: its time and link)', (db) => runOp(db, insertActivityLog({ environmentId: production, type: 'write', action: 'update', label: null, userId: 1, teamId: null, collectionId: null, tokenId: null, workflowName: null, runId: null, stepName: null, extension: false }, ['r'], 0)), /^SELECT created_at, chain_position, chain_hash, [\s\S]* FROM activity_logs WHERE/, /^SEARCH activity_logs USING INDEX activity_logs_env_chain_idx \(environment_id=\? AND chain_position>\?\)/],
  ['admin: append to the instance chain (its head by position)', (db) => runOp(db, insertAdminLog({ projectId: null, type: 'add', resource: 'user', initiator: 'system', userId: null, subjectUserId: null, previousValue: null, newValue: null, extension: false }, 0)), /^SELECT created_at, chain_position, chain_hash, [\s\S]* FROM admin_logs WHERE/, /^SEARCH admin_logs USING INDEX admin_logs_scope_chain_idx \(<expr>=\? AND chain_position>\?\)/],
  ['activity: recordId', activity({ recordId: 'ord_1001' }), ACTIVITY_PAGE, /SEARCH activity_log_records USING COVERING INDEX activity_log_records_env_record_idx \(environment_id=\? AND record_id=\?\)/],
  ['activity: render the record ids', (db) => runOp(db, findActivityLogRecordIds([1, 2])), /from "?activity_log_records"?/i, /SEARCH activity_log_records USING (COVERING )?INDEX sqlite_autoindex_activity_log_records_1 \(log_id=\?\)/],
  ['activity: userId (walks the default page)', activity({ userId: 1 }), ACTIVITY_PAGE, /^SEARCH activity_logs USING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
  ['activity: teamName (walks the default page)', activity({ teamName: 'Support' }), ACTIVITY_PAGE, /^SEARCH activity_logs USING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
  ['activity: collectionName (walks the default page)', activity({ collectionName: 'orders' }), ACTIVITY_PAGE, /^SEARCH activity_logs USING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
  ['activity: type (walks the default page)', activity({ type: 'write' }), ACTIVITY_PAGE, /^SEARCH activity_logs USING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
  ['activity: action (walks the default page)', activity({ action: 'createNote' }), ACTIVITY_PAGE, /^SEARCH activity_logs USING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
  ['activity: an extension action (walks the environment)', activity({ action: 'failWorkflow' }), ACTIVITY_PAGE, /^SEARCH activity_logs USING INDEX activity_logs_env_id_idx \(environment_id=\?\)$/],
  // ── notes ──
  ['notes: page', notes({}), NOTES_PAGE, /^SEARCH notes USING COVERING INDEX notes_env_id_idx \(environment_id=\?\)$/],
  ['notes: recordId', notes({ recordId: 'ord_1001' }), NOTES_PAGE, /^SEARCH notes USING COVERING INDEX notes_env_record_idx \(environment_id=\? AND record_id=\?\)$/],
  ['notes: userEmail', notes({ userId: 1 }), NOTES_PAGE, /^SEARCH notes USING COVERING INDEX notes_env_user_idx \(environment_id=\? AND user_id=\?\)$/],
  ['notes: teamName', notes({ teamName: 'Support' }), NOTES_PAGE, /^SEARCH notes USING COVERING INDEX notes_env_team_idx \(environment_id=\? AND team_id=\?\)$/],
  ['notes: collectionName', notes({ collectionName: 'orders' }), NOTES_PAGE, /^SEARCH notes USING COVERING INDEX notes_env_collection_idx \(environment_id=\? AND collection_id=\?\)$/],
  ['notes: createdAt bound', notes({}, { 'createdAt.lt': at }), /^select "id" from "notes" where .*"created_at" >= \?/, /^SEARCH notes USING COVERING INDEX notes_env_created_idx \(environment_id=\? AND created_at>\?\)$/],
  ['notes: updatedAt', notes({}, { 'updatedAt.gt': at }), NOTES_PAGE, /^SEARCH notes USING COVERING INDEX notes_env_updated_idx \(environment_id=\? AND updated_at>\?\)/],
  ['notes: archivedAt', notes({}, { 'archivedAt.gt': at }), NOTES_PAGE, /^SEARCH notes USING COVERING INDEX notes_env_archived_idx \(environment_id=\? AND archived_at>\?\)/],
  ['notes: create (latest createdAt)', (db) => runOp(db, nextNoteCreatedAt(production, 0)), /^select max\("created_at"\) from "notes"/, /SEARCH notes USING COVERING INDEX notes_env_created_idx \(environment_id=\?\)/],
  ['notes: create (dated in the insert)', (db) => runOp(db, insertNewNote({ environmentId: production, teamId: 1, collectionId: 1, recordId: 'ord_1001', title: 't', userId: 1 }, 0, null)), /^insert into "notes"/, /SEARCH notes USING COVERING INDEX notes_env_created_idx \(environment_id=\?\)/],
  ['notes: render the threads', (db) => runOp(db, findNoteMessagesForRender([1, 2])), /from "?note_messages"?/i, /SEARCH (note_messages|m) USING INDEX note_messages_note_idx \(note_id=\?\)/],
  // ── admin logs (written by administrative acts only: every filter keeps its seek) ──
  ['admin: default page', admin({}), ADMIN_PAGE, /^SEARCH admin_logs USING COVERING INDEX admin_logs_project_documented_idx \(project_id=\?\)$/],
  ['admin: extensions=true', admin({ extensions: true }), ADMIN_PAGE, /^SEARCH admin_logs USING COVERING INDEX admin_logs_project_id_idx \(project_id=\?\)$/],
  ['admin: createdAt bound', admin({}, { 'createdAt.lt': at }), /^select "id" from "admin_logs" where .*"created_at" >= \?/, /^SEARCH admin_logs USING COVERING INDEX admin_logs_project_created_idx \(project_id=\? AND created_at>\?\)$/],
  ['admin: userId', admin({ userId: 1 }), ADMIN_PAGE, /^SEARCH admin_logs USING INDEX admin_logs_project_user_idx \(project_id=\? AND user_id=\?\)$/],
  ['admin: type', admin({ type: 'add' }), ADMIN_PAGE, /^SEARCH admin_logs USING INDEX admin_logs_project_type_idx \(project_id=\? AND type=\?\)$/],
  ['admin: resource', admin({ resource: 'team' }), ADMIN_PAGE, /^SEARCH admin_logs USING INDEX admin_logs_project_resource_idx \(project_id=\? AND resource=\?\)$/],
  ['admin: initiator', admin({ initiator: 'system' }), ADMIN_PAGE, /^SEARCH admin_logs USING INDEX admin_logs_project_initiator_idx \(project_id=\? AND initiator=\?\)$/],
  // ── run events (an event per transition and step: src/db/run-events.ts) ──
  ['run events: an environment\'s after an id (a feed, a stream reading on its own)', (db) => runOp(db, environmentEventsAfter(production, 7)), ENVIRONMENT_EVENTS, /^SEARCH e USING INDEX run_events_env_id_idx \(environment_id=\? AND id>\?\)/],
  // A filtered read (a stream catching up) first fixes its range, the next SCAN_ROWS events, on the index alone, then
  // walks that range whatever the filter: bounded for every filter, never a sort.
  ['run events: a filtered read\'s range', filteredEvents({ userId: 2 }), /FROM \(SELECT id FROM run_events WHERE environment_id = /, /SEARCH run_events USING COVERING INDEX run_events_env_id_idx \(environment_id=\? AND id>\?\)/],
  ['run events: filtered by user (a member\'s stream: walks the range)', filteredEvents({ userId: 2 }), FILTERED_EVENTS, /^SEARCH e USING INDEX run_events_env_id_idx \(environment_id=\? AND id>\? AND id<\?\) \|/],
  ['run events: a member\'s task events (the event\'s task and its assignees, each by index)', filteredEvents({ userId: 2 }), FILTERED_EVENTS, /SEARCH k USING INDEX tasks_run_step_unique \(run_id=\? AND step_index=\?\) \| SEARCH a EXISTS USING INDEX task_assignees_task_idx \(task_id=\?\) \| LIST SUBQUERY \d+ \| SEARCH team_members USING INDEX team_members_user_idx \(user_id=\?\)/],
  ['run events: who sees a feed page\'s task events (its tasks\' assignees, teams as their members)', (db) => runOp(db, assigneeUsersOf(['t1', 't2'])), /FROM task_assignees a JOIN team_members m/,
    /^COMPOUND QUERY \| LEFT-MOST SUBQUERY \| SEARCH a USING COVERING INDEX task_assignees_team_unique \(task_id=\? AND team_id>\?\) \| .*SEARCH m USING COVERING INDEX sqlite_autoindex_team_members_1 \(team_id=\?\) \| UNION ALL \| SEARCH a USING COVERING INDEX task_assignees_user_unique \(task_id=\? AND user_id>\?\)/],
  ['run events: filtered by workflow, record and user (walks the range)', filteredEvents({ workflowIds: [1], recordId: 'r', userId: 2 }), FILTERED_EVENTS, /^SEARCH e USING INDEX run_events_env_id_idx \(environment_id=\? AND id>\? AND id<\?\) \|/],
  ['run events: a run\'s after an id', (db) => runOp(db, runEventsAfter('r', 7)), /WHERE e\.run_id = /, /SEARCH e USING INDEX run_events_run_sequence_idx \(run_id=\?\) \| SEARCH w /],
  ['run events: a run\'s newest sequence (each append)', (db) => insertRunEvents.sqlite(db, [productionEvent]), /^SELECT max\(sequence\) AS n FROM run_events/, /^SEARCH run_events USING COVERING INDEX run_events_run_sequence_idx \(run_id=\?\)$/],
  ['run events: an environment\'s newest (a stream from now)', (db) => runOp(db, latestEventId(production)), /FROM run_events WHERE environment_id = /, /^SEARCH run_events USING COVERING INDEX run_events_env_id_idx \(environment_id=\?\)$/],
  // ── records ──
  ['records: the purge walks the deleted records oldest first', (db) => runOp(db, purgeDeletedRecordBatch(0)), /^delete from "records" where "records"\."id" in \(select "id" from "records"/, /SEARCH records USING COVERING INDEX records_deleted_idx \(deleted_at>\? AND deleted_at<\?\)$/],
  // ── schedules (the ticker of every instance reads these at least once a second) ──
  ['schedules: the due ones', (db) => runOp(db, dueSchedules(0, 20)), /from "workflow_schedules" where "workflow_schedules"\."next_fire_at" <= /, /^SEARCH workflow_schedules USING INDEX workflow_schedules_due_idx \(next_fire_at<\?\)$/],
  ['schedules: the next fire time', (db) => runOp(db, nextScheduleFireAt()), /from "workflow_schedules" where "workflow_schedules"\."next_fire_at" IS NOT NULL/, /^SEARCH workflow_schedules USING COVERING INDEX workflow_schedules_due_idx \(next_fire_at>\?\)$/],
  ['schedules: abandoned ticks', (db) => runOp(db, abandonedTickIds(0, 20)), /from "schedule_ticks" where/, /^SEARCH schedule_ticks USING INDEX schedule_ticks_open_idx \(lease_expires_at<\?\)$/],
  ['schedules: the soonest lease expiry of an open tick', (db) => runOp(db, nextTickLeaseExpiry()), /^select "lease_expires_at" from "schedule_ticks"/, /^SCAN schedule_ticks USING INDEX schedule_ticks_open_idx$/],
  ['schedules: a workflow\'s last tick', (db) => runOp(db, lastTickOf(1)), /from "schedule_ticks" where "schedule_ticks"\."workflow_id" = /, /^SEARCH schedule_ticks USING INDEX schedule_ticks_workflow_fire_unique \(workflow_id=\?\)$/],
  ['records: a record by its key', (db) => runOp(db, findRecordByKey({ environmentId: production, collectionId: 1 }, 'ord_1001')), /from "records"/, /SEARCH records USING INDEX records_env_collection_key_unique \(environment_id=\? AND collection_id=\? AND record_key=\?\)/],
]

describe('query plans (EXPLAIN QUERY PLAN of the real statements)', () => {
  test.each(CASES)('%s', (name, work, statement, plan) => {
    const texts = statementsOf(work).filter((text) => statement.test(text))
    expect({ name, found: texts.length > 0 }).toEqual({ name, found: true })
    const plans = texts.map(planOf)
    if (process.env.SHOW_PLANS) console.log(`PLAN ${name}:\n  ${plans.join('\n  ')}`)
    expect({ name, plans }).toEqual({ name, plans: expect.arrayContaining([expect.stringMatching(plan)]) })
    for (const detail of plans.flatMap((p) => p.split(' | '))) {
      // Never a bare scan of a table, never a sort of every matching row of a page.
      expect({ name, detail }).not.toEqual({ name, detail: expect.stringMatching(/^SCAN (runs|run_steps|activity_logs|activity_log_records|notes|note_messages|admin_logs|records)$/) })
      if (statement === RUNS_PAGE || statement === TASKS_NAMING_USER || statement === TASKS_NAMING_TEAM || statement === ACTIVITY_PAGE || statement === ADMIN_PAGE || statement === FILTERED_EVENTS || (statement === NOTES_PAGE && !/updated|archived/.test(name))) {
        expect({ name, detail }).not.toEqual({ name, detail: expect.stringContaining('TEMP B-TREE') })
      }
    }
  })

  test('every index on the hot tables is used by a plan above or enforces a constraint, and nothing else is there', () => {
    const indexes = (
      env.store.sqlite
        .prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN (${HOT_TABLES.map(() => '?').join(', ')}) ORDER BY name`)
        .all(...HOT_TABLES) as { name: string }[]
    ).map((r) => r.name)
    const proven = new Set(CASES.flatMap(([, , , plan]) => [...plan.source.matchAll(/INDEX (\w+)/g)].map((m) => m[1]!)))
    const unaccounted = indexes.filter((name) => !proven.has(name) && !(name in CONSTRAINTS))
    expect(unaccounted).toEqual([])
    // The dropped ones stay dropped: no plan needed them (docs/performance.md "Performance" gives what those filters cost now).
    for (const dropped of ['runs_env_id_idx', 'runs_env_workflow_idx', 'runs_env_status_idx', 'activity_logs_env_user_idx', 'activity_logs_env_team_idx', 'activity_logs_env_collection_idx', 'activity_logs_env_action_idx', 'activity_logs_env_type_idx']) {
      expect(indexes).not.toContain(dropped)
    }
  })
})

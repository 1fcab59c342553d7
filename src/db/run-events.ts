/**
 * A run's events (docs/workflows.md "Run events (SSE)"): every transition of a run from its start on and every step
 * outcome appends an event in the transition's own transaction — all of a transaction's events at once, the last thing it writes — with
 * a global id (the SSE `id:`) and a per-run `sequence` (1, 2, …: the run's newest + 1).
 * Readers page from an id: an environment's events (`run_events_env_id_idx`; a filtered read examines a bounded range of
 * them) or one run's.
 *
 * The order readers rely on: within an environment, an event with a greater id never becomes readable before one with
 * a smaller id, so a reader that has seen every event up to id N and asks for `id > N` misses none. SQLite's one writer
 * commits in id order. On PostgreSQL ids are taken from a sequence at insert, under no lock, while transactions commit
 * in another order: every read is bounded by the run events' watermark (`listed`, ./postgres/list-watermark.ts),
 * which moves only over ids no transaction can still commit, and a reader first has the watermark moved over what was
 * committed before it asked (`Store.awaitListed`). A run's own events are appended one transaction at a time
 * (its row locked first: `insertRunEvents`), so its `sequence` follows its ids.
 *
 * After the commit of a transaction that appended events, the environments it wrote to are announced to this
 * process's listeners (./run-event-commits.ts `onRunEventsCommitted`: the SSE hub) and, on PostgreSQL, to the other
 * instances (./postgres/run-events.ts: a NOTIFY after the commit, one for many commits under load).
 */
import { sql } from 'drizzle-orm'
import { type Micros, microsFromMillis } from '../lib/time.ts'
import type { RunStatus } from '../lib/run-statuses.ts'
import type { Db, Dialect } from './dialect.ts'
import { type Op, plan, runPlan } from './op.ts'
import { absent, rawNumber } from './pages.ts'
import type { PgDb } from './postgres/client.ts'
import { noteRunEventsAppended, runsNotLocked, sendRaw } from './postgres/monotonic.ts'
import { statementOn } from './sqlite/prepared.ts'
import { statement } from './query.ts'
import { namesAsAssignee } from './tasks.ts'
import { noteAppendedEvents } from './run-event-commits.ts'

/**
 * What happened to a run: its start (the first claim), a resumption (a later claim: after a `wait`, after recovery
 * or a give-back), its return to the queue (`run.requeued`: a lease expired, a graceful stop), each step's outcome
 * (`step.waiting`: a `wait` or `task` step parked the run), its end, and what happens to the task a `task` step
 * opened (`task.opened`, each `task.decided`, `task.escalated` at a deadline, `task.closed`: the run's status at that moment). Being queued is no event: it would cost every trigger
 * an insert (docs/workflows.md "Run events (SSE)" has the measure); `run.started` tells how the run was started.
 */
export const RUN_EVENT_TYPES = [
  'run.started',
  'run.resumed',
  'run.requeued',
  'step.succeeded',
  'step.waiting',
  'step.failed',
  'run.succeeded',
  'run.failed',
  'run.cancelled',
  'task.opened',
  'task.decided',
  'task.escalated',
  'task.closed',
] as const
export type RunEventType = (typeof RUN_EVENT_TYPES)[number]

/** The events about a run's task (their `data.taskId` names it; their step is the task's). */
export const TASK_EVENT_TYPES = RUN_EVENT_TYPES.filter((type) => type.startsWith('task.'))
const isTaskEvent = () => sql.raw(`e.type IN (${TASK_EVENT_TYPES.map((type) => `'${type}'`).join(', ')})`)

/** The task a task event is about (its `data.taskId`), or null for any other event. */
export function taskIdOf(event: Pick<StoredRunEvent, 'type' | 'data'>): string | null {
  if (!TASK_EVENT_TYPES.includes(event.type) || event.data === null) return null
  const taskId = (JSON.parse(event.data) as { taskId?: unknown }).taskId
  return typeof taskId === 'string' ? taskId : null
}

/** The events after which a run changes no more: its stream ends with one of them. */
export const TERMINAL_RUN_EVENTS: readonly RunEventType[] = ['run.succeeded', 'run.failed', 'run.cancelled']

/** The run an event is about, as stored on the event (copied so that an environment's stream filters without a join). */
export interface EventSubject {
  runId: string
  environmentId: number
  workflowId: number
  recordId: string
}

/** An event to append: its run, type, the run's status once the event happened, the step (step events) and the rest. */
export interface NewRunEvent extends EventSubject {
  type: RunEventType
  status: RunStatus
  stepIndex?: number | null
  stepName?: string | null
  /** What else it tells (an error's code and message, a wait's end…), as JSON; never a secret. */
  data?: Record<string, unknown> | null
  /** When it happened (epoch ms). */
  at: number
  /**
   * Its place among the run's events, where the writer knows it: a run's first claim (its first event: a run is queued
   * without one) and the executor holding the run, which counts the events it wrote. Otherwise the insert reads the
   * run's newest. Either every event of a run in one append carries it, or none does.
   */
  sequence?: number
}

/** The subject of a `runs` row as the queue hands it over (column names as stored). */
export const subjectOfRow = (run: { id: string; environment_id: number; workflow_id: number; record_id: string }): EventSubject => ({
  runId: run.id,
  environmentId: run.environment_id,
  workflowId: run.workflow_id,
  recordId: run.record_id,
})

/** Appends `events` (in order) in the op's transaction: one insert. Call it last, after every other write of the transaction. */
export function* appendRunEvents(events: readonly NewRunEvent[]): Op<void> {
  if (events.length > 0) yield* runPlan(insertRunEvents, events)
}

/**
 * `body` with the events it collects appended at its end (after everything it wrote), in one insert. `newest`: the
 * number of events the run they are all about has so far, where the writer knows it (they follow it).
 */
export function* withRunEvents<T>(body: (events: NewRunEvent[]) => Op<T>, newest?: number): Op<T> {
  const events: NewRunEvent[] = []
  const answer = yield* body(events)
  if (newest !== undefined) events.forEach((event, i) => (event.sequence = newest + i + 1))
  yield* appendRunEvents(events)
  return answer
}

/** An event's `data` as stored (JSON text), and its time in µs. */
const storedDataOf = (event: NewRunEvent): string | null => (event.data == null ? null : JSON.stringify(event.data))

const NEWEST_SEQUENCE = 'SELECT max(sequence) AS n FROM run_events WHERE run_id = ?'
const EVENT_COLUMNS = 11
/** The most events one SQLite insert writes (an append of more takes several). */
const EVENTS_PER_INSERT = 8
/** `INSERT_EVENTS[n - 1]` inserts n events. */
const INSERT_EVENTS = Array.from(
  { length: EVENTS_PER_INSERT },
  (_, last) =>
    `INSERT INTO run_events (run_id, environment_id, workflow_id, record_id, sequence, type, status, step_index, step_name, data, created_at)
  VALUES ${Array.from({ length: last + 1 }, () => `(${Array(EVENT_COLUMNS).fill('?').join(', ')})`).join(', ')}`,
)

/** The events, in order, each with its sequence: the one it carries, or its run's newest + its place among them. */
export const insertRunEvents = plan({
  sqlite: insertRunEventsOnSqlite,
  postgres: insertRunEventsOnPostgres,
  why: "PostgreSQL's writers append at once: each locks its events' runs first, so that a run's sequence (its newest + 1) is read after the run's previous append committed; SQLite's one writer appends one transaction at a time",
})

/**
 * SQLite's insert of the events, in order: one statement per EVENTS_PER_INSERT events. A run's sequence is carried by
 * its events where the writer knows it, else its newest is read once (`run_events_run_sequence_idx`): no per-event
 * max(sequence) read on the executor's path. Rows bound as values, not one INSERT … SELECT over a JSON array:
 * SQLite copies a statement that reads its own table into a temporary table first.
 */
function insertRunEventsOnSqlite(db: Db, events: readonly NewRunEvent[]): void {
  const newest = statementOn(db, 'run-events.newest', NEWEST_SEQUENCE)
  const sequences = new Map<string, number>()
  const values: unknown[] = []
  for (const e of events) {
    const sequence = e.sequence ?? (sequences.get(e.runId) ?? ((newest.get(e.runId) as { n: number | null } | null)?.n ?? 0)) + 1
    sequences.set(e.runId, sequence)
    values.push(e.runId, e.environmentId, e.workflowId, e.recordId, sequence, e.type, e.status, e.stepIndex ?? null, e.stepName ?? null, storedDataOf(e), microsFromMillis(e.at))
  }
  for (let from = 0; from < events.length; from += EVENTS_PER_INSERT) {
    const rows = Math.min(EVENTS_PER_INSERT, events.length - from)
    statementOn(db, `run-events.insert.${rows}`, INSERT_EVENTS[rows - 1]!).run(...(values.slice(from * EVENT_COLUMNS, (from + rows) * EVENT_COLUMNS) as never[]))
  }
  noteAppendedEvents(db, events)
}

/**
 * PostgreSQL's: the events, after their runs' rows are locked (ascending: a claim appends to several), so that two
 * appends to one run take their sequences one after the other; the environments are announced after the commit
 * (./postgres/op-runner.ts). Ids come from the table's default (`trellis_sequenced_id`: after the transaction's id, as
 * the watermark requires). Each sequence: the one the event carries, or the run's newest before this statement plus
 * the event's offset (COALESCE reads the newest only for an event without one). The rows are ordered in a sub-select
 * (never flattened: it sorts), so the ids the sequence hands out follow the array's order. The lock is a statement
 * of its own: READ COMMITTED takes a statement's snapshot when it starts, so an insert that waited for a lock inside
 * itself would not see the events its predecessor committed meanwhile (the connection runs the two in the order sent,
 * the insert's snapshot taken once the lock is held). A run whose row this transaction updated already (a claim's
 * start, a guarded transition sent before the append: ./op.ts `QueryCall.holdsRun`) is held by it: no lock statement
 * for that run, the insert queued behind the update on the connection.
 */
async function insertRunEventsOnPostgres(db: PgDb, events: readonly NewRunEvent[]): Promise<void> {
  const environments = [...new Set(events.map((e) => e.environmentId))].sort((a, b) => a - b)
  const runs = runsNotLocked(db, [...new Set(events.map((e) => e.runId))].sort())
  // Both sent at once, their answers read with the write's COMMIT: a step group appends its events last.
  const locked = runs.length === 0 ? null : runs.length === 1 ? sendRaw(db, LOCK_RUN, [runs[0]]) : sendRaw(db, LOCK_RUNS, [runs])
  const inserted = sendRaw(db, INSERT_EVENTS_FROM_JSON, [eventRowsJson(events)])
  await Promise.all([locked, inserted])
  noteRunEventsAppended(db, environments)
}

const LOCK_RUNS = 'SELECT 1 FROM runs WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE'
/**
 * One run's (a transition's): PostgreSQL plans a statement over an array anew at each call (a custom plan for the
 * array's size always looks cheaper than the generic one), and one with `= $1` once per connection.
 */
const LOCK_RUN = 'SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE'

/** The events as the insert's one JSON parameter: an array per event, with its place among this insert's events of its run (1, 2, …) and its sequence if it carries one. */
function eventRowsJson(events: readonly NewRunEvent[]): string {
  const perRun = new Map<string, number>()
  return JSON.stringify(
    events.map((e) => {
      const offset = (perRun.get(e.runId) ?? 0) + 1
      perRun.set(e.runId, offset)
      return [e.runId, e.environmentId, e.workflowId, e.recordId, offset, e.type, e.status, e.stepIndex ?? null, e.stepName ?? null, storedDataOf(e), microsFromMillis(e.at), e.sequence ?? null]
    }),
  )
}

const INSERT_EVENTS_FROM_JSON = `INSERT INTO run_events (run_id, environment_id, workflow_id, record_id, sequence, type, status, step_index, step_name, data, created_at)
  SELECT e.v ->> 0, (e.v ->> 1)::int8, (e.v ->> 2)::int8, e.v ->> 3,
    coalesce((e.v ->> 11)::int8, coalesce((SELECT max(x.sequence) FROM run_events x WHERE x.run_id = e.v ->> 0), 0) + (e.v ->> 4)::int8),
    e.v ->> 5, e.v ->> 6, (e.v ->> 7)::int8, e.v ->> 8, e.v ->> 9, (e.v ->> 10)::int8
  FROM (SELECT v, n FROM jsonb_array_elements($1::text::jsonb) WITH ORDINALITY AS a(v, n) ORDER BY n) e`

// ── Reading ───────────────────────────────────────────────────────────────────

/** An event as stored, with its run's user (who may see it) and its workflow's name. */
export interface StoredRunEvent {
  id: number
  runId: string
  sequence: number
  type: RunEventType
  status: RunStatus
  workflowId: number
  workflowName: string
  recordId: string
  stepIndex: number | null
  stepName: string | null
  /** JSON text, or null. */
  data: string | null
  createdAt: Micros
  /** The user the run acts as (it triggered or retried it). */
  userId: number
}

/** Events a page reads at most. */
export const EVENT_PAGE = 100

const eventColumns = (d: Dialect) => {
  const n = rawNumber(d)
  return sql`${n('e.id')}, e.run_id, ${n('e.sequence')}, e.type, e.status, ${n('e.workflow_id')}, w.name, e.record_id, ${n('e.step_index')}, e.step_name,
    e.data, ${n('e.created_at')}, ${n('r.user_id')}`
}

const eventOf = (row: unknown[]): StoredRunEvent => {
  const [id, runId, sequence, type, status, workflowId, workflowName, recordId, stepIndex, stepName, data, createdAt, userId] = row
  return { id, runId, sequence, type, status, workflowId, workflowName, recordId, stepIndex, stepName, data, createdAt, userId } as StoredRunEvent
}


const ENVIRONMENT_EVENTS = statement('run-events.environment', (d) =>
  d.valueRows(sql`SELECT ${eventColumns(d)}
  FROM run_events e JOIN runs r ON r.id = e.run_id JOIN workflows w ON w.id = e.workflow_id
  WHERE e.environment_id = ${sql.placeholder('environmentId')} AND e.id > ${sql.placeholder('after')} AND ${d.listed('run_events', sql.raw('e.id'))}
  ORDER BY e.id LIMIT ${sql.raw(String(EVENT_PAGE))}`),
)

/** The environment's next events after id `after`, oldest first, at most EVENT_PAGE (walks `run_events_env_id_idx`): a feed's read. */
export function* environmentEventsAfter(environmentId: number, after: number): Op<StoredRunEvent[]> {
  return ((yield* ENVIRONMENT_EVENTS.rows({ environmentId, after })) as unknown[][]).map(eventOf)
}

/** Which of an environment's events a reader wants (each absent: any). */
export interface EnvironmentEventFilter {
  workflowIds?: readonly number[]
  recordId?: string
  /**
   * Only what this member sees: the events of runs acting as them, and the task events (`task.*`) of the tasks that
   * name them or one of their teams among the assignees (as `GET /v1/tasks/{id}` decides).
   */
  userId?: number
}

/**
 * Events a filtered read (a stream catching up) examines at most: under a millisecond of SQLite's time whatever the
 * filter matches, where a filter that matches little would otherwise walk the environment's whole history in one read.
 */
export const SCAN_ROWS = 1_000

/** A read of a stream on its own: its events, the id it examined the environment (or run) through, and whether it reached the newest. */
export interface EventsPage {
  events: StoredRunEvent[]
  /** The last event the read examined, delivered or not (`after` when none): the next read starts after it. */
  through: number
  /** Every event committed before the read began was examined: from here on the stream follows its feed. */
  atEnd: boolean
}

/** A page of every event after `after` (no filter): it examined its events alone, and reached the end when not full. */
const wholePage = (events: StoredRunEvent[], after: number): EventsPage => ({ events, through: events.at(-1)?.id ?? after, atEnd: events.length < EVENT_PAGE })

/** The environment's next SCAN_ROWS events after `after` (their index entries alone): the last one's id and how many. */
const SCAN_WINDOW = statement('run-events.scan-window', (d) =>
  d.valueRows(sql`SELECT ${rawNumber(d)('max(id)')}, ${rawNumber(d)('count(*)')}
  FROM (SELECT id FROM run_events WHERE environment_id = ${sql.placeholder('environmentId')} AND id > ${sql.placeholder('after')} AND ${d.listed('run_events', sql.raw('id'))}
    ORDER BY id LIMIT ${sql.raw(String(SCAN_ROWS))}) window_ids`),
)

/**
 * The events of a range the scan window fixed that match the filter, walked from the range's end points
 * (`run_events_env_id_idx`): SQLite has no other way in (no index of runs by user), and PostgreSQL starts from the
 * runs instead only where it costs less (a user with few runs, in a small table of runs).
 */
const FILTERED_EVENTS = statement('run-events.environment-filtered', (d) =>
  d.valueRows(sql`SELECT ${eventColumns(d)}
  FROM run_events e JOIN runs r ON r.id = e.run_id JOIN workflows w ON w.id = e.workflow_id
  WHERE e.environment_id = ${sql.placeholder('environmentId')} AND e.id > ${sql.placeholder('after')} AND e.id <= ${sql.placeholder('through')}
    AND (${absent('workflowIds', 'text')} OR ${d.inJsonArray(sql.raw('e.workflow_id'), 'workflowIds', 'integer')})
    AND (${absent('recordId', 'text')} OR e.record_id = ${sql.placeholder('recordId')})
    AND (${absent('userId', 'int8')} OR r.user_id = ${sql.placeholder('userId')} OR (${isTaskEvent()}
      AND EXISTS (SELECT 1 FROM tasks k WHERE k.run_id = e.run_id AND k.step_index = e.step_index AND ${namesAsAssignee(sql.raw('k.id'), 'userId')})))
  ORDER BY e.id LIMIT ${sql.raw(String(EVENT_PAGE))}`),
)

/**
 * A stream's read of its environment on its own: the next events after id `after` that match `filter`, oldest first,
 * at most EVENT_PAGE. Unfiltered, a page examines only what it returns. Filtered, it examines at most the next
 * SCAN_ROWS events (`run_events_env_id_idx`, its range fixed first): a filter that matches little or nothing answers
 * few events or none, and `through` passes over those it examined, so that the next read goes on from there. The
 * range's end is an event already visible, and within an environment no event with a smaller id becomes visible
 * after it, so the second statement sees every event of the range that the first did (or, deleted meanwhile, fewer).
 */
export function* environmentEventsPage(environmentId: number, after: number, filter: EnvironmentEventFilter = {}): Op<EventsPage> {
  const { workflowIds, recordId, userId } = filter
  if (workflowIds === undefined && recordId === undefined && userId === undefined) return wholePage(yield* environmentEventsAfter(environmentId, after), after)
  const [window] = (yield* SCAN_WINDOW.rows({ environmentId, after })) as unknown[][]
  const [last, examined] = window as [number | null, number]
  if (last === null) return { events: [], through: after, atEnd: true }
  const rows = (yield* FILTERED_EVENTS.rows({
    environmentId,
    after,
    through: last,
    workflowIds: workflowIds === undefined ? null : JSON.stringify(workflowIds),
    recordId: recordId ?? null,
    userId: userId ?? null,
  })) as unknown[][]
  const events = rows.map(eventOf)
  // A full page ends at its last event: the range's rest is read next.
  if (events.length === EVENT_PAGE) return { events, through: events.at(-1)!.id, atEnd: false }
  return { events, through: last, atEnd: examined < SCAN_ROWS }
}

const RUN_EVENTS = statement('run-events.run', (d) =>
  d.valueRows(sql`SELECT ${eventColumns(d)}
  FROM run_events e JOIN runs r ON r.id = e.run_id JOIN workflows w ON w.id = e.workflow_id
  WHERE e.run_id = ${sql.placeholder('runId')} AND e.id > ${sql.placeholder('after')} AND ${d.listed('run_events', sql.raw('e.id'))}
  ORDER BY e.sequence LIMIT ${sql.raw(String(EVENT_PAGE))}`),
)

/** The run's next events after id `after`, in their order, at most EVENT_PAGE (`run_events_run_sequence_idx`). */
export function* runEventsAfter(runId: string, after: number): Op<StoredRunEvent[]> {
  return ((yield* RUN_EVENTS.rows({ runId, after })) as unknown[][]).map(eventOf)
}

/** A run's stream's read on its own: `runEventsAfter` as a page. */
export function* runEventsPage(runId: string, after: number): Op<EventsPage> {
  return wholePage(yield* runEventsAfter(runId, after), after)
}

const LATEST_EVENT = statement('run-events.latest', (d) =>
  d.valueRows(sql`SELECT ${rawNumber(d)('max(id)')} FROM run_events WHERE environment_id = ${sql.placeholder('environmentId')} AND ${d.listed('run_events', sql.raw('id'))}`),
)

/** The environment's newest event id (0 when it has none): where a stream that starts now starts from. */
export function* latestEventId(environmentId: number): Op<number> {
  const [row] = (yield* LATEST_EVENT.rows({ environmentId })) as unknown[][]
  return (row?.[0] as number | null | undefined) ?? 0
}

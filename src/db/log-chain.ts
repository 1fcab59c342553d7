/**
 * The chained logs' appends (docs/audit.md): activity and admin entries are written here only, each with its
 * position and hash in its scope's chain (src/lib/audit-chain.ts), in the transaction of the change it records. The
 * scope's head is read with its newest time under the scope's hold (./monotonic.ts `nextChainedEntries`: in commit
 * order on PostgreSQL's many writers), and each entry is hashed with its id before it is inserted — the append-only
 * triggers refuse setting anything afterwards —, so an entry never exists without its link. PostgreSQL's activity
 * entries are the exception: its lists' pass chains them in id order once no earlier id can still commit, and
 * every read of the log stops where the pass has reached (the list's watermark), so none is read unchained.
 */
import { type ActivityChainFields, type AdminChainFields, type ChainLink, activityChainTail, canonicalActivityEntry, canonicalAdminEntry, linkHash } from '../lib/audit-chain.ts'
import type { Micros } from '../lib/time.ts'
import type { Db } from './dialect.ts'
import { chainedEntriesWritten, nextChainedEntries, nextIdsOnSqlite } from './monotonic.ts'
import { type Op, plan, runPlan } from './op.ts'
import type { TimeOrderedList } from './pages.ts'
import type { PgDb } from './postgres/client.ts'
import { PG_LISTS, sendRaw, takeIds } from './postgres/monotonic.ts'
import type { adminLogs } from './schema.ts'
import { statementOn } from './sqlite/prepared.ts'

/** A new activity entry's stored fields (./activity-logs.ts `insertActivityLog`): what the chain encodes but its place and id. */
export interface NewActivityLogRow extends Omit<ActivityChainFields, 'position' | 'id' | 'createdAt' | 'recordIds' | 'type'> {
  type: 'read' | 'write'
}

type AdminLogRow = typeof adminLogs.$inferSelect

/** A new admin entry's stored fields (./admin-logs.ts `insertAdminLog`): what the chain encodes but its place and id. */
export interface NewAdminLogRow extends Omit<AdminChainFields, 'position' | 'id' | 'createdAt' | 'type' | 'initiator'> {
  type: AdminLogRow['type']
  initiator: AdminLogRow['initiator']
}

/** An entry to append: an activity entry with its record ids (distinct), or an admin entry. */
export type ChainedEntry = { log: 'activity'; entry: NewActivityLogRow; recordIds: string[] } | { log: 'admin'; entry: NewAdminLogRow }

/** An entry at its time and position. */
type Placed = ChainedEntry & { createdAt: Micros; position: number }

/**
 * Appends entries of one scope of one log, dated one after another (as as many `nextCreatedAt` calls would) and
 * chained on from the scope's head in the order given. On PostgreSQL an admin entry's id is drawn from the log's
 * sequence with the head, under the scope's lock (`reserve`): ids rise with positions; activity entries are chained
 * after their commit by the lists' pass, in id order (`insertOnPostgres`): here they only propose their times.
 */
export function* appendChained(list: TimeOrderedList, scopeValue: number | null, entries: readonly ChainedEntry[], now: number): Op<void> {
  const { createdAt: first, head } = yield* nextChainedEntries(list, scopeValue, now, entries.length)
  const placed = entries.map((entry, i): Placed => ({ ...entry, createdAt: (first + i) as Micros, position: (head?.position ?? 0) + i + 1 }))
  const { link } = yield* runPlan(insertChainedEntries, scopeValue, placed, head?.hash ?? null)
  yield* chainedEntriesWritten(list, scopeValue, placed[placed.length - 1]!.createdAt, link)
}

/** An entry's hash, chained on from `prev`, with its id. */
function entryHash(prev: string | null, placed: Placed, id: number): string {
  const { createdAt, position } = placed
  return linkHash(
    prev,
    placed.log === 'activity'
      ? canonicalActivityEntry({ ...placed.entry, id, createdAt, position, recordIds: placed.recordIds })
      : canonicalAdminEntry({ ...placed.entry, id, createdAt, position }),
  )
}

/** Each entry's hash with its id, each chained on from the one before (the first from `prevHash`). */
function hashesOf(placed: readonly Placed[], ids: readonly number[], prevHash: string | null): string[] {
  let hash = prevHash
  return placed.map((entry, i) => (hash = entryHash(hash, entry, ids[i]!)))
}

/**
 * The entries (of one log and scope) at their times and positions with their hashes, and an activity entry's record
 * ids; answers the last one's link (null: chained later, by PostgreSQL's pass).
 */
const insertChainedEntries = plan({
  sqlite: insertOnSqlite,
  postgres: insertOnPostgres,
  why: "PostgreSQL's many writers insert activity entries unchained, for the lists' pass to chain in id order, and draw an admin entry's id under its scope's lock (its hash covers the id); SQLite's one writer numbers and chains each entry as it inserts it",
})

/**
 * SQLite's: the ids the table would give (./monotonic.ts `nextIdsOnSqlite`), then each entry (and its record ids): raw
 * statements with positional values, prepared once per connection — an entry is written with every trigger and every
 * run's step, and the builder's named placeholders cost more than the row's own insert.
 */
function insertOnSqlite(db: Db, _scopeValue: number | null, placed: Placed[], prevHash: string | null): { link: ChainLink | null } {
  const log = placed[0]!.log
  const first = nextIdsOnSqlite(db, `${log}_logs`, placed.length, () => Number(statementOn(db, `${log}-logs.next-id`, NEXT_ID[log]).values()[0]![0]))
  const ids = placed.map((_, i) => first + i)
  const hashes = hashesOf(placed, ids, prevHash)
  for (const [i, placedEntry] of placed.entries()) {
    const { createdAt, position } = placedEntry
    const id = ids[i]!
    if (placedEntry.log === 'admin') {
      const { projectId, type, resource, initiator, userId, subjectUserId, previousValue, newValue, extension } = placedEntry.entry
      statementOn(db, 'admin-logs.insert', INSERT_ADMIN_ENTRY_SQLITE).run(id, projectId, type, resource, initiator, userId, subjectUserId, previousValue, newValue, extension ? 1 : 0, createdAt, position, hashes[i]!)
      continue
    }
    const { environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension } = placedEntry.entry
    statementOn(db, 'activity-logs.insert', INSERT_ENTRY_SQLITE).run(id, environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension ? 1 : 0, createdAt, position, hashes[i]!)
    for (const recordId of placedEntry.recordIds) statementOn(db, 'activity-logs.insert-record', INSERT_RECORD_SQLITE).run(id, environmentId, recordId)
  }
  return { link: { position: placed[placed.length - 1]!.position, hash: hashes[hashes.length - 1]! } }
}

/** One past the largest id the log's table ever gave (AUTOINCREMENT: its `sqlite_sequence` row, or its rows when it has none yet). */
const NEXT_ID = Object.fromEntries(
  (['activity', 'admin'] as const).map((log) => [
    log,
    `SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '${log}_logs'), 0), coalesce((SELECT max(id) FROM ${log}_logs), 0)) + 1`,
  ]),
) as Record<'activity' | 'admin', string>

const INSERT_ENTRY_SQLITE = `INSERT INTO activity_logs (id, environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at, chain_position, chain_hash)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
const INSERT_RECORD_SQLITE = 'INSERT INTO activity_log_records (log_id, environment_id, record_id) VALUES (?, ?, ?)'
const INSERT_ADMIN_ENTRY_SQLITE = `INSERT INTO admin_logs (id, project_id, type, resource, initiator, user_id, subject_user_id, previous_value, new_value, extension, created_at, chain_position, chain_hash)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

/**
 * PostgreSQL's. An admin entry: its id drawn under the scope's lock (reserved with the head: ./postgres/monotonic.ts),
 * its hash made here, `INSERT_ADMIN_ENTRY`. Activity entries take no lock: the lists' pass chains them
 * (drizzle/postgres/0028_activity_chained_by_the_pass.sql), so each is inserted with the time it proposes, its id
 * from the sequence (drawn after the transaction took its id: the watermark's rule) and its canonical tail where its
 * hash goes — one entry in one statement (`INSERT_ENTRY`, every write's), several in another (`INSERT_ENTRIES`), each
 * with its record ids. Nothing here needs their answers: in a write they are sent and read with its COMMIT
 * (./postgres/monotonic.ts `answerBeforeCommit`).
 */
async function insertOnPostgres(db: PgDb, scopeValue: number | null, placed: Placed[], prevHash: string | null): Promise<{ link: ChainLink | null }> {
  if (placed[0]!.log === 'admin') {
    const ids = await takeIds(db, PG_LISTS.adminLogs, scopeValue, placed.length)
    const hashes = hashesOf(placed, ids, prevHash)
    for (const [i, { entry, createdAt, position }] of (placed as (Placed & { log: 'admin' })[]).entries()) {
      const { projectId, type, resource, initiator, userId, subjectUserId, previousValue, newValue, extension } = entry
      await sendRaw(db, INSERT_ADMIN_ENTRY, [ids[i], projectId, type, resource, initiator, userId, subjectUserId, previousValue, newValue, extension, createdAt, position, hashes[i]])
    }
    return { link: { position: placed[placed.length - 1]!.position, hash: hashes[hashes.length - 1]! } }
  }
  const activity = placed as (Placed & { log: 'activity' })[]
  const columns = ({ entry, createdAt, recordIds }: Placed & { log: 'activity' }) => {
    const { environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension } = entry
    return [environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt, activityChainTail({ ...entry, recordIds })]
  }
  if (activity.length === 1) {
    await sendRaw(db, INSERT_ENTRY, [...columns(activity[0]!), activity[0]!.recordIds])
    return { link: null }
  }
  // Column by column: parameter k holds every entry's k-th value; the record ids name their entry by its place (from 1).
  const byColumn = activity.map(columns)
  const values = byColumn[0]!.map((_, k) => byColumn.map((row) => row[k]))
  const places = activity.flatMap(({ recordIds }, i) => recordIds.map(() => i + 1))
  await sendRaw(db, INSERT_ENTRIES, [...values, scopeValue, places, activity.flatMap(({ recordIds }) => recordIds)])
  return { link: null }
}

/** The entry ($1…$14: $13 its proposed time, $14 its canonical tail) and its record ids ($15, distinct, one row each) in one statement. */
const INSERT_ENTRY = `WITH entry AS (
    INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at, chain_hash)
    VALUES ($1::int8, $2, $3, $4, $5::int8, $6::int8, $7::int8, $8::int8, $9, $10, $11, $12::boolean, $13::int8, $14)
    RETURNING id)
  INSERT INTO activity_log_records (log_id, environment_id, record_id) SELECT entry.id, $1::int8, unnest($15::text[]) FROM entry`

/**
 * Entries of one environment ($15), each column an array ($1…$14), their ids drawn in the order given, and their
 * record ids ($17), each with its entry's place ($16, from 1), in one statement.
 */
const INSERT_ENTRIES = `WITH placed AS MATERIALIZED (
    SELECT trellis_sequenced_id('activity_logs_id_seq') AS id, u.*
    FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::text[], $10::text[], $11::text[], $12::boolean[], $13::int8[], $14::text[])
      WITH ORDINALITY AS u(environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at, tail, place)),
  entries AS (
    INSERT INTO activity_logs (id, environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at, chain_hash)
    SELECT id, environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at, tail FROM placed)
  INSERT INTO activity_log_records (log_id, environment_id, record_id)
    SELECT placed.id, $15::int8, r.record_id FROM unnest($16::int8[], $17::text[]) AS r(place, record_id) JOIN placed ON placed.place = r.place`

const INSERT_ADMIN_ENTRY = `INSERT INTO admin_logs (id, project_id, type, resource, initiator, user_id, subject_user_id, previous_value, new_value, extension, created_at, chain_position, chain_hash)
  VALUES ($1::int8, $2::int8, $3, $4, $5, $6::int8, $7::int8, $8, $9, $10::boolean, $11::int8, $12::int8, $13)`

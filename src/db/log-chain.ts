/**
 * The chained logs' appends (docs/audit.md): activity and admin entries are written here only, each with its
 * position and hash in its scope's chain (src/lib/audit-chain.ts), in the transaction of the change it records. The
 * scope's head is read with its newest time under the scope's hold (./monotonic.ts `nextChainedEntries`: in commit
 * order on PostgreSQL's many writers), and each entry is hashed with its id before it is inserted — the append-only
 * triggers refuse setting anything afterwards —, so an entry never exists without its link.
 */
import { type ActivityChainFields, type AdminChainFields, type ChainLink, canonicalActivityEntry, canonicalAdminEntry, linkHash } from '../lib/audit-chain.ts'
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
 * chained on from the scope's head in the order given; answers their ids. On PostgreSQL their ids are drawn from the
 * log's sequence with the head, under the scope's lock (`reserve`): ids rise with positions.
 */
export function* appendChained(list: TimeOrderedList, scopeValue: number | null, entries: readonly ChainedEntry[], now: number): Op<number[]> {
  const { createdAt: first, head } = yield* nextChainedEntries(list, scopeValue, now, entries.length)
  const placed = entries.map((entry, i): Placed => ({ ...entry, createdAt: (first + i) as Micros, position: (head?.position ?? 0) + i + 1 }))
  const { ids, link } = yield* runPlan(insertChainedEntries, scopeValue, placed, head?.hash ?? null)
  yield* chainedEntriesWritten(list, scopeValue, placed[placed.length - 1]!.createdAt, link)
  return ids
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
 * ids; answers their ids and the last one's link.
 */
const insertChainedEntries = plan({
  sqlite: insertOnSqlite,
  postgres: insertOnPostgres,
  why: "an entry's hash covers its id, so PostgreSQL draws the ids from the log's sequence under the scope's lock (with the head, in one round trip) and writes an activity entry and its record ids in one data-modifying CTE; SQLite numbers the rows itself, its one writer holding the table",
})

/**
 * SQLite's: the ids the table would give (./monotonic.ts `nextIdsOnSqlite`), then each entry (and its record ids): raw
 * statements with positional values, prepared once per connection — an entry is written with every trigger and every
 * run's step, and the builder's named placeholders cost more than the row's own insert.
 */
function insertOnSqlite(db: Db, _scopeValue: number | null, placed: Placed[], prevHash: string | null): { ids: number[]; link: ChainLink } {
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
  return { ids, link: { position: placed[placed.length - 1]!.position, hash: hashes[hashes.length - 1]! } }
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
 * PostgreSQL's: the ids drawn under the lock (reserved with the head: ./monotonic.ts), the hashes made here, then an
 * activity entry in one statement (`INSERT_ENTRY`, every write's), several in another (`INSERT_ENTRIES`); an admin
 * entry in `INSERT_ADMIN_ENTRY`. Nothing here needs their answers: in a write they are sent and read with its COMMIT
 * (./postgres/monotonic.ts `answerBeforeCommit`), the entries being a step group's last writes under its lock.
 */
async function insertOnPostgres(db: PgDb, scopeValue: number | null, placed: Placed[], prevHash: string | null): Promise<{ ids: number[]; link: ChainLink }> {
  const log = placed[0]!.log
  const ids = await takeIds(db, log === 'activity' ? PG_LISTS.activityLogs : PG_LISTS.adminLogs, scopeValue, placed.length)
  const hashes = hashesOf(placed, ids, prevHash)
  const link = { position: placed[placed.length - 1]!.position, hash: hashes[hashes.length - 1]! }
  if (log === 'admin') {
    for (const [i, { entry, createdAt, position }] of (placed as (Placed & { log: 'admin' })[]).entries()) {
      const { projectId, type, resource, initiator, userId, subjectUserId, previousValue, newValue, extension } = entry
      await sendRaw(db, INSERT_ADMIN_ENTRY, [ids[i], projectId, type, resource, initiator, userId, subjectUserId, previousValue, newValue, extension, createdAt, position, hashes[i]])
    }
    return { ids, link }
  }
  const activity = placed as (Placed & { log: 'activity' })[]
  const columns = ({ entry, createdAt, position }: Placed & { log: 'activity' }, i: number) => {
    const { environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension } = entry
    return [ids[i], environmentId, type, action, label, userId, teamId, collectionId, tokenId, workflowName, runId, stepName, extension, createdAt, position, hashes[i]]
  }
  if (activity.length === 1) {
    await sendRaw(db, INSERT_ENTRY, [...columns(activity[0]!, 0), activity[0]!.recordIds])
    return { ids, link }
  }
  // Column by column: parameter k holds every entry's k-th value; the record ids name their entry by its id.
  const byColumn = activity.map(columns)
  const values = byColumn[0]!.map((_, k) => byColumn.map((row) => row[k]))
  const logIds = activity.flatMap(({ recordIds }, i) => recordIds.map(() => ids[i]))
  await sendRaw(db, INSERT_ENTRIES, [...values, scopeValue, logIds, activity.flatMap(({ recordIds }) => recordIds)])
  return { ids, link }
}

/**
 * The entry, with its id ($1) and link ($15, $16), and its record ids ($17, distinct, one row each) in one statement:
 * it runs under the environment's lock (./postgres/monotonic.ts), held to commit, so every round trip saved there is
 * one less that other writers wait out.
 */
const INSERT_ENTRY = `WITH entry AS (
    INSERT INTO activity_logs (id, environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at, chain_position, chain_hash)
    VALUES ($1::int8, $2::int8, $3, $4, $5, $6::int8, $7::int8, $8::int8, $9::int8, $10, $11, $12, $13::boolean, $14::int8, $15::int8, $16)
    RETURNING id)
  INSERT INTO activity_log_records (log_id, environment_id, record_id) SELECT entry.id, $2::int8, unnest($17::text[]) FROM entry`

/**
 * Entries of one environment ($17), each column an array ($1…$16), and their record ids ($19), each with its
 * entry's id ($18), in one statement.
 */
const INSERT_ENTRIES = `WITH entries AS (
    INSERT INTO activity_logs (id, environment_id, type, action, label, user_id, team_id, collection_id, token_id, workflow_name, run_id, step_name, extension, created_at, chain_position, chain_hash)
    SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[], $8::int8[], $9::int8[], $10::text[], $11::text[], $12::text[], $13::boolean[], $14::int8[], $15::int8[], $16::text[])
    RETURNING id)
  INSERT INTO activity_log_records (log_id, environment_id, record_id)
    SELECT r.log_id, $17::int8, r.record_id FROM unnest($18::int8[], $19::text[]) AS r(log_id, record_id) JOIN entries ON entries.id = r.log_id`

const INSERT_ADMIN_ENTRY = `INSERT INTO admin_logs (id, project_id, type, resource, initiator, user_id, subject_user_id, previous_value, new_value, extension, created_at, chain_position, chain_hash)
  VALUES ($1::int8, $2::int8, $3, $4, $5, $6::int8, $7::int8, $8, $9, $10::boolean, $11::int8, $12::int8, $13)`

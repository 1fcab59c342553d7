/**
 * What the activity log asks the database: append an entry with its record ids, a page of entry ids, and the
 * entries of a page. Every statement is prepared once per connection (appends run in every write, lists are hot).
 */
import { and, asc, eq, inArray, sql } from 'drizzle-orm'
import type { DateFilter } from '../lib/date-filter.ts'
import { nextCreatedAt } from './monotonic.ts'
import type { Db } from './open.ts'
import { createdAtBounds, hideExtensions, pageIds } from './pages.ts'
import { inJsonArray, prepared } from './prepared.ts'
import { activityLogRecords, activityLogs, apiTokens, collections, environments, teams, users } from './schema.ts'
import { userColumns } from './users.ts'

/** An environment's activity log: its createdAt order and id bounds. */
const ACTIVITY_TIMES = { name: 'activity-logs', table: activityLogs, id: activityLogs.id, createdAt: activityLogs.createdAt, scope: activityLogs.environmentId }

export interface NewActivityLogRow {
  environmentId: number
  type: 'read' | 'write'
  action: string
  label: string | null
  userId: number
  teamId: number | null
  collectionId: number | null
  tokenId: number | null
  workflowName: string | null
  runId: string | null
  stepName: string | null
  /** The action is a Trellis extension (listed only with `extensions=true`). */
  extension: boolean
}

const p = (name: string) => sql.placeholder(name)

/**
 * Inserts an entry and its record ids (each once); its createdAt is `now`, or strictly after the environment's
 * previous entry (DESIGN §3). Returns the entry's id. Call inside the transaction of the change it records.
 */
export function insertActivityLog(db: Db, entry: NewActivityLogRow, recordIds: Iterable<string>, now: number): number {
  const insertEntry = prepared(db, 'activity-logs.insert', () =>
    db
      .insert(activityLogs)
      .values({
        environmentId: p('environmentId'),
        type: p('type'),
        action: p('action'),
        label: p('label'),
        userId: p('userId'),
        teamId: p('teamId'),
        collectionId: p('collectionId'),
        tokenId: p('tokenId'),
        workflowName: p('workflowName'),
        runId: p('runId'),
        stepName: p('stepName'),
        extension: p('extension'),
        createdAt: p('createdAt'),
      })
      .returning({ id: activityLogs.id })
      .prepare(),
  )
  const insertRecord = prepared(db, 'activity-logs.insert-record', () =>
    db.insert(activityLogRecords).values({ logId: p('logId'), environmentId: p('environmentId'), recordId: p('recordId') }).prepare(),
  )
  const [row] = insertEntry.all({ ...entry, createdAt: nextCreatedAt(db, ACTIVITY_TIMES, entry.environmentId, now) })
  for (const recordId of new Set(recordIds)) insertRecord.run({ logId: row!.id, environmentId: entry.environmentId, recordId })
  return row!.id
}

/** An activity page's filters (names already resolved to ids); undefined ones are left out. */
export interface ActivityPageFilters {
  userId?: number
  teamId?: number
  collectionId?: number
  action?: string
  type?: 'read' | 'write'
  /** Only entries that name this record. */
  recordId?: string
  /** Include the extension entries. */
  withExtensions: boolean
}

/** Ids of one page (limit + 1) of an environment's activity log, newest first. */
export function pageActivityLogIds(db: Db, environmentId: number, filters: ActivityPageFilters, dates: DateFilter[], limit: number): number[] {
  return pageIds(
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
      // Entries take createdAt strictly after the previous one in their environment, so ids stand in.
      bounds: createdAtBounds(db, dates, ACTIVITY_TIMES, environmentId),
      extra: {
        documented: hideExtensions(activityLogs.extension, filters.withExtensions),
        recordId:
          filters.recordId === undefined
            ? undefined
            : {
                condition: () =>
                  inArray(
                    activityLogs.id,
                    db
                      .select({ id: activityLogRecords.logId })
                      .from(activityLogRecords)
                      .where(and(eq(activityLogRecords.environmentId, sql.placeholder('environmentId')), eq(activityLogRecords.recordId, sql.placeholder('recordId')))),
                  ),
                values: { recordId: filters.recordId },
              },
      },
    },
    limit,
  )
}

/** The entries with these ids (any order), with their user, the names they show and the token they came through. */
export function findActivityLogsForRender(db: Db, ids: number[]) {
  return prepared(db, 'activity-logs.render', () =>
    db
      .select({
        log: activityLogs,
        user: userColumns,
        environment: environments.name,
        team: teams.name,
        collection: collections.name,
        token: { name: apiTokens.name, prefix: apiTokens.prefix },
      })
      .from(activityLogs)
      .innerJoin(users, eq(users.id, activityLogs.userId))
      .innerJoin(environments, eq(environments.id, activityLogs.environmentId))
      .leftJoin(teams, eq(teams.id, activityLogs.teamId))
      .leftJoin(collections, eq(collections.id, activityLogs.collectionId))
      .leftJoin(apiTokens, eq(apiTokens.id, activityLogs.tokenId))
      .where(inJsonArray(activityLogs.id, 'ids'))
      .prepare(),
  ).all({ ids: JSON.stringify(ids) })
}

/** The record ids each of these entries names, entry id → record ids. */
export function findActivityLogRecordIds(db: Db, ids: number[]): Map<number, string[]> {
  const rows = prepared(db, 'activity-logs.render.records', () =>
    db.select().from(activityLogRecords).where(inJsonArray(activityLogRecords.logId, 'ids')).orderBy(asc(activityLogRecords.logId)).prepare(),
  ).all({ ids: JSON.stringify(ids) })
  const recordIds = new Map<number, string[]>()
  for (const r of rows) recordIds.set(r.logId, [...(recordIds.get(r.logId) ?? []), r.recordId])
  return recordIds
}

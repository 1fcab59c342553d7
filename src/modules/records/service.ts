/**
 * Records as people see them in the console: a collection's records in one environment, one record, and the
 * `type: "read"` activity entry every console view of record data writes (issue 6: reads are audited too).
 */
import { and, asc, eq, gt, sql } from 'drizzle-orm'
import type { Db } from '../../db/open.ts'
import { prepared } from '../../db/prepared.ts'
import { collections, environments, renderings, teams, workflows, records } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import { canonicalJson } from '../../lib/json.ts'
import { appendActivityLog } from '../activity-logs/service.ts'

export type RecordRow = typeof records.$inferSelect

export interface RecordScope {
  environmentId: number
  collectionId: number
}

/** One page of a collection's records, by record id (ascending), starting after `after`. */
export function listRecords(db: Db, scope: RecordScope, after: string | undefined, limit: number): RecordRow[] {
  return db
    .select()
    .from(records)
    .where(
      and(
        eq(records.environmentId, scope.environmentId),
        eq(records.collectionId, scope.collectionId),
        after === undefined ? undefined : gt(records.recordKey, after),
      ),
    )
    .orderBy(asc(records.recordKey))
    .limit(limit + 1)
    .all()
}

/** One record by its id (prepared: the executor's data steps look records up this way too). */
export function findRecord(db: Db, scope: RecordScope, recordKey: string): RecordRow | undefined {
  return prepared(db, 'records.by-key', () =>
    db
      .select()
      .from(records)
      .where(
        and(
          eq(records.environmentId, sql.placeholder('environmentId')),
          eq(records.collectionId, sql.placeholder('collectionId')),
          eq(records.recordKey, sql.placeholder('key')),
        ),
      )
      .prepare(),
  ).all({ environmentId: scope.environmentId, collectionId: scope.collectionId, key: recordKey })[0]
}

/** Replaces one record's data (the executor's `update` step, which writes its own activity entry); prepared. */
export function replaceRecordData(db: Db, id: number, data: Record<string, unknown>, now: number): void {
  prepared(db, 'records.replace-data', () =>
    db
      .update(records)
      .set({ data: sql`${sql.placeholder('data')}`, updatedAt: sql`${sql.placeholder('now')}` })
      .where(eq(records.id, sql.placeholder('id')))
      .prepare(),
  ).run({ data: canonicalJson(data), now, id })
}

export const RECORD_ID_MAX_LENGTH = 1024

/**
 * Creates or replaces one record's data, with its `write` activity entry (`create` or `update`) attributed to
 * `userId` as `teamId`; `via` ends the entry's label ("created by trellis apply", "updated in the console").
 * Data equal to what is stored (canonical JSON) changes nothing and logs nothing.
 */
export function upsertRecord(
  db: Db,
  clock: Clock,
  input: RecordScope & { recordKey: string; data: Record<string, unknown>; userId: number; teamId: number; via: string },
): 'created' | 'updated' | 'unchanged' {
  const existing = findRecord(db, input, input.recordKey)
  const data = canonicalJson(input.data)
  const now = clock.now()
  let action: 'create' | 'update'
  if (!existing) {
    db.insert(records).values({ environmentId: input.environmentId, collectionId: input.collectionId, recordKey: input.recordKey, data, createdAt: now, updatedAt: now }).run()
    action = 'create'
  } else if (canonicalJson(JSON.parse(existing.data)) !== data) {
    db.update(records).set({ data, updatedAt: now }).where(eq(records.id, existing.id)).run()
    action = 'update'
  } else {
    return 'unchanged'
  }
  appendActivityLog(db, clock, {
    environmentId: input.environmentId,
    type: 'write',
    action,
    label: `${action === 'create' ? 'created' : 'updated'} ${input.via}`,
    userId: input.userId,
    teamId: input.teamId,
    collectionId: input.collectionId,
    recordIds: [input.recordKey],
  })
  return action === 'create' ? 'created' : 'updated'
}

/** Who saw which records, as which team: `read` for one record's page, `index` for a list. Nothing shown, nothing logged. */
export function logRecordView(
  db: Db,
  clock: Clock,
  view: RecordScope & { userId: number; teamId: number; action: 'read' | 'index'; recordIds: string[] },
): void {
  if (view.recordIds.length === 0) return
  appendActivityLog(db, clock, {
    environmentId: view.environmentId,
    type: 'read',
    action: view.action,
    label: view.action === 'read' ? 'viewed in the console' : `listed ${view.recordIds.length} in the console`,
    userId: view.userId,
    teamId: view.teamId,
    collectionId: view.collectionId,
    recordIds: view.recordIds,
  })
}

/** The collections of a project, by name. */
export function projectCollections(db: Db, projectId: number) {
  return db.select().from(collections).where(eq(collections.projectId, projectId)).orderBy(asc(collections.name)).all()
}

/** The workflows of one rendering (environment, team), by name, with their collection. */
export function renderingWorkflows(db: Db, environmentId: number, teamId: number) {
  return db
    .select({ id: workflows.id, name: workflows.name, collectionId: workflows.collectionId, collectionName: collections.name, activeVersionId: workflows.activeVersionId })
    .from(workflows)
    .innerJoin(renderings, eq(renderings.id, workflows.renderingId))
    .innerJoin(collections, eq(collections.id, workflows.collectionId))
    .where(and(eq(renderings.environmentId, environmentId), eq(renderings.teamId, teamId)))
    .orderBy(asc(workflows.name))
    .all()
}

/** A project's environments and teams, by name. */
export function projectLayout(db: Db, projectId: number) {
  const byName = <T extends typeof environments | typeof teams>(table: T) =>
    db.select({ id: table.id, name: table.name }).from(table).where(eq(table.projectId, projectId)).orderBy(asc(table.name)).all()
  return { environments: byName(environments), teams: byName(teams) }
}

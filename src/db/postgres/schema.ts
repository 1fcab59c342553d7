/**
 * The PostgreSQL tables of the data model (../tables.ts, where every table and column is described): ids `bigserial`,
 * every integer `bigint` (epoch times overflow 32 bits), flags `boolean`; and the tables only PostgreSQL has, below.
 * drizzle.postgres.config.ts generates drizzle/postgres/ from this file.
 */
import { type Column, type ColumnBaseConfig, type ColumnDataType, sql, type Table } from 'drizzle-orm'
import {
  bigint,
  bigserial,
  boolean,
  check,
  doublePrecision,
  index,
  type PgColumn,
  pgTable,
  type PgTableWithColumns,
  primaryKey,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core'
import { defineTables, type TableKit } from '../tables.ts'

const integer = (name: string) => bigint(name, { mode: 'number' })

// The same calls as SQLite's kit take, answered by pg-core's builders (../tables.ts types the kit as SQLite's).
const postgresKit = {
  table: pgTable,
  id: () => bigserial('id', { mode: 'number' }).primaryKey(),
  integer,
  boolean,
  text,
  index,
  uniqueIndex,
  check,
  primaryKey,
  false: sql`false`,
} as unknown as TableKit

type SqliteTables = ReturnType<typeof defineTables>
type ColumnConfig = ColumnBaseConfig<ColumnDataType, string>

/**
 * A column of the definition as pg-core types it: the same data, nullability and defaults, so the same row types —
 * but for an integer primary key other than `id`: SQLite's is the rowid (a default), PostgreSQL's a plain `bigint`.
 */
type PgColumnOf<C extends Column> = PgColumn<Extract<PgConfig<C['_']>, ColumnConfig>>
type PgConfig<C extends Column['_']> = Omit<Pick<C, keyof ColumnConfig | 'identity' | 'generated'>, 'hasDefault'> & {
  hasDefault: C extends { isPrimaryKey: true; dataType: 'number' }
    ? C['name'] extends 'id' ? true : false
    : C['hasDefault']
}

/** A table of the definition as pg-core types it. */
type PgTableOf<T extends Table> = PgTableWithColumns<{
  name: T['_']['name']
  schema: undefined
  columns: { [K in keyof T['_']['columns']]: PgColumnOf<T['_']['columns'][K]> }
  dialect: 'pg'
}>

// Real pg-core tables at run time (drizzle-kit and the pg-core builder read them). The type is a cast: Drizzle's builder
// types name their dialect, so the one definition is typed as SQLite's (../tables.ts) and mapped here.
export const {
  users, instanceSettings, ssoIdentities, sessions, invitations, projects, environments, teams, teamMembers,
  projectMembers, renderings, collections, collectionPermissions, records, notes, noteMessages, apiTokens, workflows,
  workflowVersions, webhookTriggers, workflowSchedules, scheduleTicks, workflowEventTriggers, workflowEvents, runs, runSteps, idempotencyKeys, runEvents,
  callbackEndpoints, callbackDeliveries,
  callbackAttempts, userPreferences, mailOutbox, tasks, taskAssignees, taskDecisions, activityLogs, activityLogRecords,
  adminLogs, auditCheckpoints, auditWitnessDeliveries,
} = defineTables(postgresKit) as unknown as { [K in keyof SqliteTables]: PgTableOf<SqliteTables[K]> }

// ── Shared limits (PostgreSQL only) ─────────────────────────────────────────
// Several instances share one budget per token, per webhook and per login pair: the counters live here
// (src/db/postgres/rate-windows.ts). SQLite has no such tables: its one process keeps them in memory
// (src/lib/rate-counters.ts). test/schema-parity.test.ts names them as the PostgreSQL-only tables.

/** One fixed window of a limit (API minute/hour/day per token, login failures per pair and per address). */
export const rateLimitWindows = pgTable(
  'rate_limit_windows',
  {
    /** The limit and its subject, e.g. `api 42 60000`, `login-address 10.0.0.1`. */
    key: text('key').primaryKey(),
    count: integer('count').notNull(),
    /** The limit the window was last counted against (the upsert's guard compares with it). */
    maxCount: integer('max_count').notNull(),
    /** Epoch ms when the window ends; an ended window counts as absent, and is deleted by the sweep. */
    endsAt: integer('ends_at').notNull(),
  },
  (t) => [index('rate_limit_windows_ends_at_idx').on(t.endsAt)],
)

/** One token bucket (a webhook's rate): absent means full. */
export const rateLimitBuckets = pgTable(
  'rate_limit_buckets',
  {
    key: text('key').primaryKey(),
    capacity: integer('capacity').notNull(),
    tokens: doublePrecision('tokens').notNull(),
    /** Epoch ms of the last refill. */
    updatedAt: integer('updated_at').notNull(),
    /** Epoch ms when the bucket is full again: from then on the row says nothing and the sweep deletes it. */
    endsAt: integer('ends_at').notNull(),
  },
  (t) => [index('rate_limit_buckets_ends_at_idx').on(t.endsAt)],
)

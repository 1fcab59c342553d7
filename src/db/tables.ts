/**
 * The whole Trellis data model (DESIGN §2–3, §7, §8), written once for both dialects: `defineTables(kit)` builds every
 * table from a dialect's column and constraint builders; ./schema.ts exports SQLite's tables, ./postgres/schema.ts
 * PostgreSQL's (ids `bigserial`, every integer `bigint`, flags `boolean`), and drizzle-kit generates each dialect's
 * migrations from its own file. test/schema-parity.test.ts migrates both for real and compares their catalogs.
 *
 * Times are integer epoch milliseconds, except those of notes, note messages and log entries: epoch microseconds
 * (`Micros`, docs/design-decisions.md "Times"), so their lists can give each entry its own increasing `createdAt` without running ahead
 * of the clock.
 * An index is here only when a query plan uses it or it enforces a constraint: every insert and every update of an
 * indexed column writes each index too, and `runs` and `activity_logs` are written on every trigger and every run.
 * test/query-plans.test.ts proves each one with `EXPLAIN QUERY PLAN` on the real statements. A list filter without
 * its own index walks the scope's (environment, id) index newest first until the page is full.
 */
import { type HasDefault, type IsPrimaryKey, type NotNull, type SQL, sql } from 'drizzle-orm'
import type {
  AnySQLiteColumn,
  check,
  index,
  primaryKey,
  SQLiteBooleanBuilderInitial,
  SQLiteIntegerBuilderInitial,
  sqliteTable,
  text,
  uniqueIndex,
} from 'drizzle-orm/sqlite-core'
import { PERMISSION_LEVELS } from '../lib/access.ts'
import type { Micros } from '../lib/time.ts'
import { ACTIVE_RUN_STATUSES, FINISHED_RUN_STATUSES, RUN_STATUSES } from '../lib/run-statuses.ts'
import { TASK_STATUSES } from '../lib/task-statuses.ts'

/** The active runs a worker may take: queued ones, and waiting ones whose time has come (the rest are running). */
export const CLAIMABLE_RUN_STATUSES = ACTIVE_RUN_STATUSES.filter((status) => status !== 'running')

/** `'a', 'b'`: a constant list as SQL literals (never user input). */
export const sqlLiterals = (values: readonly string[]) => values.map((v) => `'${v}'`).join(', ')
const listOf = (values: readonly string[]) => sql.raw(sqlLiterals(values))

/**
 * `(column = 'a' OR column = 'b' OR …)`: "the column holds one of these constants" (never user input), for the
 * runs table's status rules and the partial indexes over them. Not `column IN ('a', 'b', 'c')`: for an IN list of
 * three or more constants SQLite builds a temporary table each time a statement runs — on every insert and every
 * status change of a run, for the CHECK and each partial index it evaluates (measured on this schema: it more than
 * doubles the cost of an insert, a failing insert and a status change; docs/performance.md). A query that
 * must use a partial index repeats the index's expression (`runStatusIn`): SQLite matches the predicate as written.
 */
export const anyOfLiterals = (column: string, values: readonly string[]) => `(${values.map((v) => `${column} = '${v}'`).join(' OR ')})`
const statusIn = (values: readonly string[]) => sql.raw(anyOfLiterals('status', values))
/** A query's "the run's status is one of these", in the form of the runs table's own rules (see `anyOfLiterals`). */
export const runStatusIn = (values: readonly string[]) => sql.raw(anyOfLiterals('"runs"."status"', values))

/**
 * What a dialect lends the definition: its table constructor, column and constraint builders, and the SQL that
 * differs. Typed as SQLite's: Drizzle has no column builder type over both dialects (each builder's type names its
 * dialect), so PostgreSQL's kit is cast to this one and its tables retyped as pg-core's (./postgres/schema.ts).
 */
export interface TableKit {
  table: typeof sqliteTable
  /** The row id: an auto-incremented integer, never reused. */
  id: () => IsPrimaryKey<HasDefault<NotNull<SQLiteIntegerBuilderInitial<'id'>>>>
  /** An integer wide enough for epoch times (64 bits). */
  integer: <TName extends string>(name: TName) => SQLiteIntegerBuilderInitial<TName>
  /** A flag: SQLite's integer 0 or 1, PostgreSQL's `boolean`. */
  boolean: (name: string) => SQLiteBooleanBuilderInitial<string>
  text: typeof text
  index: typeof index
  uniqueIndex: typeof uniqueIndex
  check: typeof check
  primaryKey: typeof primaryKey
  /** A flag's false in a partial index's predicate (SQLite keeps flags as 0 and 1). */
  false: SQL
}

/** Every table of the data model, built by one dialect's kit. */
export function defineTables(kit: TableKit) {
  const { table, id, integer, text, boolean, index, uniqueIndex, check, primaryKey } = kit
  const createdAt = () => integer('created_at').notNull()
  /** An epoch-µs time (the compiler keeps it apart from milliseconds). */
  const micros = (name: string) => integer(name).$type<Micros>()
  /**
   * A log entry's link in its scope's hash chain (src/lib/audit-chain.ts, docs/audit.md): its position (1, 2, … per
   * scope) and `chain_hash` (64 hex digits). Null only in an entry written by an instance older than the chain (the
   * upgrade links those written before it: src/db/chain-upgrade.ts); `trellis audit verify` reports it as inserted.
   */
  const chainColumns = () => ({ chainPosition: integer('chain_position'), chainHash: text('chain_hash') })
  /** A required reference to the row this one belongs to: deleting that row deletes this one (ON DELETE CASCADE). */
  const belongsTo = (name: string, target: () => AnySQLiteColumn) =>
    integer(name).notNull().references(target, { onDelete: 'cascade' })
  /**
   * An outbox's item claimed under a lease (src/db/leased-queue.ts): its status (`pending` until settled, then one of
   * `settled`), attempts so far, when it is due next, and the lease of the worker attempting it.
   */
  const leasedOutbox = <const S extends readonly [string, ...string[]]>(statuses: S) => ({
    status: text('status', { enum: statuses }).notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: integer('next_attempt_at').notNull(),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: integer('lease_expires_at'),
  })

  // ── Organization ──────────────────────────────────────────────────────────

  const users = table(
    'users',
    {
      id: id(),
      /** Stored lower-cased; unique across the instance. */
      email: text('email').notNull(),
      username: text('username').notNull(),
      /** Bun.password hash (argon2id); null until a password is set. */
      passwordHash: text('password_hash'),
      /** Instance administrator (the first user created through the setup page). */
      isInstanceAdmin: boolean('is_instance_admin').notNull().default(false),
      /** A deactivated user is "not authorized for the organization": 403 everywhere. */
      disabledAt: integer('disabled_at'),
      createdAt: createdAt(),
      updatedAt: integer('updated_at').notNull(),
    },
    (t) => [uniqueIndex('users_email_unique').on(t.email)],
  )

  /**
   * Instance settings, one JSON value per name: `sso` (an apply file's identity provider without its secret; `serve`
   * reads it at start) and `http-allow` (the outbound allow-list instance administrators keep in the console; read by
   * outbound requests as they go, src/modules/instance/outbound-allow.ts). Flags and environment variables win over them.
   */
  const instanceSettings = table('instance_settings', {
    name: text('name').primaryKey(),
    value: text('value').notNull(),
    updatedAt: integer('updated_at').notNull(),
  })

  /**
   * Identities at an OpenID Connect provider bound to a user: the provider's issuer and the account's `sub` claim,
   * which the provider never reassigns (an email may change hands or be claimed by anyone at some providers). An SSO
   * sign-in is this pair's user; a pair is bound at a user's first SSO sign-in, or linked by a password sign-in or an
   * operator (src/modules/auth/oidc-service.ts). A user has at most one account of each issuer.
   */
  const ssoIdentities = table(
    'sso_identities',
    {
      id: id(),
      issuer: text('issuer').notNull(),
      subject: text('subject').notNull(),
      userId: belongsTo('user_id', () => users.id),
      createdAt: createdAt(),
    },
    (t) => [
      uniqueIndex('sso_identities_issuer_subject_unique').on(t.issuer, t.subject),
      uniqueIndex('sso_identities_user_issuer_unique').on(t.userId, t.issuer),
    ],
  )

  /** Console login sessions; only the SHA-256 of the session id is stored. */
  const sessions = table(
    'sessions',
    {
      idHash: text('id_hash').primaryKey(),
      userId: belongsTo('user_id', () => users.id),
      viaSso: boolean('via_sso').notNull().default(false),
      createdAt: createdAt(),
      expiresAt: integer('expires_at').notNull(),
    },
    (t) => [index('sessions_user_idx').on(t.userId)],
  )

  /**
   * One-time invitation links (`/invite?token=…`): only the SHA-256 of the token is stored; a link works once,
   * until it expires, and a newer invitation of the same user replaces the older ones.
   */
  const invitations = table(
    'invitations',
    {
      id: id(),
      tokenHash: text('token_hash').notNull(),
      userId: belongsTo('user_id', () => users.id),
      /** The instance administrator who made it; null for the CLI. */
      createdBy: integer('created_by').references(() => users.id),
      createdAt: createdAt(),
      expiresAt: integer('expires_at').notNull(),
      usedAt: integer('used_at'),
    },
    (t) => [uniqueIndex('invitations_token_hash_unique').on(t.tokenHash), index('invitations_user_idx').on(t.userId)],
  )

  // ── Projects and their structure ──────────────────────────────────────────

  const projects = table(
    'projects',
    {
      id: id(),
      /** Case-sensitive, unique. */
      name: text('name').notNull(),
      sso: boolean('sso').notNull().default(false),
      createdAt: createdAt(),
    },
    (t) => [uniqueIndex('projects_name_unique').on(t.name)],
  )

  const environments = table(
    'environments',
    {
      id: id(),
      projectId: belongsTo('project_id', () => projects.id),
      name: text('name').notNull(),
      /**
       * True while every note's createdAt is >= that of every note with a lower id (always so for notes created
       * through Trellis). Then createdAt filters become id ranges and deep pages cost one index seek. An import of
       * older notes clears it for good; lists stay exact on the slower path.
       */
      notesInTimeOrder: boolean('notes_in_time_order').notNull().default(true),
      createdAt: createdAt(),
    },
    (t) => [uniqueIndex('environments_project_name_unique').on(t.projectId, t.name)],
  )

  const teams = table(
    'teams',
    {
      id: id(),
      projectId: belongsTo('project_id', () => projects.id),
      name: text('name').notNull(),
      createdAt: createdAt(),
    },
    (t) => [uniqueIndex('teams_project_name_unique').on(t.projectId, t.name)],
  )

  const teamMembers = table(
    'team_members',
    {
      teamId: belongsTo('team_id', () => teams.id),
      userId: belongsTo('user_id', () => users.id),
      createdAt: createdAt(),
    },
    (t) => [primaryKey({ columns: [t.teamId, t.userId] }), index('team_members_user_idx').on(t.userId)],
  )

  const projectMembers = table(
    'project_members',
    {
      projectId: belongsTo('project_id', () => projects.id),
      userId: belongsTo('user_id', () => users.id),
      role: text('role', { enum: PERMISSION_LEVELS }).notNull(),
      createdAt: createdAt(),
      updatedAt: integer('updated_at').notNull(),
    },
    (t) => [
      primaryKey({ columns: [t.projectId, t.userId] }),
      index('project_members_user_idx').on(t.userId),
      check('project_members_role_check', sql`${t.role} in (${listOf(PERMISSION_LEVELS)})`),
    ],
  )

  /** The pair (environment, team): what one team sees in one environment. */
  const renderings = table(
    'renderings',
    {
      id: id(),
      environmentId: belongsTo('environment_id', () => environments.id),
      teamId: belongsTo('team_id', () => teams.id),
    },
    (t) => [uniqueIndex('renderings_environment_team_unique').on(t.environmentId, t.teamId)],
  )

  const collections = table(
    'collections',
    {
      id: id(),
      projectId: belongsTo('project_id', () => projects.id),
      name: text('name').notNull(),
      createdAt: createdAt(),
      /** The records' schema: canonical JSON of its field list (src/modules/records/schema.ts); null: untyped records. */
      schema: text('schema'),
      /** How many times the schema was changed (0: never); the schema's version. */
      schemaVersion: integer('schema_version').notNull().default(0),
      /** Epoch ms of the last schema change; null: never changed. */
      schemaUpdatedAt: integer('schema_updated_at'),
    },
    (t) => [uniqueIndex('collections_project_name_unique').on(t.projectId, t.name)],
  )

  /** Per-team permissions on a collection; a team without a row has both (DESIGN §2). */
  const collectionPermissions = table(
    'collection_permissions',
    {
      collectionId: belongsTo('collection_id', () => collections.id),
      teamId: belongsTo('team_id', () => teams.id),
      canRead: boolean('can_read').notNull().default(true),
      canEdit: boolean('can_edit').notNull().default(true),
    },
    (t) => [primaryKey({ columns: [t.collectionId, t.teamId] })],
  )

  const records = table(
    'records',
    {
      id: id(),
      environmentId: belongsTo('environment_id', () => environments.id),
      collectionId: belongsTo('collection_id', () => collections.id),
      /** The record's own id: opaque string; composite keys in packed form (`a|b`). */
      recordKey: text('record_key').notNull(),
      /** JSON object. */
      data: text('data').notNull(),
      createdAt: createdAt(),
      updatedAt: integer('updated_at').notNull(),
      /**
       * When the record was deleted (epoch ms); null while it lives. A deleted record is read by nothing but its
       * restore and its purge (docs/records.md "Deleting records"), and still holds its id: the unique index covers it.
       */
      deletedAt: integer('deleted_at'),
    },
    (t) => [
      uniqueIndex('records_env_collection_key_unique').on(t.environmentId, t.collectionId, t.recordKey),
      // The purge walks the deleted records oldest first; the live ones (nearly all) are not in it.
      index('records_deleted_idx').on(t.deletedAt).where(sql`deleted_at IS NOT NULL`),
      // The records API's default order (newest first, then by row id): a page walks it instead of sorting the
      // collection. Live records only, as every list reads: a lookup by id that reads deleted records too (an import's
      // batch, a restore) can then only probe the unique index, whatever the statistics say of a collection.
      index('records_env_collection_created_idx').on(t.environmentId, t.collectionId, t.createdAt, t.id).where(sql`deleted_at IS NULL`),
    ],
  )

  // ── Notes ─────────────────────────────────────────────────────────────────

  const notes = table(
    'notes',
    {
      /** AUTOINCREMENT: never reused. */
      id: id(),
      environmentId: belongsTo('environment_id', () => environments.id),
      teamId: integer('team_id')
        .notNull()
        .references(() => teams.id),
      /** Null only when the collection was deleted after the note was written. */
      collectionId: integer('collection_id').references(() => collections.id, { onDelete: 'set null' }),
      recordId: text('record_id').notNull(),
      title: text('title').notNull(),
      userId: integer('user_id')
        .notNull()
        .references(() => users.id),
      createdAt: micros('created_at').notNull(),
      /** The later of the note's own update and its newest message. */
      updatedAt: micros('updated_at').notNull(),
      archivedAt: micros('archived_at'),
    },
    (t) => [
      index('notes_env_id_idx').on(t.environmentId, t.id),
      index('notes_env_created_idx').on(t.environmentId, t.createdAt),
      index('notes_env_updated_idx').on(t.environmentId, t.updatedAt),
      index('notes_env_archived_idx').on(t.environmentId, t.archivedAt),
      index('notes_env_record_idx').on(t.environmentId, t.recordId, t.id),
      index('notes_env_user_idx').on(t.environmentId, t.userId, t.id),
      index('notes_env_team_idx').on(t.environmentId, t.teamId, t.id),
      index('notes_env_collection_idx').on(t.environmentId, t.collectionId, t.id),
    ],
  )

  const noteMessages = table(
    'note_messages',
    {
      id: id(),
      noteId: belongsTo('note_id', () => notes.id),
      userId: integer('user_id')
        .notNull()
        .references(() => users.id),
      /** Sanitised HTML. */
      content: text('content').notNull(),
      createdAt: micros('created_at').notNull(),
    },
    (t) => [index('note_messages_note_idx').on(t.noteId, t.id)],
  )

  // ── Application tokens ────────────────────────────────────────────────────

  const apiTokens = table(
    'api_tokens',
    {
      id: id(),
      name: text('name').notNull(),
      userId: belongsTo('user_id', () => users.id),
      projectId: belongsTo('project_id', () => projects.id),
      /** Hex SHA-256 of the token value; the value itself is never stored. */
      tokenHash: text('token_hash').notNull(),
      /** First characters of the value, for display. */
      prefix: text('prefix').notNull(),
      /** JSON array of scope names. */
      scopes: text('scopes').notNull(),
      createdWithSso: boolean('created_with_sso').notNull().default(false),
      createdAt: createdAt(),
      lastUsedAt: integer('last_used_at'),
      expiresAt: integer('expires_at'),
      revokedAt: integer('revoked_at'),
      /**
       * The token that made this one through the API (a Bearer call); null when made in a session or by the CLI. It
       * expires no later than its maker and is revoked with it (src/db/tokens.ts, `revokeTokensMadeBy`). No ON DELETE
       * action: tokens are never deleted but with their user or project, which are their maker's too (and drizzle-kit
       * cannot add one to an existing SQLite table).
       */
      parentTokenId: integer('parent_token_id').references((): AnySQLiteColumn => apiTokens.id),
    },
    (t) => [
      uniqueIndex('api_tokens_hash_unique').on(t.tokenHash),
      index('api_tokens_user_idx').on(t.userId, t.id),
      index('api_tokens_project_idx').on(t.projectId, t.id),
      // Finds the tokens a token made when it is revoked.
      index('api_tokens_parent_idx').on(t.parentTokenId),
    ],
  )

  // ── Workflows, webhook triggers, runs ─────────────────────────────────────

  const workflows = table(
    'workflows',
    {
      id: id(),
      renderingId: belongsTo('rendering_id', () => renderings.id),
      name: text('name').notNull(),
      collectionId: integer('collection_id')
        .notNull()
        .references(() => collections.id),
      /** The version used by new runs; null when the workflow was withdrawn (404 on its webhook). */
      activeVersionId: integer('active_version_id'),
      /**
       * The active version's `concurrency`: at most this many of the workflow's runs `running` at once, across every
       * instance (the claim counts them, src/db/claims.ts); null = no limit.
       */
      concurrencyLimit: integer('concurrency_limit'),
      createdAt: createdAt(),
      updatedAt: integer('updated_at').notNull(),
    },
    (t) => [uniqueIndex('workflows_rendering_name_unique').on(t.renderingId, t.name)],
  )

  const workflowVersions = table(
    'workflow_versions',
    {
      id: id(),
      workflowId: belongsTo('workflow_id', () => workflows.id),
      version: integer('version').notNull(),
      /** The definition as published, its keys in the order typed (the hash below decides what is a change). */
      definition: text('definition').notNull(),
      /** SHA-256 of the canonical definition: an unchanged re-publication is a no-op. */
      definitionHash: text('definition_hash').notNull(),
      publishedBy: integer('published_by').references(() => users.id),
      createdAt: createdAt(),
    },
    (t) => [uniqueIndex('workflow_versions_workflow_version_unique').on(t.workflowId, t.version)],
  )

  /** One per workflow. Off by default; disabling is a pause, regenerating bumps the generation. */
  const webhookTriggers = table('webhook_triggers', {
    workflowId: integer('workflow_id')
      .primaryKey()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    enabled: boolean('enabled').notNull().default(false),
    generation: integer('generation').notNull().default(1),
    /** Per-webhook override of TRELLIS_WEBHOOK_RATE_PER_MIN; null = instance default. */
    ratePerMinute: integer('rate_per_minute'),
    updatedAt: integer('updated_at').notNull(),
  })

  /** The runs table is also the queue (DESIGN §8). Ids are UUIDv7. */
  const runs = table(
    'runs',
    {
      id: text('id').primaryKey(),
      workflowId: belongsTo('workflow_id', () => workflows.id),
      workflowVersionId: integer('workflow_version_id')
        .notNull()
        .references(() => workflowVersions.id),
      environmentId: belongsTo('environment_id', () => environments.id),
      recordId: text('record_id').notNull(),
      /** The identity the run reads and writes as. */
      userId: integer('user_id')
        .notNull()
        .references(() => users.id),
      tokenId: integer('token_id').references(() => apiTokens.id, { onDelete: 'set null' }),
      trigger: text('trigger', { enum: ['manual', 'webhook', 'schedule', 'event'] }).notNull(),
      status: text('status', { enum: RUN_STATUSES }).notNull(),
      /** Index of the first step not yet recorded as done. */
      nextStep: integer('next_step').notNull().default(0),
      /** When a queued or waiting run may be claimed. */
      availableAt: integer('available_at').notNull(),
      leaseOwner: text('lease_owner'),
      leaseExpiresAt: integer('lease_expires_at'),
      attempts: integer('attempts').notNull().default(0),
      /** JSON `{code, message, step?}` for failed runs. */
      error: text('error'),
      // Epoch µs, strictly increasing per environment in the runs list's `(created_at, id)` order (set by the insert,
      // src/db/queue.ts, and on PostgreSQL by the lists' pass): the runs list pages by it, like notes and logs.
      createdAt: micros('created_at').notNull(),
      startedAt: integer('started_at'),
      finishedAt: integer('finished_at'),
      /** The failed or cancelled run this one retries: it resumes at that run's failed step. */
      retryOf: text('retry_of'),
      /** A run a schedule started: the fire time of its tick (epoch ms); null for every other trigger. */
      scheduledFor: integer('scheduled_for'),
      /**
       * What started a run of trigger `event`: JSON `{event, recordId, changedFields?, noteId?, chain}` (chain: the
       * event-started runs whose writes led to it, oldest first; src/db/workflow-events.ts). Null for other triggers.
       */
      cause: text('cause'),
      /**
       * The W3C `traceparent` of the span that started the run (the webhook call, the API request), when tracing was
       * on: the run's own trace links to it wherever and whenever it executes (src/lib/tracing.ts). Null otherwise.
       */
      traceContext: text('trace_context'),
    },
    // Index predicates are SQL literals (inlined from the status lists): SQLite refuses a bound parameter in an
    // index's WHERE, and uses a partial index only for a query whose WHERE repeats those literals (src/db/queue.ts).
    (t) => [
      uniqueIndex('runs_one_active_per_record')
        .on(t.workflowId, t.recordId)
        .where(statusIn(ACTIVE_RUN_STATUSES)),
      index('runs_claim_idx')
        .on(t.availableAt)
        .where(sql`status in (${listOf(CLAIMABLE_RUN_STATUSES)})`),
      index('runs_lease_idx')
        .on(t.leaseExpiresAt)
        .where(sql`status = 'running'`),
      // The claim's two walks (src/db/claims.ts): each environment's oldest due runs, and — where a workflow's limit
      // holds those back — each workflow's.
      index('runs_claim_env_idx')
        .on(t.environmentId, t.availableAt)
        .where(sql`status in (${listOf(CLAIMABLE_RUN_STATUSES)})`),
      index('runs_claim_workflow_idx')
        .on(t.workflowId, t.availableAt)
        .where(sql`status in (${listOf(CLAIMABLE_RUN_STATUSES)})`),
      // The list's own order, (createdAt, id) (and the walk of its status, workflow, user and createdAt filters); a
      // record's runs. No index on status: it changes three times in every run's life, and each change would rewrite
      // the index.
      index('runs_env_created_idx').on(t.environmentId, t.createdAt, t.id),
      index('runs_env_record_created_idx').on(t.environmentId, t.recordId, t.createdAt, t.id),
      // A run is retried at most once (its `retriedBy`), whatever retries race.
      uniqueIndex('runs_retry_of_idx').on(t.retryOf).where(sql`retry_of is not null`),
      // The run history's retention walks the oldest finished runs.
      index('runs_finished_idx').on(t.finishedAt).where(statusIn(FINISHED_RUN_STATUSES)),
      check('runs_status_check', statusIn(RUN_STATUSES)),
      check('runs_trigger_check', sql`${t.trigger} in ('manual', 'webhook', 'schedule', 'event')`),
    ],
  )

  /**
   * A workflow's schedule (one at most): its cron in its timezone, the records each tick starts a run on, whose
   * rights the runs use. `nextFireAt` is the next fire time not yet ticked (null while disabled): an instance's
   * ticker claims a tick by moving it on in the statement that inserts the tick (src/db/schedules.ts).
   */
  const workflowSchedules = table(
    'workflow_schedules',
    {
      workflowId: integer('workflow_id')
        .primaryKey()
        .references(() => workflows.id, { onDelete: 'cascade' }),
      cron: text('cron').notNull(),
      timezone: text('timezone').notNull(),
      /** JSON: the `records.where` object as given (relative times unresolved). */
      recordsWhere: text('records_where').notNull(),
      recordsLimit: integer('records_limit').notNull(),
      runAsUserId: integer('run_as_user_id')
        .notNull()
        .references(() => users.id),
      catchUp: text('catch_up', { enum: ['once', 'skip'] }).notNull(),
      enabled: boolean('enabled').notNull(),
      nextFireAt: integer('next_fire_at'),
      createdAt: createdAt(),
      updatedAt: integer('updated_at').notNull(),
    },
    (t) => [
      index('workflow_schedules_due_idx').on(t.nextFireAt),
      check('workflow_schedules_catch_up_check', sql`${t.catchUp} in ('once', 'skip')`),
    ],
  )

  /**
   * One tick of a schedule: the unique (workflow, fire time) makes it fire once across instances and restarts. Its
   * runs are started in batches, each committing with the tick's `cursor` (the last record it considered), so a
   * tick resumed after a crash never considers a record twice. Open until `finishedAt`; worked under a lease.
   */
  const scheduleTicks = table(
    'schedule_ticks',
    {
      id: id(),
      workflowId: belongsTo('workflow_id', () => workflows.id),
      fireAt: integer('fire_at').notNull(),
      /** JSON `{key, id}`: the records list's keyset position after the last record considered; null before the first. */
      cursor: text('cursor'),
      started: integer('started').notNull().default(0),
      skipped: integer('skipped').notNull().default(0),
      failed: integer('failed').notNull().default(0),
      /** Why the tick did less than asked: `run_as_forbidden`, `over_limit`; null otherwise. */
      warning: text('warning'),
      leaseOwner: text('lease_owner'),
      leaseExpiresAt: integer('lease_expires_at'),
      createdAt: createdAt(),
      finishedAt: integer('finished_at'),
    },
    (t) => [
      uniqueIndex('schedule_ticks_workflow_fire_unique').on(t.workflowId, t.fireAt),
      index('schedule_ticks_open_idx').on(t.leaseExpiresAt).where(sql`finished_at IS NULL`),
    ],
  )

  /**
   * A workflow's record and note events (src/db/workflow-events.ts): at most one per workflow. `environment_id` and
   * `collection_id` repeat the workflow's place so that every record write finds its subscribers with one seek.
   */
  const workflowEventTriggers = table(
    'workflow_event_triggers',
    {
      workflowId: integer('workflow_id')
        .primaryKey()
        .references(() => workflows.id, { onDelete: 'cascade' }),
      environmentId: belongsTo('environment_id', () => environments.id),
      collectionId: belongsTo('collection_id', () => collections.id),
      /** JSON `[{event, fields?}]`: the events that start a run. */
      events: text('events').notNull(),
      /** JSON `{field: {op: value}}` tested on the record (the records list's filters), or null. */
      filter: text('filter'),
      runAsUserId: integer('run_as_user_id')
        .notNull()
        .references(() => users.id),
      debounceSeconds: integer('debounce_seconds'),
      /** Counters for `/metrics`: events dispatched, runs started, events skipped (active run, loop bound, rights). */
      received: integer('received').notNull().default(0),
      started: integer('started').notNull().default(0),
      skipped: integer('skipped').notNull().default(0),
      updatedAt: integer('updated_at').notNull(),
    },
    (t) => [index('workflow_event_triggers_place_idx').on(t.environmentId, t.collectionId)],
  )

  /**
   * The outbox of record and note events (DESIGN §15): one row per subscribing workflow, written in the transaction of
   * the change, claimed under a lease like the other outboxes (./leased-queue.ts) and deleted in the transaction that
   * starts its run. `next_attempt_at` is when it is due (the change's time plus the debounce).
   */
  const workflowEvents = table(
    'workflow_events',
    {
      id: text('id').primaryKey(),
      workflowId: belongsTo('workflow_id', () => workflows.id),
      recordKey: text('record_key').notNull(),
      event: text('event').notNull(),
      /** JSON: the top-level fields a `recordUpdated` changed. */
      changedFields: text('changed_fields'),
      noteId: integer('note_id'),
      /** JSON: the event-started runs whose writes led here (the loop bound's count). */
      chain: text('chain').notNull(),
      ...leasedOutbox(['pending', 'failed']),
      createdAt: createdAt(),
      finishedAt: integer('finished_at'),
    },
    (t) => [
      index('workflow_events_due_idx').on(t.nextAttemptAt).where(sql`status = 'pending'`),
      // Debounce: the newest pending event of a workflow on a record.
      index('workflow_events_record_idx').on(t.workflowId, t.recordKey),
      check('workflow_events_status_check', sql`${t.status} in ('pending', 'failed')`),
    ],
  )

  const runSteps = table(
    'run_steps',
    {
      runId: text('run_id')
        .notNull()
        .references(() => runs.id, { onDelete: 'cascade' }),
      stepIndex: integer('step_index').notNull(),
      name: text('name').notNull(),
      type: text('type').notNull(),
      status: text('status', { enum: ['succeeded', 'failed', 'skipped'] }).notNull(),
      attempts: integer('attempts').notNull().default(1),
      /** JSON: what the step produced (http status, condition outcome…). */
      output: text('output'),
      error: text('error'),
      startedAt: integer('started_at').notNull(),
      finishedAt: integer('finished_at').notNull(),
    },
    (t) => [primaryKey({ columns: [t.runId, t.stepIndex] })],
  )

  /**
   * An `Idempotency-Key` a run was created with, per workflow and user: a repeat of the call with the same
   * key and body answers that run again instead of starting another. Pruned after the retention window, and with its
   * run.
   */
  const idempotencyKeys = table(
    'idempotency_keys',
    {
      workflowId: belongsTo('workflow_id', () => workflows.id),
      userId: belongsTo('user_id', () => users.id),
      key: text('key').notNull(),
      /** SHA-256 (hex) of what the call asked: its body, as the route reads it. */
      requestHash: text('request_hash').notNull(),
      runId: text('run_id')
        .notNull()
        .references(() => runs.id, { onDelete: 'cascade' }),
      createdAt: integer('created_at').notNull(),
    },
    (t) => [
      primaryKey({ columns: [t.workflowId, t.userId, t.key] }),
      index('idempotency_keys_created_idx').on(t.createdAt),
      index('idempotency_keys_run_idx').on(t.runId),
    ],
  )

  /**
   * A run's events: every transition and step outcome, appended in the transition's own transaction. `id`
   * is global and increasing (the SSE `id:`); `sequence` counts the run's events from 1. The environment, workflow
   * and record are copied from the run so that the environment's stream filters without a join.
   */
  const runEvents = table(
    'run_events',
    {
      id: id(),
      runId: text('run_id')
        .notNull()
        .references(() => runs.id, { onDelete: 'cascade' }),
      environmentId: integer('environment_id').notNull(),
      workflowId: integer('workflow_id').notNull(),
      recordId: text('record_id').notNull(),
      sequence: integer('sequence').notNull(),
      type: text('type').notNull(),
      status: text('status').notNull(),
      stepIndex: integer('step_index'),
      stepName: text('step_name'),
      /** JSON: what else the event tells (an error's code and message…); never a secret. */
      data: text('data'),
      createdAt: micros('created_at').notNull(),
    },
    (t) => [
      uniqueIndex('run_events_run_sequence_idx').on(t.runId, t.sequence),
      index('run_events_env_id_idx').on(t.environmentId, t.id),
    ],
  )

  /**
   * A workflow's completion callback endpoints. The signing secret is never stored: it is derived from the
   * instance secret and `secret_salt` (HMAC), shown once at creation.
   */
  const callbackEndpoints = table(
    'callback_endpoints',
    {
      id: text('id').primaryKey(),
      workflowId: belongsTo('workflow_id', () => workflows.id),
      url: text('url').notNull(),
      /** JSON array of the event types delivered (`workflow_run.succeeded`…). */
      events: text('events').notNull(),
      secretSalt: text('secret_salt').notNull(),
      createdBy: integer('created_by').references(() => users.id),
      createdAt: integer('created_at').notNull(),
    },
    (t) => [index('callback_endpoints_workflow_idx').on(t.workflowId)],
  )

  /**
   * The callback outbox: one delivery per endpoint and finished run, written in the run's final
   * transaction; `id` is the Standard Webhooks `webhook-id`, the same on every attempt.
   */
  const callbackDeliveries = table(
    'callback_deliveries',
    {
      id: text('id').primaryKey(),
      endpointId: text('endpoint_id')
        .notNull()
        .references(() => callbackEndpoints.id, { onDelete: 'cascade' }),
      runId: text('run_id')
        .notNull()
        .references(() => runs.id, { onDelete: 'cascade' }),
      type: text('type').notNull(),
      /** The JSON body sent, as signed. */
      payload: text('payload').notNull(),
      ...leasedOutbox(['pending', 'succeeded', 'failed']),
      createdAt: integer('created_at').notNull(),
      finishedAt: integer('finished_at'),
    },
    (t) => [
      index('callback_deliveries_due_idx').on(t.nextAttemptAt).where(sql`status = 'pending'`),
      index('callback_deliveries_run_idx').on(t.runId),
      check('callback_deliveries_status_check', sql`${t.status} in ('pending', 'succeeded', 'failed')`),
    ],
  )

  /** Each attempt of a callback delivery: when, how long, the answer's status or the error. */
  const callbackAttempts = table(
    'callback_attempts',
    {
      deliveryId: text('delivery_id')
        .notNull()
        .references(() => callbackDeliveries.id, { onDelete: 'cascade' }),
      attempt: integer('attempt').notNull(),
      startedAt: integer('started_at').notNull(),
      durationMs: integer('duration_ms').notNull(),
      statusCode: integer('status_code'),
      error: text('error'),
    },
    (t) => [primaryKey({ columns: [t.deliveryId, t.attempt] })],
  )

  // ── E-mail ────────────────────────────────────────────────────────────────

  /**
   * What a person chose for themselves; no row means every default (task e-mail on). One row per user, written
   * by the person's own `PATCH /v1/account`.
   */
  const userPreferences = table('user_preferences', {
    userId: integer('user_id')
      .primaryKey()
      .references(() => users.id, { onDelete: 'cascade' }),
    /** Task e-mail (opened, reminder, escalation, outcome) to this person: on unless they turned it off. */
    taskMail: boolean('task_mail').notNull(),
    updatedAt: integer('updated_at').notNull(),
  })

  /**
   * The mail outbox (src/db/mail.ts): one message per recipient, written in the transaction of what caused it,
   * claimed under a lease by the sender of any instance and sent with the same `Message-ID` on every attempt. A body
   * holding a secret (an invitation link) is sealed with a key derived from the instance secret (`sealed`).
   */
  const mailOutbox = table(
    'mail_outbox',
    {
      id: text('id').primaryKey(),
      /** The `Message-ID` header, `<id@domain-of-the-from-address>`: made when queued, the same on every attempt. */
      messageId: text('message_id').notNull(),
      /** What the mail is about: `invitation`, `task.opened`, `task.reminder`, `task.escalated`, `task.closed`. */
      kind: text('kind').notNull(),
      recipient: text('recipient').notNull(),
      subject: text('subject').notNull(),
      textBody: text('text_body').notNull(),
      htmlBody: text('html_body'),
      sealed: boolean('sealed').notNull().default(false),
      ...leasedOutbox(['pending', 'sent', 'failed']),
      /** The last failed attempt's error (never a credential: src/modules/mail/transport.ts words it). */
      lastError: text('last_error'),
      createdAt: createdAt(),
      finishedAt: integer('finished_at'),
    },
    (t) => [
      index('mail_outbox_due_idx').on(t.nextAttemptAt).where(sql`status = 'pending'`),
      index('mail_outbox_finished_idx').on(t.finishedAt),
      check('mail_outbox_status_check', sql`${t.status} in ('pending', 'sent', 'failed')`),
    ],
  )

  // ── Tasks (people in a run) ───────────────────────────────────────────────

  /**
   * A `task` step's question to people: one per run and step (a retried run opens its own). It closes exactly once:
   * every change of `status` is an UPDATE guarded by `status = 'open'` (src/db/tasks.ts). Ids are UUIDv7s of the time
   * the task was opened at; the lists order by `(created_at, id)` and page by `createdAt` (on PostgreSQL the lists'
   * pass may move a new task's `created_at` past one committed meanwhile).
   */
  const tasks = table(
    'tasks',
    {
      id: text('id').primaryKey(),
      runId: text('run_id')
        .notNull()
        .references(() => runs.id, { onDelete: 'cascade' }),
      stepIndex: integer('step_index').notNull(),
      stepName: text('step_name').notNull(),
      environmentId: belongsTo('environment_id', () => environments.id),
      workflowId: belongsTo('workflow_id', () => workflows.id),
      /** The workflow's team (the list's `teamName`). */
      teamId: belongsTo('team_id', () => teams.id),
      collectionId: integer('collection_id').references(() => collections.id, { onDelete: 'set null' }),
      recordId: text('record_id').notNull(),
      /** The run's user: who asks (`allowRequester` says whether they may decide). */
      requesterId: integer('requester_id')
        .notNull()
        .references(() => users.id),
      title: text('title').notNull(),
      approvalsRequired: integer('approvals_required').notNull(),
      allowRequester: boolean('allow_requester').notNull().default(false),
      /** JSON Schema (the documented subset) of what a decider fills in; null without a form. */
      form: text('form'),
      status: text('status', { enum: TASK_STATUSES }).notNull(),
      /** Epoch ms of the deadline, or null; what happens then is `on_timeout` (with `escalate_to`, JSON). */
      dueAt: integer('due_at'),
      onTimeout: text('on_timeout').notNull().default('fail'),
      escalateTo: text('escalate_to'),
      escalated: boolean('escalated').notNull().default(false),
      /** Epoch ms the assignees are reminded (before `due_at`: src/modules/tasks/deadlines.ts); null once reminded, or past the deadline. */
      remindAt: integer('remind_at'),
      /** When the reminder was sent (once), or null. */
      remindedAt: integer('reminded_at'),
      createdAt: micros('created_at').notNull(),
      closedAt: integer('closed_at'),
    },
    (t) => [
      uniqueIndex('tasks_run_step_unique').on(t.runId, t.stepIndex),
      // The list's own order.
      index('tasks_env_created_idx').on(t.environmentId, t.createdAt, t.id),
      // The inbox and the console header's count read only the open tasks of a person's environments.
      index('tasks_open_env_idx').on(t.environmentId, t.createdAt, t.id).where(sql`status = 'open'`),
      // A record's tasks (its console page, the list's `recordId`).
      index('tasks_env_record_idx').on(t.environmentId, t.recordId, t.createdAt, t.id),
      // The deadline timer's next due task, and each deadline acted on once by `UPDATE … WHERE status = 'open' AND NOT
      // escalated` (src/db/tasks.ts): an escalated task stays open but leaves the index. The same for the reminders.
      index('tasks_due_idx').on(t.dueAt).where(sql`status = 'open' and due_at is not null and not escalated`),
      index('tasks_remind_idx').on(t.remindAt).where(sql`status = 'open' and remind_at is not null`),
      check('tasks_status_check', statusIn(TASK_STATUSES)),
    ],
  )

  /** Who may decide a task: a team (its members) or one user; project admins may always. */
  const taskAssignees = table(
    'task_assignees',
    {
      taskId: text('task_id')
        .notNull()
        .references(() => tasks.id, { onDelete: 'cascade' }),
      /** Exactly one of team and user. */
      teamId: integer('team_id').references(() => teams.id, { onDelete: 'cascade' }),
      userId: integer('user_id').references(() => users.id, { onDelete: 'cascade' }),
      /** Added by an escalation. */
      escalated: boolean('escalated').notNull().default(false),
      /**
       * The task's `created_at`, kept beside each assignee so that a person's tasks are walked in the lists' order from
       * their own assignments (the indexes below); the lists' pass moves it with the task's (PostgreSQL).
       */
      taskCreatedAt: micros('task_created_at').notNull(),
    },
    (t) => [
      uniqueIndex('task_assignees_team_unique').on(t.taskId, t.teamId).where(sql`team_id is not null`),
      uniqueIndex('task_assignees_user_unique').on(t.taskId, t.userId).where(sql`user_id is not null`),
      // A task's assignees, both kinds: its rendering, who to tell, and the cascade when its run is deleted (the two
      // partial indexes above serve neither: without it each read or delete of a task's assignees scans the table).
      index('task_assignees_task_idx').on(t.taskId),
      index('task_assignees_team_idx').on(t.teamId, t.taskCreatedAt, t.taskId).where(sql`team_id is not null`),
      index('task_assignees_user_idx').on(t.userId, t.taskCreatedAt, t.taskId).where(sql`user_id is not null`),
      check('task_assignees_one_subject_check', sql`(team_id is null) <> (user_id is null)`),
    ],
  )

  /** The decisions taken on a task: one per user (the primary key decides, whatever races). */
  const taskDecisions = table(
    'task_decisions',
    {
      taskId: text('task_id')
        .notNull()
        .references(() => tasks.id, { onDelete: 'cascade' }),
      userId: integer('user_id')
        .notNull()
        .references(() => users.id),
      decision: text('decision', { enum: ['approve', 'reject'] }).notNull(),
      comment: text('comment'),
      /** JSON: the form's values, as validated. */
      input: text('input'),
      /** The `Idempotency-Key` the decision was sent with, and the SHA-256 of its body: a repeat is answered again. */
      idempotencyKey: text('idempotency_key'),
      requestHash: text('request_hash'),
      createdAt: micros('created_at').notNull(),
    },
    (t) => [
      primaryKey({ columns: [t.taskId, t.userId] }),
      check('task_decisions_decision_check', sql`${t.decision} in ('approve', 'reject')`),
    ],
  )

  // ── Logs (append-only) ────────────────────────────────────────────────────

  const activityLogs = table(
    'activity_logs',
    {
      id: id(),
      environmentId: belongsTo('environment_id', () => environments.id),
      type: text('type', { enum: ['read', 'write'] }).notNull(),
      action: text('action').notNull(),
      label: text('label'),
      userId: integer('user_id')
        .notNull()
        .references(() => users.id),
      teamId: integer('team_id').references(() => teams.id),
      collectionId: integer('collection_id').references(() => collections.id, { onDelete: 'set null' }),
      /** Which token made the change, when it came through the API. */
      tokenId: integer('token_id').references(() => apiTokens.id, { onDelete: 'set null' }),
      workflowName: text('workflow_name'),
      runId: text('run_id'),
      stepName: text('step_name'),
      /**
       * The action is a Trellis extension (not in the compatibility document's enum): listed only with
       * `extensions=true`. Set by the writer from the service's lists; the migration that added it backfilled it.
       */
      extension: boolean('extension').notNull().default(false),
      createdAt: micros('created_at').notNull(),
      ...chainColumns(),
    },
    // Written with every change: the list's order, its default page and its createdAt bounds only. The user, team,
    // collection, action and type filters walk one of the first two (the recordId filter has activity_log_records).
    (t) => [
      index('activity_logs_env_id_idx').on(t.environmentId, t.id),
      // The default page (extensions hidden): one seek, never a skip over extension entries.
      index('activity_logs_env_documented_idx').on(t.environmentId, t.id).where(sql`extension = ${kit.false}`),
      index('activity_logs_env_created_idx').on(t.environmentId, t.createdAt),
      // One entry per position of an environment's chain, decided by the database (PostgreSQL has many writers); the
      // head read (src/db/monotonic.ts) seeks it.
      uniqueIndex('activity_logs_env_chain_idx').on(t.environmentId, t.chainPosition),
      check('activity_logs_type_check', sql`${t.type} in ('read', 'write')`),
    ],
  )

  /** The record ids an activity log entry touched (the `recordId` filter). */
  const activityLogRecords = table(
    'activity_log_records',
    {
      logId: belongsTo('log_id', () => activityLogs.id),
      environmentId: integer('environment_id').notNull(),
      recordId: text('record_id').notNull(),
    },
    (t) => [
      primaryKey({ columns: [t.logId, t.recordId] }),
      index('activity_log_records_env_record_idx').on(t.environmentId, t.recordId, t.logId),
    ],
  )

  const adminLogs = table(
    'admin_logs',
    {
      id: id(),
      /** Null for organization-wide acts (user deactivated); those show in every project of the user. */
      projectId: integer('project_id').references(() => projects.id, { onDelete: 'cascade' }),
      type: text('type', { enum: ['add', 'remove', 'update', 'initial'] }).notNull(),
      resource: text('resource').notNull(),
      initiator: text('initiator', { enum: ['administrator', 'identityProvider', 'system'] }).notNull(),
      /** The actor; null for `system`. */
      userId: integer('user_id').references(() => users.id),
      /** The user the entry is about, for organization-wide acts. */
      subjectUserId: integer('subject_user_id').references(() => users.id),
      /** JSON; never a secret. */
      previousValue: text('previous_value'),
      newValue: text('new_value'),
      /** The resource or initiator is a Trellis extension: listed only with `extensions=true` (as activity_logs). */
      extension: boolean('extension').notNull().default(false),
      createdAt: micros('created_at').notNull(),
      ...chainColumns(),
    },
    (t) => [
      // The instance's chain (no project) is scope 0: a plain unique index lets two null scopes share a position.
      uniqueIndex('admin_logs_scope_chain_idx').on(sql`coalesce(project_id, 0)`, t.chainPosition),
      index('admin_logs_project_id_idx').on(t.projectId, t.id),
      index('admin_logs_project_documented_idx').on(t.projectId, t.id).where(sql`extension = ${kit.false}`),
      index('admin_logs_project_created_idx').on(t.projectId, t.createdAt),
      index('admin_logs_project_user_idx').on(t.projectId, t.userId, t.id),
      index('admin_logs_project_type_idx').on(t.projectId, t.type, t.id),
      index('admin_logs_project_resource_idx').on(t.projectId, t.resource, t.id),
      index('admin_logs_project_initiator_idx').on(t.projectId, t.initiator, t.id),
      check('admin_logs_type_check', sql`${t.type} in ('add', 'remove', 'update', 'initial')`),
      check(
        'admin_logs_initiator_check',
        sql`${t.initiator} in ('administrator', 'identityProvider', 'system')`,
      ),
    ],
  )

  // ── The audit trail (docs/audit.md) ───────────────────────────────────────

  /**
   * Signed checkpoints and retention anchors of the log chains: one per (scope, position, kind), whichever instance
   * signs it first (the unique index decides; the others' inserts do nothing). `created_at` (ms) is the signed body's
   * `time`. No foreign key to the scope: a checkpoint outlives its project, as its witnessed copies do.
   */
  const auditCheckpoints = table(
    'audit_checkpoints',
    {
      id: text('id').primaryKey(),
      kind: text('kind', { enum: ['checkpoint', 'anchor'] }).notNull(),
      log: text('log', { enum: ['activity', 'admin'] }).notNull(),
      /** The environment (activity) or project (admin) id; null for the instance's admin log. */
      scopeId: integer('scope_id'),
      /** `activity:<id>`, `admin:<id>`, `admin:instance`: one value per chain, the null scope included, for the unique key. */
      scopeKey: text('scope_key').notNull(),
      position: integer('position').notNull(),
      hash: text('hash').notNull(),
      kid: text('kid').notNull(),
      signature: text('signature').notNull(),
      createdAt: createdAt(),
    },
    (t) => [
      uniqueIndex('audit_checkpoints_scope_position_idx').on(t.scopeKey, t.position, t.kind),
      check('audit_checkpoints_kind_check', sql`${t.kind} in ('checkpoint', 'anchor')`),
      check('audit_checkpoints_log_check', sql`${t.log} in ('activity', 'admin')`),
    ],
  )

  /**
   * The witness outbox (src/db/audit.ts): one delivery per checkpoint and configured witness (`dir`: the witness
   * file; `url`: the callback), written in the checkpoint's transaction, claimed under a lease like the callbacks'.
   */
  const auditWitnessDeliveries = table(
    'audit_witness_deliveries',
    {
      id: text('id').primaryKey(),
      checkpointId: text('checkpoint_id')
        .notNull()
        .references(() => auditCheckpoints.id, { onDelete: 'cascade' }),
      witness: text('witness', { enum: ['dir', 'url'] }).notNull(),
      ...leasedOutbox(['pending', 'delivered', 'failed']),
      lastError: text('last_error'),
      createdAt: createdAt(),
      finishedAt: integer('finished_at'),
    },
    (t) => [
      index('audit_witness_deliveries_due_idx').on(t.nextAttemptAt).where(sql`status = 'pending'`),
      index('audit_witness_deliveries_finished_idx').on(t.finishedAt),
      check('audit_witness_deliveries_status_check', sql`${t.status} in ('pending', 'delivered', 'failed')`),
      check('audit_witness_deliveries_witness_check', sql`${t.witness} in ('dir', 'url')`),
    ],
  )

  return {
    users, instanceSettings, ssoIdentities, sessions, invitations, projects, environments, teams, teamMembers,
    projectMembers, renderings, collections, collectionPermissions, records, notes, noteMessages, apiTokens,
    workflows, workflowVersions, webhookTriggers, workflowSchedules, scheduleTicks, workflowEventTriggers, workflowEvents, runs, runSteps, idempotencyKeys, runEvents, callbackEndpoints,
    callbackDeliveries, callbackAttempts, userPreferences, mailOutbox, tasks, taskAssignees, taskDecisions, activityLogs,
    activityLogRecords, adminLogs, auditCheckpoints, auditWitnessDeliveries,
  }
}

/**
 * The PostgreSQL schema (src/db/postgres/schema.ts, drizzle/postgres/) and SQLite's
 * (src/db/schema.ts, drizzle/) describe the same data model, both built from its one definition (src/db/tables.ts).
 * Both sets of embedded migrations are applied to real databases — a SQLite file and a throw-away PostgreSQL cluster —
 * and their catalogs compared: tables, columns and nullability, primary keys, foreign keys with their ON DELETE,
 * unique and partial indexes (the one active run per record included), check constraints, and the append-only
 * triggers of the logs. The one difference is named: POSTGRES_ONLY_TABLES.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { migratePostgres } from '../src/db/postgres/migrate.ts'
import { type SqliteTestEnv, sqliteTestEnv } from './helpers.ts'
import { type Cluster, postgresInstalled, startCluster } from './support/postgres-cluster.ts'

if (!postgresInstalled) {
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') throw new Error('initdb/pg_ctl not found (apt-get install postgresql)')
  console.warn('schema-parity: SKIPPED, PostgreSQL is not installed (apt-get install postgresql)')
}

/** What both catalogs are reduced to: comparable, dialect-neutral facts. */
interface Catalog {
  tables: Record<string, { columns: Record<string, { notNull: boolean }>; primaryKey: string[] }>
  foreignKeys: string[]
  indexes: string[]
  checks: string[]
  appendOnly: string[]
}

const TRACKING = 'trellis_migrations'

/**
 * Shared state of several instances that SQLite has no table for: the limits' counters (per-token API windows, login
 * throttle windows, per-webhook buckets; src/db/postgres/rate-windows.ts). A single SQLite process keeps these
 * counters in memory (src/lib/rate-counters.ts), so they exist on PostgreSQL only — with their indexes. And the lookup
 * cache's generation row (src/db/postgres/lookup-cache.ts): SQLite's cache sees other connections' commits by itself.
 * And the lists' watermark (src/db/postgres/list-watermark.ts), with the runs and tasks it has still to list: SQLite's
 * one writer commits in the lists' order.
 */
const POSTGRES_ONLY_TABLES = ['list_sequencer', 'lookup_generation', 'notes_kept_times', 'rate_limit_buckets', 'rate_limit_windows', 'runs_unlisted', 'tasks_unlisted']

/** The catalog without the PostgreSQL-only tables (and anything on them): what SQLite must match exactly. */
function shared(catalog: Catalog): Catalog {
  const onlyHere = (entry: string) => POSTGRES_ONLY_TABLES.some((table) => entry.startsWith(`${table}:`) || entry.startsWith(`${table}.`))
  return {
    tables: Object.fromEntries(Object.entries(catalog.tables).filter(([name]) => !POSTGRES_ONLY_TABLES.includes(name))),
    foreignKeys: catalog.foreignKeys.filter((e) => !onlyHere(e)),
    indexes: catalog.indexes.filter((e) => !onlyHere(e)),
    checks: catalog.checks.filter((e) => !onlyHere(e)),
    appendOnly: catalog.appendOnly,
  }
}

function sqliteCatalog(env: SqliteTestEnv): Catalog {
  const db = env.store.sqlite
  const all = <T>(text: string, ...values: string[]) => db.prepare(text).all(...values) as T[]
  const tables = all<{ name: string; sql: string }>("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != ?", TRACKING)
  const catalog: Catalog = { tables: {}, foreignKeys: [], indexes: [], checks: [], appendOnly: [] }
  for (const { name, sql } of tables) {
    const columns = all<{ name: string; notnull: number; pk: number }>(`SELECT name, "notnull", pk FROM pragma_table_info(?)`, name)
    catalog.tables[name] = {
      columns: Object.fromEntries(columns.map((c) => [c.name, { notNull: c.notnull === 1 || c.pk > 0 }])),
      primaryKey: columns.filter((c) => c.pk > 0).sort((a, b) => a.pk - b.pk).map((c) => c.name),
    }
    for (const fk of all<{ table: string; from: string; to: string; on_delete: string }>('SELECT "table", "from", "to", on_delete FROM pragma_foreign_key_list(?)', name)) {
      catalog.foreignKeys.push(`${name}.${fk.from} → ${fk.table}.${fk.to} on delete ${fk.on_delete.toLowerCase()}`)
    }
    for (const index of all<{ name: string; unique: number; origin: string; partial: number }>('SELECT name, "unique", origin, partial FROM pragma_index_list(?)', name)) {
      if (index.origin === 'pk') continue
      const named = all<{ name: string | null }>('SELECT name FROM pragma_index_info(?) ORDER BY seqno', index.name).map((c) => c.name)
      // An expression's column has no name: read it from the index's own SQL (the admin log's coalesce(project_id, 0)).
      const written = named.includes(null) ? topLevelParts(/\((.*)\)\s*(WHERE|$)/s.exec(all<{ sql: string }>("SELECT sql FROM sqlite_master WHERE name = ?", index.name)[0]!.sql)![1]!) : []
      const columns = named.map((name, i) => name ?? expressionOf(written[i]!))
      catalog.indexes.push(`${name}: ${index.name} (${columns.join(', ')})${index.unique ? ' unique' : ''}${index.partial ? ' partial' : ''}`)
    }
    for (const match of sql.matchAll(/CONSTRAINT "([^"]+)" CHECK/g)) catalog.checks.push(`${name}: ${match[1]}`)
  }
  for (const { name } of all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%append_only'")) catalog.appendOnly.push(name)
  return normalize(catalog)
}

async function postgresCatalog(sql: SQL): Promise<Catalog> {
  const catalog: Catalog = { tables: {}, foreignKeys: [], indexes: [], checks: [], appendOnly: [] }
  const columns = (await sql`SELECT table_name, column_name, is_nullable FROM information_schema.columns
    WHERE table_schema = 'public' AND table_name != ${TRACKING}`) as { table_name: string; column_name: string; is_nullable: string }[]
  for (const c of columns) {
    catalog.tables[c.table_name] ??= { columns: {}, primaryKey: [] }
    catalog.tables[c.table_name]!.columns[c.column_name] = { notNull: c.is_nullable === 'NO' }
  }
  const constraints = (await sql`SELECT conrelid::regclass::text AS table_name, conname, contype, pg_get_constraintdef(oid) AS def
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text != ${TRACKING}`) as { table_name: string; conname: string; contype: string; def: string }[]
  for (const c of constraints) {
    if (c.contype === 'p') catalog.tables[c.table_name]!.primaryKey = /\((.*)\)/.exec(c.def)![1]!.split(', ')
    if (c.contype === 'c') catalog.checks.push(`${c.table_name}: ${c.conname}`)
    if (c.contype === 'f') {
      const [, from, table, to] = /FOREIGN KEY \((.+?)\) REFERENCES (\w+)\((.+?)\)/.exec(c.def)!
      const onDelete = /ON DELETE (CASCADE|SET NULL|RESTRICT|SET DEFAULT)/.exec(c.def)?.[1]?.toLowerCase() ?? 'no action'
      catalog.foreignKeys.push(`${c.table_name}.${from} → ${table}.${to} on delete ${onDelete}`)
    }
  }
  const indexes = (await sql`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename != ${TRACKING}`) as { tablename: string; indexname: string; indexdef: string }[]
  const primaryKeyIndexes = new Set(constraints.filter((c) => c.contype === 'p').map((c) => c.conname))
  for (const index of indexes) {
    if (primaryKeyIndexes.has(index.indexname)) continue
    const columns = topLevelParts(/USING \w+ \((.+)\)(?: WHERE|$)/.exec(index.indexdef.replace(/ WHERE .*$/, ''))![1]!).map((c) => (/\(/.test(c) ? expressionOf(c) : c.replace(/"/g, '')))
    catalog.indexes.push(`${index.tablename}: ${index.indexname} (${columns.join(', ')})${/CREATE UNIQUE/.test(index.indexdef) ? ' unique' : ''}${/ WHERE /.test(index.indexdef) ? ' partial' : ''}`)
  }
  const triggers = (await sql`SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname LIKE '%append_only'`) as { tgname: string }[]
  catalog.appendOnly = triggers.map((t) => t.tgname)
  return normalize(catalog)
}

/** The comma-separated parts of an index's column list, commas inside parentheses kept. */
function topLevelParts(list: string): string[] {
  const parts: string[] = []
  let depth = 0
  let part = ''
  for (const char of list) {
    if (char === ',' && depth === 0) {
      parts.push(part.trim())
      part = ''
      continue
    }
    if (char === '(') depth++
    if (char === ')') depth--
    part += char
  }
  return [...parts, part.trim()]
}

/** An index expression as both dialects write it: lower case, no quotes, PostgreSQL's casts of constants dropped. */
const expressionOf = (text: string) => text.toLowerCase().replace(/["`]/g, '').replace(/\((\d+)\)::\w+/g, '$1').replace(/\s+/g, ' ')

const normalize = (catalog: Catalog): Catalog => ({
  ...catalog,
  foreignKeys: [...catalog.foreignKeys].sort(),
  indexes: [...catalog.indexes].sort(),
  checks: [...catalog.checks].sort(),
  appendOnly: [...catalog.appendOnly].sort(),
})

describe.skipIf(!postgresInstalled)('the PostgreSQL schema and the SQLite schema (both migrated for real)', () => {
  let env: SqliteTestEnv
  let cluster: Cluster
  let sql: SQL
  let sqlite: Catalog
  let postgres: Catalog
  let postgresAll: Catalog

  beforeAll(async () => {
    env = sqliteTestEnv()
    cluster = startCluster()
    sql = new SQL(cluster.url)
    expect(await migratePostgres(sql)).toEqual([
      '0000_init',
      '0001_append_only_logs',
      '0002_shared_rate_limits',
      '0003_tokens_made_by_tokens',
      '0004_sso_identities',
      '0005_workflow_concurrency_and_fair_claims',
      '0006_idempotency_retry_retention',
      '0007_run_events_and_callbacks',
      '0008_status_rules_without_in_lists',
      '0009_lookup_generation',
      '0010_mail_outbox_and_preferences',
      '0011_tasks',
      '0012_task_deadlines',
      '0013_inbox_indexes',
      '0014_collection_schemas',
      '0015_records_created_order',
      '0016_datetime_or_null',
      '0017_task_assignees_by_task',
      '0018_soft_deleted_records',
      '0019_workflow_schedules',
      '0020_workflow_events',
      '0021_run_trace_context',
      '0022_audit_chain',
      '0023_audit_chain_sealed',
      '0024_audit_checkpoints',
      '0025_records_created_order_live',
      '0026_run_events_watermark',
      '0027_record_field_indexes_by_kind',
      '0028_activity_chained_by_the_pass',
      '0029_queue_run_function',
      '0030_notes_dated_by_the_pass',
      '0031_activity_chaining_decided_in_when',
      '0032_runs_listed_by_time',
      '0033_tasks_listed_by_time',
      '0034_write_path_plans_pinned',
    ])
    sqlite = sqliteCatalog(env)
    postgresAll = await postgresCatalog(sql)
    postgres = shared(postgresAll)
    console.log(`schema-parity: ${Object.keys(sqlite.tables).length} tables, ${sqlite.foreignKeys.length} foreign keys, ${sqlite.indexes.length} indexes, ${sqlite.checks.length} checks compared`)
  }, 60_000)

  afterAll(async () => {
    await sql?.close()
    cluster?.stop()
    env?.cleanup()
  })

  test('the same tables, columns, nullability and primary keys', () => {
    expect(Object.keys(postgres.tables).sort()).toEqual(Object.keys(sqlite.tables).sort())
    for (const [name, table] of Object.entries(sqlite.tables)) expect({ name, ...postgres.tables[name] }).toEqual({ name, ...table })
  })

  test('the PostgreSQL-only tables (the limits shared across instances, the lookup generation, the lists\' watermark and the runs and tasks it has still to list) exist on PostgreSQL only, with their sweep and lookup indexes', () => {
    expect(Object.keys(postgresAll.tables).filter((name) => !(name in sqlite.tables)).sort()).toEqual(POSTGRES_ONLY_TABLES)
    for (const name of POSTGRES_ONLY_TABLES) expect(sqlite.tables[name]).toBeUndefined()
    expect(postgresAll.tables.rate_limit_windows).toEqual({
      columns: { key: { notNull: true }, count: { notNull: true }, max_count: { notNull: true }, ends_at: { notNull: true } },
      primaryKey: ['key'],
    })
    expect(postgresAll.tables.rate_limit_buckets!.primaryKey).toEqual(['key'])
    expect(postgresAll.indexes.filter((e) => !postgres.indexes.includes(e))).toEqual([
      'rate_limit_buckets: rate_limit_buckets_ends_at_idx (ends_at)',
      'rate_limit_windows: rate_limit_windows_ends_at_idx (ends_at)',
      'runs_unlisted: runs_unlisted_run_idx (run_id)',
      'tasks_unlisted: tasks_unlisted_task_idx (task_id)',
    ])
  })

  test('the same foreign keys, with the same ON DELETE', () => {
    expect(postgres.foreignKeys).toEqual(sqlite.foreignKeys)
  })

  test('the same indexes: names, columns, unique and partial — the one active run per record included', () => {
    expect(postgres.indexes).toEqual(sqlite.indexes)
    expect(postgres.indexes).toContain('runs: runs_one_active_per_record (workflow_id, record_id) unique partial')
  })

  test('the same check constraints and append-only log triggers', async () => {
    expect(postgres.checks).toEqual(sqlite.checks)
    expect(postgres.appendOnly).toEqual(sqlite.appendOnly)
    expect(postgres.appendOnly.length).toBe(3)
  })

  test("the activity log's trigger lets the lists' pass chain an entry, with every other column compared: each column of the table is in its WHEN", async () => {
    const [{ definition }] = (await sql`SELECT pg_get_triggerdef(oid) AS definition FROM pg_trigger WHERE tgname = 'activity_logs_append_only'`) as [{ definition: string }]
    const columns = ((await sql`SELECT column_name FROM information_schema.columns WHERE table_name = 'activity_logs'`) as { column_name: string }[]).map((c) => c.column_name)
    const moved = ['created_at', 'chain_position', 'chain_hash']
    const compared = columns.filter((column) => !moved.includes(column))
    expect(compared.length).toBe(columns.length - moved.length)
    for (const column of compared) {
      expect(definition).toContain(`new.${column}`)
      expect(definition).toContain(`old.${column}`)
    }
  })

  test('migrating again applies nothing; the PostgreSQL log tables refuse an UPDATE', async () => {
    expect(await migratePostgres(sql)).toEqual([])
    await sql`INSERT INTO projects (name, created_at) VALUES ('P', 1)`
    // An unchained activity entry (as a writer inserts it): chaining it is the one update let through, and only alone.
    await sql`INSERT INTO users (email, username, created_at, updated_at) VALUES ('u@example.com', 'u', 1, 1)`
    await sql`INSERT INTO environments (project_id, name, created_at) VALUES (1, 'e', 1)`
    const [entry] = (await sql`INSERT INTO activity_logs (environment_id, type, action, user_id, created_at, chain_hash) VALUES (1, 'write', 'update', 1, 10, 'tail') RETURNING id`) as [{ id: string }]
    const chain = (set: string) => sql.unsafe(`UPDATE activity_logs SET chain_position = 1, chain_hash = 'h', created_at = 11${set} WHERE id = $1`, [entry.id])
    await expect(chain(", label = 'forged'")).rejects.toThrow('activity log entries are append-only')
    await expect(sql`UPDATE activity_logs SET chain_position = 1, chain_hash = 'h', created_at = 9 WHERE id = ${entry.id}`).rejects.toThrow('activity log entries are append-only')
    await chain('')
    await expect(chain('')).rejects.toThrow('activity log entries are append-only')
    const [{ id }] = (await sql`INSERT INTO admin_logs (project_id, type, resource, initiator, created_at) VALUES (1, 'add', 'team', 'administrator', 1) RETURNING id`) as [{ id: string }]
    await expect(sql`UPDATE admin_logs SET created_at = 2 WHERE id = ${id}`).rejects.toThrow('admin log entries are append-only')
  })
})

/** The database layer: embedded migrations, pragmas, constraints the database (not code) enforces, indexes. */
import { Database } from 'bun:sqlite'
import { afterEach, describe, expect, test } from 'bun:test'
import { cpSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { is } from 'drizzle-orm'
import { getTableConfig, SQLiteTable } from 'drizzle-orm/sqlite-core'
import { migrate, pendingMigrations } from '../src/db/sqlite/migrate.ts'
import { migrations as embedded } from '../src/db/sqlite/migrations.generated.ts'
import { openStore, type SqliteStore } from '../src/db/sqlite/store.ts'
import { type Journal, renderMigrationsModule } from '../src/db/migrations-module.ts'
import * as schema from '../src/db/schema.ts'
import { execute, queryOne, repoRoot, runCli, SQLITE_ONLY, sqliteOnlyDescribe, sqliteOnlyEach, sqliteTestEnv, type SqlValue, tempDir, TEST_STORE, testEnv, type TestEnv, type TestStore } from './helpers.ts'

const schemaTables = (Object.values(schema) as unknown[])
  .filter((value): value is SQLiteTable => is(value, SQLiteTable))
  .map((table) => getTableConfig(table))

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})

/** An opened but not yet migrated store in a fresh temp dir. */
function emptyStore(): SqliteStore {
  const dir = tempDir()
  const store = openStore(dir.path)
  cleanups.push(dir.cleanup, () => store.close())
  return store
}

function migratedEnv(): TestEnv {
  const env = testEnv()
  cleanups.push(env.cleanup)
  return env
}

function names(sqlite: Database, type: 'table' | 'index'): string[] {
  return (sqlite.prepare('SELECT name FROM sqlite_master WHERE type = ? ORDER BY name').all(type) as { name: string }[]).map(
    (row) => row.name,
  )
}

sqliteOnlyDescribe(SQLITE_ONLY.sqliteMigrations, 'migrations', () => {
  test('on an empty file they create every table, column, index and check of src/db/schema.ts', () => {
    const store = emptyStore()
    expect(pendingMigrations(store.sqlite)).toEqual(embedded.map((m) => m.name))
    expect(migrate(store.sqlite)).toEqual(embedded.map((m) => m.name))
    expect(schemaTables.length).toBeGreaterThan(10)

    const tables = names(store.sqlite, 'table')
    const indexes = names(store.sqlite, 'index')
    for (const table of schemaTables) {
      expect(tables).toContain(table.name)
      const columns = (store.sqlite.prepare(`PRAGMA table_info("${table.name}")`).all() as { name: string }[]).map((c) => c.name)
      expect({ table: table.name, columns: columns.sort() }).toEqual({
        table: table.name,
        columns: table.columns.map((c) => c.name).sort(),
      })
      const indexList = store.sqlite.prepare(`PRAGMA index_list("${table.name}")`).all() as { name: string; unique: number; partial: number }[]
      for (const index of table.indexes) {
        expect(indexes).toContain(index.config.name)
        const row = indexList.find((i) => i.name === index.config.name)
        expect({ index: index.config.name, unique: row?.unique, partial: row?.partial }).toEqual({
          index: index.config.name,
          unique: index.config.unique ? 1 : 0,
          partial: index.config.where ? 1 : 0,
        })
      }
      const ddl = (store.sqlite.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").get(table.name) as { sql: string }).sql
      for (const check of table.checks) expect(ddl).toContain(`CONSTRAINT "${check.name}" CHECK`)
    }
    // Nothing else but the runner's own table and SQLite's.
    const known = new Set([...schemaTables.map((t) => t.name), 'trellis_migrations', 'sqlite_sequence'])
    expect(tables.filter((name) => !known.has(name))).toEqual([])
    expect(pendingMigrations(store.sqlite)).toEqual([])
  })

  test('a second migrate() applies nothing; trellis_migrations records each name once', () => {
    const store = emptyStore()
    const applied = migrate(store.sqlite, embedded, 1_700_000_000_000)
    expect(applied.length).toBe(embedded.length)
    expect(migrate(store.sqlite, embedded, 1_800_000_000_000)).toEqual([])
    expect(store.sqlite.prepare('SELECT name, applied_at FROM trellis_migrations ORDER BY name').all()).toEqual(
      embedded.map((m) => ({ name: m.name, applied_at: 1_700_000_000_000 })),
    )
  })

  test('a later migration is applied on its own, after the earlier ones', () => {
    const store = emptyStore()
    migrate(store.sqlite)
    const later = [...embedded, { name: '9999_extra', sql: 'CREATE TABLE extra (id integer);--> statement-breakpoint\nCREATE INDEX extra_idx ON extra (id);' }]
    expect(pendingMigrations(store.sqlite, later)).toEqual(['9999_extra'])
    expect(migrate(store.sqlite, later)).toEqual(['9999_extra'])
    expect(names(store.sqlite, 'index')).toContain('extra_idx')
  })

  test('a migration that rebuilds a table (drizzle-kit: foreign_keys=OFF … ON) keeps the child rows; one that would orphan them is refused whole', () => {
    const store = emptyStore()
    const sqlite = store.sqlite
    const tables = { name: '9000_parent_child', sql: 'CREATE TABLE parent (id integer PRIMARY KEY);--> statement-breakpoint\nCREATE TABLE child (id integer PRIMARY KEY, parent_id integer NOT NULL REFERENCES parent(id) ON DELETE CASCADE);' }
    migrate(sqlite, [tables])
    sqlite.run('INSERT INTO parent (id) VALUES (1), (2)')
    sqlite.run('INSERT INTO child (id, parent_id) VALUES (10, 1), (20, 2)')
    const rebuild = (name: string, keep: string) => ({
      name,
      sql: [
        'PRAGMA foreign_keys=OFF;',
        'CREATE TABLE `__new_parent` (id integer PRIMARY KEY, label text);',
        `INSERT INTO \`__new_parent\`(id) SELECT id FROM parent WHERE ${keep};`,
        'DROP TABLE parent;',
        'ALTER TABLE `__new_parent` RENAME TO parent;',
        'PRAGMA foreign_keys=ON;',
      ].join('--> statement-breakpoint\n'),
    })
    expect(migrate(sqlite, [tables, rebuild('9001_rebuild', 'true')])).toEqual(['9001_rebuild'])
    expect(sqlite.prepare('SELECT id, parent_id FROM child ORDER BY id').all()).toEqual([{ id: 10, parent_id: 1 }, { id: 20, parent_id: 2 }])
    expect(sqlite.prepare('PRAGMA foreign_keys').get()).toEqual({ foreign_keys: 1 })
    // Dropping parent 2 would leave child 20 without a parent: nothing of it is applied.
    expect(() => migrate(sqlite, [tables, rebuild('9001_rebuild', 'true'), rebuild('9002_orphans', 'id = 1')])).toThrow(/9002_orphans would leave 1 rows/)
    expect(sqlite.prepare('SELECT id FROM parent ORDER BY id').all()).toEqual([{ id: 1 }, { id: 2 }])
    expect(pendingMigrations(sqlite, [tables, rebuild('9002_orphans', 'id = 1')])).toEqual(['9002_orphans'])
    expect(sqlite.prepare('PRAGMA foreign_keys').get()).toEqual({ foreign_keys: 1 })
  })

  test('0014 rebuilds runs with its status rules as ORs: the runs, their steps and events stay; the rules still hold', () => {
    const store = emptyStore()
    migrate(store.sqlite, embedded.filter((m) => m.name < '0014'))
    const { insertRun, now } = seedWorkflows(store)
    const active = insertRun(1, 'order-1', 'running')
    const done = insertRun(1, 'order-2', 'succeeded')
    for (const id of [active, done]) {
      execute(store, "INSERT INTO run_steps (run_id, step_index, name, type, status, started_at, finished_at) VALUES (?, 0, 'load', 'load', 'succeeded', ?, ?)", id, now, now)
      execute(store, "INSERT INTO run_events (run_id, environment_id, workflow_id, record_id, sequence, type, status, created_at) VALUES (?, 1, 1, 'r', 1, 'run.started', 'running', ?)", id, now)
    }
    expect(migrate(store.sqlite).filter((name) => name.startsWith('0014'))).toHaveLength(1)
    expect(queryOne(store, 'SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM run_steps) AS steps, (SELECT count(*) FROM run_events) AS events')).toEqual({ runs: 2, steps: 2, events: 2 })
    const ddl = queryOne<{ sql: string }>(store, "SELECT sql FROM sqlite_master WHERE name = 'runs_one_active_per_record'")!.sql
    expect(ddl).toContain("(status = 'queued' OR status = 'running' OR status = 'waiting')")
    expect(() => insertRun(1, 'order-1', 'queued')).toThrow(refused('unique', 'runs_one_active_per_record'))
    expect(() => insertRun(1, 'order-3', 'finished')).toThrow(refused('check', 'runs_status_check'))
    expect(queryOne(store, 'PRAGMA foreign_keys')).toEqual({ foreign_keys: 1 })
  })

  test('0003_log_extensions flags the existing entries the compatibility document cannot describe; the logs stay append-only', () => {
    const store = emptyStore()
    const before = embedded.filter((m) => m.name < '0003')
    expect(before.length).toBe(3)
    migrate(store.sqlite, before)
    const run = (sql: string) => store.sqlite.run(sql)
    run("INSERT INTO users (email, username, created_at, updated_at) VALUES ('a@example.com', 'a', 1, 1)")
    run("INSERT INTO projects (name, created_at) VALUES ('P', 1)")
    run("INSERT INTO environments (project_id, name, created_at) VALUES (1, 'production', 1)")
    for (const action of ['createNote', 'updateNote', 'archiveNote', 'unarchiveNote', 'failWorkflow', 'triggerWorkflow']) {
      run(`INSERT INTO activity_logs (environment_id, type, action, user_id, created_at) VALUES (1, 'write', '${action}', 1, 1)`)
    }
    const admin = [
      ['team', 'administrator'],
      ['api-token', 'administrator'],
      ['user', 'administrator'],
      ['workflow', 'administrator'],
      ['workflow-webhook', 'administrator'],
      ['log-retention', 'system'],
      ['environment', 'system'],
      ['user-project', 'identityProvider'],
    ]
    for (const [resource, initiator] of admin) run(`INSERT INTO admin_logs (project_id, type, resource, initiator, created_at) VALUES (1, 'add', '${resource}', '${initiator}', 1)`)
    expect(migrate(store.sqlite)[0]).toBe('0003_log_extensions') // later migrations follow it
    const flags = (sql: string) => store.sqlite.prepare(sql).all()
    expect(flags('SELECT action, extension FROM activity_logs ORDER BY id')).toEqual([
      { action: 'createNote', extension: 0 },
      { action: 'updateNote', extension: 1 },
      { action: 'archiveNote', extension: 1 },
      { action: 'unarchiveNote', extension: 1 },
      { action: 'failWorkflow', extension: 1 },
      { action: 'triggerWorkflow', extension: 0 },
    ])
    expect(flags('SELECT resource, extension FROM admin_logs ORDER BY id').map((r) => (r as { extension: number }).extension)).toEqual([0, 1, 1, 1, 1, 1, 1, 0])
    // The triggers are back: no entry can be changed, not even its flag.
    expect(() => run('UPDATE activity_logs SET extension = 0')).toThrow('append-only')
    expect(() => run('UPDATE admin_logs SET extension = 0')).toThrow('append-only')
    expect(names(store.sqlite, 'index')).toEqual(expect.arrayContaining(['activity_logs_env_documented_idx', 'admin_logs_project_documented_idx']))
  })

  test('times_in_microseconds turns the ms times of notes, messages and log entries into the same instants in µs; other times stay ms; the logs stay append-only', () => {
    const store = emptyStore()
    const at = embedded.findIndex((m) => m.name.endsWith('_times_in_microseconds'))
    expect(at).toBeGreaterThan(0)
    migrate(store.sqlite, embedded.slice(0, at))
    const run = (sql: string) => store.sqlite.run(sql)
    const ms = 1_795_304_433_123
    run(`INSERT INTO users (email, username, created_at, updated_at) VALUES ('a@example.com', 'a', ${ms}, ${ms})`)
    run(`INSERT INTO projects (name, created_at) VALUES ('P', ${ms})`)
    run(`INSERT INTO environments (project_id, name, created_at) VALUES (1, 'production', ${ms})`)
    run(`INSERT INTO teams (project_id, name, created_at) VALUES (1, 'Ops', ${ms})`)
    run(`INSERT INTO notes (environment_id, team_id, record_id, title, user_id, created_at, updated_at, archived_at) VALUES (1, 1, 'r', 'open', 1, ${ms}, ${ms + 5}, NULL)`)
    run(`INSERT INTO notes (environment_id, team_id, record_id, title, user_id, created_at, updated_at, archived_at) VALUES (1, 1, 'r', 'archived', 1, ${ms + 1}, ${ms + 9}, ${ms + 9})`)
    run(`INSERT INTO note_messages (note_id, user_id, content, created_at) VALUES (1, 1, '<p>x</p>', ${ms + 5})`)
    run(`INSERT INTO activity_logs (environment_id, type, action, user_id, created_at) VALUES (1, 'write', 'createNote', 1, ${ms})`)
    run(`INSERT INTO admin_logs (project_id, type, resource, initiator, created_at) VALUES (1, 'add', 'team', 'administrator', ${ms + 2})`)
    expect(migrate(store.sqlite)[0]).toBe(embedded[at]!.name)
    const rows = (sql: string) => store.sqlite.prepare(sql).all()
    const us = (t: number) => t * 1000
    expect(rows('SELECT created_at, updated_at, archived_at FROM notes ORDER BY id')).toEqual([
      { created_at: us(ms), updated_at: us(ms + 5), archived_at: null },
      { created_at: us(ms + 1), updated_at: us(ms + 9), archived_at: us(ms + 9) },
    ])
    expect(rows('SELECT created_at FROM note_messages')).toEqual([{ created_at: us(ms + 5) }])
    expect(rows('SELECT created_at FROM activity_logs')).toEqual([{ created_at: us(ms) }])
    expect(rows('SELECT created_at FROM admin_logs')).toEqual([{ created_at: us(ms + 2) }])
    // Times outside those lists keep their milliseconds.
    expect(rows('SELECT created_at, updated_at FROM users')).toEqual([{ created_at: ms, updated_at: ms }])
    expect(rows('SELECT created_at FROM teams')).toEqual([{ created_at: ms }])
    expect(() => run('UPDATE activity_logs SET created_at = 0')).toThrow('append-only')
    expect(() => run('UPDATE admin_logs SET created_at = 0')).toThrow('append-only')
  })

  test('runs_created_in_microseconds turns runs\' created_at into µs; available_at and the other run times stay ms', () => {
    const store = emptyStore()
    const at = embedded.findIndex((m) => m.name.endsWith('_runs_created_in_microseconds'))
    expect(at).toBeGreaterThan(0)
    migrate(store.sqlite, embedded.slice(0, at))
    const { now, insertRun } = seedWorkflows(store)
    const id = insertRun(1, 'order-1', 'succeeded')
    expect(migrate(store.sqlite)).toEqual(embedded.slice(at).map((m) => m.name))
    expect(store.sqlite.prepare('SELECT created_at, available_at FROM runs WHERE id = ?').get(id)).toEqual({ created_at: now * 1000, available_at: now })
  })

  test('a failing migration leaves nothing behind and is not recorded', () => {
    const store = emptyStore()
    const broken = [{ name: '0001_broken', sql: 'CREATE TABLE half (id integer);--> statement-breakpoint\nCREATE TABLE oops (' }]
    expect(() => migrate(store.sqlite, broken)).toThrow()
    expect(names(store.sqlite, 'table')).not.toContain('half')
    expect(store.sqlite.prepare('SELECT name FROM trellis_migrations').all()).toEqual([])
  })

  test('two processes migrating the same new file at once both succeed and apply it once', async () => {
    const dir = tempDir()
    cleanups.push(dir.cleanup)
    const results = await Promise.all([runCli(['migrate', '--data', dir.path]), runCli(['migrate', '--data', dir.path])])
    for (const result of results) expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' })
    const store = openStore(dir.path)
    try {
      expect(store.sqlite.prepare('SELECT name FROM trellis_migrations ORDER BY name').all()).toEqual(embedded.map((m) => ({ name: m.name })))
    } finally {
      store.close()
    }
  })
})

describe('embedded migrations', () => {
  const journal = JSON.parse(readFileSync(join(repoRoot, 'drizzle/meta/_journal.json'), 'utf8')) as Journal

  test('src/db/sqlite/migrations.generated.ts is what scripts/embed-migrations.ts would write', () => {
    expect(readFileSync(join(repoRoot, 'src/db/sqlite/migrations.generated.ts'), 'utf8')).toBe(renderMigrationsModule(journal))
  })

  test('src/db/postgres/migrations.generated.ts too (PostgreSQL, drizzle/postgres/), with every SQL file of the folder', () => {
    const path = 'drizzle/postgres/meta/_journal.json'
    const pgJournal = JSON.parse(readFileSync(join(repoRoot, path), 'utf8')) as Journal
    expect(readFileSync(join(repoRoot, 'src/db/postgres/migrations.generated.ts'), 'utf8')).toBe(renderMigrationsModule(pgJournal, '../../../drizzle/postgres', path))
    const sqlFiles = readdirSync(join(repoRoot, 'drizzle/postgres')).filter((name) => name.endsWith('.sql')).sort()
    expect(sqlFiles).toEqual(pgJournal.entries.map((e) => `${e.tag}.sql`).sort())
  })

  test('every journal entry has its drizzle/<tag>.sql, embedded verbatim, and no SQL file is left out', () => {
    const sqlFiles = readdirSync(join(repoRoot, 'drizzle')).filter((name) => name.endsWith('.sql')).sort()
    const tags = journal.entries.map((e) => e.tag)
    expect(sqlFiles).toEqual(tags.map((tag) => `${tag}.sql`).sort())
    expect(embedded.map((m) => m.name)).toEqual(tags)
    for (const migration of embedded) {
      expect(migration.sql).toBe(readFileSync(join(repoRoot, 'drizzle', `${migration.name}.sql`), 'utf8'))
    }
  })

  // drizzle-kit is offline and takes well under a second; run it on a copy so the repo is never touched.
  test('drizzle-kit generate finds no schema change that lacks a migration', async () => {
    const dir = tempDir()
    cleanups.push(dir.cleanup)
    cpSync(join(repoRoot, 'drizzle'), join(dir.path, 'drizzle'), { recursive: true })
    const kit = async (...args: string[]) => {
      const proc = Bun.spawn([process.execPath, join(repoRoot, 'node_modules/drizzle-kit/bin.cjs'), ...args], {
        cwd: dir.path,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' },
        stdout: 'pipe',
        stderr: 'pipe',
      })
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
      return { code, output: stdout + stderr }
    }
    const listing = () => readdirSync(join(dir.path, 'drizzle'), { recursive: true }).map(String).sort()
    const before = listing()

    const generated = await kit('generate', '--dialect', 'sqlite', '--schema', join(repoRoot, 'src/db/schema.ts'), '--out', 'drizzle')
    expect(generated.code).toBe(0)
    expect(generated.output).toContain('No schema changes')
    expect(listing()).toEqual(before)

    const checked = await kit('check', '--dialect', 'sqlite', '--out', 'drizzle')
    expect(checked.code).toBe(0)
  }, 30_000)
})

sqliteOnlyDescribe(SQLITE_ONLY.pragmas, 'pragmas', () => {
  test('WAL, foreign keys on, synchronous NORMAL, busy_timeout 5000', () => {
    const { sqlite } = emptyStore()
    expect(sqlite.prepare('PRAGMA journal_mode').get()).toEqual({ journal_mode: 'wal' })
    expect(sqlite.prepare('PRAGMA foreign_keys').get()).toEqual({ foreign_keys: 1 })
    expect(sqlite.prepare('PRAGMA synchronous').get()).toEqual({ synchronous: 1 })
    expect(sqlite.prepare('PRAGMA busy_timeout').get()).toEqual({ timeout: 5000 })
  })

  test('WAL survives reopening the file', () => {
    const dir = tempDir()
    cleanups.push(dir.cleanup)
    openStore(dir.path).close()
    const raw = new Database(join(dir.path, 'trellis.db'))
    try {
      expect(raw.prepare('PRAGMA journal_mode').get()).toEqual({ journal_mode: 'wal' })
    } finally {
      raw.close()
    }
  })
})

/** The rows a run needs (user, project, environment, team, rendering, collection, workflow, version), by raw SQL. */
function seedWorkflows(store: TestStore) {
  const now = 1_795_000_000_000
  const run = (statement: string, params: SqlValue[] = []) => execute(store, statement, ...params)
  run("INSERT INTO users (id, email, username, created_at, updated_at) VALUES (1, 'a@example.com', 'a', ?, ?)", [now, now])
  run("INSERT INTO projects (id, name, created_at) VALUES (1, 'Acme', ?)", [now])
  run("INSERT INTO environments (id, project_id, name, created_at) VALUES (1, 1, 'production', ?)", [now])
  run("INSERT INTO teams (id, project_id, name, created_at) VALUES (1, 1, 'Support', ?)", [now])
  run('INSERT INTO renderings (id, environment_id, team_id) VALUES (1, 1, 1)')
  run("INSERT INTO collections (id, project_id, name, created_at) VALUES (1, 1, 'orders', ?)", [now])
  for (const id of [1, 2]) {
    run('INSERT INTO workflows (id, rendering_id, name, collection_id, created_at, updated_at) VALUES (?, 1, ?, 1, ?, ?)', [
      id,
      `wf${id}`,
      now,
      now,
    ])
    run("INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, created_at) VALUES (?, ?, 1, '{}', 'h', ?)", [
      id,
      id,
      now,
    ])
  }
  let n = 0
  const insertRun = (workflowId: number, recordId: string, status: string) => {
    const id = `run-${++n}`
    run(
      `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, trigger, status, available_at, created_at)
       VALUES (?, ?, ?, 1, ?, 1, 'webhook', ?, ?, ?)`,
      [id, workflowId, workflowId, recordId, status, now, now],
    )
    return id
  }
  return { now, insertRun }
}

/** What a statement the database refuses fails with, on the store under test (SQLite's words, or PostgreSQL's). */
function refused(kind: 'unique' | 'check' | 'foreign key', constraint = ''): RegExp {
  if (TEST_STORE === 'sqlite') return new RegExp(`${kind.toUpperCase()} constraint failed${kind === 'check' ? `: ${constraint}` : ''}`)
  return new RegExp(`violates ${kind} constraint${constraint === '' ? '' : ` "${constraint}"`}`)
}

describe('constraints', () => {
  test('runs_one_active_per_record: one active run per (workflow, record); finished runs do not count', () => {
    const { store } = migratedEnv()
    const { insertRun } = seedWorkflows(store)
    const first = insertRun(1, 'order-1', 'queued')
    for (const status of ['queued', 'running', 'waiting']) {
      expect(() => insertRun(1, 'order-1', status)).toThrow(refused('unique', 'runs_one_active_per_record'))
    }
    // Another record, or another workflow on the same record, is independent.
    insertRun(1, 'order-2', 'queued')
    insertRun(2, 'order-1', 'running')

    // While running or waiting it still blocks.
    execute(store, "UPDATE runs SET status = 'waiting' WHERE id = ?", first)
    expect(() => insertRun(1, 'order-1', 'queued')).toThrow(refused('unique', 'runs_one_active_per_record'))

    execute(store, "UPDATE runs SET status = 'succeeded' WHERE id = ?", first)
    const second = insertRun(1, 'order-1', 'queued')
    execute(store, "UPDATE runs SET status = 'failed' WHERE id = ?", second)
    insertRun(1, 'order-1', 'cancelled')
    insertRun(1, 'order-1', 'queued')
    // Re-activating a finished run while another is active is refused too.
    expect(() => execute(store, "UPDATE runs SET status = 'queued' WHERE id = ?", second)).toThrow(refused('unique', 'runs_one_active_per_record'))
    expect(queryOne(store, "SELECT count(*) AS n FROM runs WHERE workflow_id = 1 AND record_id = 'order-1'")).toEqual({ n: 4 })
  })

  test('CHECK constraints refuse an unknown run status, trigger, member role, log type', () => {
    const { store } = migratedEnv()
    const { insertRun, now } = seedWorkflows(store)
    expect(() => insertRun(1, 'order-1', 'finished')).toThrow(refused('check', 'runs_status_check'))
    expect(() => insertRun(1, 'order-1', 'QUEUED')).toThrow(refused('check', 'runs_status_check'))
    const id = insertRun(1, 'order-1', 'queued')
    expect(() => execute(store, "UPDATE runs SET status = 'done' WHERE id = ?", id)).toThrow(refused('check', 'runs_status_check'))
    expect(() => execute(store, "UPDATE runs SET trigger = 'cron' WHERE id = ?", id)).toThrow(refused('check', 'runs_trigger_check'))

    const addMember = (role: string) =>
      execute(store, 'INSERT INTO project_members (project_id, user_id, role, created_at, updated_at) VALUES (1, 1, ?, ?, ?)', role, now, now)
    expect(() => addMember('owner')).toThrow(refused('check', 'project_members_role_check'))
    expect(() => addMember('Admin')).toThrow(refused('check', 'project_members_role_check'))
    addMember('admin')

    expect(() =>
      execute(store, "INSERT INTO activity_logs (environment_id, type, action, user_id, created_at) VALUES (1, 'delete', 'create', 1, ?)", now),
    ).toThrow(refused('check', 'activity_logs_type_check'))
    expect(() =>
      execute(store, "INSERT INTO admin_logs (type, resource, initiator, created_at) VALUES ('add', 'role', 'robot', ?)", now),
    ).toThrow(refused('check', 'admin_logs_initiator_check'))
  })

  test('foreign keys are enforced', () => {
    const { store } = migratedEnv()
    const { now } = seedWorkflows(store)
    expect(() =>
      execute(
        store,
        `INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, trigger, status, available_at, created_at)
         VALUES ('r', 99, 1, 1, 'x', 1, 'manual', 'queued', ?, ?)`,
        now,
        now,
      ),
    ).toThrow(refused('foreign key'))
  })

  test('note ids are never reused (AUTOINCREMENT)', () => {
    const { store } = migratedEnv()
    const { now } = seedWorkflows(store)
    const insertNote = () => {
      execute(store, "INSERT INTO notes (environment_id, team_id, collection_id, record_id, title, user_id, created_at, updated_at) VALUES (1, 1, 1, 'r', 't', 1, ?, ?)", now, now)
      return queryOne<{ id: number }>(store, 'SELECT max(id) AS id FROM notes')!.id
    }
    expect(insertNote()).toBe(1)
    expect(insertNote()).toBe(2)
    execute(store, 'DELETE FROM notes WHERE id = 2')
    expect(insertNote()).toBe(3)
  })
})

describe('indexes serve the list filters (EXPLAIN QUERY PLAN)', () => {
  const pages = [
    ['notes', 'SELECT id FROM notes WHERE environment_id = ? ORDER BY id DESC LIMIT 11'],
    ['notes', 'SELECT id FROM notes WHERE environment_id = ? AND record_id = ? ORDER BY id DESC LIMIT 11'],
    ['notes', 'SELECT id FROM notes WHERE environment_id = ? AND user_id = ? ORDER BY id DESC LIMIT 11'],
    ['notes', 'SELECT id FROM notes WHERE environment_id = ? AND team_id = ? ORDER BY id DESC LIMIT 11'],
    ['notes', 'SELECT id FROM notes WHERE environment_id = ? AND collection_id = ? ORDER BY id DESC LIMIT 11'],
    ['runs', 'SELECT id FROM runs WHERE environment_id = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT 11'],
    ['runs', 'SELECT id FROM runs WHERE environment_id = ? AND record_id = ? ORDER BY created_at DESC, id DESC LIMIT 11'],
    ['runs', 'SELECT id FROM runs WHERE environment_id = ? AND workflow_id = ? ORDER BY created_at DESC, id DESC LIMIT 11'],
    ['activity_logs', 'SELECT id FROM activity_logs WHERE environment_id = ? AND action = ? ORDER BY id DESC LIMIT 11'],
    ['activity_logs', 'SELECT id FROM activity_logs WHERE environment_id = ? AND user_id = ? ORDER BY id DESC LIMIT 11'],
    ['admin_logs', 'SELECT id FROM admin_logs WHERE project_id = ? AND resource = ? ORDER BY id DESC LIMIT 11'],
    // The default log pages (extensions hidden): the partial indexes, whose condition must be written as a literal.
    ['activity_logs', 'SELECT id FROM activity_logs WHERE environment_id = ? AND extension = 0 ORDER BY id DESC LIMIT 11'],
    ['admin_logs', 'SELECT id FROM admin_logs WHERE project_id = ? AND extension = 0 ORDER BY id DESC LIMIT 11'],
  ] as const

  sqliteOnlyEach(SQLITE_ONLY.queryPlan, pages.map(([table, query]): [string, string] => [table, query]), '%s: %s', (table, query) => {
    const env = sqliteTestEnv()
    cleanups.push(env.cleanup)
    const plan = (env.store.sqlite.prepare(`EXPLAIN QUERY PLAN ${query}`).all(...query.split('?').slice(1).map(() => 1)) as { detail: string }[]).map(
      (row) => row.detail,
    )
    expect(plan.some((detail) => detail.startsWith(`SEARCH ${table} USING `) && detail.includes('INDEX'))).toBe(true)
    expect(plan.filter((detail) => detail.startsWith('SCAN') && !detail.includes('USING INDEX') && !detail.includes('USING COVERING INDEX'))).toEqual([])
    // The index also gives the order: no sort of every matching row.
    expect(plan.filter((detail) => detail.includes('TEMP B-TREE'))).toEqual([])
  })
})

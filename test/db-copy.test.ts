/**
 * `trellis db copy` with the real CLI, a real SQLite data directory (the Acme fixture, runs,
 * notes and log entries written through the API) and a throw-away PostgreSQL cluster.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { SQL } from 'bun'
import { migratePostgres } from '../src/db/postgres/migrate.ts'
import { migrations as embeddedMigrations } from '../src/db/postgres/migrations.generated.ts'
import { createFieldIndex, fieldIndexName } from '../src/db/records.ts'
import { appendRunEvents } from '../src/db/run-events.ts'
import { bearer, queryOne, request, runCli, runNow, sqliteTestEnv, type SqliteTestEnv, testApp } from './helpers.ts'
import { acmeDocument, applyAcme, openTaskOnRun, reportHook, tokenFor, userId } from './support/acme.ts'
import { type Cluster, openProductPostgres, postgresInstalled, startCluster } from './support/postgres-cluster.ts'

if (!postgresInstalled) {
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') throw new Error('initdb/pg_ctl not found (apt-get install postgresql)')
  console.warn('db-copy: SKIPPED, PostgreSQL is not installed (apt-get install postgresql)')
}

describe.skipIf(!postgresInstalled)('trellis db copy --from <sqlite> --to postgres://…', () => {
  let env: SqliteTestEnv
  let cluster: Cluster
  let sql: SQL

  beforeAll(async () => {
    env = sqliteTestEnv({ TRELLIS_WEBHOOK_RATE_PER_MIN: '1000' })
    const report = await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
    const app = testApp(env)
    const bob = (await tokenFor(env.store, env.clock, 'bob', ['workflows:trigger'])).value
    const alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    const runIds: string[] = []
    for (const record of ['ord_1001', 'ord_1002', 'ord_1003']) {
      const response = await app.handle(request(reportHook(report, 'Refund order'), { method: 'POST', headers: bearer(bob), json: { record_id: record } }))
      expect(response.status).toBe(202)
      runIds.push(((await response.json()) as { runId: string }).runId)
    }
    // Run events of the first run (its executor is not running here).
    const run = queryOne<{ environment_id: number; workflow_id: number; record_id: string }>(env.store, 'SELECT environment_id, workflow_id, record_id FROM runs WHERE id = ?', runIds[0]!)!
    const subject = { runId: runIds[0]!, environmentId: run.environment_id, workflowId: run.workflow_id, recordId: run.record_id }
    await runNow(env.store, appendRunEvents([{ ...subject, type: 'run.started', status: 'running', at: env.clock.now() }, { ...subject, type: 'run.requeued', status: 'queued', at: env.clock.now() }]))
    // A task naming a team and a user: two assignee rows, each with one of the two NULL (a table without a key).
    const support = queryOne<{ id: number }>(env.store, "SELECT id FROM teams WHERE name = 'Support'")!.id
    await openTaskOnRun(env.store, env.clock, runIds[0]!, { teamIds: [support], userIds: [userId(env.store, 'carol')] })
    const note = await app.handle(
      request('/v1/project/Acme/environment/production/notes', {
        method: 'POST',
        headers: bearer(alice),
        json: { teamName: 'Support', collectionName: 'orders', recordId: 'ord_1001', title: 'Copied', content: '<p>across databases</p>' },
      }),
    )
    expect(note.status).toBe(201)
    // A schema with a field of each indexed kind: PostgreSQL builds their indexes from it (SQLite's are its own).
    const schema = await app.handle(
      request('/v1/project/Acme/collections/orders/schema', {
        method: 'PUT',
        headers: bearer(alice),
        json: { fields: [{ name: 'total', type: 'number', indexed: true }, { name: 'status', type: 'text', indexed: true }, { name: 'paid', type: 'boolean', indexed: true }, { name: 'notes', type: 'json' }] },
      }),
    )
    expect(schema.status).toBe(200)
    cluster = startCluster()
    sql = new SQL(cluster.url)
  }, 60_000)

  afterAll(async () => {
    await sql?.close()
    cluster?.stop()
    env?.cleanup()
  })

  const sqliteCount = (table: string) => (env.store.sqlite.prepare(`SELECT count(*) AS n FROM "${table}"`).get() as { n: number }).n
  const postgresCount = async (table: string) => Number(((await sql.unsafe(`SELECT count(*) AS n FROM "${table}"`)) as { n: string }[])[0]!.n)

  const copiedTables = () =>
    (env.store.sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'trellis_migrations'").all() as { name: string }[]).map((t) => t.name)
  /** A new empty database of the cluster (`options`: how CREATE DATABASE makes it); its URL. */
  const createDatabase = async (name: string, options = '') => {
    await sql.unsafe(`CREATE DATABASE ${name} ${options}`)
    return cluster.url.replace(/\/postgres$/, `/${name}`)
  }

  test('copies every table, verified by row count and checksum; booleans, µs times and the id sequences survive', async () => {
    const result = await runCli(['db', 'copy', '--from', env.dataDir, '--to', cluster.url])
    expect(result.code).toBe(0)
    const tables = copiedTables()
    // stdout: the result lines, as before; stderr (not a terminal): a summary line per table and step, then the total.
    const total = tables.reduce((sum, table) => sum + sqliteCount(table), 0)
    const out = result.stdout.trim().split('\n')
    const err = result.stderr.trim().split('\n')
    expect({ out: out.length, err: err.length }).toEqual({ out: tables.length + 1, err: tables.length + 5 })
    const lineOf = (lines: string[], table: string) => ({ table, line: lines.find((line) => line.startsWith(`${table}: `)) })
    for (const table of tables) {
      const rows = sqliteCount(table)
      expect(lineOf(out, table)).toEqual({ table, line: expect.stringMatching(new RegExp(`^${table}: ${rows} rows, checksum [0-9a-f]{16} \\(verified\\)$`)) })
      expect(lineOf(err, table)).toEqual({ table, line: expect.stringMatching(new RegExp(`^${table}: ${rows.toLocaleString('en-US')} rows in \\d+\\.\\d s`)) })
    }
    expect(out.at(-1)).toBe(`copied ${total} rows in ${tables.length} tables`)
    expect(err.slice(-5)).toEqual([
      expect.stringMatching(/^indexes \(\d+\): \d+\.\d s$/),
      expect.stringMatching(/^foreign keys \(\d+\): \d+\.\d s$/),
      expect.stringMatching(/^field indexes: \d+\.\d s$/),
      expect.stringMatching(/^ANALYZE: \d+\.\d s$/),
      expect.stringMatching(new RegExp(`^db copy: ${total.toLocaleString('en-US')} rows in \\d+\\.\\d s \\([\\d,]+ rows/s\\)$`)),
    ])
    expect(result.stderr).not.toContain('\r')
    for (const table of tables) expect({ table, rows: await postgresCount(table) }).toEqual({ table, rows: sqliteCount(table) })
    expect(sqliteCount('runs')).toBe(3)
    expect(sqliteCount('task_assignees')).toBe(2)
    expect(sqliteCount('notes')).toBeGreaterThan(0)
    // A boolean is a boolean, a µs time the same instant, a text id the same id.
    const admin = (await sql`SELECT is_instance_admin FROM users WHERE email = 'alice@example.com'`) as { is_instance_admin: boolean }[]
    const stored = env.store.sqlite.prepare("SELECT is_instance_admin AS a FROM users WHERE email = 'alice@example.com'").get() as { a: number }
    expect(admin[0]!.is_instance_admin).toBe(stored.a === 1)
    const run = env.store.sqlite.prepare('SELECT id, created_at FROM runs ORDER BY id LIMIT 1').get() as { id: string; created_at: number }
    expect(await sql`SELECT created_at::text AS at FROM runs WHERE id = ${run.id}`).toEqual([{ at: String(run.created_at) }])
    // The collection's indexed fields have their PostgreSQL indexes, with the definitions a schema set on PostgreSQL
    // gives them (the app's own statements, run again after dropping them).
    const orders = queryOne<{ id: number }>(env.store, "SELECT id FROM collections WHERE name = 'orders'")!.id
    const fieldIndexes = (await sql`SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE ${`records_field_${orders}_%`} ORDER BY indexname`) as { indexname: string; indexdef: string }[]
    expect(fieldIndexes.map((i) => i.indexname).sort()).toEqual(['total', 'status', 'paid'].map((field) => fieldIndexName(orders, field)).sort())
    expect(fieldIndexes.map((i) => i.indexdef).join('\n')).toContain(`(data)::jsonb ->> 'total'::text))::numeric`)
    const statistics = (await sql`SELECT stxname, pg_get_statisticsobjdef(oid) AS def FROM pg_statistic_ext ORDER BY stxname`) as { stxname: string; def: string }[]
    expect(statistics.map((s) => s.stxname)).toEqual(fieldIndexes.map((i) => i.indexname))
    const store = openProductPostgres(cluster.url, { max: 1 })
    try {
      await sql.unsafe(fieldIndexes.map((i) => `DROP INDEX "${i.indexname}"; DROP STATISTICS "${i.indexname}"`).join('; '))
      for (const [field, kind] of [['total', 'number'], ['status', 'text'], ['paid', 'boolean']] as const) await runNow(store, createFieldIndex(orders, field, kind))
    } finally {
      await store.close()
    }
    expect(await sql`SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE ${`records_field_${orders}_%`} ORDER BY indexname`).toEqual(fieldIndexes)
    expect(await sql`SELECT stxname, pg_get_statisticsobjdef(oid) AS def FROM pg_statistic_ext ORDER BY stxname`).toEqual(statistics)
    // The next id PostgreSQL gives is past every copied one.
    const maxId = (env.store.sqlite.prepare('SELECT max(id) AS m FROM projects').get() as { m: number }).m
    const [fresh] = (await sql`INSERT INTO projects (name, created_at) VALUES ('After copy', 1) RETURNING id`) as { id: string }[]
    expect(Number(fresh!.id)).toBeGreaterThan(maxId)
    // The copied run events are readable at once (their watermark at the newest), and a new one's id comes after them.
    const maxEvent = Number((env.store.sqlite.prepare('SELECT max(id) AS m FROM run_events').get() as { m: number }).m)
    expect(maxEvent).toBeGreaterThan(0)
    expect(await sql`SELECT through::float8 AS through FROM list_sequencer WHERE list = 'run_events'`).toEqual([{ through: maxEvent }])
    const [event] = (await sql`SELECT trellis_sequenced_id('run_events_id_seq')::float8 AS id`) as { id: number }[]
    expect(event!.id).toBeGreaterThan(maxEvent)
  }, 60_000)

  test('upgrading PostgreSQL: the field indexes built before the kinds are built again, each by its field\'s kind', async () => {
    const url = await createDatabase('upgraded')
    const db = new SQL(url, { max: 1 })
    try {
      await migratePostgres(db, embeddedMigrations.filter((m) => m.name < '0027'))
      const fields = [{ name: 'total', type: 'integer', indexed: true }, { name: 'label', type: 'select', options: ['a'], indexed: true }, { name: 'tags', type: 'multiselect', options: ['a'] }, { name: 'plain', type: 'text' }]
      const [project] = (await db`INSERT INTO projects (name, created_at) VALUES ('P', 1) RETURNING id`) as { id: string }[]
      const [made] = (await db`INSERT INTO collections (project_id, name, created_at, schema) VALUES (${project!.id}, 'c', 1, ${JSON.stringify(fields)}) RETURNING id::int AS id`) as { id: number }[]
      const collection = made!.id
      // As the schema change built them before: the text, whatever the kind.
      for (const field of ['total', 'label']) await db.unsafe(`CREATE INDEX "${fieldIndexName(collection, field)}" ON records (environment_id, (data::jsonb ->> '${field}')) WHERE collection_id = ${collection}`)
      expect(await migratePostgres(db)).toEqual(['0027_record_field_indexes_by_kind', '0028_activity_chained_by_the_pass', '0029_queue_run_function', '0030_notes_dated_by_the_pass', '0031_activity_chaining_decided_in_when', '0032_runs_listed_by_time', '0033_tasks_listed_by_time', '0034_write_path_plans_pinned'])
      const defs = (await db`SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE ${`records_field_${collection}_%`} ORDER BY indexname`) as { indexname: string; indexdef: string }[]
      expect(defs.map((d) => d.indexname).sort()).toEqual([fieldIndexName(collection, 'total'), fieldIndexName(collection, 'label')].sort())
      const byName = new Map(defs.map((d) => [d.indexname, d.indexdef]))
      expect(byName.get(fieldIndexName(collection, 'total'))).toContain(`(data)::jsonb ->> 'total'::text))::numeric`)
      expect(byName.get(fieldIndexName(collection, 'label'))).toContain('END) COLLATE "C" NULLS FIRST, id)')
      // With the statistics of each expression, under the index's name.
      expect(await db`SELECT stxname FROM pg_statistic_ext ORDER BY stxname`).toEqual([...byName.keys()].sort().map((stxname) => ({ stxname })))
    } finally {
      await db.close()
    }
  }, 60_000)

  test('more rows than one COPY chunk on several tables, every kind of value, text keys in byte order under any collation', async () => {
    const bulk = sqliteTestEnv()
    try {
      await applyAcme({ store: bulk.store, clock: bulk.clock, secret: bulk.secret, baseUrl: bulk.config.baseUrl }, acmeDocument())
      const db = bulk.store.sqlite
      const { env: environment, team, user } = db.prepare('SELECT e.id AS env, t.id AS team, u.id AS user FROM environments e JOIN teams t ON t.project_id = e.project_id, users u LIMIT 1').get() as { env: number; team: number; user: number }
      const controls = String.fromCharCode(...Array.from({ length: 31 }, (_, i) => i + 1), 127)
      const tricky = ['', '\\N', '\\.', 'back\\slash\\', 'tab\tand\tnewline\n\r\n', controls, 'héllo — ünïcödé 日本語 🚀 e\u0301 עברית', '"quoted", \'single\'; semi']
      // Keys that sort apart by bytes (SQLite) and by a linguistic collation: the read-back must follow the bytes.
      const keys = ['ord-1', 'ORD-2', 'Ord-3', 'a_b', 'a-c', 'B']
      const huge = 'x'.repeat(300_000)
      const PAST_2_53 = 9_007_199_254_740_993n
      const ROWS = 3000
      const note = db.prepare('INSERT INTO notes (environment_id, team_id, collection_id, record_id, title, user_id, created_at, updated_at, archived_at) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?)')
      const message = db.prepare('INSERT INTO note_messages (note_id, user_id, content, created_at) VALUES (?, ?, ?, ?)')
      const log = db.prepare("INSERT INTO activity_logs (environment_id, type, action, label, user_id, team_id, created_at, extension) VALUES (?, 'write', 'bulk', ?, ?, ?, ?, ?)")
      const logRecord = db.prepare('INSERT INTO activity_log_records (log_id, environment_id, record_id) VALUES (?, ?, ?)')
      db.transaction(() => {
        for (let i = 0; i < ROWS; i++) {
          const text = tricky[i % tricky.length]!
          const at = 1_700_000_000_000_000 + i
          const noteId = note.run(environment, team, keys[i % keys.length]!, `${text} ${'t'.repeat(400)}`, user, at, at, i % 7 === 0 ? PAST_2_53 : null).lastInsertRowid
          message.run(noteId, user, i === 0 ? huge : `${text} ${'m'.repeat(500)}`, at)
          const logId = log.run(environment, i % 3 === 0 ? null : `${text} ${'l'.repeat(400)}`, user, team, at, i % 2).lastInsertRowid
          for (const key of keys) logRecord.run(logId, environment, key)
        }
      })()

      const url = await createDatabase('bulk', "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'")
      const result = await runCli(['db', 'copy', '--from', bulk.dataDir, '--to', url])
      expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: expect.stringContaining('db copy: ') })
      for (const table of ['notes', 'note_messages', 'activity_logs', 'activity_log_records']) {
        expect(result.stderr).toMatch(new RegExp(`^${table}: [\\d,]+ rows in `, 'm'))
      }

      // Every value the same, compared as text (booleans as 0/1): integers past 2^53, NULLs, escapes, unicode, 300 kB.
      const source = new Database(bulk.store.path, { readonly: true, safeIntegers: true })
      const target = new SQL(url, { max: 1 })
      try {
        const compare = async (table: string, columns: string[], order: string, booleans: string[] = []) => {
          const sqliteRows = source.prepare(`SELECT ${columns.join(', ')} FROM ${table} ORDER BY ${order}`).values().map((row) => row.map((v) => (v === null ? null : String(v))))
          const pgColumns = columns.map((c) => (booleans.includes(c) ? `${c}::int::text` : `${c}::text`)).join(', ')
          // By the table's columns (the text columns selected share their names), text by its bytes.
          const pgOrder = order.split(', ').map((c) => `${table}.${c}${c === 'record_id' ? ' COLLATE "C"' : ''}`).join(', ')
          const pgRows = (await target.unsafe(`SELECT ${pgColumns} FROM ${table} ORDER BY ${pgOrder}`).values()) as (string | null)[][]
          expect({ table, rows: pgRows.length }).toEqual({ table, rows: sqliteRows.length })
          expect(pgRows).toEqual(sqliteRows)
        }
        await compare('notes', ['id', 'environment_id', 'team_id', 'collection_id', 'record_id', 'title', 'user_id', 'created_at', 'updated_at', 'archived_at'], 'id')
        await compare('note_messages', ['id', 'note_id', 'user_id', 'content', 'created_at'], 'id')
        await compare('activity_logs', ['id', 'environment_id', 'type', 'action', 'label', 'user_id', 'team_id', 'collection_id', 'token_id', 'created_at', 'extension'], 'id', ['extension'])
        await compare('activity_log_records', ['log_id', 'environment_id', 'record_id'], 'log_id, record_id')
        await compare('users', ['id', 'email', 'is_instance_admin', 'password_hash', 'disabled_at'], 'id', ['is_instance_admin'])
        expect(await target`SELECT count(*)::int AS n FROM notes WHERE archived_at = ${String(PAST_2_53)}::bigint`).toEqual([{ n: Math.ceil(ROWS / 7) }])
        expect(await target`SELECT max(length(content)) AS n FROM note_messages`).toEqual([{ n: huge.length }])
      } finally {
        source.close()
        await target.close()
      }
    } finally {
      bulk.cleanup()
    }
  }, 120_000)

  test('--quiet: nothing on stderr, the same result lines on stdout', async () => {
    const url = await createDatabase('quiet')
    const [loud, quiet] = [await runCli(['db', 'copy', '--from', env.dataDir, '--to', await createDatabase('loud')]), await runCli(['db', 'copy', '--quiet', '--from', env.dataDir, '--to', url])]
    expect(quiet).toEqual({ code: 0, stdout: loud.stdout, stderr: '' })
  }, 60_000)

  const refusedValues = [
    { name: 'a boolean that is not 0 or 1 (refused by the copy)', table: 'users', column: 'is_instance_admin', value: 2, says: 'users.is_instance_admin holds 2, not a boolean (0 or 1)' },
    { name: 'text in a bigint column (refused by PostgreSQL)', table: 'notes', column: 'created_at', value: 'yesterday', says: 'invalid input syntax for type bigint' },
  ]
  test.each(refusedValues)('$name stops the copy: nothing copied, every foreign key and index still there', async ({ table, column, value, says }) => {
    const url = await createDatabase(`refused_${table}`)
    const row = env.store.sqlite.prepare(`SELECT id, ${column} AS value FROM ${table} ORDER BY id LIMIT 1`).get() as { id: number; value: number }
    env.store.sqlite.prepare(`UPDATE ${table} SET ${column} = ? WHERE id = ?`).run(value, row.id)
    let result: Awaited<ReturnType<typeof runCli>>
    try {
      result = await runCli(['db', 'copy', '--from', env.dataDir, '--to', url])
    } finally {
      env.store.sqlite.prepare(`UPDATE ${table} SET ${column} = ? WHERE id = ?`).run(row.value, row.id)
    }
    expect(result.code).toBe(1)
    // The progress of the tables before, then the one error line.
    const lines = result.stderr.trim().split('\n')
    expect(lines.at(-1)).toStartWith('trellis db: copy failed, nothing was copied: ')
    expect(lines.at(-1)).toContain(says)
    expect(lines.slice(0, -1).every((line) => / rows in \d+\.\d s/.test(line))).toBe(true)
    const target = new SQL(url, { max: 1 })
    try {
      const schema = (db: SQL) => db`SELECT (SELECT count(*)::int FROM pg_constraint WHERE contype = 'f') AS keys, (SELECT count(*)::int FROM pg_indexes WHERE schemaname = 'public') AS indexes`
      // As the migrations made it (the copy migrates the target before its transaction).
      const reference = new SQL(await createDatabase(`reference_${table}`), { max: 1 })
      await migratePostgres(reference)
      const [whole] = (await schema(reference)) as { keys: number; indexes: number }[]
      await reference.close()
      expect(whole!.keys).toBeGreaterThan(40)
      expect(await schema(target)).toEqual([whole])
      expect(await target`SELECT (SELECT count(*)::int FROM projects) + (SELECT count(*)::int FROM users) + (SELECT count(*)::int FROM notes) AS n`).toEqual([{ n: 0 }])
    } finally {
      await target.close()
    }
  }, 60_000)

  test('a target that already holds rows is refused, and nothing is written', async () => {
    const before = await postgresCount('projects')
    const result = await runCli(['db', 'copy', '--from', env.dataDir, '--to', cluster.url])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('the target database is not empty')
    expect(result.stderr).not.toContain(cluster.url)
    expect(await postgresCount('projects')).toBe(before)
  })

  test('bad input: no copy subcommand, a --to that is not postgres://, a --from with no database', async () => {
    expect((await runCli(['db', '--from', env.dataDir, '--to', cluster.url])).code).toBe(2)
    const notPostgres = await runCli(['db', 'copy', '--from', env.dataDir, '--to', 'mysql://x'])
    expect({ code: notPostgres.code, says: notPostgres.stderr.includes('--to must be a postgres:// URL') }).toEqual({ code: 2, says: true })
    const missing = await runCli(['db', 'copy', '--from', '/nonexistent/trellis', '--to', cluster.url])
    expect({ code: missing.code, says: missing.stderr.includes('no SQLite database at /nonexistent/trellis') }).toEqual({ code: 1, says: true })
  }, 30_000)
})

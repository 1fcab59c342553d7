/**
 * `trellis db copy` (issue 18, item 5) with the real CLI, a real SQLite data directory (the Acme fixture, runs,
 * notes and log entries written through the API) and a throw-away PostgreSQL cluster.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { bearer, request, runCli, sqliteTestEnv, type SqliteTestEnv, testApp } from './helpers.ts'
import { acmeDocument, applyAcme, reportHook, tokenFor } from './support/acme.ts'
import { type Cluster, postgresInstalled, startCluster } from './support/postgres-cluster.ts'

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
    for (const record of ['ord_1001', 'ord_1002', 'ord_1003']) {
      const response = await app.handle(request(reportHook(report, 'Refund order'), { method: 'POST', headers: bearer(bob), json: { record_id: record } }))
      expect(response.status).toBe(202)
    }
    const note = await app.handle(
      request('/v1/project/Acme/environment/production/notes', {
        method: 'POST',
        headers: bearer(alice),
        json: { teamName: 'Support', collectionName: 'orders', recordId: 'ord_1001', title: 'Copied', content: '<p>across databases</p>' },
      }),
    )
    expect(note.status).toBe(201)
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

  test('copies every table, verified by row count and checksum; booleans, µs times and the id sequences survive', async () => {
    const result = await runCli(['db', 'copy', '--from', env.dataDir, '--to', cluster.url])
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    const tables = (env.store.sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'trellis_migrations'").all() as { name: string }[]).map((t) => t.name)
    for (const table of tables) {
      expect(result.stdout).toContain(`${table}: ${sqliteCount(table)} rows, checksum `)
      expect({ table, rows: await postgresCount(table) }).toEqual({ table, rows: sqliteCount(table) })
    }
    expect(sqliteCount('runs')).toBe(3)
    expect(sqliteCount('notes')).toBeGreaterThan(0)
    // A boolean is a boolean, a µs time the same instant, a text id the same id.
    const admin = (await sql`SELECT is_instance_admin FROM users WHERE email = 'alice@example.com'`) as { is_instance_admin: boolean }[]
    const stored = env.store.sqlite.prepare("SELECT is_instance_admin AS a FROM users WHERE email = 'alice@example.com'").get() as { a: number }
    expect(admin[0]!.is_instance_admin).toBe(stored.a === 1)
    const run = env.store.sqlite.prepare('SELECT id, created_at FROM runs ORDER BY id LIMIT 1').get() as { id: string; created_at: number }
    expect(await sql`SELECT created_at::text AS at FROM runs WHERE id = ${run.id}`).toEqual([{ at: String(run.created_at) }])
    // The next id PostgreSQL gives is past every copied one.
    const maxId = (env.store.sqlite.prepare('SELECT max(id) AS m FROM projects').get() as { m: number }).m
    const [fresh] = (await sql`INSERT INTO projects (name, created_at) VALUES ('After copy', 1) RETURNING id`) as { id: string }[]
    expect(Number(fresh!.id)).toBeGreaterThan(maxId)
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
  })
})

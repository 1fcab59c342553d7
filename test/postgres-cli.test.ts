/**
 * The same binary's CLI on PostgreSQL (`--database-url` / TRELLIS_DATABASE_URL): `migrate` brings a
 * real database's schema up to date (once, however often it runs), `backup` answers with PostgreSQL's own tools,
 * and a database that cannot be reached is a clear exit 1 that never shows the URL's password.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { migrations } from '../src/db/postgres/migrations.generated.ts'
import { freePort, runCli, tempDir } from './helpers.ts'
import { postgresOrSkip } from './support/both-stores.ts'
import { databaseUrl, sharedCluster } from './support/postgres-cluster.ts'

describe.skipIf(!postgresOrSkip('postgres-cli'))('the CLI on PostgreSQL', () => {
  const dir = tempDir()
  afterAll(() => dir.cleanup())

  async function emptyDatabase(name: string): Promise<string> {
    const admin = new SQL({ url: sharedCluster().url, max: 1 })
    await admin.unsafe(`CREATE DATABASE ${name}`)
    await admin.close()
    return databaseUrl(name)
  }

  test('migrate applies every PostgreSQL migration once, by flag or by environment variable', async () => {
    const url = await emptyDatabase(`cli_migrate_${process.pid}`)
    const first = await runCli(['migrate', '--data', dir.path, '--database-url', url])
    expect(first).toMatchObject({ code: 0, stderr: '' })
    expect(first.stdout.trim()).toBe(`applied ${migrations.map((m) => m.name).join(', ')}`)
    const again = await runCli(['migrate', '--data', dir.path], { env: { TRELLIS_DATABASE_URL: url } })
    expect(again).toMatchObject({ code: 0, stdout: 'database is up to date\n' })
    const sql = new SQL({ url, max: 1 })
    const tables = (await sql`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`) as { n: number }[]
    await sql.close()
    expect(tables[0]!.n).toBeGreaterThan(20)
  })

  test('backup on PostgreSQL: exit 1 with pg_dump guidance, nothing written', async () => {
    const target = `${dir.path}/backup.db`
    const result = await runCli(['backup', target, '--data', dir.path], { env: { TRELLIS_DATABASE_URL: databaseUrl('postgres') } })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('pg_dump --format=custom')
    expect(await Bun.file(target).exists()).toBe(false)
  })

  test('an unreachable server: exit 1 naming host and database, never the password', async () => {
    const url = `postgres://trellis:s3cret-pw@127.0.0.1:${freePort()}/trellis`
    const result = await runCli(['user', 'disable', '--email', 'a@example.com', '--data', dir.path], { env: { TRELLIS_DATABASE_URL: url } })
    expect(result.code).not.toBe(0)
    expect(result.stderr).toContain('cannot use the PostgreSQL database at postgres://127.0.0.1:')
    expect(result.stdout + result.stderr).not.toContain('s3cret-pw')
  })

  test('a URL that is not postgres:// is a usage error naming the setting', async () => {
    const result = await runCli(['migrate', '--data', dir.path, '--database-url', 'mysql://h/db'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('--database-url / TRELLIS_DATABASE_URL must be a postgres:// or postgresql:// URL')
  })
})

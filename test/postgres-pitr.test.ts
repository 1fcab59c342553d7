/**
 * PostgreSQL's point-in-time restore, drilled end to end with PostgreSQL's own tools (docs/backup.md "PostgreSQL"):
 * a throw-away cluster archives its WAL (`archive_command` copying each segment into a directory), a base backup is
 * taken (`pg_basebackup`), Trellis writes two batches (`trellis apply`) with a time T between them, the cluster is
 * lost; a new cluster recovers the base backup and the archived WAL up to `recovery_target_time = T`, `trellis serve`
 * starts on it, and it holds the first batch and nothing of the second.
 */
import { afterAll, expect, test } from 'bun:test'
import { mkdirSync, writeFileSync, appendFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startServe, tempDir, until } from './helpers.ts'
import { type Cluster, giveToPostgres, postgresBinary, postgresInstalled, psqlSync, runAsPostgres, startCluster } from './support/postgres-cluster.ts'

const clusters: Cluster[] = []
const dirs: { cleanup(): void }[] = []
afterAll(() => {
  for (const cluster of clusters.splice(0).reverse()) cluster.stop()
  for (const dir of dirs.splice(0)) dir.cleanup()
})

/** An apply file with users `${prefix}-1…n` (a user is one row of `users`, written by Trellis's own apply). */
function usersDocument(prefix: string, n: number): string {
  return JSON.stringify({ users: Array.from({ length: n }, (_, i) => ({ email: `${prefix}-${i + 1}@example.com`, username: `${prefix}-${i + 1}` })) })
}

function usernames(url: string): string[] {
  return psqlSync(url, 'SELECT username FROM users ORDER BY username').split('\n').filter(Boolean)
}

const pgBasebackup = postgresBinary('pg_basebackup')

test.skipIf(!postgresInstalled)('base backup + archived WAL restored to a time between two batches of writes; trellis serve starts on it', async () => {
  if (!pgBasebackup) throw new Error('pg_basebackup not found (apt-get install postgresql)')
  const work = tempDir('trellis-pitr-')
  dirs.push(work)
  giveToPostgres(work.path)
  const archive = join(work.path, 'archive')
  const base = join(work.path, 'base')
  mkdirSync(archive)
  giveToPostgres(archive)

  // The cluster that will be lost: WAL archived segment by segment into `archive`.
  const lost = startCluster({ settings: { wal_level: 'replica', archive_mode: 'on', max_wal_senders: '4' } })
  clusters.push(lost)
  // Copied, then renamed: a segment shows in the archive only whole (the test stops the cluster once it shows).
  psqlSync(lost.url, `ALTER SYSTEM SET archive_command = 'test ! -f ${archive}/%f && cp %p ${archive}/%f.part && mv ${archive}/%f.part ${archive}/%f'`)
  psqlSync(lost.url, 'SELECT pg_reload_conf()')
  psqlSync(lost.url, 'CREATE DATABASE trellis')
  const url = lost.url.replace(/\/postgres$/, '/trellis')
  const migrated = await runCli(['migrate', '--database-url', url], { cwd: work.path })
  expect(migrated.code, migrated.stderr).toBe(0)

  // The base backup, before any of the writes (the WAL archive carries them).
  const local = lost.local!
  runAsPostgres([pgBasebackup, '-D', base, '-h', '127.0.0.1', '-p', String(local.port), '-U', 'postgres', '-c', 'fast', '-X', 'none', '--no-sync'])

  const writeBatch = async (prefix: string) => {
    const file = join(work.path, `${prefix}.json`)
    writeFileSync(file, usersDocument(prefix, 5))
    const applied = await runCli(['apply', '-f', file, '--database-url', url], { cwd: work.path })
    expect(applied.code, applied.stderr).toBe(0)
  }
  await writeBatch('before')
  // Commit times are the server's clock, on this machine: T is clear of both batches by a second on either side.
  await Bun.sleep(1_000)
  const toTime = new Date()
  await Bun.sleep(1_000)
  await writeBatch('after')
  expect(usernames(url).filter((name) => name.startsWith('before-'))).toHaveLength(5)

  // The segment holding both batches is closed and archived; then the cluster is gone.
  const segment = psqlSync(lost.url, 'SELECT pg_walfile_name(pg_switch_wal())').trim()
  await until('the last segment to be archived', () => readdirSync(archive).includes(segment), 20_000, 100)
  lost.pause('immediate')

  // Recovery: the base backup (PostgreSQL's time syntax: a space, not ISO's T), every archived segment up to T, then a new timeline that takes writes.
  writeFileSync(join(base, 'recovery.signal'), '')
  appendFileSync(
    join(base, 'postgresql.auto.conf'),
    `\nrestore_command = 'cp ${archive}/%f %p'\nrecovery_target_time = '${toTime.toISOString().replace('T', ' ').replace('Z', '+00')}'\nrecovery_target_action = 'promote'\narchive_mode = 'off'\n`,
  )
  giveToPostgres(join(base, 'recovery.signal'))
  const restored = startCluster({ dataDir: base })
  clusters.push(restored)
  await until('recovery to finish', () => psqlSync(restored.url, 'SELECT pg_is_in_recovery()').trim() === 'f', 30_000, 100)
  const restoredUrl = restored.url.replace(/\/postgres$/, '/trellis')
  const names = usernames(restoredUrl)
  expect(names.filter((name) => name.startsWith('before-'))).toEqual(['before-1', 'before-2', 'before-3', 'before-4', 'before-5'])
  expect(names.filter((name) => name.startsWith('after-'))).toEqual([])

  // Trellis starts on the restored database: migrations all there, ready.
  const cwd = tempDir('trellis-pitr-serve-')
  dirs.push(cwd)
  const server = await startServe({ dataDir: join(cwd.path, 'data'), cwd: cwd.path, env: { TRELLIS_DATABASE_URL: restoredUrl, TRELLIS_LOG_LEVEL: 'warn' }, timeoutMs: 20_000 })
  try {
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200)
  } finally {
    expect(await server.stop('SIGTERM')).toBe(0)
  }
}, 90_000)

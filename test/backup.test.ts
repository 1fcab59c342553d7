/**
 * `trellis backup FILE`: a consistent copy taken while another process writes without pause, which opens,
 * passes `PRAGMA integrity_check`, has every migration, and restores (copied as trellis.db into a new data
 * directory, `serve` runs on it). It never overwrites a file unless asked.
 */
import { Database } from 'bun:sqlite'
import { afterEach, expect, test } from 'bun:test'
import { copyFileSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { backupInto } from '../src/db/sqlite/backup.ts'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { migrations } from '../src/db/sqlite/migrations.generated.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentProgress } from '../src/lib/progress.ts'
import { loadInstanceSecret } from '../src/lib/secret.ts'
import { WORKER_ENTRYPOINTS } from '../src/worker-entrypoints.ts'
import { bearer, runCli, SQLITE_ONLY, sqliteOnlyDescribe, startServe, tempDir } from './helpers.ts'
import { acmeDocument, applyAcme, tokenFor } from './support/acme.ts'

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})

/** A second process that commits two rows per transaction, as fast as it can, until killed. */
const WRITER = `
import { Database } from 'bun:sqlite'
const db = new Database(process.argv[2], { strict: true })
db.run('PRAGMA busy_timeout = 5000')
db.run('PRAGMA journal_mode = WAL')
const insert = db.prepare('INSERT INTO load_probe (batch, payload) VALUES (?, ?)')
const pair = db.transaction((batch) => { insert.run(batch, 'a'.repeat(200 + (batch % 50))); insert.run(batch, 'b') })
for (let batch = 1; ; batch++) {
  pair.immediate(batch)
  if (batch === 1) console.log('writing')
  if (batch % 50 === 0) await Bun.sleep(0)
}
`

sqliteOnlyDescribe(SQLITE_ONLY.backup, 'trellis backup', () => {
  test('under continuous writes from another process: a consistent copy that restores', async () => {
    const data = tempDir('trellis-backup-data-')
    const out = tempDir('trellis-backup-out-')
    const restored = tempDir('trellis-backup-restored-')
    const cwd = tempDir('trellis-backup-cwd-')
    cleanups.push(data.cleanup, out.cleanup, restored.cleanup, cwd.cleanup)

    const store = openStore(data.path)
    migrate(store.sqlite)
    await applyAcme({ store, clock: systemClock, secret: loadInstanceSecret(data.path), baseUrl: 'http://127.0.0.1' }, acmeDocument())
    const token = (await tokenFor(store, systemClock, 'alice', ['notes:read'])).value
    store.sqlite.run('CREATE TABLE load_probe (id INTEGER PRIMARY KEY, batch INTEGER NOT NULL, payload TEXT NOT NULL)')
    store.close()

    const script = join(cwd.path, 'writer.ts')
    writeFileSync(script, WRITER)
    const dbPath = join(data.path, 'trellis.db')
    const writer = Bun.spawn([process.execPath, script, dbPath], { stdout: 'pipe', stderr: 'pipe' })
    const file = join(out.path, 'trellis-backup.db')
    let result: Awaited<ReturnType<typeof runCli>>
    let before: number
    let after: number
    const probeCount = () => {
      const db = new Database(dbPath, { readonly: true })
      try {
        return (db.prepare('SELECT count(*) AS n FROM load_probe').get() as { n: number }).n
      } finally {
        db.close()
      }
    }
    try {
      const reader = writer.stdout.getReader()
      const { value } = await reader.read()
      expect(new TextDecoder().decode(value)).toContain('writing')
      await Bun.sleep(200)
      before = probeCount()
      result = await runCli(['backup', file, '--data', data.path], { cwd: cwd.path })
      after = probeCount()
    } finally {
      writer.kill()
      await writer.exited
    }
    expect(result.code).toBe(0)
    const size = statSync(file).size
    expect(result.stdout.split('\n')[0]).toBe(`${file} (${size} bytes)`)
    // Progress on stderr (not a terminal): the one summary line, never a redrawn one.
    const megabytes = (size / 1e6).toFixed(1).replace('.', '\\.')
    expect(result.stderr).toMatch(new RegExp(`^backup: ${megabytes} MB in \\d+\\.\\d s \\([\\d.]+ MB/s\\)\n$`))
    expect(result.stdout).toContain(join(data.path, 'secret'))
    expect(statSync(file).mode & 0o777).toBe(0o600)
    // The writer kept committing while the backup ran.
    expect(after).toBeGreaterThan(before)

    const copy = new Database(file, { readonly: true })
    try {
      expect(copy.prepare('PRAGMA integrity_check').all()).toEqual([{ integrity_check: 'ok' }])
      const applied = (copy.prepare('SELECT name FROM trellis_migrations ORDER BY name').all() as { name: string }[]).map((r) => r.name)
      expect(applied).toEqual(migrations.map((m) => m.name))
      // One transaction's snapshot: every pair whole, never half of one.
      const probe = copy.prepare('SELECT count(*) AS n, count(DISTINCT batch) AS batches, max(batch) AS last FROM load_probe').get() as {
        n: number
        batches: number
        last: number
      }
      expect(probe.n).toBeGreaterThan(0)
      expect(probe.n).toBe(probe.batches * 2)
      expect(probe.last).toBe(probe.batches)
      expect(copy.prepare("SELECT count(*) AS n FROM users WHERE email = 'alice@example.com'").get()).toEqual({ n: 1 })
    } finally {
      copy.close()
    }

    // Restore: the copy as trellis.db (and the secret) in a new data directory; serve runs on it.
    copyFileSync(file, join(restored.path, 'trellis.db'))
    copyFileSync(join(data.path, 'secret'), join(restored.path, 'secret'))
    const server = await startServe({ dataDir: restored.path, cwd: cwd.path, env: { TRELLIS_LOG_LEVEL: 'warn' } })
    let code: number
    try {
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200)
      const notes = await fetch(`${server.url}/v1/project/Acme/environment/production/notes`, { headers: bearer(token) })
      expect(notes.status).toBe(200)
      expect(((await notes.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0)
      expect(server.stdout()).not.toContain('/setup?token=') // its users came back
    } finally {
      code = await server.stop('SIGTERM')
    }
    expect(code).toBe(0)
  }, 60_000)

  test('refuses to overwrite a file (exit 1) unless --force; needs a FILE and an existing database', async () => {
    const data = tempDir('trellis-backup-data-')
    const out = tempDir('trellis-backup-out-')
    cleanups.push(data.cleanup, out.cleanup)
    const store = openStore(data.path)
    migrate(store.sqlite)
    store.close()

    const file = join(out.path, 'existing.db')
    writeFileSync(file, 'precious')
    const refused = await runCli(['backup', file, '--data', data.path])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`${file} already exists; pass --force to replace it`)
    expect(readFileSync(file, 'utf8')).toBe('precious')

    const forced = await runCli(['backup', file, '--data', data.path, '--force', '--quiet'])
    expect({ code: forced.code, stderr: forced.stderr }).toEqual({ code: 0, stderr: '' })
    expect(forced.stdout).toContain(`${file} (`)
    const copy = new Database(file, { readonly: true })
    expect(copy.prepare('PRAGMA integrity_check').all()).toEqual([{ integrity_check: 'ok' }])
    copy.close()

    // A failure on the backup thread is the caller's, with SQLite's own message.
    const failing = openStore(data.path)
    try {
      await expect(backupInto(failing, join(out.path, 'no-such-dir', 'x.db'), WORKER_ENTRYPOINTS.backup, silentProgress)).rejects.toThrow('unable to open')
    } finally {
      failing.close()
    }

    expect((await runCli(['backup', '--data', data.path])).code).toBe(2)
    const missing = await runCli(['backup', join(out.path, 'x.db'), '--data', join(out.path, 'no-such-dir')])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('no database at')
  }, 30_000)
})

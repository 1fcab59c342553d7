/**
 * Continuous backup with Litestream (docs/backup.md): a real `trellis serve` with TRELLIS_LITESTREAM_CONFIG starts
 * `litestream replicate` beside itself and leaves restarting the WAL to it. Under a write load, with the server's own
 * checkpoints running every few milliseconds, the replica keeps every frame: one generation from start to end (a lost
 * frame makes Litestream start a new one), and a restore holds exactly the rows the server's file holds. After a
 * `kill -9`, `trellis restore --to-time T` between two known batches of writes gives back the first and none of the
 * second. `trellis restore`'s refusals, and `trellis backup drill` on `trellis backup` files and on the replica.
 */
import { Database } from 'bun:sqlite'
import { afterEach, expect, test } from 'bun:test'
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { databasePath } from '../src/db/sqlite/open.ts'
import { verifyRestoredDatabase } from '../src/db/sqlite/verify.ts'
import { systemClock } from '../src/lib/clock.ts'
import { databaseHandles, findLitestream, LITESTREAM_PID_FILE, STARTED_HANDLES } from '../src/lib/litestream.ts'
import { runCli, type ServeProcess, SQLITE_ONLY, sqliteOnlyDescribe, startServe, tempDir, until } from './helpers.ts'
import { seedDataDir, tokenFor } from './support/acme.ts'
import { checkpointCounts } from './support/wal-metrics.ts'

const cleanups: (() => void | Promise<void>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const LITESTREAM = findLitestream(undefined)

/**
 * Named to every `trellis` process: the one `npm test` starts is the compiled binary in a temp directory, beside no
 * `node_modules` (the lookup above runs in this process, from the source tree).
 */
const LITESTREAM_ENV = { TRELLIS_LITESTREAM_BIN: LITESTREAM }

const SERVE_ENV = {
  ...LITESTREAM_ENV,
  TRELLIS_API_RATE_PER_MIN: '1000000',
  TRELLIS_API_RATE_PER_HOUR: '1000000',
  TRELLIS_API_RATE_PER_DAY: '1000000',
  TRELLIS_LOG_LEVEL: 'warn',
  // The server's checkpoints as often as they go: every one of them runs while Litestream replicates.
  TRELLIS_WAL_CHECKPOINT_MS: '10',
}

/** A seeded data directory, a replica directory and a Litestream configuration that replicates one into the other. */
async function replicated(name: string): Promise<{ dataDir: string; cwd: string; token: string; replica: string; config: string }> {
  const seeded = await seedDataDir(name, [], cleanups, async (store) => ({
    token: (await tokenFor(store, systemClock, 'alice', ['notes:read', 'notes:write'])).value,
  }))
  const replica = join(seeded.cwd, 'replica')
  mkdirSync(replica)
  const config = join(seeded.cwd, 'litestream.yml')
  // A short sync interval so that a test need not wait a second for each write to reach the replica.
  writeLitestreamConfig(config, databasePath(seeded.dataDir), replica, '100ms')
  return { ...seeded, replica, config }
}

/** A Litestream configuration at `path` that replicates `database` into the directory `replica` (Litestream's own sync interval unless given). */
function writeLitestreamConfig(path: string, database: string, replica: string, syncInterval?: string): void {
  writeFileSync(path, `dbs:\n  - path: ${database}\n    replicas:\n      - type: file\n        path: ${replica}\n${syncInterval ? `        sync-interval: ${syncInterval}\n` : ''}`)
}

async function serveReplicated(setup: { dataDir: string; cwd: string; config: string }, env: Record<string, string> = {}): Promise<ServeProcess> {
  const server = await startServe({ dataDir: setup.dataDir, cwd: setup.cwd, env: { ...SERVE_ENV, TRELLIS_LITESTREAM_CONFIG: setup.config, ...env }, timeoutMs: 20_000 })
  cleanups.push(async () => {
    await server.stop('SIGKILL')
    killLitestreamOf(setup.dataDir)
  })
  await until('litestream to start', () => existsSync(join(setup.dataDir, LITESTREAM_PID_FILE)), 10_000)
  return server
}

/** SIGKILL of the Litestream a server started (it outlives a server killed with SIGKILL). */
function killLitestreamOf(dataDir: string): void {
  const pidFile = join(dataDir, LITESTREAM_PID_FILE)
  if (!existsSync(pidFile)) return
  try {
    process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL')
  } catch {
    // already gone
  }
}

/** `clients` loops creating notes titled `${prefix}-n` until `stop()` says so; every answer must be 201. Returns how many. */
async function writeNotes(server: ServeProcess, token: string, prefix: string, clients: number, stop: () => boolean): Promise<number> {
  let created = 0
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  const client = async () => {
    while (!stop()) {
      const title = `${prefix}-${created}`
      const body = JSON.stringify({ recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title, content: `<p>${'x'.repeat(3000)}</p>` })
      const response = await fetch(`${server.url}/v1/project/Acme/environment/production/notes`, { method: 'POST', headers, body })
      expect(response.status).toBe(201)
      await response.arrayBuffer()
      created++
    }
  }
  await Promise.all(Array.from({ length: clients }, client))
  return created
}

function countNotes(file: string, prefix: string): number {
  const db = new Database(file, { readonly: true })
  try {
    return (db.prepare('SELECT count(*) AS n FROM notes WHERE title LIKE ?').get(`${prefix}-%`) as { n: number }).n
  } finally {
    db.close()
  }
}

/** The generations Litestream's replica holds for the database (`litestream generations`). */
async function generations(config: string, dataDir: string): Promise<string[]> {
  const proc = Bun.spawn([LITESTREAM, 'generations', '-config', config, databasePath(dataDir)], { stdout: 'pipe', stderr: 'pipe' })
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
  expect(code).toBe(0)
  return out.trim().split('\n').slice(1).map((line) => line.trim().split(/\s+/)[1]!)
}

/** The WAL segments of every generation in a directory replica written at or after `since` (ms). */
function walSegmentsSince(replica: string, since: number): number {
  const generations = join(replica, 'generations')
  if (!existsSync(generations)) return 0
  return readdirSync(generations).reduce((n, generation) => {
    const wal = join(generations, generation, 'wal')
    return n + (existsSync(wal) ? readdirSync(wal).filter((segment) => statSync(join(wal, segment)).mtimeMs >= since).length : 0)
  }, 0)
}

/** A process's state letter from /proc (S: sleeping, R: running, Z: exited, not yet reaped), or 'gone'. */
function processState(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[0]!
  } catch {
    return 'gone'
  }
}

const timed = (ms: number) => {
  const deadline = Date.now() + ms
  return () => Date.now() >= deadline
}

sqliteOnlyDescribe(SQLITE_ONLY.litestream, 'Litestream replicates a serving Trellis', () => {
  test('under a write load with the server checkpointing every 10 ms: one generation, and a restore holds every row of the file', async () => {
    const setup = await replicated('litestream-load')
    const server = await serveReplicated(setup)
    const written = await writeNotes(server, setup.token, 'load', 6, timed(8_000))
    const counts = await checkpointCounts(server)
    console.log(`Litestream under load: ${written} notes, server checkpoints ${JSON.stringify(counts)}`)
    expect(written).toBeGreaterThan(200)
    // The server's checkpoints ran (and copied pages), but never restarted the WAL: that is Litestream's alone.
    expect(counts['passive,done'] ?? 0).toBeGreaterThan(10)
    expect(counts['truncate,done'] ?? 0).toBe(0)
    expect(counts['truncate,busy'] ?? 0).toBe(0)
    // A graceful stop: the server's last commit, then Litestream's last sync.
    expect(await server.stop('SIGTERM')).toBe(0)
    expect(existsSync(join(setup.dataDir, LITESTREAM_PID_FILE))).toBe(false)

    expect(await generations(setup.config, setup.dataDir)).toHaveLength(1)
    const drill = await runCli(['backup', 'drill', '--litestream-config', setup.config, '--json'], { cwd: setup.cwd, env: LITESTREAM_ENV })
    expect(drill.code, drill.stderr).toBe(0)
    const report = JSON.parse(drill.stdout) as { ok: boolean; integrity: string; rows: Record<string, number>; newestWrite: string | null }
    expect(report.ok).toBe(true)
    expect(report.integrity).toBe('ok')
    // Table by table, the replica holds what the server's file holds.
    const live = verifyRestoredDatabase(databasePath(setup.dataDir))
    expect(report.rows).toEqual(live.rows)
    expect(report.rows.notes).toBeGreaterThanOrEqual(written)
    expect(report.newestWrite).not.toBeNull()
  }, 90_000)

  test('kill -9 of serve: a restore to a time between two batches of writes holds the first batch and none of the second', async () => {
    const setup = await replicated('litestream-pitr')
    const server = await serveReplicated(setup)
    const before = await writeNotes(server, setup.token, 'before', 4, timed(2_000))
    // Litestream writes a WAL segment per sync (100 ms here), stamped when written: T lies well clear of both batches.
    await Bun.sleep(1_500)
    const toTime = new Date()
    await Bun.sleep(1_500)
    const after = await writeNotes(server, setup.token, 'after', 4, timed(2_000))
    expect(before).toBeGreaterThan(20)
    expect(after).toBeGreaterThan(20)
    // Every acknowledged write has reached the replica by the next syncs; then the server dies without a word, and
    // so does its Litestream (the disk is gone: nothing more is copied).
    await until('the replica to hold the last write', async () => {
      const probe = tempDir('trellis-litestream-probe-')
      try {
        const out = join(probe.path, 'probe.db')
        const proc = Bun.spawn([LITESTREAM, 'restore', '-config', setup.config, '-o', out, databasePath(setup.dataDir)], { stdout: 'ignore', stderr: 'ignore' })
        return (await proc.exited) === 0 && countNotes(out, 'after') === after
      } finally {
        probe.cleanup()
      }
    }, 20_000, 200)
    server.proc.kill('SIGKILL')
    await server.proc.exited
    killLitestreamOf(setup.dataDir)

    const into = join(setup.cwd, 'restored')
    const restored = await runCli(['restore', '--to-time', toTime.toISOString(), '--into', into, '--litestream-config', setup.config, '--json'], { cwd: setup.cwd, env: LITESTREAM_ENV })
    expect(restored.code, restored.stderr).toBe(0)
    const report = JSON.parse(restored.stdout) as { ok: boolean; integrity: string; migrationsApplied: string[] }
    expect(report).toMatchObject({ ok: true, integrity: 'ok', migrationsApplied: [] })
    expect(countNotes(databasePath(into), 'before')).toBe(before)
    expect(countNotes(databasePath(into), 'after')).toBe(0)

    // The newest state: both batches, every acknowledged write; the same generation throughout.
    const latest = join(setup.cwd, 'latest')
    const newest = await runCli(['restore', '--to-time', new Date().toISOString(), '--into', latest, '--replica', `file://${setup.replica}`], { cwd: setup.cwd, env: LITESTREAM_ENV })
    expect(newest.code, newest.stderr).toBe(0)
    expect(newest.stdout).toContain('integrity: ok')
    expect(countNotes(databasePath(latest), 'before')).toBe(before)
    expect(countNotes(databasePath(latest), 'after')).toBe(after)
    expect(await generations(setup.config, setup.dataDir)).toHaveLength(1)

    // serve starts on the restored directory.
    const again = await startServe({ dataDir: into, cwd: setup.cwd, env: { ...LITESTREAM_ENV, TRELLIS_LOG_LEVEL: 'warn' } })
    cleanups.push(async () => void (await again.stop('SIGKILL')))
    expect((await fetch(`${again.url}/readyz`)).status).toBe(200)
  }, 90_000)
})

sqliteOnlyDescribe(SQLITE_ONLY.litestream, 'serve with TRELLIS_LITESTREAM_CONFIG', () => {
  test('stopped before its Litestream\'s first sync: the stop waits for it, and the replica holds every row', async () => {
    const setup = await replicated('litestream-early-stop')
    const server = await serveReplicated(setup, { TRELLIS_LOG_LEVEL: 'info' })
    // Litestream opens the database at its first sync, about a second after it starts; these writes and the stop come
    // before it (a Litestream sent SIGTERM before then exits without copying anything).
    let asked = 0
    expect(await writeNotes(server, setup.token, 'early', 1, () => asked++ >= 5)).toBe(5)
    expect(await server.stop('SIGTERM')).toBe(0)
    const drill = await runCli(['backup', 'drill', '--litestream-config', setup.config, '--json'], { cwd: setup.cwd, env: LITESTREAM_ENV })
    expect(drill.code, drill.stderr).toBe(0)
    const rows = (JSON.parse(drill.stdout) as { rows: Record<string, number> }).rows
    expect(rows).toEqual(verifyRestoredDatabase(databasePath(setup.dataDir)).rows)
    expect(countNotes(databasePath(setup.dataDir), 'early')).toBe(5)
    // Litestream's own lines, relayed from its log file to the server's log to the last one.
    const relayed = `${server.stdout()}${server.stderr()}`.split('\n').filter((line) => line.includes('"msg":"litestream"'))
    expect(relayed.some((line) => line.includes('snapshot written'))).toBe(true)
    expect(relayed.some((line) => line.includes('litestream shut down'))).toBe(true)
  }, 60_000)

  test('a Litestream sent SIGTERM the moment it is seen past its start-up has copied the database, 24 times out of 24', async () => {
    // The stop's wait, at its sharpest: each Litestream is watched every millisecond and stopped at once. Seen at its
    // first handle on the file instead, a few in twenty exit having copied nothing.
    const tries = Array.from({ length: 24 }, async (_, n) => {
      const dir = tempDir(`trellis-litestream-start-${n}-`)
      cleanups.push(dir.cleanup)
      const file = join(dir.path, 'db.sqlite')
      const db = new Database(file)
      db.run('PRAGMA journal_mode = wal')
      db.run('CREATE TABLE t (n INTEGER)')
      for (let i = 0; i < 10; i++) db.run('INSERT INTO t VALUES (?)', [i])
      db.close()
      const config = join(dir.path, 'litestream.yml')
      writeLitestreamConfig(config, file, join(dir.path, 'replica'))
      const proc = Bun.spawn([LITESTREAM, 'replicate', '-config', config], { stdout: 'ignore', stderr: 'ignore' })
      const deadline = Date.now() + 20_000
      while (databaseHandles(proc.pid, realpathSync(file)) < STARTED_HANDLES && Date.now() < deadline) await Bun.sleep(1)
      proc.kill('SIGTERM')
      // Its exit status is not asked: stopped while its replica copies its first WAL segment, Litestream's last sync
      // and the replica's own write the same temporary file, and it may exit 1 ("error closing db") with the copy whole.
      await proc.exited
      const out = join(dir.path, 'restored.db')
      const restore = Bun.spawn([LITESTREAM, 'restore', '-config', config, '-o', out, file], { stdout: 'ignore', stderr: 'pipe' })
      expect(await restore.exited, await new Response(restore.stderr).text()).toBe(0)
      const restored = new Database(out, { readonly: true })
      try {
        return restored.query<{ n: number }, []>('SELECT count(*) AS n FROM t').get()?.n
      } finally {
        restored.close()
      }
    })
    expect(await Promise.all(tries)).toEqual(Array.from({ length: 24 }, () => 10))
  }, 60_000)

  test('after a kill -9, the next serve stops the Litestream left running before it starts its own; the replica holds every row', async () => {
    const setup = await replicated('litestream-restart')
    const first = await serveReplicated(setup)
    const pidFile = join(setup.dataDir, LITESTREAM_PID_FILE)
    const orphan = Number(readFileSync(pidFile, 'utf8').trim())
    expect(await writeNotes(first, setup.token, 'first', 2, timed(1_000))).toBeGreaterThan(0)
    // Killed once its Litestream replicates (its first snapshot may take seconds on a loaded machine).
    await until('a generation in the replica', async () => (await generations(setup.config, setup.dataDir)).length > 0, 20_000)
    first.proc.kill('SIGKILL')
    await first.proc.exited
    // Litestream outlives the server killed under it and goes on copying: a write made now (as Litestream's own, in its
    // own table) reaches the replica, and Litestream still runs after logging it (its log is a file, not a pipe to the
    // dead server: a Go program writing to a pipe nobody reads dies of SIGPIPE).
    const wrote = Date.now()
    const db = new Database(databasePath(setup.dataDir))
    try {
      db.run('PRAGMA busy_timeout = 5000')
      db.run('INSERT INTO _litestream_seq (id, seq) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET seq = seq + 1')
    } finally {
      db.close()
    }
    await until('the orphaned Litestream to copy a later write', () => walSegmentsSince(setup.replica, wrote) > 0, 20_000)
    expect(['R', 'S']).toContain(processState(orphan))

    const second = await serveReplicated(setup)
    await until('the new Litestream', () => Number(readFileSync(pidFile, 'utf8').trim()) !== orphan, 15_000)
    await until('the old Litestream to be gone', () => ['Z', 'gone'].includes(processState(orphan)), 15_000)
    const more = await writeNotes(second, setup.token, 'second', 2, timed(1_000))
    // Stopped once the replica has a generation (the new Litestream's snapshot may take seconds on a loaded machine);
    // the drill below then finds every row of the file in it.
    await until('a generation in the replica', async () => (await generations(setup.config, setup.dataDir)).length > 0, 20_000)
    expect(await second.stop('SIGTERM')).toBe(0)
    // A Litestream that starts on a WAL it did not see to the end begins a new generation with a full snapshot: nothing
    // of the newest state is lost, and a restore to a time finds the generation that covers it.
    expect((await generations(setup.config, setup.dataDir)).length).toBeGreaterThanOrEqual(1)
    const drill = await runCli(['backup', 'drill', '--litestream-config', setup.config, '--json'], { cwd: setup.cwd, env: LITESTREAM_ENV })
    expect(drill.code, drill.stderr).toBe(0)
    expect((JSON.parse(drill.stdout) as { rows: Record<string, number> }).rows).toEqual(verifyRestoredDatabase(databasePath(setup.dataDir)).rows)
    expect(more).toBeGreaterThan(0)
  }, 90_000)

  test('Litestream killed under a serving Trellis: started again, the server\'s checkpoints wait meanwhile, the replica whole', async () => {
    const setup = await replicated('litestream-child')
    const server = await serveReplicated(setup)
    const pidFile = join(setup.dataDir, LITESTREAM_PID_FILE)
    const first = Number(readFileSync(pidFile, 'utf8').trim())
    await writeNotes(server, setup.token, 'before', 3, timed(1_500))
    process.kill(first, 'SIGKILL')
    // Writes go on while Litestream is away (it is started again after 5 s); the WAL keeps them.
    const away = await writeNotes(server, setup.token, 'away', 3, timed(3_000))
    await until('Litestream started again', () => existsSync(pidFile) && Number(readFileSync(pidFile, 'utf8').trim()) !== first, 20_000)
    await writeNotes(server, setup.token, 'after', 3, timed(1_500))
    expect(server.stderr()).toContain('litestream ended while the server runs')
    expect(await server.stop('SIGTERM')).toBe(0)
    expect(away).toBeGreaterThan(0)
    // One, unless a checkpoint had copied the whole WAL just before the kill, before the server knew (docs/backup.md):
    // then a second, beginning with a full snapshot. The restore below holds every row either way.
    expect((await generations(setup.config, setup.dataDir)).length).toBeLessThanOrEqual(2)
    const drill = await runCli(['backup', 'drill', '--litestream-config', setup.config, '--json'], { cwd: setup.cwd, env: LITESTREAM_ENV })
    expect(drill.code, drill.stderr).toBe(0)
    expect((JSON.parse(drill.stdout) as { rows: Record<string, number> }).rows).toEqual(verifyRestoredDatabase(databasePath(setup.dataDir)).rows)
  }, 90_000)

  test('refuses to start without a replica it can keep: another database, no executable, PostgreSQL', async () => {
    const setup = await replicated('litestream-refusals')
    const other = join(setup.cwd, 'other.yml')
    writeLitestreamConfig(other, '/elsewhere/trellis.db', setup.replica)
    const serve = (env: Record<string, string>) => runCli(['serve', '--port', '0', '--data', setup.dataDir], { cwd: setup.cwd, env: { ...LITESTREAM_ENV, TRELLIS_LOG_LEVEL: 'warn', ...env } })
    const elsewhere = await serve({ TRELLIS_LITESTREAM_CONFIG: other })
    expect(elsewhere.code).toBe(1)
    expect(elsewhere.stderr).toContain(`does not replicate ${databasePath(setup.dataDir)}`)
    const noBinary = await serve({ TRELLIS_LITESTREAM_CONFIG: setup.config, TRELLIS_LITESTREAM_BIN: join(setup.cwd, 'no-litestream') })
    expect(noBinary.code).toBe(1)
    expect(noBinary.stderr).toContain('TRELLIS_LITESTREAM_BIN names')
    const postgres = await serve({ TRELLIS_LITESTREAM_CONFIG: setup.config, TRELLIS_DATABASE_URL: 'postgres://127.0.0.1:1/trellis' })
    expect(postgres.code).toBe(2)
    expect(postgres.stderr).toContain('archive PostgreSQL\'s WAL instead')
  }, 60_000)
})

sqliteOnlyDescribe(SQLITE_ONLY.litestream, 'trellis restore refuses', () => {
  test('a time that is not RFC 3339, a target that is not empty, no replica, no source', async () => {
    const dir = tempDir('trellis-restore-refusals-')
    cleanups.push(dir.cleanup)
    const emptyReplica = join(dir.path, 'replica')
    mkdirSync(emptyReplica)
    const config = join(dir.path, 'litestream.yml')
    writeLitestreamConfig(config, join(dir.path, 'data', 'trellis.db'), emptyReplica)

    const badTime = await runCli(['restore', '--to-time', 'yesterday', '--into', join(dir.path, 'a'), '--litestream-config', config], { env: LITESTREAM_ENV })
    expect(badTime.code).toBe(2)
    expect(badTime.stderr).toContain('--to-time must be an RFC 3339 time')
    const noZone = await runCli(['restore', '--to-time', '2026-05-04T13:45:00', '--into', join(dir.path, 'a'), '--litestream-config', config], { env: LITESTREAM_ENV })
    expect(noZone.code).toBe(2)

    const full = join(dir.path, 'full')
    mkdirSync(full)
    writeFileSync(join(full, 'trellis.db'), 'keep me')
    const notEmpty = await runCli(['restore', '--to-time', new Date().toISOString(), '--into', full, '--litestream-config', config], { env: LITESTREAM_ENV })
    expect(notEmpty.code).toBe(1)
    expect(notEmpty.stderr).toContain('is not empty')
    expect(readFileSync(join(full, 'trellis.db'), 'utf8')).toBe('keep me')

    const nothing = await runCli(['restore', '--to-time', new Date().toISOString(), '--into', join(dir.path, 'b'), '--litestream-config', config], { env: LITESTREAM_ENV })
    expect(nothing.code).toBe(1)
    expect(nothing.stderr).toContain('litestream restore failed')
    expect(existsSync(join(dir.path, 'b'))).toBe(false) // the directory it made is gone again

    const noSource = await runCli(['restore', '--to-time', new Date().toISOString(), '--into', join(dir.path, 'c')], { env: LITESTREAM_ENV })
    expect(noSource.code).toBe(2)
    expect(noSource.stderr).toContain('--litestream-config FILE')
    const badUrl = await runCli(['restore', '--to-time', new Date().toISOString(), '--into', join(dir.path, 'c'), '--replica', '/not/a/url'], { env: LITESTREAM_ENV })
    expect(badUrl.code).toBe(2)
    expect(badUrl.stderr).toContain('--replica must be a replica URL')
  }, 60_000)
})

sqliteOnlyDescribe(SQLITE_ONLY.litestream, 'trellis backup drill', () => {
  test('restores the newest `trellis backup` file and reports its newest write; a corrupt or missing backup fails', async () => {
    const seeded = await seedDataDir('drill', [], cleanups, async (store) => ({
      token: (await tokenFor(store, systemClock, 'alice', ['notes:read'])).value,
    }))
    const backups = join(seeded.cwd, 'backups')
    mkdirSync(backups)
    for (const name of ['older.db', 'newer.db']) {
      const made = await runCli(['backup', join(backups, name), '--data', seeded.dataDir], { cwd: seeded.cwd, env: LITESTREAM_ENV })
      expect(made.code, made.stderr).toBe(0)
    }
    const anHourAgo = new Date(Date.now() - 3_600_000)
    utimesSync(join(backups, 'older.db'), anHourAgo, anHourAgo)

    const drill = await runCli(['backup', 'drill', '--from', backups, '--json', '--max-age', '1d'], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(drill.code, drill.stderr).toBe(0)
    const report = JSON.parse(drill.stdout) as { ok: boolean; source: string; integrity: string; rows: Record<string, number>; newestWrite: string | null; newestWriteAgeSeconds: number | null }
    expect(report).toMatchObject({ ok: true, source: join(backups, 'newer.db'), integrity: 'ok' })
    expect(report.rows.users).toBeGreaterThan(0)
    expect(report.newestWrite).not.toBeNull()
    expect(report.newestWriteAgeSeconds).toBeGreaterThanOrEqual(0)
    const text = await runCli(['backup', 'drill', '--from', backups], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain('integrity: ok')
    expect(text.stdout).toContain('newest write age: ')

    // Older than --max-age: the drill fails, saying why.
    await Bun.sleep(1_100)
    const stale = await runCli(['backup', 'drill', '--from', backups, '--max-age', '1s'], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(stale.code).toBe(1)
    expect(stale.stderr).toContain('more than --max-age 1s')

    // The newest file is not a database: exit 1, naming it.
    writeFileSync(join(backups, 'newest.db'), 'x'.repeat(8192))
    const corrupt = await runCli(['backup', 'drill', '--from', backups], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(corrupt.code).toBe(1)
    expect(corrupt.stderr).toContain(`${join(backups, 'newest.db')} is not a usable Trellis database`)

    const missing = await runCli(['backup', 'drill', '--from', join(seeded.cwd, 'nowhere')], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('does not exist')
    const empty = join(seeded.cwd, 'empty')
    mkdirSync(empty)
    const none = await runCli(['backup', 'drill', '--from', empty], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(none.code).toBe(1)
    expect(none.stderr).toContain('holds no file')

    const noSource = await runCli(['backup', 'drill'], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(noSource.code).toBe(2)
    expect(noSource.stderr).toContain('--from DIR')
    const mixed = await runCli(['backup', join(seeded.cwd, 'x.db'), '--max-age', '1d', '--data', seeded.dataDir], { cwd: seeded.cwd, env: LITESTREAM_ENV })
    expect(mixed.code).toBe(2)
    expect(mixed.stderr).toContain('--max-age is a flag of `trellis backup drill`')
  }, 60_000)
})

/**
 * Faults beside those of test/storage-faults.test.ts (a lock held by another process, a full disk)
 * and test/faults-postgres.test.ts (PostgreSQL stopped under load, an instance killed mid-burst): the data directory
 * read-only, and an `http` step's destination that hangs or answers byte by byte. Each answers a clear 503 or a clear
 * run error, loses nothing acknowledged and recovers by itself. Real processes, a real file system, real sockets.
 */
import { Database } from 'bun:sqlite'
import { afterEach, describe, expect, test } from 'bun:test'
import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { databasePath } from '../src/db/sqlite/open.ts'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { bearer, queryOne, runCli, SQLITE_ONLY, sqliteOnlyDescribe, tempDir, testApp, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, hookPath, ordersWorkflow, tokenFor } from './support/acme.ts'
import { expectStorageFault, NOTES, noteRequest, runEnded, runStatus, type Send, servePause, startRun, triggerRequest } from './support/faults.ts'

const cleanups: (() => void | Promise<void>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** No API budget in the way of these scenarios. */
const NO_API_LIMIT = { TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' }

// ── The data directory read-only (SQLite) ───────────────────────────────────

/** `cmd` run synchronously; whether it succeeded. */
const ran = (cmd: string[]) => Bun.spawnSync(cmd, { stdout: 'ignore', stderr: 'ignore' }).exitCode === 0

/**
 * Makes `dir` read-only as a deployment would find it, the first way this process can: a read-only bind mount over
 * it (root), `chmod` (any other user: root ignores modes), or `chattr +i` (root where mounting is not allowed).
 * Null when none works. `release` makes it writable again.
 */
function readOnlyDirectory(dir: string): { how: string; release(): void } | null {
  if (process.getuid?.() !== 0) {
    chmodSync(dir, 0o500)
    for (const name of readdirSync(dir)) chmodSync(join(dir, name), 0o400)
    return { how: 'chmod 0500 (the directory) and 0400 (its files)', release: () => chmodSync(dir, 0o700) }
  }
  if (ran(['mount', '--bind', dir, dir])) {
    if (ran(['mount', '-o', 'remount,bind,ro', dir])) return { how: 'a read-only bind mount', release: () => void ran(['umount', dir]) }
    ran(['umount', dir])
  }
  const files = [dir, ...readdirSync(dir).map((name) => join(dir, name))]
  if (ran(['chattr', '+i', ...files])) return { how: 'chattr +i', release: () => void ran(['chattr', '-i', ...files]) }
  return null
}

/**
 * Makes a running server's database files refuse writes: `chattr +i` on the database file, its WAL and the directory
 * (as root on a file system with the immutable flag: ext4, xfs, btrfs). The closest a test can come to a file
 * system turning read-only under a running process: remounting read-only is refused (EBUSY) while the database is
 * open for writing, and `chmod` does not affect files already open. The `-shm` index is left alone: SQLite writes
 * it through a memory mapping, where a refused write is a SIGBUS, not an error. Null when the flag cannot be set.
 */
function immutableDatabase(dataDir: string): { release(): void } | null {
  const db = databasePath(dataDir)
  const files = [db, `${db}-wal`, dataDir]
  if (!files.every((file) => existsSync(file))) throw new Error(`expected ${files.join(', ')} to exist`)
  if (!ran(['chattr', '+i', ...files])) return null
  let released = false
  const release = () => {
    if (!released) ran(['chattr', '-i', ...files])
    released = true
  }
  cleanups.push(release)
  return { release }
}

sqliteOnlyDescribe(SQLITE_ONLY.readOnly, 'the data directory read-only', () => {
  test('serve started on a read-only data directory stops at once: exit 1, the reason and the file named on stderr', async () => {
    const data = tempDir('trellis-ro-start-')
    cleanups.push(data.cleanup)
    const dir = join(data.path, 'data')
    mkdirSync(dir, { mode: 0o700 })
    expect((await runCli(['migrate', '--data', dir])).code).toBe(0)
    const readOnly = readOnlyDirectory(dir)
    if (!readOnly) {
      console.warn('read-only start: SKIPPED, no way to make a directory read-only here (not root, or no mount and no chattr)')
      return
    }
    cleanups.push(readOnly.release)
    console.log(`read-only start: the data directory made read-only with ${readOnly.how}`)
    const started = performance.now()
    const result = await runCli(['serve', '--port', '0', '--data', dir], { cwd: data.path })
    expect(result.code).toBe(1)
    expect(performance.now() - started).toBeLessThan(10_000)
    // Whatever the means, the answer names the file and the file system's refusal (EROFS, EACCES or EPERM).
    expect(result.stderr).toMatch(new RegExp(`^trellis serve: (EROFS|EACCES|EPERM)\\b.*${databasePath(dir).replaceAll('/', '\\/')}`, 'm'))
    expect(result.stdout).not.toContain('listening')
  }, 30_000)

  test('made read-only while serve runs: writes answer 503 storage_read_only, reads, /healthz and the executor go on, /readyz says so; writable again, everything resumes without a restart and nothing acknowledged is lost', async () => {
    const { hook, token, server, send, dataDir } = await servePause(cleanups, { env: NO_API_LIMIT })
    const acknowledged: number[] = []
    const acknowledge = async (response: Response) => {
      expect(response.status).toBe(201)
      acknowledged.push(((await response.json()) as { id: number }).id)
    }

    await acknowledge(await send(NOTES, noteRequest(token, 'before')))
    // A run parks in its 1 s wait: it comes due while the files are read-only.
    const parked = await startRun(send, hook, token, 'ord_1001')
    await until('the run to park', async () => (await runStatus(send, token, parked)) === 'waiting')

    const immutable = immutableDatabase(dataDir)
    if (!immutable) {
      console.warn('read-only while serving: SKIPPED, chattr +i is not possible here (needs root and a file system with the immutable flag)')
      return
    }
    const faultStarted = Date.now()
    await expectStorageFault(await send(NOTES, noteRequest(token, 'refused')), 'storage_read_only', 60)
    await expectStorageFault(await send(hook, triggerRequest(token, 'ord_1002')), 'storage_read_only', 60)
    // Writes arriving together (one group commit) are refused together, each with the fault: never a 500.
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => send(NOTES, noteRequest(token, `refused ${i}`))))
    for (const response of burst) await expectStorageFault(response, 'storage_read_only', 60)
    // Reads, liveness and readiness answer; a read does not fail for the token's lastUsedAt stamp it cannot write.
    expect((await send(NOTES, { headers: bearer(token) })).status).toBe(200)
    expect((await send('/healthz')).status).toBe(200)
    const ready = await send('/readyz')
    expect(ready.status).toBe(503)
    expect(await ready.json()).toEqual({ error: 'Service Unavailable', code: 'storage_read_only', message: expect.stringContaining('cannot be written') })
    // The parked run came due meanwhile: the executor waits it out rather than failing it.
    await Bun.sleep(Math.max(0, faultStarted + 1_500 - Date.now()))
    expect(['waiting', 'running']).toContain(await runStatus(send, token, parked))

    immutable.release()
    expect((await send('/readyz')).status).toBe(200)
    await acknowledge(await send(NOTES, noteRequest(token, 'after')))
    expect(await runEnded(send, token, parked)).toBe('succeeded')
    expect(await runEnded(send, token, await startRun(send, hook, token, 'ord_1002'))).toBe('succeeded')
    expect(server.proc.exitCode).toBeNull()
    expect(await server.stop('SIGTERM')).toBe(0)
    // Refused writes are answers, not failures of the server.
    expect(server.stderr()).not.toContain('"level":"error"')

    // Read back from the file: every acknowledged note, no refused one, an intact database.
    const reopened = new Database(databasePath(dataDir), { readonly: true })
    const notes = reopened.query('SELECT id, title FROM notes').all() as { id: number; title: string }[]
    const integrity = reopened.query('PRAGMA integrity_check').all()
    reopened.close()
    expect(notes.filter((note) => acknowledged.includes(note.id)).map((note) => note.title).sort()).toEqual(['after', 'before'])
    expect(notes.filter((note) => note.title.startsWith('refused'))).toEqual([])
    expect(integrity).toEqual([{ integrity_check: 'ok' }])
  }, 40_000)
})

// ── An http step's destination that hangs, or answers byte by byte ──────────

/**
 * A raw TCP server on 127.0.0.1 (no HTTP library on this side, so it can misbehave): `/hang` reads the request and
 * never answers; `/drip-head` sends its status line and then a header one byte every 50 ms, never ending the head;
 * `/drip-body` sends a whole head announcing 1 MB and then the body one byte every 50 ms. Counts its connections.
 */
function misbehavingServer() {
  const open = new Set<object>()
  let accepted = 0
  const timers = new Map<object, ReturnType<typeof setInterval>>()
  const drip = (socket: Bun.Socket<undefined>, head: string, byte: string) => {
    socket.write(head)
    timers.set(socket, setInterval(() => socket.write(byte), 50))
  }
  const server = Bun.listen({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        accepted++
        open.add(socket)
      },
      data(socket, chunk) {
        if (timers.has(socket)) return
        const path = chunk.toString('latin1').split(' ')[1]
        if (path === '/drip-head') drip(socket, 'HTTP/1.1 200 OK\r\nX-Drip: ', 'a')
        else if (path === '/drip-body') drip(socket, 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000\r\n\r\n', 'x')
        else timers.set(socket, setInterval(() => {}, 60_000)) // /hang: read, never answer
      },
      close(socket) {
        clearInterval(timers.get(socket))
        timers.delete(socket)
        open.delete(socket)
      },
    },
  })
  return { port: server.port, accepted: () => accepted, open: () => open.size, stop: () => server.stop(true) }
}

describe('an http step whose destination hangs or answers byte by byte', () => {
  test('each run fails with a clear timeout within (retries + 1) × timeoutSeconds plus the backoff, the other runs go on meanwhile, and no connection is left open', async () => {
    const remote = misbehavingServer()
    cleanups.push(remote.stop)
    const env = testEnv({ TRELLIS_HTTP_ALLOW: '127.0.0.1', ...NO_API_LIMIT })
    cleanups.push(env.cleanup)
    const TIMEOUT_SECONDS = 2
    const RETRIES = 1
    const slow = { '/hang': 'Hang', '/drip-head': 'Drip head', '/drip-body': 'Drip body' }
    const document = acmeDocument()
    const records = acmeProject(document).records!
    for (let i = 1; i <= 6; i++) records.push({ environment: 'production', collection: 'orders', id: `quick_${i}`, data: {} })
    const onWebhook = { webhook: { enabled: true, ratePerMinute: 1000 } }
    acmeProject(document).workflows!.push(
      ...Object.entries(slow).map(([path, name]) =>
        ordersWorkflow(name, [{ type: 'load' }, { type: 'http', name: 'call', method: 'POST', url: `http://127.0.0.1:${remote.port}${path}`, timeoutSeconds: TIMEOUT_SECONDS, retries: RETRIES }], onWebhook),
      ),
      ordersWorkflow('Quick', [{ type: 'load' }, { type: 'update', name: 'mark', set: { quick: 'done' } }], onWebhook),
    )
    const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
    const hooks = Object.fromEntries(report.workflows.filter((w) => w.webhook.url).map((w) => [w.name, hookPath(w.webhook.url)]))
    const token = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    // Four workers: the three stuck calls leave one for everything else.
    const executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 20, outbound: new OutboundClient({ allow: env.config.httpAllow }) })
    const app = testApp(env, { clock: systemClock, executor })
    const send: Send = (path, init) => app.handle(new Request(`http://localhost${path}`, init))
    executor.start()
    cleanups.push(() => executor.stop(2_000))

    const slowRuns = await Promise.all(Object.values(slow).map((name, i) => startRun(send, hooks[name]!, token, `ord_100${i + 1}`)))
    await until('the three calls to connect', () => remote.accepted() >= 3, 5_000, 10)
    // While the three calls are stuck, six other runs are triggered and finish.
    const quickRuns: string[] = []
    for (let i = 1; i <= 6; i++) quickRuns.push(await startRun(send, hooks.Quick!, token, `quick_${i}`))
    for (const runId of quickRuns) expect(await runEnded(send, token, runId, 3_000)).toBe('succeeded')
    for (const runId of slowRuns) expect(await runStatus(send, token, runId)).toBe('running')

    // The documented bound: each attempt ends at timeoutSeconds, the backoff before attempt 2 is at most 0.5 s.
    const bound = (RETRIES + 1) * TIMEOUT_SECONDS * 1000 + 500
    for (const [i, runId] of slowRuns.entries()) {
      const path = Object.keys(slow)[i]!
      expect(await runEnded(send, token, runId, bound + 5_000)).toBe('failed')
      const shown = (await (await send(`/v1/workflow-runs/${runId}`, { headers: bearer(token) })).json()) as { error: { code: string; message: string; step: string } }
      expect(shown.error).toEqual({
        code: 'http_failed',
        step: 'call',
        message: `POST http://127.0.0.1:${remote.port}${path} timed out after ${TIMEOUT_SECONDS * 1000} ms after ${RETRIES + 1} attempts`,
      })
      // The step's own recorded time: at least the attempts' timeouts, and within the bound (plus a loaded machine's slack).
      const step = queryOne<{ ms: number }>(env.store, "SELECT finished_at - started_at AS ms FROM run_steps WHERE run_id = ? AND name = 'call'", runId)!
      expect(step.ms).toBeGreaterThanOrEqual((RETRIES + 1) * TIMEOUT_SECONDS * 1000 - 50)
      expect(step.ms).toBeLessThan(bound + 1_500)
    }
    // Two connections per run (one per attempt), every one closed by Trellis; every worker free again.
    expect(remote.accepted()).toBe(slowRuns.length * (RETRIES + 1))
    await until('every connection to be closed', () => remote.open() === 0, 2_000, 10)
    expect(executor.busyWorkers).toBe(0)
  }, 30_000)
})

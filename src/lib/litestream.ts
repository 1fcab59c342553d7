/**
 * Litestream (https://litestream.io, v0.3): continuous replication of the SQLite file to a directory or S3-compatible
 * storage, and restore to a point in time (docs/backup.md). Trellis cannot embed it (a Go program): it runs the
 * `litestream` executable found by `findLitestream`, `replicate` beside `serve`, `restore` for `trellis restore` and
 * `trellis backup drill`.
 */
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml'
import type { Logger } from './logger.ts'

/** Litestream could not be found, configured or run: the message says what to do. */
export class LitestreamError extends Error {}

/**
 * The npm package that carries the executable for this platform (one of `@flydotio/litestream`'s: Trellis depends on
 * the linux-x64 one directly, optionally, the only build the registry serves).
 */
const PLATFORM_PACKAGE = `@flydotio/litestream-${process.platform}-${process.arch}`

/**
 * The `litestream` executable: `configured` (TRELLIS_LITESTREAM_BIN) when given; else the npm package's binary in a
 * `node_modules` beside the working directory or this source tree (`npm ci` installs it); else `litestream` on PATH.
 * The npm package's own `litestream` command (node_modules/.bin) is a Node script that runs the binary without passing
 * on its exit code or a signal: the binary beside it is used instead.
 */
export function findLitestream(configured: string | undefined): string {
  if (configured !== undefined) {
    if (!existsSync(configured)) throw new LitestreamError(`TRELLIS_LITESTREAM_BIN names ${configured}, which does not exist`)
    return configured
  }
  const roots = [process.cwd(), dirname(process.execPath), resolve(import.meta.dir, '../..')]
  for (const root of roots) {
    const candidate = join(root, 'node_modules', PLATFORM_PACKAGE, 'litestream')
    if (existsSync(candidate)) return candidate
  }
  const onPath = Bun.which('litestream')
  if (onPath !== null) {
    const real = realpathSync(onPath)
    if (!real.endsWith(join('@flydotio', 'litestream', 'index.js'))) return onPath
    const beside = join(dirname(real), '..', PLATFORM_PACKAGE.split('/')[1]!, 'litestream')
    if (existsSync(beside)) return beside
  }
  throw new LitestreamError(
    `no litestream executable: set TRELLIS_LITESTREAM_BIN, put litestream on PATH, or install ${PLATFORM_PACKAGE} (npm ci) (docs/backup.md)`,
  )
}

/**
 * The database paths a Litestream configuration file replicates (its `dbs[].path`, with `$VAR` and `${VAR}` expanded
 * as Litestream expands them), so that a configuration naming another file is refused rather than silently replicating
 * nothing of Trellis's.
 */
export function configuredDatabases(configFile: string): string[] {
  return databaseEntries(configFile).map((db) => resolve(db.path as string))
}

/** The configuration's `dbs` entries that name a path, as parsed (after expansion). */
function databaseEntries(configFile: string): Record<string, unknown>[] {
  return (parsedConfig(configFile).dbs as unknown[]).filter((db): db is Record<string, unknown> => typeof (db as { path?: unknown })?.path === 'string')
}

function parsedConfig(configFile: string): Record<string, unknown> {
  let text: string
  try {
    text = readFileSync(configFile, 'utf8')
  } catch (error) {
    throw new LitestreamError(`cannot read the Litestream configuration ${configFile}: ${(error as Error).message}`)
  }
  const expanded = text.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, braced: string | undefined, bare: string | undefined) => process.env[braced ?? bare!] ?? '')
  let parsed: unknown
  try {
    parsed = parseYaml(expanded)
  } catch (error) {
    throw new LitestreamError(`the Litestream configuration ${configFile} is not valid YAML: ${(error as Error).message}`)
  }
  if (!Array.isArray((parsed as { dbs?: unknown } | null)?.dbs)) throw new LitestreamError(`the Litestream configuration ${configFile} has no dbs: list`)
  return parsed as Record<string, unknown>
}

/** Refuses a configuration that does not replicate `databaseFile`. */
export function assertReplicates(configFile: string, databaseFile: string): void {
  const paths = configuredDatabases(configFile)
  if (!paths.includes(resolve(databaseFile))) {
    throw new LitestreamError(`the Litestream configuration ${configFile} does not replicate ${resolve(databaseFile)} (its dbs: ${paths.join(', ') || 'none'})`)
  }
}

/**
 * Litestream's start-up (v0.3.13, the version `npm ci` installs), as its open files show it: it opens the database
 * file itself, then its first SQLite connection, where one of its first statements runs under a context a SIGTERM
 * cancels (a start cut short there is not synced at exit: it exits having copied nothing); then it takes its long read
 * transaction on that connection and opens a second one. Three handles on the database file mean it is past that
 * point, and from there its SIGTERM syncs everything to its replicas before it exits. It opens them at its first
 * sync, about a second after it starts.
 */
export const STARTED_HANDLES = 3

/**
 * How many handles the Litestream `pid` holds on `database` (a resolved path; `STARTED_HANDLES`). Read from its open
 * files in /proc; where there is no /proc, taken as started.
 */
export function databaseHandles(pid: number, database: string): number {
  const fds = `/proc/${pid}/fd`
  if (!existsSync('/proc/self/fd')) return STARTED_HANDLES
  try {
    return readdirSync(fds).filter((fd) => {
      try {
        return readlinkSync(join(fds, fd)) === database
      } catch {
        return false // closed meanwhile
      }
    }).length
  } catch {
    return 0 // gone
  }
}

/**
 * A Litestream that holds fewer than `STARTED_HANDLES` (another version than the one `npm ci` installs may keep fewer
 * connections) counts as past its start-up this long after its first handle: the start-up itself takes milliseconds.
 */
const STARTUP_GRACE_MS = 2_000

/** How long `stop` waits for Litestream's last sync after SIGTERM before it kills it. */
const STOP_WAIT_MS = 10_000
/** A Litestream that ended on its own is started again after this pause (its own start-up syncs what it missed). */
const RESTART_AFTER_MS = 5_000

export interface Replication {
  /** Litestream runs now and is past its start-up (not before its first sync, nor between an unexpected end and its restart). */
  running(): boolean
  /** SIGTERM (Litestream syncs what is left to its replicas, then exits), SIGKILL after STOP_WAIT_MS. */
  stop(): Promise<void>
}

/**
 * The file in the data directory Litestream writes its log lines to, relayed from there to the server's log. Not a
 * pipe: a Go program whose stderr is a pipe nobody reads any more dies at its next line (SIGPIPE), and the Litestream
 * of a server that was killed must live on to copy the server's last writes.
 */
export const LITESTREAM_LOG_FILE = 'litestream.log'

/** How often the log file is read for new lines, and the size past which it is emptied once read to its end. */
const LOG_POLL_MS = 250
const LOG_ROLLOVER_BYTES = 1024 * 1024

/**
 * Litestream's log file, relayed line by line to the server's log (as info: Litestream logs its errors with a level of
 * its own in the line). Emptied at each start and, once read to its end, past LOG_ROLLOVER_BYTES (Litestream appends:
 * its next line goes to the start; a line written between the last read and the emptying is lost to the log).
 */
class LogRelay {
  private offset = 0
  private rest = ''
  private readonly timer: Timer

  constructor(
    readonly file: string,
    private readonly logger: Logger,
  ) {
    this.timer = setInterval(() => this.pump(), LOG_POLL_MS)
    this.timer.unref()
  }

  /** A new Litestream starts: what the last one wrote is relayed, and the file starts empty. */
  restart(): void {
    this.pump()
    this.empty()
  }

  /** The last lines, and no more reads. */
  stop(): void {
    clearInterval(this.timer)
    this.pump()
    if (this.rest.trim()) this.logger.info('litestream', { line: this.rest })
    this.rest = ''
  }

  private pump(): void {
    let size: number
    try {
      size = statSync(this.file).size
    } catch {
      return // not written yet
    }
    if (size > this.offset) {
      const bytes = Buffer.alloc(size - this.offset)
      const fd = openSync(this.file, 'r')
      try {
        this.offset += readSync(fd, bytes, 0, bytes.length, this.offset)
      } finally {
        closeSync(fd)
      }
      const lines = (this.rest + bytes.toString('utf8')).split('\n')
      this.rest = lines.pop() ?? ''
      for (const line of lines) if (line.trim()) this.logger.info('litestream', { line })
    }
    if (this.offset >= LOG_ROLLOVER_BYTES && this.rest === '') this.empty()
  }

  private empty(): void {
    writeFileSync(this.file, '', { mode: 0o600 })
    this.offset = 0
  }
}

/** The file in the data directory that holds the pid of the Litestream a server started. */
export const LITESTREAM_PID_FILE = 'litestream.pid'

/**
 * A Litestream left running by a server that was killed (SIGKILL, a crash: its child outlives it) still replicates the
 * file; a second one beside it would write the same replica. Found by its pid file and its command line (Linux's
 * /proc: a pid reused by another program is left alone), it is stopped before the new one starts.
 */
async function stopLeftOver(pidFile: string, configFile: string, logger: Logger): Promise<void> {
  let pid: number
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim())
  } catch {
    return
  }
  let commandLine = ''
  try {
    commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
  } catch {
    return // gone (or not Linux): nothing of ours runs under that pid
  }
  if (!Number.isInteger(pid) || pid <= 1 || !commandLine.includes('replicate') || !commandLine.includes(configFile)) return
  logger.warn('a Litestream of an earlier server still runs: stopped before this one starts', { pid })
  process.kill(pid, 'SIGTERM')
  const deadline = Date.now() + STOP_WAIT_MS
  while (existsSync(`/proc/${pid}`) && Date.now() < deadline) await Bun.sleep(50)
  if (existsSync(`/proc/${pid}`)) process.kill(pid, 'SIGKILL')
}

/**
 * `litestream replicate -config FILE` as a child of the server, its log lines relayed to the server's log, its pid in
 * `pidFile`. If it ends while the server runs, that is logged as an error and it is started again; meanwhile the
 * server's checkpoints wait (`running`), so the WAL is not started over behind it (SQLite's next commit would, once a
 * checkpoint had copied all of it) and the new Litestream goes on in the same generation.
 */
export async function startReplication(bin: string, configFile: string, databaseFile: string, pidFile: string, logger: Logger): Promise<Replication> {
  await stopLeftOver(pidFile, configFile, logger)
  const database = realpathSync(databaseFile)
  let stopping = false
  let child: Bun.Subprocess<'ignore', number, number> | null = null
  let restart: Timer | null = null
  const log = new LogRelay(join(dirname(pidFile), LITESTREAM_LOG_FILE), logger)
  const start = () => {
    log.restart()
    const output = openSync(log.file, 'a')
    // Its own process group: a terminal's Ctrl-C reaches the server alone, which stops Litestream after its own last
    // commit (a Litestream stopped first would leave the last writes off the replica until the next start).
    const proc = Bun.spawn([bin, 'replicate', '-config', configFile], { stdin: 'ignore', stdout: output, stderr: output, detached: true })
    closeSync(output)
    child = proc
    writeFileSync(pidFile, `${proc.pid}\n`, { mode: 0o600 })
    logger.info('litestream replicating', { pid: proc.pid, config: configFile })
    void proc.exited.then((code) => {
      if (stopping) return
      logger.error('litestream ended while the server runs: started again shortly (WAL checkpoints wait for it)', { code, restartInMs: RESTART_AFTER_MS })
      restart = setTimeout(start, RESTART_AFTER_MS)
    })
  }
  start()
  const alive = (proc: typeof child): proc is NonNullable<typeof child> => proc !== null && proc.exitCode === null && proc.signalCode === null
  // The Litestream seen past its start-up: it stays so until it exits.
  let seenStarted: number | null = null
  let firstHandle = { pid: 0, at: 0 }
  const started = (proc: NonNullable<typeof child>) => {
    if (seenStarted === proc.pid) return true
    const handles = databaseHandles(proc.pid, database)
    // Counted from the first handle of its latest try (a start-up that failed closes them and tries again).
    if (handles === 0) firstHandle = { pid: 0, at: 0 }
    else if (firstHandle.pid !== proc.pid) firstHandle = { pid: proc.pid, at: Date.now() }
    if (handles >= STARTED_HANDLES || (handles > 0 && Date.now() - firstHandle.at >= STARTUP_GRACE_MS)) seenStarted = proc.pid
    return seenStarted === proc.pid
  }
  return {
    running: () => alive(child) && started(child),
    async stop() {
      stopping = true
      if (restart) clearTimeout(restart)
      const proc = child
      if (!proc || proc.exitCode !== null) return log.stop()
      // Stopped before its start-up is through, Litestream would exit without copying anything written since it started.
      const deadline = Date.now() + STOP_WAIT_MS
      while (alive(proc) && !started(proc) && Date.now() < deadline) await Bun.sleep(50)
      proc.kill('SIGTERM')
      const ended = await Promise.race([proc.exited.then(() => true), Bun.sleep(STOP_WAIT_MS).then(() => false)])
      if (!ended) {
        logger.warn('litestream did not stop in time: killed', { waitedMs: STOP_WAIT_MS })
        proc.kill('SIGKILL')
        await proc.exited
      }
      rmSync(pidFile, { force: true })
      log.stop()
    },
  }
}

/** Where a restore reads from: a configuration file and the database path it names, or a replica URL. */
export type RestoreSource = { config: string; database: string; expanded?: true } | { replica: string }

/** What a restore gave back: the state at the time asked for, or (a time after the replica's last change) its newest state. */
export interface Restored {
  /** Litestream's own account of the restore. */
  log: string
  /**
   * Null when Litestream restored to the time asked for (or the newest state when none was asked). Otherwise the time
   * of the newest state before it, which is what the database was at that time: Litestream writes nothing to the
   * replica while nothing is written, and refuses a time past its last change.
   */
  newestBefore: string | null
}

/** The arguments that name the source, last on Litestream's command line. */
function sourceArgs(source: RestoreSource): string[] {
  if (!('config' in source)) return [source.replica]
  return [...(source.expanded ? ['-no-expand-env'] : []), '-config', source.config, source.database]
}

async function runLitestream(bin: string, args: string[]): Promise<{ code: number; said: string }> {
  const proc = Bun.spawn([bin, ...args], { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, said: `${stdout}${stderr}`.trim() }
}

interface Generation {
  name: string
  /** Its first and last change, to the second (as `litestream generations` prints them). */
  start: Date
  end: Date
}

/**
 * The replica's generations (`litestream generations`): each run of WAL Litestream copied without a break. Litestream
 * reads the database file for this (its lag behind the replica); when the file is gone with its disk, a copy of the
 * configuration (0600, removed at once: it may hold expanded credentials) points the same replicas at an empty file.
 */
async function generationsOf(bin: string, source: RestoreSource): Promise<Generation[]> {
  if ('config' in source && !existsSync(source.database)) {
    const work = mkdtempSync(join(tmpdir(), 'trellis-litestream-'))
    try {
      const config = parsedConfig(source.config)
      const stand = join(work, 'absent.db')
      writeFileSync(stand, '')
      const dbs = databaseEntries(source.config).filter((db) => resolve(db.path as string) === source.database).map((db) => ({ ...db, path: stand }))
      const copy = join(work, 'litestream.yml')
      writeFileSync(copy, stringifyYaml({ ...config, dbs }), { mode: 0o600 })
      return await generationsOf(bin, { config: copy, database: stand, expanded: true })
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  }
  const { code, said } = await runLitestream(bin, ['generations', ...sourceArgs(source)])
  if (code !== 0) throw new LitestreamError(`litestream generations failed: ${said || `exit code ${code}`}`)
  return said
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((columns) => columns.length >= 5)
    .map(([, name, , start, end]) => ({ name: name!, start: new Date(start!), end: new Date(end!) }))
}

const NO_BACKUPS = 'no matching backups found'

/**
 * `litestream restore` of `source` into `output` (a file that must not exist): the newest state, or the state at
 * `timestamp` (an RFC 3339 time). Litestream restores a time only within a generation's first and last change; a time
 * after the last change (nothing was written since) is the newest state before it, restored from that generation
 * without a time. A failure rejects with what Litestream said.
 */
export async function restoreReplica(bin: string, source: RestoreSource, output: string, timestamp?: string): Promise<Restored> {
  const asked = await runLitestream(bin, ['restore', '-o', output, ...(timestamp === undefined ? [] : ['-timestamp', timestamp]), ...sourceArgs(source)])
  if (asked.code === 0) return { log: asked.said, newestBefore: null }
  if (timestamp === undefined || !asked.said.includes(NO_BACKUPS)) throw new LitestreamError(`litestream restore failed: ${asked.said || `exit code ${asked.code}`}`)
  const time = new Date(timestamp)
  const before = (await generationsOf(bin, source)).filter((generation) => generation.start <= time && generation.end <= time).sort((a, b) => b.end.getTime() - a.end.getTime())
  const newest = before[0]
  if (newest === undefined) throw new LitestreamError(`litestream restore failed: the replica holds no state at or before ${timestamp} (${NO_BACKUPS})`)
  const latest = await runLitestream(bin, ['restore', '-o', output, '-generation', newest.name, ...sourceArgs(source)])
  if (latest.code !== 0) throw new LitestreamError(`litestream restore failed: ${latest.said || `exit code ${latest.code}`}`)
  return { log: latest.said, newestBefore: newest.end.toISOString() }
}

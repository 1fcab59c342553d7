/**
 * A throw-away PostgreSQL cluster for tests and the bench: Debian's `initdb`/`pg_ctl` (on PATH or in
 * /usr/lib/postgresql/<version>/bin), a data directory in a temp dir, listening on 127.0.0.1 on a free port with its
 * socket in the temp dir; as root, run as the unprivileged `postgres` user (the server refuses root).
 */
import { chownSync, copyFileSync, existsSync, readFileSync, statfsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SQL } from 'bun'
import { openPostgres, type PgStore } from '../../src/db/postgres/store.ts'
import { DEFAULT_DATABASE_POOL } from '../../src/config.ts'
import { type Pooler, startPgbouncer } from './pgbouncer.ts'
import { freePort, tempDir } from '../helpers.ts'
import type { Answer, Ask } from './sync-postgres-worker.ts'

/** A PostgreSQL server program: on PATH, or where Debian's `postgresql` package puts it (the newest version). */
export function postgresBinary(name: string): string | null {
  const onPath = Bun.which(name)
  if (onPath) return onPath
  try {
    const found = [...new Bun.Glob(`*/bin/${name}`).scanSync({ cwd: '/usr/lib/postgresql', absolute: true })]
    return found.sort((a, b) => b.localeCompare(a, undefined, { numeric: true }))[0] ?? null
  } catch {
    return null
  }
}

export const initdb = postgresBinary('initdb')
export const pgCtl = postgresBinary('pg_ctl')
export const postgresInstalled = initdb !== null && pgCtl !== null

const asPostgres = (args: string[]) => (process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', ...args] : args)
const idOfPostgres = (flag: '-u' | '-g') => Number(Bun.spawnSync(['id', flag, 'postgres']).stdout.toString())

/** Runs a PostgreSQL program (as the `postgres` user when root); throws with its output when it fails. */
export function runAsPostgres(args: string[]): void {
  run(args)
}

/** Hands `path` to the `postgres` user when root (a directory the server or its tools write). */
export function giveToPostgres(path: string): void {
  if (process.getuid?.() === 0) chownSync(path, idOfPostgres('-u'), idOfPostgres('-g'))
}

function run(args: string[]): void {
  const result = Bun.spawnSync(asPostgres(args), { stdout: 'pipe', stderr: 'pipe' })
  if (result.exitCode !== 0) throw new Error(`${args.join(' ')} failed: ${result.stderr.toString()}${result.stdout.toString()}`)
}

export interface Cluster {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication, loopback only). */
  url: string
  stop(): void
  /**
   * Stops the server, keeping its data: the database is unreachable. `fast` (the default) rolls back open transactions
   * and cuts every connection cleanly; `immediate` aborts every server process, as a crash would (recovery at start).
   */
  pause(mode?: 'fast' | 'immediate'): void
  /** Starts a paused server again, on the same port with the same data. */
  resume(): void
  /** Its data directory, port and socket directory (a cluster of `startCluster`; the shared one of `npm test` has none). */
  local?: { dataDir: string; port: number; socketDir: string }
}

/** Room the shared cluster may take in memory: its template, the live test databases and up to about 1 GB of WAL. */
const MEMORY_NEEDED_BYTES = 4 * 1024 ** 3

/**
 * Memory (/dev/shm, a tmpfs) where the machine has one with room for the cluster — a container's is often 64 MB —,
 * else the temp dir: see `startCluster`'s `inMemory`.
 */
const MEMORY_DIR = (() => {
  if (!existsSync('/dev/shm')) return tmpdir()
  const { bavail, bsize } = statfsSync('/dev/shm')
  return bavail * bsize >= MEMORY_NEEDED_BYTES ? '/dev/shm' : tmpdir()
})()

/**
 * Starts a cluster; `fsync: false` (the default) for tests, where durability across a power cut is not the question.
 * `inMemory`: its directory in /dev/shm where there is one (the tests' shared cluster, `sharedCluster`): each test
 * database is a copy of the template, hundreds of files made and removed a second, and on ext4 the kernel's search
 * for an inode to reuse (`recently_deleted`) took about half the server's CPU. Clusters that a test stops, crashes
 * and restarts, and the bench's, stay on disk.
 */
export function startCluster(options: { fsync?: boolean; settings?: Record<string, string>; dataDir?: string; inMemory?: boolean } = {}): Cluster {
  if (!postgresInstalled) throw new Error('initdb/pg_ctl not found (apt-get install postgresql)')
  const dir = tempDir('trellis-pg-', options.inMemory ? MEMORY_DIR : tmpdir())
  // `dataDir`: an existing data directory (a restored base backup, the postgres user's, mode 0700), else a new cluster.
  const data = options.dataDir ?? join(dir.path, 'data')
  if (process.getuid?.() === 0) chownSync(dir.path, idOfPostgres('-u'), idOfPostgres('-g'))
  if (options.dataDir === undefined) run([initdb!, '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'])
  const port = freePort()
  const fsync = options.fsync === true ? 'on' : 'off'
  const settings = Object.entries({ ...options.settings, ...planLogging(options.settings) }).map(([name, value]) => ` -c ${name}=${value}`).join('')
  const log = join(dir.path, 'log')
  const start = () => {
    try {
      run([pgCtl!, '-D', data, '-l', log, '-w', '-o', `-p ${port} -k ${dir.path} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=${fsync}${settings}`, 'start'])
    } catch (error) {
      // pg_ctl says only that the server did not start; its log says why.
      throw new Error(`${(error as Error).message}\nthe end of the server's log:\n${existsSync(log) ? readFileSync(log, 'utf8').slice(-3_000) : '(none)'}`)
    }
  }
  const halt = (mode: 'fast' | 'immediate' = 'fast') => run([pgCtl!, '-D', data, '-m', mode, '-w', 'stop'])
  start()
  outliveNot(process.pid, data, dir.path)
  let stopped = false
  let paused = false
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    local: { dataDir: data, port, socketDir: dir.path },
    stop: () => {
      if (stopped) return
      stopped = true
      if (!paused) halt()
      keepPlanLog(log, port)
      dir.cleanup()
    },
    pause: (mode = 'fast') => {
      halt(mode)
      paused = true
    },
    resume: () => {
      start()
      paused = false
    },
  }
}

/**
 * A debugging aid for the bench's tools and the tests: with TRELLIS_PG_EXPLAIN_MS=N in the environment, every cluster
 * started here logs the plan of each statement slower than N ms (auto_explain: run with buffers, row counts and
 * triggers, nested statements included; TRELLIS_PG_EXPLAIN_SAMPLE: the share of statements looked at, 1 by default),
 * and its log is kept when it stops (`keepPlanLog`). It found the plans made on stale statistics
 * (docs/scaling-out.md "Plans made on stale statistics").
 */
function planLogging(settings: Record<string, string> | undefined): Record<string, string> {
  const ms = process.env.TRELLIS_PG_EXPLAIN_MS
  if (!ms) return {}
  return {
    shared_preload_libraries: [settings?.shared_preload_libraries, 'auto_explain'].filter(Boolean).join(','),
    'auto_explain.log_min_duration': ms,
    'auto_explain.log_analyze': 'on',
    'auto_explain.log_timing': 'off',
    'auto_explain.log_buffers': 'on',
    'auto_explain.log_triggers': 'on',
    'auto_explain.log_nested_statements': 'on',
    'auto_explain.sample_rate': process.env.TRELLIS_PG_EXPLAIN_SAMPLE ?? '1',
  }
}

/** With TRELLIS_PG_EXPLAIN_MS, the stopped cluster's log (its plans) copied to the temp dir, and where it went said on stderr. */
function keepPlanLog(log: string, port: number): void {
  if (!process.env.TRELLIS_PG_EXPLAIN_MS || !existsSync(log)) return
  const kept = join(tmpdir(), `trellis-pg-plans-${process.pid}-${port}.log`)
  copyFileSync(log, kept)
  console.error(`the cluster's plans (TRELLIS_PG_EXPLAIN_MS): ${kept}`)
}

/**
 * A watchdog that stops the cluster and removes its directory once `owner` is gone, however it ended (bun test does
 * not run exit handlers; a test run may be killed): a throw-away cluster never outlives the process that started it.
 */
function outliveNot(owner: number, data: string, dir: string): void {
  const script = `while kill -0 ${owner} 2>/dev/null; do sleep 1; done; ${asPostgres([pgCtl!, '-D', data, '-m', 'immediate', 'stop']).join(' ')} >/dev/null 2>&1; rm -rf '${dir}'`
  const watchdog = Bun.spawn(['sh', '-c', script], { stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' })
  watchdog.unref()
}

let shared: Cluster | undefined
let templateMigrated = false
const TEMPLATE = 'trellis_template'

/** Debian's `psql` (the `postgresql` package ships it beside the server). */
export const psql = postgresBinary('psql')

/**
 * `statement` run on the database at `url`, synchronously, its rows as psql's unaligned, tuples-only output prints
 * them (columns joined by `|`, rows by newlines). Through a worker that keeps one connection per database open
 * (./sync-postgres-worker.ts): a psql process per statement cost more than most tests' own work.
 */
export function psqlSync(url: string, statement: string): string {
  try {
    return askWorker({ kind: 'statement', url, text: statement })
  } catch (error) {
    throw new Error(`psql failed on ${JSON.stringify(statement.slice(0, 200))}: ${error instanceof Error ? error.message : error}`)
  }
}

let worker: Worker | undefined
/** Room for the longest answer (a whole database's rows as JSON, for `tableContents`): address space, not memory, until used. */
const ANSWER_BYTES = 64 * 1024 * 1024
let answer: SharedArrayBuffer | undefined

function theWorker(): Worker {
  if (!worker) {
    worker = new Worker(new URL('./sync-postgres-worker.ts', import.meta.url).href)
    worker.unref()
  }
  return worker
}

/** Asks the worker and blocks this thread until it answers (or, with `wait: false`, does not wait at all). */
function askWorker(ask: Omit<Ask, 'answer'>, wait = true): string {
  if (!wait) {
    theWorker().postMessage(ask)
    return ''
  }
  answer ??= new SharedArrayBuffer(ANSWER_BYTES)
  const header = new Int32Array(answer, 0, 2)
  Atomics.store(header, 0, 0)
  theWorker().postMessage({ ...ask, answer })
  Atomics.wait(header, 0, 0)
  const result = JSON.parse(new TextDecoder().decode(new Uint8Array(answer, 8, header[1]!).slice())) as Answer
  if ('error' in result) throw new Error(result.error)
  return result.ok
}

/**
 * `npm test` starts one cluster and one migrated template for all its test processes and hands them down in these
 * variables (`shareClusterWithChildren`); a test process started alone makes its own.
 */
const SHARED_URL = 'TRELLIS_TEST_POSTGRES_URL'
const SHARED_TEMPLATE = 'TRELLIS_TEST_POSTGRES_TEMPLATE'
const SHARED_POOLER_PORT = 'TRELLIS_TEST_PGBOUNCER_PORT'

/**
 * Whether the product reaches the shared cluster through PgBouncer in transaction pooling mode here, the way a
 * deployment behind a pooler does (TRELLIS_DATABASE_LISTEN_URL on a direct connection): TRELLIS_TEST_PGBOUNCER=1, or
 * the `npm test` parent handed down its pooler. The tests' own reads and set-up (psql, templates) stay direct.
 */
const pooled = () => process.env.TRELLIS_TEST_PGBOUNCER === '1' || Boolean(process.env[SHARED_POOLER_PORT])
let pooler: Pooler | undefined

/** The shared cluster's PgBouncer, started once per process. */
function sharedPooler(): Pooler {
  if (!pooler) {
    const started = startPgbouncer(sharedCluster().url)
    pooler = started
    process.on('exit', () => started.stop())
  }
  return pooler
}

/** The shared cluster's PgBouncer port: the `npm test` parent's, or this process's own. Null when not pooled. */
function poolerPort(): number | null {
  if (!pooled()) return null
  const given = process.env[SHARED_POOLER_PORT]
  return given ? Number(given) : sharedPooler().port
}

/**
 * How the product connects to the database at `url` (a direct URL of the shared cluster) in this test run: `url`
 * itself, or through PgBouncer with `listenUrl` the direct one. Another cluster's URL (a test's own) stays direct.
 */
export function productConnection(url: string): { url: string; listenUrl?: string } {
  const port = poolerPort()
  const parsed = new URL(url)
  if (port === null || parsed.port !== new URL(sharedCluster().url).port) return { url }
  parsed.port = String(port)
  return { url: parsed.toString(), listenUrl: url }
}

/** The environment a `trellis` process needs for the database at direct `url` (see `productConnection`). */
export function productDatabaseEnv(url: string): Record<string, string> {
  const connection = productConnection(url)
  return { TRELLIS_DATABASE_URL: connection.url, ...(connection.listenUrl ? { TRELLIS_DATABASE_LISTEN_URL: connection.listenUrl } : {}) }
}

/** A product store on the database at direct `url` (see `productConnection`). */
export function openProductPostgres(url: string, options: { max?: number } = {}): PgStore {
  const connection = productConnection(url)
  return openPostgres(connection.url, { max: options.max ?? DEFAULT_DATABASE_POOL, listenUrl: connection.listenUrl })
}

/** The direct URL behind a URL `productConnection` gave (tests read the database directly). */
export function directUrlOf(url: string): string {
  const port = poolerPort()
  const parsed = new URL(url)
  if (port === null || parsed.port !== String(port)) return url
  parsed.port = new URL(sharedCluster().url).port
  return parsed.toString()
}

/**
 * One cluster for the whole test process (every PostgreSQL test file shares it), stopped when the process exits — or
 * the cluster of the `npm test` that started this process, which that process stops.
 */
export function sharedCluster(): Cluster {
  if (!shared) {
    const given = process.env[SHARED_URL]
    if (given) {
      const notOurs = () => {
        throw new Error('the shared cluster belongs to the npm test that started this process: use startCluster() for one to pause')
      }
      shared = { url: given, stop: () => {}, pause: notOurs, resume: notOurs }
    } else {
      const cluster = startCluster({ settings: { max_connections: '1000' }, inMemory: true })
      shared = cluster
      process.on('exit', () => cluster.stop())
    }
  }
  return shared
}

/**
 * Starts the shared cluster and migrates its template here, once; the variables that hand both to a child test
 * process — and, `throughPgbouncer`, the shared PgBouncer in front of it, through which the child's product connects.
 */
export function shareClusterWithChildren(options: { throughPgbouncer?: boolean } = {}): Record<string, string> {
  const template = migratedTemplate()
  const shared = { [SHARED_URL]: sharedCluster().url, [SHARED_TEMPLATE]: template }
  return options.throughPgbouncer ? { ...shared, [SHARED_POOLER_PORT]: String(sharedPooler().port) } : shared
}

/** The URL of database `name` in the shared cluster. */
export function databaseUrl(name: string): string {
  return sharedCluster().url.replace(/\/postgres$/, `/${name}`)
}

/**
 * The template database, migrated once per process. Synchronous (so that `testEnv()` stays synchronous): the
 * migrations run through `migratePostgres` in a child process (./migrate-postgres.ts).
 */
function migratedTemplate(): string {
  if (process.env[SHARED_TEMPLATE]) return process.env[SHARED_TEMPLATE]
  if (!templateMigrated) {
    psqlSync(sharedCluster().url, `CREATE DATABASE ${TEMPLATE}`)
    const child = Bun.spawnSync([process.execPath, join(import.meta.dir, 'migrate-postgres.ts'), databaseUrl(TEMPLATE)], { stdout: 'pipe', stderr: 'pipe' })
    if (child.exitCode !== 0) throw new Error(`migrating the template database failed: ${child.stderr.toString()}${child.stdout.toString()}`)
    templateMigrated = true
  }
  return TEMPLATE
}

/**
 * A fresh, migrated database in the shared cluster, synchronously: a copy of `template` (default: the template
 * migrated once per process; CREATE DATABASE … TEMPLATE takes milliseconds, migrating each would take far longer).
 * Its name and URL.
 */
export function freshDatabaseSync(template = migratedTemplate()): { name: string; url: string } {
  const name = askWorker({ kind: 'fresh', url: sharedCluster().url, text: template })
  return { name, url: databaseUrl(name) }
}

/** Drops database `name` of the shared cluster, closing whatever connections are still open to it; in the background. */
export function dropDatabase(name: string): void {
  askWorker({ kind: 'drop', url: sharedCluster().url, text: name }, false)
}

/**
 * Drops what a finished test process left in the shared cluster, which is in memory: the databases named after it
 * (`trellis_<pid>_…`, ./sync-postgres-worker.ts): the copy its worker made ahead for each template, and those of envs
 * a test never cleaned up (bun test runs no exit handlers). `npm test` calls it as each PostgreSQL process ends.
 */
export async function dropDatabasesOf(pid: number): Promise<void> {
  const admin = new SQL({ url: sharedCluster().url, max: 1 })
  try {
    const left = await admin.unsafe(`SELECT datname FROM pg_database WHERE datname LIKE 'trellis\\_${pid}\\_%'`)
    for (const { datname } of left as { datname: string }[]) await admin.unsafe(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`)
  } finally {
    await admin.close()
  }
}

/** A fresh, migrated database in the shared cluster for one test or test file (see `freshDatabaseSync`). Its URL. */
export async function freshDatabase(): Promise<string> {
  return freshDatabaseSync().url
}

/** A PostgreSQL store on a fresh migrated database (see `freshDatabase`). */
export async function freshPostgresStore(options: { max?: number } = {}): Promise<PgStore> {
  return openProductPostgres(await freshDatabase(), options)
}

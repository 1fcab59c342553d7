/**
 * Test helpers: a real SQLite file in a temp dir with real migrations (or, with TRELLIS_TEST_STORE=postgres, a real
 * migrated PostgreSQL database in a throw-away cluster), the real app, the real CLI.
 */
import type { AuditSigning } from '../src/db/audit.ts'
import { auditSigningKey } from '../src/lib/audit-key.ts'
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../src/app.ts'
import { createDeps, type DepsInput } from '../src/deps.ts'
import { type ApplyContext, applyDocument, applyDocumentNow, type ApplyReport } from '../src/modules/apply/service.ts'
import { type Config, loadConfig } from '../src/config.ts'
import type { Db } from '../src/db/dialect.ts'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { databasePath } from '../src/db/sqlite/open.ts'
import { openStore, type SqliteStore } from '../src/db/sqlite/store.ts'
import { writeNow } from '../src/db/write.ts'
import type { AnyPlan, Op } from '../src/db/op.ts'
import type { PgStore } from '../src/db/postgres/store.ts'
import type { Store } from '../src/db/store.ts'
import type { WatermarkedList } from '../src/db/dialect.ts'
import { usePasswordHashing } from '../src/modules/users/service.ts'
import { type Clock, manualClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createMetrics } from '../src/lib/metrics.ts'
import { microsFromMillis, toIsoMicros } from '../src/lib/time.ts'
import { directUrlOf, dropDatabase, freshDatabaseSync, openProductPostgres, productDatabaseEnv, psqlSync } from './support/postgres-cluster.ts'

export const repoRoot = join(import.meta.dir, '..')

/** Every TypeScript source file under `dir` (declaration files left out), as absolute paths. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : []
  })
}

export function tempDir(prefix = 'trellis-test-', parent = tmpdir()): { path: string; cleanup(): void } {
  const path = mkdtempSync(join(parent, prefix))
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) }
}

/**
 * Test processes, and the `trellis` processes they start (`runCli`, `startServe`), hash new passwords at a test-only
 * cost (1 MiB, 1 pass: src/modules/users/service.ts `usePasswordHashing`): at the production cost (64 MiB, 2 passes,
 * ≈ 100 ms) each seeded user and each sign-in cost a tenth of a second of CPU, a third of some files' CPU. What the
 * production cost is and what it does under load is tested at that cost: `PRODUCTION_PASSWORD_HASHES` for the
 * processes, `usePasswordHashing('production')` in the test process (restored afterwards).
 */
usePasswordHashing('weak-for-tests')

/** The environment of a `trellis` process that hashes at the test-only cost (the default of `runCli` and `startServe`). */
const WEAK_PASSWORD_HASHES = { TRELLIS_TEST_WEAK_PASSWORD_HASHES: '1' }
/** Given to `runCli` or `startServe`: the process hashes passwords at the production cost. */
export const PRODUCTION_PASSWORD_HASHES = { TRELLIS_TEST_WEAK_PASSWORD_HASHES: '0' }

/**
 * The store `testEnv()` gives: SQLite (the default), or PostgreSQL with TRELLIS_TEST_STORE=postgres (`npm test`'s
 * second pass, scripts/test.ts).
 */
export const TEST_STORE = testStoreFromEnvironment()

function testStoreFromEnvironment(): 'sqlite' | 'postgres' {
  const wanted = process.env.TRELLIS_TEST_STORE ?? 'sqlite'
  if (wanted !== 'sqlite' && wanted !== 'postgres') throw new Error(`TRELLIS_TEST_STORE must be sqlite or postgres, not ${JSON.stringify(wanted)}`)
  return wanted
}

export interface TestEnv {
  dataDir: string
  store: TestStore
  /** The PostgreSQL database's URL (TRELLIS_TEST_STORE=postgres), else null: `processEnv` hands it to the CLI. */
  databaseUrl: string | null
  config: Config
  clock: ReturnType<typeof manualClock>
  secret: Buffer
  cleanup(): void
}

/** Connections a test env's PostgreSQL pool keeps open at most (envs of a test process share one cluster). */
const TEST_POOL_SIZE = 5

/**
 * A migrated database and a fresh temp dir (the data dir: instance secret, files), the connection set up as `serve`
 * sets up its own. On TRELLIS_TEST_STORE=postgres the database is a fresh copy of the migrated template in the shared
 * cluster (test/support/postgres-cluster.ts), dropped by `cleanup`; its pool connects on first use.
 */
export function testEnv(env: Record<string, string> = {}): TestEnv {
  return TEST_STORE === 'postgres' ? postgresTestEnv(env) : sqliteTestEnv(env)
}

/** A test env on SQLite whatever TRELLIS_TEST_STORE says: for the tests of SQLite itself (its file, PRAGMAs, locks, WAL). */
export function sqliteTestEnv(env: Record<string, string> = {}): SqliteTestEnv {
  const { base, dir } = envBase(env)
  writeFileSync(databasePath(base.config.dataDir), migratedSqliteTemplate(), { mode: 0o600 })
  const store = openStore(base.config.dataDir)
  store.keepEventLoopFree(base.config.dbBusyWaitMs)
  return {
    ...base,
    store,
    databaseUrl: null,
    cleanup: () => {
      store.close()
      dir.cleanup()
    },
  }
}

export type SqliteTestEnv = TestEnv & { store: SqliteStore }

let sqliteTemplate: Uint8Array | undefined

/**
 * The bytes of a SQLite file migrated once per test process (in a temp dir removed at once: bun test runs no exit
 * handlers): each SQLite test env's file starts as a copy of them. Writing them takes a millisecond; running every
 * migration on a new file took ≈ 35 ms of CPU, and the suite makes thousands of envs. The copy is the env's own file,
 * as new as before. The migrations themselves run for real where they are the subject: test/db.test.ts,
 * test/schema-parity.test.ts, the CLI's `migrate` and `serve` on a new data directory.
 */
function migratedSqliteTemplate(): Uint8Array {
  if (sqliteTemplate) return sqliteTemplate
  const dir = tempDir('trellis-template-')
  try {
    const store = openStore(dir.path)
    migrate(store.sqlite)
    sqliteTemplate = store.sqlite.serialize()
    store.close()
  } finally {
    dir.cleanup()
  }
  return sqliteTemplate
}

/** A test's store: either class (src/db/store.ts `Store`), told apart by its `kind` where a test reads its database itself. */
export type TestStore = SqliteStore | PgStore

function postgresTestEnv(env: Record<string, string>): TestEnv {
  const { base, dir } = envBase(env)
  const { store, close, url } = postgresTestStore()
  return {
    ...base,
    store,
    databaseUrl: url,
    cleanup: () => {
      close()
      dir.cleanup()
    },
  }
}

/**
 * A PostgreSQL store on a fresh copy of database `template` of the shared cluster (default: the migrated template),
 * its pool connecting on first use; `close` closes the pool, then drops the database.
 */
export function postgresTestStore(template?: string): { store: PgStore; url: string; close(): void } {
  const database = freshDatabaseSync(template)
  const store = openProductPostgres(database.url, { max: TEST_POOL_SIZE })
  return { store, url: database.url, close: () => void store.close().finally(() => dropDatabase(database.name)) }
}

/** The environment a real `trellis` process needs to open the env's database: its URL on PostgreSQL, nothing on SQLite. */
export function processEnv(env: TestEnv): Record<string, string> {
  return env.databaseUrl === null ? {} : productDatabaseEnv(env.databaseUrl)
}

/** The audit signing of a test env's secret (the key `serve` would derive), witnessed nowhere: what retention signs its anchors with. */
export function auditSigningOf(env: { secret: Buffer }): AuditSigning {
  return { key: auditSigningKey(env.secret), witnesses: [] }
}

/** What every test env has but its store: the data dir (a fresh temp dir), the config, a manual clock, the secret. */
function envBase(env: Record<string, string>) {
  const dir = tempDir()
  const config = loadConfig({ data: dir.path }, { TRELLIS_BASE_URL: 'http://trellis.test', ...env })
  const base = {
    dataDir: dir.path,
    config,
    clock: manualClock(Date.UTC(2026, 10, 21, 12, 0, 0)),
    secret: Buffer.from('test-secret-test-secret-test-secret-0123'),
  }
  return { base, dir }
}

/**
 * The store as the SQLite store a check needs (a PRAGMA, the file, a SQLite-only statement); on PostgreSQL it fails
 * the test, naming `why`. Tests whose whole point is SQLite use `sqliteOnlyTest` instead.
 */
export function sqliteOf(store: TestStore, why: string): SqliteStore {
  if (store.kind === 'sqlite') return store
  throw new Error(`SQLite only (${why}): this test runs on PostgreSQL (TRELLIS_TEST_STORE=postgres)`)
}

/** Why a test is SQLite-only (docs/development.md "Development" lists the tests). */
export const SQLITE_ONLY = {
  ownDataDir: 'runs `trellis` processes on a data directory of its own, seeded and read through SQLite (PostgreSQL processes: test/scale-out.test.ts, test/postgres-cli.test.ts)',
  groupCommit: 'counts the group commit\'s transactions (SQLite\'s one writer batches writes; PostgreSQL commits each)',
  tempTrigger: 'injects a write failure with a SQLite TEMP trigger (RAISE(ABORT))',
  queryPlan: 'reads SQLite\'s EXPLAIN QUERY PLAN',
  sqliteMigrations: 'applies SQLite\'s embedded migrations to its file (PostgreSQL\'s: test/postgres-cli.test.ts, test/schema-parity.test.ts)',
  pragmas: 'reads the SQLite connection\'s PRAGMAs and the file\'s journal mode',
  lookupCache: 'checks the SQLite connection\'s lookup cache, emptied by PRAGMA data_version (PostgreSQL\'s instance cache: its own tests below)',
  writeLock: 'holds SQLite\'s one write lock from another process (PostgreSQL has no database-wide write lock)',
  diskFull: 'fills the disk under the SQLite file (a small filesystem, or PRAGMA max_page_count)',
  readOnly: 'makes the SQLite data directory and files read-only (a read-only bind mount, chattr +i); PostgreSQL\'s storage is its server\'s',
  prepares: 'counts what the SQLite connection prepares (bun:sqlite `prepare`)',
  wal: 'measures the SQLite file\'s write-ahead log and its checkpoints',
  fileSize: 'measures the SQLite file\'s size, its free pages and its tables\' pages (dbstat)',
  backup: '`trellis backup` copies the SQLite file (VACUUM INTO); on PostgreSQL it points to pg_dump: test/postgres-cli.test.ts',
  newDataDir: 'migrates a new data directory\'s SQLite file (`trellis migrate` on PostgreSQL: test/postgres-cli.test.ts)',
  litestream: 'Litestream replicates the SQLite file (PostgreSQL restores to a time from its own WAL archive: test/postgres-pitr.test.ts)',
} as const

/**
 * `fn` on the SQLite connection as one step of an op, for a test of SQLite itself (a lock, a savepoint, the cache):
 * a plan whose PostgreSQL half refuses, made here and never with src/db's `plan` (whose plans test/per-dialect.test.ts
 * counts).
 */
export function* onSqlite<A extends unknown[], T>(fn: (db: Db, ...args: A) => T, ...args: A): Op<T> {
  const step = { sqlite: fn, postgres: () => Promise.reject(new Error('a step of a SQLite-only test')), why: 'a test of SQLite itself' }
  return (yield { kind: 'plan', plan: step as unknown as AnyPlan, args }) as T
}

/**
 * A test that checks SQLite itself (a PRAGMA, the file, the group commit, a query plan): run on SQLite; on the
 * PostgreSQL pass it is listed as skipped with `reason` in its name (docs/development.md "Development" keeps the list).
 */
export function sqliteOnlyTest(reason: string, name: string, fn: () => void | Promise<unknown>, timeoutMs?: number): void {
  if (TEST_STORE === 'sqlite') test(name, fn, timeoutMs)
  else test.skip(`${name} [SQLite only: ${reason}]`, fn)
}

/** Why a test runs on PostgreSQL only (the SQLite pass lists it as skipped with the reason in its name). */
export const POSTGRES_ONLY = {
  severalInstances: 'runs several `serve` processes on one database: on SQLite one serve holds the data directory (serve.lock) and a second is refused',
  queryPlan: 'reads PostgreSQL\'s EXPLAIN (SQLite\'s plans: test/query-plans.test.ts)',
  concurrentWriters: 'holds a write transaction open beside the app\'s: SQLite\'s one writer lets nothing run between two statements of a write',
  lookupGeneration: 'PostgreSQL\'s lookup cache and its generation row (SQLite\'s cache: the tests above, per connection)',
  serverDisk: 'fills the disk under a PostgreSQL tablespace (SQLite\'s full disk: storage-faults "the disk is full")',
  pooler: 'connects through PgBouncer in front of PostgreSQL: SQLite is a file, with no connections to pool',
} as const

/** A test of what only PostgreSQL deployments do (see `POSTGRES_ONLY`): on the SQLite pass listed as skipped with `reason`. */
export function postgresOnlyTest(reason: string, name: string, fn: () => void | Promise<unknown>, timeoutMs?: number): void {
  if (TEST_STORE === 'postgres') test(name, fn, timeoutMs)
  else test.skip(`${name} [PostgreSQL only: ${reason}]`, fn)
}

/** The real Elysia app over a test env; call with `app.handle(new Request(...))`. */
export function testApp(env: TestEnv, overrides: Partial<DepsInput> = {}) {
  return createApp(createDeps({ config: env.config, store: env.store, clock: env.clock as Clock, logger: silentLogger, secret: env.secret, metrics: createMetrics(), ...overrides }))
}

/** The Authorization header of a call made with an application token. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

export function request(path: string, init: RequestInit & { json?: unknown } = {}): Request {
  const { json, ...rest } = init
  const headers = new Headers(rest.headers)
  if (json !== undefined) headers.set('content-type', 'application/json')
  return new Request(`http://localhost${path}`, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body })
}

/** Sends through the app and parses the JSON body; a 5XX or a body that is not JSON fails the test with both shown. */
export async function handleJson(app: { handle(r: Request): Promise<Response> }, req: Request): Promise<{ response: Response; text: string; body: unknown }> {
  const response = await app.handle(req)
  const text = await response.text()
  if (response.status >= 500) throw new Error(`${req.method} ${req.url} → ${response.status}: ${text}`)
  try {
    return { response, text, body: JSON.parse(text) as unknown }
  } catch {
    throw new Error(`${req.method} ${req.url} → ${response.status} with a non-JSON body: ${text.slice(0, 200)}`)
  }
}

/** A JSON call with a Bearer token to a real server at `base`; a 5xx fails the test with its body. An empty body is `{}`. */
export async function callWithToken(
  base: string,
  path: string,
  token: string,
  init: { method?: string; json?: unknown } = {},
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` }
  if (init.json !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(`${base}${path}`, { method: init.method ?? 'GET', headers, body: init.json === undefined ? undefined : JSON.stringify(init.json) })
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, headers: response.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
}

export interface CliResult {
  code: number
  stdout: string
  stderr: string
}

/**
 * How a test starts `trellis`: the compiled `binary` when given; else the binary `npm test` built from this checkout
 * for its run (TRELLIS_TEST_BINARY: a process of it starts in a tenth of the CPU the source needs, and the suite starts
 * hundreds); else the source, `bun src/main.ts` (a file run alone with `bun test`).
 */
export function trellisCommand(binary?: string): string[] {
  if (binary) return [binary]
  const built = process.env.TRELLIS_TEST_BINARY
  return built ? [built] : [process.execPath, join(repoRoot, 'src/main.ts')]
}

/** Runs the CLI in a real process: from source (`bun src/main.ts …`), or the compiled `binary` when given. */
export async function runCli(args: string[], options: { stdin?: string; env?: Record<string, string>; cwd?: string; binary?: string } = {}): Promise<CliResult> {
  const trellis = trellisCommand(options.binary)
  const proc = Bun.spawn([...trellis, ...args], {
    cwd: options.cwd ?? repoRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...WEAK_PASSWORD_HASHES, ...options.env },
    stdin: options.stdin === undefined ? 'ignore' : new TextEncoder().encode(options.stdin),
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

/** A describe block of SQLite-only tests (see `sqliteOnlyTest`): on PostgreSQL listed as skipped with `reason`. */
export function sqliteOnlyDescribe(reason: string, name: string, fn: () => void): void {
  if (TEST_STORE === 'sqlite') describe(name, fn)
  else describe.skip(`${name} [SQLite only: ${reason}]`, fn)
}

/**
 * Another connection to the same database, as a second process would have (SQLite: the data directory's file;
 * PostgreSQL: a pool of its own on the same database). Close it before the env.
 */
export function anotherStore(env: TestEnv): TestStore {
  return env.store.kind === 'sqlite' ? openStore(env.dataDir) : openProductPostgres(postgresUrlOf(env.store), { max: TEST_POOL_SIZE })
}

/** `test.each` for a table of SQLite-only cases (see `sqliteOnlyTest`). */
export function sqliteOnlyEach<T extends unknown[]>(reason: string, cases: T[], name: string, fn: (...args: T) => void | Promise<unknown>): void {
  // bun's `each` types its callback with a trailing `done` for tuple rows; the rows' own arguments are all it gets here.
  const run = fn as never
  if (TEST_STORE === 'sqlite') test.each(cases)(name, run)
  else test.skip.each(cases)(`${name} [SQLite only: ${reason}]`, run)
}

/** The rows of every table, each table in a fixed order: used to prove that a failed command wrote nothing. */
export function tableContents(store: TestStore): Record<string, unknown[]> {
  if (store.kind === 'postgres') {
    const tables = queryAll<{ name: string }>(store, "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
    if (tables.length === 0) return {}
    const each = tables.map(({ name }) => `'${name}', (SELECT coalesce(json_agg(t ORDER BY t::text), '[]'::json) FROM "${name}" t)`)
    return JSON.parse(psqlSync(postgresUrlOf(store), `SELECT json_build_object(${each.join(', ')})`)) as Record<string, unknown[]>
  }
  const tables = store.sqlite
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    .all() as { name: string }[]
  return Object.fromEntries(tables.map(({ name }) => [name, store.sqlite.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all()]))
}

/** A value a test binds to a `?` of `queryAll`, `queryOne` or `execute`. */
export type SqlValue = string | number | boolean | null

/**
 * The rows of `statement` (portable SQL, `?` placeholders) on either store, synchronously, in one shape on both:
 * SQLite runs it on the connection; PostgreSQL through psql, its rows as JSON (numbers as numbers) with each boolean
 * as SQLite gives it, 1 or 0. (A JSON boolean in a row can only be a `boolean` result: the schema has no json
 * column; SQLite has no boolean type and answers every flag or comparison with 1 or 0.)
 */
export function queryAll<T = Record<string, unknown>>(store: TestStore, statement: string, ...params: SqlValue[]): T[] {
  if (store.kind === 'sqlite') return store.sqlite.prepare(statement).all(...params) as T[]
  const out = psqlSync(postgresUrlOf(store), `SELECT coalesce(json_agg(q), '[]'::json) FROM (${withLiterals(statement, params)}) q`)
  const rows = JSON.parse(out) as Record<string, unknown>[]
  return rows.map((row) => Object.fromEntries(Object.entries(row).map(([column, value]) => [column, typeof value === 'boolean' ? Number(value) : value]))) as T[]
}

/** The first row of `statement` (see `queryAll`), or null. */
export function queryOne<T = Record<string, unknown>>(store: TestStore, statement: string, ...params: SqlValue[]): T | null {
  if (store.kind === 'sqlite') return (store.sqlite.prepare(statement).get(...params) as T | null) ?? null
  return queryAll<T>(store, statement, ...params)[0] ?? null
}

/** `statement` (an UPDATE, DELETE or INSERT a test makes to set a scene; see `queryAll`) on either store. */
export function execute(store: TestStore, statement: string, ...params: SqlValue[]): void {
  if (store.kind === 'sqlite') store.sqlite.prepare(statement).run(...params)
  else psqlSync(postgresUrlOf(store), withLiterals(statement, params))
}

/**
 * `execute` for a scene set while the app in this process works (its executor, its retention): on PostgreSQL through
 * the store's own pool, awaited, not a synchronous psql, which holds this process's event loop for as long as the
 * statement takes (and for good, should it wait on a lock one of this process's own open transactions holds).
 */
export async function executeBeside(store: TestStore, statement: string, ...params: SqlValue[]): Promise<void> {
  if (store.kind === 'sqlite') store.sqlite.prepare(statement).run(...params)
  else await store.sql.unsafe(withLiterals(statement, params))
}

/** A PostgreSQL store's database URL, from its pool's options (tests connect with psql to the same database). */
function postgresUrlOf(store: PgStore): string {
  const { username, hostname, port, database } = store.sql.options as { username: string; hostname: string; port: number; database: string }
  return directUrlOf(`postgres://${username}@${hostname}:${port}/${database}`)
}

/** `statement` with each `?` outside quotes replaced by its parameter as a literal (psql has no bind parameters). */
function withLiterals(statement: string, params: SqlValue[]): string {
  let next = 0
  const literal = (value: SqlValue | undefined): string => {
    if (value === undefined) throw new Error(`${statement}: more placeholders than the ${params.length} parameter(s) given`)
    if (value === null) return 'NULL'
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new Error(`${statement}: cannot bind ${value}`)
      return String(value)
    }
    if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE'
    return `'${value.replaceAll("'", "''")}'`
  }
  const out = statement.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|\?/g, (token) => (token === '?' ? literal(params[next++]) : token))
  if (next !== params.length) throw new Error(`${statement}: ${params.length} parameter(s) for ${next} placeholder(s)`)
  return out
}

/**
 * Polls `probe` every `pollMs` until it gives a value (not null, undefined or false); fails naming `what` after the
 * timeout: 20 s unless given, what a run of a few steps can take on a 2-core machine running other test processes
 * (10 s was missed there), under the 30 s a test gets.
 */
/**
 * Waits until the rows of `list` committed so far are readable (`Store.awaitListed`: at once on SQLite; on
 * PostgreSQL a transaction another test holds open holds them back), as a test that reads them directly needs.
 */
export async function listReadable(store: Store, list: WatermarkedList): Promise<void> {
  await until(`the ${list} committed so far to be readable`, async () => (await store.awaitListed(list)) || null, 60_000, 10)
}

/** `listReadable` for the run events. */
export const runEventsReadable = (store: Store) => listReadable(store, 'run_events')

export async function until<T>(what: string, probe: () => T | null | undefined | false | Promise<T | null | undefined | false>, timeoutMs = 20_000, pollMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const value = await probe()
    if (value !== null && value !== undefined && value !== false) return value
    await Bun.sleep(pollMs)
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}

/** A TCP port nobody listens on right now (the OS picks it; we release it at once). */
export function freePort(): number {
  const probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response(null) })
  const port = probe.port
  probe.stop(true)
  if (port === undefined) throw new Error('could not find a free port')
  return port
}

export interface ServeProcess {
  url: string
  proc: Bun.Subprocess<'ignore', 'pipe', 'pipe'>
  /** Everything written to stdout so far. */
  stdout(): string
  stderr(): string
  /** Waits until stdout contains `text` (or `timeoutMs` passes) and returns stdout. */
  waitForOutput(text: string, timeoutMs?: number): Promise<string>
  /** Sends `signal` and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>
}

/**
 * Runs `trellis serve` in a real process on a free port — from source, or the compiled `binary` when given; resolves
 * once /healthz answers.
 */
export async function startServe(options: { dataDir: string; cwd: string; env?: Record<string, string>; timeoutMs?: number; port?: number; binary?: string }): Promise<ServeProcess> {
  const port = options.port ?? freePort()
  const trellis = trellisCommand(options.binary)
  const proc = Bun.spawn([...trellis, 'serve', '--port', String(port), '--data', options.dataDir], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...WEAK_PASSWORD_HASHES, ...options.env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const out = { stdout: '', stderr: '' }
  const drain = async (stream: ReadableStream<Uint8Array>, key: 'stdout' | 'stderr') => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) out[key] += decoder.decode(chunk, { stream: true })
  }
  void drain(proc.stdout, 'stdout')
  void drain(proc.stderr, 'stderr')
  const url = `http://127.0.0.1:${port}`
  const server: ServeProcess = {
    url,
    proc,
    stdout: () => out.stdout,
    stderr: () => out.stderr,
    async waitForOutput(text, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs
      while (!out.stdout.includes(text) && Date.now() < deadline && proc.exitCode === null) await Bun.sleep(20)
      return out.stdout
    },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null) proc.kill(signal)
      const code = await proc.exited
      await Bun.sleep(20) // let the pipes drain
      return code
    },
  }
  const deadline = Date.now() + (options.timeoutMs ?? 15_000)
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) break
    try {
      if ((await fetch(`${url}/healthz`)).ok) return server
    } catch {
      // not listening yet
    }
    await Bun.sleep(50)
  }
  proc.kill('SIGKILL')
  await proc.exited
  throw new Error(`trellis serve did not become healthy on ${url}\nstdout:\n${out.stdout}\nstderr:\n${out.stderr}`)
}

/**
 * Seeding and checks: `work` run at once in one write transaction of `store` (the CLI's way), its answer returned.
 * On SQLite it has committed before the call returns (the promise only carries the answer); await it on both.
 */
export async function runNow<T>(store: TestStore, work: Op<T>): Promise<T> {
  return writeNow(store, () => work)
}

/**
 * Seeding: an apply document applied at once (SQLite: `applyDocumentNow`, its transaction waiting in the driver;
 * PostgreSQL: `applyDocument`, the server's way).
 */
export async function applyNow(document: unknown, ctx: ApplyContext): Promise<ApplyReport> {
  return ctx.store.kind === 'sqlite' ? applyDocumentNow(document, ctx) : applyDocument(document, ctx)
}

/** How the API renders note, message and log times: UTC with six fraction digits (docs/design-decisions.md "Times"). */
export const ISO_UTC_MICROS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

/** A clock reading (ms) as the API renders a note, message or log time taken at it (the first in its millisecond). */
export const listed = (ms: number): string => toIsoMicros(microsFromMillis(ms))


/**
 * `npm test`: the whole suite, in two passes (docs/development.md "Development"): `bun test` on SQLite, and the files of
 * the PostgreSQL pass (`POSTGRES_PASS`) again with TRELLIS_TEST_STORE=postgres, each test env on a fresh migrated
 * PostgreSQL database in a throw-away cluster (test/support/postgres-cluster.ts). Without PostgreSQL the second pass is
 * skipped with a message, unless TRELLIS_REQUIRE_POSTGRES=1 (CI), which makes that a failure.
 *
 * With no arguments the two passes run at the same time (each mostly waits on servers, browsers and databases), all
 * but the files that time something under a load of their own (`ALONE`), which follow, one pass after the other.
 * TRELLIS_TEST_SERIAL=1, or any argument, runs one pass after the other, whole; arguments go to `bun test` in both
 * passes (the second runs those that are in the PostgreSQL pass). The last lines are the passes' sum, in bun's own
 * summary form (" N pass", " M fail"), which .ci/run reads; the exit status is non-zero when a pass failed.
 */
import { psql, postgresInstalled } from '../test/support/postgres-cluster.ts'

/**
 * The PostgreSQL pass: every test file that touches storage through a test env (`testEnv()`: the app, the services,
 * the queue, the apply, a real CLI or `serve` process given `processEnv(env)`, the browser over such a `serve`), so
 * both stores are tested alike. Its tests of SQLite itself are `sqliteOnlyTest`s, skipped here with their reason in
 * their name (docs/development.md "Development" lists them). Not here: files that need no store (pure functions, source scans,
 * the outbound client, the README, the OpenAPI document, the binary, the installer, the bench's load generator), and
 * those that test PostgreSQL or both stores side by side already in the first pass (postgres-*, scale-out,
 * shared-limits, executor-postgres, faults-postgres, twins-*, schema-parity, db-copy), and the browser files that check
 * the console's markup alone (console-pages-browser: every page's layout and axe-core; console-authoring-browser: the
 * editor's behaviour), whose server calls run on PostgreSQL in console, workflow-versions and console-browser.
 */
export const POSTGRES_PASS = [
  'activity-logs',
  'admin-logs',
  'administration',
  'answers',
  'apply',
  'auth',
  'backup',
  'callbacks',
  'cli',
  'console',
  'console-browser',
  'console-live-browser',
  'console-search',
  'db',
  'deep-json',
  'executor',
  'executor-fair-share',
  'executor-fairness',
  'faults',
  'fuzz',
  'group-commit',
  'hot-paths',
  'http',
  'idempotency',
  'invariants',
  'list-paging',
  'login-throttle',
  'lookup-cache',
  'management-rate-limit',
  'mcp',
  'member-remove',
  'notes',
  'nul-text',
  'oidc',
  'oidc-browser',
  'openapi-conformance',
  'ops',
  'overload',
  'project-access',
  'queue',
  'record-updates',
  'request-path',
  'retry',
  'route-fuzz',
  'routes',
  'run-history',
  'run-events',
  'run-events-catch-up',
  'runs-list',
  'storage-faults',
  'stream-limits',
  'tasks',
  'tokens',
  'wal-checkpoints',
  'webhook',
  'webhook-cli',
  'wire-compat',
  'workflow-versions',
].map((name) => `test/${name}.test.ts`)

/**
 * Files that time or size something under a load they make themselves (answers while the server is saturated, the WAL
 * under sustained writes, /healthz during a flood or while streams catch up on a long history, the file's growth under
 * a steady trigger loop, a group commit's time budget): run after the parallel part, one pass at a time, so the other
 * pass is not part of what they measure.
 */
export const ALONE = ['overload', 'wal-checkpoints', 'login-throttle', 'bench-load', 'deep-json', 'route-fuzz', 'executor-fairness', 'shared-limits', 'run-history', 'group-commit', 'run-events-catch-up'].map(
  (name) => `test/${name}.test.ts`,
)

interface Pass {
  label: string
  pass: number
  fail: number
  skip: number
  status: number
  /** Each failed test (or error outside tests) with the lines bun printed just before it: its error. */
  failures: string[]
  /** Passed and failed tests by file (the "(pass)"/"(fail)" lines under each file's heading). */
  byFile: Map<string, { pass: number; fail: number }>
}

/**
 * The per-test (and per-hook) time limit when the arguments give none: bun's default is 5 s, which a test that starts a
 * server, a browser or a PostgreSQL database can pass on a quiet machine and miss on a busy CI host. A hang still
 * fails, after 30 s; what a test claims about speed it asserts itself (and the bench measures).
 */
const DEFAULT_TIMEOUT_MS = 30_000

const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[A-Za-z]`, 'g')

/** The number on bun's last summary line "<n> word", else 0. */
function summaryCount(output: string, word: string): number {
  const lines = output.replace(ANSI, '').split('\n')
  const pattern = new RegExp(`^\\s*(\\d+) ${word}$`)
  for (let i = lines.length - 1; i >= 0; i--) {
    const match = pattern.exec(lines[i]!)
    if (match) return Number(match[1])
  }
  return 0
}

/** The line bun prints before a file's tests: its path and a colon (the path captured). */
const FILE_HEADING = /^(test\/.*\.test\.ts):$/

/** The failed tests of a pass's output, each with up to `context` lines of what came before it (its error). */
function failuresOf(output: string, context = 14): string[] {
  const lines = output.replace(ANSI, '').split('\n')
  const failures: string[] = []
  let file = ''
  lines.forEach((line, i) => {
    if (FILE_HEADING.test(line)) file = line
    if (!line.startsWith('(fail)') && !line.startsWith('# Unhandled error')) return
    if (failures.some((f) => f.endsWith(line))) return // bun repeats failed tests in its closing list
    let from = i
    while (from > 0 && i - from < context && !/^\((pass|fail|skip)\)/.test(lines[from - 1]!) && !FILE_HEADING.test(lines[from - 1]!)) from--
    failures.push([file, ...lines.slice(from, i + 1)].join('\n'))
  })
  return failures
}

/** The passed and failed tests of each file in a pass's output (bun's closing list of failures not counted again). */
function countsByFile(output: string): Map<string, { pass: number; fail: number }> {
  const counts = new Map<string, { pass: number; fail: number }>()
  let file = ''
  for (const line of output.replace(ANSI, '').split('\n')) {
    if (/^\s*\d+ tests? failed:$/.test(line)) break
    const heading = FILE_HEADING.exec(line)
    if (heading) file = heading[1]!
    const kind = line.startsWith('(pass)') ? 'pass' : line.startsWith('(fail)') ? 'fail' : null
    if (kind === null || file === '') continue
    const count = counts.get(file) ?? { pass: 0, fail: 0 }
    count[kind]++
    counts.set(file, count)
  }
  return counts
}

/** Copies a child's stream to ours as it comes, and keeps it for the summary. */
async function tee(stream: ReadableStream<Uint8Array>, to: NodeJS.WriteStream): Promise<string> {
  const decoder = new TextDecoder()
  let text = ''
  for await (const chunk of stream) {
    to.write(chunk)
    text += decoder.decode(chunk, { stream: true })
  }
  return text
}

/**
 * Runs `bun test args` with `env`. Its output is copied to ours as it comes, or (`quiet`, the pass running beside
 * another) kept and printed whole when it ends, so two passes' lines never mix.
 */
async function runPass(label: string, args: string[], env: Record<string, string>, quiet = false): Promise<Pass> {
  const heading = `\n==> ${label}: bun test ${args.join(' ')}`.trimEnd()
  if (!quiet) console.log(heading)
  const child = Bun.spawn([process.execPath, 'test', ...args], { env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' })
  const [out, err, status] = quiet
    ? await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
    : await Promise.all([tee(child.stdout, process.stdout), tee(child.stderr, process.stderr), child.exited])
  if (quiet) console.log(`${heading}\n${out}${err}`)
  const output = out + err
  const result = { label, pass: summaryCount(output, 'pass'), fail: summaryCount(output, 'fail'), skip: summaryCount(output, 'skip'), status, failures: failuresOf(output), byFile: countsByFile(output) }
  // A failed run never counts as "0 failed" (no test files, a crash before the summary, an error outside tests).
  if (status !== 0 && result.fail === 0) result.fail = Math.max(1, summaryCount(output, 'error'))
  return result
}

const given = process.argv.slice(2)
const timeout = given.some((arg) => arg.startsWith('--timeout')) ? [] : [`--timeout=${DEFAULT_TIMEOUT_MS}`]
const postgres = { TRELLIS_TEST_STORE: 'postgres' }
const SQLITE = 'SQLite (the whole suite)'
const POSTGRES = 'PostgreSQL (TRELLIS_TEST_STORE=postgres)'
const passes: Pass[] = []
/** Failures of the parallel part whose files then passed alone: reported, not counted. */
const besideOnly: { label: string; failures: string[] }[] = []

/**
 * A file that failed in the parallel part is run again alone, after the timing files: a test that fails only beside
 * the other pass failed for the machine's sake, and alone it gets the verdict a serial run gives. The parallel
 * verdict of those files is replaced by the new one (counted once); their first failures are still printed, under
 * "failed beside the other pass". Failures outside any file's tests (a crash) are not retried.
 */
async function againAlone(first: Pass, env: Record<string, string>): Promise<void> {
  const failed = [...first.byFile].filter(([, count]) => count.fail > 0)
  if (failed.length === 0 || failed.reduce((n, [, count]) => n + count.fail, 0) !== first.fail) return
  const again = await runPass(`${first.label}: the files that failed, again alone`, [...timeout, ...failed.map(([file]) => file)], env)
  first.pass -= failed.reduce((n, [, count]) => n + count.pass, 0)
  first.fail = 0
  first.status = 0
  if (again.fail === 0 && again.status === 0) besideOnly.push({ label: first.label, failures: first.failures })
  else again.failures.unshift(...first.failures.map((failure) => `(beside the other pass)\n${failure}`))
  first.failures = []
  passes.push(again)
}

/** Whether the PostgreSQL pass can run; if not, says why (a failure when CI requires it). */
function postgresReady(): boolean {
  if (postgresInstalled && psql !== null) return true
  const why = 'PostgreSQL is not installed (initdb, pg_ctl and psql: apt-get install postgresql)'
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') {
    console.error(`\nFAIL: the PostgreSQL pass is required (TRELLIS_REQUIRE_POSTGRES=1) but ${why}`)
    passes.push({ label: 'PostgreSQL pass', pass: 0, fail: 1, skip: 0, status: 1, failures: [why], byFile: new Map() })
  } else {
    console.warn(`\nthe PostgreSQL pass was SKIPPED: ${why}`)
  }
  return false
}

if (given.length === 0 && process.env.TRELLIS_TEST_SERIAL !== '1') {
  const everyFile = [...new Bun.Glob('test/**/*.test.ts').scanSync('.')].map((file) => file.replaceAll('\\', '/')).sort()
  const notAlone = (file: string) => !ALONE.includes(file)
  const withPostgres = postgresReady()
  // The parallel part: both passes at once, the PostgreSQL pass's output printed when it ends.
  const [sqlite, onPostgres] = await Promise.all([
    runPass(`${SQLITE}, all but the timing files`, [...timeout, ...everyFile.filter(notAlone)], {}),
    withPostgres ? runPass(`${POSTGRES}, all but the timing files`, [...timeout, ...POSTGRES_PASS.filter(notAlone)], postgres, true) : null,
  ])
  passes.push(sqlite, ...(onPostgres ? [onPostgres] : []))
  // Then the timing files, one pass at a time; then what failed in the parallel part, alone.
  passes.push(await runPass(`${SQLITE}, the timing files alone`, [...timeout, ...ALONE], {}))
  const aloneOnPostgres = ALONE.filter((file) => POSTGRES_PASS.includes(file))
  if (withPostgres && aloneOnPostgres.length > 0) passes.push(await runPass(`${POSTGRES}, the timing files alone`, [...timeout, ...aloneOnPostgres], postgres))
  await againAlone(sqlite, {})
  if (onPostgres) await againAlone(onPostgres, postgres)
} else {
  passes.push(await runPass(SQLITE, [...timeout, ...given], {}))
  const postgresFiles = given.length === 0 ? POSTGRES_PASS : given.filter((arg) => POSTGRES_PASS.some((file) => file.endsWith(arg.replace(/^\.\//, ''))))
  if (postgresFiles.length === 0) console.log('\nthe PostgreSQL pass has nothing to run: none of the given files is in it')
  else if (postgresReady()) passes.push(await runPass(POSTGRES, [...timeout, ...postgresFiles], postgres))
}

if (besideOnly.length > 0) {
  console.log('\n==> failed beside the other pass, passed alone (not counted)')
  for (const { label, failures } of besideOnly) for (const failure of failures) console.log(`--- ${label}\n${failure}`)
}

// Repeated here, after the passes' long output, so the end of a CI log says what failed and why (.ci/run prints this
// block again at its very end).
if (passes.some((p) => p.failures.length > 0)) {
  console.log('\n==> failed tests')
  for (const p of passes) for (const failure of p.failures) console.log(`--- ${p.label}\n${failure}`)
  console.log('==> end of failed tests')
}

console.log('\n==> all passes')
for (const p of passes) console.log(`${p.label}: ${p.pass} pass, ${p.fail} fail, ${p.skip} skip${p.status === 0 ? '' : ` (exit status ${p.status})`}`)
const sum = (key: 'pass' | 'fail') => passes.reduce((total, p) => total + p[key], 0)
console.log(` ${sum('pass')} pass`)
console.log(` ${sum('fail')} fail`)
process.exit(passes.some((p) => p.status !== 0 || p.fail > 0) ? 1 : 0)

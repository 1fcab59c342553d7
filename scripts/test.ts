/**
 * `npm test`: the whole suite, in two passes (docs/development.md "Development"): `bun test` on SQLite, and the files of
 * the PostgreSQL pass (`POSTGRES_PASS`) again with TRELLIS_TEST_STORE=postgres, each test env on a fresh migrated
 * PostgreSQL database in a throw-away cluster (test/support/postgres-cluster.ts). Without PostgreSQL the second pass is
 * skipped with a message, unless TRELLIS_REQUIRE_POSTGRES=1 (CI), which makes that a failure.
 *
 * With no arguments the files of both passes run as `bun test` processes, several at once (the longest each alone,
 * the others a few to a process), all but the files that time something under a load of their own (`ALONE`), which
 * follow: two at a time, a file of either store each, those that saturate the machine (`SATURATING`) last, one pass
 * after the other. PostgreSQL's test processes share one cluster and one migrated template, started here, and in the parallel
 * part reach it through PgBouncer in transaction pooling mode when it is installed (`pgbouncerReady`).
 * TRELLIS_TEST_SERIAL=1, or any argument, runs one pass after the other, whole; arguments go to `bun test` in both
 * passes (the second runs those that are in the PostgreSQL pass). The last lines are the passes' sum, in bun's own
 * summary form (" N pass", " M fail"), which .ci/run reads; the exit status is non-zero when a pass failed.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pkg from '../package.json' with { type: 'json' }
import { pgbouncerBinary } from '../test/support/pgbouncer.ts'
import { dropDatabasesOf, psql, postgresInstalled, shareClusterWithChildren } from '../test/support/postgres-cluster.ts'
import { ALONE, LONGEST_FIRST, POSTGRES_PASS, SATURATING } from './test-files.ts'

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
  /** CPU seconds of the `bun test` process and the processes it waited for (not the shared PostgreSQL server's). */
  cpuSeconds: number
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
async function runPass(label: string, args: string[], env: Record<string, string>, quiet = false, took = (_cpuSeconds: number) => ''): Promise<Pass> {
  const heading = `\n==> ${label}: bun test ${args.join(' ')}`.trimEnd()
  if (!quiet) console.log(heading)
  const started = performance.now()
  const child = Bun.spawn([process.execPath, 'test', ...args], { env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' })
  const [out, err, status] = quiet
    ? await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
    : await Promise.all([tee(child.stdout, process.stdout), tee(child.stderr, process.stderr), child.exited])
  // The CPU of the process and of every process it started and waited for (servers, CLI runs, the browser).
  const usage = child.resourceUsage()
  const cpuSeconds = usage ? Number(usage.cpuTime.total) / 1e6 : 0
  // What a process on the shared cluster left there (the cluster is in memory) goes when it ends.
  if (env.TRELLIS_TEST_POSTGRES_URL) await dropDatabasesOf(child.pid)
  if (quiet) console.log(`${heading}${took(cpuSeconds)}\n${out}${err}`)
  else console.log(`==> ${label}: ${((performance.now() - started) / 1000).toFixed(1)} s, CPU ${cpuSeconds.toFixed(1)} s`)
  const output = out + err
  const result = { label, pass: summaryCount(output, 'pass'), fail: summaryCount(output, 'fail'), skip: summaryCount(output, 'skip'), status, failures: failuresOf(output), byFile: countsByFile(output), cpuSeconds }
  // A failed run never counts as "0 failed" (no test files, a crash before the summary, an error outside tests).
  if (status !== 0 && result.fail === 0) result.fail = Math.max(1, summaryCount(output, 'error'))
  return result
}

const given = process.argv.slice(2)
const timeout = given.some((arg) => arg.startsWith('--timeout')) ? [] : [`--timeout=${DEFAULT_TIMEOUT_MS}`]
const postgres = { TRELLIS_TEST_STORE: 'postgres' }
const SQLITE = 'SQLite'
const POSTGRES = 'PostgreSQL (TRELLIS_TEST_STORE=postgres)'
const passes: Pass[] = []
/** Failures beside other files (the parallel part, the timing files) whose files then passed alone: reported, not counted. */
const besideOnly: { label: string; failures: string[] }[] = []

/**
 * A file that failed in the parallel part, or among the timing files, is run again alone, after the
 * timing files: a test that fails only beside other files failed for the machine's sake, and alone it gets the verdict a
 * serial run gives. The first verdict of those files is replaced by the new one (counted once); their first failures are still printed, under
 * "failed beside other files". Failures outside any file's tests (a crash) are not retried.
 */
async function againAlone(first: Pass, env: Record<string, string>): Promise<void> {
  const failed = [...first.byFile].filter(([, count]) => count.fail > 0)
  if (failed.length === 0 || failed.reduce((n, [, count]) => n + count.fail, 0) !== first.fail) return
  const again = await runPass(`${first.label}: the files that failed, again alone`, [...timeout, ...failed.map(([file]) => file)], env)
  first.pass -= failed.reduce((n, [, count]) => n + count.pass, 0)
  first.fail = 0
  first.status = 0
  if (again.fail === 0 && again.status === 0) besideOnly.push({ label: first.label, failures: first.failures })
  else again.failures.unshift(...first.failures.map((failure) => `(beside other files)\n${failure}`))
  first.failures = []
  passes.push(again)
}

/** Whether the PostgreSQL pass can run; if not, says why (a failure when CI requires it). */
function postgresReady(): boolean {
  if (postgresInstalled && psql !== null) return true
  const why = 'PostgreSQL is not installed (initdb, pg_ctl and psql: apt-get install postgresql)'
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') {
    console.error(`\nFAIL: the PostgreSQL pass is required (TRELLIS_REQUIRE_POSTGRES=1) but ${why}`)
    passes.push({ label: 'PostgreSQL pass', pass: 0, fail: 1, skip: 0, status: 1, failures: [why], byFile: new Map(), cpuSeconds: 0 })
  } else {
    console.warn(`\nthe PostgreSQL pass was SKIPPED: ${why}`)
  }
  return false
}

/**
 * Whether the PostgreSQL files of the parallel part reach their databases through PgBouncer in transaction pooling
 * mode (as a deployment behind a pooler does): when it is installed, unless TRELLIS_TEST_PGBOUNCER=0. CI
 * (TRELLIS_REQUIRE_POSTGRES=1) requires it. The timing files on PostgreSQL connect directly.
 */
function pgbouncerReady(): boolean {
  if (process.env.TRELLIS_TEST_PGBOUNCER === '0') return false
  if (pgbouncerBinary !== null) return true
  const why = 'PgBouncer is not installed (apt-get install pgbouncer)'
  if (process.env.TRELLIS_REQUIRE_POSTGRES === '1') {
    console.error(`\nFAIL: the PostgreSQL pass through PgBouncer is required (TRELLIS_REQUIRE_POSTGRES=1) but ${why}`)
    passes.push({ label: 'PostgreSQL through PgBouncer', pass: 0, fail: 1, skip: 0, status: 1, failures: [why], byFile: new Map(), cpuSeconds: 0 })
  } else {
    console.warn(`\nthe PostgreSQL pass connects directly: ${why}`)
  }
  return false
}

/** Processes the parallel part runs at once: TRELLIS_TEST_JOBS, else twice the cores (one file's waits leave the cores to another). */
const JOBS = Number(process.env.TRELLIS_TEST_JOBS) || Math.max(2, 2 * navigator.hardwareConcurrency)

interface Job {
  file: string
  label: string
  env: Record<string, string>
}

/** Sums the per-file results of one store into one pass (the failures of each file kept). */
function sumOf(label: string, results: Pass[]): Pass {
  const total: Pass = { label, pass: 0, fail: 0, skip: 0, status: 0, failures: [], byFile: new Map(), cpuSeconds: 0 }
  for (const r of results) {
    total.cpuSeconds += r.cpuSeconds
    total.pass += r.pass
    total.fail += r.fail
    total.skip += r.skip
    if (r.status !== 0) total.status = r.status
    total.failures.push(...r.failures)
    for (const [file, count] of r.byFile) total.byFile.set(file, count)
  }
  return total
}

/** The machine's CPU seconds so far, busy (user, nice, system, irq) and idle (idle, iowait), from /proc/stat on Linux. */
function machineCpu(): { busy: number; idle: number } | null {
  if (!existsSync('/proc/stat')) return null
  const [user, nice, system, idle, iowait, irq, softirq] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  const tick = 100 // USER_HZ
  return { busy: (user! + nice! + system! + irq! + softirq!) / tick, idle: (idle! + iowait!) / tick }
}

/** How many of the shorter files share one `bun test` process: each process loads the app and the helpers anew (≈ 0.7 s of CPU). */
const BATCH = 4

/**
 * Runs the jobs, `workers` processes at a time: the files of `longest` each as its own `bun test FILE`, first, in
 * that order, the others `BATCH` files of one store to a process. Each process's output is printed whole when it ends,
 * with its time, so that files never mix their lines; then the files that took the most CPU, under `title`.
 */
async function runPool(jobs: Job[], title: string, workers: number, longest: string[]): Promise<Map<string, Pass[]>> {
  const rank = (file: string) => (longest.includes(file) ? longest.indexOf(file) : longest.length)
  const alone = jobs.filter((job) => longest.includes(job.file)).sort((a, b) => rank(a.file) - rank(b.file))
  const queue: { label: string; env: Record<string, string>; files: string[] }[] = alone.map((job) => ({ label: job.label, env: job.env, files: [job.file] }))
  // The PostgreSQL pass's batches first: its files wait on the database and take longer than SQLite's, whose quicker
  // batches then end the pool.
  for (const label of [...new Set(jobs.map((job) => job.label))].reverse()) {
    const shorter = jobs.filter((job) => job.label === label && !longest.includes(job.file))
    for (let i = 0; i < shorter.length; i += BATCH) queue.push({ label, env: shorter[i]!.env, files: shorter.slice(i, i + BATCH).map((job) => job.file) })
  }
  const results = new Map<string, Pass[]>()
  const times: { name: string; wall: number; cpu: number }[] = []
  const machineBefore = machineCpu()
  const poolStarted = performance.now()
  const worker = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      const started = performance.now()
      const name = job.files.join(' ')
      let wall = 0
      const took = (cpu: number) => {
        wall = (performance.now() - started) / 1000
        return ` (${wall.toFixed(1)} s, CPU ${cpu.toFixed(1)} s)`
      }
      const result = await runPass(`${job.label}: ${name}`, [...timeout, ...job.files], job.env, true, took)
      times.push({ name: `${job.label === SQLITE ? 'SQLite' : 'PostgreSQL'} ${name}`, wall, cpu: result.cpuSeconds })
      results.set(job.label, [...(results.get(job.label) ?? []), result])
    }
  }
  await Promise.all(Array.from({ length: workers }, worker))
  // Where the time went: the files that used the most CPU (the parallel part is bound by the cores, not the waits).
  times.sort((a, b) => b.cpu - a.cpu)
  const cpuTotal = times.reduce((sum, t) => sum + t.cpu, 0)
  const machine = machineCpu()
  const busy = machine && machineBefore ? `, ${(machine.busy - machineBefore.busy).toFixed(0)} s busy and ${(machine.idle - machineBefore.idle).toFixed(0)} s idle on the machine's cores` : ''
  console.log(`\n==> ${title}: ${((performance.now() - poolStarted) / 1000).toFixed(0)} s; CPU ${cpuTotal.toFixed(0)} s in test processes${busy}; the most:`)
  for (const t of times.slice(0, 15)) console.log(`${t.cpu.toFixed(1).padStart(7)} s CPU ${t.wall.toFixed(1).padStart(7)} s wall  ${t.name}`)
  return results
}

/**
 * The binary of this checkout, built into a temp dir with `npm run build`'s own flags, for the test processes to start
 * `trellis` from (test/helpers.ts `trellisCommand`): hundreds of CLI and `serve` processes, each loading the source
 * would cost ten times the CPU. Its path, handed down as TRELLIS_TEST_BINARY.
 */
async function buildTestBinary(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'trellis-test-binary-'))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  const outfile = join(dir, 'trellis')
  const script = (pkg.scripts as Record<string, string>).build!
  const args = script.replace(/^bun build /, '').replace('--outfile dist/trellis', `--outfile ${outfile}`).split(/\s+/)
  console.log(`\n==> the binary the tests start: bun build … --outfile ${outfile}`)
  const built = Bun.spawnSync([process.execPath, 'build', ...args], { stdout: 'pipe', stderr: 'pipe' })
  if (built.exitCode !== 0 || !existsSync(outfile)) throw new Error(`building the test binary failed:\n${built.stderr.toString()}${built.stdout.toString()}`)
  return outfile
}

if (given.length === 0 && process.env.TRELLIS_TEST_SERIAL !== '1') {
  const everyFile = [...new Bun.Glob('test/**/*.test.ts').scanSync('.')].map((file) => file.replaceAll('\\', '/')).sort()
  const notAlone = (file: string) => !ALONE.includes(file)
  const withPostgres = postgresReady()
  // One cluster and one migrated template for every PostgreSQL test process (each makes its own databases from it).
  const binary = { TRELLIS_TEST_BINARY: await buildTestBinary() }
  const onPostgres = withPostgres ? { ...postgres, ...binary, ...shareClusterWithChildren() } : null
  const throughPgbouncer = withPostgres && pgbouncerReady()
  const pooled = onPostgres && throughPgbouncer ? { ...onPostgres, ...shareClusterWithChildren({ throughPgbouncer }) } : onPostgres
  console.log(`\n==> the parallel part: every file but the timing files, ${JOBS} processes at a time${throughPgbouncer ? '; PostgreSQL through PgBouncer (transaction pooling)' : ''}`)
  const jobs: Job[] = [
    ...everyFile.filter(notAlone).map((file) => ({ file, label: SQLITE, env: binary })),
    ...(pooled ? POSTGRES_PASS.filter(notAlone).map((file) => ({ file, label: POSTGRES, env: pooled })) : []),
  ]
  const byStore = await runPool(jobs, 'the parallel part', JOBS, LONGEST_FIRST)
  const sqlite = sumOf(SQLITE, byStore.get(SQLITE) ?? [])
  const pgPart = onPostgres ? sumOf(POSTGRES, byStore.get(POSTGRES) ?? []) : null
  passes.push(sqlite, ...(pgPart ? [pgPart] : []))
  // Then the timing files, two at a time (a file of either store), each its own process, the longest first; then those
  // that saturate the machine, one store after the other; then what failed beside other files (the parallel part's,
  // the timing files'), alone.
  const timingFiles = ALONE.filter((file) => !SATURATING.includes(file))
  const timingJobs: Job[] = [
    ...(onPostgres ? timingFiles.filter((file) => POSTGRES_PASS.includes(file)).map((file) => ({ file, label: POSTGRES, env: onPostgres })) : []),
    ...timingFiles.map((file) => ({ file, label: SQLITE, env: binary })),
  ]
  const timingByStore = await runPool(timingJobs, 'the timing files', 2, timingFiles)
  const sqliteTiming = sumOf(`${SQLITE}, the timing files`, timingByStore.get(SQLITE) ?? [])
  const pgTiming = onPostgres ? sumOf(`${POSTGRES}, the timing files`, timingByStore.get(POSTGRES) ?? []) : null
  passes.push(sqliteTiming, ...(pgTiming ? [pgTiming] : []))
  passes.push(await runPass(`${SQLITE}, the saturating files alone`, [...timeout, ...SATURATING], binary))
  const saturatingOnPostgres = SATURATING.filter((file) => POSTGRES_PASS.includes(file))
  if (onPostgres && saturatingOnPostgres.length > 0) passes.push(await runPass(`${POSTGRES}, the saturating files alone`, [...timeout, ...saturatingOnPostgres], onPostgres))
  await againAlone(sqlite, binary)
  if (pgPart && pooled) await againAlone(pgPart, pooled)
  await againAlone(sqliteTiming, binary)
  if (pgTiming && onPostgres) await againAlone(pgTiming, onPostgres)
} else {
  passes.push(await runPass(SQLITE, [...timeout, ...given], {}))
  const postgresFiles = given.length === 0 ? POSTGRES_PASS : given.filter((arg) => POSTGRES_PASS.some((file) => file.endsWith(arg.replace(/^\.\//, ''))))
  if (postgresFiles.length === 0) console.log('\nthe PostgreSQL pass has nothing to run: none of the given files is in it')
  else if (postgresReady()) passes.push(await runPass(POSTGRES, [...timeout, ...postgresFiles], postgres))
}

if (besideOnly.length > 0) {
  console.log('\n==> failed beside other files, passed alone (not counted)')
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

/**
 * `npm run soak`: the crash harness. The compiled binary under a mixed load, `kill -9`ed at random
 * moments and restarted, cycle after cycle — one instance on a SQLite data directory, three on one PostgreSQL
 * database — then every acknowledged write checked against the store, nothing lost, nothing doubled, the invariants
 * clean. One summary line per store; the exit status is non-zero when anything was lost, doubled or violated.
 *
 *   npm run soak -- [--cycles N] [--store sqlite|postgres|both] [--binary PATH] [--seed S] [--workers W] [--fuzz-runs N]
 *
 * Without --binary it builds one into a temp dir with the build script's own command line (as test/binary.test.ts).
 * The seed fixes the kill moments, the instance killed and the choices of the load (print it, pass it again).
 * Then the property-based fuzz (test/fuzz.test.ts) with `--fuzz-runs` cases per route family (default 2,000; `npm
 * test` runs 200) on each store, seeded by the same seed; `--fuzz-runs 0` leaves it out (`.ci/run`: `npm test` ran it).
 */
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import pkg from '../../package.json' with { type: 'json' }
import { repoRoot, tempDir, until } from '../helpers.ts'
import { type Deployment, deploy, killEveryInstance, type StoreKind } from './deployment.ts'
import { seededRandom } from './fixture.ts'
import { driveLoad, newLedger } from './load.ts'
import { activeRuns, twoActiveRuns, verify } from './verify.ts'

const { values: flags } = parseArgs({
  options: {
    cycles: { type: 'string', default: '200' },
    store: { type: 'string', default: 'both' },
    binary: { type: 'string' },
    seed: { type: 'string' },
    workers: { type: 'string', default: '4' },
    'fuzz-runs': { type: 'string', default: '2000' },
  },
})
const cycles = Number(flags.cycles)
const workers = Number(flags.workers)
const seed = flags.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(flags.seed)
if (!Number.isInteger(cycles) || cycles < 1) throw new Error(`--cycles must be a whole number above 0, not ${flags.cycles}`)
if (!Number.isInteger(workers) || workers < 1) throw new Error(`--workers must be a whole number above 0, not ${flags.workers}`)
const fuzzRuns = Number(flags['fuzz-runs'])
if (!Number.isInteger(fuzzRuns) || fuzzRuns < 0) throw new Error(`--fuzz-runs must be a whole number, not ${flags['fuzz-runs']}`)
if (!Number.isInteger(seed)) throw new Error(`--seed must be a whole number, not ${flags.seed}`)
const stores: StoreKind[] = flags.store === 'both' ? ['sqlite', 'postgres'] : flags.store === 'sqlite' || flags.store === 'postgres' ? [flags.store] : []
if (stores.length === 0) throw new Error(`--store must be sqlite, postgres or both, not ${flags.store}`)

/** How long the load runs before each kill: random in this range (ms). */
const LOAD_BEFORE_KILL_MS = [300, 2_000] as const
/**
 * Runs still active after the last restart must all end within this. SQLite: under the 30 s lease its instance keeps,
 * so the runs the killed process held must be taken up at start, not when their lease runs out. PostgreSQL: a dead
 * instance's runs wait for their 3 s lease.
 */
const SETTLE_MS: Record<StoreKind, number> = { sqlite: 25_000, postgres: 60_000 }

console.log(`soak: seed ${seed}, ${cycles} cycles per store, stores ${stores.join(', ')}, ${workers} load workers`)

async function buildBinary(): Promise<{ path: string; cleanup(): void }> {
  const dir = tempDir('trellis-soak-binary-')
  const path = join(dir.path, 'trellis')
  const command = pkg.scripts.build.replace('dist/trellis', path).split(' ')
  const started = performance.now()
  const built = Bun.spawnSync([process.execPath, ...command.slice(1)], { cwd: repoRoot, stdout: 'pipe', stderr: 'pipe' })
  if (built.exitCode !== 0) throw new Error(`building the binary failed:\n${built.stderr.toString()}`)
  console.log(`soak: built ${path} in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  return { path, cleanup: dir.cleanup }
}

async function soak(kind: StoreKind, binary: string, storeSeed: number): Promise<boolean> {
  const started = performance.now()
  const random = seededRandom(storeSeed)
  let deployment: Deployment
  try {
    deployment = await deploy(kind, binary)
  } catch (error) {
    console.log(`${kind}: FAILED to deploy: ${(error as Error).stack ?? String(error)}`)
    return false
  }
  try {
    const ledger = newLedger(deployment.memberIds)
    const samples = { taken: 0, twoActive: [] as string[] }
    const stop = new AbortController()
    const load = driveLoad(deployment, ledger, seededRandom(storeSeed + 1), workers, stop.signal)
    // Never two active runs for one (workflow, record): sampled on the store all through the load.
    const sampler = (async () => {
      while (!stop.signal.aborted) {
        for (const pair of twoActiveRuns(deployment)) samples.twoActive.push(JSON.stringify(pair))
        samples.taken++
        await Bun.sleep(250)
      }
    })()

    for (let cycle = 1; cycle <= cycles; cycle++) {
      await Bun.sleep(random.between(...LOAD_BEFORE_KILL_MS))
      const victim = random.pick(deployment.instances)
      await deployment.killAndRestart(victim)
      if (cycle % 10 === 0 || cycle === cycles) console.log(`${kind}: cycle ${cycle}/${cycles}, ${ledger.requests} requests, ${ledger.acknowledged} acknowledged`)
    }
    await Bun.sleep(random.between(...LOAD_BEFORE_KILL_MS))
    stop.abort()
    await Promise.all([load, sampler])

    // Every instance killed once more and restarted: what follows reads what survived, through fresh processes.
    for (const instance of deployment.instances) await deployment.killAndRestart(instance)
    // Past the wait, the checks name each run that has not ended.
    await until('every acknowledged run to end', () => activeRuns(deployment) === 0, SETTLE_MS[kind], 200).catch(() => {})
    const findings = await verify(deployment, ledger)
    findings.violated.push(...samples.twoActive.map((pair) => `two active runs sampled during the load: ${pair}`))

    const seconds = ((performance.now() - started) / 1000).toFixed(1)
    const statuses = Object.entries(ledger.statuses).map(([status, n]) => `${status === '0' ? 'no answer' : status} ${n}`).join(', ')
    console.log(`${kind}: ${seconds} s; answers: ${statuses}; runs by status: ${JSON.stringify(findings.runsByStatus)}; ${samples.taken} samples of active runs`)
    for (const line of [...findings.lost.map((l) => `LOST ${l}`), ...findings.doubled.map((d) => `DOUBLED ${d}`), ...findings.violated.map((v) => `VIOLATED ${v}`)].slice(0, 50)) {
      console.log(`${kind}: ${line}`)
    }
    console.log(
      `${kind}: cycles ${cycles}, requests ${ledger.requests}, acknowledged writes ${ledger.acknowledged}, runs ${ledger.runs.size}, lost ${findings.lost.length}, doubled ${findings.doubled.length}` +
        (findings.violated.length > 0 ? `, violated ${findings.violated.length}` : ''),
    )
    return findings.lost.length === 0 && findings.doubled.length === 0 && findings.violated.length === 0
  } catch (error) {
    console.log(`${kind}: FAILED to run: ${(error as Error).stack ?? String(error)}`)
    for (const instance of deployment.instances) {
      const output = instance.process?.stderr() ?? ''
      if (output) console.log(`${kind}: instance ${instance.index} stderr:\n${output.slice(-3000)}`)
    }
    return false
  } finally {
    await deployment.cleanup()
  }
}

/** test/fuzz.test.ts on the store with `fuzzRuns` cases per route family and the soak's seed; its output passes through. */
function fuzz(kind: StoreKind): boolean {
  console.log(`${kind}: fuzz, ${fuzzRuns} cases per route family, seed ${seed}`)
  const env = { ...process.env, TRELLIS_FUZZ_RUNS: String(fuzzRuns), TRELLIS_FUZZ_SEED: String(seed), ...(kind === 'postgres' ? { TRELLIS_TEST_STORE: 'postgres' } : {}) }
  const run = Bun.spawnSync([process.execPath, 'test', '--timeout', '3600000', 'test/fuzz.test.ts'], { cwd: repoRoot, env, stdout: 'inherit', stderr: 'inherit' })
  console.log(`${kind}: fuzz ${run.exitCode === 0 ? 'passed' : 'FAILED'}`)
  return run.exitCode === 0
}

// Interrupted: no `serve` of ours outlives the soak (the PostgreSQL cluster has its own watchdog).
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killEveryInstance()
    process.exit(130)
  })
}

const built = flags.binary === undefined ? await buildBinary() : null
const binary = flags.binary ?? built!.path
let ok = true
for (const [i, kind] of stores.entries()) ok = (await soak(kind, binary, seed + i * 1000)) && ok
built?.cleanup()
for (const kind of fuzzRuns > 0 ? stores : []) ok = fuzz(kind) && ok
console.log(`soak: seed ${seed}: ${ok ? 'passed' : 'FAILED'}`)
process.exit(ok ? 0 : 1)

/**
 * `npm run bench:inprocess` (`N=1280` requests per scenario by default): the server's CPU per request of the hot
 * scenarios, in process — `app.handle` over the Acme fixture on a SQLite file with 400 notes, no network and no load
 * generator — one request at a time and 64 at once. Each figure is the cheapest of 20 batches (noise on a shared
 * machine only ever adds time). It prints one JSON line. `ONLY=webhook` keeps the scenarios whose name holds it.
 *
 * `npm run bench:inprocess -- --vs DIR` compares this checkout with another one (DIR: a worktree of an older commit,
 * e.g. `git worktree add --detach ../before <commit>`) in the same process: both set up alike, on their own files,
 * their batches taken in turn (`R` rounds of `N/20` requests each), so the machine's drift falls on both alike. It
 * prints, per scenario, each side's cheapest, lower-quartile and median batch and this checkout ÷ the other
 * Asserts nothing.
 */
import { resolve } from 'node:path'
import { RAISED_RATE_LIMITS } from './procs.ts'

/** The Acme fixture with 400 notes on a SQLite file, served by `root`'s app: the scenarios' requests and the app. */
async function setUp(root: string, tag: string) {
  const { bearer, request, sqliteTestEnv, testApp } = await import(`${root}/test/helpers.ts`)
  const { acmeDocument, applyAcme, reportHook, tokenFor } = await import(`${root}/test/support/acme.ts`)
  const { systemClock } = await import(`${root}/src/lib/clock.ts`)
  const env = sqliteTestEnv({ ...RAISED_RATE_LIMITS, TRELLIS_EXECUTOR_CONCURRENCY: '0' })
  const document = acmeDocument()
  for (const project of (document as { projects: { workflows?: { webhook?: { ratePerMinute?: number } }[] }[] }).projects) {
    for (const workflow of project.workflows ?? []) if (workflow.webhook) delete workflow.webhook.ratePerMinute
  }
  const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  const admin = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
  const bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
  const app = testApp(env, { clock: systemClock }) as { handle(request: Request): Promise<Response> }
  const notesPath = '/v1/project/Acme/environment/production/notes'
  for (let i = 0; i < 400; i++) {
    const r = await app.handle(request(notesPath, { method: 'POST', headers: bearer(admin), json: { recordId: `r-${i % 50}`, collectionName: 'orders', teamName: 'Support', title: `note ${i}`, content: `<p>${i}</p>` } }))
    if (r.status !== 201) throw new Error(`seed ${r.status} ${await r.text()}`)
  }
  const hook = reportHook(report, 'Refund order')
  const trigger = (recordId: string) => request(hook, { method: 'POST', headers: bearer(bob), json: { record_id: recordId } })
  const started = await app.handle(trigger('busy')) // its run stays queued (no executor): the 409's record
  if (started.status !== 202) throw new Error(`seed trigger ${started.status}`)
  let unique = 0
  const scenarios: Record<string, { make: () => Request; expect: number }> = {
    'notes limit=10': { make: () => request(`${notesPath}?limit=10`, { headers: bearer(admin) }), expect: 200 },
    'notes limit=100': { make: () => request(`${notesPath}?limit=100`, { headers: bearer(admin) }), expect: 200 },
    'notes recordId=': { make: () => request(`${notesPath}?limit=10&recordId=r-7`, { headers: bearer(admin) }), expect: 200 },
    'activity limit=100': { make: () => request('/v1/project/Acme/environment/production/activity-logs?limit=100', { headers: bearer(admin) }), expect: 200 },
    'webhook 202': { make: () => trigger(`u-${tag}-${unique++}`), expect: 202 },
    'webhook 409': { make: () => trigger('busy'), expect: 409 },
  }
  return { app, scenarios, cleanup: () => env.cleanup() }
}
type Side = Awaited<ReturnType<typeof setUp>>

/** The server CPU µs per request of `count` requests of the scenario, `width` at a time. */
async function cpuPerRequest(side: Side, name: string, width: number, count: number): Promise<number> {
  const s = side.scenarios[name]!
  const before = process.cpuUsage()
  for (let done = 0; done < count; done += width) {
    const answers = await Promise.all(Array.from({ length: Math.min(width, count - done) }, () => side.app.handle(s.make())))
    for (const a of answers) {
      if (a.status !== s.expect) throw new Error(`${name}: ${a.status} ${await a.text()}`)
      await a.arrayBuffer()
    }
  }
  const used = process.cpuUsage(before)
  return (used.user + used.system) / count
}

const N = Number(process.env.N ?? 1280)
const only = process.env.ONLY
const vsAt = process.argv.indexOf('--vs')
const vs = vsAt > 0 ? resolve(process.argv[vsAt + 1] ?? '') : undefined
const here = await setUp(resolve(import.meta.dir, '..'), 'here')
const other = vs === undefined ? undefined : await setUp(vs, 'other')
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))]!
const out: Record<string, unknown> = {}
for (const name of Object.keys(here.scenarios)) {
  if (only && !name.includes(only)) continue
  for (const width of [1, 64]) {
    const batch = N / 20
    // Warm both, then the batches: this checkout's alone, or both in turn (alternating which goes first).
    for (const side of [here, other]) if (side) { await cpuPerRequest(side, name, width, 200); Bun.gc(true) }
    const mine: number[] = []
    const theirs: number[] = []
    for (let round = 0; round < Number(process.env.R ?? 20); round++) {
      if (other && round % 2 === 1) theirs.push(await cpuPerRequest(other, name, width, batch))
      mine.push(await cpuPerRequest(here, name, width, batch))
      if (other && round % 2 === 0) theirs.push(await cpuPerRequest(other, name, width, batch))
    }
    const key = `${name} ×${width}`
    if (!other) {
      out[key] = Math.round(quantile(mine, 0)) // the cheapest batch: noise on a shared machine only ever adds time
      continue
    }
    const figures = (xs: number[]) => ({ min: Math.round(quantile(xs, 0)), p25: Math.round(quantile(xs, 0.25)), median: Math.round(quantile(xs, 0.5)) })
    const [a, b] = [figures(mine), figures(theirs)]
    out[key] = { here: a, other: b, ratio: { min: +(a.min / b.min).toFixed(3), p25: +(a.p25 / b.p25).toFixed(3), median: +(a.median / b.median).toFixed(3) } }
    console.log(`${key}: here ${a.min}/${a.p25}/${a.median}  other ${b.min}/${b.p25}/${b.median}  here÷other ${(a.min / b.min).toFixed(3)}/${(a.p25 / b.p25).toFixed(3)}/${(a.median / b.median).toFixed(3)} (min/p25/median µs)`)
  }
}
console.log(JSON.stringify(out))
here.cleanup()
other?.cleanup()
process.exit(0)

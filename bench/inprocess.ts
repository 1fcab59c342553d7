/**
 * `npm run bench:inprocess` (`N=1280` requests per scenario by default): the server's CPU per request of the hot
 * scenarios, in process — `app.handle` over the Acme fixture on a SQLite file with 400 notes, no network and no load
 * generator — one request at a time and 64 at once. Each figure is the cheapest of 20 batches (noise on a shared
 * machine only ever adds time). It prints one JSON line, so two checkouts can be compared run by run, in turn
 * (issue 25: before/after of one query per operation; README "Performance"). Asserts nothing.
 */
import { bearer, request, sqliteTestEnv, testApp } from '../test/helpers.ts'
import { acmeDocument, applyAcme, reportHook, tokenFor } from '../test/support/acme.ts'
import { systemClock } from '../src/lib/clock.ts'

const RAISED = '1000000000'
const env = sqliteTestEnv({ TRELLIS_API_RATE_PER_MIN: RAISED, TRELLIS_API_RATE_PER_HOUR: RAISED, TRELLIS_API_RATE_PER_DAY: RAISED, TRELLIS_WEBHOOK_RATE_PER_MIN: RAISED, TRELLIS_EXECUTOR_CONCURRENCY: '0' })
const document = acmeDocument()
for (const project of (document as unknown as { projects: { workflows?: { webhook?: { ratePerMinute?: number } }[] }[] }).projects) {
  for (const workflow of project.workflows ?? []) if (workflow.webhook) delete workflow.webhook.ratePerMinute
}
const report = await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
const admin = (await tokenFor(env.store, systemClock, 'alice', ['all'])).value
const bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
const app = testApp(env, { clock: systemClock })
const notesPath = '/v1/project/Acme/environment/production/notes'
for (let i = 0; i < 400; i++) {
  const r = await app.handle(request(notesPath, { method: 'POST', headers: bearer(admin), json: { recordId: `r-${i % 50}`, collectionName: 'orders', teamName: 'Support', title: `note ${i}`, content: `<p>${i}</p>` } }))
  if (r.status !== 201) throw new Error(`seed ${r.status} ${await r.text()}`)
}
const hook = reportHook(report, 'Refund order')
let unique = 0
const scenarios: Record<string, { make: () => Request; expect: number }> = {
  'notes limit=10': { make: () => request(`${notesPath}?limit=10`, { headers: bearer(admin) }), expect: 200 },
  'notes limit=100': { make: () => request(`${notesPath}?limit=100`, { headers: bearer(admin) }), expect: 200 },
  'notes recordId=': { make: () => request(`${notesPath}?limit=10&recordId=r-7`, { headers: bearer(admin) }), expect: 200 },
  'activity limit=100': { make: () => request('/v1/project/Acme/environment/production/activity-logs?limit=100', { headers: bearer(admin) }), expect: 200 },
  'webhook 202': { make: () => request(hook, { method: 'POST', headers: bearer(bob), json: { record_id: `u-${unique++}` } }), expect: 202 },
  'webhook 409': { make: () => request(hook, { method: 'POST', headers: bearer(bob), json: { record_id: 'u-0' } }), expect: 409 },
}
const N = Number(process.env.N ?? 1280)
const out: Record<string, number> = {}
const only = process.env.ONLY // e.g. ONLY=webhook: the scenarios whose name contains it
for (const [name, s] of Object.entries(scenarios)) {
  if (only && !name.includes(only)) continue
  for (const width of [1, 64]) {
    const run = async (count: number) => {
      for (let done = 0; done < count; done += width) {
        const answers = await Promise.all(Array.from({ length: Math.min(width, count - done) }, () => app.handle(s.make())))
        for (const a of answers) {
          if (a.status !== s.expect) throw new Error(`${name}: ${a.status} ${await a.text()}`)
          await a.arrayBuffer()
        }
      }
    }
    await run(200)
    Bun.gc(true)
    // The cheapest of several batches: noise on a shared machine only ever adds time.
    let best = Infinity
    for (let batch = 0; batch < 20; batch++) {
      const before = process.cpuUsage()
      await run(N / 20)
      const used = process.cpuUsage(before)
      best = Math.min(best, (used.user + used.system) / (N / 20))
    }
    out[`${name} ×${width}`] = Math.round(best)
  }
}
console.log(JSON.stringify(out))
env.cleanup()
process.exit(0)

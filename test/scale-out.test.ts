/**
 * Three real `trellis serve` processes on one PostgreSQL behave as one Trellis — clients spread
 * over them get the same answers, one active run per record, one rate budget, a revocation seen by all at once, and
 * nothing lost or doubled when one instance is killed with SIGKILL mid-run.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { bearer, type ServeProcess, until } from './helpers.ts'
import { acmeDocument, acmeProject } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'
import { hangingRemote } from './support/hanging-remote.ts'
import { type Instances, startInstances } from './support/instances.ts'
import { freshDatabase } from './support/postgres-cluster.ts'

// The remote the `http` step calls: the first call of each run hangs until its caller dies or gives up.
const remote = hangingRemote()
const hits = remote.hits
afterAll(() => remote.stop())

const CRASH_RUNS = 8

function workflow(name: string, ratePerMinute: number, steps: Record<string, unknown>[]) {
  return { name, environment: 'production', team: 'Support', collection: 'orders', webhook: { enabled: true, ratePerMinute }, steps }
}

describe.skipIf(!postgresOrSkip('scale-out'))('three instances on one PostgreSQL behave as one Trellis', () => {
  let sql: SQL
  let set: Instances
  let instances: ServeProcess[]
  let hooks: Record<string, string>
  let trigger: string
  let admin: string

  const post = (instance: ServeProcess, hook: string, recordId: string, token = trigger) =>
    fetch(`${instance.url}${hook}`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ record_id: recordId }) })

  beforeAll(async () => {
    const url = await freshDatabase()
    sql = new SQL({ url, max: 2 })
    const document = acmeDocument()
    acmeProject(document).workflows!.push(
      workflow('Hold', 100_000, [{ type: 'wait', name: 'hold', seconds: 600 }]),
      workflow('Budget', 60, [{ type: 'update', name: 'mark', set: { budget: 'seen' } }]),
      workflow('Crashy', 100_000, [
        { type: 'load' },
        { type: 'update', name: 'first', set: { trail: '{{record.trail}}1' } },
        { type: 'http', name: 'call', method: 'POST', url: `${remote.url}/hang`, body: { order: '{{record.id}}' }, retries: 1, timeoutSeconds: 4 },
        { type: 'update', name: 'second', set: { trail: '{{record.trail}}2' } },
        { type: 'note', name: 'note', title: 'Crash-safe', content: '<p>trail {{record.trail}}</p>' },
      ]),
    )
    const records = acmeProject(document).records!
    for (let i = 1; i <= CRASH_RUNS; i++) records.push({ environment: 'production', collection: 'orders', id: `crash_${i}`, data: { trail: '' } })
    set = await startInstances({ url, document })
    ;({ instances, hooks } = set)
    trigger = await set.token('bob@example.com', 'erp', 'workflows:trigger')
    admin = await set.token('alice@example.com', 'admin', 'all')
  }, 90_000)

  afterAll(async () => {
    await set?.close()
    await sql?.close()
  })

  test('every instance answers alike (the same notes page through each)', async () => {
    const pages = await Promise.all(
      instances.map(async (instance) => {
        const response = await fetch(`${instance.url}/v1/project/Acme/environment/production/notes?limit=50`, { headers: bearer(admin) })
        return { status: response.status, body: await response.text() }
      }),
    )
    expect(pages[0]!.status).toBe(200)
    expect(pages[1]).toEqual(pages[0]!)
    expect(pages[2]).toEqual(pages[0]!)
  })

  test('500 concurrent triggers on one record spread over the three: exactly one 202, 499 × 409 naming that run', async () => {
    const responses = await Promise.all(Array.from({ length: 500 }, (_, i) => post(instances[i % 3]!, hooks.Hold!, 'ord_1001')))
    const bodies = await Promise.all(responses.map(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> })))
    const accepted = bodies.filter((b) => b.status === 202)
    expect(accepted).toHaveLength(1)
    const runId = accepted[0]!.body.runId as string
    const refused = bodies.filter((b) => b.status === 409)
    expect(refused).toHaveLength(499)
    for (const { body } of refused) expect(JSON.stringify(body)).toContain(runId)
    const active = (await sql`SELECT count(*)::int AS n FROM runs WHERE record_id = 'ord_1001' AND status IN ('queued', 'running', 'waiting')`) as { n: number }[]
    expect(active[0]!.n).toBe(1)
  }, 60_000)

  test('the per-webhook rate is one budget: 90 calls over the three instances, 60 accepted (plus what the bucket refilled meanwhile)', async () => {
    const started = performance.now()
    const responses = await Promise.all(Array.from({ length: 90 }, (_, i) => post(instances[i % 3]!, hooks.Budget!, `budget_${i}`)))
    // DESIGN §8's token bucket refills 60/min, one a second: a burst that took s seconds may take 60 + ⌊s⌋. Three
    // budgets, one per instance, would have taken all 90.
    const refilled = Math.floor((performance.now() - started) / 1000)
    const accepted = responses.filter((r) => r.status === 202).length
    expect(accepted).toBeGreaterThanOrEqual(60)
    expect(accepted).toBeLessThanOrEqual(60 + refilled)
    expect(responses.filter((r) => r.status === 429)).toHaveLength(90 - accepted)
  }, 60_000)

  test('a token revoked through one instance is refused by the other two on their next request', async () => {
    // The public notes API answers project admins' tokens (DESIGN §6): alice's.
    const reader = await set.token('alice@example.com', 'reader', 'notes:read')
    const notes = (instance: ServeProcess) => fetch(`${instance.url}/v1/project/Acme/environment/production/notes`, { headers: bearer(reader) })
    for (const instance of instances) expect((await notes(instance)).status).toBe(200)
    const list = (await (await fetch(`${instances[0]!.url}/v1/project/Acme/api-tokens`, { headers: bearer(admin) })).json()) as { data: { id: number; name: string }[] }
    const id = list.data.find((t) => t.name === 'reader')!.id
    expect((await fetch(`${instances[0]!.url}/v1/project/Acme/api-tokens/${id}`, { method: 'DELETE', headers: bearer(admin) })).status).toBe(204)
    expect((await notes(instances[1]!)).status).toBe(401)
    expect((await notes(instances[2]!)).status).toBe(401)
    expect((await notes(instances[0]!)).status).toBe(401)
  }, 30_000)

  test('kill -9 of an instance mid-run: the others finish its runs, each data step applied exactly once', async () => {
    const runIds: string[] = []
    for (let i = 1; i <= CRASH_RUNS; i++) {
      const response = await post(instances[i % 3]!, hooks.Crashy!, `crash_${i}`)
      expect(response.status).toBe(202)
      runIds.push(((await response.json()) as { runId: string }).runId)
    }
    // Every run is inside its http step (first call hanging): find an instance holding some of them, and kill it.
    await until('every run to reach its http call', () => runIds.every((id) => hits.some((h) => h.runId === id && h.path === '/hang')), 20_000, 20)
    const held = (await sql`SELECT id, lease_owner FROM runs WHERE id IN ${sql(runIds)} AND status = 'running'`) as { id: string; lease_owner: string }[]
    const victimOwner = held.map((r) => r.lease_owner).find((owner) => set.owners.has(owner))
    expect(victimOwner).toBeDefined()
    const victim = set.owners.get(victimOwner!)!
    const victimRuns = held.filter((r) => r.lease_owner === victimOwner).map((r) => r.id)
    expect(victimRuns.length).toBeGreaterThan(0)
    expect(await set.kill(victim)).not.toBe(0)

    await until(
      'every run to finish',
      async () => {
        const rows = (await sql`SELECT status FROM runs WHERE id IN ${sql(runIds)}`) as { status: string }[]
        return rows.every((r) => r.status === 'succeeded' || r.status === 'failed')
      },
      30_000,
      100,
    )
    const runs = (await sql`SELECT id, status, lease_owner FROM runs WHERE id IN ${sql(runIds)}`) as { id: string; status: string; lease_owner: string | null }[]
    expect(runs.map((r) => r.status)).toEqual(runIds.map(() => 'succeeded'))
    const steps = (await sql`SELECT run_id, name, count(*)::int AS n FROM run_steps WHERE run_id IN ${sql(runIds)} GROUP BY run_id, name`) as { n: number }[]
    expect(steps).toHaveLength(CRASH_RUNS * 5)
    expect(steps.every((s) => s.n === 1)).toBe(true)
    for (let i = 1; i <= CRASH_RUNS; i++) {
      const [record] = (await sql`SELECT data FROM records WHERE record_key = ${`crash_${i}`}`) as { data: string }[]
      // Each update once: '1' then '2', never '11' or '122'.
      expect(JSON.parse(record!.data)).toMatchObject({ trail: '12' })
    }
    const notes = (await sql`SELECT count(*)::int AS n FROM notes WHERE title = 'Crash-safe'`) as { n: number }[]
    expect(notes[0]!.n).toBe(CRASH_RUNS)
    const updates = (await sql`SELECT count(*)::int AS n FROM activity_logs WHERE action = 'update' AND run_id IN ${sql(runIds)}`) as { n: number }[]
    expect(updates[0]!.n).toBe(CRASH_RUNS * 2)
    // The victim's runs were taken over by a surviving instance (their http call made again: at-least-once).
    for (const id of victimRuns) expect(hits.filter((h) => h.runId === id && h.path === '/hang').length).toBeGreaterThanOrEqual(2)
  }, 60_000)
})

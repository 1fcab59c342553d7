/**
 * The hash chain with many writers (docs/audit.md): three real `trellis serve` processes on one PostgreSQL write one
 * environment's activity log (webhook triggers and notes, at once) and one project's admin log (tokens made and
 * revoked) as fast as the clients send: each chain is gapless, one entry per position, its ids rising with its
 * positions, and `trellis audit verify` finds it whole. On SQLite a data directory has one `serve` (its one writer:
 * test/audit-chain.test.ts's group commit).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { awaitListed } from '../src/db/postgres/list-watermark.ts'
import { bearer, type ServeProcess } from './helpers.ts'
import { acmeDocument, acmeProject } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'
import { type Instances, startInstances } from './support/instances.ts'
import { freshDatabase } from './support/postgres-cluster.ts'

const TRIGGERS = 300
const NOTES = 150
const TOKENS = 60

describe.skipIf(!postgresOrSkip('audit-chain-scale'))('three instances write one chain at once', () => {
  let sql: SQL
  let set: Instances
  let instances: ServeProcess[]
  let hook: string
  let trigger: string
  let admin: string

  beforeAll(async () => {
    const url = await freshDatabase()
    sql = new SQL({ url, max: 2 })
    const document = acmeDocument()
    acmeProject(document).workflows!.push({
      name: 'Hold', environment: 'production', team: 'Support', collection: 'orders', webhook: { enabled: true, ratePerMinute: 100_000 },
      steps: [{ type: 'wait', name: 'hold', seconds: 600 }],
    })
    set = await startInstances({ url, document, env: { TRELLIS_LIVE_TOKENS_PER_USER: '1000' } })
    ;({ instances } = set)
    hook = set.hooks.Hold!
    trigger = await set.token('bob@example.com', 'erp', 'workflows:trigger')
    admin = await set.token('alice@example.com', 'admin', 'all')
  }, 90_000)

  afterAll(async () => {
    await set?.close()
    await sql?.close()
  })

  test('triggers, notes and token changes spread over the three: both chains gapless, and verified', async () => {
    const json = { 'content-type': 'application/json' }
    const triggers = Array.from({ length: TRIGGERS }, (_, i) =>
      fetch(`${instances[i % 3]!.url}${hook}`, { method: 'POST', headers: { ...bearer(trigger), ...json }, body: JSON.stringify({ record_id: `chain_${i}` }) }).then((r) => r.status),
    )
    const notes = Array.from({ length: NOTES }, (_, i) =>
      fetch(`${instances[(i + 1) % 3]!.url}/v1/project/Acme/environment/production/notes`, {
        method: 'POST',
        headers: { ...bearer(admin), ...json },
        body: JSON.stringify({ recordId: `ord_${1001 + (i % 3)}`, collectionName: 'orders', teamName: 'Support', title: `n${i}`, content: '<p>x</p>' }),
      }).then((r) => r.status),
    )
    // Each token made through one instance and revoked through another: two admin entries, written by two writers.
    const tokens = Array.from({ length: TOKENS }, async (_, i) => {
      const made = await fetch(`${instances[i % 3]!.url}/v1/account/tokens`, { method: 'POST', headers: { ...bearer(admin), ...json }, body: JSON.stringify({ name: `t${i}`, projectName: 'Acme' }) })
      const { id } = (await made.json()) as { id: number }
      const revoked = await fetch(`${instances[(i + 2) % 3]!.url}/v1/account/tokens/${id}`, { method: 'DELETE', headers: bearer(admin) })
      return [made.status, revoked.status]
    })
    expect(new Set(await Promise.all(triggers))).toEqual(new Set([202]))
    expect(new Set(await Promise.all(notes))).toEqual(new Set([201]))
    expect(new Set((await Promise.all(tokens)).flat())).toEqual(new Set([201, 204]))

    // The activity entries are chained by the lists' pass once their writers' transactions have all ended.
    expect(await awaitListed(sql, 'activity_logs', 10_000)).toBe(true)
    const activity = (await sql`SELECT l.id::float8 AS id, l.chain_position::float8 AS p FROM activity_logs l JOIN environments e ON e.id = l.environment_id
      WHERE e.name = 'production' ORDER BY l.chain_position`) as { id: number; p: number }[]
    const adminLog = (await sql`SELECT l.id::float8 AS id, l.chain_position::float8 AS p FROM admin_logs l JOIN projects p ON p.id = l.project_id
      WHERE p.name = 'Acme' ORDER BY l.chain_position`) as { id: number; p: number }[]
    for (const chain of [activity, adminLog]) {
      expect(chain.every((row, i) => row.p === i + 1)).toBe(true)
      expect(chain.every((row, i) => i === 0 || row.id > chain[i - 1]!.id)).toBe(true)
    }
    expect(activity.length).toBeGreaterThanOrEqual(TRIGGERS + NOTES)
    expect(adminLog.length).toBeGreaterThanOrEqual(2 * TOKENS)

    const verdict = JSON.parse(await set.cli(['audit', 'verify', '--json', '--quiet', '--project', 'Acme'])) as { ok: boolean; logs: { log: string; chain: string; entries: number; breaks: unknown[] }[] }
    expect(verdict.ok).toBe(true)
    const production = (await sql`SELECT id::float8 AS id FROM environments WHERE name = 'production'`) as { id: number }[]
    expect(verdict.logs.find((log) => log.chain === `activity:${production[0]!.id}`)!.entries).toBe(activity.length)
  }, 120_000)
})

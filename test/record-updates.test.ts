/**
 * Runs of different workflows on one record at the same time each keep their update: an `update` step writes the
 * whole record from what its group read, so on PostgreSQL — several writers at once — a run that read the record
 * before another's update committed would write its own change over it, and the other's would be lost. The group
 * reads the record locked until it commits. SQLite's one writer never interleaves them; both stores run this.
 */
import { afterAll, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import { insertRun } from '../src/db/queue.ts'
import { writeNow } from '../src/db/write.ts'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { queryAll, queryOne, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, userId } from './support/acme.ts'

const env = testEnv()
afterAll(() => env.cleanup())

const RECORDS = 8
const ROUNDS = 6
const FIELDS = ['a', 'b', 'c'] as const

test(`${FIELDS.length} workflows updating the same ${RECORDS} records at once, ${ROUNDS} rounds: every run's update is kept`, async () => {
  const document = acmeDocument()
  const acme = acmeProject(document)
  for (const field of FIELDS) {
    const { webhook: _none, ...workflow } = ordersWorkflow(`Append ${field}`, [{ type: 'load' }, { type: 'update', set: { [field]: `{{record.${field}}} {{run.id}}` } }])
    acme.workflows!.push(workflow)
  }
  for (let i = 1; i <= RECORDS; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `shared_${i}`, data: {} })
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  const workflows = FIELDS.map((field) => queryOne<{ id: number; version: number }>(env.store, 'SELECT id, active_version_id AS version FROM workflows WHERE name = ?', `Append ${field}`)!)
  const environmentId = queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE name = 'production'")!.id
  const bob = userId(env.store, 'bob')

  const executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 4, leaseMs: 5_000, pollMs: 5 })
  executor.start()
  const expected = new Map<string, string[]>() // `${record} ${field}` → run ids
  try {
    for (let round = 0; round < ROUNDS; round++) {
      await writeNow(env.store, function* () {
        for (let i = 1; i <= RECORDS; i++) {
          for (const [w, field] of FIELDS.entries()) {
            const id = randomUUIDv7()
            yield* insertRun({ id, workflowId: workflows[w]!.id, workflowVersionId: workflows[w]!.version, environmentId, recordId: `shared_${i}`, userId: bob, tokenId: null, trigger: 'manual', createdAt: Date.now() })
            expected.set(`shared_${i} ${field}`, [...(expected.get(`shared_${i} ${field}`) ?? []), id])
          }
        }
      })
      executor.notify()
      await until('the round to finish', () => queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running', 'waiting')")!.n === 0, 30_000, 100)
    }
  } finally {
    await executor.stop()
  }
  expect(queryAll<{ status: string; n: number }>(env.store, 'SELECT status, count(*) AS n FROM runs GROUP BY status')).toEqual([{ status: 'succeeded', n: RECORDS * FIELDS.length * ROUNDS }])
  for (let i = 1; i <= RECORDS; i++) {
    const data = JSON.parse(queryOne<{ data: string }>(env.store, 'SELECT data FROM records WHERE record_key = ?', `shared_${i}`)!.data) as Record<string, string>
    for (const field of FIELDS) expect({ [`shared_${i}.${field}`]: data[field]!.trim().split(' ') }).toEqual({ [`shared_${i}.${field}`]: expected.get(`shared_${i} ${field}`)! })
  }
}, 60_000)

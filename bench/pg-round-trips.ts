/**
 * `TRELLIS_TEST_STORE=postgres bun bench/pg-round-trips.ts`: the statements one webhook trigger, one three-step run and one task decision send to PostgreSQL, as the
 * server logs them (`log_statement = all` on the test cluster, for this script's connections only), grouped by
 * transaction. It counts the round trips under the per-environment locks (docs/performance.md "PostgreSQL: round
 * trips under the environment's locks"); asserts nothing. Prints the list to stdout.
 */
if (process.env.TRELLIS_TEST_STORE !== 'postgres') throw new Error('run with TRELLIS_TEST_STORE=postgres')
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Executor } from '../src/executor/executor.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { insertRecord } from '../src/db/records.ts'
import { bearer, request, runNow, testApp, testEnv, until } from '../test/helpers.ts'
import { acmeDocument, applyAcme, ordersWorkflow, reportHook, tokenFor } from '../test/support/acme.ts'
import { HIGH_RATES } from '../test/support/logs.ts'
import { psqlSync, sharedCluster } from '../test/support/postgres-cluster.ts'
import type { PgStore } from '../src/db/postgres/store.ts'

const env = testEnv(HIGH_RATES)
const store = env.store as PgStore
const cluster = sharedCluster()
const log = join(psqlSync(cluster.url, 'SHOW data_directory').trim(), '..', 'log')
const database = env.databaseUrl!.split('/').at(-1)!
// Only this database's sessions log their statements; its pool connects on first use, after this.
psqlSync(cluster.url, `ALTER DATABASE ${database} SET log_statement = 'all'`)
const document = acmeDocument()
const steps = [{ type: 'load' }, { type: 'update', set: { status: 'processed' } }, { type: 'note', title: 'Processed', content: '<p>processed</p>' }]
document.projects[0]!.workflows!.push(ordersWorkflow('Counted', steps, { webhook: { enabled: true, ratePerMinute: 100_000 } }))
// An approval its Billing team decides (dave, a member of it), for the decision's statements.
document.projects[0]!.workflows!.push(ordersWorkflow('Approved', [{ type: 'task', name: 'approve', title: 'Approve {{record.id}}?', assignees: { teams: ['Billing'] } }], { webhook: { enabled: true, ratePerMinute: 100_000 } }))
const report = await applyAcme({ store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
const hook = reportHook(report, 'Counted')
const alice = (await tokenFor(store, env.clock, 'alice', ['all'])).value
const dave = (await tokenFor(store, env.clock, 'dave', ['all'])).value
const [scope] = (await store.sql`SELECT e.id::float8 AS "environmentId", c.id::float8 AS "collectionId" FROM environments e
  JOIN collections c ON c.project_id = e.project_id JOIN projects p ON p.id = e.project_id
  WHERE p.name = 'Acme' AND e.name = 'production' AND c.name = 'orders'`) as { environmentId: number; collectionId: number }[]
await runNow(store, insertRecord({ ...scope!, recordKey: 'counted-1', data: '{"status":"paid"}', now: env.clock.now() }))
await runNow(store, insertRecord({ ...scope!, recordKey: 'approved-1', data: '{"status":"paid"}', now: env.clock.now() }))
const app = testApp(env)
const trigger = (recordId: string) => app.handle(request(hook, { method: 'POST', headers: bearer(alice), json: { record_id: recordId } }))

/** The log's lines of this database's sessions from `from` on (a statement's text may span lines). */
const statementsSince = (from: number) =>
  readFileSync(log, 'utf8').slice(from).split(/\n(?=\d{4}-\d\d-\d\d )/).filter((line) => line.includes('LOG:  statement:') || line.includes('LOG:  execute'))
const warm = await Promise.all(Array.from({ length: 3 }, (_, i) => trigger(`warm-${i}`)))
if (warm.some((r) => r.status !== 202)) throw new Error(`warm-up: ${warm.map((r) => r.status)}`)

const print = (title: string, lines: string[]) => {
  console.log(`\n## ${title}: ${lines.length} statements`)
  for (const line of lines) console.log(`  ${line.replace(/^.*?LOG: {2}(statement: |execute [^:]*: )/, '').replace(/\s+/g, ' ').slice(0, 160)}`)
}

let from = readFileSync(log, 'utf8').length
const response = await trigger('counted-1')
if (response.status !== 202) throw new Error(`trigger: ${response.status} ${await response.text()}`)
await Bun.sleep(200)
print('one webhook trigger (202)', statementsSince(from))

from = readFileSync(log, 'utf8').length
const conflict = await trigger('counted-1')
if (conflict.status !== 409) throw new Error(`second trigger: ${conflict.status}`)
await Bun.sleep(200)
print('the same record again (409)', statementsSince(from))

psqlSync(env.databaseUrl!, "UPDATE runs SET status = 'cancelled' WHERE status IN ('queued', 'running', 'waiting') AND record_id <> 'counted-1'")
from = readFileSync(log, 'utf8').length
const executor = new Executor({ store, clock: env.clock, logger: silentLogger, concurrency: 1, leaseMs: 5_000, pollMs: 50 })
executor.start()
await until('the run finished', async () => ((await store.sql`SELECT status FROM runs WHERE record_id = 'counted-1'`) as { status: string }[])[0]?.status !== 'queued')
await until('the run ended', async () => ['succeeded', 'failed'].includes(((await store.sql`SELECT status FROM runs WHERE record_id = 'counted-1'`) as { status: string }[])[0]!.status))
await executor.stop()
await Bun.sleep(200)
print('one three-step run (load, update, note), claim to finish', statementsSince(from).filter((line) => !line.includes("SELECT status FROM runs WHERE record_id = 'counted-1'")))

// The decision: the approval's run parked on its task (the executor stopped again), then one member's approval.
const approval = await app.handle(request(reportHook(report, 'Approved'), { method: 'POST', headers: bearer(alice), json: { record_id: 'approved-1' } }))
if (approval.status !== 202) throw new Error(`approval trigger: ${approval.status}`)
const parker = new Executor({ store, clock: env.clock, logger: silentLogger, concurrency: 1, leaseMs: 5_000, pollMs: 50 })
parker.start()
const taskId = await until('the task opened', async () => ((await store.sql`SELECT id FROM tasks WHERE record_id = 'approved-1' AND status = 'open'`) as { id: string }[])[0]?.id ?? null)
await parker.stop()
await Bun.sleep(200)
from = readFileSync(log, 'utf8').length
const decided = await app.handle(request(`/v1/tasks/${taskId}/decisions`, { method: 'POST', headers: bearer(dave), json: { decision: 'approve' } }))
if (decided.status !== 200) throw new Error(`decision: ${decided.status} ${await decided.text()}`)
await Bun.sleep(200)
print('one decision (approve → 200; the run woken, not executed)', statementsSince(from))
env.cleanup()
process.exit(0)

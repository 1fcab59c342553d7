/**
 * A server restarted after `kill -9` takes up its dead predecessor's runs.
 * - SQLite: one `serve` per data directory (a second is refused while the first lives), so a run still marked
 *   running at start belongs to no live process and resumes at once — not after its 30 s lease, while its record
 *   answered 409.
 * - PostgreSQL: other instances are alive, so a restarted instance leaves their leases alone.
 * Both with real `trellis serve` processes and a real SIGKILL; the default lease (30 s) throughout.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { bearer, runCli, type ServeProcess, startServe, tempDir, until } from './helpers.ts'
import { acmeDocument, acmeProject, ordersWorkflow, reportHook, seedDataDir, tokenFor } from './support/acme.ts'
import { postgresOrSkip } from './support/both-stores.ts'
import { hangingRemote } from './support/hanging-remote.ts'
import { startInstances } from './support/instances.ts'
import { freshDatabase, psqlSync } from './support/postgres-cluster.ts'
import { systemClock } from '../src/lib/clock.ts'

const remote = hangingRemote(60_000)
const cleanups: (() => void)[] = []
const servers: ServeProcess[] = []
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop('SIGKILL')))
  remote.stop()
  for (const cleanup of cleanups) cleanup()
})

/** Records its run id, then calls the remote (the first call of each run hangs: the run is caught mid-step). */
const crashy = ordersWorkflow('Crashy', [
  { type: 'update', name: 'mark', set: { trail: '{{record.trail}} {{run.id}}' } },
  { type: 'http', name: 'call', method: 'POST', url: `${remote.url}/hang`, body: { order: '{{record.id}}' }, retries: 0, timeoutSeconds: 60 },
])
const env = { TRELLIS_LOG_LEVEL: 'warn', TRELLIS_HTTP_ALLOW: '127.0.0.1' }

async function serve(options: { dataDir: string; cwd: string; env?: Record<string, string> }): Promise<ServeProcess> {
  const server = await startServe({ ...options, env: { ...env, ...options.env }, timeoutMs: 20_000 })
  servers.push(server)
  return server
}

const trigger = (server: ServeProcess, hook: string, token: string) =>
  fetch(`${server.url}${hook}`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ record_id: 'ord_1002' }) })

async function runOf(server: ServeProcess, token: string, runId: string): Promise<{ status: string; steps: { name: string }[] }> {
  return (await (await fetch(`${server.url}/v1/workflow-runs/${runId}`, { headers: bearer(token) })).json()) as { status: string; steps: { name: string }[] }
}

test('SQLite: one serve per data directory; after kill -9 the restarted serve resumes the dead one\'s run at once', async () => {
  const seeded = await seedDataDir('restart', [crashy], cleanups, async (store, report) => ({
    hook: reportHook(report, 'Crashy'),
    token: (await tokenFor(store, systemClock, 'bob', ['workflows:trigger'])).value,
  }))
  const first = await serve(seeded)
  const accepted = await trigger(first, seeded.hook, seeded.token)
  expect(accepted.status).toBe(202)
  const { runId } = (await accepted.json()) as { runId: string }
  await until('the run to call the remote', () => remote.hangsOf(runId) === 1, 15_000, 20)

  // A second serve on the same data directory is refused while the first lives.
  const second = await runCli(['serve', '--port', '0', '--data', seeded.dataDir], { cwd: seeded.cwd, env })
  expect(second.code).toBe(1)
  expect(second.stderr).toContain('already serving')

  expect(await first.stop('SIGKILL')).not.toBe(0)
  const restartedAt = performance.now()
  const restarted = await serve(seeded)
  const done = await until('the run to finish', async () => {
    const run = await runOf(restarted, seeded.token, runId)
    return run.status === 'succeeded' || run.status === 'failed' ? run : null
  }, 25_000, 50)
  // Well inside the 30 s lease the dead process held: taken up at start, not when the lease ran out.
  expect(performance.now() - restartedAt).toBeLessThan(20_000)
  expect(done.status).toBe('succeeded')
  expect(done.steps.map((s) => s.name)).toEqual(['mark', 'call'])
  expect(remote.hangsOf(runId)).toBe(2)
  // The record is free again (no 409), and the update took effect once.
  const next = await trigger(restarted, seeded.hook, seeded.token)
  expect(next.status).toBe(202)
  await restarted.stop('SIGKILL')
  const db = new (await import('bun:sqlite')).Database(join(seeded.dataDir, 'trellis.db'), { readonly: true })
  try {
    const record = db.prepare("SELECT data FROM records WHERE record_key = 'ord_1002'").get() as { data: string }
    expect((JSON.parse(record.data) as { trail: string }).trail.split(' ').filter((id) => id === runId)).toHaveLength(1)
  } finally {
    db.close()
  }
}, 90_000)

describe.skipIf(!postgresOrSkip('restart-recovery'))('PostgreSQL', () => {
  test('a restarted instance leaves a live instance\'s run alone (its lease holds)', async () => {
    const url = await freshDatabase()
    const document = acmeDocument()
    acmeProject(document).workflows!.push(crashy)
    const set = await startInstances({ url, document, count: 2, env: { TRELLIS_EXECUTOR_LEASE_SECONDS: '30' } })
    try {
      const token = await set.token('bob@example.com', 'erp', 'workflows:trigger')
      const accepted = await trigger(set.instances[0]!, set.hooks.Crashy!, token)
      expect(accepted.status).toBe(202)
      const { runId } = (await accepted.json()) as { runId: string }
      await until('the run to call the remote', () => remote.hangsOf(runId) === 1, 15_000, 20)
      const runRow = () => JSON.parse(psqlSync(url, `SELECT row_to_json(r) FROM (SELECT status, lease_owner FROM runs WHERE id = '${runId}') r`)) as { status: string; lease_owner: string }
      const owner = runRow().lease_owner
      const holder = set.owners.get(owner)!
      expect(holder).toBeDefined()

      // The other instance, killed with SIGKILL and started again: its start takes back only expired leases.
      expect(await set.kill(set.instances.find((instance) => instance !== holder)!)).not.toBe(0)
      const dir = tempDir('trellis-restart-pg-')
      cleanups.push(dir.cleanup)
      const restarted = await serve({ dataDir: dir.path, cwd: dir.path, env: set.env })
      await restarted.waitForOutput('executor started', 10_000)
      await Bun.sleep(1_500) // its start's recovery is its first write: done well within this
      expect(runRow()).toEqual({ status: 'running', lease_owner: owner })
      expect(remote.hangsOf(runId)).toBe(1)
      expect(restarted.stdout()).not.toContain('recovered runs')
      // The record still has its active run, through either instance.
      expect((await trigger(restarted, set.hooks.Crashy!, token)).status).toBe(409)
      await holder.stop('SIGKILL')
    } finally {
      await set.close()
    }
  }, 90_000)
})

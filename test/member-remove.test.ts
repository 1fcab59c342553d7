/** `trellis member remove`: the user leaves the project and its teams, one admin log entry, their token is refused at once. */
import { afterAll, expect } from 'bun:test'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import { manualClock } from '../src/lib/clock.ts'
import { createToken } from '../src/modules/tokens/service.ts'
import { bearer, request, runCli, runNow, SQLITE_ONLY, sqliteOnlyTest, tempDir, testApp } from './helpers.ts'
import { DEFAULT_LIVE_TOKENS_PER_USER, loadConfig } from '../src/config.ts'

const dir = tempDir()
afterAll(() => dir.cleanup())

sqliteOnlyTest(SQLITE_ONLY.ownDataDir, 'member remove: memberships gone, one remove entry with the previous value, the token refused on the next request', async () => {
  expect((await runCli(['apply', '-f', 'examples/acme.yaml', '--data', dir.path])).code).toBe(0)
  const store = openStore(dir.path)
  migrate(store.sqlite)
  const clock = manualClock(Date.now())
  const bob = store.sqlite.prepare("SELECT id FROM users WHERE email = 'bob@example.com'").get() as { id: number }
  const carol = store.sqlite.prepare("SELECT id FROM users WHERE email = 'carol@example.com'").get() as { id: number }
  store.sqlite.prepare("UPDATE project_members SET role = 'admin' WHERE user_id = ?").run(bob.id)
  const token = (await runNow(store, createToken(clock, { name: 'b', userId: bob.id, projectId: 1, scopes: ['all'], expiresAt: null, createdWithSso: false, actorId: null, maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER }))).value
  const adminToken = (await runNow(store, createToken(clock, { name: 'c', userId: carol.id, projectId: 1, scopes: ['all'], expiresAt: null, createdWithSso: false, actorId: null, maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER }))).value
  const app = testApp({ dataDir: dir.path, store, config: loadConfig({ data: dir.path }, {}), clock, secret: Buffer.from('x'.repeat(40)), databaseUrl: null, cleanup: () => {} })
  const notes = () => app.handle(request('/v1/project/Acme/environment/production/notes', { headers: bearer(token) }))
  expect((await notes()).status).toBe(200)

  const removed = await runCli(['member', 'remove', '--project', 'Acme', '--user', 'bob@example.com', '--data', dir.path])
  expect(removed).toMatchObject({ code: 0 })
  expect(removed.stdout).toContain('removed bob@example.com')
  expect((await notes()).status).toBe(403)
  expect(store.sqlite.prepare('SELECT count(*) AS n FROM project_members WHERE user_id = ?').get(bob.id)).toEqual({ n: 0 })
  expect(store.sqlite.prepare('SELECT count(*) AS n FROM team_members WHERE user_id = ?').get(bob.id)).toEqual({ n: 0 })

  const log = (await (await app.handle(request('/v1/project/Acme/admin-logs?type=remove&resource=user-project', { headers: bearer(adminToken) }))).json()) as {
    data: { previousValue: { user: { email: string }; permissionLevel: string; teams: { name: string }[] } }[]
  }
  expect(log.data).toHaveLength(1)
  expect(log.data[0]!.previousValue).toMatchObject({ user: { email: 'bob@example.com' }, permissionLevel: 'admin', teams: [{ name: 'Support' }] })

  const again = await runCli(['member', 'remove', '--project', 'Acme', '--user', 'bob@example.com', '--data', dir.path])
  expect(again.code).toBe(0)
  expect(again.stdout).toContain('is not a member')
  expect((await runCli(['member', 'remove', '--project', 'Nope', '--user', 'bob@example.com', '--data', dir.path])).code).toBe(1)
  expect((await runCli(['member', 'remove', '--project', 'Acme', '--data', dir.path])).code).toBe(2)
  store.close()
}, 30_000)

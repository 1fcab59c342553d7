/**
 * The per-connection lookup cache (src/db/sqlite/lookup-cache.ts) — token by hash, trigger target, project
 * and environment by name — is exact. Each test warms the cache with a request, changes what it holds (through the
 * API in this process, or through the real CLI in another process on the same database), and the very next request
 * answers as the change says — on both stores. The cache itself: SQLite's (per connection) does cache, own writes
 * (even raw SQL) and other connections' commits empty it, it is not used inside a transaction, and a rolled-back
 * change leaves nothing behind; PostgreSQL's (per instance, src/db/postgres/lookup-cache.ts) does cache, another
 * instance's commit is seen by the next lookup, and its generation moves once per committed change of what it reads.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { getTableName } from 'drizzle-orm'
import type { SQL } from 'bun'
import { cachedLookup, WATCHED } from '../src/db/sqlite/lookup-cache.ts'
import { writeNow } from '../src/db/write.ts'
import { read } from '../src/db/read.ts'
import { runWorkflow } from '../src/db/queue.ts'
import { cachedLookupOnPostgres } from '../src/db/postgres/lookup-cache.ts'
import { servingRequestArrivedAt } from '../src/lib/request-arrival.ts'
import type { PgStore } from '../src/db/postgres/store.ts'
import { revokeLiveToken } from '../src/db/tokens.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { anotherStore, bearer, execute, onSqlite, queryAll, POSTGRES_ONLY, postgresOnlyTest, processEnv, request, runCli, runNow, SQLITE_ONLY, sqliteOf, sqliteOnlyDescribe, testApp, testEnv, type TestEnv } from './helpers.ts'
import { acmeDocument, applyAcme, ordersWorkflow, reportHook, tokenFor, userId } from './support/acme.ts'
import { HIGH_RATES } from './support/logs.ts'

let env: TestEnv
let app: ReturnType<typeof testApp>
let hook: string
let cookie: string
let record = 0

const NOTES = (project = 'Acme', environment = 'production') => `/v1/project/${project}/environment/${environment}/notes`
const WEBHOOK_FLAGS = ['--project', 'Acme', '--environment', 'production', '--team', 'Support', '--workflow', 'Cached']
const WEBHOOK_API = '/v1/project/Acme/environment/production/team/Support/workflows/Cached/webhook'

beforeEach(async () => {
  env = testEnv(HIGH_RATES)
  const document = acmeDocument()
  document.projects[0]!.workflows!.push(ordersWorkflow('Cached', [{ type: 'load' }], { webhook: { enabled: true, ratePerMinute: 100_000 } }))
  const report = await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  hook = reportHook(report, 'Cached')
  execute(env.store, "UPDATE users SET is_instance_admin = TRUE WHERE username = 'alice'")
  cookie = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, 'alice'), false))).id}`
  app = testApp(env)
})
afterEach(() => env.cleanup())

const status = async (req: Request) => {
  const response = await app.handle(req)
  const text = await response.text()
  const body = (text === '' ? {} : JSON.parse(text)) as { code?: string }
  return response.status < 300 ? response.status : `${response.status} ${body.code}`
}
const notes = (token: string, project?: string, environment?: string) => status(request(NOTES(project, environment), { headers: bearer(token) }))
const trigger = async () => status(request(hook, { method: 'POST', headers: bearer(await triggerToken()), json: { record_id: `cached-${++record}` } }))
const asAdmin = (method: string, path: string, json?: unknown) => status(request(path, { method, headers: { cookie, origin: env.config.baseUrl }, json }))
const cli = async (...args: string[]) => {
  const result = await runCli([...args, '--data', env.dataDir], { env: processEnv(env) })
  expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' })
}

let triggerValue: string | undefined
async function triggerToken(): Promise<string> {
  triggerValue ??= (await tokenFor(env.store, env.clock, 'alice', ['workflows:trigger'])).value
  return triggerValue
}
beforeEach(() => (triggerValue = undefined))

describe('changes made through the API apply to the next request', () => {
  test('a revoked token is refused at once', async () => {
    const { value, token } = await tokenFor(env.store, env.clock, 'alice', ['notes:read'])
    expect(await notes(value)).toBe(200)
    expect(await asAdmin('DELETE', `/v1/account/tokens/${token.id}`)).toBe(204)
    expect(await notes(value)).toBe('401 unauthorized')
  })

  test('a deactivated user is refused at once, and accepted again once reactivated', async () => {
    const carol = (await tokenFor(env.store, env.clock, 'carol', ['notes:read'])).value
    const carolId = userId(env.store, 'carol')
    expect(await notes(carol)).toBe(200)
    expect(await asAdmin('PUT', `/v1/instance/users/${carolId}`, { username: 'carol', instanceAdmin: false, deactivated: true })).toBe(200)
    expect(await notes(carol)).toBe('403 user_deactivated')
    expect(await asAdmin('PUT', `/v1/instance/users/${carolId}`, { username: 'carol', instanceAdmin: false, deactivated: false })).toBe(200)
    expect(await notes(carol)).toBe(200)
  })

  test('a demoted member loses the admin role at once', async () => {
    const carol = (await tokenFor(env.store, env.clock, 'carol', ['notes:read'])).value
    expect(await notes(carol)).toBe(200)
    expect(await asAdmin('PUT', `/v1/project/Acme/members/${userId(env.store, 'carol')}`, { role: 'editor' })).toBe(200)
    expect(await notes(carol)).toBe('403 insufficient_role')
  })

  test('webhook changes: disable, enable, rate, regenerate', async () => {
    expect(await trigger()).toBe(202)
    expect(await asAdmin('PATCH', WEBHOOK_API, { enabled: false })).toBe(200)
    expect(await trigger()).toBe('404 not_found')
    expect(await asAdmin('PATCH', WEBHOOK_API, { enabled: true })).toBe(200)
    expect(await trigger()).toBe(202)
    expect(await asAdmin('PATCH', WEBHOOK_API, { ratePerMinute: 1 })).toBe(200)
    expect(await trigger()).toBe(202)
    expect(await trigger()).toBe('429 rate_limited')
    expect(await asAdmin('POST', `${WEBHOOK_API}/regenerate`)).toBe(200)
    expect(await trigger()).toBe('400 webhook_url_superseded')
  })

  test("the rendering check (the trigger's 403) follows team and role changes at once", async () => {
    const as = async (username: string) => {
      const token = (await tokenFor(env.store, env.clock, username, ['workflows:trigger'])).value
      return () => status(request(hook, { method: 'POST', headers: bearer(token), json: { record_id: `cached-${++record}` } }))
    }
    const bob = await as('bob') // an editor in Support
    const carol = await as('carol') // an admin, in no team that renders orders
    const SUPPORT_BOB = `/v1/project/Acme/teams/Support/members/${userId(env.store, 'bob')}`
    expect([await bob(), await carol()]).toEqual([202, 202])
    expect(await asAdmin('DELETE', SUPPORT_BOB)).toBe(204)
    expect(await bob()).toBe('403 rendering_forbidden')
    expect(await asAdmin('PUT', SUPPORT_BOB)).toBe(200)
    expect(await bob()).toBe(202)
    expect(await asAdmin('PUT', `/v1/project/Acme/members/${userId(env.store, 'carol')}`, { role: 'editor' })).toBe(200)
    expect(await carol()).toBe('403 rendering_forbidden')
  })

  test('a renamed project and a renamed environment are found by their new names only', async () => {
    const alice = (await tokenFor(env.store, env.clock, 'alice', ['notes:read'])).value
    expect(await notes(alice)).toBe(200)
    expect(await asAdmin('PATCH', '/v1/project/Acme/environments/production', { environmentName: 'live' })).toBe(200)
    expect(await notes(alice)).toBe('404 not_found')
    expect(await notes(alice, 'Acme', 'live')).toBe(200)
    expect(await asAdmin('PUT', '/v1/project/Acme/settings', { projectName: 'Acme Corp', sso: false })).toBe(200)
    // The token's project is found by id: its new name is the one the token now belongs to.
    expect(await notes(alice, 'Acme', 'live')).toBe('403 wrong_project')
    expect(await notes(alice, 'Acme Corp', 'live')).toBe(200)
  })

  test("a run's workflow and place are read as they are when it starts: a renamed workflow, a workflow removed", async () => {
    const [workflow] = queryAll<{ id: number; version: number }>(env.store, "SELECT id, active_version_id AS version FROM workflows WHERE name = 'Cached'")
    const run = { workflow_id: workflow!.id, workflow_version_id: workflow!.version }
    const target = () => read(env.store, runWorkflow(run))
    expect((await target())?.workflowName).toBe('Cached')
    expect((await target())?.workflowName).toBe('Cached')
    execute(env.store, "UPDATE workflows SET name = 'Cached again' WHERE id = ?", workflow!.id)
    expect((await target())?.workflowName).toBe('Cached again')
    execute(env.store, 'DELETE FROM runs WHERE workflow_id = ?', workflow!.id)
    execute(env.store, 'DELETE FROM workflows WHERE id = ?', workflow!.id)
    expect(await target()).toBeUndefined()
  })

  test('turning SSO on refuses tokens made without it at once', async () => {
    const alice = (await tokenFor(env.store, env.clock, 'alice', ['notes:read'])).value
    expect(await notes(alice)).toBe(200)
    expect(await asAdmin('PUT', '/v1/project/Acme/settings', { projectName: 'Acme', sso: true })).toBe(200)
    expect(await notes(alice)).toBe('403 sso_required')
  })

  test('a change rolled back leaves the cache as the database is', async () => {
    const { value, token } = await tokenFor(env.store, env.clock, 'alice', ['notes:read'])
    expect(await notes(value)).toBe(200)
    await expect(
      writeNow(env.store, function* () {
        yield* revokeLiveToken(token.id, env.clock.now())
        throw new Error('changed my mind')
      }),
    ).rejects.toThrow('changed my mind')
    expect(await notes(value)).toBe(200)
    await runNow(env.store, revokeLiveToken(token.id, env.clock.now()))
    expect(await notes(value)).toBe('401 unauthorized')
  })
})

describe('changes made by the CLI (another process) apply to the next request', () => {
  test('trellis token revoke', async () => {
    const { value, token } = await tokenFor(env.store, env.clock, 'alice', ['notes:read'])
    expect(await notes(value)).toBe(200)
    await cli('token', 'revoke', String(token.id))
    expect(await notes(value)).toBe('401 unauthorized')
  })

  test('trellis user disable / enable', async () => {
    const carol = (await tokenFor(env.store, env.clock, 'carol', ['notes:read'])).value
    expect(await notes(carol)).toBe(200)
    await cli('user', 'disable', '--email', 'carol@example.com')
    expect(await notes(carol)).toBe('403 user_deactivated')
    await cli('user', 'enable', '--email', 'carol@example.com')
    expect(await notes(carol)).toBe(200)
  })

  test('trellis member set / remove', async () => {
    const carol = (await tokenFor(env.store, env.clock, 'carol', ['notes:read'])).value
    expect(await notes(carol)).toBe(200)
    await cli('member', 'set', '--project', 'Acme', '--user', 'carol@example.com', '--role', 'editor')
    expect(await notes(carol)).toBe('403 insufficient_role')
    await cli('member', 'set', '--project', 'Acme', '--user', 'carol@example.com', '--role', 'admin')
    expect(await notes(carol)).toBe(200)
    await cli('member', 'remove', '--project', 'Acme', '--user', 'carol@example.com')
    expect(await notes(carol)).toBe('403 insufficient_role')
  })

  test('trellis webhook disable / enable / rate / regenerate', async () => {
    expect(await trigger()).toBe(202)
    await cli('webhook', 'disable', ...WEBHOOK_FLAGS)
    expect(await trigger()).toBe('404 not_found')
    await cli('webhook', 'enable', ...WEBHOOK_FLAGS)
    expect(await trigger()).toBe(202)
    await cli('webhook', 'rate', ...WEBHOOK_FLAGS, '--per-minute', '1')
    expect(await trigger()).toBe(202)
    expect(await trigger()).toBe('429 rate_limited')
    await cli('webhook', 'regenerate', ...WEBHOOK_FLAGS)
    expect(await trigger()).toBe('400 webhook_url_superseded')
  }, 20_000)
})

sqliteOnlyDescribe(SQLITE_ONLY.lookupCache, 'the cache itself', () => {
  /** A lookup through the cache that counts how often it really reads. */
  function counted() {
    let reads = 0
    const store = sqliteOf(env.store, SQLITE_ONLY.lookupCache)
    const lookup = () =>
      cachedLookup(store.db, 'test-project', 'Acme', () => {
        reads++
        return store.sqlite.prepare('SELECT name, sso FROM projects WHERE name = ?').get('Acme') as { name: string; sso: number }
      })
    return { lookup, reads: () => reads }
  }
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

  test('a second lookup reads nothing; an own write of a watched table, even raw SQL, empties it', () => {
    const { lookup, reads } = counted()
    const sqlite = sqliteOf(env.store, SQLITE_ONLY.lookupCache).sqlite
    expect(lookup()?.sso).toBe(0)
    expect(lookup()?.sso).toBe(0)
    expect(reads()).toBe(1)
    // A table no lookup reads: still cached.
    sqlite.run("UPDATE records SET data = '{}' WHERE id = 1")
    lookup()
    expect(reads()).toBe(1)
    // `last_used_at` is not watched: the stamp never empties the cache.
    sqlite.run('UPDATE api_tokens SET last_used_at = 1')
    lookup()
    expect(reads()).toBe(1)
    sqlite.run("UPDATE projects SET sso = 1 WHERE name = 'Acme'")
    expect(lookup()?.sso).toBe(1)
    expect(reads()).toBe(2)
  })

  test("another connection's commit is seen from the next turn of the event loop", async () => {
    const { lookup, reads } = counted()
    lookup()
    await nextTurn()
    const other = new Database(sqliteOf(env.store, SQLITE_ONLY.lookupCache).path)
    other.run("UPDATE projects SET sso = 1 WHERE name = 'Acme'")
    other.close()
    await nextTurn()
    expect(lookup()?.sso).toBe(1)
    expect(reads()).toBe(2)
  })

  test('inside a transaction the cache is neither read nor filled; entries are frozen', () => {
    const { lookup, reads } = counted()
    const cached = lookup()!
    expect(Object.isFrozen(cached)).toBe(true)
    sqliteOf(env.store, SQLITE_ONLY.lookupCache).commitNow(function* () {
      yield* onSqlite(() => lookup())
      yield* onSqlite(() => lookup())
    })
    expect(reads()).toBe(3)
    lookup()
    expect(reads()).toBe(3)
  })
})

describe('PostgreSQL: the instance cache and its generation row', () => {
  const pg = () => env.store as PgStore
  const generation = async (sql: SQL = pg().sql) => Number(((await sql`SELECT n FROM lookup_generation WHERE id = 1`) as { n: string }[])[0]!.n)
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve))
  /** A lookup through the instance cache that counts how often it really reads. */
  function counted(store: PgStore) {
    let reads = 0
    const lookup = () =>
      cachedLookupOnPostgres(store.db, 'test-project', 'Acme', async () => {
        reads++
        return ((await store.sql`SELECT name, sso FROM projects WHERE name = 'Acme'`) as { name: string; sso: boolean }[])[0]
      })
    return { lookup, reads: () => reads }
  }

  postgresOnlyTest(POSTGRES_ONLY.lookupGeneration, "the triggers watch exactly the SQLite cache's tables and columns", async () => {
    const rows = (await pg().sql`SELECT c.relname AS "table", t.tgattr::text AS columns, t.tgdeferrable AS deferrable, t.tginitdeferred AS deferred
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.tgname LIKE 'lookup_generation_%' ORDER BY 1`) as { table: string; columns: string; deferrable: boolean; deferred: boolean }[]
    expect(rows.map((r) => r.table)).toEqual(WATCHED.map(([table]) => getTableName(table)).sort())
    expect(rows.every((r) => r.deferrable && r.deferred)).toBe(true)
    for (const [table, ignored] of WATCHED) {
      const name = getTableName(table)
      const watched = rows.find((r) => r.table === name)!.columns.split(' ').filter(Boolean).map(Number)
      const all = (await pg().sql`SELECT attnum, attname FROM pg_attribute WHERE attrelid = ${name}::regclass AND attnum > 0 AND NOT attisdropped`) as { attnum: number; attname: string }[]
      // No column list: every update counts. Else every column but the ignored ones.
      const expected = ignored.length === 0 ? [] : all.filter((c) => !ignored.includes(c.attname)).map((c) => c.attnum).sort((a, b) => a - b)
      expect({ name, watched: watched.sort((a, b) => a - b) }).toEqual({ name, watched: expected })
    }
  })

  postgresOnlyTest(POSTGRES_ONLY.lookupGeneration, 'the generation moves once per committed transaction that changes a watched table; never on rollback, a stamp or another table', async () => {
    const sql = pg().sql
    await tokenFor(env.store, env.clock, 'alice', ['all'])
    const before = await generation()
    await sql.begin(async (tx) => {
      await tx`UPDATE projects SET sso = sso`
      await tx`UPDATE users SET updated_at = updated_at`
      await tx`UPDATE users SET updated_at = updated_at`
      expect(await generation(tx)).toBe(before) // not before COMMIT
    })
    expect(await generation()).toBe(before + 1)
    await sql`UPDATE api_tokens SET last_used_at = 1`
    await sql`UPDATE records SET data = data`
    expect(await generation()).toBe(before + 1)
    await expect(
      sql.begin(async (tx) => {
        await tx`UPDATE projects SET sso = sso`
        throw new Error('rolled back')
      }),
    ).rejects.toThrow('rolled back')
    expect(await generation()).toBe(before + 1)
    await sql`UPDATE api_tokens SET revoked_at = revoked_at`
    expect(await generation()).toBe(before + 2)
  })

  postgresOnlyTest(POSTGRES_ONLY.lookupGeneration, "a later lookup reads nothing but the generation; another instance's commit is seen by the next lookup", async () => {
    const { lookup, reads } = counted(pg())
    expect((await lookup())?.sso).toBe(false)
    await nextTurn()
    expect((await lookup())?.sso).toBe(false)
    expect(reads()).toBe(1)
    // Changed with the triggers off (a replica session): the cache does not know, so it still answers the old row.
    await pg().sql.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`
      await tx`UPDATE projects SET sso = TRUE WHERE name = 'Acme'`
    })
    await nextTurn()
    expect((await lookup())?.sso).toBe(false)
    expect(reads()).toBe(1)
    // Another instance's commit: seen by the very next lookup.
    const other = anotherStore(env) as PgStore
    try {
      await other.sql`UPDATE projects SET sso = FALSE WHERE name = 'Acme'`
      await other.sql`UPDATE projects SET sso = TRUE WHERE name = 'Acme'`
    } finally {
      await other.close()
    }
    await nextTurn()
    expect((await lookup())?.sso).toBe(true)
    expect(reads()).toBe(2)
  })

  postgresOnlyTest(POSTGRES_ONLY.lookupGeneration, "a served request's later lookups reuse a check sent after it arrived; a request arriving after a commit sees it", async () => {
    const { lookup, reads } = counted(pg())
    const changeElsewhere = async (sso: boolean) => {
      const other = anotherStore(env) as PgStore
      try {
        await other.sql`UPDATE projects SET sso = ${sso} WHERE name = 'Acme'`
      } finally {
        await other.close()
      }
    }
    await servingRequestArrivedAt(performance.now(), async () => {
      expect((await lookup())?.sso).toBe(false)
      // Committed after this request arrived: its later lookups (other turns) may answer from the check already made.
      await changeElsewhere(true)
      await nextTurn()
      expect((await lookup())?.sso).toBe(false)
    })
    expect(reads()).toBe(1)
    // The next request arrived after that commit: its check is sent after it, and sees it.
    await nextTurn()
    await servingRequestArrivedAt(performance.now(), async () => expect((await lookup())?.sso).toBe(true))
    expect(reads()).toBe(2)
  })

  postgresOnlyTest(POSTGRES_ONLY.lookupGeneration, 'inside a transaction the cache is neither read nor filled; entries are frozen', async () => {
    const { lookup, reads } = counted(pg())
    const first = await lookup()
    expect(Object.isFrozen(first)).toBe(true)
    let loadedInside = 0
    await pg().db.transaction(async (tx) => {
      const inside = await cachedLookupOnPostgres(tx, 'test-project', 'Acme', async () => (loadedInside++, { name: 'inside', sso: true }))
      expect(inside?.name).toBe('inside')
    })
    expect(loadedInside).toBe(1)
    await nextTurn()
    expect((await lookup())?.name).toBe('Acme')
    expect(reads()).toBe(1)
  })
})

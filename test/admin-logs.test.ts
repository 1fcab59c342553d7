/**
 * The admin log (spec §1, §2.8, §4.3, §5.8; DESIGN §7) through the real app over real SQLite files:
 * every administrative act is exactly one entry (apply, members, tokens, webhooks, workflows, users) and never a
 * secret, a failed act writes none, `GET …/admin-logs` (filters, limit, order, hasMore, paging past a burst, the
 * scope and role matrix, append-only storage, 429), and retention (`pruneLogs`, TRELLIS_LOG_RETENTION_DAYS, in
 * src/modules/admin-logs/retention.ts). test/activity-logs.test.ts is its sibling; the harness both share is
 * test/support/logs.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { ConfigError, loadConfig } from '../src/config.ts'
import { writeNow } from '../src/db/write.ts'
import { appendActivityLog } from '../src/modules/activity-logs/service.ts'
import { pruneLogs } from '../src/modules/admin-logs/retention.ts'
import { ADMIN_LOG_RESOURCES, appendAdminLog } from '../src/modules/admin-logs/service.ts'
import { ApplyError } from '../src/modules/apply/service.ts'
import { setProjectMember, setUserDeactivated } from '../src/modules/members/service.ts'
import { applyNow, auditSigningOf, bearer, execute, listReadable, queryAll, queryOne, request, runCli, processEnv, tableContents, testApp, testEnv } from './helpers.ts'
import { acmeWithGlobex, applyAcme, projectId, tokenFor } from './support/acme.ts'
import { assertValidWithExtensions, EXTENSION_VALUES } from './support/compat-schema.ts'
import {
  adminPath,
  BAD_EXTENSIONS,
  adminSince,
  type AdminLog,
  at,
  buildFx,
  describeRateLimit,
  documented,
  expectEnumFilter,
  expectFilterCases,
  expectHasMoreBoundaries,
  expectNothingWritten,
  type Fx,
  iso,
  listed,
  ISO_UTC_MICROS,
  listActivity,
  listAdmin,
  listFixture,
  type ListFixture,
  maxId,
  notesPath,
  noWriteRoutes,
  type Page,
  reportValidations,
  rowsAfter,
  scopeMatrix,
  send,
  T,
  team,
  time,
  type UserObject,
  userObject,
  VALIDATORS,
  walk,
  listParameterTests,
} from './support/logs.ts'
import { BAD_LIMITS, badParameter, expectError, scenarios } from './support/scenarios.ts'

afterAll(reportValidations)

// ── Admin log: every administrative act ────────────────────────────────────

describe('admin log: every administrative act is exactly one entry', () => {
  let fx: Fx
  const secrets: string[] = []
  beforeAll(async () => {
    fx = await buildFx()
    // The CLI commands below run in their own process on the real clock: keep the test clock ahead of it, so that
    // entries written here carry the test clock's time (an entry never takes a time before the latest one).
    fx.env.clock.set(Math.max(fx.env.clock.now(), Date.now()) + 86_400_000)
  })
  afterAll(() => fx.env.cleanup())

  const manage = async (method: string, path: string, json?: unknown, token = fx.alice) => {
    const response = await fx.app.handle(request(path, { method, headers: bearer(token), json }))
    const text = await response.text()
    return { status: response.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> }
  }

  /** Runs `act`, asserts exactly `count` new admin rows per project and returns Acme's new entries (API), oldest first. */
  async function expectAdmin(act: () => unknown, count: number, project = 'Acme'): Promise<AdminLog[]> {
    const before = maxId(fx.env, 'admin_logs')
    fx.env.clock.advance(1_000)
    await act()
    const rows = rowsAfter(fx.env, 'admin_logs', before)
    const pid = projectId(fx.env.store, project)
    expect(rows.filter((r) => r.project_id === pid)).toHaveLength(count)
    const entries = await adminSince(fx, before, project)
    expect(entries).toHaveLength(count)
    return entries
  }

  const aliceActor = () => fx.users.alice

  test('apply: environments and teams created, members added with permission level and teams — initiator administrator, no user', async () => {
    const { body } = await listAdmin(fx, { limit: '100' })
    const fromApply = body.data.filter((e) => e.resource !== 'api-token').reverse()
    for (const entry of fromApply) {
      expect(entry.initiator).toBe('administrator')
      expect('user' in entry).toBe(false)
    }
    expect(fromApply.filter((e) => e.resource === 'environment').map((e) => [e.type, e.newValue])).toEqual([
      ['add', { name: 'production', codeCustomizationVersion: 0 }],
      ['add', { name: 'staging', codeCustomizationVersion: 0 }],
    ])
    expect(fromApply.filter((e) => e.resource === 'team').map((e) => [e.type, e.newValue])).toEqual([
      ['add', { name: 'Support' }],
      ['add', { name: 'Billing' }],
    ])
    // One `add` per member, whose newValue is the compatibility document's user-project value. Apply adds
    // members before team memberships, so each member's story starts with the add (no teams yet).
    const adds = fromApply.filter((e) => e.resource === 'user-project' && e.type === 'add')
    expect(adds.map((e) => e.newValue)).toEqual([
      { user: fx.users.alice, permissionLevel: 'admin', teams: [] },
      { user: fx.users.bob, permissionLevel: 'editor', teams: [] },
      { user: fx.users.carol, permissionLevel: 'admin', teams: [] },
      { user: fx.users.dave, permissionLevel: 'user', teams: [] },
    ])
    expect(adds.every((e) => !('previousValue' in e))).toBe(true)
    // Each team membership is recorded too (as a user-project update: teams before → after).
    const teamUpdates = fromApply.filter((e) => e.resource === 'user-project' && e.type === 'update')
    expect(teamUpdates.map((e) => [(e.newValue!.user as UserObject).username, e.newValue!.teams])).toEqual([
      ['alice', [team('Support')]],
      ['bob', [team('Support')]],
      ['carol', [team('Billing')]],
      ['dave', [team('Billing')]],
    ])
    // Globex's own log has its own entries, and Acme's none of them.
    const globex = await listAdmin(fx, { limit: '100', resource: 'environment' }, { project: 'Globex' })
    expect(globex.body.data.map((e) => e.newValue)).toEqual([{ name: 'production', codeCustomizationVersion: 0 }])
  })

  test('re-applying the same file writes no admin entry', async () => {
    await expectAdmin(async () => await applyAcme({ store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl }, acmeWithGlobex()), 0)
  })

  test('apply: an environment and a team created, a team member added → one entry each', async () => {
    const entries = await expectAdmin(
      async () =>
        await applyNow(
          { projects: [{ name: 'Acme', environments: ['qa'], teams: [{ name: 'Audit' }, { name: 'Support', members: ['dave@example.com'] }] }] },
          { store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl },
        ),
      3,
    )
    expect(entries.map((e) => [e.type, e.resource, e.previousValue, e.newValue])).toEqual([
      ['add', 'environment', undefined, { name: 'qa', codeCustomizationVersion: 0 }],
      ['add', 'team', undefined, { name: 'Audit' }],
      [
        'update',
        'user-project',
        { user: fx.users.dave, permissionLevel: 'user', teams: [team('Billing')] },
        { user: fx.users.dave, permissionLevel: 'user', teams: [team('Billing'), team('Support')] },
      ],
    ])
  })

  /** erin, a user of the instance (not yet in a project); applying her again changes nothing. */
  const addErin = () => applyNow({ users: [{ email: 'erin@example.com', username: 'erin' }] }, { store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl })

  test('member added through the CLI → add user-project, initiator administrator, no user', async () => {
    await addErin()
    const [entry] = await expectAdmin(async () => {
      const cli = await runCli(['member', 'set', '--project', 'Acme', '--user', 'erin@example.com', '--role', 'editor', '--data', fx.env.dataDir], { env: processEnv(fx.env) })
      expect({ code: cli.code, stderr: cli.stderr }).toEqual({ code: 0, stderr: '' })
    }, 1)
    expect(entry).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'add',
      resource: 'user-project',
      initiator: 'administrator',
      createdAt: expect.stringMatching(ISO_UTC_MICROS),
      newValue: { user: userObject(fx.env, 'erin'), permissionLevel: 'editor', teams: [] },
    })
  })

  test('role changed by an admin → update user-project with previous and new permission level, user the admin; unchanged → nothing', async () => {
    // erin is an editor of Acme: the CLI test above made her one where it runs (SQLite); else (or alone) she is made one here.
    await addErin()
    const erin = userObject(fx.env, 'erin')
    const set = (role: 'editor' | 'developer', actorId: number | null = fx.users.alice.id) =>
      writeNow(fx.env.store, function* () {
        return yield* setProjectMember(fx.env.clock, { projectId: projectId(fx.env.store, 'Acme'), userId: erin.id, role, actorId })
      },
      )
    await set('editor', null)
    const [entry] = await expectAdmin(async () => expect(await set('developer')).toBe('updated'), 1)
    expect(entry).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'update',
      resource: 'user-project',
      initiator: 'administrator',
      createdAt: listed(fx.env.clock.now()),
      user: aliceActor(),
      previousValue: { user: erin, permissionLevel: 'editor', teams: [] },
      newValue: { user: erin, permissionLevel: 'developer', teams: [] },
    })
    await expectAdmin(async () => expect(await set('developer')).toBe('unchanged'), 0)
  })

  test('token created and revoked through the API → api-token add / remove by alice, only the prefix in the values', async () => {
    let created: Record<string, unknown> = {}
    const [add] = await expectAdmin(async () => {
      const sent = await manage('POST', '/v1/account/tokens', { name: 'reporting', projectName: 'Acme', scopes: ['notes:read', 'activity_logs:read'] })
      expect(sent.status).toBe(201)
      created = sent.body
    }, 1)
    const value = created.token as string
    const prefix = created.prefix as string
    secrets.push(value, value.slice(4), value.slice(prefix.length), createHash('sha256').update(value).digest('hex'))
    const description = `reporting (${prefix}…) of alice@example.com, scopes notes:read activity_logs:read`
    expect(add).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'add',
      resource: 'api-token',
      initiator: 'administrator',
      createdAt: listed(fx.env.clock.now()),
      user: aliceActor(),
      newValue: { name: description },
    })
    const [remove] = await expectAdmin(async () => {
      expect((await manage('DELETE', `/v1/account/tokens/${created.id}`)).status).toBe(204)
    }, 1)
    expect(remove).toMatchObject({ type: 'remove', resource: 'api-token', user: aliceActor(), previousValue: { name: description } })
    expect('newValue' in remove!).toBe(false)
    // Revoking again: 404, nothing written.
    await expectAdmin(async () => expect((await manage('DELETE', `/v1/account/tokens/${created.id}`)).status).toBe(404), 0)
  })

  test('an admin revokes another user’s token (project API access settings) → remove api-token, user the admin', async () => {
    const bobs = await tokenFor(fx.env.store, fx.env.clock, 'bob', ['notes:read'], { name: 'bob-erp' })
    secrets.push(bobs.value, bobs.token.tokenHash)
    const [remove] = await expectAdmin(async () => {
      expect((await manage('DELETE', `/v1/project/Acme/api-tokens/${bobs.token.id}`)).status).toBe(204)
    }, 1)
    expect(remove).toMatchObject({ type: 'remove', resource: 'api-token', user: aliceActor() })
    expect(remove!.previousValue!.name).toStartWith(`bob-erp (${bobs.token.prefix}…) of bob@example.com`)
  })

  test('webhook disabled / enabled / rate changed / regenerated → one workflow-webhook entry each; unchanged → none', async () => {
    const webhook = '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/webhook'
    const oldUrl = fx.report.workflows.find((w) => w.name === 'Refund order')!.webhook.url!
    secrets.push(new URL(oldUrl).pathname)
    const describeAs = (state: string, rate: string, generation: number) => ({ name: `Refund order: webhook ${state}, ${rate}, URL generation ${generation}` })
    const steps: [unknown, number, string, [string, string, number], [string, string, number]][] = [
      [{ enabled: false }, 200, 'PATCH', ['enabled', '60/min', 1], ['disabled', '60/min', 1]],
      [{ enabled: true }, 200, 'PATCH', ['disabled', '60/min', 1], ['enabled', '60/min', 1]],
      [{ ratePerMinute: 120 }, 200, 'PATCH', ['enabled', '60/min', 1], ['enabled', '120/min', 1]],
      [{ ratePerMinute: null }, 200, 'PATCH', ['enabled', '120/min', 1], ['enabled', 'default rate', 1]],
      [null, 200, 'POST', ['enabled', 'default rate', 1], ['enabled', 'default rate', 2]],
    ]
    for (const [json, status, method, before, after] of steps) {
      const [entry] = await expectAdmin(async () => {
        const sent = method === 'POST' ? await manage('POST', `${webhook}/regenerate`) : await manage('PATCH', webhook, json)
        expect(sent.status).toBe(status)
        if (sent.body?.url) secrets.push(new URL(sent.body.url as string).pathname)
      }, 1)
      expect(entry).toEqual({
        object: 'adminLog',
        id: expect.any(String),
        type: 'update',
        resource: 'workflow-webhook',
        initiator: 'administrator',
        createdAt: listed(fx.env.clock.now()),
        user: aliceActor(),
        previousValue: describeAs(...before),
        newValue: describeAs(...after),
      })
    }
    await expectAdmin(async () => expect((await manage('PATCH', webhook, { enabled: true })).status).toBe(200), 0)
    // Two effective changes in one PATCH: two entries.
    await expectAdmin(async () => expect((await manage('PATCH', webhook, { enabled: false, ratePerMinute: 30 })).status).toBe(200), 2)
    await expectAdmin(async () => expect((await manage('PATCH', webhook, { enabled: true })).status).toBe(200), 1)
  })

  test('workflow published → add workflow v1; republished unchanged → nothing; changed → update v1 → v2', async () => {
    const path = '/v1/project/Acme/environment/production/team/Support/workflows/Audit%20me'
    const [created] = await expectAdmin(async () => {
      const sent = await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }] })
      expect(sent.body).toMatchObject({ outcome: 'created', version: 1 })
    }, 1)
    expect(created).toEqual({
      object: 'adminLog',
      id: expect.any(String),
      type: 'add',
      resource: 'workflow',
      initiator: 'administrator',
      createdAt: listed(fx.env.clock.now()),
      user: aliceActor(),
      newValue: { name: 'Audit me v1' },
    })
    await expectAdmin(async () => expect((await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }] })).body).toMatchObject({ outcome: 'unchanged' }), 0)
    const [published] = await expectAdmin(async () => {
      const sent = await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }, { type: 'wait', seconds: 5 }] })
      expect(sent.body).toMatchObject({ outcome: 'published', version: 2 })
    }, 1)
    expect(published).toMatchObject({ type: 'update', resource: 'workflow', user: aliceActor(), previousValue: { name: 'Audit me v1' }, newValue: { name: 'Audit me v2' } })
    // Enabling its webhook in the definition: the trigger change alone.
    const [trigger] = await expectAdmin(async () => {
      const sent = await manage('PUT', path, { collection: 'orders', steps: [{ type: 'load' }, { type: 'wait', seconds: 5 }], webhook: { enabled: true } })
      expect(sent.body).toMatchObject({ outcome: 'unchanged', version: 2 })
      secrets.push(new URL((sent.body.webhook as { url: string }).url).pathname)
    }, 1)
    expect(trigger).toMatchObject({ resource: 'workflow-webhook', previousValue: { name: 'Audit me: webhook disabled, default rate' }, newValue: { name: 'Audit me: webhook enabled, default rate' } })
  })

  test('user deactivated / reactivated → resource user, one entry in each project of the user', async () => {
    const bob = fx.users.bob
    for (const [deactivate, actorId, from, to] of [
      [true, fx.users.alice.id, 'active', 'deactivated'],
      [false, null, 'deactivated', 'active'],
    ] as const) {
      const acmeBefore = maxId(fx.env, 'admin_logs')
      fx.env.clock.advance(1_000)
      if (actorId === null) {
        // The operator through the CLI.
        const cli = await runCli(['user', 'enable', '--email', 'bob@example.com', '--data', fx.env.dataDir], { env: processEnv(fx.env) })
        expect(cli.code).toBe(0)
      } else {
        expect(await writeNow(fx.env.store, function* () {
          return yield* setUserDeactivated(fx.env.clock, bob.id, deactivate, actorId)
        })).toBe(true)
      }
      for (const project of ['Acme', 'Globex']) {
        const entries = await adminSince(fx, acmeBefore, project)
        expect({ project, entries }).toEqual({
          project,
          entries: [
            {
              object: 'adminLog',
              id: expect.any(String),
              type: 'update',
              resource: 'user',
              initiator: 'administrator',
              createdAt: expect.stringMatching(ISO_UTC_MICROS),
              ...(actorId === null ? {} : { user: aliceActor() }),
              previousValue: { name: `bob@example.com ${from}` },
              newValue: { name: `bob@example.com ${to}` },
            },
          ],
        })
      }
      expect(rowsAfter(fx.env, 'admin_logs', acmeBefore)).toHaveLength(2)
    }
    // dave is only in Acme: one entry.
    const before = maxId(fx.env, 'admin_logs')
    await writeNow(fx.env.store, function* () {
      return yield* setUserDeactivated(fx.env.clock, fx.users.dave.id, true, fx.users.alice.id)
    })
    expect(rowsAfter(fx.env, 'admin_logs', before).map((r) => r.resource)).toEqual(['user'])
    // Already deactivated: nothing.
    expect(await writeNow(fx.env.store, function* () {
      return yield* setUserDeactivated(fx.env.clock, fx.users.dave.id, true, fx.users.alice.id)
    })).toBe(false)
    expect(maxId(fx.env, 'admin_logs')).toBe(before + 1)
  })

  test('never a secret: no token value, token hash or webhook signature anywhere in the admin log (API body or table)', async () => {
    expect(secrets.length).toBeGreaterThanOrEqual(8)
    const { entries } = await walk((q) => listAdmin(fx, { ...q, extensions: 'true' }))
    const text = JSON.stringify(entries)
    const table = JSON.stringify(queryAll(fx.env.store, 'SELECT * FROM admin_logs'))
    for (const secret of secrets) {
      expect({ secret, inApi: text.includes(secret), inTable: table.includes(secret) }).toEqual({ secret, inApi: false, inTable: false })
    }
    // The signature part of a webhook URL alone is not there either.
    for (const path of secrets.filter((s) => s.startsWith('/v1/hooks/'))) expect(text).not.toContain(path.split('.').at(-1)!)
  })

  test('every entry: initiator administrator (people and CLI), a user exactly when a person acted through the API', async () => {
    const { entries } = await walk((q) => listAdmin(fx, { ...q, extensions: 'true' }))
    expect(entries.length).toBeGreaterThan(25)
    expect(new Set(entries.map((e) => e.initiator))).toEqual(new Set(['administrator']))
    expect(entries.filter((e) => e.user !== undefined).every((e) => e.user!.id === fx.users.alice.id)).toBe(true)
  })
})

// ── A failed transaction writes no entry ────────────────────────────────────

describe('a failed transaction writes no log entry', () => {
  let fx: Fx
  beforeAll(async () => {
    fx = await buildFx()
  })
  afterAll(() => fx.env.cleanup())

  const logTables = ['activity_logs', 'activity_log_records', 'admin_logs']

  test('an apply file with an error at its very end changes nothing (no admin entry for the valid parts before it)', async () => {
    const before = tableContents(fx.env.store)
    const document = {
      users: [{ email: 'zed@example.com', username: 'zed' }],
      projects: [
        {
          name: 'Acme',
          environments: ['qa'],
          teams: [{ name: 'Audit', members: ['zed@example.com'] }],
          members: [
            { user: 'zed@example.com', role: 'admin' },
            { user: 'nobody@example.com', role: 'admin' },
          ],
        },
      ],
    }
    await expect(applyNow(document, { store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl })).rejects.toThrow(ApplyError)
    expect(tableContents(fx.env.store)).toEqual(before)
  })

  test('management calls that fail (400, 404) write no admin entry', async () => {
    const before = tableContents(fx.env.store)
    const call = (method: string, path: string, json?: unknown) => fx.app.handle(request(path, { method, headers: bearer(fx.alice), json })).then((r) => r.status)
    const workflows = '/v1/project/Acme/environment/production/team/Support/workflows'
    expect(await call('PUT', `${workflows}/Broken`, { collection: 'nope', steps: [{ type: 'load' }] })).toBe(400)
    expect(await call('PUT', `${workflows}/Broken`, { collection: 'orders', steps: [] })).toBe(400)
    expect(await call('PUT', '/v1/project/Acme/environment/production/team/Nope/workflows/Broken', { collection: 'orders', steps: [{ type: 'load' }] })).toBe(400)
    expect(await call('PATCH', `${workflows}/Nope/webhook`, { enabled: false })).toBe(404)
    expect(await call('PATCH', `${workflows}/Refund%20order/webhook`, { enabled: false, ratePerMinute: 0 })).toBe(400)
    expect(await call('POST', '/v1/account/tokens', { name: 'x', projectName: 'Acme', scopes: ['nope'] })).toBe(400)
    expect(await call('DELETE', '/v1/account/tokens/999999')).toBe(404)
    expectNothingWritten(fx.env, before, [...logTables, 'workflows', 'workflow_versions', 'webhook_triggers'])
    expect(tableContents(fx.env.store).api_tokens).toHaveLength(before.api_tokens!.length)
  })

  test('a transaction that throws after appending rolls the entry back', () => {
    const before = tableContents(fx.env.store)
    const acme = projectId(fx.env.store, 'Acme')
    const production = (queryOne(fx.env.store, "SELECT id FROM environments WHERE project_id = ? AND name = 'production'", acme) as { id: number }).id
    expect(async () =>
      await writeNow(fx.env.store, function* () {
        yield* appendActivityLog(fx.env.clock, { environmentId: production, type: 'write', action: 'update', userId: fx.users.alice.id, teamId: null, collectionId: null, recordIds: ['r1', 'r2'] })
        yield* appendAdminLog(fx.env.clock, { projectId: acme, type: 'update', resource: 'team', actorId: fx.users.alice.id, newValue: { name: 'x' } })
        throw new Error('boom')
      }),
    ).toThrow('boom')
    expectNothingWritten(fx.env, before, logTables)
  })
})

// ── GET …/admin-logs: filters, enums, limit, order, hasMore, access ─────────

describe('GET …/admin-logs: filters, limit, order, hasMore, access', () => {
  let lf: ListFixture
  let fx: Fx
  /** Every seeded entry, extensions included (`extensions=true`), and the ones a default call lists. */
  let adminAll: AdminLog[] = []
  let adminDocumented: AdminLog[] = []

  beforeAll(async () => {
    lf = await listFixture()
    ;({ fx, adminAll, adminDocumented } = lf)
  })
  afterAll(() => fx.env.cleanup())
  const sendAdmin = (req: Request) => send(fx.app, req, 'admin')

  test('the seeded entries render exactly (values, initiator, optional user)', () => {
    // Admin seeds 4…8 (mod 9) or initiator system are extensions.
    expect(adminAll.length - adminDocumented.length).toBeGreaterThan(15)
    expect(adminDocumented.length).toBeGreaterThan(10)
    expect(adminAll.filter((e) => e.newValue?.name?.toString().startsWith('after '))).toHaveLength(36)
    const system = adminAll.find((e) => e.newValue?.name === 'after 5')!
    expect(system).toMatchObject({ initiator: 'system', resource: ADMIN_LOG_RESOURCES[5] })
    expect('user' in system).toBe(false)
  })

  // ── Filters, each alone and combined, against the full list ──

  type AdminCase = [string, Record<string, string>, (e: AdminLog) => boolean]
  const adminCases = (): AdminCase[] => [
    ['userEmail', { userEmail: 'carol@example.com' }, (e) => e.user?.username === 'carol'],
    ['userEmail (case-insensitive)', { userEmail: 'ALICE@example.com' }, (e) => e.user?.username === 'alice'],
    ['userId', { userId: String(fx.users.alice.id) }, (e) => e.user?.username === 'alice'],
    ...(['add', 'remove', 'update', 'initial'] as const).map((type): AdminCase => [`type ${type}`, { type }, (e) => e.type === type]),
    ...(['administrator', 'identityProvider', 'system'] as const).map((initiator): AdminCase => [`initiator ${initiator}`, { initiator }, (e) => e.initiator === initiator]),
    ...ADMIN_LOG_RESOURCES.map((resource): AdminCase => [`resource ${resource}`, { resource }, (e) => e.resource === resource]),
    ['createdAt.eq', { 'createdAt.eq': at(2) }, (e) => time(e) === T + 2_000],
    ['createdAt.lt', { 'createdAt.lt': at(2) }, (e) => time(e) < T + 2_000],
    ['createdAt.lte', { 'createdAt.lte': at(2) }, (e) => time(e) <= T + 2_000],
    ['createdAt.gt', { 'createdAt.gt': at(2) }, (e) => time(e) > T + 2_000],
    ['createdAt.gte', { 'createdAt.gte': at(2) }, (e) => time(e) >= T + 2_000],
    ['userId + type', { userId: String(fx.users.carol.id), type: 'remove' }, (e) => e.user?.username === 'carol' && e.type === 'remove'],
    ['initiator + resource', { initiator: 'administrator', resource: 'user-project' }, (e) => e.initiator === 'administrator' && e.resource === 'user-project'],
    [
      'everything at once',
      { userEmail: 'alice@example.com', userId: String(fx.users.alice.id), type: 'add', initiator: 'identityProvider', resource: 'user-project', 'createdAt.gte': at(0), 'createdAt.lt': at(20) },
      (e) => e.user?.username === 'alice' && e.type === 'add' && e.initiator === 'identityProvider' && e.resource === 'user-project' && time(e) >= T && time(e) < T + 20_000,
    ],
    ['unknown email', { userEmail: 'nobody@example.com' }, () => false],
    ['a documented initiator Trellis never writes', { initiator: 'forestAdmin' }, () => false],
  ]

  test('admin filters: every case returns exactly the matching entries, newest first — with and without extensions', async () => {
    await expectFilterCases('admin', (q) => listAdmin(fx, q), { extensions: adminAll, documented: adminDocumented }, adminCases(), /unknown|never/)
  })

  test('admin: another project’s entries never show; Globex sees only its own', async () => {
    const globex = (await walk((q) => listAdmin(fx, q, { token: fx.aliceGlobex, project: 'Globex' }))).entries
    expect(globex.length).toBeGreaterThan(0)
    const acmeIds = new Set(adminAll.map((e) => e.id))
    expect(globex.some((e) => acmeIds.has(e.id))).toBe(false)
  })

  // ── Enum values and other parameters ──

  test('every enum value of the compatibility document is accepted as a filter; an extension value only with extensions=true', async () => {
    const list = (q: Record<string, string>) => listAdmin(fx, q)
    await expectEnumFilter(list, adminAll, 'type', documented('listAdminLogs', 'type'), [])
    await expectEnumFilter(list, adminAll, 'initiator', documented('listAdminLogs', 'initiator'), [...EXTENSION_VALUES.listAdminLogs.initiator!])
    await expectEnumFilter(list, adminAll, 'resource', documented('listAdminLogs', 'resource'), [...EXTENSION_VALUES.listAdminLogs.resource!])
    // What Trellis writes is within the document's values plus DESIGN §7's extensions, and the service agrees on which is which.
    expect([...ADMIN_LOG_RESOURCES].sort() as string[]).toEqual([...documented('listAdminLogs', 'resource'), ...EXTENSION_VALUES.listAdminLogs.resource!].sort())
  })

  const badQuery = (name: string, value: string) => badParameter((query) => ({ path: adminPath(query), headers: bearer(fx.alice) }), name, value)

  describe('bad parameters → 400 invalid_parameter naming the parameter', () => {
    scenarios(
      [
        ...BAD_EXTENSIONS.map((value) => badQuery('extensions', value)),
        badQuery('type', 'delete'),
        badQuery('type', 'Add'),
        badQuery('initiator', 'System'),
        badQuery('initiator', 'cli'),
        badQuery('resource', 'token'),
        badQuery('resource', 'USER'),
        badQuery('userId', '-1'),
        badQuery('createdAt.gte', 'not-a-date'),
        ...BAD_LIMITS.map((limit) => badQuery('limit', limit)),
      ],
      sendAdmin,
    )
  })

  listParameterTests({
    list: (query) => listAdmin(fx, query),
    echoed: { projectName: 'Acme' },
    documented: () => adminDocumented,
    all: () => adminAll,
    filter: { type: 'add' },
    nothing: { userEmail: 'nobody@example.com' },
  })

  test('hasMore: exactly `limit` matching entries → false; one more than limit → true', async () => {
    await expectHasMoreBoundaries('admin', (q) => listAdmin(fx, q), [
      {},
      { userEmail: 'carol@example.com' },
      { extensions: 'true' },
      { initiator: 'system', extensions: 'true' },
      { userEmail: 'carol@example.com', extensions: 'true' },
    ])
  })

  // ── Scope and role matrix ──

  describe('scope and role matrix (DESIGN §4 order: token → user → project → scope → role → existence)', () => {
    scenarios(scopeMatrix('admin', () => lf), sendAdmin)
  })

  describe('unknown project → 403 (nothing revealed)', () => {
    scenarios([{ name: 'project acme (case differs) → 403 wrong_project', request: () => ({ path: adminPath({}, 'acme'), headers: bearer(fx.alice) }), status: 403, code: 'wrong_project' }], sendAdmin)
  })

  test('a deactivated user’s token → 403; reactivated → 200; demoted → 403 at once', async () => {
    await writeNow(fx.env.store, function* () {
      return yield* setUserDeactivated(fx.env.clock, fx.users.carol.id, true, null)
    })
    const carol = (await tokenFor(fx.env.store, fx.env.clock, 'carol', ['all'])).value
    expectError(await listAdmin(fx, {}, { token: carol }), 403, 'user_deactivated')
    await writeNow(fx.env.store, function* () {
      return yield* setUserDeactivated(fx.env.clock, fx.users.carol.id, false, null)
    })
    expect((await listAdmin(fx, {}, { token: carol })).status).toBe(200)
    // Roles are read at request time: demoting carol cuts her token off at once.
    const acme = projectId(fx.env.store, 'Acme')
    await writeNow(fx.env.store, function* () {
      return yield* setProjectMember(fx.env.clock, { projectId: acme, userId: fx.users.carol.id, role: 'editor', actorId: null })
    })
    expectError(await listAdmin(fx, {}, { token: carol }), 403, 'insufficient_role')
    await writeNow(fx.env.store, function* () {
      return yield* setProjectMember(fx.env.clock, { projectId: acme, userId: fx.users.carol.id, role: 'admin', actorId: null })
    })
  })

  // ── Append-only ──

  test('append-only: an UPDATE on the admin log fails with the trigger’s message', () => {
    const before = tableContents(fx.env.store)
    expect(() => execute(fx.env.store, "UPDATE admin_logs SET new_value = '{}' WHERE id = (SELECT max(id) FROM admin_logs)")).toThrow('admin log entries are append-only')
    expect(() => execute(fx.env.store, "UPDATE admin_logs SET initiator = 'system'")).toThrow('admin log entries are append-only')
    const after = tableContents(fx.env.store)
    for (const table of ['admin_logs']) expect(after[table]).toEqual(before[table]!)
  })

  describe('append-only: no route writes to the log — PATCH / PUT / DELETE / POST on the list URL → 405 (Allow: GET, HEAD), on entries → 404', () => {
    scenarios(noWriteRoutes('admin', () => lf, ['PATCH', 'DELETE']), sendAdmin)
  })
})

// ── Paging past a burst ─────────────────────────────────────────────────────

describe('paging past a burst of more than `limit` entries in one millisecond', () => {
  /*
   * Everything one transaction writes happens at one clock reading: `trellis apply` with 130 teams writes 130+
   * admin entries at once. Entries take createdAt strictly after the previous one in their list (+1 ms), so
   * paging reaches every one of them.
   */
  test('every admin entry of a 130-team apply is reachable by createdAt paging', async () => {
    const env = testEnv()
    try {
      const teams = Array.from({ length: 130 }, (_, i) => ({ name: `t${i}` }))
      await applyNow(
        { users: [{ email: 'a@example.com', username: 'a' }], projects: [{ name: 'P', environments: ['production'], members: [{ user: 'a@example.com', role: 'admin' }], teams }] },
        { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl },
      )
      const app = testApp(env)
      const token = (await tokenFor(env.store, env.clock, 'a', ['all'], { project: 'P' })).value
      const list = (query: Record<string, string>) => send<Page<AdminLog>>(app, request(adminPath(query, 'P'), { headers: bearer(token) }), 'admin')
      // Project P's entries (the instance-wide ones — the user apply created — belong to no project's log).
      const count = (where: string) => (queryOne(env.store, `SELECT count(*) AS n FROM admin_logs WHERE project_id IS NOT NULL ${where}`) as { n: number }).n
      const total = count('')
      const extensions = count(`AND (resource IN (${EXTENSION_VALUES.listAdminLogs.resource!.map((r) => `'${r}'`).join(', ')}) OR initiator = 'system')`)
      expect(total - extensions).toBeGreaterThan(130)
      expect(extensions).toBeGreaterThan(0) // the token's api-token entry
      expect((await walk(list, {}, 100)).entries).toHaveLength(total - extensions)
      expect((await walk((q) => list({ ...q, extensions: 'true' }), {}, 100)).entries).toHaveLength(total)
    } finally {
      env.cleanup()
    }
  })
})

// ── Retention ───────────────────────────────────────────────────────────────

describe('retention: pruneLogs and TRELLIS_LOG_RETENTION_DAYS', () => {
  let fx: Fx
  const DAY = 86_400_000
  let T0 = 0
  beforeAll(async () => {
    fx = await buildFx()
    T0 = fx.env.clock.now()
  })
  afterAll(() => fx.env.cleanup())

  test('deletes only entries older than the cutoff (activity with their record rows, admin), then one system entry per project', async () => {
    const { env } = fx
    // The apply file's own entries (records created, notes imported) were written at T0 too.
    const applied = (queryOne(env.store, 'SELECT count(*) AS n FROM activity_logs') as { n: number }).n
    const appliedRecordRows = (queryOne(env.store, 'SELECT count(*) AS n FROM activity_log_records') as { n: number }).n
    const note = (title: string) =>
      fx.app.handle(
        request(notesPath(), { method: 'POST', headers: bearer(fx.alice), json: { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title, content: '<p>x</p>' } }),
      )
    // At T0: the apply and the token (admin) and two notes (activity).
    expect((await note('old 1')).status).toBe(201)
    expect((await note('old 2')).status).toBe(201)
    // One millisecond before the future cutoff, and exactly at it.
    env.clock.set(T0 + 3 * DAY - 1)
    expect((await note('just before')).status).toBe(201)
    await tokenFor(env.store, env.clock, 'carol', ['notes:read'])
    env.clock.set(T0 + 3 * DAY)
    expect((await note('at cutoff')).status).toBe(201)
    await tokenFor(env.store, env.clock, 'carol', ['notes:read'], { name: 'kept' })
    env.clock.set(T0 + 10 * DAY)
    expect((await note('new')).status).toBe(201)
    await listReadable(env.store, 'activity_logs') // PostgreSQL: dated and chained by the lists' pass

    const count = (sql: string) => (queryOne(env.store, sql) as { n: number }).n
    const cutoff = T0 + 3 * DAY
    const cutoffUs = cutoff * 1000 // log times are stored in µs
    const oldActivity = count(`SELECT count(*) AS n FROM activity_logs WHERE created_at < ${cutoffUs}`)
    const oldAdmin = count(`SELECT count(*) AS n FROM admin_logs WHERE created_at < ${cutoffUs}`)
    const oldRecordRows = count(`SELECT count(*) AS n FROM activity_log_records WHERE log_id IN (SELECT id FROM activity_logs WHERE created_at < ${cutoffUs})`)
    expect(oldActivity).toBe(applied + 3)
    expect(oldRecordRows).toBe(appliedRecordRows + 3)
    expect(oldAdmin).toBeGreaterThan(10)
    const keptActivity = queryAll(env.store, `SELECT * FROM activity_logs WHERE created_at >= ${cutoffUs} ORDER BY id`)
    const keptAdmin = queryAll(env.store, `SELECT * FROM admin_logs WHERE created_at >= ${cutoffUs} ORDER BY id`)
    const keptRecords = count('SELECT count(*) AS n FROM activity_log_records') - oldRecordRows
    const adminBefore = maxId(env, 'admin_logs')

    const result = await pruneLogs(env.store, env.clock, 7, auditSigningOf(env))
    expect(result).toEqual({ activityLogs: oldActivity, adminLogs: oldAdmin, cutoff })
    expect(queryAll(env.store, `SELECT * FROM activity_logs ORDER BY id`)).toEqual(keptActivity)
    expect(queryAll(env.store, `SELECT * FROM admin_logs WHERE id <= ${adminBefore} ORDER BY id`)).toEqual(keptAdmin)
    // The record rows of pruned entries went with them (cascade); no orphan remains.
    expect(count('SELECT count(*) AS n FROM activity_log_records')).toBe(keptRecords)
    expect(count('SELECT count(*) AS n FROM activity_log_records WHERE log_id NOT IN (SELECT id FROM activity_logs)')).toBe(0)

    // Through the API: the activity log keeps the entry at the cutoff and the new one.
    const activity = await listActivity(fx, { limit: '100' })
    expect(activity.body.data.map((e) => e.label)).toEqual(['created note "new"', 'created note "at cutoff"'])

    // One log-retention entry in each project, by the system, without a user.
    const expectedName = `pruned ${oldActivity} activity and ${oldAdmin} admin log entries older than ${iso(cutoff)} (retention 7 days)`
    for (const project of ['Acme', 'Globex']) {
      const entries = await adminSince(fx, adminBefore, project)
      expect({ project, entries }).toEqual({
        project,
        entries: [
          {
            object: 'adminLog',
            id: expect.any(String),
            type: 'remove',
            resource: 'log-retention',
            initiator: 'system',
            createdAt: listed(T0 + 10 * DAY),
            newValue: { name: expectedName },
          },
        ],
      })
      const bySystem = await listAdmin(fx, { initiator: 'system', extensions: 'true' }, { project })
      expect(bySystem.body.data.map((e) => e.resource)).toEqual(['log-retention'])
      expect((await listAdmin(fx, { resource: 'log-retention', extensions: 'true' }, { project })).body.data).toEqual(bySystem.body.data)
      // An extension entry: the default list leaves it out.
      expect((await listAdmin(fx, { limit: '100' }, { project })).body.data.map((e) => e.resource)).not.toContain('log-retention')
    }
    expect(rowsAfter(env, 'admin_logs', adminBefore)).toHaveLength(2)

    // Nothing older left: prunes nothing and writes nothing.
    const again = await pruneLogs(env.store, env.clock, 7, auditSigningOf(env))
    expect(again).toMatchObject({ activityLogs: 0, adminLogs: 0 })
    expect(rowsAfter(env, 'admin_logs', adminBefore)).toHaveLength(2)
    // A longer retention does not touch the kept entries either.
    env.clock.set(T0 + 11 * DAY)
    expect(await pruneLogs(env.store, env.clock, 30, auditSigningOf(env))).toMatchObject({ activityLogs: 0, adminLogs: 0 })
    expect(rowsAfter(env, 'admin_logs', adminBefore)).toHaveLength(2)
  })

  test('TRELLIS_LOG_RETENTION_DAYS: unset or blank keeps forever; whole days 1–36500; anything else is a ConfigError naming it', () => {
    const load = (value?: string) => loadConfig({ data: '/tmp/trellis-retention' }, value === undefined ? {} : { TRELLIS_LOG_RETENTION_DAYS: value })
    expect(load().logRetentionDays).toBeNull()
    expect(load('').logRetentionDays).toBeNull()
    expect(load('  ').logRetentionDays).toBeNull()
    expect(load('30').logRetentionDays).toBe(30)
    expect(load(' 7 ').logRetentionDays).toBe(7)
    expect(load('1').logRetentionDays).toBe(1)
    expect(load('36500').logRetentionDays).toBe(36_500)
    for (const bad of ['0', '-1', 'abc', '1.5', '7d', '36501', '1e3', '0x10']) {
      expect(() => load(bad)).toThrow(ConfigError)
      expect(() => load(bad)).toThrow('TRELLIS_LOG_RETENTION_DAYS')
    }
  })
})

// ── 429 bodies ──────────────────────────────────────────────────────────────

describeRateLimit('admin')

// ── The compatibility schema itself ─────────────────────────────────────────

describe('the validator: the document as published, extensions only where DESIGN §7 lists them', () => {
  test('the default validator is the unmodified document; the extensions=true check accepts only DESIGN §7 values on their own fields', () => {
    const admin = (resource: string, initiator: string) => ({
      hasMore: false,
      parameters: { projectName: 'Acme', limit: 10 },
      data: [{ object: 'adminLog', id: '1', type: 'add', resource, initiator, createdAt: '2026-01-01T00:00:00.000Z', newValue: { name: 'x' } }],
    })
    expect(VALIDATORS.admin.ok(admin('team', 'administrator'))).toBe(true)
    expect(VALIDATORS.admin.ok(admin('api-token', 'administrator'))).toBe(false)
    expect(VALIDATORS.admin.ok(admin('team', 'system'))).toBe(false)
    expect(assertValidWithExtensions('listAdminLogs', admin('api-token', 'system'))).toBe(1)
    expect(() => assertValidWithExtensions('listAdminLogs', admin('token', 'administrator'))).toThrow(/beyond DESIGN/)
    expect(() => assertValidWithExtensions('listAdminLogs', admin('team', 'cli'))).toThrow(/beyond DESIGN/)
    // An extension value on another field is not an extension.
    expect(() => assertValidWithExtensions('listAdminLogs', admin('system', 'administrator'))).toThrow(/beyond DESIGN/)
  })
})

/**
 * Instance administrators and project managers over HTTP — people (create, invite, deactivate, instance
 * administration), new projects, project structure, members and team memberships, records — with their rights
 * (401, 403 for a project admin on instance routes), validation (400 naming the field), admin log entries (the
 * documented ones validated against the published document) and the last-admin rules (409), also from the CLI.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createSession } from '../src/modules/auth/sessions.ts'
import { usePasswordHashing } from '../src/modules/users/service.ts'
import { queryAll, request, runCli, runNow, processEnv, testApp, type TestEnv, testEnv } from './helpers.ts'
import { acmeDocument, applyAcme, tokenFor, userId } from './support/acme.ts'
import { assertValid, assertValidWithExtensions, validatorFor } from './support/compat-schema.ts'

let env: TestEnv
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  // The apply key: alice is an instance administrator.
  ;(document.users.find((u) => u.email === "alice@example.com") as unknown as Record<string, unknown>).instanceAdmin = true
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  app = testApp(env)
  for (const name of ['alice', 'bob', 'carol', 'dave']) {
    cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
  }
})
afterAll(() => env.cleanup())

type Body = Record<string, any>

async function call(method: string, path: string, as: string | { bearer: string } | null, json?: unknown) {
  const headers: Record<string, string> = {}
  if (typeof as === 'string') headers.cookie = cookies[as]!
  else if (as) headers.authorization = `Bearer ${as.bearer}`
  const response = await app.handle(request(path, { method, headers, json }))
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as Body, headers: response.headers }
}

/** The instance-wide admin log entries (no project), newest first. */
function instanceLog(): { type: string; resource: string; user_id: number | null; new_value: string | null }[] {
  return queryAll(env.store, 'SELECT type, resource, user_id, new_value FROM admin_logs WHERE project_id IS NULL ORDER BY id DESC') as never
}

async function adminLog(project: string, query = '', as = project === 'Acme' ? 'carol' : 'alice') {
  const token = await tokenFor(env.store, env.clock, as, ['admin_logs:read'], { project })
  const { body } = await call('GET', `/v1/project/${encodeURIComponent(project)}/admin-logs?limit=100${query}`, { bearer: token.value })
  return body
}

describe('instance routes: rights', () => {
  test('no caller is 401; a project admin who is not an instance administrator is 403; a token is 403', async () => {
    expect((await call('GET', '/v1/instance/users', null)).status).toBe(401)
    const carol = await call('GET', '/v1/instance/users', 'carol')
    expect(carol.status).toBe(403)
    expect(carol.body.code).toBe('instance_admin_required')
    expect((await call('POST', '/v1/instance/users', 'carol', { email: 'x@example.com', username: 'x' })).status).toBe(403)
    expect((await call('POST', '/v1/projects', 'carol', { name: 'Nope' })).status).toBe(403)
    expect((await call('PUT', `/v1/instance/users/${userId(env.store, 'dave')}`, 'carol', { username: 'd', instanceAdmin: false, deactivated: false })).status).toBe(403)
    expect((await call('POST', `/v1/instance/users/${userId(env.store, 'dave')}/invitation`, 'carol')).status).toBe(403)
    const token = await tokenFor(env.store, env.clock, 'alice', ['all'])
    expect((await call('GET', '/v1/instance/users', { bearer: token.value })).body.code).toBe('instance_admin_required')
  })

  test('an instance administrator lists every user', async () => {
    const { status, body } = await call('GET', '/v1/instance/users', 'alice')
    expect(status).toBe(200)
    const alice = body.data.find((u: Body) => u.email === 'alice@example.com')
    expect(alice).toMatchObject({ instanceAdmin: true, deactivated: false })
    expect(body.data.find((u: Body) => u.email === 'bob@example.com').instanceAdmin).toBe(false)
  })
})

describe('people', () => {
  test('create with a password: 201, no invitation, an instance-wide admin log entry by the administrator', async () => {
    const { status, body } = await call('POST', '/v1/instance/users', 'alice', { email: 'Erin@Example.com', username: 'erin', password: 'erin-password-2026' })
    expect(status).toBe(201)
    expect(body.user).toMatchObject({ email: 'erin@example.com', username: 'erin', instanceAdmin: false, hasPassword: true })
    expect(body.invitation).toBeUndefined()
    expect(instanceLog()[0]).toMatchObject({ type: 'add', resource: 'user', user_id: userId(env.store, 'alice') })
    expect(instanceLog()[0]!.new_value).toContain('erin@example.com created as user')
  })

  // On the event loop, hashing held /healthz 0.8 s behind it (test/fuzz.test.ts watches /healthz through every case).
  test('a new password is hashed off the event loop: timers keep firing while it is hashed', async () => {
    let turns = 0
    // At the production cost (tests hash at a cheap one): a hash of a millisecond leaves no timer a turn either way.
    usePasswordHashing('production')
    const ticker = setInterval(() => turns++, 1)
    try {
      const { status } = await call('POST', '/v1/instance/users', 'alice', { email: 'hashing@example.com', username: 'hashing', password: 'hashing-password-2026' })
      expect(status).toBe(201)
    } finally {
      clearInterval(ticker)
      usePasswordHashing('weak-for-tests')
    }
    expect(turns).toBeGreaterThan(0)
  })

  test('validation names the field; a taken email is 409', async () => {
    const bad = await call('POST', '/v1/instance/users', 'alice', { email: 'not-an-email', username: 'x' })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain("'email'")
    const short = await call('POST', '/v1/instance/users', 'alice', { email: 'short@example.com', username: 'x', password: 'short' })
    expect(short.status).toBe(400)
    expect(short.body.message).toContain('password')
    const blank = await call('POST', '/v1/instance/users', 'alice', { email: 'blank@example.com', username: '   ' })
    expect(blank.status).toBe(400)
    expect(blank.body.message).toContain("'username'")
    const taken = await call('POST', '/v1/instance/users', 'alice', { email: 'BOB@example.com', username: 'bob2' })
    expect(taken.status).toBe(409)
    expect(taken.body.code).toBe('user_exists')
  })

  test('invitation: shown once, signs the person in, single use, replaced by a newer one, expires', async () => {
    const created = await call('POST', '/v1/instance/users', 'alice', { email: 'frank@example.com', username: 'frank', instanceAdmin: true })
    expect(created.status).toBe(201)
    expect(created.body.user).toMatchObject({ hasPassword: false, instanceAdmin: true })
    const url = new URL(created.body.invitation.url)
    expect(url.origin).toBe('http://trellis.test')
    expect(url.pathname).toBe('/invite')
    const token = url.searchParams.get('token')!
    expect(JSON.stringify(queryAll(env.store, 'SELECT * FROM invitations'))).not.toContain(token)
    expect(instanceLog()[0]).toMatchObject({ type: 'add', resource: 'invitation' })

    const page = await app.handle(request(`/invite?token=${encodeURIComponent(token)}`))
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('frank@example.com')

    expect((await call('POST', '/auth/invitation', null, { token, password: 'short' })).status).toBe(400)
    const accepted = await call('POST', '/auth/invitation', null, { token, password: 'frank-password-2026' })
    expect(accepted.status).toBe(200)
    expect(accepted.body.user.email).toBe('frank@example.com')
    const cookie = accepted.headers.get('set-cookie')!.split(';')[0]!
    const me = await app.handle(request('/v1/account', { headers: { cookie } }))
    expect(((await me.json()) as Body).user.email).toBe('frank@example.com')
    expect(instanceLog()[0]).toMatchObject({ type: 'update', resource: 'invitation', user_id: userId(env.store, 'frank') })

    const again = await call('POST', '/auth/invitation', null, { token, password: 'frank-password-2026' })
    expect(again.status).toBe(404)
    expect(again.body.code).toBe('invalid_invitation')
    expect((await app.handle(request(`/invite?token=${encodeURIComponent(token)}`))).status).toBe(404)

    const frank = userId(env.store, 'frank')
    const first = await call('POST', `/v1/instance/users/${frank}/invitation`, 'alice')
    const second = await call('POST', `/v1/instance/users/${frank}/invitation`, 'alice')
    expect(first.status).toBe(201)
    const firstToken = new URL(first.body.invitation?.url ?? first.body.url).searchParams.get('token')!
    expect((await call('POST', '/auth/invitation', null, { token: firstToken, password: 'frank-password-2027' })).status).toBe(404)
    const secondToken = new URL(second.body.url).searchParams.get('token')!
    env.clock.advance(8 * 24 * 3600 * 1000)
    expect((await call('POST', '/auth/invitation', null, { token: secondToken, password: 'frank-password-2027' })).status).toBe(404)
    // Sessions last 7 days too: sign everyone in again.
    for (const name of Object.keys(cookies)) cookies[name] = `trellis_session=${(await runNow(env.store, createSession(env.clock, userId(env.store, name), false))).id}`
    expect((await call('POST', '/v1/instance/users/999999/invitation', 'alice')).status).toBe(404)
    expect((await call('POST', '/v1/instance/users/0/invitation', 'alice')).status).toBe(400)
  })

  test('instance administration and deactivation: the last instance administrator stays (409)', async () => {
    const frank = userId(env.store, 'frank')
    const alice = userId(env.store, 'alice')
    // frank (an instance administrator) steps down; alice is then the last one.
    expect((await call('PUT', `/v1/instance/users/${frank}`, 'alice', { username: 'frank', instanceAdmin: false, deactivated: false })).body.instanceAdmin).toBe(false)
    const revoke = await call('PUT', `/v1/instance/users/${alice}`, 'alice', { username: 'alice', instanceAdmin: false, deactivated: false })
    expect(revoke.status).toBe(409)
    expect(revoke.body.code).toBe('last_instance_admin')
    const deactivate = await call('PUT', `/v1/instance/users/${alice}`, 'alice', { username: 'alice', instanceAdmin: true, deactivated: true })
    expect(deactivate.body.code).toBe('last_instance_admin')
    // Deactivate and reactivate dave: his sessions end; the entries are in his projects' logs.
    const dave = userId(env.store, 'dave')
    const off = await call('PUT', `/v1/instance/users/${dave}`, 'alice', { username: 'dave', instanceAdmin: false, deactivated: true })
    expect(off.body.deactivated).toBe(true)
    expect((await call('GET', '/v1/account', 'dave')).status).toBe(401)
    expect((await call('PUT', `/v1/instance/users/${dave}`, 'alice', { username: 'dave', instanceAdmin: false, deactivated: false })).body.deactivated).toBe(false)
    cookies.dave = `trellis_session=${(await runNow(env.store, createSession(env.clock, dave, false))).id}`
    expect((await call('PUT', '/v1/instance/users/999999', 'alice', { username: 'x', instanceAdmin: false, deactivated: false })).status).toBe(404)
    const blank = await call('PUT', `/v1/instance/users/${dave}`, 'alice', { username: ' ', instanceAdmin: false, deactivated: false })
    expect(blank.status).toBe(400)
    expect(blank.body.message).toContain("'username'")
    const log = await adminLog('Acme', '&extensions=true&resource=user')
    expect(log.data.map((e: Body) => e.newValue.name)).toContain('dave@example.com deactivated')
  })
})

describe('projects', () => {
  test('an instance administrator creates a project and is its first admin; names are checked', async () => {
    const created = await call('POST', '/v1/projects', 'alice', { name: 'Solo' })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({ name: 'Solo', sso: false })
    expect((await call('POST', '/v1/projects', 'alice', { name: 'Solo' })).body.code).toBe('name_taken')
    const blank = await call('POST', '/v1/projects', 'alice', { name: '  ' })
    expect(blank.status).toBe(400)
    expect(blank.body.message).toContain("'name'")
    const log = await adminLog('Solo', '&extensions=true')
    expect(log.data.filter((e: Body) => e.resource !== 'api-token').map((e: Body) => `${e.type} ${e.resource}`)).toEqual(['add user-project', 'add project'])
    // The default page is valid against the published document (the project entry is an extension).
    assertValid(validatorFor('listAdminLogs', 200), await adminLog('Solo'))
    expect((await adminLog('Solo')).data.map((e: Body) => e.resource)).toEqual(['user-project'])
  })

  test('the last admin of a project is never demoted or removed (409), from the API and from the CLI', async () => {
    const alice = userId(env.store, 'alice')
    const demote = await call('PUT', `/v1/project/Solo/members/${alice}`, 'alice', { role: 'editor' })
    expect(demote.status).toBe(409)
    expect(demote.body.code).toBe('last_project_admin')
    expect((await call('DELETE', `/v1/project/Solo/members/${alice}`, 'alice')).body.code).toBe('last_project_admin')
    const cli = await runCli(['member', 'set', '--data', env.dataDir, '--project', 'Solo', '--user', 'alice@example.com', '--role', 'user'], { env: processEnv(env) })
    expect(cli.code).toBe(1)
    expect(cli.stderr).toContain('last admin')
    const revoke = await runCli(['user', 'instance-admin', '--data', env.dataDir, '--email', 'alice@example.com', '--revoke'], { env: processEnv(env) })
    expect(revoke.code).toBe(1)
    expect(revoke.stderr).toContain('last instance administrator')
  })

  test('structure: add and rename environments, teams, collections (rights, 404, 409, admin log)', async () => {
    // carol is an admin of Acme (not an instance administrator); bob an editor.
    expect((await call('POST', '/v1/project/Acme/environments', 'bob', { environmentName: 'qa' })).body.code).toBe('insufficient_role')
    expect((await call('POST', '/v1/project/Solo/environments', 'carol', { environmentName: 'qa' })).status).toBe(404)
    expect((await call('POST', '/v1/project/Acme/environments', null, { environmentName: 'qa' })).status).toBe(401)
    expect((await call('POST', '/v1/project/Acme/environments', 'carol', { environmentName: 'qa' })).status).toBe(201)
    expect((await call('POST', '/v1/project/Acme/environments', 'carol', { environmentName: 'qa' })).body.code).toBe('name_taken')
    const control = await call('POST', '/v1/project/Acme/teams', 'carol', { teamName: 'a\u0007b' })
    expect(control.status).toBe(400)
    expect(control.body.message).toContain("'teamName'") // the field the caller sent (the console shows errors beside their field)
    expect((await call('PATCH', '/v1/project/Acme/environments/qa', 'carol', { environmentName: 'preprod' })).status).toBe(200)
    expect((await call('PATCH', '/v1/project/Acme/environments/nope', 'carol', { environmentName: 'x' })).status).toBe(404)
    expect((await call('PATCH', '/v1/project/Acme/environments/preprod', 'carol', { environmentName: 'production' })).body.code).toBe('name_taken')
    expect((await call('POST', '/v1/project/Acme/teams', 'carol', { teamName: 'Sales' })).status).toBe(201)
    expect((await call('PATCH', '/v1/project/Acme/teams/Sales', 'carol', { teamName: 'Sales & Ops' })).status).toBe(200)
    expect((await call('POST', '/v1/project/Acme/collections', 'carol', { collectionName: 'leads' })).status).toBe(201)
    expect((await call('PATCH', '/v1/project/Acme/collections/leads', 'carol', { collectionName: 'prospects' })).status).toBe(200)
    // alice manages Solo's structure as its admin, and any project as an instance administrator.
    expect((await call('POST', '/v1/project/Solo/environments', 'alice', { environmentName: 'production' })).status).toBe(201)
    const log = await adminLog('Acme')
    assertValid(validatorFor('listAdminLogs', 200), log)
    const entries = log.data.slice(0, 4).map((e: Body) => [e.type, e.resource, e.user?.email, e.previousValue?.name, e.newValue?.name])
    expect(entries).toEqual([
      ['update', 'team', 'carol@example.com', 'Sales', 'Sales & Ops'],
      ['add', 'team', 'carol@example.com', undefined, 'Sales'],
      ['update', 'environment', 'carol@example.com', 'qa', 'preprod'],
      ['add', 'environment', 'carol@example.com', undefined, 'qa'],
    ])
    const all = await adminLog('Acme', '&extensions=true&resource=collection')
    expect(assertValidWithExtensions('listAdminLogs', all)).toBe(all.data.length)
    expect(all.data[0]).toMatchObject({ type: 'update', previousValue: { name: 'leads' }, newValue: { name: 'prospects' } })
  })

  test('settings: rename and SSO, by a project admin; a renamed project keeps its tokens', async () => {
    const token = await tokenFor(env.store, env.clock, 'alice', ['admin_logs:read'], { project: 'Solo' })
    expect((await call('PUT', '/v1/project/Acme/settings', 'bob', { projectName: 'Acme', sso: false })).status).toBe(403)
    const renamed = await call('PUT', '/v1/project/Solo/settings', 'alice', { projectName: 'Solo Co', sso: false })
    expect(renamed.body).toEqual({ name: 'Solo Co', sso: false })
    expect((await call('PUT', '/v1/project/Solo%20Co/settings', 'alice', { projectName: 'Acme', sso: false })).body.code).toBe('name_taken')
    const sso = await call('PUT', '/v1/project/Solo%20Co/settings', 'alice', { projectName: 'Solo Co', sso: true })
    expect(sso.body.sso).toBe(true)
    // alice's password session can no longer open it; the CLI (or an SSO session) turns it off again.
    expect((await call('PUT', '/v1/project/Solo%20Co/settings', 'alice', { projectName: 'Solo Co', sso: false })).body.code).toBe('sso_required')
    // The token made before the rename works under the new name (until SSO refuses it).
    expect((await call('GET', '/v1/project/Solo%20Co/admin-logs', { bearer: token.value })).body.code).toBe('sso_required')
    // apply turns SSO off again, through the same service (and the same admin log entry).
    await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, { users: [], projects: [{ name: 'Solo Co', sso: false }] })
    const log = (await call('GET', '/v1/project/Solo%20Co/admin-logs?extensions=true&resource=project', { bearer: token.value })).body
    expect(log.data.map((e: Body) => [e.newValue, e.user?.email])).toEqual([
      [{ name: 'Solo Co (SSO off)' }, undefined],
      [{ name: 'Solo Co (SSO on)' }, 'alice@example.com'],
      [{ name: 'Solo Co (SSO off)' }, 'alice@example.com'],
      [{ name: 'Solo (SSO off)' }, 'alice@example.com'],
    ])
  })

  test('members and team memberships (admin log user-project entries)', async () => {
    const erin = userId(env.store, 'erin')
    const added = await call('PUT', `/v1/project/Acme/members/${erin}`, 'carol', { role: 'editor' })
    expect(added.status).toBe(200)
    expect(added.body).toMatchObject({ permissionLevel: 'editor', teams: [] })
    const bad = await call('PUT', `/v1/project/Acme/members/${erin}`, 'carol', { role: 'boss' })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain('role')
    expect((await call('PUT', '/v1/project/Acme/members/999999', 'carol', { role: 'editor' })).status).toBe(404)
    const inTeam = await call('PUT', `/v1/project/Acme/teams/Support/members/${erin}`, 'carol')
    expect(inTeam.body.teams).toEqual([{ object: 'team', name: 'Support' }])
    expect((await call('PUT', `/v1/project/Acme/teams/Nope/members/${erin}`, 'carol')).status).toBe(404)
    const frank = userId(env.store, 'frank')
    expect((await call('PUT', `/v1/project/Acme/teams/Support/members/${frank}`, 'carol')).body.code).toBe('not_a_member')
    const removed = await call('DELETE', `/v1/project/Acme/teams/Support/members/${erin}`, 'carol')
    expect(removed.status, JSON.stringify(removed.body)).toBe(204)
    expect((await call('DELETE', `/v1/project/Acme/teams/Support/members/${erin}`, 'carol')).status).toBe(404)
    expect((await call('DELETE', `/v1/project/Acme/members/${erin}`, 'carol')).status).toBe(204)
    expect((await call('DELETE', `/v1/project/Acme/members/${erin}`, 'carol')).status).toBe(404)
    const log = await adminLog('Acme', '&resource=user-project')
    assertValid(validatorFor('listAdminLogs', 200), log)
    expect(log.data.slice(0, 4).map((e: Body) => e.type)).toEqual(['remove', 'update', 'update', 'add'])
  })

  test('records: create, replace, unchanged; validation; the activity entry', async () => {
    const path = '/v1/project/Acme/environment/production/collection/orders/records/ord%2F9'
    const created = await call('PUT', path, 'carol', { teamName: 'Support', data: { total: 12 } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({ id: 'ord/9', data: { total: 12 }, outcome: 'created' })
    expect((await call('PUT', path, 'carol', { teamName: 'Support', data: { total: 13 } })).body.outcome).toBe('updated')
    expect((await call('PUT', path, 'carol', { teamName: 'Support', data: { total: 13 } })).body.outcome).toBe('unchanged')
    const notObject = await call('PUT', path, 'carol', { teamName: 'Support', data: [1] })
    expect(notObject.status).toBe(400)
    expect(notObject.body.message).toContain('data')
    expect((await call('PUT', path, 'carol', { teamName: 'Nope', data: {} })).status).toBe(404)
    expect((await call('PUT', '/v1/project/Acme/environment/production/collection/nope/records/x', 'carol', { teamName: 'Support', data: {} })).status).toBe(404)
    // A member who is no admin writes through a team of theirs that may edit the collection, and only so.
    const bobs = await call('PUT', '/v1/project/Acme/environment/production/collection/orders/records/ord_bob', 'bob', { teamName: 'Support', data: { total: 1 } })
    expect(bobs.status, JSON.stringify(bobs.body)).toBe(201)
    const notHisTeam = await call('PUT', path, 'bob', { teamName: 'Billing', data: {} })
    expect([notHisTeam.status, notHisTeam.body.code]).toEqual([403, 'forbidden'])
    expect(notHisTeam.body.message).toContain('Billing')
    expect((await call('PUT', path, 'dave', { teamName: 'Billing', data: {} })).status).toBe(403)
    const token = await tokenFor(env.store, env.clock, 'carol', ['activity_logs:read'])
    const { body } = await call('GET', '/v1/project/Acme/environment/production/activity-logs?recordId=ord%2F9', { bearer: token.value })
    expect(body.data, JSON.stringify(body)).toBeDefined()
    expect(body.data.map((e: Body) => [e.action, e.label])).toEqual([
      ['update', 'updated in the console or the management API: total 12 → 13'],
      ['create', 'created in the console or the management API: total (none) → 12'],
    ])
  })
})

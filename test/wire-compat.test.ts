/**
 * Strict wire compatibility (DESIGN "Wire compatibility"). After a realistic mix of activity
 * through the real app — apply (twice), retention, tokens, notes written and archived, runs succeeding, failing
 * and cancelled through the executor, a cancelled run retried, manual triggers, workflows published, webhooks toggled and regenerated,
 * a completion callback added and removed,
 * roles changed, a user deactivated and reactivated, console reads — every page of the notes, activity-log and
 * admin-log lists, walked three at a time with `createdAt.lt` as docs/api.md says, validates against the
 * compatibility document AS PUBLISHED (only DESIGN's `exclusiveMinimum` quirk dropped), and the walk is complete:
 * it holds exactly the rows the document can describe, in full pages. With `extensions=true` every row comes back.
 *
 * Which rows the document can describe is decided here from the document's own enums and the raw columns, not
 * from the server's flag.
 */
import { runOp } from '../src/db/sqlite/op-runner.ts'
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createProject } from '../src/modules/projects/structure.ts'
import { createInvitation } from '../src/modules/users/invitations.ts'
import { setOutboundAllow } from '../src/modules/instance/outbound-allow.ts'
import { findUser } from '../src/modules/users/service.ts'
import type { ValidateFunction } from 'ajv'
import { drizzle } from 'drizzle-orm/bun-sqlite'
import type { Db } from '../src/db/dialect.ts'
import { writeNow } from '../src/db/write.ts'
import * as schema from '../src/db/schema.ts'
import { Executor } from '../src/executor/executor.ts'
import type { Clock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { parseDateFilters } from '../src/http/list.ts'
import { ACTIVITY_DATE_FIELDS } from '../src/modules/activity-logs/query.ts'
import { listActivityLogIds } from '../src/modules/activity-logs/service.ts'
import { pruneLogs } from '../src/modules/admin-logs/retention.ts'
import { listAdminLogIds } from '../src/modules/admin-logs/service.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { setProjectMember, setUserDeactivated } from '../src/modules/members/service.ts'
import { auditSigningOf, bearer, handleJson, queryAll, queryOne, request, runNow, SQLITE_ONLY, sqliteOf, sqliteOnlyTest, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeProject, acmeWithGlobex, acmeWorkflow, applyAcme, openTaskOnRun, ordersWorkflow, projectId, reportHook, tokenFor, userId } from './support/acme.ts'
import { assertValid, assertValidWithExtensions, compatDocument, EXTENSION_VALUES, validatorFor } from './support/compat-schema.ts'
import { type Micros, toIsoMicros } from '../src/lib/time.ts'

const DAY = 86_400_000
const PAGE = 3

/** The real clock, movable: the first apply happens 30 days ago so that retention has something to prune. */
let shift = 0
const clock: Clock = { now: () => Date.now() + shift }

let env: TestEnv
let app: ReturnType<typeof testApp>
let executor: Executor
let alice = ''
/** alice's `all` token per project (a token belongs to one project). */
const readers: Record<string, string> = {}


async function call(method: string, path: string, json?: unknown, token = alice): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await app.handle(request(path, { method, headers: bearer(token), json }))
  const text = await response.text()
  expect(response.status).toBeLessThan(500)
  return { status: response.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> }
}

const runStatus = (id: string) => (queryOne(env.store, 'SELECT status FROM runs WHERE id = ?', id) as { status: string }).status

// ── The document's own enums: which rows it can describe ──────────────────

function parameterEnum(operationId: string, name: string): string[] {
  for (const methods of Object.values(compatDocument().paths)) {
    for (const op of Object.values(methods) as { operationId?: string; parameters?: { name: string; schema: { enum?: string[] } }[] }[]) {
      if (op.operationId === operationId) return op.parameters!.find((p) => p.name === name)!.schema.enum!
    }
  }
  throw new Error(`${operationId} ${name}`)
}
const sqlList = (values: readonly string[]) => values.map((v) => `'${v.replace(/'/g, "''")}'`).join(', ')

/** Log ids of one list, newest first: all of them, and those whose values are all in the document's enums. */
function logIds(kind: 'activity' | 'admin', scopeId: number): { all: number[]; describable: number[] } {
  const [table, scope, condition] =
    kind === 'activity'
      ? ['activity_logs', 'environment_id', `action IN (${sqlList(parameterEnum('listActivityLogs', 'action'))})`]
      : ['admin_logs', 'project_id', `resource IN (${sqlList(parameterEnum('listAdminLogs', 'resource'))}) AND initiator IN (${sqlList(parameterEnum('listAdminLogs', 'initiator'))})`]
  const ids = (where: string) => (queryAll(env.store, `SELECT id FROM ${table} WHERE ${scope} = ? ${where} ORDER BY id DESC`, scopeId) as { id: number }[]).map((r) => r.id)
  return { all: ids(''), describable: ids(`AND ${condition}`) }
}

const environmentId = (project: string, environment: string) =>
  (queryOne(env.store, 'SELECT id FROM environments WHERE project_id = ? AND name = ?', projectId(env.store, project), environment) as { id: number }).id

// ── Walking a list as docs/api.md says ──────────────────────────────────────

interface Item {
  id: string | number
  createdAt: string
}
interface Walked {
  ids: string[]
  pages: number
  items: Record<string, unknown>[]
}

/**
 * Every page of `path`, `limit=3`, the next page asked with `createdAt.lt` = the last item's `createdAt`. Each
 * page is checked by `check`; pages before the last are full (hiding extensions never makes a page short) and
 * say `hasMore: true`; no item comes twice.
 */
async function walk(path: string, query: Record<string, string>, check: (body: unknown, label: string) => void): Promise<Walked> {
  const token = readers[decodeURIComponent(path.split('/')[3]!)]!
  const ids: string[] = []
  const items: Record<string, unknown>[] = []
  let next: Record<string, string> = { ...query, limit: String(PAGE) }
  for (let pages = 1; pages < 1000; pages++) {
    const url = `${path}?${new URLSearchParams(next)}`
    const { response, body } = await handleJson(app, request(url, { headers: bearer(token) }))
    expect({ url, status: response.status }).toEqual({ url, status: 200 })
    check(body, `GET ${url}`)
    const page = body as { hasMore: boolean; data: Item[] }
    if (page.hasMore) expect({ url, full: page.data.length }).toEqual({ url, full: PAGE })
    for (const item of page.data) {
      expect(ids).not.toContain(String(item.id))
      ids.push(String(item.id))
      items.push(item as unknown as Record<string, unknown>)
    }
    if (!page.hasMore) return { ids, pages, items }
    next = { ...query, limit: String(PAGE), 'createdAt.lt': page.data.at(-1)!.createdAt }
  }
  throw new Error(`${path}: too many pages`)
}

const strictly = (validate: ValidateFunction) => (body: unknown, label: string) => void assertValid(validate, body, label)

// ── The mix ────────────────────────────────────────────────────────────────

beforeAll(async () => {
  env = testEnv({ TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_API_RATE_PER_HOUR: '100000', TRELLIS_API_RATE_PER_DAY: '100000' })
  const ctx = () => ({ store: env.store, clock, secret: env.secret, baseUrl: env.config.baseUrl })
  const document = acmeWithGlobex()
  acmeWorkflow(document, 'Refund order').steps[4]!.seconds = 1
  acmeWorkflow(document, 'Refund order').webhook = { enabled: true, ratePerMinute: 1000 }

  // 30 days ago: the first apply (records, notes, environments, teams, members, workflows, webhooks).
  shift = -30 * DAY
  await applyAcme(ctx(), document)
  shift = 0

  // Today: a second apply changes a record, adds one with a note, a team, an environment and a workflow.
  const acme = acmeProject(document)
  acme.environments!.push('sandbox')
  acme.collections!.push({ name: 'refunds' })
  acme.teams!.push({ name: 'Escalations', members: ['carol@example.com'] })
  acme.records!.find((r) => r.id === 'ord_1002')!.data.amount = 52
  acme.records!.push({ environment: 'production', collection: 'orders', id: 'ord_1004', data: { status: 'paid', amount: 5, currency: 'EUR' } })
  acme.notes!.push({
    environment: 'production',
    team: 'Support',
    collection: 'orders',
    recordId: 'ord_1004',
    title: 'Imported today',
    user: 'bob@example.com',
    createdAt: new Date(Date.now() - DAY).toISOString(),
    messages: [{ user: 'bob@example.com', content: '<p>imported</p>', createdAt: new Date(Date.now() - DAY).toISOString() }],
  })
  acme.workflows!.push(ordersWorkflow('Long hold', [{ type: 'load' }, { type: 'wait', seconds: 600 }], { webhook: { enabled: true, ratePerMinute: 1000 } }))
  const report = await applyAcme(ctx(), document)

  // Retention (7 days): the first apply's entries go, a `log-retention` entry by `system` lands in each project.
  const pruned = await pruneLogs(env.store, clock, 7, auditSigningOf(env))
  expect(pruned.activityLogs + pruned.adminLogs).toBeGreaterThan(20)

  executor = new Executor({ store: env.store, clock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20 })
  app = testApp(env, { clock, executor })
  executor.start()
  alice = (await tokenFor(env.store, clock, 'alice', ['all'])).value
  readers.Acme = alice
  readers.Globex = (await tokenFor(env.store, clock, 'alice', ['all'], { project: 'Globex' })).value
  const bob = (await tokenFor(env.store, clock, 'bob', ['workflows:trigger'], { name: 'erp' })).value

  // Tokens through the management API: created, then revoked.
  const created = await call('POST', '/v1/account/tokens', { name: 'reporting', projectName: 'Acme', scopes: ['notes:read'] })
  expect(created.status).toBe(201)
  expect((await call('DELETE', `/v1/account/tokens/${created.body.id}`)).status).toBe(204)

  // Notes: created, answered, renamed, archived, unarchived, renamed and archived at once.
  const notes = '/v1/project/Acme/environment/production/notes'
  const ids: number[] = []
  for (const [recordId, collectionName, teamName] of [
    ['ord_1001', 'orders', 'Support'],
    ['ord_1003', 'orders', 'Support'],
    ['cus_002', 'customers', 'Billing'],
    ['ord_1004', 'orders', 'Support'],
    // Two more: runs write only their trigger, their changes and their end, and the walk should stay long.
    ['ord_1002', 'orders', 'Support'],
    ['cus_002', 'customers', 'Billing'],
  ] as const) {
    const note = await call('POST', notes, { recordId, collectionName, teamName, title: `About ${recordId}`, content: '<p>first</p>' })
    expect(note.status).toBe(201)
    ids.push(note.body.id as number)
  }
  for (const id of ids) expect((await call('POST', `${notes}/${id}/messages`, { content: `<p>reply on ${id}</p>` })).status).toBe(201)
  expect((await call('PATCH', `${notes}/${ids[0]}`, { title: 'Renamed' })).status).toBe(200)
  expect((await call('PATCH', `${notes}/${ids[1]}`, { archived: true })).status).toBe(200)
  expect((await call('PATCH', `${notes}/${ids[1]}`, { archived: false })).status).toBe(200)
  expect((await call('PATCH', `${notes}/${ids[2]}`, { title: 'Done', archived: true })).status).toBe(200)
  const staging = await call('POST', '/v1/project/Acme/environment/staging/notes', { recordId: 'ord_9001', collectionName: 'orders', teamName: 'Support', title: 'Staging', content: '<p>s</p>' })
  expect(staging.status).toBe(201)

  // Runs through the executor: webhook succeeding, ending at the condition, failing; manual; cancelled.
  const hook = reportHook(report, 'Refund order')
  const trigger = async (path: string, recordId: string) => {
    const sent = await call('POST', path, { record_id: recordId }, bob)
    expect(sent.status).toBe(202)
    return sent.body.runId as string
  }
  const runs = [await trigger(hook, 'ord_1001'), await trigger(hook, 'ord_1002'), await trigger(hook, 'ord_missing')]
  const manual = await call('POST', '/v1/project/Acme/environment/production/workflow-runs', { workflowName: 'Refund order', teamName: 'Support', recordId: 'ord_1003' })
  expect(manual.status).toBe(202)
  runs.push(manual.body.runId as string)
  const held = await trigger(reportHook(report, 'Long hold'), 'ord_1004')
  await until('the held run to wait', () => runStatus(held) === 'waiting', 15_000, 20)
  expect((await call('POST', `/v1/workflow-runs/${held}/cancel`, undefined, bob)).status).toBe(200)
  // Retried (an extension entry, `retryWorkflow`): it resumes after the wait, at the end, and succeeds.
  const retried = await call('POST', `/v1/workflow-runs/${held}/retry`, undefined, bob)
  expect(retried.status).toBe(202)
  runs.push(retried.body.runId as string)

  // Workflows published and changed; a webhook disabled, enabled and regenerated.
  const audit = '/v1/project/Acme/environment/production/team/Support/workflows/Audit%20me'
  expect((await call('PUT', audit, { collection: 'orders', steps: [{ type: 'load' }] })).status).toBeLessThan(300)
  expect((await call('PUT', audit, { collection: 'orders', steps: [{ type: 'load' }, { type: 'wait', seconds: 5 }] })).status).toBeLessThan(300)
  const webhook = '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/webhook'
  expect((await call('PATCH', webhook, { enabled: false })).status).toBe(200)
  expect((await call('PATCH', webhook, { enabled: true, ratePerMinute: 120 })).status).toBe(200)
  expect((await call('POST', `${webhook}/regenerate`)).status).toBe(200)
  // A completion callback added and removed (nothing is sent: no run of the workflow ends after it).
  const callbacks = '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order/callbacks'
  const callback = await call('POST', callbacks, { url: 'https://erp.example.com/trellis' })
  expect(callback.status).toBe(201)
  expect((await call('DELETE', `${callbacks}/${callback.body.id}`)).status).toBe(204)
  // A schedule and record events set and removed (no tick fires: its first fire time is hours away).
  const refund = '/v1/project/Acme/environment/production/team/Support/workflows/Refund%20order'
  const schedule = await call('PUT', `${refund}/schedule`, { cron: '0 9 * * *', runAs: 'alice@example.com', enabled: false })
  expect(schedule.status, JSON.stringify(schedule.body)).toBe(200)
  expect((await call('DELETE', `${refund}/schedule`)).status).toBe(204)
  const events = await call('PUT', `${refund}/events`, { on: [{ event: 'noteAdded' }], runAs: 'alice@example.com' })
  expect(events.status, JSON.stringify(events.body)).toBe(200)
  expect((await call('DELETE', `${refund}/events`)).status).toBe(204)

  // A role changed by an admin; a user deactivated and reactivated (one entry in each of their projects).
  const aliceId = userId(env.store, 'alice')
  await writeNow(env.store, function* () {
        return yield* setProjectMember(clock, { projectId: projectId(env.store, 'Acme'), userId: userId(env.store, 'dave'), role: 'editor', actorId: aliceId })
      })
  await writeNow(env.store, function* () {
        return yield* setUserDeactivated(clock, userId(env.store, 'bob'), true, aliceId)
      })
  await writeNow(env.store, function* () {
        return yield* setUserDeactivated(clock, userId(env.store, 'bob'), false, null)
      })
  // A project created by an instance administrator, an invitation made (instance-wide entry).
  await writeNow(env.store, function* () {
        return yield* createProject(clock, { name: 'Initech', actorId: aliceId })
      })
  await writeNow(env.store, function* () {
        return yield* createInvitation(clock, { user: (yield* findUser(userId(env.store, 'dave')))!, actorId: aliceId })
      })
  // The outbound allow-list changed by an instance administrator (instance-wide entry).
  await writeNow(env.store, () => setOutboundAllow(clock, env.config, ['127.0.0.1', '10.0.0.0/8'], aliceId))

  // Console reads (audited as `read` / `index`).
  const cookie = `trellis_session=${(await runNow(env.store, createSession(clock, aliceId, false))).id}`
  for (const path of ['/p/Acme/e/production/t/Support/c/orders/r/ord_1001', '/p/Acme/e/production/t/Support/c/orders', '/p/Acme/e/production/t/Billing/c/customers']) {
    expect((await app.handle(request(path, { headers: { cookie } }))).status).toBe(200)
  }

  await until('every run to finish', () => runs.every((id) => ['succeeded', 'failed', 'cancelled'].includes(runStatus(id))), 15_000, 20)
  expect(runs.map(runStatus)).toEqual(['succeeded', 'succeeded', 'failed', 'succeeded', 'succeeded'])
  await executor.stop(2_000)
  // A task decided (`approveApproval`, and the extension `closeTask` as it closes).
  const task = await openTaskOnRun(env.store, clock, runs[0]!, { allowRequester: true })
  expect((await call('POST', `/v1/tasks/${task}/decisions`, { decision: 'approve', comment: 'ok' })).status).toBe(200)
}, 60_000)

/** What the walks covered, printed at the end. */
const figures: Record<string, { pages: number; entries: number; withExtensions?: number }> = {}

afterAll(async () => {
  console.log(`wire-compat walks (limit ${PAGE}): ${JSON.stringify(figures)}`)
  await executor?.stop(2_000)
  env?.cleanup()
})

// ── The checks ─────────────────────────────────────────────────────────────

describe('after a realistic mix, every page validates against the compatibility document as published', () => {
  test('the mix holds every extension DESIGN §7 lists, and a spread of documented values', () => {
    const column = (sql: string) => (queryAll(env.store, sql) as { v: string }[]).map((r) => r.v)
    const actions = column('SELECT DISTINCT action AS v FROM activity_logs')
    const resources = column('SELECT DISTINCT resource AS v FROM admin_logs')
    const initiators = column('SELECT DISTINCT initiator AS v FROM admin_logs')
    expect(actions).toEqual(expect.arrayContaining([...EXTENSION_VALUES.listActivityLogs.action!]))
    expect(actions).toEqual(
      expect.arrayContaining(['create', 'update', 'read', 'index', 'createNote', 'createMessage', 'triggerWorkflow', 'completeWorkflow', 'abortWorkflow']),
    )
    expect(resources).toEqual(expect.arrayContaining([...EXTENSION_VALUES.listAdminLogs.resource!, 'user-project', 'team', 'environment']))
    expect(initiators).toEqual(expect.arrayContaining(['administrator', 'system']))
  })

  const activityLists = [
    ['Acme', 'production'],
    ['Acme', 'staging'],
    ['Acme', 'sandbox'],
    ['Globex', 'production'],
  ] as const

  test.each(activityLists)('activity logs of %s/%s: the default walk is exactly the describable entries; extensions=true adds the rest', async (project, environment) => {
    const path = `/v1/project/${project}/environment/${environment}/activity-logs`
    const expected = logIds('activity', environmentId(project, environment))
    const plain = await walk(path, {}, strictly(validatorFor('listActivityLogs', 200)))
    expect(plain.ids).toEqual(expected.describable.map(String))
    let extensionEntries = 0
    const all = await walk(path, { extensions: 'true' }, (body, label) => void (extensionEntries += assertValidWithExtensions('listActivityLogs', body, label)))
    expect(all.ids).toEqual(expected.all.map(String))
    expect(extensionEntries).toBe(expected.all.length - expected.describable.length)
    figures[`activity ${project}/${environment}`] = { pages: plain.pages + all.pages, entries: plain.ids.length, withExtensions: all.ids.length }
    if (project === 'Acme' && environment === 'production') {
      expect(expected.describable.length).toBeGreaterThan(30)
      expect(extensionEntries).toBeGreaterThanOrEqual(6)
      expect(plain.pages).toBeGreaterThan(10)
    }
  })

  test.each(['Acme', 'Globex'])('admin logs of %s: the default walk is exactly the describable entries; extensions=true adds the rest', async (project) => {
    const path = `/v1/project/${project}/admin-logs`
    const expected = logIds('admin', projectId(env.store, project))
    const plain = await walk(path, {}, strictly(validatorFor('listAdminLogs', 200)))
    expect(plain.ids).toEqual(expected.describable.map(String))
    let extensionEntries = 0
    const all = await walk(path, { extensions: 'true' }, (body, label) => void (extensionEntries += assertValidWithExtensions('listAdminLogs', body, label)))
    expect(all.ids).toEqual(expected.all.map(String))
    expect(extensionEntries).toBe(expected.all.length - expected.describable.length)
    expect(extensionEntries).toBeGreaterThan(0) // at least retention's `system` entry
    figures[`admin ${project}`] = { pages: plain.pages + all.pages, entries: plain.ids.length, withExtensions: all.ids.length }
    if (project === 'Acme') expect(expected.describable.length).toBeGreaterThanOrEqual(3)
  })

  test.each(activityLists)('notes of %s/%s: every page validates unmodified and the walk holds every note', async (project, environment) => {
    const path = `/v1/project/${project}/environment/${environment}/notes`
    const walked = await walk(path, {}, strictly(validatorFor('listNotes', 200)))
    const inDb = (queryAll(env.store, 'SELECT id FROM notes WHERE environment_id = ? ORDER BY id DESC', environmentId(project, environment)) as { id: number }[]).map((r) => String(r.id))
    expect(walked.ids).toEqual(inDb)
    figures[`notes ${project}/${environment}`] = { pages: walked.pages, entries: walked.ids.length }
    if (project === 'Acme' && environment === 'production') {
      expect(walked.ids.length).toBeGreaterThanOrEqual(7)
      expect(walked.items.some((n) => 'archivedAt' in n)).toBe(true)
    }
  })

  test('the console shows every entry, extensions included', async () => {
    const cookie = `trellis_session=${(await runNow(env.store, createSession(clock, userId(env.store, 'alice'), false))).id}`
    const page = async (path: string) => {
      const response = await app.handle(request(path, { headers: { cookie } }))
      expect(response.status).toBe(200)
      return response.text()
    }
    const activity = await page('/p/Acme/e/production/activity')
    for (const action of ['updateNote', 'archiveNote', 'unarchiveNote', 'failWorkflow', 'createNote']) expect(activity).toContain(`<td>${action}</td>`)
    expect(await page('/p/Acme/e/production/activity?action=failWorkflow')).toContain('<td>failWorkflow</td>')
    const admin = await page('/p/Acme/admin-log')
    for (const resource of ['api-token', 'workflow', 'workflow-webhook', 'user', 'log-retention', 'team']) expect(admin).toContain(`<td>${resource}</td>`)
    expect(await page('/p/Acme/admin-log?resource=api-token')).toContain('<td>api-token</td>')
  })

  test('the served /openapi.json documents extensions=true and names every extension value (the /docs reference shows it)', async () => {
    const { body } = await handleJson(app, request('/openapi.json'))
    const doc = body as { paths: Record<string, { get: { parameters: { name: string; description: string; schema: { type: string; enum?: string[] } }[] } }> }
    const checks = [
      ['/v1/project/{projectName}/environment/{environmentName}/activity-logs', EXTENSION_VALUES.listActivityLogs],
      ['/v1/project/{projectName}/admin-logs', EXTENSION_VALUES.listAdminLogs],
    ] as const
    for (const [path, extensions] of checks) {
      const parameters = doc.paths[path]!.get.parameters
      expect(parameters.find((p) => p.name === 'extensions')!.schema.type).toBe('boolean')
      for (const [name, values] of Object.entries(extensions)) {
        const parameter = parameters.find((p) => p.name === name)!
        for (const value of values) {
          expect(parameter.schema.enum).toContain(value)
          expect(parameter.description).toContain(value)
        }
        expect(parameter.description).toContain('extensions=true')
      }
    }
  })

  sqliteOnlyTest(SQLITE_ONLY.queryPlan, 'EXPLAIN QUERY PLAN: the default page seeks the partial index; filtered pages keep their own index', () => {
    const store = sqliteOf(env.store, SQLITE_ONLY.queryPlan)
    const captured: { sql: string; params: unknown[] }[] = []
    // A connection of its own: statements are prepared once per connection, so this one logs its own.
    const connection = new Database(store.path)
    const db = drizzle({ client: connection, schema, logger: { logQuery: (sql, params) => void captured.push({ sql, params }) } }) as unknown as Db
    const acme = projectId(env.store, 'Acme')
    const production = environmentId('Acme', 'production')
    const middle = queryOne(env.store, 'SELECT created_at AS at FROM activity_logs WHERE environment_id = ? ORDER BY id DESC LIMIT 1 OFFSET 10', production) as { at: number }
    const cases: [string, () => unknown, RegExp][] = [
      ['activity default', () => runOp(db, listActivityLogIds(acme, production, { extensions: false }, [], 10)), /^SEARCH activity_logs USING COVERING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
      ['activity default, createdAt.lt', () => runOp(db, listActivityLogIds(acme, production, { extensions: false }, parseDateFilters({ 'createdAt.lt': toIsoMicros(middle.at as Micros) }, ACTIVITY_DATE_FIELDS), 10)), /^SEARCH activity_logs USING COVERING INDEX activity_logs_env_documented_idx \(environment_id=\? AND id<\?\)$/],
      ['activity extensions', () => runOp(db, listActivityLogIds(acme, production, { extensions: true }, [], 10)), /^SEARCH activity_logs USING COVERING INDEX activity_logs_env_id_idx/],
      // Filters without an index of their own (test/query-plans.test.ts) walk the environment's entries newest first.
      ['activity action', () => runOp(db, listActivityLogIds(acme, production, { extensions: false, action: 'createNote' }, [], 10)), /^SEARCH activity_logs USING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
      ['activity userId', () => runOp(db, listActivityLogIds(acme, production, { extensions: false, userId: 1 }, [], 10)), /^SEARCH activity_logs USING INDEX activity_logs_env_documented_idx \(environment_id=\?\)$/],
      ['admin default', () => runOp(db, listAdminLogIds(acme, { extensions: false }, [], 10)), /^SEARCH admin_logs USING COVERING INDEX admin_logs_project_documented_idx \(project_id=\?\)$/],
      ['admin extensions', () => runOp(db, listAdminLogIds(acme, { extensions: true }, [], 10)), /^SEARCH admin_logs USING COVERING INDEX admin_logs_project_id_idx/],
      ['admin resource', () => runOp(db, listAdminLogIds(acme, { extensions: false, resource: 'team' }, [], 10)), /^SEARCH admin_logs USING INDEX admin_logs_project_resource_idx/],
    ]
    try {
      for (const [name, list, expected] of cases) {
        captured.length = 0
        list()
        const page = captured.find((q) => /^select "id" from "(activity|admin)_logs" where .* order by "\w+"\."id" desc limit \?$/.test(q.sql))!
        const plan = (store.sqlite.prepare(`EXPLAIN QUERY PLAN ${page.sql}`).all(...(page.params as never[])) as { detail: string }[]).map((r) => r.detail)
        expect({ name, plan }).toEqual({ name, plan: [expect.stringMatching(expected)] })
      }
    } finally {
      connection.close()
    }
  })
})

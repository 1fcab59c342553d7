/**
 * The activity log (spec §1, §2.8, §4.3, §5.8; DESIGN §7) through the real app over real SQLite files:
 * what each write records (trellis apply, the notes API, workflow runs — and the auditor's question for one
 * record), what a failed write leaves out, and `GET …/activity-logs` (filters, limit, order, hasMore, paging,
 * the scope and role matrix, append-only storage, 429). test/admin-logs.test.ts is its sibling; the harness both
 * share (the validating `send`, the Acme fixture, the seeded list fixture) is test/support/logs.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { writeNow } from '../src/db/write.ts'
import { Executor } from '../src/executor/executor.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { ACTIVITY_ACTIONS } from '../src/modules/activity-logs/service.ts'
import { ApplyError } from '../src/modules/apply/service.ts'
import { setUserDeactivated } from '../src/modules/members/service.ts'
import { applyNow, bearer, execute, listReadable, queryAll, queryOne, request, runCli, processEnv, tableContents, until } from './helpers.ts'
import { type AcmeDocument, acmeProject, acmeWithGlobex, acmeWorkflow, applyAcme, ordersWorkflow, reportHook, tokenFor, UUID } from './support/acme.ts'
import { assertValidWithExtensions, type ErrorObject, EXTENSION_VALUES } from './support/compat-schema.ts'
import {
  type ActivityLog,
  BAD_EXTENSIONS,
  activityPath,
  at,
  activitySince,
  buildFx,
  collection,
  describeRateLimit,
  documented,
  environment,
  expectEnumFilter,
  expectFilterCases,
  expectHasMoreBoundaries,
  expectNothingWritten,
  type Fx,
  listed,
  ISO_UTC_MICROS,
  listActivity,
  listFixture,
  type ListFixture,
  type ListTokens,
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
  tokenOf,
  VALIDATORS,
  walk,
  listParameterTests,
} from './support/logs.ts'
import { BAD_LIMITS, badParameter, expectError, scenarios } from './support/scenarios.ts'

/** A record write's label without the changed fields it names (`created by trellis apply: status (none) → "paid"`). */
const withoutChanges = (label: string | undefined) => label?.replace(/: .*$/s, '')

afterAll(reportValidations)

// ── Activity: trellis apply ─────────────────────────────────────────────────

describe('activity log: records and notes written by trellis apply', () => {
  let fx: Fx
  const applyCtx = (actorEmail?: string) => ({ store: fx.env.store, clock: fx.env.clock, secret: fx.env.secret, baseUrl: fx.env.config.baseUrl, actorEmail })
  beforeAll(async () => {
    fx = await buildFx()
  })
  afterAll(() => fx.env.cleanup())

  test('the first apply: one create per record (first admin, oldest team allowed to edit), one createNote per imported note', async () => {
    const production = (await walk((q) => listActivity(fx, q))).entries.reverse()
    const summary = (e: ActivityLog) => [e.action, withoutChanges(e.label), e.user.username, e.team.name, e.collection?.name, e.recordIds]
    expect(production.map(summary)).toEqual([
      // orders: Billing may not edit it, so Support (older teams first; Support is the oldest anyway).
      ['create', 'created by trellis apply', 'alice', 'Support', 'orders', ['ord_1001']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'orders', ['ord_1002']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'orders', ['ord_1003']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'customers', ['cus_001']],
      ['create', 'created by trellis apply', 'alice', 'Support', 'customers', ['cus_002']],
      // Imports: the note's own user and team; the entry is the import (now), the note keeps its times.
      ...queryAll(fx.env.store, `SELECT n.record_id, u.username, t.name AS team, c.name AS coll FROM notes n JOIN users u ON u.id = n.user_id
           JOIN teams t ON t.id = n.team_id JOIN collections c ON c.id = n.collection_id JOIN environments e ON e.id = n.environment_id
           WHERE e.name = 'production' ORDER BY n.id`,)
        .map((n) => {
          const row = n as { record_id: string; username: string; team: string; coll: string }
          return ['createNote', 'imported by trellis apply', row.username, row.team, row.coll, [row.record_id]]
        }),
    ])
    expect(production.every((e) => e.type === 'write' && e.workflow === undefined && e.environment.name === 'production')).toBe(true)
  })

  test('re-applying the same file writes no activity entry; a changed record writes one update', async () => {
    const before = maxId(fx.env, 'activity_logs')
    await applyAcme(applyCtx(), acmeWithGlobex())
    expect(maxId(fx.env, 'activity_logs')).toBe(before)

    const document = acmeWithGlobex()
    document.projects[0]!.records![0]!.data = { status: 'refunded' }
    fx.env.clock.advance(5)
    await applyAcme(applyCtx(), document)
    const entries = await activitySince(fx, before)
    expect(entries[0]!.label).toBe('updated by trellis apply: amount 129.9 → (none); currency "EUR" → (none); customer "cus_001" → (none); items 3 → (none); placedAt "2026-11-02T08:41:00.000Z" → (none); status "paid" → "refunded"')
    expect(entries.map((e) => [e.action, withoutChanges(e.label), e.user.username, e.team.name, e.recordIds])).toEqual([
      ['update', 'updated by trellis apply', 'alice', 'Support', ['ord_1001']],
    ])
  })

  test('--as names the user; a record may name its team', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const document = acmeWithGlobex()
    document.projects[0]!.records!.push(
      { environment: 'production', collection: 'customers', id: 'cus_as', data: { n: 1 } },
      { environment: 'production', collection: 'customers', id: 'cus_team', data: { n: 2 }, team: 'Billing' },
    )
    await applyAcme(applyCtx('Carol@Example.com'), document)
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => [e.action, e.user.username, e.team.name, e.recordIds])).toEqual([
      ['update', 'carol', 'Support', ['ord_1001']], // back to the file's data after the previous test
      ['create', 'carol', 'Support', ['cus_as']],
      ['create', 'carol', 'Billing', ['cus_team']],
    ])
  })

  test('an --as user who is unknown, not a member, or deactivated, or an unknown record team: an error, nothing written', async () => {
    const document = acmeWithGlobex()
    document.projects[0]!.records!.push({ environment: 'production', collection: 'customers', id: 'cus_never', data: {} })
    const snapshot = () => JSON.stringify(['records', 'activity_logs'].map((t) => tableContents(fx.env.store)[t]))
    const before = snapshot()
    const attempt = async (actor: string | undefined, doc: AcmeDocument = document) => {
      try {
        await applyAcme(applyCtx(actor), doc)
      } catch (error) {
        expect(error).toBeInstanceOf(ApplyError)
        return (error as Error).message
      }
      throw new Error('applied')
    }
    expect(await attempt('nobody@example.com')).toBe('--as: unknown user nobody@example.com')
    await applyNow({ users: [{ email: 'outsider@example.com', username: 'outsider' }] }, applyCtx())
    expect(await attempt('outsider@example.com')).toBe('--as: outsider@example.com is not a member of project Acme')
    await writeNow(fx.env.store, function* () {
      return yield* setUserDeactivated(fx.env.clock, fx.users.dave.id, true, null)
    })
    expect(await attempt('dave@example.com')).toBe('--as: dave@example.com is deactivated')
    const badTeam = acmeWithGlobex()
    badTeam.projects[0]!.records!.push({ environment: 'production', collection: 'customers', id: 'cus_never', data: {}, team: 'Nobody' })
    expect(await attempt(undefined, badTeam)).toBe('projects[0].records[7].team: unknown team Nobody')
    expect(snapshot()).toEqual(before)
  })

  test('a project with no admin, or no team allowed to edit the collection: an error naming the record, nothing written', async () => {
    const snapshot = () => JSON.stringify(['records', 'activity_logs'].map((t) => tableContents(fx.env.store)[t]))
    const before = snapshot()
    const orphan = { environment: 'production', collection: 'tickets', id: 't1', data: {} }
    const noAdmin = { projects: [{ name: 'Orphans', environments: ['production'], teams: [{ name: 'Ops' }], collections: [{ name: 'tickets' }], records: [orphan] }] }
    await expect(applyNow(noAdmin, applyCtx())).rejects.toThrow(
      'projects[0].records[0]: project Orphans has no admin to attribute record changes to: add an admin member or pass --as EMAIL',
    )
    const readOnly = {
      projects: [
        {
          name: 'Orphans',
          environments: ['production'],
          teams: [{ name: 'Ops' }],
          members: [{ user: 'alice@example.com', role: 'admin' as const }],
          collections: [{ name: 'tickets', permissions: { Ops: { read: true, edit: false } } }],
          records: [orphan],
        },
      ],
    }
    await expect(applyNow(readOnly, applyCtx())).rejects.toThrow("projects[0].records[0].team: no team may edit tickets: name the record's team")
    expect(snapshot()).toEqual(before)
  })

  test('through the CLI: --as carol writes carol', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const file = `${fx.env.dataDir}/more.yaml`
    await Bun.write(file, 'projects:\n  - name: Acme\n    records:\n      - { environment: production, collection: customers, id: cus_cli, data: { a: 1 } }\n')
    const cli = await runCli(['apply', '-f', file, '--as', 'carol@example.com', '--data', fx.env.dataDir], { env: processEnv(fx.env) })
    expect({ code: cli.code, stderr: cli.stderr }).toEqual({ code: 0, stderr: '' })
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => [e.action, e.label, e.user.username, e.recordIds])).toEqual([['create', 'created by trellis apply: a (none) → 1', 'carol', ['cus_cli']]])
  })
})

// ── Activity: the notes API ─────────────────────────────────────────────────

describe('activity log: every notes API write is exactly one entry', () => {
  let fx: Fx
  beforeAll(async () => {
    fx = await buildFx()
  })
  afterAll(() => fx.env.cleanup())

  const write = (method: string, path: string, json: unknown, token = fx.alice) =>
    fx.app.handle(request(path, { method, headers: bearer(token), json })).then(async (r) => ({ status: r.status, body: (await r.json()) as { id: number } }))

  /** Runs `act`, then asserts the DB gained exactly the given actions and returns them as the API renders them. */
  async function expectEntries(act: () => Promise<unknown>, actions: string[]): Promise<ActivityLog[]> {
    const before = maxId(fx.env, 'activity_logs')
    fx.env.clock.advance(1_000)
    await act()
    expect(rowsAfter(fx.env, 'activity_logs', before).map((r) => r.action)).toEqual(actions)
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => e.action)).toEqual(actions)
    return entries
  }

  const base = () => ({
    object: 'activityLog' as const,
    id: expect.stringMatching(/^\d+$/),
    type: 'write' as const,
    recordIds: ['ord_1002'],
    createdAt: listed(fx.env.clock.now()),
    user: fx.users.alice,
    environment: environment('production'),
    team: team('Support'),
    collection: collection('orders'),
  })

  let noteId = 0

  test('note created → one createNote entry: alice, the note’s team, collection and record, no workflow', async () => {
    const [entry] = await expectEntries(async () => {
      const sent = await write('POST', notesPath(), { recordId: 'ord_1002', collectionName: 'orders', teamName: 'Support', title: 'Audit', content: '<p>x</p>' })
      expect(sent.status).toBe(201)
      noteId = sent.body.id
    }, ['createNote'])
    expect(entry).toEqual({ ...base(), action: 'createNote', label: 'created note "Audit"' })
  })

  test('message added → one createMessage entry', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('POST', `${notesPath()}/${noteId}/messages`, { content: '<p>more</p>' })).status).toBe(201)
    }, ['createMessage'])
    expect(entry).toEqual({ ...base(), action: 'createMessage', label: 'added a message to note "Audit"' })
  })

  test('renamed → one updateNote entry (extension)', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { title: 'Audit 2' })).status).toBe(200)
    }, ['updateNote'])
    expect(entry).toEqual({ ...base(), action: 'updateNote', label: 'renamed note "Audit" to "Audit 2"' })
  })

  test('archived → one archiveNote entry; archiving again writes nothing', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { archived: true })).status).toBe(200)
    }, ['archiveNote'])
    expect(entry).toEqual({ ...base(), action: 'archiveNote', label: 'archived note "Audit 2"' })
    await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { archived: true })).status).toBe(200)
    }, [])
  })

  test('unarchived → one unarchiveNote entry', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { archived: false })).status).toBe(200)
    }, ['unarchiveNote'])
    expect(entry).toEqual({ ...base(), action: 'unarchiveNote', label: 'unarchived note "Audit 2"' })
  })

  test('title and archive in one PATCH → one entry per effective change, 1 µs apart', async () => {
    const entries = await expectEntries(async () => {
      expect((await write('PATCH', `${notesPath()}/${noteId}`, { title: 'Audit 3', archived: true })).status).toBe(200)
    }, ['updateNote', 'archiveNote'])
    // One clock reading, two entries: 1 µs apart, so createdAt paging never splits them ambiguously.
    expect(entries.map((e) => e.createdAt)).toEqual([listed(fx.env.clock.now()), listed(fx.env.clock.now()).replace('000Z', '001Z')])
    expect(entries[1]!.label).toBe('archived note "Audit 3"')
  })

  test('through which token: the label names the token (name and display prefix, never more of the value)', async () => {
    const [entry] = await expectEntries(async () => {
      expect((await write('POST', `${notesPath()}/${noteId}/messages`, { content: '<p>which token?</p>' })).status).toBe(201)
    }, ['createMessage'])
    const stored = queryOne(fx.env.store, 'SELECT name, prefix FROM api_tokens WHERE prefix = ?', fx.alice.slice(0, 12)) as { name: string; prefix: string }
    expect(tokenOf.get(entry!)).toEqual(stored)
    const raw = (await (await fx.app.handle(request(activityPath({ limit: '1' }), { headers: bearer(fx.alice) }))).json()) as Page<ActivityLog>
    expect(raw.data[0]!.label).toBe(`${entry!.label} · token "${stored.name}" (${stored.prefix}…)`)
    expect(JSON.stringify(raw)).not.toContain(fx.alice.slice(12))
  })

  test('the acting user is the token’s user: carol writing in Billing (staging) is carol, in staging’s log only', async () => {
    const carol = (await tokenFor(fx.env.store, fx.env.clock, 'carol', ['notes:write', 'activity_logs:read'])).value
    const before = maxId(fx.env, 'activity_logs')
    const sent = await write('POST', notesPath('staging'), { recordId: 'cus_900', collectionName: 'customers', teamName: 'Billing', title: 'Dunning?', content: '<p>?</p>' }, carol)
    expect(sent.status).toBe(201)
    expect(rowsAfter(fx.env, 'activity_logs', before)).toHaveLength(1)
    expect(await activitySince(fx, before)).toEqual([])
    const { body } = await listActivity(fx, { limit: '1' }, { environment: 'staging', token: carol })
    expect(body.data[0]).toMatchObject({
      action: 'createNote',
      label: 'created note "Dunning?"',
      user: fx.users.carol,
      environment: environment('staging'),
      team: team('Billing'),
      collection: collection('customers'),
      recordIds: ['cus_900'],
    })
  })

  test('a note write that fails (400, 403, 404) writes no entry', async () => {
    const reader = (await tokenFor(fx.env.store, fx.env.clock, 'alice', ['notes:read'])).value
    const bob = (await tokenFor(fx.env.store, fx.env.clock, 'bob', ['all'])).value
    const before = tableContents(fx.env.store)
    const note = { recordId: 'ord_1002', collectionName: 'orders', teamName: 'Support', title: 'x', content: '<p>x</p>' }
    expect((await write('POST', notesPath(), { ...note, teamName: 'Nope' })).status).toBe(400)
    expect((await write('POST', notesPath(), { ...note, collectionName: 'Nope' })).status).toBe(400)
    expect((await write('POST', notesPath(), { ...note, title: '' })).status).toBe(400)
    expect((await write('POST', `${notesPath()}/${noteId}/messages`, { content: '' })).status).toBe(400)
    expect((await write('PATCH', `${notesPath()}/${noteId}`, {})).status).toBe(400)
    expect((await write('POST', notesPath(), note, reader)).status).toBe(403)
    expect((await write('POST', notesPath(), note, bob)).status).toBe(403)
    expect((await write('PATCH', `${notesPath('staging')}/${noteId}`, { title: 'y' })).status).toBe(404)
    const after = tableContents(fx.env.store)
    for (const table of ['activity_logs', 'activity_log_records', 'notes', 'note_messages']) expect(after[table]).toEqual(before[table]!)
  })
})

// ── Activity: workflow runs (executor in-process, real clock) ──────────────

describe('activity log: workflow runs, and the auditor’s question', () => {
  let fx: Fx & { executor?: Executor }
  let executor: Executor
  let bob = ''
  let bobGlobex = ''
  let hook = ''
  let holdHook = ''

  const run = (id: string) => queryOne(fx.env.store, 'SELECT status FROM runs WHERE id = ?', id) as { status: string }
  const finished = (id: string) => until(`run ${id} to finish`, () => ['succeeded', 'failed', 'cancelled'].includes(run(id).status) && run(id), 8_000, 10)
  const trigger = async (path: string, token: string, recordId: string) => {
    const response = await fx.app.handle(request(path, { method: 'POST', headers: bearer(token), json: { record_id: recordId } }))
    return { status: response.status, body: (await response.json()) as { runId?: string; code?: string } }
  }
  /** alice starts a run of `workflowName` (team Support) on `recordId` through the runs API. */
  const triggerManually = (workflowName: string, recordId: string) =>
    fx.app.handle(request('/v1/project/Acme/environment/production/workflow-runs', { method: 'POST', headers: bearer(fx.alice), json: { workflowName, teamName: 'Support', recordId } }))

  beforeAll(async () => {
    const document = acmeWithGlobex()
    acmeWorkflow(document, 'Refund order').steps[4]!.seconds = 1
    acmeWorkflow(document, 'Refund order').webhook = { enabled: true, ratePerMinute: 1000 }
    acmeProject(document).workflows!.push(
      ordersWorkflow('Long hold', [{ type: 'load' }, { type: 'wait', name: 'pause', seconds: 600 }, { type: 'update', set: { held: 'yes' } }], {
        webhook: { enabled: true, ratePerMinute: 1000 },
      }),
    )
    fx = await buildFx({
      clock: systemClock,
      document,
      executor: (env) => new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20 }),
    })
    executor = fx.executor!
    hook = reportHook(fx.report, 'Refund order')
    holdHook = reportHook(fx.report, 'Long hold')
    bob = (await tokenFor(fx.env.store, systemClock, 'bob', ['workflows:trigger'], { name: 'erp' })).value
    bobGlobex = (await tokenFor(fx.env.store, systemClock, 'bob', ['all'], { project: 'Globex' })).value
    executor.start()
  })
  afterAll(async () => {
    await executor.stop(2_000)
    fx.env.cleanup()
  })

  test('ord_1001: who changed what, when, through which workflow run — from the activity log API alone', async () => {
    // alice leaves a note by hand, then the ERP (bob's token) triggers the refund through the webhook.
    const note = await fx.app.handle(
      request(notesPath(), { method: 'POST', headers: bearer(fx.alice), json: { recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Customer asks for a refund', content: '<p>ok</p>' } }),
    )
    expect(note.status).toBe(201)
    const accepted = await trigger(hook, bob, 'ord_1001')
    expect(accepted.status).toBe(202)
    const runId = accepted.body.runId!
    expect(runId).toMatch(UUID)
    expect((await finished(runId)).status).toBe('succeeded')

    // The auditor: an admin's read-only token, one query by record.
    const auditor = (await tokenFor(fx.env.store, systemClock, 'carol', ['activity_logs:read'])).value
    const { entries } = await walk((q) => listActivity(fx, q, { token: auditor }), { recordId: 'ord_1001' })
    const story = [...entries].reverse()
    const wf = (stepName?: string) => ({ object: 'workflow' as const, name: 'Refund order', runId, ...(stepName ? { stepName } : {}) })
    expect(story.map((e) => ({ action: e.action, label: withoutChanges(e.label), user: e.user.username, workflow: e.workflow }))).toEqual([
      // The record itself came from the apply file: attributed to the project's first admin, labelled as apply.
      { action: 'create', label: 'created by trellis apply', user: 'alice', workflow: undefined },
      { action: 'createNote', label: 'created note "Customer asks for a refund"', user: 'alice', workflow: undefined },
      // The run: who started it, what it did to the record (and in which step), how it ended. Its condition and
      // wait did nothing to the record: they are its steps in GET /v1/workflow-runs/{id}, not entries.
      { action: 'triggerWorkflow', label: 'triggered via webhook', user: 'bob', workflow: wf() },
      { action: 'read', label: 'read by the workflow run', user: 'bob', workflow: wf('1-load') },
      { action: 'update', label: 'updated status', user: 'bob', workflow: wf('3-update') },
      { action: 'createNote', label: 'created note "Refund"', user: 'bob', workflow: wf('4-note') },
      { action: 'completeWorkflow', label: 'workflow run succeeded', user: 'bob', workflow: wf() },
    ])
    for (const entry of story) {
      expect(entry).toMatchObject({
        type: entry.action === 'read' ? 'read' : 'write',
        recordIds: ['ord_1001'],
        environment: environment('production'),
        team: team('Support'),
        collection: collection('orders'),
      })
    }
    expect(story.slice(2).every((e) => e.user.id === fx.users.bob.id && e.user.email === 'bob@example.com')).toBe(true)
    // When: in id order, times never go back; the run's entries lie between trigger and completion.
    const times = story.map((e) => Date.parse(e.createdAt))
    expect(times).toEqual([...times].sort((a, b) => a - b))
    expect(times.at(-1)! - times[1]!).toBeGreaterThanOrEqual(1_000) // the 1 s wait step
    // What changed: the update alone, by record and action; and the run behind it, by its runId.
    const updates = await listActivity(fx, { recordId: 'ord_1001', action: 'update' }, { token: auditor })
    expect(updates.body.data.map((e) => e.workflow)).toEqual([wf('3-update')])
    const byRun = await fx.app.handle(request(`/v1/workflow-runs/${runId}`, { headers: bearer(fx.alice) }))
    expect(await byRun.json()).toMatchObject({ id: runId, status: 'succeeded', trigger: 'webhook', user: { username: 'bob' }, workflow: { name: 'Refund order', version: 1 } })
    // Nothing about ord_1001 leaks into another environment's log.
    expect((await listActivity(fx, { recordId: 'ord_1001' }, { environment: 'staging', token: auditor })).body.data).toEqual([])
  })

  test('manual trigger → label "triggered manually", user the caller (alice)', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const response = await triggerManually('Refund order', 'ord_1002')
    expect(response.status).toBe(202)
    const { runId } = (await response.json()) as { runId: string }
    expect((await finished(runId)).status).toBe('succeeded')
    const entries = await activitySince(fx, before)
    // ord_1002 is pending: the condition ends the run after two steps.
    expect(entries.map((e) => [e.action, e.label, e.user.username, e.workflow?.runId, e.workflow?.stepName])).toEqual([
      ['triggerWorkflow', 'triggered manually', 'alice', runId, undefined],
      ['read', 'read by the workflow run', 'alice', runId, '1-load'],
      ['completeWorkflow', 'workflow run succeeded', 'alice', runId, undefined],
    ])
  })

  test('a failed run → one failWorkflow entry (extension) for the token’s user, no step entry for the failed step', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const accepted = await trigger(hook, bob, 'ord_missing')
    const runId = accepted.body.runId!
    expect((await finished(runId)).status).toBe('failed')
    const entries = await activitySince(fx, before)
    expect(entries).toEqual([
      expect.objectContaining({ action: 'triggerWorkflow', user: fx.users.bob, recordIds: ['ord_missing'] }),
      {
        object: 'activityLog',
        id: expect.any(String),
        type: 'write',
        action: 'failWorkflow',
        label: 'workflow run failed: record_not_found',
        recordIds: ['ord_missing'],
        createdAt: expect.stringMatching(ISO_UTC_MICROS),
        user: fx.users.bob,
        environment: environment('production'),
        team: team('Support'),
        collection: collection('orders'),
        workflow: { object: 'workflow', name: 'Refund order', runId },
      },
    ])
    const failed = await listActivity(fx, { action: 'failWorkflow', extensions: 'true' })
    expect(failed.body.data.map((e) => e.workflow!.runId)).toEqual([runId])
    // An extension entry: not listed without extensions=true, and filtering on it without that is a 400.
    expect((await listActivity(fx, { limit: '100' })).body.data.map((e) => e.action)).not.toContain('failWorkflow')
    expectError(await listActivity(fx, { action: 'failWorkflow' }), 400, 'invalid_parameter', 'action')
  })

  test('a cancelled run → one abortWorkflow entry for the canceller; 409s (record busy, run finished) write nothing', async () => {
    const before = maxId(fx.env, 'activity_logs')
    const runId = (await trigger(holdHook, bob, 'ord_1003')).body.runId!
    await until('the run to park on its wait', () => run(runId).status === 'waiting', 8_000, 10)
    const parked = maxId(fx.env, 'activity_logs')

    // One active run per record: the second trigger is a 409 and writes nothing.
    const busy = await trigger(holdHook, bob, 'ord_1003')
    expect(busy).toMatchObject({ status: 409, body: { code: 'run_in_progress', runId } })
    const busyManual = await triggerManually('Long hold', 'ord_1003')
    expect(busyManual.status).toBe(409)
    expect(maxId(fx.env, 'activity_logs')).toBe(parked)

    const cancelled = await fx.app.handle(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: bearer(bob) }))
    expect(cancelled.status).toBe(200)
    expect(run(runId).status).toBe('cancelled')
    const entries = await activitySince(fx, before)
    expect(entries.map((e) => [e.action, e.user.username, e.workflow?.stepName])).toEqual([
      ['triggerWorkflow', 'bob', undefined],
      ['read', 'bob', '1-load'],
      ['abortWorkflow', 'bob', undefined],
    ])
    expect(entries.at(-1)).toMatchObject({ label: 'workflow run cancelled', workflow: { object: 'workflow', name: 'Long hold', runId }, recordIds: ['ord_1003'] })

    // Cancelling again: 409 run_finished, nothing written.
    const after = maxId(fx.env, 'activity_logs')
    const again = await fx.app.handle(request(`/v1/workflow-runs/${runId}/cancel`, { method: 'POST', headers: bearer(bob) }))
    expect(again.status).toBe(409)
    expect(((await again.json()) as ErrorObject).code).toBe('run_finished')
    expect(maxId(fx.env, 'activity_logs')).toBe(after)
  })

  test('a webhook refused before the run (wrong project token, bad body) writes nothing', async () => {
    const before = tableContents(fx.env.store)
    expect((await trigger(hook, bobGlobex, 'ord_1003')).status).toBe(403)
    const bad = await fx.app.handle(request(hook, { method: 'POST', headers: bearer(bob), json: { record_id: '' } }))
    expect(bad.status).toBe(400)
    const after = tableContents(fx.env.store)
    for (const table of ['activity_logs', 'activity_log_records', 'runs']) expect(after[table]).toEqual(before[table]!)
  })
})

// ── A failed write writes no entry ──────────────────────────────────────────

describe('a failed transaction writes no activity entry', () => {
  let fx: Fx
  beforeAll(async () => {
    fx = await buildFx()
  })
  afterAll(() => fx.env.cleanup())

  test('409 webhook conflict: the second trigger writes neither a run nor an entry', async () => {
    const bob = (await tokenFor(fx.env.store, fx.env.clock, 'bob', ['workflows:trigger'])).value
    const hook = reportHook(fx.report, 'Refund order')
    const post = () => fx.app.handle(request(hook, { method: 'POST', headers: bearer(bob), json: { record_id: 'ord_1003' } }))
    expect((await post()).status).toBe(202)
    const before = tableContents(fx.env.store)
    const conflict = await post()
    expect(conflict.status).toBe(409)
    expectNothingWritten(fx.env, before, ['activity_logs', 'activity_log_records', 'admin_logs', 'runs'])
  })
})

// ── GET …/activity-logs: filters, enums, limit, order, hasMore, access ──────

describe('GET …/activity-logs: filters, limit, order, hasMore, access', () => {
  let lf: ListFixture
  let fx: Fx
  let tokens: ListTokens
  /** Every seeded entry, extensions included (`extensions=true`), and the ones a default call lists. */
  let production: ActivityLog[] = []
  let productionDocumented: ActivityLog[] = []

  beforeAll(async () => {
    lf = await listFixture()
    ;({ fx, tokens, production, productionDocumented } = lf)
  })
  afterAll(() => fx.env.cleanup())
  const sendActivity = (req: Request) => send(fx.app, req, 'activity')

  test('the seeded entries render exactly (labels, record ids, optional collection and workflow)', () => {
    expect(production).toHaveLength(48)
    // Seeds 7, 8 (mod 9) that are not reads are updateNote / failWorkflow.
    expect(production.length - productionDocumented.length).toBe(9)
    const ids = production.map((e) => Number(e.id))
    expect(ids).toEqual([...ids].sort((a, b) => b - a))
    const entry = (i: number) => production.find((e) => e.label === `seed ${i}`)!
    expect(entry(0)).toEqual({
      object: 'activityLog',
      id: expect.any(String),
      type: 'write',
      action: 'create',
      label: 'seed 0',
      recordIds: ['rec-a', 'rec-b'],
      createdAt: listed(T),
      user: fx.users.alice,
      environment: environment('production'),
      team: team('Billing'),
      collection: collection('orders'),
    })
    expect(entry(9)).toMatchObject({ action: 'create', createdAt: listed(T + 3_000), workflow: { object: 'workflow', name: 'Refund order', runId: 'run-9', stepName: '1-load' } })
    expect(entry(5).workflow).toEqual({ object: 'workflow', name: 'Refund order', runId: 'run-5' })
    expect('collection' in entry(4)).toBe(false)
    expect(entry(3)).toMatchObject({ type: 'read', action: 'read' })
    expect(entry(13).recordIds).toEqual(['ünï|42'])
  })

  // ── Filters, each alone and combined, against the full list ──

  type ActivityCase = [string, Record<string, string>, (e: ActivityLog) => boolean]
  const activityCases = (): ActivityCase[] => [
    ['userEmail', { userEmail: 'bob@example.com' }, (e) => e.user.username === 'bob'],
    ['userEmail (case-insensitive)', { userEmail: 'Carol@Example.COM' }, (e) => e.user.username === 'carol'],
    ['userId', { userId: String(fx.users.dave.id) }, (e) => e.user.username === 'dave'],
    ['teamName', { teamName: 'Billing' }, (e) => e.team.name === 'Billing'],
    ['collectionName', { collectionName: 'customers' }, (e) => e.collection?.name === 'customers'],
    ['recordId (one of several)', { recordId: 'rec-b' }, (e) => e.recordIds.includes('rec-b')],
    ['recordId', { recordId: 'rec-3' }, (e) => e.recordIds.includes('rec-3')],
    ['recordId unicode composite', { recordId: 'ünï|42' }, (e) => e.recordIds.includes('ünï|42')],
    ['action', { action: 'createNote' }, (e) => e.action === 'createNote'],
    ['action (extension)', { action: 'failWorkflow' }, (e) => e.action === 'failWorkflow'],
    ['action read', { action: 'read' }, (e) => e.action === 'read'],
    ['type read', { type: 'read' }, (e) => e.type === 'read'],
    ['type write', { type: 'write' }, (e) => e.type === 'write'],
    ['createdAt.eq (the first of three written at one clock reading)', { 'createdAt.eq': at(4) }, (e) => time(e) === T + 4_000],
    ['createdAt.lt', { 'createdAt.lt': at(4) }, (e) => time(e) < T + 4_000],
    ['createdAt.lte', { 'createdAt.lte': at(4) }, (e) => time(e) <= T + 4_000],
    ['createdAt.gt', { 'createdAt.gt': at(4) }, (e) => time(e) > T + 4_000],
    ['createdAt.gte', { 'createdAt.gte': at(4) }, (e) => time(e) >= T + 4_000],
    ['createdAt range', { 'createdAt.gt': at(2), 'createdAt.lte': at(9) }, (e) => time(e) > T + 2_000 && time(e) <= T + 9_000],
    ['userEmail + userId of the same user', { userEmail: 'alice@example.com', userId: String(fx.users.alice.id) }, (e) => e.user.username === 'alice'],
    ['userEmail + userId of different users', { userEmail: 'alice@example.com', userId: String(fx.users.bob.id) }, () => false],
    ['teamName + collectionName', { teamName: 'Support', collectionName: 'orders' }, (e) => e.team.name === 'Support' && e.collection?.name === 'orders'],
    ['userId + action + type', { userId: String(fx.users.bob.id), action: 'update', type: 'write' }, (e) => e.user.username === 'bob' && e.action === 'update'],
    ['recordId + createdAt.lt', { recordId: 'rec-a', 'createdAt.lt': at(10) }, (e) => e.recordIds.includes('rec-a') && time(e) < T + 10_000],
    [
      'everything at once',
      { userEmail: 'alice@example.com', teamName: 'Billing', collectionName: 'orders', recordId: 'rec-a', action: 'create', type: 'write', 'createdAt.gte': at(0), 'createdAt.lt': at(20) },
      (e) => e.user.username === 'alice' && e.team.name === 'Billing' && e.collection?.name === 'orders' && e.recordIds.includes('rec-a') && e.action === 'create',
    ],
    ['unknown email', { userEmail: 'nobody@example.com' }, () => false],
    ['unknown team', { teamName: 'billing' }, () => false],
    ['unknown collection', { collectionName: 'nope' }, () => false],
    ['unknown record', { recordId: 'rec-' }, () => false],
    ['a documented action Trellis never writes', { action: 'search' }, () => false],
    ['another documented action', { action: 'openNote' }, () => false],
  ]

  test('activity filters: every case returns exactly the matching entries, newest first — with and without extensions', async () => {
    await expectFilterCases('activity', (q) => listActivity(fx, q), { extensions: production, documented: productionDocumented }, activityCases(), /unknown|different|never|documented|everything/)
    expect(production.filter(activityCases().find((c) => c[0] === 'everything at once')![2]).length).toBeGreaterThan(0)
  })

  test('activity: staging has its own entries; filters never cross environments', async () => {
    const staging = (await walk((q) => listActivity(fx, { ...q, extensions: 'true' }, { environment: 'staging' }))).entries
    expect(staging.map((e) => e.label)).toEqual(['seed 53', 'seed 52', 'seed 51', 'seed 50', 'seed 49', 'seed 48'])
    expect(staging.every((e) => e.environment.name === 'staging')).toBe(true)
    const byRecord = await listActivity(fx, { recordId: 'rec-1', limit: '100', extensions: 'true' }, { environment: 'staging' })
    expect(byRecord.body.data.map((e) => e.label)).toEqual(staging.filter((e) => e.recordIds.includes('rec-1')).map((e) => e.label))
  })


  // ── Enum values and other parameters ──

  test('every enum value of the compatibility document is accepted as a filter; an extension value only with extensions=true', async () => {
    expect(documented('listActivityLogs', 'action').length).toBeGreaterThan(30)
    const list = (q: Record<string, string>) => listActivity(fx, q)
    await expectEnumFilter(list, production, 'action', documented('listActivityLogs', 'action'), [...EXTENSION_VALUES.listActivityLogs.action!])
    await expectEnumFilter(list, production, 'type', documented('listActivityLogs', 'type'), [])
    // What Trellis writes is within the document's values plus DESIGN §7's extensions, and the service agrees on which is which.
    expect([...ACTIVITY_ACTIONS].sort() as string[]).toEqual([...documented('listActivityLogs', 'action'), ...EXTENSION_VALUES.listActivityLogs.action!].sort())
  })

  const badQuery = (name: string, value: string) => badParameter((query) => ({ path: activityPath(query), headers: bearer(fx.alice) }), name, value)

  describe('bad parameters → 400 invalid_parameter naming the parameter', () => {
    scenarios(
      [
        ...BAD_EXTENSIONS.map((value) => badQuery('extensions', value)),
        badQuery('action', 'bogus'),
        badQuery('action', 'CreateNote'),
        badQuery('action', 'createNote '),
        badQuery('type', 'Write'),
        badQuery('type', 'delete'),
        badQuery('userId', 'abc'),
        badQuery('userId', '0'),
        badQuery('createdAt.lt', 'yesterday'),
        badQuery('createdAt.eq', '2026-13-01T00:00:00Z'),
        badQuery('recordId', 'x'.repeat(5000)),
        ...BAD_LIMITS.map((limit) => badQuery('limit', limit)),
      ],
      sendActivity,
    )
  })

  test('extensions= (empty) or false is the default page; repeated → the first', async () => {
    const plain = await listActivity(fx, { limit: '100' })
    for (const query of ['limit=100&extensions=', 'limit=100&extensions=false', 'limit=100&extensions=false&extensions=true']) {
      expect((await listActivity(fx, query)).body).toEqual(plain.body)
    }
    expect((await listActivity(fx, 'limit=100&extensions=true&extensions=false')).body.data).toHaveLength(production.length)
  })

  listParameterTests({
    list: (query) => listActivity(fx, query),
    echoed: { projectName: 'Acme', environmentName: 'production' },
    documented: () => productionDocumented,
    all: () => production,
    filter: { teamName: 'Support' },
    nothing: { recordId: 'nothing' },
  })

  test('hasMore: exactly `limit` matching entries → false; one more than limit → true', async () => {
    await expectHasMoreBoundaries('activity', (q) => listActivity(fx, q), [
      {},
      { teamName: 'Billing' },
      { recordId: 'rec-a' },
      { 'createdAt.gte': at(4) },
      { extensions: 'true' },
      { teamName: 'Billing', extensions: 'true' },
    ])
  })

  // ── Scope and role matrix ──

  describe('scope and role matrix (DESIGN §4 order: token → user → project → scope → role → existence)', () => {
    scenarios(scopeMatrix('activity', () => lf), sendActivity)
  })

  describe('unknown environment → 404 only after authentication; unknown project → 403 (nothing revealed)', () => {
    const on = (environment: string, token?: () => string, project = 'Acme') => () => ({ path: activityPath({}, project, environment), headers: bearer(token?.() ?? fx.alice) })
    scenarios(
      [
        { name: 'environment Production → 404', request: on('Production'), status: 404, code: 'not_found' },
        { name: 'environment nope, activity_logs:read → 404', request: on('nope', () => tokens.activity), status: 404, code: 'not_found' },
        // Before the environment is looked up: scope, role, project.
        { name: 'environment nope, notes:read → 403 insufficient_scope', request: on('nope', () => tokens.notesRead), status: 403, code: 'insufficient_scope' },
        { name: 'environment nope, editor → 403 insufficient_role', request: on('nope', () => tokens.bobAll), status: 403, code: 'insufficient_role' },
        { name: 'environment nope, unknown token → 401', request: on('nope', () => `trl_${'B'.repeat(43)}`), status: 401, code: 'unauthorized' },
        { name: 'project NoSuchProject → 403 wrong_project', request: on('production', undefined, 'NoSuchProject'), status: 403, code: 'wrong_project' },
      ],
      sendActivity,
    )
  })

  test('a deactivated user’s token → 403; reactivated → 200', async () => {
    await writeNow(fx.env.store, function* () {
      return yield* setUserDeactivated(fx.env.clock, fx.users.carol.id, true, null)
    })
    const carol = (await tokenFor(fx.env.store, fx.env.clock, 'carol', ['all'])).value
    expectError(await listActivity(fx, {}, { token: carol }), 403, 'user_deactivated')
    await writeNow(fx.env.store, function* () {
      return yield* setUserDeactivated(fx.env.clock, fx.users.carol.id, false, null)
    })
    expect((await listActivity(fx, {}, { token: carol })).status).toBe(200)
  })

  // ── Append-only ──

  test('append-only: an UPDATE on an activity log table fails with the trigger’s message', () => {
    const before = tableContents(fx.env.store)
    expect(() => execute(fx.env.store, "UPDATE activity_logs SET label = 'forged' WHERE id = (SELECT max(id) FROM activity_logs)")).toThrow('activity log entries are append-only')
    expect(() => execute(fx.env.store, 'UPDATE activity_logs SET user_id = user_id')).toThrow('activity log entries are append-only')
    expect(() => execute(fx.env.store, "UPDATE activity_log_records SET record_id = 'forged' WHERE log_id = (SELECT max(log_id) FROM activity_log_records)")).toThrow(
      'activity log entries are append-only',
    )
    const after = tableContents(fx.env.store)
    for (const table of ['activity_logs', 'activity_log_records']) expect(after[table]).toEqual(before[table]!)
  })

  describe('append-only: no route writes to the log — PATCH / PUT / DELETE / POST on the list URL → 405 (Allow: GET, HEAD), on entries → 404', () => {
    scenarios(noWriteRoutes('activity', () => lf, ['PATCH', 'DELETE', 'GET']), sendActivity)
    test('the log is unchanged after them', async () => {
      expect((await walk((q) => listActivity(fx, { ...q, extensions: 'true' }))).entries).toEqual(production)
    })
  })
})

// ── Pagination walk ─────────────────────────────────────────────────────────

describe('pagination walk over ≥ 250 activity entries written through the notes API', () => {
  let fx: Fx
  const TOTAL = 270
  beforeAll(async () => {
    fx = await buildFx()
  })
  afterAll(() => fx.env.cleanup())

  test(`${TOTAL} entries, several per millisecond: createdAt.lte paging skipping seen ids sees each exactly once`, async () => {
    const post = (path: string, json: unknown) => fx.app.handle(request(path, { method: 'POST', headers: bearer(fx.alice), json }))
    const noteIds: number[] = []
    const start = maxId(fx.env, 'activity_logs')
    for (let i = 0; i < TOTAL; i++) {
      // The clock moves 1 ms every 4 writes: entries share milliseconds (activity createdAt is max(now, previous)).
      if (i % 4 === 0) fx.env.clock.advance(1)
      if (i % 3 === 2 && noteIds.length > 0) {
        expect((await post(`${notesPath()}/${noteIds[i % noteIds.length]}/messages`, { content: `<p>${i}</p>` })).status).toBe(201)
      } else {
        const created = await post(notesPath(), { recordId: `walk-${i % 7}`, collectionName: 'orders', teamName: 'Support', title: `walk ${i}`, content: '<p>x</p>' })
        expect(created.status).toBe(201)
        noteIds.push(((await created.json()) as { id: number }).id)
      }
    }
    await listReadable(fx.env.store, 'activity_logs') // PostgreSQL: dated by the lists' pass
    const rows = queryAll(fx.env.store, 'SELECT id, created_at FROM activity_logs WHERE id > ? ORDER BY id', start) as { id: number; created_at: number }[]
    expect(rows).toHaveLength(TOTAL)
    // Strictly increasing in id order within the environment: no two entries share a millisecond.
    for (let k = 1; k < rows.length; k++) expect(rows[k]!.created_at).toBeGreaterThan(rows[k - 1]!.created_at)

    for (const limit of [100, 7, 5]) {
      const { entries, pages } = await walk((q) => listActivity(fx, q), {}, limit)
      const ids = entries.map((e) => Number(e.id)).filter((id) => id > start)
      expect(ids).toEqual(rows.map((r) => r.id).reverse())
      expect(new Set(ids).size).toBe(TOTAL)
      expect(pages).toBeGreaterThanOrEqual(Math.ceil(TOTAL / limit))
    }

    // With a filter too.
    const byRecord = await walk((q) => listActivity(fx, q), { recordId: 'walk-3', action: 'createNote' }, 5)
    const expected = (await walk((q) => listActivity(fx, q), {}, 100)).entries.filter((e) => e.recordIds[0] === 'walk-3' && e.action === 'createNote')
    expect(byRecord.entries.map((e) => e.id)).toEqual(expected.map((e) => e.id))

    // The notes recipe (createdAt.lt to the last entry's time) is exact for logs too.
    const seen = new Set<string>()
    let query: Record<string, string> = { limit: '100' }
    for (;;) {
      const { body } = await listActivity(fx, query)
      for (const e of body.data) if (Number(e.id) > start) seen.add(e.id)
      if (!body.hasMore) break
      query = { limit: '100', 'createdAt.lt': body.data.at(-1)!.createdAt }
    }
    expect(seen.size).toBe(TOTAL)
  }, 30_000)
})

// ── 429 bodies ──────────────────────────────────────────────────────────────

describeRateLimit('activity')

// ── The compatibility schema itself ─────────────────────────────────────────

describe('the validator: the document as published, extensions only where DESIGN §7 lists them', () => {
  test('the default validator is the unmodified document; the extensions=true check accepts only DESIGN §7 values on their own fields', () => {
    const entry = (action: string, extra: Record<string, unknown> = {}) => ({
      hasMore: false,
      parameters: { projectName: 'Acme', environmentName: 'production', limit: 10 },
      data: [
        {
          object: 'activityLog',
          id: '1',
          type: 'write',
          action,
          recordIds: [],
          createdAt: '2026-01-01T00:00:00.000Z',
          user: { object: 'user', id: 1, username: 'a', email: 'a@example.com' },
          environment: { object: 'environment', name: 'production' },
          team: { object: 'team', name: 'Support' },
          ...extra,
        },
      ],
    })
    expect(VALIDATORS.activity.ok(entry('createNote'))).toBe(true)
    for (const action of EXTENSION_VALUES.listActivityLogs.action!) expect(VALIDATORS.activity.ok(entry(action))).toBe(false)
    expect(assertValidWithExtensions('listActivityLogs', entry('createNote'))).toBe(0)
    expect(assertValidWithExtensions('listActivityLogs', entry('failWorkflow'))).toBe(1)
    expect(() => assertValidWithExtensions('listActivityLogs', entry('renameNote'))).toThrow(/beyond DESIGN/)
    // An extension entry must still be right in every other respect.
    expect(() => assertValidWithExtensions('listActivityLogs', entry('failWorkflow', { extra: 1 }))).toThrow(/beyond DESIGN/)
  })
})

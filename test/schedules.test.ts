/**
 * Workflow schedules (docs/workflows.md "Schedules") through the real app on the store the pass gives (both passes:
 * this file is in POSTGRES_PASS): the API and its errors, fire times in a time zone across DST (the clock injected),
 * ticks that start one run per matching record and skip a record with an active run, the limit, runAs losing its
 * rights, catch-up after downtime, a tick resumed after its instance died. Then real `trellis serve` processes: a
 * seconds schedule firing every second, kill -9 in the middle of a tick, kill -9 while record events are being
 * dispatched (docs/workflows.md "Events"), and (PostgreSQL) two instances on one database firing each tick once.
 *
 * Acme: alice is a project admin in team Support, bob an editor in Support, dave a user in Billing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import { ScheduleTicker } from '../src/executor/schedule-ticker.ts'
import { read } from '../src/db/read.ts'
import { write } from '../src/db/write.ts'
import { dueSchedules } from '../src/db/schedules.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createMetrics } from '../src/lib/metrics.ts'
import { claimTick, whereQuery, workTickBatch } from '../src/modules/schedules/service.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { bearer, execute, postgresOnlyTest, queryAll, queryOne, request, runNow, type ServeProcess, startServe, tempDir, TEST_STORE, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { type AcmeDocument, acmeDocument, acmeProject, applyAcme, seedDataDir, tokenFor } from './support/acme.ts'
import { startInstances } from './support/instances.ts'
import { freshDatabase, psqlSync } from './support/postgres-cluster.ts'
import { expectError, sendTo } from './support/scenarios.ts'

const PLACE = '/v1/project/Acme/environment/production/team/Support/workflows'
const scheduleOf = (workflow: string) => `${PLACE}/${encodeURIComponent(workflow)}/schedule`

/** Tickets: a typed collection the schedules filter on; five in production, three of them pending. */
const TICKETS = {
  name: 'tickets',
  permissions: { Support: { read: true, edit: true } },
  schema: {
    fields: [
      { name: 'status', type: 'select', options: ['open', 'pending', 'done'] },
      { name: 'openedAt', type: 'datetime' },
      { name: 'priority', type: 'integer' },
    ],
  },
}
const TICKET_RECORDS = [
  { id: 't1', data: { status: 'pending', openedAt: '2026-01-01T00:00:00.000Z', priority: 1 } },
  { id: 't2', data: { status: 'pending', openedAt: '2026-01-02T00:00:00.000Z', priority: 2 } },
  { id: 't3', data: { status: 'open', openedAt: '2026-01-03T00:00:00.000Z', priority: 3 } },
  { id: 't4', data: { status: 'pending', openedAt: '2026-01-04T00:00:00.000Z', priority: 4 } },
  { id: 't5', data: { status: 'done', openedAt: '2026-01-05T00:00:00.000Z', priority: 5 } },
]
const PENDING = ['t1', 't2', 't4']

/** A workflow on Support's tickets whose runs stay active (a ten-minute wait) until cancelled. */
const holdOn = (name: string) => ({ name, environment: 'production', team: 'Support', collection: 'tickets', steps: [{ type: 'wait', name: 'hold', seconds: 600 }] })
const WORKFLOWS = ['Chase', 'Limited', 'Lost rights', 'Catch up once', 'Catch up skip', 'Resumed', 'Api', 'Applied too'].map(holdOn)

/** Acme with the tickets and the workflows of these tests. */
function ticketsDocument(workflows: Record<string, unknown>[] = WORKFLOWS, records = TICKET_RECORDS): AcmeDocument {
  const document = acmeDocument()
  const acme = acmeProject(document) as unknown as { collections: unknown[]; records: unknown[]; workflows: unknown[] }
  acme.collections.push(TICKETS)
  acme.records.push(...records.map((r) => ({ environment: 'production', collection: 'tickets', ...r })))
  acme.workflows.push(...workflows)
  return document
}

type App = ReturnType<typeof testApp>

const send = sendTo

describe('through the app', () => {
  let env: TestEnv
  let app: App
  const tokens = {} as Record<'alice' | 'bob', string>

  const put = (workflow: string, json: unknown, token = tokens.alice) => send(app, request(scheduleOf(workflow), { method: 'PUT', headers: bearer(token), json }))
  const get = (workflow: string, token = tokens.alice) => send(app, request(scheduleOf(workflow), { headers: bearer(token) }))
  const workflowId = (name: string) => Number(queryOne<{ id: number }>(env.store, 'SELECT id FROM workflows WHERE name = ?', name)!.id)
  const runsOf = (name: string) =>
    queryAll<{ record_id: string; trigger: string; scheduled_for: number; status: string; user_id: number }>(
      env.store,
      'SELECT record_id, "trigger", scheduled_for, status, user_id FROM runs WHERE workflow_id = ? ORDER BY record_id, id',
      workflowId(name),
    ).map((r) => ({ ...r, scheduled_for: Number(r.scheduled_for), user_id: Number(r.user_id) }))
  const ticksOf = (name: string) =>
    queryAll<{ fire_at: number; started: number; skipped: number; failed: number; warning: string | null; finished_at: number | null }>(
      env.store,
      'SELECT fire_at, started, skipped, failed, warning, finished_at FROM schedule_ticks WHERE workflow_id = ? ORDER BY fire_at',
      workflowId(name),
    ).map((r) => ({ ...r, fire_at: Number(r.fire_at), started: Number(r.started), skipped: Number(r.skipped), failed: Number(r.failed) }))

  /** Every tick due at the test clock's time, worked to its end by a ticker of `owner` (as one instance's would). */
  async function tickAll(owner = 'test-instance') {
    for (const due of await read(env.store, dueSchedules(env.clock.now(), 100))) {
      const tickId = await write(env.store, () => claimTick(env.clock, due, owner, 30_000))
      if (tickId === null) continue
      while (true) {
        const batch = await write(env.store, () => workTickBatch(env.clock, tickId, owner, 30_000, 2))
        if (batch === null || batch.done) break
      }
    }
  }

  beforeAll(async () => {
    env = testEnv({ TRELLIS_API_RATE_PER_MIN: '100000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' })
    env.clock.set(Date.UTC(2026, 5, 1, 8, 0)) // Monday 1 June 2026, 08:00 UTC
    await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, ticketsDocument())
    app = testApp(env)
    tokens.alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    tokens.bob = (await tokenFor(env.store, env.clock, 'bob', ['all'])).value
  }, 60_000)
  afterAll(() => env.cleanup())

  test('PUT answers the definition, the next five fire times in the zone and in UTC; GET reads it; DELETE removes it', async () => {
    const saved = await put('Api', { cron: '0 9 * * 1-5', timezone: 'Europe/Paris', records: { where: { status: { eq: 'pending' }, openedAt: { lt: '{{now-3d}}' } } }, runAs: 'Alice@Example.com' })
    expect(saved.status).toBe(200)
    expect(saved.body).toEqual({
      cron: '0 9 * * 1-5',
      timezone: 'Europe/Paris',
      records: { where: { status: { eq: 'pending' }, openedAt: { lt: '{{now-3d}}' } }, limit: 1000 },
      runAs: 'alice@example.com',
      catchUp: 'once',
      enabled: true,
      nextAt: [
        { at: '2026-06-02T09:00:00+02:00', utc: '2026-06-02T07:00:00.000Z' },
        { at: '2026-06-03T09:00:00+02:00', utc: '2026-06-03T07:00:00.000Z' },
        { at: '2026-06-04T09:00:00+02:00', utc: '2026-06-04T07:00:00.000Z' },
        { at: '2026-06-05T09:00:00+02:00', utc: '2026-06-05T07:00:00.000Z' },
        { at: '2026-06-08T09:00:00+02:00', utc: '2026-06-08T07:00:00.000Z' },
      ],
      lastTick: null,
    })
    expect((await get('Api')).body).toEqual(saved.body)
    const disabled = await put('Api', { cron: '0 9 * * 1-5', runAs: 'alice@example.com', enabled: false, catchUp: 'skip', records: { limit: 10 } })
    expect(disabled.body).toMatchObject({ timezone: 'UTC', enabled: false, catchUp: 'skip', nextAt: [], records: { where: {}, limit: 10 } })
    const entries = queryAll<{ type: string; new_value: string }>(env.store, "SELECT type, new_value FROM admin_logs WHERE resource = 'workflow-schedule' ORDER BY id")
    expect(entries.map((e) => e.type)).toEqual(['add', 'update'])
    expect(entries[1]!.new_value).toContain('Api: schedule 0 9 * * 1-5 (UTC), disabled')
    const removed = await send(app, request(scheduleOf('Api'), { method: 'DELETE', headers: bearer(tokens.alice) }))
    expect(removed.status).toBe(204)
    expectError(await get('Api'), 404, 'schedule_not_found')
    expectError(await send(app, request(scheduleOf('Api'), { method: 'DELETE', headers: bearer(tokens.alice) })), 404, 'schedule_not_found')
  })

  test('fire times across DST in Europe/Paris, as croner reads them: a missing 02:30 fires at 03:00, a doubled one once', async () => {
    env.clock.set(Date.UTC(2026, 2, 27, 12, 0))
    const spring = await put('Api', { cron: '30 2 * * *', timezone: 'Europe/Paris', runAs: 'alice@example.com' })
    expect((spring.body.nextAt as unknown[]).slice(0, 3)).toEqual([
      { at: '2026-03-28T02:30:00+01:00', utc: '2026-03-28T01:30:00.000Z' },
      { at: '2026-03-29T03:00:00+02:00', utc: '2026-03-29T01:00:00.000Z' },
      { at: '2026-03-30T02:30:00+02:00', utc: '2026-03-30T00:30:00.000Z' },
    ])
    // The tick of the missing 02:30 fires at 03:00 local (01:00 UTC), dated so.
    env.clock.set(Date.UTC(2026, 2, 28, 1, 30, 0, 5))
    await tickAll()
    env.clock.set(Date.UTC(2026, 2, 29, 1, 0, 0, 5))
    await tickAll()
    expect(ticksOf('Api').map((t) => new Date(t.fire_at).toISOString())).toEqual(['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z'])
    env.clock.set(Date.UTC(2026, 9, 24, 12, 0))
    const autumn = await put('Api', { cron: '30 2 * * *', timezone: 'Europe/Paris', runAs: 'alice@example.com' })
    expect((autumn.body.nextAt as unknown[]).slice(0, 3)).toEqual([
      { at: '2026-10-25T02:30:00+02:00', utc: '2026-10-25T00:30:00.000Z' },
      { at: '2026-10-26T02:30:00+01:00', utc: '2026-10-26T01:30:00.000Z' },
      { at: '2026-10-27T02:30:00+01:00', utc: '2026-10-27T01:30:00.000Z' },
    ])
    // Hourly across the autumn change: 02:00 comes twice, and fires twice (every real hour).
    env.clock.set(Date.UTC(2026, 9, 24, 23, 30))
    const hourly = await send(app, request(`${scheduleOf('Api')}/preview`, { method: 'POST', headers: bearer(tokens.alice), json: { cron: '0 * * * *', timezone: 'Europe/Paris' } }))
    expect((hourly.body.nextAt as { at: string }[]).map((n) => n.at)).toEqual([
      '2026-10-25T02:00:00+02:00', '2026-10-25T02:00:00+01:00', '2026-10-25T03:00:00+01:00', '2026-10-25T04:00:00+01:00', '2026-10-25T05:00:00+01:00',
    ])
    env.clock.set(Date.UTC(2026, 9, 24, 12, 0))
    const preview = await send(app, request(`${scheduleOf('Api')}/preview`, { method: 'POST', headers: bearer(tokens.alice), json: { cron: '0 0 12 * * *', timezone: 'America/New_York' } }))
    expect(preview.body.nextAt).toEqual(expect.arrayContaining([{ at: '2026-10-24T12:00:00-04:00', utc: '2026-10-24T16:00:00.000Z' }]))
    expectError(await send(app, request(`${scheduleOf('Api')}/preview`, { method: 'POST', headers: bearer(tokens.alice), json: { cron: '0 25 * * *' } })), 400, 'validation_failed', 'cron')
    await send(app, request(scheduleOf('Api'), { method: 'DELETE', headers: bearer(tokens.alice) }))
  })

  test('relative times are read at the time given (a tick\'s fire time), as UTC date-times', () => {
    const fireAt = Date.UTC(2026, 0, 4, 9, 0)
    expect(whereQuery({ openedAt: { lt: '{{now-3d}}', gte: '{{ now - 2w }}' }, status: { in: ['open', 'pending'] }, priority: { gt: 2 } }, fireAt)).toEqual({
      'openedAt.lt': '2026-01-01T09:00:00.000Z',
      'openedAt.gte': '2025-12-21T09:00:00.000Z',
      'status.in': 'open,pending',
      'priority.gt': '2',
    })
    expect(whereQuery({ openedAt: { lt: '{{now}}' } }, fireAt)).toEqual({ 'openedAt.lt': '2026-01-04T09:00:00.000Z' })
    expect(whereQuery({ openedAt: { lt: '{{now+90m}}' } }, fireAt)).toEqual({ 'openedAt.lt': '2026-01-04T10:30:00.000Z' })
  })

  test('every error: 401, 403 for a non-admin, 404 for an unknown workflow, 400 naming the field', async () => {
    const body = { cron: '0 9 * * *', runAs: 'alice@example.com' }
    expect((await send(app, request(scheduleOf('Api'), { method: 'PUT', json: body }))).status).toBe(401)
    expect((await send(app, request(scheduleOf('Api')))).status).toBe(401)
    for (const sent of [await put('Api', body, tokens.bob), await get('Api', tokens.bob), await send(app, request(scheduleOf('Api'), { method: 'DELETE', headers: bearer(tokens.bob) }))]) {
      expect(sent.status).toBe(403)
      expect(sent.body).toMatchObject({ error: 'Forbidden', code: expect.any(String), message: expect.any(String) })
    }
    expectError(await put('No such workflow', body), 404, 'not_found')
    expectError(await get('No such workflow'), 404, 'not_found')
    expectError(await send(app, request(`${PLACE.replace('Support', 'Nobody')}/Api/schedule`, { headers: bearer(tokens.alice) })), 404, 'not_found')
    const bad: [unknown, string][] = [
      [{ ...body, cron: '61 * * * *' }, 'cron'],
      [{ ...body, cron: 'every day' }, 'cron'],
      [{ ...body, timezone: 'Mars/Olympus' }, 'timezone'],
      [{ ...body, records: { limit: 0 } }, 'records.limit'],
      [{ ...body, records: { limit: 10_001 } }, 'records.limit'],
      [{ ...body, records: { where: { nope: { eq: 'x' } } } }, 'records.where.nope.eq'],
      [{ ...body, records: { where: { status: { eq: 'closed' } } } }, 'records.where.status.eq'],
      [{ ...body, records: { where: { status: { like: 'x' } } } }, 'records.where.status.like'],
      [{ ...body, records: { where: { priority: { gt: 'high' } } } }, 'records.where.priority.gt'],
      [{ ...body, records: { where: { openedAt: { lt: '{{yesterday}}' } } } }, 'records.where.openedAt.lt'],
      [{ ...body, records: { where: { status: { in: 'pending' } } } }, 'records.where.status.in'],
      [{ ...body, records: { where: { createdAt: { contains: '2026' } } } }, 'records.where.createdAt.contains'],
      [{ ...body, runAs: 'nobody@example.com' }, 'runAs'],
      [{ ...body, runAs: 'dave@example.com' }, 'runAs'], // a user of Billing: cannot reach Support's workflow
      [{ ...body, catchUp: 'always' }, 'catchUp'],
      [{ ...body, extra: true }, 'extra'],
      [{ runAs: 'alice@example.com' }, 'cron'],
    ]
    for (const [json, field] of bad) {
      const sent = await put('Api', json)
      expect({ json, status: sent.status }).toEqual({ json, status: 400 })
      expect({ json, message: (sent.body as { message: string }).message }).toEqual({ json, message: expect.stringContaining(field) })
      expect(sent.body).toMatchObject({ error: 'Bad Request', code: expect.any(String) })
    }
    expect(queryOne<{ n: number }>(env.store, 'SELECT count(*) AS n FROM workflow_schedules WHERE workflow_id = ?', workflowId('Api'))!.n).toBe(0)
    // A record's own times filter as its fields do: "pending for three days" needs no field of its own.
    const byAge = await put('Api', { ...body, records: { where: { status: { eq: 'pending' }, createdAt: { lt: '{{now-3d}}' }, updatedAt: { gte: '{{now-1w}}' } } } })
    expect(byAge.status, JSON.stringify(byAge.body)).toBe(200)
    expect((await send(app, request(scheduleOf('Api'), { method: 'DELETE', headers: bearer(tokens.alice) }))).status).toBe(204)
  })

  test('a tick starts one run per matching record, as the runAs user, trigger schedule with scheduledFor; the next skips those with an active run', async () => {
    env.clock.set(Date.UTC(2026, 5, 1, 8, 0))
    await put('Chase', { cron: '0 9 * * 1-5', timezone: 'Europe/Paris', records: { where: { status: { eq: 'pending' }, openedAt: { lt: '{{now-3d}}' } } }, runAs: 'bob@example.com' })
    await tickAll() // 08:00 UTC: 10:00 in Paris, 09:00 was earlier today; the next is tomorrow 07:00 UTC
    expect(runsOf('Chase')).toEqual([])
    env.clock.set(Date.UTC(2026, 5, 2, 7, 0, 0, 200))
    await tickAll()
    const fireAt = Date.UTC(2026, 5, 2, 7, 0)
    const bob = Number(queryOne<{ id: number }>(env.store, "SELECT id FROM users WHERE username = 'bob'")!.id)
    expect(runsOf('Chase')).toEqual(PENDING.map((record_id) => ({ record_id, trigger: 'schedule', scheduled_for: fireAt, status: 'queued', user_id: bob })))
    expect(ticksOf('Chase')).toEqual([{ fire_at: fireAt, started: 3, skipped: 0, failed: 0, warning: null, finished_at: expect.anything() }])
    // The run as the API shows it.
    const runId = queryOne<{ id: string }>(env.store, "SELECT id FROM runs WHERE record_id = 't1' AND workflow_id = ?", workflowId('Chase'))!.id
    const run = await send(app, request(`/v1/workflow-runs/${runId}`, { headers: bearer(tokens.alice) }))
    expect(run.body).toMatchObject({ trigger: 'schedule', scheduledFor: '2026-06-02T07:00:00.000Z', recordId: 't1' })
    // A tick a day later: every pending record still has its active run — skipped and counted, nothing refused.
    env.clock.set(Date.UTC(2026, 5, 3, 7, 0, 1))
    await tickAll()
    expect(runsOf('Chase')).toHaveLength(3)
    expect(ticksOf('Chase')[1]).toMatchObject({ fire_at: Date.UTC(2026, 5, 3, 7, 0), started: 0, skipped: 3, failed: 0 })
    expect((await get('Chase')).body.lastTick).toEqual({ at: '2026-06-03T07:00:00.000Z', started: 0, skipped: 3, failed: 0, finished: true, warning: null })
    // Each run started with its activity entry, as any trigger's.
    expect(queryAll<{ label: string }>(env.store, "SELECT label FROM activity_logs WHERE action = 'triggerWorkflow' AND workflow_name = 'Chase'").map((r) => r.label)).toEqual(Array(3).fill('triggered by its schedule'))
  })

  test('a tick finding more records than its limit starts the first ones and writes an admin log entry', async () => {
    env.clock.set(Date.UTC(2026, 5, 10, 0, 0))
    await put('Limited', { cron: '0 * * * *', records: { where: { status: { in: ['pending', 'open'] } }, limit: 2 }, runAs: 'alice@example.com' })
    env.clock.set(Date.UTC(2026, 5, 10, 1, 0, 0, 5))
    await tickAll()
    expect(runsOf('Limited').map((r) => r.record_id)).toEqual(['t1', 't2'])
    expect(ticksOf('Limited')).toEqual([{ fire_at: Date.UTC(2026, 5, 10, 1), started: 2, skipped: 0, failed: 0, warning: 'over_limit', finished_at: expect.anything() }])
    const entry = queryOne<{ new_value: string; initiator: string }>(env.store, "SELECT new_value, initiator FROM admin_logs WHERE resource = 'workflow-schedule' AND new_value LIKE '%Limited%limit%'")
    expect(entry).toMatchObject({ initiator: 'system' })
    expect(entry!.new_value).toContain('more records than its limit of 2')
    expect((await get('Limited')).body.lastTick).toMatchObject({ warning: 'over_limit', started: 2 })
  })

  test('runAs losing its rights: the tick starts nothing, counts the records as failed and writes an admin log entry', async () => {
    env.clock.set(Date.UTC(2026, 5, 11, 0, 0))
    await put('Lost rights', { cron: '0 * * * *', records: { where: { status: { eq: 'pending' } } }, runAs: 'bob@example.com' })
    const bob = Number(queryOne<{ id: number }>(env.store, "SELECT id FROM users WHERE username = 'bob'")!.id)
    const support = Number(queryOne<{ id: number }>(env.store, "SELECT id FROM teams WHERE name = 'Support'")!.id)
    execute(env.store, 'DELETE FROM team_members WHERE user_id = ? AND team_id = ?', bob, support)
    try {
      env.clock.set(Date.UTC(2026, 5, 11, 1, 0, 0, 5))
      await tickAll()
      expect(runsOf('Lost rights')).toEqual([])
      expect(ticksOf('Lost rights')).toEqual([{ fire_at: Date.UTC(2026, 5, 11, 1), started: 0, skipped: 0, failed: 3, warning: 'run_as_forbidden', finished_at: expect.anything() }])
      const entry = queryOne<{ new_value: string }>(env.store, "SELECT new_value FROM admin_logs WHERE resource = 'workflow-schedule' AND new_value LIKE '%Lost rights: tick%'")
      expect(entry!.new_value).toContain('bob@example.com can no longer run the workflow')
      // Saving it again as bob is refused now.
      expectError(await put('Lost rights', { cron: '0 * * * *', runAs: 'bob@example.com' }), 400, 'validation_failed', 'runAs')
    } finally {
      execute(env.store, 'INSERT INTO team_members (team_id, user_id, created_at) VALUES (?, ?, ?)', support, bob, env.clock.now())
    }
  })

  test('the console: the workflow page shows the schedule, its next fire times and the last tick\'s warning', async () => {
    const cookie = `trellis_session=${(await runNow(env.store, createSession(env.clock, Number(queryOne<{ id: number }>(env.store, "SELECT id FROM users WHERE username = 'alice'")!.id), false))).id}`
    const page = async (workflow: string) => {
      const response = await app.handle(request(`/p/Acme/e/production/t/Support/w/${encodeURIComponent(workflow)}`, { headers: { cookie } }))
      expect(response.status).toBe(200)
      return await response.text()
    }
    const limited = await page('Limited')
    expect(limited).toContain('id="schedule-form"')
    expect(limited).toContain(`action="${scheduleOf('Limited')}"`)
    expect(limited).toContain('data-preview="' + scheduleOf('Limited') + '/preview"')
    expect(limited).toContain('found more records than its limit')
    expect(limited).toContain('&quot;in&quot;')
    const lost = await page('Lost rights')
    expect(lost).toContain('can no longer run this workflow')
    const none = await page('Applied too')
    expect(none).toContain('Schedule: <span id="schedule-state">none</span>')
    expect(none).not.toContain('Remove schedule')
  })

  test('after downtime: catchUp once fires one tick for every fire time missed (the latest), skip fires none', async () => {
    env.clock.set(Date.UTC(2026, 5, 12, 8, 30))
    await put('Catch up once', { cron: '0 * * * *', records: { where: { status: { eq: 'pending' } } }, runAs: 'alice@example.com', catchUp: 'once' })
    await put('Catch up skip', { cron: '0 * * * *', records: { where: { status: { eq: 'pending' } } }, runAs: 'alice@example.com', catchUp: 'skip' })
    // Every instance down from 08:30 to 11:20: 09:00, 10:00 and 11:00 were missed.
    env.clock.set(Date.UTC(2026, 5, 12, 11, 20))
    await tickAll()
    expect(ticksOf('Catch up once').map((t) => [t.fire_at, t.started])).toEqual([[Date.UTC(2026, 5, 12, 11), 3]])
    expect(ticksOf('Catch up skip')).toEqual([])
    for (const name of ['Catch up once', 'Catch up skip']) {
      expect(Number(queryOne<{ at: number }>(env.store, 'SELECT next_fire_at AS at FROM workflow_schedules WHERE workflow_id = ?', workflowId(name))!.at)).toBe(Date.UTC(2026, 5, 12, 12))
    }
    // On time (within 30 s) both fire.
    execute(env.store, "UPDATE runs SET status = 'cancelled', finished_at = 1 WHERE status = 'queued'")
    env.clock.set(Date.UTC(2026, 5, 12, 12, 0, 10))
    await tickAll()
    expect(ticksOf('Catch up once').map((t) => t.started)).toEqual([3, 3])
    expect(ticksOf('Catch up skip').map((t) => [t.fire_at, t.started])).toEqual([[Date.UTC(2026, 5, 12, 12), 3]])
  })

  test('the apply file: the schedule of a workflow entry is checked and saved as the PUT does; applied again it is unchanged', async () => {
    env.clock.set(Date.UTC(2026, 5, 14, 0, 0))
    const withSchedule = (schedule: unknown) => {
      const document = ticketsDocument([{ ...holdOn('Applied'), schedule }], [])
      return document
    }
    const ctx = { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }
    const schedule = { cron: '0 9 * * 1-5', timezone: 'Europe/Paris', records: { where: { status: { eq: 'pending' }, openedAt: { lt: '{{now-3d}}' } }, limit: 50 }, runAs: 'alice@example.com', catchUp: 'skip' }
    const first = await applyAcme(ctx, withSchedule(schedule))
    expect(first.changes).toContainEqual({ action: 'created', kind: 'schedule', name: 'Acme/production/Support/Applied' })
    expect((await get('Applied')).body).toMatchObject({ cron: '0 9 * * 1-5', timezone: 'Europe/Paris', records: { limit: 50 }, catchUp: 'skip', runAs: 'alice@example.com' })
    const again = await applyAcme(ctx, withSchedule(schedule))
    expect(again.changes.filter((c) => c.kind === 'schedule')).toEqual([])
    const index = acmeProject(withSchedule(schedule)).workflows!.length - 1
    for (const [bad, path, message] of [
      [{ ...schedule, cron: '0 25 * * *' }, 'cron', 'Invalid value for hour'],
      [{ ...schedule, records: { where: { nope: { eq: 1 } } } }, 'records.where.nope.eq', 'no field nope'],
      [{ ...schedule, runAs: 'dave@example.com' }, 'runAs', 'cannot run this workflow'],
      [{ ...schedule, catchUp: 'never' }, 'catchUp', ''],
    ] as const) {
      const error = await applyAcme(ctx, withSchedule(bad)).then(() => null, (e: Error & { problems?: { path: string; message: string }[] }) => e)
      expect(error?.problems).toEqual([{ path: `projects[0].workflows[${index}].schedule.${path}`, message: expect.stringContaining(message) }])
    }
  })

  test('a tick whose instance died after a batch is resumed by another once its lease expires: each record considered once', async () => {
    execute(env.store, "UPDATE runs SET status = 'cancelled', finished_at = 1 WHERE status = 'queued'")
    env.clock.set(Date.UTC(2026, 5, 13, 0, 0))
    await put('Resumed', { cron: '0 * * * *', records: { where: { status: { in: ['pending', 'open', 'done'] } } }, runAs: 'alice@example.com' })
    env.clock.set(Date.UTC(2026, 5, 13, 1, 0, 0, 5))
    const [due] = (await read(env.store, dueSchedules(env.clock.now(), 100))).filter((s) => s.workflowId === workflowId('Resumed'))
    const tickId = (await write(env.store, () => claimTick(env.clock, due!, 'dead-instance', 30_000)))!
    // Two instances read the same due schedule: the second claim of the same fire time finds it moved.
    expect(await write(env.store, () => claimTick(env.clock, due!, 'other-instance', 30_000))).toBeNull()
    expect(await write(env.store, () => workTickBatch(env.clock, tickId, 'dead-instance', 30_000, 2))).toMatchObject({ started: 2, done: false })
    // It dies here. Another instance cannot take the tick while the lease lasts…
    expect(await write(env.store, () => workTickBatch(env.clock, tickId, 'live-instance', 30_000, 2))).toBeNull()
    // …and resumes it at the cursor once it expired: the ticker finds abandoned ticks by their lease.
    env.clock.advance(31_000)
    const ticker = new ScheduleTicker({ store: env.store, clock: env.clock, logger: silentLogger, owner: 'live-instance', leaseMs: 30_000, onRunsQueued: () => {}, metrics: createMetrics(), pollMs: 20 })
    ticker.start()
    try {
      await until('the tick to be finished', () => ticksOf('Resumed')[0]?.finished_at != null, 10_000)
    } finally {
      await ticker.stop()
    }
    expect(runsOf('Resumed').map((r) => r.record_id)).toEqual(['t1', 't2', 't3', 't4', 't5'])
    expect(ticksOf('Resumed')).toEqual([{ fire_at: Date.UTC(2026, 5, 13, 1), started: 5, skipped: 0, failed: 0, warning: null, finished_at: expect.anything() }])
  })
})

// ── Real servers ─────────────────────────────────────────────────────────────

const cleanups: (() => void)[] = []
const servers: ServeProcess[] = []
afterAll(async () => {
  for (const server of servers) await server.stop('SIGKILL').catch(() => {})
  for (const cleanup of cleanups) cleanup()
})

/** `count` pending tickets written straight into the database (an apply of thousands would take long): portable SQL. */
const manyTicketsSql = (count: number) => `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
  INSERT INTO records (environment_id, collection_id, record_key, data, created_at, updated_at)
  SELECT e.id, c.id, 'm' || i, '{"status":"pending","openedAt":"2026-01-01T00:00:00.000Z","priority":1}', 1700000000000 + i, 1700000000000 + i
  FROM n, environments e, collections c WHERE e.name = 'production' AND c.name = 'tickets'`

/** A real `serve` on SQLite, or (PostgreSQL) `count` instances on one fresh database; the schedule API through the first. */
async function deployment(workflows: Record<string, unknown>[], count = 1, records = TICKET_RECORDS) {
  const document = ticketsDocument(workflows, records)
  if (TEST_STORE === 'postgres') {
    const url = await freshDatabase()
    const set = await startInstances({ url, document, count })
    const token = await set.token('alice@example.com', 'admin', 'all')
    return {
      urls: () => set.instances.map((i) => i.url),
      token,
      sql: (statement: string) => psqlSync(url, statement).trim(),
      kill: async () => {
        for (const instance of [...set.instances]) expect(await set.kill(instance)).not.toBe(0)
      },
      restart: async () => {
        const dir = tempDir('trellis-schedules-')
        cleanups.push(dir.cleanup)
        servers.push(await startServe({ dataDir: dir.path, cwd: dir.path, env: set.env, timeoutMs: 20_000 }))
      },
      close: () => set.close(),
    }
  }
  const seeded = await seedDataDir('schedules', [], cleanups, async (store) => {
    await applyAcme({ store, clock: systemClock, secret: Buffer.alloc(32, 7), baseUrl: 'http://127.0.0.1' }, document)
    return { token: (await tokenFor(store, systemClock, 'alice', ['all'])).value }
  })
  const serve = async () => {
    const server = await startServe({ dataDir: seeded.dataDir, cwd: seeded.cwd, env: { TRELLIS_LOG_LEVEL: 'warn', TRELLIS_EXECUTOR_LEASE_SECONDS: '1' }, timeoutMs: 20_000 })
    servers.push(server)
    return server
  }
  let server = await serve()
  return {
    urls: () => [server.url],
    token: seeded.token,
    sql: (statement: string) => {
      const db = new Database(join(seeded.dataDir, 'trellis.db'))
      try {
        // The server writes meanwhile (a checkpoint may hold the file a moment): wait rather than fail.
        db.exec('PRAGMA busy_timeout = 5000')
        const row = db.prepare(statement).values()[0]
        return row === undefined ? '' : String(row[0])
      } finally {
        db.close()
      }
    },
    kill: async () => {
      expect(await server.stop('SIGKILL')).not.toBe(0)
    },
    restart: async () => {
      server = await serve()
    },
    close: async () => void (await server.stop('SIGTERM')),
  }
}

async function putSchedule(base: string, token: string, workflow: string, json: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${base}${scheduleOf(workflow)}`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(json) })
  const body = (await response.json()) as Record<string, unknown>
  expect(response.status, JSON.stringify(body)).toBe(200)
  return body
}

test('real server: a seconds schedule fires every second, one run per matching record; a record with an active run is skipped, never a second run', async () => {
  const deployed = await deployment([holdOn('Every second')])
  try {
    await putSchedule(deployed.urls()[0]!, deployed.token, 'Every second', { cron: '* * * * * *', records: { where: { status: { eq: 'pending' } } }, runAs: 'alice@example.com' })
    const ticks = () => Number(deployed.sql('SELECT count(*) FROM schedule_ticks WHERE finished_at IS NOT NULL'))
    await until('four ticks', () => ticks() >= 4, 20_000)
    const response = await fetch(`${deployed.urls()[0]}${scheduleOf('Every second')}`, { method: 'DELETE', headers: { authorization: `Bearer ${deployed.token}` } })
    expect(response.status).toBe(204)
    // Consecutive seconds, one tick each; the first started a run per pending ticket, the others skipped them.
    const rows = Number(deployed.sql('SELECT count(*) FROM schedule_ticks'))
    const span = Number(deployed.sql('SELECT max(fire_at) - min(fire_at) FROM schedule_ticks'))
    expect(span).toBe((rows - 1) * 1000)
    expect(Number(deployed.sql('SELECT sum(started) FROM schedule_ticks'))).toBe(PENDING.length)
    expect(Number(deployed.sql('SELECT min(skipped) FROM schedule_ticks WHERE started = 0'))).toBe(PENDING.length)
    expect(Number(deployed.sql("SELECT count(*) FROM runs WHERE \"trigger\" = 'schedule'"))).toBe(PENDING.length)
    expect(deployed.sql('SELECT count(*) FROM (SELECT record_id FROM runs GROUP BY record_id HAVING count(*) > 1) x')).toBe('0')
  } finally {
    await deployed.close()
  }
}, 120_000)

test('real server: kill -9 in the middle of a tick; the restarted server finishes it, each record once', async () => {
  // PostgreSQL inserts each run in a round trip of its own: fewer suffice to be mid-tick.
  const count = TEST_STORE === 'postgres' ? 1500 : 5000
  const deployed = await deployment([holdOn('Big tick')], 1, [])
  try {
    deployed.sql(manyTicketsSql(count))
    const at = new Date(Date.now() + 3000)
    const cron = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`
    await putSchedule(deployed.urls()[0]!, deployed.token, 'Big tick', { cron, records: { where: { status: { eq: 'pending' } }, limit: 10_000 }, runAs: 'alice@example.com' })
    await until('the tick to have started some runs', () => Number(deployed.sql('SELECT coalesce(max(started), 0) FROM schedule_ticks')) > 0, 20_000, 2)
    await deployed.kill()
    // Killed in the middle: the tick had started some of its runs, not all, and those it started are committed with its cursor.
    const before = Number(deployed.sql('SELECT started FROM schedule_ticks'))
    expect(before).toBeGreaterThan(0)
    expect(before).toBeLessThan(count)
    expect(Number(deployed.sql("SELECT count(*) FROM runs WHERE \"trigger\" = 'schedule'"))).toBe(before)
    await deployed.restart()
    await until('the tick to be finished', () => deployed.sql('SELECT count(*) FROM schedule_ticks WHERE finished_at IS NOT NULL') === '1', 120_000)
    expect(Number(deployed.sql('SELECT count(*) FROM schedule_ticks'))).toBe(1)
    expect(Number(deployed.sql('SELECT started FROM schedule_ticks'))).toBe(count)
    expect(Number(deployed.sql("SELECT count(*) FROM runs WHERE \"trigger\" = 'schedule'"))).toBe(count)
    expect(Number(deployed.sql('SELECT count(DISTINCT record_id) FROM runs'))).toBe(count)
  } finally {
    await deployed.close()
  }
}, 240_000)

test('real server: kill -9 while record events are being dispatched; the restarted server starts each committed change’s run once', async () => {
  // One import commits every ticket and its event in one transaction; the dispatcher then works through the outbox.
  const count = TEST_STORE === 'postgres' ? 1000 : 2500
  const deployed = await deployment([holdOn('On import')], 1, [])
  try {
    const base = deployed.urls()[0]!
    const events = await fetch(`${base}${PLACE}/On%20import/events`, { method: 'PUT', headers: { authorization: `Bearer ${deployed.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ on: [{ event: 'recordCreated' }], runAs: 'alice@example.com' }) })
    expect(events.status).toBe(200)
    const csv = `id,status,priority\n${Array.from({ length: count }, (_, i) => `e${i},pending,1`).join('\n')}\n`
    const imported = await fetch(`${base}/v1/project/Acme/environment/production/collection/tickets/records.csv`, { method: 'POST', headers: { authorization: `Bearer ${deployed.token}`, 'content-type': 'text/csv' }, body: csv })
    expect(imported.status, await imported.clone().text()).toBe(200)
    const eventRuns = () => Number(deployed.sql("SELECT count(*) FROM runs WHERE \"trigger\" = 'event'"))
    await until('the dispatcher to have started some runs', () => eventRuns() > 0, 20_000, 2)
    await deployed.kill()
    // Killed in the middle: each committed ticket has its run or its event still in the outbox, never both, never neither.
    const before = eventRuns()
    expect(before).toBeLessThan(count)
    expect(before + Number(deployed.sql("SELECT count(*) FROM workflow_events WHERE status = 'pending'"))).toBe(count)
    await deployed.restart()
    await until('every event dispatched', () => deployed.sql('SELECT count(*) FROM workflow_events') === '0', 120_000)
    expect(eventRuns()).toBe(count)
    expect(Number(deployed.sql("SELECT count(DISTINCT record_id) FROM runs WHERE \"trigger\" = 'event'"))).toBe(count)
  } finally {
    await deployed.close()
  }
}, 240_000)

postgresOnlyTest('several instances on one database', 'PostgreSQL: two instances fire each tick once (counted from the runs\' scheduledFor)', async () => {
  const quick = { name: 'Quick', environment: 'production', team: 'Support', collection: 'tickets', steps: [{ type: 'load' }] }
  const deployed = await deployment([quick], 2)
  try {
    await putSchedule(deployed.urls()[0]!, deployed.token, 'Quick', { cron: '* * * * * *', records: { where: { status: { eq: 'pending' } } }, runAs: 'alice@example.com' })
    await until('eight finished ticks', () => Number(deployed.sql('SELECT count(*) FROM schedule_ticks WHERE finished_at IS NOT NULL')) >= 8, 30_000)
    const removed = await fetch(`${deployed.urls()[1]}${scheduleOf('Quick')}`, { method: 'DELETE', headers: { authorization: `Bearer ${deployed.token}` } })
    expect(removed.status).toBe(204)
    await until('the last tick to finish', () => deployed.sql('SELECT count(*) FROM schedule_ticks WHERE finished_at IS NULL') === '0', 10_000)
    // The runs finish within the second, so most ticks start a run on every pending ticket: a tick fired twice would
    // show as two runs of one record with the same scheduledFor.
    expect(deployed.sql('SELECT count(*) FROM (SELECT record_id, scheduled_for FROM runs GROUP BY record_id, scheduled_for HAVING count(*) > 1) x')).toBe('0')
    expect(Number(deployed.sql('SELECT count(DISTINCT scheduled_for) FROM runs'))).toBeGreaterThanOrEqual(3)
    expect(deployed.sql('SELECT sum(started) FROM schedule_ticks')).toBe(deployed.sql("SELECT count(*) FROM runs WHERE \"trigger\" = 'schedule'"))
    expect(deployed.sql(`SELECT count(*) FROM schedule_ticks WHERE started + skipped <> ${PENDING.length}`)).toBe('0')
    // Each tick counted once, on the instance that worked it.
    let counted = 0
    for (const url of deployed.urls()) {
      const text = await (await fetch(`${url}/metrics`)).text()
      for (const line of text.split('\n')) if (line.startsWith('trellis_schedule_ticks_total{')) counted += Number(line.split(' ').at(-1))
    }
    expect(counted).toBe(Number(deployed.sql('SELECT count(*) FROM schedule_ticks')))
  } finally {
    await deployed.close()
  }
}, 120_000)

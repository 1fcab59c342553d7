/**
 * The console's inbox and task pages over the real app with the executor running, on the test store (SQLite, or
 * PostgreSQL with TRELLIS_TEST_STORE=postgres). Bob (Support, editor) starts a refund that asks Billing (carol: admin,
 * dave: user) to approve with a form; erin is a member outside Billing. Covers the header's count (the API's
 * `assignee=me` rule), the inbox's filters and refusals, the task page (record, read entry, notes, the form from its
 * schema, who may decide), a decision through the API with the session (a 422 naming the field, then approved: the
 * run finishes), the record's tasks and the run's open task, and the no-SMTP notice.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Executor } from '../src/executor/executor.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { queryOne, request, runNow, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, tokenFor, userId } from './support/acme.ts'

const form = {
  type: 'object',
  title: 'Refund',
  properties: {
    amount: { type: 'number', minimum: 0, maximum: 500, title: 'Amount to refund', description: 'In euros' },
    reason: { type: 'string', enum: ['damaged', 'late', 'other'] },
    note: { type: 'string', maxLength: 20 },
    restock: { type: 'boolean', title: 'Put back in stock' },
  },
  required: ['amount'],
}

let env: TestEnv
let executor: Executor
let app: ReturnType<typeof testApp>
const cookies: Record<string, string> = {}
let runId = ''
let taskId = ''

beforeAll(async () => {
  env = testEnv()
  const document = acmeDocument()
  const acme = acmeProject(document)
  document.users.push({ email: 'erin@example.com', username: 'erin' })
  acme.members!.push({ user: 'erin@example.com', role: 'user' })
  acme.workflows!.push(
    ordersWorkflow('Refund with approval', [
      { type: 'task', name: 'approve', title: 'Refund {{record.id}}?', assignees: { teams: ['Billing'] }, form },
      { type: 'update', name: 'stamp', set: { refunded: '{{tasks.approve.input.amount}}' } },
    ]),
  )
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  executor = new Executor({ store: env.store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20 })
  app = testApp(env, { clock: systemClock, executor })
  executor.start()
  for (const name of ['alice', 'bob', 'carol', 'dave', 'erin']) {
    cookies[name] = `trellis_session=${(await runNow(env.store, createSession(systemClock, userId(env.store, name), false))).id}`
  }
  const bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
  const started = await app.handle(
    request('/v1/project/Acme/environment/production/workflow-runs', {
      method: 'POST',
      headers: { authorization: `Bearer ${bob}` },
      json: { workflowName: 'Refund with approval', teamName: 'Support', recordId: 'ord_1001' },
    }),
  )
  expect(started.status).toBe(202)
  runId = ((await started.json()) as { runId: string }).runId
  taskId = await until('the task opens', () => queryOne<{ id: string }>(env.store, 'SELECT id FROM tasks WHERE run_id = ?', runId)?.id)
}, 60_000)

afterAll(async () => {
  await executor.stop(2_000)
  env.cleanup()
})

async function get(path: string, who: string) {
  const response = await app.handle(request(path, { headers: { cookie: cookies[who]! } }))
  return { status: response.status, text: await response.text() }
}

async function send(path: string, who: string, method: string, json: unknown) {
  const response = await app.handle(request(path, { method, headers: { cookie: cookies[who]! }, json }))
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

/** The header's count, or 0 when the link shows none. */
const inboxCount = (page: string) => Number(/id="inbox-link"[^>]*>Inbox(?: <span class="count">(\d+)<\/span>)?/.exec(page)?.[1] ?? 0)

describe('the inbox', () => {
  test('the header counts the tasks each person may decide now: the assignees, a project admin, not the requester, not an outsider', async () => {
    const counts = Object.fromEntries(await Promise.all(['alice', 'bob', 'carol', 'dave', 'erin'].map(async (name) => [name, inboxCount((await get('/', name)).text)])))
    expect(counts).toEqual({ alice: 1, bob: 0, carol: 1, dave: 1, erin: 0 })
  })

  test('lists the task with its place, deadline and state, and says the inbox is the only channel without SMTP', async () => {
    const page = await get('/inbox', 'dave')
    expect(page.status).toBe(200)
    expect(page.text).toContain(`href="/tasks/${taskId}"`)
    expect(page.text).toContain('Refund ord_1001?')
    expect(page.text).toContain('Acme · production · Support')
    expect(page.text).toContain('this inbox is the only place tasks reach you')
    expect((await get('/inbox', 'erin')).text).toContain('Nothing waits for you.')
    expect((await get('/inbox', 'bob')).text).not.toContain(`/tasks/${taskId}`)
  })

  test('filters: my teams, all for project admins, workflow, overdue; a bad one is a 400 page naming it', async () => {
    const has = async (query: string, who: string) => (await get(`/inbox?${query}`, who)).text.includes(`/tasks/${taskId}`)
    expect(await has('show=teams', 'dave')).toBe(true)
    expect(await has('show=teams', 'alice')).toBe(false)
    expect(await has('show=all', 'alice')).toBe(true)
    expect(await has('show=all', 'dave')).toBe(false)
    expect(await has('workflow=Refund+with+approval', 'dave')).toBe(true)
    expect(await has('workflow=Refund+order', 'dave')).toBe(false)
    expect(await has('overdue=true', 'dave')).toBe(false)
    const bad = await get('/inbox?show=everything', 'dave')
    expect(bad.status).toBe(400)
    expect(bad.text).toContain('show')
  })
})

describe('the task page', () => {
  test("shows the record's data, the run, the deadline and the form from its schema; the view is a read entry", async () => {
    const page = await get(`/tasks/${taskId}`, 'dave')
    expect(page.status).toBe(200)
    expect(page.text).toContain('id="record-data"')
    expect(page.text).toContain('cus_001')
    expect(page.text).toContain(`data-run-status="waiting"`)
    // dave may not open bob's run: its id without a link.
    expect(page.text).not.toContain(`href="/runs/${runId}"`)
    expect(page.text).toContain('<select name="reason" data-in="input" data-optional><option value="">—</option><option>damaged</option><option>late</option><option>other</option></select>')
    expect(page.text).toContain('type="number" name="amount" data-in="input" data-type="number" step="any" min="0" max="500" required aria-describedby="hint-0"')
    expect(page.text).toContain('Amount to refund <span class="muted">(required)</span>')
    expect(page.text).toContain('<span class="hint" id="hint-0">In euros</span>')
    expect(page.text).toContain('name="note" data-in="input" data-optional maxlength="20"')
    expect(page.text).toContain('<input type="checkbox" name="restock" data-in="input"> Put back in stock')
    expect(page.text).toContain('value="approve">Approve</button>')
    // The fields in the order the workflow writes them, not sorted.
    const at = (name: string) => page.text.indexOf(`name="${name}"`)
    expect([at('amount') < at('reason'), at('reason') < at('note'), at('note') < at('restock')]).toEqual([true, true, true])
    const entry = queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM activity_logs WHERE action = 'read' AND user_id = ?", userId(env.store, 'dave'))
    expect(Number(entry?.n)).toBe(1)
    // The live parts leave the record out, and log nothing.
    const live = await get(`/tasks/${taskId}?live=1`, 'dave')
    expect(live.text).not.toContain('record-data')
    expect(Number(queryOne<{ n: number }>(env.store, "SELECT count(*) AS n FROM activity_logs WHERE action = 'read' AND user_id = ?", userId(env.store, 'dave'))?.n)).toBe(1)
  })

  test('the requester sees why they cannot decide, with the run linked; an outsider gets 404', async () => {
    const bob = await get(`/tasks/${taskId}`, 'bob')
    expect(bob.status).toBe(200)
    expect(bob.text).toContain('The run this task belongs to is yours: someone else decides it.')
    expect(bob.text).toContain(`href="/runs/${runId}"`)
    expect(bob.text).not.toContain('id="decide"')
    expect((await get(`/tasks/${taskId}`, 'erin')).status).toBe(404)
    expect((await get('/tasks/00000000-0000-7000-8000-000000000000', 'dave')).status).toBe(404)
  })

  test('a decider discusses the task in its notes thread (the team’s notes on the record) before deciding', async () => {
    const note = await send(`/tasks/${taskId}/notes`, 'dave', 'POST', { title: 'Check the box', text: 'Was it damaged?' })
    expect(note.status).toBe(201)
    const reply = await send(`/tasks/${taskId}/notes/${note.body.id}/messages`, 'carol', 'POST', { text: 'Yes, photos attached.' })
    expect(reply.status).toBe(201)
    expect((await send(`/tasks/${taskId}/notes/${note.body.id}/messages`, 'erin', 'POST', { text: 'me too' })).status).toBe(404)
    expect((await send(`/tasks/${taskId}/notes`, 'dave', 'POST', { title: ' ', text: 'x' })).status).toBe(400)
    const page = await get(`/tasks/${taskId}`, 'dave')
    expect(page.text).toContain('Check the box')
    expect(page.text).toContain('Yes, photos attached.')
    expect(page.text).toContain(`action="/tasks/${taskId}/notes/${note.body.id}/messages"`)
    // The same thread on the record's page, as the task's team.
    const record = await get('/p/Acme/e/production/t/Support/c/orders/r/ord_1001', 'alice')
    expect(record.text).toContain('Check the box')
  })

  test("the record's page lists its tasks and the run's page links its open task", async () => {
    const record = await get('/p/Acme/e/production/t/Support/c/orders/r/ord_1001', 'bob')
    expect(record.text).toContain('<h2 id="tasks">Tasks</h2>')
    expect(record.text).toContain(`href="/tasks/${taskId}"`)
    const run = await get(`/runs/${runId}`, 'bob')
    expect(run.text).toContain(`<tr id="run-task"><th>Waiting for</th><td><a class="task-link" href="/tasks/${taskId}">Refund ord_1001?</a>`)
  })

  test('a refused input names its field (a JSON pointer the page puts beside it); an approval finishes the run', async () => {
    const wrong = await send(`/v1/tasks/${taskId}/decisions`, 'dave', 'POST', { decision: 'approve', input: { amount: 900 } })
    expect(wrong.status).toBe(422)
    expect(wrong.body.details).toEqual([{ field: '/amount', message: 'must be <= 500' }])
    const right = await send(`/v1/tasks/${taskId}/decisions`, 'dave', 'POST', { decision: 'approve', comment: 'ok', input: { amount: 120, restock: true } })
    expect(right.status).toBe(200)
    await until('the run finishes', () => queryOne<{ status: string }>(env.store, 'SELECT status FROM runs WHERE id = ?', runId)?.status === 'succeeded')
    const page = await get(`/tasks/${taskId}`, 'dave')
    expect(page.text).toContain('You approved this task.')
    expect(page.text).toContain('data-run-status="succeeded"')
    expect(page.text).toContain('{&quot;amount&quot;:120,&quot;restock&quot;:true}')
    expect(page.text).not.toContain('data-live-task')
    expect(inboxCount(page.text)).toBe(0)
    expect((await get(`/runs/${runId}`, 'bob')).text).not.toContain('run-task')
  })
})

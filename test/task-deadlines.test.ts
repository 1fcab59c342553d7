/**
 * Task deadlines, reminders and escalation, and the task mails, through the real app (app.handle) with the executor
 * running and a real SMTP server (test/support/smtp.ts) on 127.0.0.1, on the test store (SQLite, or PostgreSQL with
 * TRELLIS_TEST_STORE=postgres). Every `onTimeout` outcome, escalation (assignees grow, `escalated`, mail to those
 * added only), the reminder sent once, a deadline acted on once by two instances' timers, and a real `serve` killed
 * with `kill -9` while a deadline is due and a mail is queued: after the restart, the deadline is acted on once and
 * each mail accepted once. Deadlines are a few seconds: the assertions are about the order of events, with margins.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Store } from '../src/db/store.ts'
import { Executor } from '../src/executor/executor.ts'
import { MailDelivery } from '../src/executor/mail-delivery.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { mailSettingsOf } from '../src/modules/mail/service.ts'
import { reminderAt } from '../src/modules/tasks/service.ts'
import { anotherStore, processEnv, queryAll, queryOne, request, type ServeProcess, startServe, tempDir, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, tokenFor } from './support/acme.ts'
import { type ReceivedMail, type SmtpServer, startSmtpServer } from './support/smtp.ts'

const FROM = 'Trellis <trellis@mail.test>'
const PRODUCTION = '/v1/project/Acme/environment/production'
const NO_API_LIMIT = { TRELLIS_API_RATE_PER_MIN: '1000000', TRELLIS_API_RATE_PER_HOUR: '1000000', TRELLIS_API_RATE_PER_DAY: '1000000' }

/** A task step asking Billing (carol, dave), due in `seconds`. */
const askBilling = (seconds: number, extra: Record<string, unknown> = {}) => ({
  type: 'task',
  name: 'approve',
  title: 'Refund {{record.id}}?',
  assignees: { teams: ['Billing'] },
  dueIn: { seconds },
  ...extra,
})
const stamp = { type: 'update', name: 'stamp', set: { decision: '{{tasks.approve.decision}}' } }

let smtp: SmtpServer
let env: TestEnv
let executor: Executor
let sender: MailDelivery
let app: ReturnType<typeof testApp>
const tokens: Record<string, string> = {}
const cleanups: (() => void | Promise<void>)[] = []

/** Acme with erin (a plain member) in a Managers team, records d-1…d-20, and the workflows `extra` adds. */
function deadlineDocument(extra: Record<string, unknown>[]) {
  const document = acmeDocument()
  const acme = acmeProject(document)
  document.users.push({ email: 'erin@example.com', username: 'erin' })
  acme.members!.push({ user: 'erin@example.com', role: 'user' })
  acme.teams!.push({ name: 'Managers', members: ['erin@example.com'] })
  for (let i = 1; i <= 20; i++) acme.records!.push({ environment: 'production', collection: 'orders', id: `d-${i}`, data: { amount: i } })
  acme.workflows!.push(...extra)
  return document
}

const mailEnvOf = (smtpUrl: string) => ({ ...NO_API_LIMIT, TRELLIS_SMTP_URL: smtpUrl, TRELLIS_MAIL_FROM: FROM, TRELLIS_MAIL_RETRY_MS: '100', TRELLIS_SMTP_TIMEOUT_SECONDS: '2' })

const newExecutor = (store: Store) =>
  new Executor({ store, clock: systemClock, logger: silentLogger, concurrency: 2, leaseMs: 5_000, pollMs: 20, mail: mailSettingsOf(env.config, env.secret) })

beforeAll(async () => {
  smtp = await startSmtpServer()
  env = testEnv(mailEnvOf(smtp.url))
  const document = deadlineDocument([
    ordersWorkflow('Expires', [askBilling(2)]),
    ordersWorkflow('Expires later', [askBilling(4)]),
    ordersWorkflow('Rejects at the deadline', [askBilling(2, { onTimeout: 'reject' }), stamp]),
    ordersWorkflow('Rejected at the deadline ends', [askBilling(2, { onTimeout: 'reject', onReject: 'end' }), stamp]),
    ordersWorkflow('Approves at the deadline', [askBilling(2, { onTimeout: 'approve' }), stamp]),
    ordersWorkflow('Escalates', [askBilling(2, { assignees: { users: ['dave@example.com'] }, onTimeout: 'escalate', escalateTo: { teams: ['Managers'], users: ['carol@example.com'] } }), stamp]),
    ordersWorkflow('Reminds', [askBilling(5, { onTimeout: 'approve' }), stamp]),
    ordersWorkflow('No deadline', [askBilling(1, { dueIn: undefined }), stamp]),
  ])
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  executor = newExecutor(env.store)
  app = testApp(env, { clock: systemClock, executor })
  executor.start()
  sender = new MailDelivery({ store: env.store, clock: systemClock, logger: silentLogger, mail: env.config.mail!, sealKey: mailSettingsOf(env.config, env.secret)!.sealKey, pollMs: 20 })
  sender.start()
  for (const name of ['alice', 'bob', 'carol', 'dave', 'erin']) tokens[name] = (await tokenFor(env.store, systemClock, name, ['workflows:trigger', 'tasks:read', 'tasks:write'])).value
}, 60_000)

afterAll(async () => {
  await executor.stop(2_000)
  await sender.stop(1_000)
  for (const cleanup of cleanups.reverse()) await cleanup()
  await smtp.close()
  env.cleanup()
})

async function call(path: string, token: string, init: { method?: string; json?: unknown } = {}) {
  const response = await app.handle(request(path, { method: init.method ?? 'GET', json: init.json, headers: { authorization: `Bearer ${token}` } }))
  const text = await response.text()
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as Record<string, any> }
}

async function start(workflowName: string, recordId: string): Promise<string> {
  const sent = await call(`${PRODUCTION}/workflow-runs`, tokens.bob!, { method: 'POST', json: { workflowName, teamName: 'Support', recordId } })
  expect(sent.status).toBe(202)
  return sent.body.runId as string
}

const getRun = async (id: string) => (await call(`/v1/workflow-runs/${id}`, tokens.alice!)).body as { status: string; error?: { code: string; message: string } }
const runReaches = (id: string, ...statuses: string[]) =>
  until(`run ${id} ${statuses.join('/')}`, async () => ((run) => statuses.includes(run.status) && run)(await getRun(id)), 20_000)

/** The task of the run's step once opened (read by an admin). */
async function taskOf(runId: string): Promise<Record<string, any>> {
  const id = await until(`the task of ${runId}`, () => queryOne<{ id: string }>(env.store, 'SELECT id FROM tasks WHERE run_id = ?', runId)?.id, 20_000)
  return (await call(`/v1/tasks/${id}`, tokens.alice!)).body
}

/** The mails of `kind` received for the task, by recipient. */
const mailsAbout = (taskId: string, kind: string, received: ReceivedMail[] = smtp.received) =>
  received.filter((m) => m.raw.includes(`X-Trellis-Kind: ${kind}`) && m.text.includes(`/tasks/${taskId}`)).map((m) => m.to)

const eventsOf = (runId: string, type: string) => queryAll<{ data: string }>(env.store, 'SELECT data FROM run_events WHERE run_id = ? AND type = ? ORDER BY sequence', runId, type)
const entriesOf = (runId: string, action: string) =>
  queryAll<{ label: string; user_id: number }>(env.store, 'SELECT label, user_id FROM activity_logs WHERE run_id = ? AND action = ? ORDER BY id', runId, action)

describe('a task deadline', () => {
  test('onTimeout fail: the task expires, the run fails task_expired, bob is told; opening mail went to Billing only', async () => {
    const runId = await start('Expires', 'd-1')
    const opened = await taskOf(runId)
    expect(opened.status).toBe('open')
    expect(Date.parse(opened.dueAt) - Date.parse(opened.createdAt)).toBeGreaterThanOrEqual(1_990)
    const run = await runReaches(runId, 'failed')
    expect(run.error?.code).toBe('task_expired')
    const task = (await call(`/v1/tasks/${opened.id}`, tokens.alice!)).body
    expect(task.status).toBe('expired')
    expect(task.closedAt).not.toBeNull()
    await until('the mails', () => mailsAbout(opened.id, 'task.closed').length === 1 && mailsAbout(opened.id, 'task.opened').length === 2, 15_000)
    expect(mailsAbout(opened.id, 'task.opened').sort()).toEqual(['carol@example.com', 'dave@example.com'])
    expect(mailsAbout(opened.id, 'task.closed')).toEqual(['bob@example.com'])
    const [closedMail] = smtp.received.filter((m) => m.raw.includes('X-Trellis-Kind: task.closed') && m.text.includes(opened.id))
    expect(closedMail!.subject).toBe('Task expired: Refund d-1?')
    expect(closedMail!.text).toContain(`${env.config.baseUrl}/tasks/${opened.id}`)
    expect(eventsOf(runId, 'task.closed').map((e) => JSON.parse(e.data))).toEqual([{ taskId: opened.id, status: 'expired', reason: 'deadline' }])
    const [entry] = entriesOf(runId, 'closeTask')
    expect(entry!.label).toBe('task "approve" expired at its deadline (onTimeout: fail)')
    expect(entriesOf(runId, 'closeTask')).toHaveLength(1)
  }, 30_000)

  test('onTimeout reject: the task closes rejected and onReject applies (fail: task_rejected; end: the run ends there)', async () => {
    const failing = await start('Rejects at the deadline', 'd-2')
    const ending = await start('Rejected at the deadline ends', 'd-3')
    const failed = await runReaches(failing, 'failed')
    expect(failed.error?.code).toBe('task_rejected')
    expect(failed.error?.message).toBe('Task "approve" was rejected at its deadline')
    expect((await taskOf(failing)).status).toBe('rejected')
    expect((await runReaches(ending, 'succeeded')).status).toBe('succeeded')
    expect(queryOne<{ data: string }>(env.store, 'SELECT data FROM records WHERE record_key = ?', 'd-3')!.data).not.toContain('decision')
  }, 30_000)

  test('onTimeout approve: the task closes approved and the run goes on with the decision', async () => {
    const runId = await start('Approves at the deadline', 'd-4')
    await runReaches(runId, 'succeeded')
    expect((await taskOf(runId)).status).toBe('approved')
    expect(JSON.parse(queryOne<{ data: string }>(env.store, 'SELECT data FROM records WHERE record_key = ?', 'd-4')!.data).decision).toBe('approved')
  }, 30_000)

  test('onTimeout escalate: escalateTo joins the assignees, escalated is true, only those added are mailed, the task stays open once', async () => {
    const runId = await start('Escalates', 'd-5')
    const opened = await taskOf(runId)
    expect(opened.escalated).toBe(false)
    expect(opened.assignees).toEqual({ teams: [], users: [expect.objectContaining({ username: 'dave' })] })
    // erin may not decide before the escalation
    expect((await call(`/v1/tasks/${opened.id}/decisions`, tokens.erin!, { method: 'POST', json: { decision: 'approve' } })).status).toBe(404)
    const escalated = await until('the escalation', async () => ((task) => task.escalated && task)((await call(`/v1/tasks/${opened.id}`, tokens.alice!)).body), 20_000)
    expect(escalated.status).toBe('open')
    expect(escalated.assignees.teams).toEqual(['Managers'])
    expect(escalated.assignees.users.map((u: { username: string }) => u.username).sort()).toEqual(['carol', 'dave'])
    expect((await getRun(runId)).status).toBe('waiting')
    await until('the escalation mails', () => mailsAbout(opened.id, 'task.escalated').length === 2, 15_000)
    expect(mailsAbout(opened.id, 'task.escalated').sort()).toEqual(['carol@example.com', 'erin@example.com'])
    expect(mailsAbout(opened.id, 'task.opened')).toEqual(['dave@example.com'])
    expect(eventsOf(runId, 'task.escalated').map((e) => JSON.parse(e.data))).toEqual([
      { taskId: opened.id, assignees: { teams: ['Managers'], users: ['carol@example.com'] } },
    ])
    const entries = entriesOf(runId, 'assignUserToInboxTask')
    expect(entries.map((e) => e.label)).toEqual(['task "approve" escalated at its deadline to team Managers, user carol@example.com'])
    // No second escalation however long it stays open; erin (added through Managers) decides it.
    await Bun.sleep(500)
    expect(eventsOf(runId, 'task.escalated')).toHaveLength(1)
    expect((await call(`/v1/tasks/${opened.id}/decisions`, tokens.erin!, { method: 'POST', json: { decision: 'approve' } })).status).toBe(200)
    await runReaches(runId, 'succeeded')
    await until('the outcome mail', () => mailsAbout(opened.id, 'task.closed').length === 1, 15_000)
    expect(mailsAbout(opened.id, 'task.closed')).toEqual(['bob@example.com'])
  }, 40_000)

  test('a decision before the deadline wins: nothing happens at the deadline', async () => {
    const runId = await start('Expires later', 'd-6')
    const opened = await taskOf(runId)
    expect((await call(`/v1/tasks/${opened.id}/decisions`, tokens.dave!, { method: 'POST', json: { decision: 'approve' } })).status).toBe(200)
    await runReaches(runId, 'succeeded')
    await Bun.sleep(Math.max(0, Date.parse(opened.dueAt) - Date.now()) + 500)
    expect((await call(`/v1/tasks/${opened.id}`, tokens.alice!)).body.status).toBe('approved')
    expect(eventsOf(runId, 'task.closed')).toHaveLength(1)
  }, 30_000)

  test('without a deadline a task stays open and no reminder is planned', async () => {
    const runId = await start('No deadline', 'd-7')
    const opened = await taskOf(runId)
    expect(opened.dueAt).toBeNull()
    expect(queryOne<{ remind_at: number | null }>(env.store, 'SELECT remind_at FROM tasks WHERE id = ?', opened.id)!.remind_at).toBeNull()
    await call(`/v1/workflow-runs/${runId}/cancel`, tokens.bob!, { method: 'POST' })
  }, 20_000)
})

describe('the reminder', () => {
  test('is planned a fifth of the time before the deadline, an hour before at most', () => {
    expect(reminderAt(0, 20_000)).toBe(16_000)
    expect(reminderAt(0, 3_600_000)).toBe(2_880_000)
    expect(reminderAt(0, 86_400_000)).toBe(86_400_000 - 3_600_000)
  })

  test('goes once to the assignees who have not decided, before the deadline', async () => {
    const runId = await start('Reminds', 'd-8')
    const opened = await taskOf(runId)
    const row = queryOne<{ remind_at: number; due_at: number }>(env.store, 'SELECT remind_at, due_at FROM tasks WHERE id = ?', opened.id)!
    expect(row.due_at - row.remind_at).toBe(1_000)
    await until('the reminder', () => mailsAbout(opened.id, 'task.reminder').length === 2, 15_000)
    expect(mailsAbout(opened.id, 'task.reminder').sort()).toEqual(['carol@example.com', 'dave@example.com'])
    const reminded = queryOne<{ reminded_at: number | null; remind_at: number | null }>(env.store, 'SELECT reminded_at, remind_at FROM tasks WHERE id = ?', opened.id)!
    expect(reminded.remind_at).toBeNull()
    expect(reminded.reminded_at).toBeGreaterThanOrEqual(row.remind_at)
    expect(reminded.reminded_at).toBeLessThan(row.due_at)
    await runReaches(runId, 'succeeded')
    await Bun.sleep(300)
    expect(mailsAbout(opened.id, 'task.reminder')).toHaveLength(2)
  }, 30_000)
})

describe('two instances', () => {
  test("each deadline and reminder is acted on once, whichever instance's timer sees it first", async () => {
    // A second executor on its own connection (PostgreSQL: a second instance on the database): two timers race.
    const otherStore = anotherStore(env)
    const second = newExecutor(otherStore)
    second.start()
    try {
      const escalating = await start('Escalates', 'd-9')
      const expiring = await start('Expires', 'd-10')
      const reminding = await start('Reminds', 'd-11')
      await runReaches(expiring, 'failed')
      await runReaches(reminding, 'succeeded')
      const task = await until('the escalation', async () => ((t) => t.escalated && t)(await taskOf(escalating)), 20_000)
      await Bun.sleep(500)
      expect(eventsOf(escalating, 'task.escalated')).toHaveLength(1)
      expect(entriesOf(escalating, 'assignUserToInboxTask')).toHaveLength(1)
      expect(eventsOf(expiring, 'task.closed')).toHaveLength(1)
      expect(entriesOf(expiring, 'closeTask')).toHaveLength(1)
      await until('the mails', () => mailsAbout(task.id, 'task.escalated').length >= 2, 15_000)
      const remindedTask = await taskOf(reminding)
      await until('the reminders', () => mailsAbout(remindedTask.id, 'task.reminder').length >= 2, 15_000)
      await Bun.sleep(300)
      expect(mailsAbout(task.id, 'task.escalated').sort()).toEqual(['carol@example.com', 'erin@example.com'])
      expect(mailsAbout(remindedTask.id, 'task.reminder').sort()).toEqual(['carol@example.com', 'dave@example.com'])
      expect(queryAll(env.store, "SELECT 1 FROM mail_outbox WHERE kind = 'task.closed' AND text_body LIKE ?", `%${(await taskOf(expiring)).id}%`)).toHaveLength(1)
      await call(`/v1/workflow-runs/${escalating}/cancel`, tokens.bob!, { method: 'POST' })
    } finally {
      await second.stop(2_000)
      if (otherStore !== env.store) await otherStore.close()
    }
  }, 60_000)
})

describe('a real serve killed with a deadline due and a mail queued', () => {
  test('after the restart the deadline is acted on once and each mail accepted once', async () => {
    const killed = testEnv()
    const cwd = tempDir('trellis-deadline-cwd-')
    const servers: ServeProcess[] = []
    cleanups.push(async () => {
      await Promise.all(servers.map((s) => s.stop('SIGKILL')))
      cwd.cleanup()
      killed.cleanup()
    })
    await applyAcme(
      { store: killed.store, clock: systemClock, secret: killed.secret, baseUrl: killed.config.baseUrl },
      deadlineDocument([ordersWorkflow('Expires soon', [askBilling(6)])]),
    )
    const bob = (await tokenFor(killed.store, systemClock, 'bob', ['workflows:trigger'])).value
    const serveEnv = { ...processEnv(killed), ...mailEnvOf(smtp.url) }
    const serve = async () => {
      const server = await startServe({ dataDir: killed.dataDir, cwd: cwd.path, env: serveEnv, timeoutMs: 20_000 })
      servers.push(server)
      return server
    }
    const first = await serve()
    // The server holds every message: the opening mails are sent and never acknowledged, still queued at the kill.
    smtp.mode = 'hold'
    let taskId: string
    let dueAt: number
    try {
      const started = await fetch(`${first.url}${PRODUCTION}/workflow-runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bob}`, 'content-type': 'application/json' },
        body: JSON.stringify({ workflowName: 'Expires soon', teamName: 'Support', recordId: 'd-1' }),
      })
      expect(started.status).toBe(202)
      const runId = ((await started.json()) as { runId: string }).runId
      const task = await until('the task open', () => queryOne<{ id: string; due_at: number; status: string }>(killed.store, 'SELECT id, due_at, status FROM tasks WHERE run_id = ?', runId), 15_000)
      taskId = task.id
      dueAt = task.due_at
      await until('the opening mails held at the server', () => mailsAbout(taskId, 'task.opened').length === 2, 15_000, 10)
      expect(await first.stop('SIGKILL')).not.toBe(0)
      expect(queryOne<{ status: string }>(killed.store, 'SELECT status FROM tasks WHERE id = ?', taskId)!.status).toBe('open')
    } finally {
      smtp.mode = 'accept'
    }
    // Down past the deadline: the restarted instance's timer finds it passed at once.
    await Bun.sleep(Math.max(0, dueAt - Date.now()) + 200)
    const second = await serve()
    await until('the task expired', () => queryOne<{ status: string }>(killed.store, 'SELECT status FROM tasks WHERE id = ?', taskId)?.status === 'expired', 15_000)
    const accepted = () => smtp.received.filter((m) => m.answer === 'accepted')
    await until('every mail accepted', () => mailsAbout(taskId, 'task.opened', accepted()).length === 2 && mailsAbout(taskId, 'task.closed', accepted()).length === 1, 20_000)
    await Bun.sleep(500)
    // Each message accepted once, under the one Message-ID of all its copies.
    const copies = smtp.received.filter((m) => m.text.includes(`/tasks/${taskId}`))
    for (const messageId of new Set(copies.map((m) => m.messageId))) {
      expect(copies.filter((m) => m.messageId === messageId && m.answer === 'accepted')).toHaveLength(1)
    }
    expect(mailsAbout(taskId, 'task.opened', accepted()).sort()).toEqual(['carol@example.com', 'dave@example.com'])
    expect(mailsAbout(taskId, 'task.closed', accepted())).toEqual(['bob@example.com'])
    expect(queryAll(killed.store, "SELECT 1 FROM run_events WHERE type = 'task.closed'")).toHaveLength(1)
    expect(queryAll(killed.store, "SELECT 1 FROM activity_logs WHERE action = 'closeTask'")).toHaveLength(1)
    await until('the run failed', () => queryOne<{ status: string }>(killed.store, 'SELECT status FROM runs')?.status === 'failed', 15_000)
    await second.stop('SIGTERM')
  }, 90_000)
})

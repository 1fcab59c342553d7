/**
 * E-mail (docs/mail.md) against a real SMTP server (test/support/smtp.ts) on 127.0.0.1, on the test store: a message
 * exists only if what queued it committed; a refused message is retried with backoff under the same Message-ID; a
 * message refused for good is failed and shown to the instance administrators; invitation links are e-mailed (sealed
 * in the outbox); each person's task-mail choice; a cancelled run's task mails its outcome to the run's user once;
 * the SMTP password in no log, error, page or row; and a real
 * `serve` killed with mail in flight sends each message again only under its own Message-ID.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { loadConfig } from '../src/config.ts'
import { write } from '../src/db/write.ts'
import { MailDelivery } from '../src/executor/mail-delivery.ts'
import { systemClock } from '../src/lib/clock.ts'
import { createLogger } from '../src/lib/logger.ts'
import { MAIL_MAX_ATTEMPTS, mailRetryDelayMs } from '../src/lib/mail.ts'
import { createMetrics } from '../src/lib/metrics.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { mailSettingsOf, queueMail, queueTaskMail, wantsTaskMail } from '../src/modules/mail/service.ts'
import { read } from '../src/db/read.ts'
import { rows } from '../src/db/query.ts'
import type { Store } from '../src/db/store.ts'
import { asc, eq } from 'drizzle-orm'
import { processEnv, request, runNow, type ServeProcess, startServe, tempDir, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, applyAcme, openTaskOnRun, startRefundWithSession, userId } from './support/acme.ts'
import { type SmtpServer, startSmtpServer } from './support/smtp.ts'

const FROM = 'Trellis <trellis@mail.test>'
const RETRY_MS = 40

let smtp: SmtpServer
let env: TestEnv
let app: ReturnType<typeof testApp>
let sender: MailDelivery
const metrics = createMetrics()
const logLines: string[] = []
const cookies: Record<string, string> = {}
const cleanups: (() => void | Promise<void>)[] = []

/** Acme with alice as instance administrator, a session for each person; everything at the real time (the sender's). */
async function seed(target: TestEnv): Promise<Record<string, string>> {
  const document = acmeDocument()
  ;(document.users.find((u) => u.email === 'alice@example.com') as unknown as Record<string, unknown>).instanceAdmin = true
  await applyAcme({ store: target.store, clock: systemClock, secret: target.secret, baseUrl: target.config.baseUrl }, document)
  const sessions: Record<string, string> = {}
  for (const name of ['alice', 'bob', 'carol', 'dave']) {
    sessions[name] = `trellis_session=${(await runNow(target.store, createSession(systemClock, userId(target.store, name), false))).id}`
  }
  return sessions
}

function mailEnv(smtpUrl: string, extra: Record<string, string> = {}): TestEnv {
  return testEnv({ TRELLIS_SMTP_URL: smtpUrl, TRELLIS_MAIL_FROM: FROM, TRELLIS_MAIL_RETRY_MS: String(RETRY_MS), TRELLIS_SMTP_TIMEOUT_SECONDS: '2', ...extra })
}

function startSender(target: TestEnv, lines: string[], smtpUrl = target.config.mail!.smtpUrl): MailDelivery {
  const delivery = new MailDelivery({
    store: target.store,
    clock: systemClock,
    logger: createLogger('debug', (line) => void lines.push(line)),
    metrics,
    mail: { ...target.config.mail!, smtpUrl },
    sealKey: mailSettingsOf(target.config, target.secret)!.sealKey,
    pollMs: 20,
  })
  delivery.start()
  return delivery
}

beforeAll(async () => {
  smtp = await startSmtpServer()
  env = mailEnv(smtp.url)
  Object.assign(cookies, await seed(env))
  app = testApp(env, { clock: systemClock, metrics })
  sender = startSender(env, logLines)
}, 60_000)
afterAll(async () => {
  await sender.stop(1000)
  for (const cleanup of cleanups.reverse()) await cleanup()
  await smtp.close()
  env.cleanup()
})

type Body = Record<string, any>

async function call(target: ReturnType<typeof testApp>, method: string, path: string, cookie: string | null, json?: unknown) {
  const response = await target.handle(request(path, { method, headers: cookie ? { cookie } : {}, json }))
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, text, body: (text.startsWith('{') ? JSON.parse(text) : {}) as Body }
}

/**
 * The outbox rows (to `recipient`), read through the store: polling with a synchronous psql would hold the event loop
 * the sender under test runs on.
 */
const outboxOf = (store: Store, recipient?: string) =>
  read(store, rows(({ db, t }) => db.select().from(t.mailOutbox).where(recipient === undefined ? undefined : eq(t.mailOutbox.recipient, recipient)).orderBy(asc(t.mailOutbox.createdAt))))
const outbox = (recipient: string) => outboxOf(env.store, recipient)

const settings = () => mailSettingsOf(env.config, env.secret)

describe('the outbox', () => {
  test('a message exists only if its transaction committed: a rolled-back one is never sent', async () => {
    const failed = write(env.store, function* () {
      yield* queueMail(settings(), Date.now(), { kind: 'task.opened', to: 'ghost@example.com', subject: 'Never', text: 'never sent' })
      throw new Error('what caused it failed')
    })
    await expect(failed).rejects.toThrow('what caused it failed')
    const messageId = await write(env.store, () => queueMail(settings(), Date.now(), { kind: 'task.opened', to: 'kept@example.com', subject: 'Kept', text: 'sent once' }))
    expect(messageId).toMatch(/^<[0-9a-f-]{36}@mail\.test>$/)
    await until('the committed message', () => smtp.to('kept@example.com').length === 1)
    const [received] = smtp.to('kept@example.com')
    expect(received!.messageId).toBe(messageId!)
    expect(received!.subject).toBe('Kept')
    expect(received!.text.trim()).toBe('sent once')
    expect(received!.raw).toContain('From: Trellis <trellis@mail.test>')
    await until('the message marked sent', async () => (await outbox('kept@example.com'))[0]?.status === 'sent')
    expect(smtp.to('ghost@example.com')).toEqual([])
    expect(await outbox('ghost@example.com')).toEqual([])
  })

  test('refused for now (451): tried again after the backoff, with the same Message-ID, until accepted', async () => {
    smtp.refuseNext = 3
    const messageId = await write(env.store, () => queueMail(settings(), Date.now(), { kind: 'task.reminder', to: 'retry@example.com', subject: 'Due soon', text: 'tomorrow' }))
    await until('the message accepted', () => smtp.to('retry@example.com').some((m) => m.answer === 'accepted'))
    const copies = smtp.to('retry@example.com')
    expect(copies.map((m) => m.answer)).toEqual(['refused', 'refused', 'refused', 'accepted'])
    expect(new Set(copies.map((m) => m.messageId))).toEqual(new Set([messageId!]))
    // Every copy is the same message: the Date made when it was queued, not at each attempt.
    expect(new Set(copies.map((m) => /^Date: (.*)$/m.exec(m.raw)?.[1]))).toHaveProperty('size', 1)
    // The waits grow: at least the backoff's lower bound (−25 %) after each refusal.
    for (let i = 1; i < copies.length; i++) expect(copies[i]!.at - copies[i - 1]!.at).toBeGreaterThanOrEqual(mailRetryDelayMs(i, RETRY_MS, () => 0) - 5)
    await until('the message marked sent', async () => (await outbox('retry@example.com'))[0]?.status === 'sent')
    expect((await outbox('retry@example.com'))[0]).toMatchObject({ attempts: 4, lastError: null })
    expect(logLines.some((line) => line.includes('mail not sent yet') && line.includes('451'))).toBe(true)
  })

  test('refused for good (550): failed after one attempt, logged, counted and listed for the instance administrators', async () => {
    smtp.mode = 'reject'
    try {
      const messageId = await write(env.store, () => queueMail(settings(), Date.now(), { kind: 'task.escalated', to: 'nobody@example.com', subject: 'Escalated', text: 'x' }))
      const [failed] = await until('the message failed', async () => (await outbox('nobody@example.com'))[0]?.status === 'failed' && (await outbox('nobody@example.com')))
      expect(smtp.to('nobody@example.com')).toHaveLength(1)
      expect(failed).toMatchObject({ attempts: 1, messageId: messageId! })
      expect(failed!.lastError).toContain('550')
      expect(logLines.some((line) => line.includes('mail failed for good') && line.includes(messageId!))).toBe(true)
      expect(await metrics.registry.getSingleMetricAsString('trellis_mail_messages_total')).toMatch(/outcome="failed"} [1-9]/)
      const page = await call(app, 'GET', '/admin/users', cookies.alice!)
      expect(page.text).toContain('nobody@example.com')
      expect(page.text).toContain(`smtp://127.0.0.1:${smtp.port}`)
    } finally {
      smtp.mode = 'accept'
    }
  })

  test(`refused for now ${MAIL_MAX_ATTEMPTS} times: failed, its last error kept`, async () => {
    const quick = mailEnv(smtp.url, { TRELLIS_MAIL_RETRY_MS: '1' })
    const lines: string[] = []
    const quickSender = startSender(quick, lines)
    try {
      smtp.refuseNext = MAIL_MAX_ATTEMPTS
      await write(quick.store, () => queueMail(mailSettingsOf(quick.config, quick.secret), Date.now(), { kind: 'task.opened', to: 'stubborn@example.com', subject: 'S', text: 's' }))
      const [failed] = await until('the message failed', async () => {
        const done = (await outboxOf(quick.store)).filter((m) => m.status !== 'pending')
        return done.length > 0 && done
      })
      expect(failed).toMatchObject({ status: 'failed', attempts: MAIL_MAX_ATTEMPTS })
      expect(failed!.lastError).toContain('451')
      expect(smtp.to('stubborn@example.com')).toHaveLength(MAIL_MAX_ATTEMPTS)
    } finally {
      smtp.refuseNext = 0
      await quickSender.stop(1000)
      quick.cleanup()
    }
  })
})

describe('invitations', () => {
  test('with SMTP the link is e-mailed too (and still shown once); the outbox holds it sealed; the mailed link works', async () => {
    const created = await call(app, 'POST', '/v1/instance/users', cookies.alice!, { email: 'erin@example.com', username: 'erin' })
    expect(created.status).toBe(201)
    const { url, emailed } = created.body.invitation as { url: string; emailed: boolean }
    expect(emailed).toBe(true)
    await until('the invitation mail', () => smtp.to('erin@example.com').length === 1)
    const [mail] = smtp.to('erin@example.com')
    expect(mail!.subject).toBe('You are invited to Trellis')
    expect(mail!.text).toContain(url)
    const token = new URL(url).searchParams.get('token')!
    // The token exists in the database only as its hash, and sealed in the outbox.
    const [row] = await outbox('erin@example.com')
    expect(row!.sealed).toBe(true)
    expect(row!.textBody).toStartWith('sealed:v1:')
    expect(JSON.stringify(await outboxOf(env.store))).not.toContain(token)
    const accepted = await call(app, 'POST', '/auth/invitation', null, { token, password: 'erin-chose-a-long-password' })
    expect(accepted.status).toBe(200)
    // A new link for a person: mailed as well.
    const again = await call(app, 'POST', `/v1/instance/users/${userId(env.store, 'dave')}/invitation`, cookies.alice!)
    expect(again.body).toMatchObject({ emailed: true })
    await until('the second invitation mail', () => smtp.to('dave@example.com').some((m) => m.text.includes(again.body.url)))
  })

  test('the console says the link was e-mailed', async () => {
    const page = await call(app, 'GET', '/admin/users', cookies.alice!)
    expect(page.text).toContain('This link was e-mailed to the person')
  })
})

describe("each person's task mail", () => {
  test('Account: turned off by the person, kept per user; only active people who want it are mailed; the link carries no secret', async () => {
    expect((await call(app, 'GET', '/v1/account', cookies.bob!)).body).toMatchObject({ taskMail: true, mailEnabled: true, user: { object: 'user', username: 'bob' } })
    const off = await call(app, 'PATCH', '/v1/account', cookies.bob!, { taskMail: false })
    expect(off.status).toBe(200)
    expect(off.body).toMatchObject({ taskMail: false })
    expect((await call(app, 'GET', '/v1/account', cookies.bob!)).body.taskMail).toBe(false)
    expect((await call(app, 'GET', '/v1/account', cookies.carol!)).body.taskMail).toBe(true)
    const bad = await call(app, 'PATCH', '/v1/account', cookies.bob!, { taskMail: 'no' })
    expect(bad.status).toBe(400)
    expect(bad.text).toContain('taskMail')
    expect(await read(env.store, wantsTaskMail(userId(env.store, 'bob')))).toBe(false)
    const page = await call(app, 'GET', '/account', cookies.bob!)
    expect(page.text).toContain('<option value="false" selected>off</option>')

    const ids = ['bob', 'carol', 'dave', 'carol'].map((name) => userId(env.store, name))
    const deactivated = await call(app, 'PUT', `/v1/instance/users/${userId(env.store, 'dave')}`, cookies.alice!, { username: 'dave', instanceAdmin: false, deactivated: true })
    expect(deactivated.status).toBe(200)
    const queued = await write(env.store, () =>
      queueTaskMail(settings(), Date.now(), { kind: 'task.opened', userIds: ids, taskId: 'task-7', subject: 'Refund 42 on ord_1001?', text: 'A refund waits for your decision.' }),
    )
    expect(queued).toEqual(['carol@example.com'])
    await until('the task mail', () => smtp.to('carol@example.com').length === 1)
    const [mail] = smtp.to('carol@example.com')
    expect(mail!.subject).toBe('Refund 42 on ord_1001?')
    expect(mail!.text).toContain('Open the task: http://trellis.test/tasks/task-7')
    expect(mail!.text).toContain('http://trellis.test/account')
    expect(mail!.text).not.toMatch(/token|trl_/i)
    expect(smtp.to('bob@example.com').filter((m) => m.subject.startsWith('Refund'))).toEqual([])

    const on = await call(app, 'PATCH', '/v1/account', cookies.bob!, { taskMail: true })
    expect(on.body.taskMail).toBe(true)
  })
})

describe('a cancelled run', () => {
  test('its open task is cancelled and the run’s user gets exactly one outcome mail saying so; none when they cancelled it themselves', async () => {
    // bob's run waits on a task (no executor here: opened as its step would), and alice, an admin, cancels the run.
    const cancelled = async (recordId: string, canceller: string) => {
      const runId = await startRefundWithSession(app, cookies.bob!, recordId)
      const taskId = await openTaskOnRun(env.store, systemClock, runId, { title: `Refund ${recordId}?` })
      const answer = await call(app, 'POST', `/v1/workflow-runs/${runId}/cancel`, cookies[canceller]!)
      expect(answer.body).toMatchObject({ status: 'cancelled' })
      expect((await call(app, 'GET', `/v1/tasks/${taskId}`, cookies.bob!)).body).toMatchObject({ status: 'cancelled' })
      return taskId
    }
    const outcome = (recordId: string) => smtp.to('bob@example.com').filter((m) => m.subject === `Task cancelled: Refund ${recordId}?`)
    const queued = async (recordId: string) => (await outbox('bob@example.com')).filter((m) => m.subject === `Task cancelled: Refund ${recordId}?`)
    const taskId = await cancelled('ord_1001', 'alice')
    // Queued in the cancel's transaction: one row for bob, there once the cancel answered; sent, then never again.
    expect(await queued('ord_1001')).toHaveLength(1)
    await until('the message marked sent', async () => (await queued('ord_1001'))[0]?.status === 'sent')
    expect(outcome('ord_1001').map((m) => m.answer)).toEqual(['accepted'])
    const [mail] = outcome('ord_1001')
    expect(mail!.text).toContain('The task of your run of "Refund order" was cancelled with its run')
    expect(mail!.text).toContain(`Open the task: http://trellis.test/tasks/${taskId}`)

    // bob cancels his own run: he knows, no mail (as when he closes a task himself).
    await cancelled('ord_1002', 'bob')
    expect(await queued('ord_1002')).toEqual([])
  })
})

describe('without SMTP', () => {
  test('nothing is queued; the API and the console say the inbox is the only channel', async () => {
    const plain = testEnv()
    cleanups.push(() => plain.cleanup())
    const sessions = await seed(plain)
    const plainApp = testApp(plain, { clock: systemClock })
    const created = await call(plainApp, 'POST', '/v1/instance/users', sessions.alice!, { email: 'frank@example.com', username: 'frank' })
    expect(created.body.invitation).toMatchObject({ emailed: false })
    expect(await write(plain.store, () => queueTaskMail(mailSettingsOf(plain.config, plain.secret), Date.now(), { kind: 'task.opened', userIds: [userId(plain.store, 'carol')], taskId: 't', subject: 's', text: 't' }))).toEqual([])
    expect(await outboxOf(plain.store)).toEqual([])
    expect((await call(plainApp, 'GET', '/v1/account', sessions.bob!)).body).toMatchObject({ mailEnabled: false, taskMail: true })
    expect((await call(plainApp, 'GET', '/account', sessions.bob!)).text).toContain('your inbox is the only place tasks reach you')
    const admin = await call(plainApp, 'GET', '/admin/users', sessions.alice!)
    expect(admin.text).toContain('Send this link to the person')
    expect(admin.text).toContain('No SMTP server is configured')
  })
})

describe('the SMTP password', () => {
  const password = 'Wr0ng-smtp-secret-value'

  test('a refused sign-in is retried, and its error names no credential: not in the log, the row, the page', async () => {
    const wrong = mailEnv(`smtp://trellis:${encodeURIComponent(password)}@127.0.0.1:${smtp.port}`)
    cleanups.push(() => wrong.cleanup())
    const sessions = await seed(wrong)
    const lines: string[] = []
    const refused = smtp.refusedLogins
    const wrongSender = startSender(wrong, lines)
    try {
      await write(wrong.store, () => queueMail(mailSettingsOf(wrong.config, wrong.secret), Date.now(), { kind: 'task.opened', to: 'carol@example.com', subject: 'x', text: 'x' }))
      await until('two refused sign-ins', () => smtp.refusedLogins >= refused + 2)
    } finally {
      await wrongSender.stop(1000)
    }
    const [row] = await outboxOf(wrong.store)
    expect(row!.status).toBe('pending')
    expect(row!.lastError).toContain('535')
    const page = (await call(testApp(wrong, { clock: systemClock }), 'GET', '/admin/users', sessions.alice!)).text
    for (const text of [lines.join('\n'), JSON.stringify(await outboxOf(wrong.store)), page]) {
      expect(text).not.toContain(password)
      expect(text).not.toContain(encodeURIComponent(password))
    }
  })

  test('a bad setting is refused naming the setting, never quoting the URL', () => {
    const attempt = (vars: Record<string, string>) => {
      try {
        loadConfig({}, vars)
        return 'accepted'
      } catch (error) {
        return (error as Error).message
      }
    }
    const bad = attempt({ TRELLIS_SMTP_URL: `http://u:${password}@mail.example.com`, TRELLIS_MAIL_FROM: 'a@b.example' })
    expect(bad).toContain('TRELLIS_SMTP_URL must be an smtp:// or smtps:// URL')
    expect(bad).not.toContain(password)
    expect(attempt({ TRELLIS_SMTP_URL: `smtp://u:${password}@mail.example.com` })).toBe('TRELLIS_SMTP_URL needs TRELLIS_MAIL_FROM: the address mail is sent from')
    expect(attempt({ TRELLIS_SMTP_URL: 'smtp://mail.example.com', TRELLIS_MAIL_FROM: 'not an address' })).toContain('TRELLIS_MAIL_FROM must be an e-mail address')
    expect(attempt({ TRELLIS_SMTP_URL: 'smtps://mail.example.com', TRELLIS_MAIL_FROM: 'Ops <ops@Example.com>' })).toBe('accepted')
  })
})

describe('a real serve killed with mail in flight', () => {
  test('each message is sent; one caught between sending and being marked is sent again only under its own Message-ID', async () => {
    const killed = testEnv()
    const cwd = tempDir('trellis-mail-cwd-')
    const servers: ServeProcess[] = []
    cleanups.push(async () => {
      await Promise.all(servers.map((s) => s.stop('SIGKILL')))
      cwd.cleanup()
      killed.cleanup()
    })
    const sessions = await seed(killed)
    const serveEnv = {
      ...processEnv(killed),
      TRELLIS_SMTP_URL: smtp.url,
      TRELLIS_MAIL_FROM: FROM,
      TRELLIS_MAIL_RETRY_MS: '100',
      // The lease a dead instance's message waits out on PostgreSQL: 2 × 2 s + 5 s.
      TRELLIS_SMTP_TIMEOUT_SECONDS: '2',
    }
    const serve = async () => {
      const server = await startServe({ dataDir: killed.dataDir, cwd: cwd.path, env: serveEnv, timeoutMs: 20_000 })
      servers.push(server)
      return server
    }
    const invite = async (server: ServeProcess, name: string) => {
      const response = await fetch(`${server.url}/v1/instance/users`, {
        method: 'POST',
        headers: { cookie: sessions.alice!, 'content-type': 'application/json' },
        body: JSON.stringify({ email: `${name}@crash.example`, username: name }),
      })
      expect(response.status, await response.clone().text()).toBe(201)
      return ((await response.json()) as Body).invitation as { emailed: boolean }
    }
    const sentCount = async (server: ServeProcess) => Number(/trellis_mail_messages_total\{outcome="sent"\} (\d+)/.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1] ?? 0)

    const first = await serve()
    expect(first.stdout()).toContain(`"smtp":"smtp://127.0.0.1:${smtp.port}"`)
    expect((await invite(first, 'before')).emailed).toBe(true)
    await until('the first message sent and marked', async () => (await sentCount(first)) === 1, 15_000)

    // The server takes the next two and never answers: the sender has sent them and not heard back when it dies.
    smtp.mode = 'hold'
    try {
      await invite(first, 'held1')
      await invite(first, 'held2')
      await until('both messages held at the server', () => smtp.to('held1@crash.example').length === 1 && smtp.to('held2@crash.example').length === 1, 15_000, 10)
      expect(await first.stop('SIGKILL')).not.toBe(0)
    } finally {
      smtp.mode = 'accept'
    }
    const second = await serve()
    await until('the held messages sent again', () => smtp.to('held1@crash.example').some((m) => m.answer === 'accepted') && smtp.to('held2@crash.example').some((m) => m.answer === 'accepted'), 25_000)
    await invite(second, 'after')
    await until('every message marked sent', async () => (await sentCount(second)) === 3, 15_000)

    const ids = new Set<string>()
    for (const name of ['before', 'held1', 'held2', 'after']) {
      const copies = smtp.to(`${name}@crash.example`)
      // Every copy of a message carries its one Message-ID, which no other message has.
      const own = new Set(copies.map((m) => m.messageId))
      expect(own.size).toBe(1)
      ids.add([...own][0]!)
      expect(copies.filter((m) => m.answer === 'accepted')).toHaveLength(1)
    }
    expect(ids.size).toBe(4)
    // Sent and marked before the crash, or queued after it: sent exactly once.
    expect(smtp.to('before@crash.example')).toHaveLength(1)
    expect(smtp.to('after@crash.example')).toHaveLength(1)
    expect((await outboxOf(killed.store)).map((m) => m.status)).toEqual(['sent', 'sent', 'sent', 'sent'])
    for (const server of [first, second]) expect(server.stdout() + server.stderr()).not.toContain('smtp-Pa55word-kept-secret')
  }, 60_000)
})

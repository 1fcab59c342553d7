/**
 * The inbox and a task's page in a real browser (Chromium via playwright-core) against `trellis serve` over Acme with a
 * refund that asks Billing to approve with a form, at both screens (1280×800, 390×844): bob starts the run from its
 * record; dave (Billing) sees the count in the header, opens the inbox and the task, reads the record, adds a note to
 * its thread, fills the form wrongly (the API's message beside the field) then rightly, approves, and the waiting run
 * finishes without a reload — on dave's task page and on bob's run page, whose "Waiting for" row goes with the task.
 * dave, a plain member, watches his inbox while bob starts another refund: the task appears without a reload, from
 * the run-events stream (the page never polls). dave turns task e-mail off in Account: still off after a reload and
 * in the API, and the next task for Billing is mailed (a real SMTP server) to carol only; then on again. No page is
 * wider than its viewport, and no page has a script error or a CSP violation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { queryAll, type ServeProcess, type TestEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, ordersWorkflow } from './support/acme.ts'
import { browserAvailable, eventually, requireBrowser, SCREENS, mark, pageIsSound, serveAcme, stayed, stopServed, textOf, thenLoad, watchPage, signInAs } from './support/browser.ts'
import { type SmtpServer, startSmtpServer } from './support/smtp.ts'

requireBrowser('console-tasks-browser')

let env: TestEnv
let server: ServeProcess
let browser: Browser
let smtp: SmtpServer
const problems: string[] = []

/** Each screen's orders: the refund decided in the browser, the one the inbox sees appear, the one mailed. */
const RECORDS = {
  laptop: { decided: 'ord_1001', live: 'ord_2001', mailed: 'ord_2002' },
  phone: { decided: 'ord_1003', live: 'ord_2003', mailed: 'ord_2004' },
} as const
const RECORD_PAGE = (id: string) => `/p/Acme/e/production/t/Support/c/orders/r/${id}`
const START_REFUND = 'button:has-text("Run “Refund with approval”")'

/** bob starts the refund on `recordId` from its page: the run's page opens. */
async function startRefund(bob: Page, recordId: string) {
  if (new URL(bob.url()).pathname !== RECORD_PAGE(recordId)) await bob.goto(RECORD_PAGE(recordId))
  await thenLoad(bob, () => bob.click(START_REFUND))
  expect(new URL(bob.url()).pathname).toStartWith('/runs/')
}

/** The header's count of tasks waiting (0 when it shows none). */
const inboxCount = async (page: Page) => ((await page.locator('#inbox-link .count').count()) === 0 ? 0 : Number(await textOf(page, '#inbox-link .count')()))


const signIn = (context: BrowserContext, name: string, next: string) => signInAs(context, name, next, problems)

describe.skipIf(!browserAvailable)('the inbox and a task page in Chromium', () => {
  beforeAll(async () => {
    const document = acmeDocument({ passwords: true })
    const acme = acmeProject(document)
    for (const { live, mailed } of Object.values(RECORDS)) {
      for (const id of [live, mailed]) acme.records!.push({ environment: 'production', collection: 'orders', id, data: { status: 'delivered' } })
    }
    acme.workflows!.push(
      ordersWorkflow('Refund with approval', [
        {
          type: 'task',
          name: 'approve',
          title: 'Refund {{record.id}}?',
          assignees: { teams: ['Billing'] },
          form: { type: 'object', properties: { amount: { type: 'number', minimum: 0, maximum: 500, title: 'Amount to refund' } }, required: ['amount'] },
        },
        { type: 'update', name: 'stamp', set: { refunded: '{{tasks.approve.input.amount}}' } },
      ]),
    )
    smtp = await startSmtpServer()
    ;({ env, server, browser } = await serveAcme(document, { TRELLIS_SMTP_URL: smtp.url, TRELLIS_MAIL_FROM: 'trellis@mail.test', TRELLIS_MAIL_RETRY_MS: '100' }))
  }, 60_000)

  afterAll(async () => {
    await stopServed({ browser, server, env })
    await smtp?.close()
    expect(problems).toEqual([])
  })

  for (const [screen, viewport] of Object.entries(SCREENS) as [keyof typeof SCREENS, (typeof SCREENS)[keyof typeof SCREENS]][]) {
    describe(`at ${viewport.width}×${viewport.height}`, () => {
      let requester: BrowserContext
      let decider: BrowserContext
      let bob: Page
      const records = RECORDS[screen]
      const recordId = records.decided

      beforeAll(async () => {
        requester = await browser.newContext({ baseURL: server.url, viewport })
        decider = await browser.newContext({ baseURL: server.url, viewport })
      })

      afterAll(async () => {
        await requester?.close()
        await decider?.close()
      })

      test('a decider opens the inbox and the task, reads the record and its notes, fills the form wrongly then rightly, approves; the run finishes without a reload', async () => {
        // bob starts the refund on his record: the run waits for Billing.
        bob = await signIn(requester, 'bob', RECORD_PAGE(recordId))
        await startRefund(bob, recordId)
        await eventually('the run waits', textOf(bob, '#run-status'), (s) => s === 'waiting')
        // The open task's link is part of the page as served.
        await bob.reload()
        expect(await bob.locator('#run-task a.task-link').count()).toBe(1)
        await mark(bob)

        // dave sees it waiting in the header, and in the inbox.
        const dave = await signIn(decider, 'dave', '/')
        expect(Number(await textOf(dave, '#inbox-link .count')())).toBeGreaterThanOrEqual(1)
        await thenLoad(dave, () => dave.click('#inbox-link'))
        expect(new URL(dave.url()).pathname).toBe('/inbox')
        await pageIsSound(dave)
        await thenLoad(dave, () => dave.click(`#inbox tr:has-text("${recordId}") a.task-link`))
        expect(new URL(dave.url()).pathname).toStartWith('/tasks/')
        await pageIsSound(dave)

        // The record, then a note in its thread before deciding.
        expect(await textOf(dave, '#record-data')()).toContain('"status"')
        await dave.fill('#new-note input[name=title]', `Refund ${recordId}`)
        await dave.fill('#new-note textarea[name=text]', 'Checked the parcel photos.')
        await thenLoad(dave, () => dave.click('#new-note button[type=submit]'))
        await eventually('the note is in the thread', textOf(dave, 'article.note'), (t) => t.includes('Checked the parcel photos.'))
        await mark(dave)

        // Wrongly: the API's 422 names /amount, and the page puts it beside the field.
        await dave.fill('#decide input[name=amount]', '900')
        await dave.click('#decide button[value=approve]')
        await eventually('the error beside the field', textOf(dave, '#decide .field-error'), (t) => t.includes('500'))
        expect(await dave.getAttribute('#decide input[name=amount]', 'aria-invalid')).toBe('true')
        await pageIsSound(dave)

        // Rightly: approved, and the run goes on by itself.
        await dave.fill('#decide input[name=amount]', '120')
        await dave.fill('#decide textarea[name=comment]', 'Photos show damage.')
        await dave.click('#decide button[value=approve]')
        await eventually('the decision is recorded', textOf(dave, '#task-decide'), (t) => t.includes('You approved this task.'))
        await eventually('the run finishes on the task page', textOf(dave, '#task-run [data-run-status]'), (t) => t === 'succeeded', 15_000)
        expect(await textOf(dave, '#task-status')()).toContain('approved')
        expect(await stayed(dave)).toBe(true)

        // bob's run page followed it too, its "Waiting for" row gone with the task.
        await eventually('the run finishes on its page', textOf(bob, '#run-status'), (s) => s === 'succeeded', 15_000)
        await eventually('the task no longer waited for', () => bob.locator('#run-task').count(), (n) => n === 0)
        expect(await stayed(bob)).toBe(true)
      }, 60_000)

      test('a plain member’s inbox shows a task opened for their team without a reload: from the run-events stream, never polling', async () => {
        const dave = await decider.newPage()
        watchPage(dave, problems)
        const streams: string[] = []
        let reads = 0
        dave.on('request', (request) => {
          const path = new URL(request.url()).pathname
          if (request.resourceType() === 'eventsource') streams.push(path)
          else if (request.resourceType() === 'fetch' && path === '/inbox') reads++
        })
        await dave.goto('/inbox')
        expect(await dave.getAttribute('#inbox', 'data-poll')).toBeNull()
        // One stream per environment of Acme (dave is a member there, no admin).
        await eventually('the inbox follows its environments', async () => streams.length, (n) => n === 2)
        expect(streams.sort()).toEqual(['production', 'staging'].map((e) => `/v1/project/Acme/environment/${e}/workflow-runs/events`))
        await mark(dave)
        const waiting = await inboxCount(dave)
        // Quiet for longer than the page's polling interval (3 s): it reads itself only when an event says so.
        await Bun.sleep(3_500)
        expect(reads).toBe(0)

        // bob starts a refund on another record: the task reaches dave's page by itself, with the header's count. The
        // run goes through the executor first: 20 s is a margin for a machine as loaded as npm test's parallel part
        // loads it, not a speed claim (that the page does not poll is asserted above).
        await startRefund(bob, records.live)
        await eventually('the new task in the inbox', textOf(dave, '#inbox'), (t) => t.includes(records.live), 20_000)
        await eventually('the header counts it', () => inboxCount(dave), (n) => n === waiting + 1)
        expect(await stayed(dave)).toBe(true)
        expect(reads).toBeGreaterThan(0)
        await pageIsSound(dave)
        // bob's run page shows the task it waits for once it opens (the page was served before the task step ran).
        await eventually('the run waits for its task', () => bob.locator('#run-task a.task-link').count(), (n) => n === 1, 20_000)
        await dave.close()
      }, 60_000)

      test('task e-mail turned off in Account stays off after a reload and in the API; the next task for the team is mailed to the others only', async () => {
        const dave = await decider.newPage()
        watchPage(dave, problems)
        const choice = '#task-mail select[name=taskMail]'
        const choose = async (value: 'true' | 'false') => {
          await dave.selectOption(choice, value)
          await thenLoad(dave, () => dave.click('#task-mail button[type=submit]'))
          expect(await textOf(dave, '#flash')()).toContain('E-mail choice saved.')
        }
        await dave.goto('/account')
        expect(await dave.inputValue(choice)).toBe('true')
        await choose('false')
        await dave.reload()
        expect(await dave.inputValue(choice)).toBe('false')
        expect(await (await dave.request.get('/v1/account')).json()).toMatchObject({ taskMail: false, mailEnabled: true })
        await pageIsSound(dave)

        // The next task for Billing: carol is mailed, dave is not (the outbox row is written with the task, or never).
        await startRefund(bob, records.mailed)
        const subject = `Task for you: Refund ${records.mailed}?`
        await until('carol’s mail', () => smtp.to('carol@example.com').some((m) => m.subject === subject), 15_000)
        expect(queryAll<{ recipient: string }>(env.store, 'SELECT recipient FROM mail_outbox WHERE subject = ?', subject).map((m) => m.recipient)).toEqual(['carol@example.com'])
        expect(smtp.to('dave@example.com').filter((m) => m.subject === subject)).toEqual([])

        // On again, for what comes next.
        await choose('true')
        expect(await dave.inputValue(choice)).toBe('true')
        expect(await (await dave.request.get('/v1/account')).json()).toMatchObject({ taskMail: true })
        await dave.close()
      }, 30_000)
    })
  }
})

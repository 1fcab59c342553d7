/**
 * The console's live pages, links and search in a real browser (Chromium via playwright-core) against `trellis serve` over
 * examples/acme.yaml, at both screens (1280×800, 390×844): run a workflow on a record and watch its page reach
 * "succeeded" with no reload (live.js over the run-events stream), the environment's runs list show the new run by
 * itself, follow run → record → run, the 409 "run in progress" message link to the blocking run, search a
 * collection by a field's value, and the header search find a record and a person. No page is wider than its
 * viewport, and no page has a script error or a CSP violation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { ServeProcess, TestEnv } from './helpers.ts'
import { browserAvailable, countOf, eventually, requireBrowser, SCREENS, mark, pageIsSound, serveAcme, stayed, stopServed, textOf, thenLoad, watchPage, signInAs } from './support/browser.ts'

requireBrowser('console-live-browser')

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []

/** The record each screen runs on (two, so the screens never meet each other's run in progress). */
const RECORDS = { laptop: 'ord_1001', phone: 'ord_1003' } as const
const RECORD_PAGE = (id: string) => `/p/Acme/e/production/t/Support/c/orders/r/${id}`


describe.skipIf(!browserAvailable)('live run pages, links and search in Chromium', () => {
  beforeAll(async () => {
    ;({ env, server, browser } = await serveAcme())
  }, 60_000)

  afterAll(async () => {
    await stopServed({ browser, server, env })
    expect(problems).toEqual([])
  })

  for (const [screen, viewport] of Object.entries(SCREENS) as [keyof typeof SCREENS, (typeof SCREENS)[keyof typeof SCREENS]][]) {
    describe(`at ${viewport.width}×${viewport.height}`, () => {
      let context: BrowserContext
      let page: Page
      let runs: Page
      let runId = ''
      const recordId = RECORDS[screen]

      beforeAll(async () => {
        context = await browser.newContext({ baseURL: server.url, viewport })
        page = await signInAs(context, 'alice', '/p/Acme', problems)
        runs = await context.newPage()
        watchPage(runs, problems)
      }, 30_000)

      afterAll(() => context?.close())

      test('start a run from a record; its page reaches "succeeded" without a reload, each step with its times; the runs list shows it by itself', async () => {
        // The environment's runs list, open in another tab before the run exists.
        await runs.goto('/p/Acme/e/production/runs')
        await mark(runs)
        await pageIsSound(runs)

        // And the record's own page, in a third tab: its runs list follows the record's runs.
        const record = await context.newPage()
        watchPage(record, problems)
        await record.goto(RECORD_PAGE(recordId))
        await mark(record)

        await page.goto(RECORD_PAGE(recordId))
        await pageIsSound(page)
        await thenLoad(page, () => page.click('button:has-text("Run “Refund order”")'))
        expect(new URL(page.url()).pathname).toStartWith('/runs/')
        runId = new URL(page.url()).pathname.split('/').pop()!
        await mark(page)
        let navigations = 0
        page.on('framenavigated', (frame) => {
          if (frame === page.mainFrame()) navigations++
        })

        // Its last step waits 5 s: the page follows it there and to the end by itself.
        await eventually('the run page to say succeeded', textOf(page, '#run-status'), (t) => t === 'succeeded', 30_000)
        expect(await stayed(page)).toBe(true)
        expect(navigations).toBe(0)
        expect(await page.locator('table.steps .step-status').allTextContents()).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded'])
        expect(await textOf(page, '#run-finished time')()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/)
        // The wait's row: finished when its 5 s were over, not when it began.
        const wait = page.locator('tr[data-step="4"]')
        const started = Date.parse(`${await wait.locator('.step-started time').getAttribute('datetime')}`)
        const finished = Date.parse(`${await wait.locator('.step-finished time').getAttribute('datetime')}`)
        expect(finished - started).toBeGreaterThanOrEqual(5_000)
        // Its duration: the 5 s, and however long the step took to begin waiting (a loaded machine: past 6 s).
        const seconds = /^(\d+\.\d) s$/.exec((await wait.locator('.step-duration').textContent()) ?? '')?.[1]
        expect(Number(seconds)).toBeGreaterThanOrEqual(5)
        expect(await count(page, '#run-cancel:visible')).toBe(0)
        await pageIsSound(page)

        // The other tab: the new run on top, its status followed to the end, never reloaded.
        const row = `tr[data-run-id="${runId}"]`
        await eventually('the runs list to show the run as succeeded', textOf(runs, `${row} .run-status`), (t) => t === 'succeeded', 15_000)
        expect(await runs.locator(`${row} a.record-link`).getAttribute('href')).toBe(RECORD_PAGE(recordId))
        expect(await stayed(runs)).toBe(true)
        await pageIsSound(runs)
        await eventually('the record page to list the run as succeeded', textOf(record, `${row} .run-status`), (t) => t === 'succeeded', 15_000)
        expect(await record.locator(`${row} a.run-link`).getAttribute('href')).toBe(`/runs/${runId}`)
        expect(await stayed(record)).toBe(true)
        await record.close()
      }, 60_000)

      if (screen === 'laptop') {
        test('without the event stream (refused here), the run page says so and follows the run by polling', async () => {
          await page.route('**/events*', (route) => route.abort())
          const held = 'polled'
          await page.evaluate(`fetch('/v1/project/Acme/environment/production/collection/orders/records/${held}', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ teamName: 'Support', data: { status: 'paid' } }) })`)
          await page.goto(RECORD_PAGE(held))
          await thenLoad(page, () => page.click('button:has-text("Run “Refund order”")'))
          await mark(page)
          await eventually('the fallback notice', textOf(page, '#run-live'), (t) => t.includes('checks the run every few seconds'))
          await eventually('the run page to say succeeded', textOf(page, '#run-status'), (t) => t === 'succeeded', 30_000)
          expect(await stayed(page)).toBe(true)
          expect(await page.locator('#run-live').isHidden()).toBe(true)
          await page.unroute('**/events*')
        }, 60_000)
      }

      test('follow the run to its record and back; breadcrumbs name the way', async () => {
        await page.goto(`/runs/${runId}`)
        expect(await page.locator('nav.crumbs').textContent()).toBe(`Projects / Acme / production · Support / orders / ${recordId} / run ${runId.slice(0, 8)}`)
        await thenLoad(page, () => page.click('#run a.record-link'))
        expect(new URL(page.url()).pathname).toBe(RECORD_PAGE(recordId))
        expect(await textOf(page, '#record-data')()).toContain('"status": "refunded"')
        await pageIsSound(page)
        await thenLoad(page, () => page.click(`table.runs a.run-link[href="/runs/${runId}"]`))
        expect(new URL(page.url()).pathname).toBe(`/runs/${runId}`)
        await thenLoad(page, () => page.click('#run-project'))
        expect(new URL(page.url()).pathname).toBe('/p/Acme')
      }, 30_000)

      test('a second run on a record with one in progress: the 409 message links to the blocking run', async () => {
        // A paid order, and a run started elsewhere (here: the same session's API calls) that holds it for its 5 s wait.
        const held = `held-${screen}`
        const call = (method: string, path: string, body: unknown) =>
          `fetch(${JSON.stringify(path)}, { method: '${method}', headers: { 'content-type': 'application/json' }, body: ${JSON.stringify(JSON.stringify(body))} }).then((r) => r.text())`
        await page.evaluate(call('PUT', `/v1/project/Acme/environment/production/collection/orders/records/${held}`, { teamName: 'Support', data: { status: 'paid' } }))
        const blocking = JSON.parse(await page.evaluate<string>(call('POST', '/v1/project/Acme/environment/production/workflow-runs', { workflowName: 'Refund order', teamName: 'Support', recordId: held }))).runId as string
        await page.goto(RECORD_PAGE(held))
        await page.click('button:has-text("Run “Refund order”")')
        const link = page.locator('form a.blocking-run')
        await eventually('the link to the blocking run', () => link.count(), (n) => n === 1)
        expect(await link.getAttribute('href')).toBe(`/runs/${blocking}`)
        await thenLoad(page, () => link.click())
        expect(new URL(page.url()).pathname).toBe(`/runs/${blocking}`)
      }, 30_000)

      test('search a collection by a field value', async () => {
        await page.goto('/p/Acme/e/production/t/Support/c/orders')
        await page.fill('#record-search input[name=field]', 'customer')
        await page.fill('#record-search input[name=value]', 'cus_002')
        await thenLoad(page, () => page.click('#record-search button[type=submit]'))
        expect(await page.locator('table a.record-link').allTextContents()).toEqual(['ord_1002'])
        await pageIsSound(page)
      }, 30_000)

      test('the header search finds a record and a person', async () => {
        await page.fill('header input[name=q]', 'ord_1003')
        await thenLoad(page, () => page.press('header input[name=q]', 'Enter'))
        expect(new URL(page.url()).pathname).toBe('/search')
        expect(await page.locator('#found-records a').allTextContents()).toEqual(['ord_1003'])
        await pageIsSound(page)
        await page.fill('header input[name=q]', 'bob@')
        await thenLoad(page, () => page.press('header input[name=q]', 'Enter'))
        expect(await page.locator('#found-people a').allTextContents()).toEqual(['bob@example.com'])
        await thenLoad(page, () => page.click('#found-people a'))
        expect(new URL(page.url()).pathname).toBe('/p/Acme/settings')
      }, 30_000)
    })
  }
})

const count = (page: Page, selector: string) => countOf(page, selector)()

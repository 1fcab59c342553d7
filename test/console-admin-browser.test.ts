/**
 * The instance administrators' console pages in a real browser (Chromium via playwright-core) against `trellis serve`
 * over Acme (no TRELLIS_HTTP_ALLOW, no identity provider), at 1280×800 and 390×844: alice edits the outbound
 * allow-list (a bad line named beside the box, then a list saved with its change logged); a callback opened by it and
 * then refused when the list is emptied links to the page from the run's deliveries; each permission level has a
 * description of its own; the project settings say nothing of what turning SSO on does while no provider is
 * configured; and the row actions of the people, members, tokens and deliveries tables are on screen at 390 px
 * without scrolling sideways. axe-core finds no serious or critical problem on any of these pages.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import type { ServeProcess, TestEnv } from './helpers.ts'
import { acmeDocument, acmeProject, ordersWorkflow } from './support/acme.ts'
import { accessibilityProblems, browserAvailable, eventually, noSidewaysScroll, requireBrowser, SCREENS, serveAcme, signInAs, stopServed, textOf, thenLoad } from './support/browser.ts'

requireBrowser('console-admin-browser')

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []
/** Each screen its own workflow and record, so the two runs of a test do not meet. */
const PLACES = { laptop: { workflow: 'Ping laptop', record: 'ord_1001' }, phone: { workflow: 'Ping phone', record: 'ord_1002' } } as const

/** A JSON call from the page (same origin, its session), answering the status and body. */
async function callFromPage(page: Page, method: string, path: string, json?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  return page.evaluate(
    async ([method, path, body]) => {
      const response = await fetch(path, { method, headers: { 'content-type': 'application/json', accept: 'application/json' }, body })
      const text = await response.text()
      return { status: response.status, body: text ? JSON.parse(text) : {} }
    },
    [method, path, json === undefined ? undefined : JSON.stringify(json)] as const,
  )
}

/** Every button of `selector`'s rows is within the viewport's width (reachable without scrolling sideways); answers how many. */
async function buttonsOnScreen(page: Page, selector: string): Promise<number> {
  const width = page.viewportSize()!.width
  const buttons = await page.locator(`${selector} tbody button`).all()
  for (const button of buttons) {
    const box = (await button.boundingBox())!
    expect({ button: await button.textContent(), left: box.x >= 0, right: box.x + box.width <= width }).toEqual({ button: await button.textContent(), left: true, right: true })
  }
  await noSidewaysScroll(page)
  return buttons.length
}

/** Saves the allow-list through the page's form: answers the flash after the reload. */
async function saveAllowList(page: Page, lines: string): Promise<string> {
  await page.fill('#outbound-allow textarea[name=entries]', lines)
  await thenLoad(page, () => page.click('#outbound-allow button[type=submit]'))
  return textOf(page, '#flash')()
}

describe.skipIf(!browserAvailable)('instance administration in Chromium', () => {
  beforeAll(async () => {
    const document = acmeDocument({ passwords: true })
    // alice administers the instance (the apply key), and Acme.
    ;(document.users.find((u) => u.email === 'alice@example.com') as unknown as Record<string, unknown>).instanceAdmin = true
    for (const { workflow } of Object.values(PLACES)) acmeProject(document).workflows!.push(ordersWorkflow(workflow, [{ type: 'load' }]))
    ;({ env, server, browser } = await serveAcme(document))
  }, 60_000)

  afterAll(async () => {
    await stopServed({ env, server, browser })
    expect(problems).toEqual([])
  })

  for (const screen of ['laptop', 'phone'] as const) {
    const { workflow, record } = PLACES[screen]

    test(`${screen}: the outbound allow-list edited, its change logged; a callback it no longer opens links to it`, async () => {
      const context = await browser.newContext({ baseURL: server.url, viewport: SCREENS[screen] })
      const page = await signInAs(context, 'alice', '/admin/outbound', problems)
      expect(await accessibilityProblems(page)).toEqual([])
      await noSidewaysScroll(page)

      // A line that is no host, address or range: said beside the box, nothing saved.
      await page.fill('#outbound-allow textarea[name=entries]', '127.0.0.1\nhttp://hooks.internal')
      await page.click('#outbound-allow button[type=submit]')
      await eventually('the entry error', textOf(page, '#outbound-allow .field-error'), (t) => t.includes('entry 2'))
      expect(await page.getAttribute('#outbound-allow textarea', 'aria-invalid')).toBe('true')
      expect(await accessibilityProblems(page)).toEqual([])

      expect(await saveAllowList(page, `127.0.0.1\n\n10.1.0.0/16\n`)).toBe('Outbound allow-list saved.')
      expect(await page.inputValue('#outbound-allow textarea[name=entries]')).toBe('127.0.0.1\n10.1.0.0/16')
      expect(await textOf(page, '#outbound-log table tbody tr')()).toContain('Entries: 127.0.0.1, 10.1.0.0/16')
      expect(await accessibilityProblems(page)).toEqual([])
      await noSidewaysScroll(page)

      // A callback to this host is accepted now; emptied, the list refuses its delivery at once.
      const callbacks = `/v1/project/Acme/environment/production/team/Support/workflows/${encodeURIComponent(workflow)}/callbacks`
      expect((await callFromPage(page, 'POST', callbacks, { url: `http://127.0.0.1:9/${screen}` })).status).toBe(201)
      expect(await saveAllowList(page, '')).toBe('Outbound allow-list saved.')
      const started = await callFromPage(page, 'POST', '/v1/project/Acme/environment/production/workflow-runs', { workflowName: workflow, teamName: 'Support', recordId: record })
      expect(started.status).toBe(202)
      await page.goto(`/runs/${started.body.runId}`)
      await eventually('the refused delivery with its Resend', async () => {
        await page.reload()
        return page.locator('table.deliveries button').count()
      }, (n) => n === 1)
      expect(await page.getAttribute('table.deliveries a.allow-list-link', 'href')).toBe('/admin/outbound')
      expect(await buttonsOnScreen(page, 'table.deliveries')).toBe(1)
      expect(await accessibilityProblems(page)).toEqual([])
      await context.close()
    }, 60_000)

    /** A new page of `screen`'s size, signed in as alice, at `path`. */
    async function aliceAt(path: string): Promise<Page> {
      const context = await browser.newContext({ baseURL: server.url, viewport: SCREENS[screen] })
      return signInAs(context, 'alice', path, problems)
    }

    test(`${screen}: each permission level has a description of its own`, async () => {
      const page = await aliceAt('/p/Acme/settings')
      const descriptions = await page.locator('#permission-levels dd').allTextContents()
      expect(descriptions).toHaveLength(5)
      expect(new Set(descriptions).size).toBe(5)
      expect(await accessibilityProblems(page)).toEqual([])
      await page.context().close()
    }, 60_000)

    test(`${screen}: no SSO warning while no identity provider is configured`, async () => {
      const page = await aliceAt('/p/Acme/settings')
      expect(await page.locator('#sso-warning').count()).toBe(0)
      expect(await page.textContent('main')).not.toContain('Turning SSO')
      expect(await textOf(page, '#project-settings')()).toContain('Renaming changes the project')
      expect(await accessibilityProblems(page)).toEqual([])
      await page.context().close()
    }, 60_000)

    test(`${screen}: the row actions of members, people and tokens are on screen without scrolling sideways`, async () => {
      const page = await aliceAt('/p/Acme/settings')
      expect(await buttonsOnScreen(page, 'table.members')).toBeGreaterThan(0)
      expect(await accessibilityProblems(page)).toEqual([])
      await page.goto('/admin/users')
      // Four people at least, each with an instance-admin and an active-state button.
      expect(await buttonsOnScreen(page, 'table.people')).toBeGreaterThanOrEqual(8)
      expect(await accessibilityProblems(page)).toEqual([])
      expect((await callFromPage(page, 'POST', '/v1/account/tokens', { name: `${screen} token`, projectName: 'Acme' })).status).toBe(201)
      await page.goto('/account')
      expect(await buttonsOnScreen(page, 'table.tokens')).toBeGreaterThan(0)
      expect(await accessibilityProblems(page)).toEqual([])
      await page.context().close()
    }, 60_000)
  }
})

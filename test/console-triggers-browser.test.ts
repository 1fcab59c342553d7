/**
 * A workflow's trigger settings in a real browser (Chromium via playwright-core) against `trellis serve` over Acme plus
 * a typed collection of claims and a one-step workflow on it, at 1280×800 and 390×844: alice sets a schedule — a bad
 * cron said in words as she types, then the next fire times — and record events ("when status becomes disputed"); a
 * claim set to disputed in the record's form starts one run, whose page says what started it; a claim set to closed
 * starts none; both are removed again. axe-core finds no serious or critical problem on the page with both set, and no page has a script error.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import type { ServeProcess, TestEnv } from './helpers.ts'
import { acmeDocument, acmeProject } from './support/acme.ts'
import { accessibilityProblems, browserAvailable, eventually, noSidewaysScroll, requireBrowser, SCREENS, serveAcme, signInAs, stopServed, textOf, thenLoad } from './support/browser.ts'

requireBrowser('console-triggers-browser')

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []
const CLAIMS = '/p/Acme/e/production/t/Support/c/claims'
/** Each screen its own workflow and claims, so the two runs of the test do not meet. */
const PLACES = { laptop: { workflow: 'Open dispute', claims: ['claim_1', 'claim_2'] }, phone: { workflow: 'Open dispute (phone)', claims: ['claim_3', 'claim_4'] } } as const

describe.skipIf(!browserAvailable)('a workflow\'s trigger settings in Chromium', () => {
  beforeAll(async () => {
    const document = acmeDocument({ passwords: true })
    const acme = acmeProject(document)
    acme.collections!.push({ name: 'claims', schema: { fields: [{ name: 'status', type: 'select', options: ['open', 'disputed', 'closed'], required: true }] } })
    for (const { workflow, claims } of Object.values(PLACES)) {
      acme.workflows!.push({ name: workflow, environment: 'production', team: 'Support', collection: 'claims', steps: [{ type: 'load' }] })
      for (const id of claims) acme.records!.push({ environment: 'production', collection: 'claims', id, data: { status: 'open' } })
    }
    ;({ env, server, browser } = await serveAcme(document))
  }, 60_000)

  afterAll(async () => {
    await stopServed({ env, server, browser })
    expect(problems).toEqual([])
  })

  for (const screen of ['laptop', 'phone'] as const) {
    const { workflow, claims } = PLACES[screen]
    const workflowPage = `/p/Acme/e/production/t/Support/w/${encodeURIComponent(workflow)}`

    test(`${screen}: a schedule with its next fire times, events on a status, and a run that says what started it`, async () => {
      const context = await browser.newContext({ baseURL: server.url, viewport: SCREENS[screen] })
      const page = await signInAs(context, 'alice', workflowPage, problems)
      page.on('dialog', (dialog) => dialog.accept())
      expect(await textOf(page, '#schedule-state')()).toBe('none')

      // The schedule: a wrong cron is said in words as it is typed, a right one lists the next five fire times.
      await page.fill('#schedule-form [name=cron]', '61 * * * *')
      await eventually('the cron error', textOf(page, '#schedule-next'), (t) => t.toLowerCase().includes('cron'))
      await page.fill('#schedule-form [name=timezone]', 'Europe/Paris')
      await page.fill('#schedule-form [name=cron]', '0 9 * * 1-5')
      await eventually('the next fire times', () => page.locator('#schedule-next li').allTextContents(), (items) => items.length === 5 && items.every((i) => i.includes('09:00:00+01:00') || i.includes('09:00:00+02:00')))
      await page.fill('#schedule-form [name=where]', '{"status": {"eq": "open"}, "createdAt": {"lt": "{{now-3d}}"}}')
      await page.fill('#schedule-form [name=runAs]', 'alice@example.com')
      await thenLoad(page, () => page.click('#schedule-form button[type=submit]'))
      expect(await textOf(page, '#flash')()).toBe('Schedule saved.')
      expect(await textOf(page, '#schedule-state')()).toBe('enabled')

      // Events: when a claim's status changes and it is disputed.
      // No JSON for the events: a box per kind, the fields offered from the collection's schema.
      expect(await page.locator('#events-field-names option').evaluateAll((options) => options.map((o) => o.getAttribute('value')))).toContain('status')
      await page.check('#events-form input[name=event][value=recordUpdated]')
      await page.fill('#events-form [name=where]', '{"status": {"eq": "disputed"}}')
      await page.fill('#events-form [name=runAs]', 'alice@example.com')
      // A field the schema lacks is said beside the fields box, nothing saved.
      await page.fill('#events-form [name=fields]', 'colour')
      await page.click('#events-form button[type=submit]')
      await eventually('the field error', textOf(page, '#events-form'), (t) => t.includes('no field colour'))
      expect(await textOf(page, '#events-state')()).toBe('off')
      await page.fill('#events-form [name=fields]', 'status')
      await thenLoad(page, () => page.click('#events-form button[type=submit]'))
      expect(await textOf(page, '#flash')()).toBe('Events saved.')
      expect(await textOf(page, '#events-state')()).toBe('on')
      expect(await page.isChecked('#events-form input[name=event][value=recordUpdated]')).toBe(true)
      expect(await page.isChecked('#events-form input[name=event][value=recordCreated]')).toBe(false)
      expect(await page.inputValue('#events-form [name=fields]')).toBe('status')
      await noSidewaysScroll(page)
      expect(await accessibilityProblems(page)).toEqual([])

      // A claim set to closed starts nothing; one set to disputed starts one run of the workflow.
      for (const [id, status] of [[claims[1], 'closed'], [claims[0], 'disputed']] as const) {
        await page.goto(`${CLAIMS}/r/${id}`)
        await page.selectOption('#edit-record [name=status]', status)
        await thenLoad(page, () => page.click('#edit-record button[type=submit]'))
        expect(await textOf(page, '#flash')()).toBe('Record saved.')
      }
      const runLink = (p: Page) => p.locator('table.runs tbody tr[data-run-id] a[href^="/runs/"]')
      await eventually('the event\'s run on the disputed claim', async () => {
        await page.goto(`${CLAIMS}/r/${claims[0]}`)
        return runLink(page).count()
      }, (n) => n === 1, 20_000)
      await thenLoad(page, () => runLink(page).first().click())
      await eventually('what started the run', textOf(page, '#run-origin'), (t) => t.includes('recordUpdated') && t.includes(claims[0]) && t.includes('status changed'))
      await page.goto(`${CLAIMS}/r/${claims[1]}`)
      expect(await runLink(page).count()).toBe(0)

      // Both removed (each asks first): the next screen's claims start only its own workflow.
      await page.goto(workflowPage)
      await thenLoad(page, () => page.click('button:text("Remove events")'))
      expect(await textOf(page, '#events-state')()).toBe('off')
      await thenLoad(page, () => page.click('button:text("Remove schedule")'))
      expect(await textOf(page, '#schedule-state')()).toBe('none')
      await context.close()
    }, 120_000)
  }
})

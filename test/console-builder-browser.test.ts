/**
 * The visual workflow builder in a real browser: Debian's Chromium driven by playwright-core against `trellis serve`
 * in a real process over examples/acme.yaml. At a laptop's and a phone's size, as a person would, with the builder
 * only (nothing typed into the JSON): delete, add, insert and move steps until there are four (load, condition,
 * update, task), see a field's error beside it and a template variable offered as `{{` is typed, dry-run the
 * definition on a record (nothing written), publish v2 and see it without a reload, compare v1 → v2 — every state
 * checked with axe, no page wider than the screen, no script error, no Content-Security-Policy violation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Locator, Page } from 'playwright-core'
import { queryAll } from './helpers.ts'
import { accessibilityProblems, browserAvailable, countOf, eventually, mark, requireBrowser, SCREENS, type ServedAcme, serveAcme, signInAs, stayed, stopServed, textOf, thenLoad } from './support/browser.ts'
import { sidewaysOverflow } from './support/browser.ts'

requireBrowser('console-builder-browser')

let served: ServedAcme
const problems: string[] = []

async function checked(page: Page, where: string) {
  expect({ where, overflow: await sidewaysOverflow(page) }).toEqual({ where, overflow: 0 })
  expect({ where, axe: await accessibilityProblems(page) }).toEqual({ where, axe: [] })
}

const card = (page: Page, index: number): Locator => page.locator(`.step-card[data-index="${index}"]`)
const definitionText = (page: Page) => page.inputValue('#workflow-editor textarea[name=definition]')

async function addStep(page: Page, type: string, where: 'end' | number) {
  await page.selectOption('#builder-type', type)
  if (where === 'end') await page.click('#builder-add')
  else await card(page, where).getByRole('button', { name: `Insert step above step ${where + 1}` }).click()
}

describe.skipIf(!browserAvailable)('building a workflow in Chromium', () => {
  beforeAll(async () => {
    served = await serveAcme()
  }, 60_000)

  afterAll(async () => {
    await stopServed(served)
    expect(problems).toEqual([])
  })

  test('every step type has its form: each example card valid as added; note, http and wait edited into the JSON', async () => {
    const context = await served.browser.newContext({ baseURL: served.server.url, viewport: SCREENS.laptop })
    const page = await signInAs(context, 'alice', '/p/Acme/e/production/t/Support/w/Refund%20order', problems)
    await page.click('#tab-builder')
    const types = ['load', 'condition', 'update', 'note', 'http', 'wait', 'task']
    expect(await page.locator('#builder-type option').allTextContents()).toEqual(types)
    for (const type of ['note', 'http', 'wait']) await addStep(page, type, 'end')
    const count = await countOf(page, '.step-card')()
    const [note, http, wait] = [card(page, count - 3), card(page, count - 2), card(page, count - 1)]
    expect(await countOf(page, '.step-card [aria-invalid=true]')()).toBe(0)
    await note.getByLabel('Title').fill('Seen {{now}}')
    await note.getByLabel('Content').fill('Order {{record.id}}')
    await http.getByLabel('Method').selectOption('PUT')
    await http.getByLabel('URL').fill('https://erp.example.com/orders/{{record.id}}')
    await http.getByRole('button', { name: 'Add a header' }).click()
    await http.locator('.row-key').fill('x-api-key')
    await http.locator('.row-value').fill('k')
    await http.getByLabel('Body (JSON, or text)').fill('{"status": "{{record.status}}"}')
    await http.getByLabel('Retries').fill('2')
    // A wait out of the schema's bounds: its rule beside it, in the API's words.
    await wait.getByLabel('Seconds').fill('0')
    await eventually('the error beside the seconds', async () => (await wait.locator('[data-error-for="seconds"]').textContent()) ?? '', (t) => t === 'must be an integer between 1 and 2592000')
    await wait.getByLabel('Seconds').fill('3600')
    const steps = JSON.parse(await definitionText(page)).steps
    expect(steps.slice(-3)).toEqual([
      { type: 'note', title: 'Seen {{now}}', content: 'Order {{record.id}}' },
      { type: 'http', method: 'PUT', url: 'https://erp.example.com/orders/{{record.id}}', body: { status: '{{record.status}}' }, timeoutSeconds: 10, headers: { 'x-api-key': 'k' }, retries: 2 },
      { type: 'wait', seconds: 3600 },
    ])
    expect(await countOf(page, '.step-card [aria-invalid=true]')()).toBe(0)
    // An unknown template variable is refused beside its field, as the API refuses it.
    await note.getByLabel('Title').fill('Seen {{nobody}}')
    await eventually('the template error', async () => (await note.locator('[data-error-for="title"]').textContent()) ?? '', (t) => t.includes('unknown template variable {{nobody}}'))
    await checked(page, 'every step type')
    // What only the API checks (two steps of one name) comes back from Publish beside the field it names.
    await note.getByLabel('Title').fill('Seen {{now}}')
    await note.getByLabel('Name (optional)').fill('same')
    await wait.getByLabel('Name (optional)').fill('same')
    await page.click('#workflow-editor button[type=submit]')
    await eventually('the duplicate name beside the field', async () => (await wait.locator('[data-error-for="name"]').textContent()) ?? '', (t) => t.includes('duplicate step name "same"'))
    await checked(page, 'an error of the API')
    await wait.getByLabel('Name (optional)').fill('')
    // Published with the builder's own text areas on the page: the definition's text is what is sent.
    await page.click('#workflow-editor button[type=submit]')
    await eventually('the publication', textOf(page, '.editor-result'), (t) => t.startsWith('Published v2.'))
    expect(await textOf(page, '#workflow-steps')()).toContain('Wait 1 h')
    await context.close()
  }, 60_000)

  for (const [screen, viewport] of Object.entries(SCREENS)) {
    test(`at ${viewport.width}×${viewport.height}: build four steps, dry-run, publish v2, compare`, async () => {
      const context = await served.browser.newContext({ baseURL: served.server.url, viewport })
      const page = await signInAs(context, 'alice', '/p/Acme/e/production/t/Support', problems)
      const text = (selector: string) => textOf(page, selector)
      const name = `Built ${screen}`

      // A new workflow: v1, one load step.
      await page.fill('#new-workflow input[name=workflowName]', name)
      await page.selectOption('#new-workflow select[name=collection]', 'orders')
      await page.click('#new-workflow button[type=submit]')
      await page.waitForURL(`**/w/${encodeURIComponent(name)}`)
      await eventually('v1', text('#workflow-summary'), (t) => t.includes('Version v1 is active'))

      // The builder tab: the same definition as cards.
      await page.click('#tab-builder')
      expect(await page.isVisible('#panel-json')).toBe(false)
      expect(await countOf(page, '.step-card')()).toBe(1)
      expect(await card(page, 0).getAttribute('data-type')).toBe('load')
      await checked(page, 'builder')

      // Delete the load, add an update, insert a load above it, add a condition and move it up, add a task.
      await card(page, 0).getByRole('button', { name: 'Delete step 1' }).click()
      expect(await countOf(page, '.step-card')()).toBe(0)
      await addStep(page, 'update', 'end')
      await addStep(page, 'load', 0)
      await addStep(page, 'condition', 'end')
      await card(page, 2).getByRole('button', { name: 'Move step 3 up' }).click()
      await addStep(page, 'task', 'end')
      expect(await page.locator('.step-card').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-type')))).toEqual(['load', 'condition', 'update', 'task'])

      // The condition: status equals paid, else end.
      await card(page, 1).getByLabel('Field', { exact: true }).fill('status')
      await card(page, 1).getByLabel('Value').fill('paid')

      // The update: status = refunded, and a second field whose value takes a template variable offered at `{{`.
      const update = card(page, 2)
      await update.locator('.row-value').first().fill('refunded')
      await update.getByRole('button', { name: 'Add a field' }).click()
      await update.locator('.row-key').nth(1).fill('checkedFor')
      await update.locator('.row-value').nth(1).pressSequentially('by {{rec')
      await eventually('the variables offered', text('#builder-suggestions'), (t) => t.includes('{{record.id}}'))
      await update.locator('.row-value').nth(1).press('Enter')
      expect(await update.locator('.row-value').nth(1).inputValue()).toBe('by {{record.id}}')
      expect(await page.isVisible('#builder-suggestions')).toBe(false)

      // The task: a name the schema refuses is marked beside its field, then fixed; assignees, a form field, a deadline.
      const task = card(page, 3)
      const taskName = task.getByLabel('Name (later steps read tasks.<name>)')
      await taskName.fill('not a name!')
      await eventually('the error beside the name', async () => (await task.locator('[data-error-for="name"]').textContent()) ?? '', (t) => t.includes('matching'))
      expect(await taskName.getAttribute('aria-invalid')).toBe('true')
      await checked(page, 'builder with an error')
      await taskName.fill('approve')
      expect(await task.locator('[data-error-for="name"]').textContent()).toBe('')
      await task.getByLabel('Title').fill('Refund {{record.id}}?')
      await task.getByLabel('Teams (comma-separated)').fill('Support')
      await task.getByLabel('Users (emails, comma-separated)').fill('carol@example.com')
      await task.getByRole('button', { name: 'Add a form field' }).click()
      await task.locator('.form-name').fill('reason')
      await task.locator('.form-title').fill('Why')
      await task.getByLabel('required').check()
      await task.getByLabel('Deadline after it opens (empty: none)').fill('2')
      await task.getByLabel('At the deadline').selectOption('reject')

      // The JSON the builder wrote, nothing typed into it.
      const built = JSON.parse(await definitionText(page))
      expect(built).toEqual({
        collection: 'orders',
        steps: [
          { type: 'load' },
          { type: 'condition', if: { field: 'status', equals: 'paid' }, else: 'end' },
          { type: 'update', set: { status: 'refunded', checkedFor: 'by {{record.id}}' } },
          {
            type: 'task', name: 'approve', title: 'Refund {{record.id}}?', assignees: { teams: ['Support'], users: ['carol@example.com'] },
            form: { type: 'object', properties: { reason: { type: 'string', title: 'Why' } }, required: ['reason'] }, dueIn: { days: 2 }, onTimeout: 'reject',
          },
        ],
      })
      expect(await countOf(page, '.step-card [aria-invalid=true]')()).toBe(0)

      // A dry run on a paid order: each step's effect, nothing written.
      const recordBefore = queryAll(served.env.store, "SELECT data FROM records WHERE record_key = 'ord_1003'")
      await page.fill('#dry-run-record', 'ord_1003')
      await page.click('button[data-dry-run]')
      await eventually('the dry run', text('#dry-run-result'), (t) => t.includes('the run would succeed'))
      expect(await countOf(page, '.dry-run-steps li')()).toBe(4)
      expect(await text('.dry-run-steps')()).toContain('Would set status, checkedFor')
      expect(await text('.dry-run-steps')()).toContain('Would ask team Support, carol@example.com “Refund ord_1003?”')
      expect(queryAll(served.env.store, "SELECT data FROM records WHERE record_key = 'ord_1003'")).toEqual(recordBefore)
      await checked(page, 'dry run')

      // Publish: v2 on the page without a reload.
      await mark(page)
      await page.click('#workflow-editor button[type=submit]')
      await eventually('the publication', text('.editor-result'), (t) => t.startsWith('Published v2.'))
      expect(await stayed(page)).toBe(true)
      expect(await text('#workflow-summary')()).toContain('Version v2 is active')
      expect(await text('#workflow-steps')()).toContain('Ask team Support, carol@example.com')
      expect(await countOf(page, 'table.versions tbody tr')()).toBe(2)
      await checked(page, 'published')

      // Compare v1 → v2.
      await thenLoad(page, () => page.click('.editor-result a:text("Compare v1 → v2")'))
      expect(await text('#diff')()).toMatch(/^v1 → v2: \d+ lines changed$/)
      expect(await page.locator('.diff-added').allTextContents()).toContainEqual(expect.stringContaining('"type": "task"'))
      // The builder tab is remembered: the new version's cards.
      expect(await countOf(page, '.step-card')()).toBe(4)
      await checked(page, 'diff')
      await context.close()
    }, 120_000)
  }
})

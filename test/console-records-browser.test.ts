/**
 * A typed collection in a real browser (Chromium via playwright-core) against `trellis serve` over Acme, at both
 * screens (1280×800, 390×844), each on a collection of its own that holds one record from before any schema: alice
 * defines the schema in the editor (a select without options refused beside its row's field, then saved: the report
 * counts the old record), creates two records in the generated form, edits one with a wrong value (the API's message
 * beside the field) then a right one (a relation suggested as she types), then filters and sorts the list with its
 * plain GET forms and links. Deleting and restoring a record call the records write API. bob, an editor in Acme (no
 * admin), creates, edits and deletes a record through his team's forms (no restore form). No page is wider than its
 * viewport, axe-core finds no serious or critical problem, and no page has a script error or a CSP violation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import type { ServeProcess, TestEnv } from './helpers.ts'
import { acmeDocument, acmeProject } from './support/acme.ts'
import { accessibilityProblems, browserAvailable, eventually, noSidewaysScroll, requireBrowser, SCREENS, serveAcme, signInAs, stopServed, textOf, thenLoad } from './support/browser.ts'

requireBrowser('console-records-browser')

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []
const COLLECTIONS = { laptop: 'products_laptop', phone: 'products_phone' } as const
const DELETING = 'products_deleting'
/** Written by bob: an editor in Acme (no admin) whose team, Support, may edit every collection by default. */
const TEAM_WRITES = 'products_team'
const listPath = (collection: string) => `/p/Acme/e/production/t/Support/c/${collection}`

/** The page's problems now: sideways scroll, and axe-core's serious or critical findings. */
async function checkLayout(page: Page) {
  await noSidewaysScroll(page)
  expect({ url: page.url(), found: await accessibilityProblems(page) }).toEqual({ url: page.url(), found: [] })
}

/** A new context at `screen` signed in as `who`, on `next`; its confirmations accepted. */
async function signIn(screen: keyof typeof SCREENS, next: string, who = 'alice'): Promise<Page> {
  const context = await browser.newContext({ baseURL: server.url, viewport: SCREENS[screen] })
  const page = await signInAs(context, who, next, problems)
  page.on('dialog', (dialog) => dialog.accept())
  return page
}

/** Fills the schema editor's row `index` (added with "Add a field"). */
async function fillRow(page: Page, index: number, field: { name: string; type: string; options?: string; collection?: string; required?: boolean }) {
  const row = page.locator('#schema-fields > [data-row]').nth(index)
  await row.locator('[name=name]').fill(field.name)
  await row.locator('[name=type]').selectOption(field.type)
  if (field.options !== undefined) await row.locator('[name=options]').fill(field.options)
  if (field.collection) await row.locator('[name=collection]').selectOption(field.collection)
  if (field.required) await row.locator('[name=required]').check()
}

/** The record ids the list shows, in order. */
const listedIds = (page: Page) => page.locator('a.record-link').allTextContents()

describe.skipIf(!browserAvailable)('a typed collection in Chromium', () => {
  beforeAll(async () => {
    const document = acmeDocument({ passwords: true })
    const acme = acmeProject(document)
    for (const name of Object.values(COLLECTIONS)) {
      acme.collections!.push({ name })
      acme.records!.push({ environment: 'production', collection: name, id: 'legacy', data: { colour: 'red' } })
    }
    // Typed from the start, for the delete and restore test alone.
    acme.collections!.push({ name: DELETING, schema: { fields: [{ name: 'sku', type: 'text' }] } })
    acme.records!.push({ environment: 'production', collection: DELETING, id: 'gone', data: { sku: 'G-1' } })
    acme.collections!.push({ name: TEAM_WRITES, schema: { fields: [{ name: 'sku', type: 'text', required: true }] } })
    ;({ env, server, browser } = await serveAcme(document))
  }, 60_000)

  afterAll(async () => {
    await stopServed({ env, server, browser })
    expect(problems).toEqual([])
  })

  for (const screen of ['laptop', 'phone'] as const) {
    const collection = COLLECTIONS[screen]
    test(`${screen}: define a schema, create records, edit with a wrong then a right value, filter and sort`, async () => {
      const page = await signIn(screen, `/p/Acme/settings/collections/${collection}`)
      await checkLayout(page)
      for (let i = 0; i < 4; i++) await page.click('button:text("Add a field")')
      await fillRow(page, 0, { name: 'sku', type: 'text', required: true })
      await fillRow(page, 1, { name: 'qty', type: 'integer' })
      await fillRow(page, 2, { name: 'size', type: 'select' })
      await fillRow(page, 3, { name: 'customer', type: 'relation', collection: 'customers' })
      await page.click('#schema-editor button[type=submit]')
      // A select without options: the API's 400 names fields[2].options, shown beside that row's input.
      const optionsError = page.locator('#schema-fields > [data-row]:nth-child(3) .field-error')
      expect(await eventually('the options error', () => optionsError.textContent(), (t) => (t ?? '').includes('is required for a select field'))).toBeTruthy()
      await checkLayout(page)
      await page.locator('#schema-fields > [data-row]').nth(2).locator('[name=options]').fill('S, M, L')
      await page.click('#schema-editor button[type=submit]')
      await eventually('the report', textOf(page, '#schema-report'), (t) => t.includes('1') && t.includes('legacy'))
      expect(await page.isVisible('#schema-report')).toBe(true)
      // The rows as saved, read back from the server.
      await eventually('the saved rows', () => page.locator('#schema-fields legend').allTextContents(), (l) => l.join() === 'Field sku,Field qty,Field size,Field customer')

      // Two records through the generated form.
      await page.goto(listPath(collection))
      await checkLayout(page)
      for (const [id, sku, qty, size] of [['p1', 'A-1', '2', 'M'], ['p2', 'B-2', '5', 'S']] as const) {
        await page.fill('#new-record [data-path=recordId]', id)
        await page.fill('#new-record [name=sku]', sku)
        await page.fill('#new-record [name=qty]', qty)
        await page.selectOption('#new-record [name=size]', size)
        await thenLoad(page, () => page.click('#new-record button[type=submit]'))
        expect(await textOf(page, '#flash')()).toBe('Record saved.')
      }
      expect((await listedIds(page)).sort()).toEqual(['legacy', 'p1', 'p2'])

      // Edit p1: a fraction in an integer field is refused beside it; then a right value, and a suggested customer.
      await page.goto(`${listPath(collection)}/r/p1`)
      await checkLayout(page)
      expect(await page.inputValue('#edit-record [name=qty]')).toBe('2')
      await page.fill('#edit-record [name=qty]', '2.5')
      await page.click('#edit-record button[type=submit]')
      await eventually('the error beside qty', textOf(page, '#edit-record [name=qty] + .field-error'), (t) => t.includes('must be an integer'))
      expect(await page.getAttribute('#edit-record [name=qty]', 'aria-invalid')).toBe('true')
      await checkLayout(page)
      await page.fill('#edit-record [name=qty]', '7')
      await page.locator('#edit-record [name=customer]').pressSequentially('cus_00')
      await eventually('the suggested customers', () => page.locator('#edit-record datalist option').evaluateAll((options) => options.map((o) => (o as unknown as { value: string }).value)), (ids) => ids.join() === 'cus_001,cus_002')
      await page.fill('#edit-record [name=customer]', 'cus_002')
      await thenLoad(page, () => page.click('#edit-record button[type=submit]'))
      expect(await textOf(page, '#flash')()).toBe('Record saved.')
      expect(await page.inputValue('#edit-record [name=qty]')).toBe('7')
      expect(await page.inputValue('#edit-record [name=customer]')).toBe('cus_002')
      expect(await page.locator('#edit-record .field-error').count()).toBe(0)

      // Filter: qty > 6 leaves p1; sort by clicking the qty header: ascending (no qty lowest), then descending.
      await page.goto(listPath(collection))
      await page.selectOption('#record-filters [name="o.qty"]', 'gt')
      await page.fill('#record-filters [name="f.qty"]', '6')
      await thenLoad(page, () => page.click('#record-filters button[type=submit]'))
      expect(await listedIds(page)).toEqual(['p1'])
      await checkLayout(page)
      await page.goto(listPath(collection))
      await thenLoad(page, () => page.click('th a.sort:text("qty")'))
      expect(await listedIds(page)).toEqual(['legacy', 'p2', 'p1'])
      await thenLoad(page, () => page.click('th a.sort:text("qty")'))
      expect(await listedIds(page)).toEqual(['p1', 'p2', 'legacy'])
      expect(await page.getAttribute('th[aria-sort]', 'aria-sort')).toBe('descending')
      await checkLayout(page)
      await page.context().close()
    }, 120_000)
  }

  test('delete and restore (needs the records write API)', async () => {
    const collection = DELETING
    const page = await signIn('laptop', `${listPath(collection)}/r/gone`)
    // Each step's state, the form's error line included: a refusal fails at once, naming the API's message.
    const state = async (form: string) => `${new URL(page.url()).pathname} ${await page.locator('#flash').textContent()} ${await page.locator(`${form} .form-error`).textContent({ timeout: 100 }).catch(() => '')}`
    await page.click('#delete-record button[type=submit]')
    await eventually('the list after deleting', () => state('#delete-record'), (s) => s.startsWith(`${listPath(collection)} Record gone deleted.`))
    expect(await listedIds(page)).not.toContain('gone')
    await page.fill('#restore-record [data-path=recordId]', 'gone')
    await page.click('#restore-record button[type=submit]')
    await eventually('the list after restoring', () => state('#restore-record'), (s) => s.includes('Record restored.'))
    expect(await listedIds(page)).toContain('gone')
    await page.context().close()
  }, 60_000)
  test('a member who is no admin writes through a team that may edit: new record, edit, delete; no restore', async () => {
    const page = await signIn('laptop', listPath(TEAM_WRITES), 'bob')
    expect(await page.locator('#restore-record').count()).toBe(0)
    await page.fill('#new-record [data-path=recordId]', 'by-bob')
    await page.fill('#new-record [name=sku]', 'B-1')
    await thenLoad(page, () => page.click('#new-record button[type=submit]'))
    expect(await textOf(page, '#flash')()).toBe('Record saved.')
    expect(await listedIds(page)).toEqual(['by-bob'])
    await page.goto(`${listPath(TEAM_WRITES)}/r/by-bob`)
    await page.fill('#edit-record [name=sku]', 'B-2')
    await thenLoad(page, () => page.click('#edit-record button[type=submit]'))
    expect(await textOf(page, '#flash')()).toBe('Record saved.')
    expect(await page.inputValue('#edit-record [name=sku]')).toBe('B-2')
    await page.click('#delete-record button[type=submit]')
    await eventually('the list after deleting', async () => page.url(), (url) => new URL(url).pathname === listPath(TEAM_WRITES))
    await eventually('the emptied list', () => listedIds(page), (ids) => ids.length === 0)
    await page.context().close()
  }, 60_000)
})

/**
 * The console's CSV import page and export link in a real browser (Chromium via playwright-core) against `trellis
 * serve` over Acme with a typed collection, at both screens (1280×800, 390×844): bob (Support) opens the collection,
 * downloads the export through its link, opens the import page, previews a file with a bad line and an unknown
 * column (the mapping, the counts, the bad line at its line), fixes the file, imports it with a progress bar, and
 * finds the records on the collection page. dave's team may not edit the collection: its import page is 403. No page
 * is wider than its viewport, and no page has a script error or a CSP violation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, BrowserContext } from 'playwright-core'
import type { ServeProcess, TestEnv } from './helpers.ts'
import { acmeDocument, acmeProject } from './support/acme.ts'
import { browserAvailable, eventually, pageIsSound, requireBrowser, SCREENS, serveAcme, stopServed, textOf, thenLoad, signInAs } from './support/browser.ts'

requireBrowser('records-csv-browser')

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []
const COLLECTION = '/p/Acme/e/production/t/Support/c/parts'

const signIn = (context: BrowserContext, name: string, next: string) => signInAs(context, name, next, problems)

describe.skipIf(!browserAvailable)('CSV import and export in the console', () => {
  beforeAll(async () => {
    const document = acmeDocument({ passwords: true })
    const acme = acmeProject(document) as any
    acme.collections.push({
      name: 'parts',
      permissions: { Billing: { read: true, edit: false } },
      schema: { fields: [{ name: 'name', type: 'text', required: true }, { name: 'qty', type: 'integer' }, { name: 'tags', type: 'multiselect', options: ['red', 'blue'] }] },
    })
    acme.records.push({ environment: 'production', collection: 'parts', id: 'p_0', data: { name: '=HYPERLINK("x")', qty: 1 } })
    ;({ env, server, browser } = await serveAcme(document))
  }, 60_000)

  afterAll(async () => {
    await stopServed({ browser, server, env })
    expect(problems).toEqual([])
  })

  for (const [screen, viewport] of Object.entries(SCREENS) as [keyof typeof SCREENS, (typeof SCREENS)[keyof typeof SCREENS]][]) {
    describe(`at ${viewport.width}×${viewport.height}`, () => {
      let context: BrowserContext
      beforeAll(async () => {
        context = await browser.newContext({ baseURL: server.url, viewport })
      })
      afterAll(() => context?.close())

      test('export link; preview with errors; import with progress; the records are there', async () => {
        const bob = await signIn(context, 'bob', COLLECTION)
        await pageIsSound(bob)
        const href = await bob.locator('.csv-links a:has-text("Export CSV")').getAttribute('href')
        const exported = await bob.request.get(href!)
        expect(exported.status()).toBe(200)
        const text = await exported.text()
        expect(text.split('\r\n')[0]).toBe('id,name,qty,tags,createdAt,updatedAt')
        // The formula guard: the cell is text to a spreadsheet.
        expect(text).toMatch(/\r\np_0,"'=HYPERLINK\(""x""\)",1,,/)

        await thenLoad(bob, () => bob.click('.csv-links a:has-text("Import CSV")'))
        expect(new URL(bob.url()).pathname).toBe(`${COLLECTION}/import`)
        await pageIsSound(bob)
        const ids = [1, 2, 3].map((n) => `${screen}_${n}`)
        const file = (qty: string, extra = '') => ({
          name: 'parts.csv',
          mimeType: 'text/csv',
          buffer: Buffer.from(`id,name,qty,tags${extra ? `,${extra}` : ''}\n${ids[0]},Bolt,4,red;blue${extra ? ',x' : ''}\n${ids[1]},"Nut, small",${qty},${extra ? ',y' : ''}\n${ids[2]},Washer,,blue${extra ? ',z' : ''}\n`),
        })

        await bob.setInputFiles('#csv-import input[type=file]', file('many', 'colour'))
        await bob.click('#csv-import button[name=preview]')
        await eventually('the preview', textOf(bob, '#import-status'), (t) => t.startsWith('Preview'))
        expect(await textOf(bob, '#import-status')()).toBe('Preview: 3 lines: 2 would be created, 0 would be updated, 0 unchanged, 1 cannot be written. Unknown columns: colour (add them to the schema or remove them).')
        expect(await bob.locator('#import-columns tbody tr').count()).toBe(5)
        expect(await textOf(bob, '#import-columns tbody tr:last-child')()).toContain('unknown: not imported')
        expect(await textOf(bob, '#import-errors tbody tr')()).toBe('3qtymust be an integer')
        expect(await bob.locator('#csv-import button[name=import]').isDisabled()).toBe(true)
        await pageIsSound(bob)

        await bob.setInputFiles('#csv-import input[type=file]', file('12'))
        await bob.click('#csv-import button[name=preview]')
        await eventually('the second preview', textOf(bob, '#import-status'), (t) => t.includes('3 would be created'))
        expect(await bob.locator('#import-errors').isHidden()).toBe(true)
        await bob.click('#csv-import button[name=import]')
        await eventually('the import', textOf(bob, '#import-status'), (t) => t.startsWith('Done'))
        expect(await textOf(bob, '#import-status')()).toBe('Done: 3 lines: 3 created, 0 updated, 0 unchanged, 0 cannot be written.')
        expect(await bob.locator('#import-progress').evaluate((p) => { const bar = p as unknown as { value: number; max: number; hidden: boolean }; return bar.value === bar.max && !bar.hidden })).toBe(true)

        await thenLoad(bob, () => bob.goto(COLLECTION))
        for (const id of ids) expect(await bob.locator(`a.record-link:has-text("${id}")`).count()).toBe(1)
      }, 60_000)

      test('a member whose team may not edit the collection: the import page is 403', async () => {
        const dave = await (await browser.newContext({ baseURL: server.url, viewport })).newPage()
        await dave.goto(`/login?next=${encodeURIComponent('/')}`)
        await dave.fill('input[name=email]', 'dave@example.com')
        await dave.fill('input[name=password]', 'dave-demo-pass-2026')
        await thenLoad(dave, () => dave.click('form.login button[type=submit]'))
        const response = await dave.goto('/p/Acme/e/production/t/Billing/c/parts/import')
        expect(response?.status()).toBe(403)
        await dave.context().close()
      }, 30_000)
    })
  }
})

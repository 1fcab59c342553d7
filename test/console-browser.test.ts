/**
 * The console in a real browser: Debian's Chromium driven by playwright-core, against `trellis serve` in a real
 * process over examples/acme.yaml. Sign in, open a record and run a workflow on it, generate a token (shown
 * once) and revoke it, change a webhook's trigger settings, add a completion callback (its secret and whole URL
 * shown once), read the audit pages, sign out — with no script error and no Content-Security-Policy violation on
 * any page. (/docs, Swagger UI, is a page of test/console-pages-browser.test.ts.)
 *
 * Chromium: /usr/bin/chromium (or CHROMIUM_PATH). Without it these tests are skipped with a warning, unless
 * TRELLIS_REQUIRE_BROWSER=1 (as in .ci/run), where a missing browser fails them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { bearer, processEnv, type ServeProcess, startServe, testEnv, type TestEnv } from './helpers.ts'
import { browserAvailable, countOf, eventually, requireBrowser, serveAcme, stopServed, textOf, thenLoad as loadAfter, watchPage } from './support/browser.ts'

requireBrowser('console-browser')

/** The test env the served console runs on: its data dir, and on PostgreSQL its database. */
let env: TestEnv
let dir: { path: string }
let server: ServeProcess
let browser: Browser
let context: BrowserContext
let page: Page
const problems: string[] = []

const watch = (p: Page) => watchPage(p, problems)
const text = (selector: string, p: Page = page) => textOf(p, selector)

/** A form's problem said once: beside its field (the input aria-invalid), the form's own line pointing at it. */
async function saidOnce(p: Page, form: string, input: string, message = '') {
  await eventually(`the error beside ${input}`, text(`${form} .field-error`, p), (t) => t.trim() !== '' && t.includes(message))
  expect(await p.getAttribute(`${form} ${input}`, 'aria-invalid')).toBe('true')
  expect(await text(`${form} .form-error`, p)()).toBe('Check the field marked above.')
}
const count = (selector: string, p: Page = page) => countOf(p, selector)
const thenLoad = (action: () => Promise<unknown>) => loadAfter(page, action)

async function signIn(email: string, password: string) {
  await page.fill('input[name=email]', email)
  await page.fill('input[name=password]', password)
  await page.click('button[type=submit]')
}

describe.skipIf(!browserAvailable)('the console in Chromium', () => {
  beforeAll(async () => {
    ;({ env, server, browser } = await serveAcme())
    dir = { path: env.dataDir }
    context = await browser.newContext({ baseURL: server.url })
    page = await context.newPage()
    watch(page)
  }, 60_000)

  afterAll(async () => {
    await stopServed({ browser, server, env })
    expect(problems).toEqual([])
  })

  test('a wrong password is shown on the form; the right one lands on the page asked for', async () => {
    await page.goto('/p/Acme')
    expect(new URL(page.url()).pathname).toBe('/login')
    await signIn('alice@example.com', 'not-the-password')
    await eventually('the login error', text('.form-error'), (t) => t === 'Invalid email or password')
    await signIn('alice@example.com', 'alice-demo-pass-2026')
    await page.waitForURL('**/p/Acme')
    expect(await text('h1')()).toBe('Acme')
  }, 30_000)

  test('open a record through the links, run a workflow on it, follow the run to its end', async () => {
    await page.click('a[href="/p/Acme/e/production/t/Support"]')
    await page.click('text=orders')
    await page.click('a:text-is("ord_1001")')
    expect(await text('#record-data')()).toContain('"status": "paid"')
    await page.click('button:has-text("Run “Refund order”")')
    await page.waitForURL('**/runs/*')
    expect(await text('h1')()).toBe('Run of Refund order')
    // The run goes through its steps in the server's executor (its last step waits 5 s).
    const deadline = Date.now() + 20_000
    while (!(await page.locator('#run-status').textContent())?.includes('succeeded')) {
      if (Date.now() > deadline) throw new Error(`run did not succeed: ${await page.locator('#run-status').textContent()}`)
      await Bun.sleep(500)
      await page.reload()
    }
    expect(await count('table.steps tr')()).toBe(6) // header + 5 steps
    await page.goto('/p/Acme/e/production/t/Support/c/orders/r/ord_1001')
    expect(await text('#record-data')()).toContain('"status": "refunded"')
    expect(await text('article.note h3')()).toContain('Refund')
    // Its history shows what changed it, the run's steps with the run linked; views are in the activity log.
    expect(await text('table.activity')()).toContain('triggered manually')
    expect(await text('table.activity')()).not.toContain('viewed in the console')
    expect(await count('table.activity a[href^="/runs/"]')()).toBeGreaterThan(0)
  }, 40_000)

  test('leave a note on a record, reply to it, archive it', async () => {
    await page.goto('/p/Acme/e/production/t/Support/c/orders/r/ord_1002')
    await page.fill('#new-note input[name=title]', 'Chase payment')
    await page.fill('#new-note textarea[name=text]', 'Called <them>.\n\nWill call again on Monday.')
    await thenLoad(() => page.click('#new-note button[type=submit]'))
    const note = page.locator('article.note', { hasText: 'Chase payment' })
    expect(await note.locator('.message').count()).toBe(1)
    expect(await note.locator('.message').first().textContent()).toContain('Called <them>.') // typed text stays text
    // The reply box opens on demand.
    expect(await note.locator('textarea[name=text]').isVisible()).toBe(false)
    await note.locator('details.reply summary').click()
    await note.locator('textarea[name=text]').fill('Paid today.')
    await thenLoad(() => note.locator('button:text("Add message")').click())
    expect(await page.locator('article.note', { hasText: 'Chase payment' }).locator('.message').count()).toBe(2)
    await thenLoad(() => page.locator('article.note', { hasText: 'Chase payment' }).locator('button:text("Archive")').click())
    expect(await text('article.note:has-text("Chase payment") h3')()).toBe('Chase payment (archived)')
    // Blank: the form says which field, nothing is sent twice.
    await page.fill('#new-note input[name=title]', '   ')
    await page.fill('#new-note textarea[name=text]', 'x')
    await page.click('#new-note button[type=submit]')
    await saidOnce(page, '#new-note', 'input[name=title]')
  }, 30_000)

  test('generate a token: shown once, works against the API; revoke it: refused at once', async () => {
    await page.click('header a[href="/account"]')
    await page.fill('#new-token input[name=name]', 'browser test')
    // "these scopes" with none ticked is refused, naming the field; ticking one chooses "these scopes".
    await page.check('#new-token input[name=preset][value=""]')
    await page.click('#new-token button[type=submit]')
    await eventually('the empty-scopes error', text('#new-token .form-error'), (t) => t.length > 0)
    expect(await count('#new-token .field-error')()).toBeLessThanOrEqual(1)
    await page.check('#new-token input[name=preset][value="read-write"]')
    await page.check('#new-token input[value="notes:read"]')
    expect(await page.locator('#new-token input[name=preset][value=""]').isChecked()).toBe(true)
    await page.click('#new-token button[type=submit]')
    await page.locator('#token-once').waitFor({ state: 'visible' })
    const value = (await page.locator('#token-value').textContent())!
    expect(value).toMatch(/^trl_[A-Za-z0-9_-]{43}$/)
    const notes = () => fetch(`${server.url}/v1/project/Acme/environment/production/notes`, { headers: bearer(value) })
    expect((await notes()).status).toBe(200)
    const logs = await fetch(`${server.url}/v1/project/Acme/environment/production/activity-logs`, { headers: bearer(value) })
    expect(logs.status).toBe(403) // exactly the scope ticked: notes:read

    // "Done" is a link back to the page: its load is awaited here, or the revoke below would take it for its own.
    await thenLoad(() => page.click('#token-once a:text("Done")'))
    await page.locator('#token-once').waitFor({ state: 'hidden' })
    expect(await page.content()).not.toContain(value) // never shown again
    const row = page.locator('table.tokens tr', { hasText: 'browser test' })
    expect(await row.textContent()).toContain(value.slice(0, 12))
    page.once('dialog', (dialog) => dialog.accept())
    await thenLoad(() => row.locator('button:text("Revoke")').click())
    expect(await page.locator('table.tokens tr', { hasText: 'browser test' }).count()).toBe(0)
    expect((await notes()).status).toBe(401)
  }, 30_000)

  test('trigger settings: regenerate (confirmed), disable, enable restores the URL, set the rate; the admin log has each', async () => {
    await page.goto('/p/Acme/e/production/t/Support/w/Refund%20order')
    expect(await text('#webhook-state')()).toBe('enabled')
    const first = await page.locator('#webhook-url').textContent()

    page.once('dialog', (dialog) => dialog.dismiss())
    await page.click('button:text("Regenerate URL")')
    await Bun.sleep(300)
    expect(await page.locator('#webhook-url').textContent()).toBe(first) // dismissed: nothing happened

    page.once('dialog', (dialog) => dialog.accept())
    await thenLoad(() => page.click('button:text("Regenerate URL")'))
    expect(await text('#webhook-url')()).not.toBe(first!)
    const regenerated = await page.locator('#webhook-url').textContent()
    expect((await fetch(first!, { method: 'POST' })).status).toBe(400) // superseded

    page.once('dialog', (dialog) => dialog.accept()) // disabling asks first
    await thenLoad(() => page.click('button:text("Disable webhook")'))
    expect(await text('#webhook-state')()).toBe('disabled')
    expect(await count('#webhook-url')()).toBe(0)
    await thenLoad(() => page.click('button:text("Enable webhook")'))
    expect(await text('#webhook-state')()).toBe('enabled')
    expect(await text('#webhook-url')()).toBe(regenerated!)

    await page.fill('input[name=ratePerMinute]', '0')
    await page.click('button:text("Save rate")')
    await saidOnce(page, 'form:has(input[name=ratePerMinute])', 'input[name=ratePerMinute]')
    await page.fill('input[name=ratePerMinute]', '7')
    await thenLoad(() => page.click('button:text("Save rate")')) // saved, then reloaded
    expect(await page.locator('input[name=ratePerMinute]').inputValue()).toBe('7')

    await page.goto('/p/Acme/admin-log?resource=workflow-webhook')
    // Regenerate, disable, enable, rate — by alice (the apply that enabled it first has no acting user).
    expect(await count('table.admin-log tbody tr:has-text("alice@example.com")')()).toBe(4)
  }, 30_000)

  test('a completion callback added on the workflow page: its signing secret and its whole URL shown once; the list, and the page after, show the URL without its query', async () => {
    await page.goto('/p/Acme/e/production/t/Support/w/Refund%20order')
    const url = 'https://erp.example.com/trellis-hooks?token=browser-credential'
    await page.fill('#new-callback input[name=url]', url)
    await page.click('#new-callback button[type=submit]')
    await page.locator('#callback-once').waitFor({ state: 'visible' })
    expect(await text('#callback-secret')()).toMatch(/^whsec_/)
    expect(await text('#callback-url')()).toBe(url)
    await eventually('the list to show the new callback', text('#callback-list'), (t) => t.includes('https://erp.example.com/trellis-hooks?[redacted]'))
    expect(await text('#callback-list')()).not.toContain('browser-credential')
    await thenLoad(() => page.click('#callback-once a:text("Done")'))
    expect(await page.locator('#callback-once').isHidden()).toBe(true)
    expect(await page.content()).not.toContain('browser-credential')
  }, 30_000)

  test('the audit pages render; signing out ends the session', async () => {
    for (const path of ['/p/Acme/e/production/activity', '/p/Acme/e/production/runs', '/p/Acme/e/production/notes', '/p/Acme/api-access']) {
      const response = await page.goto(path)
      expect({ path, status: response?.status() }).toEqual({ path, status: 200 })
    }
    await page.goto('/p/Acme/e/production/activity?type=read')
    expect(await text('table.activity tbody tr')()).toContain('alice@example.com')
    await page.screenshot({ path: join(dir.path, 'activity.png') })
    await page.click('button:text("Sign out")')
    await page.waitForURL('**/login')
    await page.goto('/account')
    expect(new URL(page.url()).pathname).toBe('/login')
  }, 30_000)

  test('first run, console only: setup link → project with an environment, a team, a collection and a record → a workflow published and its run watched live → a second person invited, signed in through the invitation, with a token of their own', async () => {
    const fresh = testEnv() // no user yet: serve prints the setup link
    const first = await startServe({ dataDir: fresh.dataDir, cwd: fresh.dataDir, env: processEnv(fresh) })
    // Links printed or shown name the configured base URL; the test talks to the port the server listens on.
    const local = (link: string) => `${first.url}${new URL(link).pathname}${new URL(link).search}`
    try {
      const link = /(http:\/\/\S+\/setup\?token=\S+)/.exec(await first.waitForOutput('/setup?token='))?.[1]
      expect(link).toBeDefined()
      const admin = await context.newPage()
      watch(admin)
      const load = (action: () => Promise<unknown>) => Promise.all([admin.waitForEvent('load'), action()])
      await admin.goto(local(link!))
      await admin.fill('input[name=email]', 'root@example.com')
      await admin.fill('input[name=username]', 'root')
      await admin.fill('input[name=password]', 'a-long-first-password')
      // The submit is held back a moment on its way (the real server answers it): the form shows it is working.
      let release = () => {}
      const held = new Promise<void>((resolve) => (release = resolve))
      await admin.route('**/setup', async (route) => {
        if (route.request().method() === 'POST') await held
        await route.continue()
      })
      await admin.click('button[type=submit]')
      await eventually('the busy button', async () => [await admin.textContent('#setup button'), await admin.isDisabled('#setup button')], ([label, disabled]) => label === 'Creating the administrator…' && disabled === true)
      expect(await admin.getAttribute('#setup', 'aria-busy')).toBe('true')
      release()
      await eventually('the setup confirmation', text('#message', admin), (t) => t.includes('Administrator root@example.com created'))
      await admin.unroute('**/setup')
      // The used link says so at once, instead of a form that fails on submit.
      const used = await context.newPage()
      watch(used)
      await used.goto(local(link!))
      expect(await used.textContent('h1')).toBe('This setup link does not work')
      expect(await used.locator('form').count()).toBe(0)
      await used.close()
      await load(() => admin.click('a:text("Sign in to the console")'))
      await admin.fill('input[name=email]', 'root@example.com')
      await admin.fill('input[name=password]', 'a-long-first-password')
      await Promise.all([admin.waitForURL(`${first.url}/`), admin.click('button[type=submit]')])

      // The empty instance shows the checklist, not a dead end.
      expect(await text('main', admin)()).toContain('Get started')
      await load(() => admin.click('.checklist a:text("Create a project")'))
      await admin.fill('#new-project input[name=name]', 'First')
      // A created project opens its settings, where its parts are added.
      await load(() => admin.click('#new-project button[type=submit]'))
      expect(new URL(admin.url()).pathname).toBe('/p/First/settings')
      expect(await text('#flash', admin)()).toContain('Project created')
      for (const [kind, name] of [['environments', 'production'], ['teams', 'Support'], ['collections', 'orders']] as const) {
        await admin.fill(`form.add-${kind} input`, name)
        await load(() => admin.click(`form.add-${kind} button[type=submit]`))
      }
      expect(await text('main', admin)()).toContain('orders')

      // A second person, invited: the link is shown once.
      await load(() => admin.click('header a:text("People")'))
      await admin.fill('#new-user input[name=email]', 'bob@example.com')
      await admin.fill('#new-user input[name=username]', 'Bob')
      await admin.click('#new-user button[type=submit]')
      const invitation = await eventually('the invitation link', text('#invitation-value', admin), (t) => t.includes('/invite?token='))
      expect(await admin.locator('#invitation-once').isVisible()).toBe(true)

      // Bob joins the project as a second admin, in team Support.
      await admin.goto(`${first.url}/p/First/settings`)
      await admin.selectOption('#add-member select[data-path=userId]', { label: 'bob@example.com' })
      await admin.selectOption('#add-member select[name=role]', 'admin')
      await load(() => admin.click('#add-member button[type=submit]'))
      await load(() => admin.click('tr[data-email="bob@example.com"] .add-to-team button[type=submit]'))
      expect(await text('tr[data-email="bob@example.com"]', admin)()).toContain('Support')

      // A record, through the form: bad JSON is named before anything is sent; an object is saved.
      await admin.goto(`${first.url}/p/First/e/production/t/Support/c/orders`)
      await admin.fill('#put-record input[data-path=recordId]', 'ord 1/a')
      await admin.fill('#put-record textarea[name=data]', '[1, 2]')
      await admin.click('#put-record button[type=submit]')
      await saidOnce(admin, '#put-record', 'textarea[name=data]', 'must be a JSON object')
      await admin.fill('#put-record textarea[name=data]', '{"status": "new", "amount": 12}')
      await load(() => admin.click('#put-record button[type=submit]'))
      await admin.click('a:text-is("ord 1/a")')
      expect(await text('#record-data', admin)()).toContain('"status": "new"')

      // A workflow, authored and published in the console, run on that record and watched live to its end.
      await admin.goto(`${first.url}/p/First/e/production/t/Support`)
      await admin.fill('#new-workflow input[name=workflowName]', 'Check')
      await admin.selectOption('#new-workflow select[name=collection]', 'orders')
      await admin.click('#new-workflow button[type=submit]')
      await admin.waitForURL('**/w/Check')
      const steps = [{ type: 'load' }, { type: 'update', set: { status: 'checked' } }, { type: 'wait', seconds: 1 }]
      await admin.fill('#workflow-editor textarea', JSON.stringify({ collection: 'orders', steps }, null, 2))
      await admin.click('#workflow-editor button[type=submit]')
      await eventually('the publication', text('.editor-result', admin), (t) => t.startsWith('Published v2. The webhook URL is unchanged; the page shows the new version.'))
      await admin.fill('#test-run input[name=recordId]', 'ord 1/a')
      await admin.click('#test-run button[type=submit]')
      await admin.waitForURL('**/runs/*')
      await admin.waitForLoadState('load')
      let navigations = 0
      admin.on('framenavigated', (frame) => {
        if (frame === admin.mainFrame()) navigations++
      })
      await eventually('the run page to say succeeded, by itself', text('#run-status', admin), (t) => t === 'succeeded', 30_000)
      expect(navigations).toBe(0)
      expect(await admin.locator('table.steps .step-status').allTextContents()).toEqual(['succeeded', 'succeeded', 'succeeded'])
      await admin.click('a:text-is("ord 1/a")')
      expect(await text('#record-data', admin)()).toContain('"status": "checked"')
      await admin.close()

      // Bob, in his own browser: the invitation link, a password, signed in, his project, his token.
      const bobContext = await browser.newContext({ baseURL: first.url })
      const bob = await bobContext.newPage()
      watch(bob)
      await bob.goto(local(invitation))
      expect(await text('main', bob)()).toContain('bob@example.com')
      await bob.fill('input[name=password]', 'bob-chose-this-password')
      await Promise.all([bob.waitForURL(`${first.url}/`), bob.click('button[type=submit]')])
      expect(await text('main table', bob)()).toContain('First')
      await bob.goto('/account')
      await bob.fill('#new-token input[name=name]', 'bob-cli')
      await bob.click('#new-token button[type=submit]')
      const token = await eventually('the new token', text('#token-value', bob), (t) => t.startsWith('trl_'))
      // Bob reads the project's notes with it.
      const notes = await fetch(`${first.url}/v1/project/First/environment/production/notes`, { headers: bearer(token) })
      expect(notes.status, await notes.clone().text()).toBe(200)
      // The link was single use.
      expect((await fetch(local(invitation))).status).toBe(404)
      await bobContext.close()
    } finally {
      await first.stop()
      fresh.cleanup()
    }
  }, 90_000)
})

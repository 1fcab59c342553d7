/**
 * Every console page in Chromium, at both SCREENS, signed in as an instance administrator
 * and as a plain member: no page's document is wider than its viewport, the header's menu opens and "Sign out" is
 * on screen, and axe-core finds no serious or critical violation (nor `empty-table-header`). The pages are the GET
 * routes of the console module itself, their parameters filled from the acme fixture: a new page is visited
 * without anyone adding it here, and a page with a parameter nobody fills fails the test until PARAMS has it. /docs
 * (Swagger UI from the binary) renders with no request outside the server and no serious accessibility problem.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { createDeps } from '../src/deps.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createMetrics } from '../src/lib/metrics.ts'
import type { Clock } from '../src/lib/clock.ts'
import { consoleModule } from '../src/modules/console/index.ts'
import { processEnv, repoRoot, runCli, type ServeProcess, startServe, testEnv, type TestEnv, until } from './helpers.ts'
import { openTaskOnRun, userId } from './support/acme.ts'
import { accessibilityProblems, browserAvailable, checkingEveryPage, countOf, eventually, launchBrowser, requireBrowser, SCREENS, sidewaysOverflow, textOf, thenLoad, watchPage } from './support/browser.ts'

requireBrowser('console-pages-browser')

interface Visitor {
  email: string
  password: string
  /** Path parameters of the console's routes, as this person's pages are reached. */
  params: Record<string, string>
}

/** alice: instance administrator and Acme admin (team Support); dave: a plain `user` of Acme in team Billing. */
const VISITORS: Record<string, Visitor> = {
  'instance administrator': {
    email: 'alice@example.com',
    password: 'alice-demo-pass-2026',
    params: { project: 'Acme', environment: 'production', team: 'Support', collection: 'orders', record: 'ord_1001', workflow: 'Refund order' },
  },
  member: {
    email: 'dave@example.com',
    password: 'dave-demo-pass-2026',
    params: { project: 'Acme', environment: 'production', team: 'Billing', collection: 'orders', record: 'ord_1001', workflow: 'Refund order' },
  },
}

/** A task's form with each kind of field the task page renders. */
const TASK_FORM = {
  type: 'object',
  properties: {
    amount: { type: 'number', minimum: 0, maximum: 500, title: 'Amount to refund', description: 'In euros' },
    reason: { type: 'string', enum: ['damaged', 'late', 'other'] },
    email: { type: 'string', format: 'email', maxLength: 100 },
    restock: { type: 'boolean', title: 'Put back in stock' },
  },
  required: ['amount'],
}

/** Pages answered without a session, and the query each needs. */
const SIGNED_OUT = ['/login', '/invite']

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []
/** Filled once the fixture exists: a run's id, an invitation's token. */
const extra: Record<string, string> = {}

/** The console's GET answers that are JSON, not pages: a relation input's suggestions. */
const JSON_ANSWERS = ['/p/:project/e/:environment/t/:team/c/:collection/ids']

/** Every GET page of the console module (its assets and JSON answers left out), e.g. `/p/:project/e/:environment/runs`. */
function consolePaths(): string[] {
  const deps = createDeps({ config: env.config, store: env.store, clock: env.clock as Clock, logger: silentLogger, secret: env.secret, metrics: createMetrics() })
  return consoleModule(deps)
    .routes.filter((route) => route.method === 'GET' && !route.path.startsWith('/console/') && !JSON_ANSWERS.includes(route.path))
    .map((route) => route.path)
}

function fill(path: string, params: Record<string, string>): string {
  const filled = path.replace(/:(\w+)/g, (_, name: string) => {
    const value = params[name] ?? extra[name]
    if (value === undefined) throw new Error(`${path}: no value for :${name} (add it to this test's params)`)
    return encodeURIComponent(value)
  })
  return filled === '/invite' ? `/invite?token=${encodeURIComponent(extra.invitation!)}` : filled
}

/**
 * Forms that would act silently or without asking: every form calling the API, sign-in and
 * sign-out aside, says what it did (data-done); every destructive one asks first (data-confirm).
 */
const FORM_PROBLEMS = `Array.from(document.querySelectorAll('form[data-api]')).flatMap((form) => {
  const what = (form.getAttribute('action') || '') + ' ' + (form.textContent || '').trim().slice(0, 40)
  const found = []
  if (!form.getAttribute('action').startsWith('/auth/') && form.dataset.done === undefined) found.push('no success message: ' + what)
  const destructive = form.dataset.method === 'DELETE' || /revoke|remove|disable|regenerate|delete|deactivate|cancel/i.test(form.querySelector('button')?.textContent || '')
  if (destructive && form.dataset.confirm === undefined) found.push('destructive without confirmation: ' + what)
  return found
})`

/** The page's problems at this screen; on a phone with the header's menu opened first. */
async function checkPage(page: Page, path: string, screen: keyof typeof SCREENS, signedIn: boolean): Promise<string[]> {
  const response = await page.goto(path)
  const found: string[] = []
  if (!response || response.status() >= 500) found.push(`answered ${response?.status()}`)
  if (signedIn && screen === 'phone') {
    await page.click('header details.menu > summary')
    const signOut = page.locator('header button:text("Sign out")')
    const box = await signOut.boundingBox()
    if (!(await signOut.isVisible()) || !box || box.x < 0 || box.x + box.width > SCREENS.phone.width) found.push(`"Sign out" is not on screen: ${JSON.stringify(box)}`)
  }
  found.push(...(await page.evaluate<string[]>(FORM_PROBLEMS)))
  const overflow = await sidewaysOverflow(page)
  if (overflow > 0) found.push(`the document is ${overflow} px wider than the viewport`)
  found.push(...(await accessibilityProblems(page)))
  return found.map((problem) => `${screen} ${path}: ${problem}`)
}

/**
 * A test's time limit here. Alone on this 2-core machine the longest takes 22 s (/docs 9 s); in npm test's parallel
 * part, beside three other files, /docs once took more than 60 s. A limit that runs out fails the tests after it too:
 * bun then kills the processes the file started, its server among them. A hang still fails, after three minutes.
 */
const PAGE_TEST_MS = 180_000

describe.skipIf(!browserAvailable)('every console page, in Chromium at both screens', () => {
  beforeAll(async () => {
    env = testEnv()
    const cli = (args: string[]) => runCli([...args, '--data', env.dataDir], { env: processEnv(env) })
    expect((await cli(['apply', '-f', join(repoRoot, 'examples/acme.yaml')])).code).toBe(0)
    expect((await cli(['user', 'instance-admin', '--email', 'alice@example.com'])).code).toBe(0)
    server = await startServe({ dataDir: env.dataDir, cwd: env.dataDir, env: processEnv(env) })
    browser = await launchBrowser()
  }, PAGE_TEST_MS)

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
    env?.cleanup()
  })

  for (const [who, visitor] of Object.entries(VISITORS)) {
    test(`signed in as ${who}`, async () => {
      const context = await checkingEveryPage(await browser.newContext({ baseURL: server.url }))
      const page = await context.newPage()
      watchPage(page, problems, () => server.url)
      await page.goto('/login')
      await page.fill('input[name=email]', visitor.email)
      await page.fill('input[name=password]', visitor.password)
      await Promise.all([page.waitForURL(`${server.url}/`), page.click('main button[type=submit]')])
      // What the pages show: a run on the record, a token of one's own; the administrator also makes an invitation.
      const run = await page.request.post('/v1/project/Acme/environment/production/workflow-runs', { data: { workflowName: 'Refund order', teamName: 'Support', recordId: 'ord_1001' } })
      if (run.ok()) extra.runId = ((await run.json()) as { runId: string }).runId
      // A task on that run, with a form, for the inbox and the task page (Billing decides: dave sees its form).
      // Written beside the serving process, whose writes may hold the file's lock a moment: tried again while busy.
      extra.taskId ??= await until('the task written beside the server', () =>
        openTaskOnRun(env.store, env.clock, extra.runId!, { teamIds: [], userIds: [userId(env.store, 'dave')], form: JSON.stringify(TASK_FORM) }).catch((error: unknown) => {
          if ((error as { code?: string }).code === 'database_busy') return null
          throw error
        }),
      )
      expect((await page.request.post('/v1/account/tokens', { data: { name: `${visitor.email} cli`, projectName: 'Acme' } })).status()).toBe(201)
      if (who === 'instance administrator') {
        const invited = await page.request.post('/v1/instance/users', { data: { email: 'erin@example.com', username: 'erin' } })
        expect(invited.status()).toBe(201)
        extra.invitation = new URL(((await invited.json()) as { invitation: { url: string } }).invitation.url).searchParams.get('token')!
      }
      const found: string[] = []
      for (const path of consolePaths().filter((p) => !SIGNED_OUT.includes(p))) {
        for (const screen of Object.keys(SCREENS) as (keyof typeof SCREENS)[]) {
          await page.setViewportSize(SCREENS[screen])
          found.push(...(await checkPage(page, fill(path, visitor.params), screen, true)))
        }
      }
      await context.close()
      expect(found).toEqual([])
      expect(problems).toEqual([])
    }, 180_000)
  }

  test('feedback: a new token and a new person are in their lists while their shown-once value is on screen; success in the status line; an error beside its field', async () => {
    const context = await browser.newContext({ baseURL: server.url })
    const page = await context.newPage()
    watchPage(page, problems, () => server.url)
    const text = (selector: string) => textOf(page, selector)
    await page.goto('/login')
    await page.fill('input[name=email]', 'alice@example.com')
    await page.fill('input[name=password]', 'alice-demo-pass-2026')
    await Promise.all([page.waitForURL(`${server.url}/`), page.click('main button[type=submit]')])

    await page.goto('/account')
    // "These scopes" with none ticked: the API's 400 names `scopes`; the message sits after the boxes, marked invalid.
    await page.check('#new-token input[name=preset][value=""]')
    await page.fill('#new-token input[name=name]', 'feedback token')
    await page.click('#new-token button[type=submit]')
    await eventually('the scopes error beside the boxes', text('#new-token fieldset + .field-error'), (t) => t.length > 0)
    expect(await page.getAttribute('#new-token input[name=scopes]', 'aria-invalid')).toBe('true')
    await page.check('#new-token input[name=preset][value="read-only"]')
    await page.click('#new-token button[type=submit]')
    await page.locator('#token-once').waitFor({ state: 'visible' })
    await eventually('the new token in the list', countOf(page, 'table.tokens tr[data-token="feedback token"]'), (n) => n === 1)
    expect(await page.locator('#token-once').isVisible()).toBe(true)
    expect(await text('#flash')()).toContain('Token generated')
    expect(await page.locator('#new-token .field-error').count()).toBe(0) // cleared by the next try

    await page.goto('/admin/users')
    await page.fill('#new-user input[name=email]', 'frank@example.com')
    await page.fill('#new-user input[name=username]', 'frank')
    await page.click('#new-user button[type=submit]')
    await page.locator('#invitation-once').waitFor({ state: 'visible' })
    await eventually('the invited person in the list', countOf(page, 'tr[data-email="frank@example.com"]'), (n) => n === 1)
    expect(await text('tr[data-email="frank@example.com"]')()).toContain('invited')
    expect(await text('#instance-log')()).toContain('frank@example.com')

    await page.goto('/p/Acme/settings')
    await page.fill('form.add-environments input', ' qa')
    await page.click('form.add-environments button[type=submit]')
    await eventually('the name error beside its field', text('form.add-environments .field-error'), (t) => t.includes('spaces'))
    await page.fill('form.add-environments input', 'qa')
    await thenLoad(page, () => page.click('form.add-environments button[type=submit]'))
    expect(await text('#flash')()).toBe('Environment added.')
    expect(await text('main')()).toContain('qa')
    // The permission levels are explained where they are chosen.
    expect(await page.getAttribute('#add-member select[name=role]', 'aria-describedby')).toBe('permission-levels')
    expect(await text('#permission-levels')()).toContain('manages the project')
    await context.close()
    expect(problems).toEqual([])
  }, PAGE_TEST_MS)

  test('/docs renders the API reference (Swagger UI from the binary, no CDN) with no serious accessibility problem', async () => {
    const context = await browser.newContext({ baseURL: server.url })
    const docs = await context.newPage()
    watchPage(docs, problems, () => server.url)
    const outside: string[] = []
    docs.on('request', (request) => {
      if (!request.url().startsWith(server.url)) outside.push(request.url())
    })
    await docs.goto('/docs')
    await docs.locator('.swagger-ui .opblock').first().waitFor({ state: 'visible', timeout: PAGE_TEST_MS - 30_000 })
    expect(await docs.locator('.opblock-summary-path').count()).toBeGreaterThan(20)
    expect(outside.filter((url) => !url.startsWith('data:'))).toEqual([])
    // No serious or critical accessibility problem, folded, with an operation open, and on a phone.
    expect(await accessibilityProblems(docs)).toEqual([])
    await docs.locator('.opblock-summary-control').first().click()
    await docs.locator('.opblock.is-open .opblock-body').first().waitFor({ state: 'visible' })
    expect(await accessibilityProblems(docs)).toEqual([])
    await docs.setViewportSize({ width: 390, height: 844 })
    expect(await accessibilityProblems(docs)).toEqual([])
    await context.close()
    expect(problems).toEqual([])
  }, PAGE_TEST_MS)

  test('signed out: the sign-in and invitation pages', async () => {
    expect(extra.invitation).toBeDefined()
    const context = await checkingEveryPage(await browser.newContext({ baseURL: server.url }))
    const page = await context.newPage()
    watchPage(page, problems, () => server.url)
    const found: string[] = []
    for (const path of SIGNED_OUT) {
      for (const screen of Object.keys(SCREENS) as (keyof typeof SCREENS)[]) {
        await page.setViewportSize(SCREENS[screen])
        found.push(...(await checkPage(page, fill(path, {}), screen, false)))
      }
    }
    await context.close()
    expect(found).toEqual([])
    expect(problems).toEqual([])
  }, PAGE_TEST_MS)
})

/**
 * Authoring a workflow in the console, in a real browser: Debian's Chromium driven by
 * playwright-core against `trellis serve` in a real process over examples/acme.yaml plus a new project admin. At a
 * laptop's and a phone's size, as a person would: create a workflow on a team's page, see a JSON mistake and a bad
 * step each marked at their line, publish v2 (the webhook URL unchanged), publish it again (unchanged), compare
 * v1 → v2, start a test run on a record and watch its page until it succeeds — no page wider than the screen, no
 * script error, no Content-Security-Policy violation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import YAML from 'yaml'
import { processEnv, repoRoot, runCli, type ServeProcess, startServe, testEnv, type TestEnv } from './helpers.ts'
import { accessibilityProblems, browserAvailable, countOf, eventually, launchBrowser, requireBrowser, SCREENS, sidewaysOverflow, textOf, thenLoad, watchPage } from './support/browser.ts'

requireBrowser('console-authoring-browser')

const NORA = { email: 'nora@example.com', password: 'nora-new-admin-2026' }

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []

/** The definition as typed into the editor: two-space JSON, so the line of each step is known. */
const definition = (steps: unknown[]) => JSON.stringify({ collection: 'orders', steps }, null, 2)

/** Lines (1-based) of `text` holding `fragment`. */
const linesWith = (text: string, fragment: string) => text.split('\n').flatMap((line, i) => (line.includes(fragment) ? [i + 1] : []))

async function noSidewaysScroll(page: Page, where: string) {
  expect({ where, overflow: await sidewaysOverflow(page) }).toEqual({ where, overflow: 0 })
}

describe.skipIf(!browserAvailable)('authoring a workflow in Chromium', () => {
  beforeAll(async () => {
    env = testEnv()
    // Acme, and Nora: a person just made an admin of Acme and a member of Support, who has authored nothing yet.
    const document = YAML.parse(readFileSync(join(repoRoot, 'examples/acme.yaml'), 'utf8'))
    document.users.push({ email: NORA.email, username: 'nora', password: NORA.password })
    const acme = document.projects.find((p: { name: string }) => p.name === 'Acme')
    acme.members.push({ user: NORA.email, role: 'admin' })
    acme.teams.find((t: { name: string }) => t.name === 'Support').members.push(NORA.email)
    const file = join(env.dataDir, 'acme-with-nora.yaml')
    writeFileSync(file, YAML.stringify(document))
    const applied = await runCli(['apply', '-f', file, '--data', env.dataDir], { env: processEnv(env) })
    expect(applied.code).toBe(0)
    server = await startServe({ dataDir: env.dataDir, cwd: env.dataDir, env: processEnv(env) })
    browser = await launchBrowser()
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
    env?.cleanup()
    expect(problems).toEqual([])
  })

  for (const [screen, viewport] of Object.entries(SCREENS)) {
    test(`at ${viewport.width}×${viewport.height}: create, edit, see errors at their lines, publish v2, compare, test-run`, async () => {
      const context = await browser.newContext({ baseURL: server.url, viewport })
      const page = await context.newPage()
      watchPage(page, problems)
      const text = (selector: string) => textOf(page, selector)
      const name = `Check order ${screen}`
      const record = screen === 'laptop' ? 'ord_1002' : 'ord_1003'

      await page.goto('/p/Acme/e/production/t/Support')
      await page.fill('input[name=email]', NORA.email)
      await page.fill('input[name=password]', NORA.password)
      await page.click('button[type=submit]')
      await page.waitForURL('**/p/Acme/e/production/t/Support')
      await noSidewaysScroll(page, 'team page')

      // Create: a name taken by another workflow is refused on the form; a new one opens its page at v1.
      await page.fill('#new-workflow input[name=workflowName]', 'Refund order')
      await page.click('#new-workflow button[type=submit]')
      await eventually('the name-taken error', text('#new-workflow .form-error'), (t) => t.includes('already exists'))
      await page.fill('#new-workflow input[name=workflowName]', name)
      await page.selectOption('#new-workflow select[name=collection]', 'orders')
      await page.click('#new-workflow button[type=submit]')
      await page.waitForURL(`**/w/${encodeURIComponent(name)}`)
      expect(await text('h1')()).toBe(name)
      expect(await text('#workflow-summary')()).toContain('Version v1 is active, on orders.')
      expect(await text('.steps-list')()).toContain('Load the record')
      expect(await page.inputValue('#workflow-editor textarea')).toBe(definition([{ type: 'load' }]))
      await noSidewaysScroll(page, 'new workflow page')

      // "Add a step": the type's template appended, the text rewritten, the new step selected.
      await page.selectOption('#step-template', { label: 'update' })
      await page.click('button[data-add-step]')
      const added = await page.inputValue('#workflow-editor textarea')
      expect(JSON.parse(added).steps.map((s: { type: string }) => s.type)).toEqual(['load', 'update'])
      expect(await page.evaluate<string>('(() => { const t = document.querySelector("#workflow-editor textarea"); return t.value.slice(t.selectionStart, t.selectionEnd) })()')).toBe('    {')

      // Not JSON: marked at its line before anything is sent.
      const broken = definition([{ type: 'load' }]).replace('"load"', '"load",')
      await page.fill('#workflow-editor textarea', broken)
      await page.click('#workflow-editor button[type=submit]')
      const brokenLine = linesWith(broken, '"load",')[0]!
      // The comma's own line and column, computed from the text (Chromium's message names no place for it).
      const commaColumn = broken.split('\n')[brokenLine - 1]!.indexOf('"load",') + '"load"'.length + 1
      await eventually('the syntax error at its line', text('#editor-problems'), (t) => t.startsWith(`Line ${brokenLine}: Not valid JSON at line ${brokenLine}, column ${commaColumn}: a comma before '}'`))
      // A missing comma between two steps: the place where it belongs.
      const missing = definition([{ type: 'load' }, { type: 'load' }]).replace(/\},\n(\s*)\{/, '}\n$1{')
      await page.fill('#workflow-editor textarea', missing)
      await page.click('#workflow-editor button[type=submit]')
      const missingLine = linesWith(missing, '{')[2]!
      await eventually('the missing comma at its line', text('#editor-problems'), (t) => t.startsWith(`Line ${missingLine}: Not valid JSON at line ${missingLine}, column 5: '{' where ',' or ']' belongs`))

      // A bad step: the API's error, beside the line of the field it names.
      const bad = definition([{ type: 'load' }, { type: 'update', set: { checked: true } }, { type: 'wait', seconds: 0 }])
      await page.fill('#workflow-editor textarea', bad)
      await page.click('#workflow-editor button[type=submit]')
      const secondsLine = linesWith(bad, '"seconds": 0')[0]!
      await eventually('the step error at its line', text('#editor-problems'), (t) => t.includes(`Line ${secondsLine}: steps[2].seconds`) && t.includes('between 1 and'))
      expect(await page.locator('.gutter .bad').getAttribute('data-line')).toBe(String(secondsLine))
      expect(await page.locator('.gutter .bad').textContent()).toBe(`● ${secondsLine}`)
      await page.click(`#editor-problems button:text("Line ${secondsLine}")`)
      expect(await page.evaluate<string>('(() => { const t = document.querySelector("#workflow-editor textarea"); return t.value.slice(t.selectionStart, t.selectionEnd) })()')).toContain('"seconds": 0')

      // Fixed: v2, the webhook URL unchanged; the same text again is unchanged.
      const good = bad.replace('"seconds": 0', '"seconds": 1')
      await page.fill('#workflow-editor textarea', good)
      await page.click('#workflow-editor button[type=submit]')
      await eventually('the publication', text('.editor-result'), (t) => t.startsWith('Published v2. The webhook URL is unchanged.'))
      expect(await countOf(page, '.gutter .bad')()).toBe(0)
      expect(await text('#editor-problems')()).toBe('')
      await page.click('#workflow-editor button[type=submit]')
      await eventually('unchanged', text('.editor-result'), (t) => t.startsWith('Unchanged: v2 is still the active version'))

      // The diff v1 → v2, from the link the publication offered.
      await page.fill('#workflow-editor textarea', good.replace('"seconds": 1', '"seconds": 2'))
      await page.click('#workflow-editor button[type=submit]')
      await eventually('v3', text('.editor-result'), (t) => t.startsWith('Published v3.'))
      await thenLoad(page, () => page.click('.editor-result a:text("Compare v2 → v3")'))
      expect(await text('#diff')()).toBe('v2 → v3: 2 lines changed')
      expect(await text('.diff-removed')()).toContain('"seconds": 1')
      expect(await text('.diff-added')()).toContain('"seconds": 2')
      // Any two: v1 → v3 through the compare form.
      await page.selectOption('#compare select[name=from]', '1')
      await page.selectOption('#compare select[name=to]', '3')
      await thenLoad(page, () => page.click('#compare button[type=submit]'))
      expect(await text('#diff')()).toMatch(/^v1 → v3: \d+ lines changed$/)
      expect(await page.locator('.diff-added').allTextContents()).toContainEqual(expect.stringContaining('"type": "wait"'))
      expect(await text('#workflow-summary')()).toContain('Version v3 is active')
      expect(await text('.steps-list')()).toContain('Wait 2 s')
      expect(await countOf(page, 'table.versions tbody tr')()).toBe(3)
      await noSidewaysScroll(page, 'workflow page with a diff')
      // The diff's box scrolls: it can be focused (axe: scrollable-region-focusable), as every state of the page is checked.
      expect(await page.getAttribute('pre.diff', 'tabindex')).toBe('0')
      expect(await accessibilityProblems(page)).toEqual([])

      // A test run on a chosen record: its page, reloaded until the run succeeded.
      await page.fill('#test-run input[name=recordId]', record)
      await page.click('#test-run button[type=submit]')
      await page.waitForURL('**/runs/*')
      expect(await text('h1')()).toBe(`Run of ${name}`)
      await eventually(
        'the run to succeed',
        async () => {
          await page.reload()
          return (await page.locator('#run-status').textContent()) ?? ''
        },
        (status) => status.includes('succeeded'),
        20_000,
      )
      expect(await countOf(page, 'table.steps tbody tr')()).toBe(3)
      await noSidewaysScroll(page, 'run page')
      await page.goBack()
      await page.reload()
      expect(await text('table.runs')()).toContain(record)
      await context.close()
    }, 90_000)
  }
})

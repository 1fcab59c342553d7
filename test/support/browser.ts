/**
 * What every browser test shares: Debian's Chromium through playwright-core (CHROMIUM_PATH, else
 * `/usr/bin/chromium-headless-shell` when installed, else `/usr/bin/chromium`),
 * the flags this machine's closed network needs, the problems a page must not have (script errors, CSP violations,
 * failed page resources) and polling helpers for pages that update after fetches and navigations.
 *
 * Without Chromium a browser test file is skipped with a warning (`describe.skipIf(!browserAvailable)`), unless
 * TRELLIS_REQUIRE_BROWSER=1 (as in .ci/run), where a missing browser fails it.
 */
import { expect } from 'bun:test'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { processEnv, repoRoot, runCli, type ServeProcess, startServe, TEST_STORE, testEnv, type TestEnv } from '../helpers.ts'
import type { AcmeDocument } from './acme.ts'

/**
 * Chromium's headless shell (Debian's `chromium-headless-shell`) when installed: the same Blink without the full
 * browser's UI process, about a tenth less CPU per browser file than `chromium --headless` (measured on
 * console-tasks-browser: 31 s against 34 s, Chromium's processes counted). The browser tests run on either.
 */
const HEADLESS_SHELL = '/usr/bin/chromium-headless-shell'
export const CHROMIUM = process.env.CHROMIUM_PATH ?? (existsSync(HEADLESS_SHELL) ? HEADLESS_SHELL : '/usr/bin/chromium')
export const browserAvailable = existsSync(CHROMIUM)

/** Throws (CI) or warns (a laptop without Chromium) once per test file; call at the file's top level. */
export function requireBrowser(file: string) {
  if (browserAvailable) return
  if (process.env.TRELLIS_REQUIRE_BROWSER === '1') throw new Error(`Chromium not found at ${CHROMIUM} (apt-get install chromium)`)
  console.warn(`${file}: SKIPPED, no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`)
}

// The flags this machine's closed network needs (no background fetches, no QUIC), headless as root.
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
}

/** What a console browser test drives: `trellis serve` in a real process over examples/acme.yaml (applied by the CLI) on a fresh test env, and Chromium. */
export interface ServedAcme {
  env: TestEnv
  server: ServeProcess
  browser: Browser
}

/**
 * `trellis serve` over examples/acme.yaml (or `document`, Acme extended), `settings` added to its environment, and
 * Chromium. `seed` writes what else the test needs before the server starts (on SQLite, a write of the test's own
 * beside a running server's may find the file locked).
 */
export async function serveAcme(document?: AcmeDocument, settings: Record<string, string> = {}, seed?: (env: TestEnv) => Promise<void>): Promise<ServedAcme> {
  const env = testEnv()
  // Another document (Acme extended): written as JSON, which the apply file reads as YAML.
  const file = document === undefined ? join(repoRoot, 'examples/acme.yaml') : join(env.dataDir, 'acme.json')
  if (document !== undefined) writeFileSync(file, JSON.stringify(document))
  const applied = await runCli(['apply', '-f', file, '--data', env.dataDir], { env: processEnv(env) })
  if (applied.code !== 0) throw new Error(`apply failed: ${applied.stderr}`)
  await seed?.(env)
  const server = await startServe({ dataDir: env.dataDir, cwd: env.dataDir, env: { ...processEnv(env), ...settings } })
  return { env, server, browser: await launchBrowser() }
}

/** Closes what `serveAcme` started (as far as it got). */
export async function stopServed(served: Partial<ServedAcme>): Promise<void> {
  await served.browser?.close()
  await served.server?.stop()
  served.env?.cleanup()
}

/** The two screens every console task is checked at: a laptop and a phone. */
export const SCREENS = {
  laptop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const

/**
 * Records a page's problems into `problems`: script errors, console errors, and (unless `ownOrigin` limits it to
 * Trellis's pages) failed page resources. A 4xx answer to the console's own fetch (a wrong password, a rate of 0)
 * is expected: Chromium logs it as "Failed to load resource", so those console lines are left out and resources
 * are judged by their responses instead.
 */
export function watchPage(page: Page, problems: string[], ownOrigin?: () => string) {
  const ours = () => ownOrigin === undefined || page.url().startsWith(ownOrigin())
  page.on('pageerror', (error) => problems.push(`page error on ${page.url()}: ${error.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error' && ours() && !message.text().startsWith('Failed to load resource')) problems.push(`console error on ${page.url()}: ${message.text()}`)
  })
  if (ownOrigin !== undefined) return
  page.on('response', (response) => {
    const type = response.request().resourceType()
    if (type !== 'fetch' && type !== 'xhr' && type !== 'eventsource' && response.status() >= 400) problems.push(`${response.status()} for ${type} ${response.url()}`)
  })
}

/** Polls `read` until `ok` holds; fails naming `what` and the last value. */
export async function eventually<T>(what: string, read: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    let value: T | undefined
    try {
      value = await read()
      if (ok(value)) return value
    } catch {
      // navigating: the element is not there yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(value)}`)
    await Bun.sleep(100)
  }
}

/**
 * The first match's text (for `eventually`, and read once right after a load): waits up to 5 s for the element, what
 * a page needs to appear beside three other test processes' browsers (1 s was missed there).
 */
export const textOf = (page: Page, selector: string) => async () => (await page.locator(selector).first().textContent({ timeout: 5_000 })) ?? ''
/** How many elements match (for `eventually`). */
export const countOf = (page: Page, selector: string) => () => page.locator(selector).count()

/** Runs a click whose form reloads or leaves the page, and waits for the next page to load. */
export async function thenLoad(page: Page, action: () => Promise<unknown>) {
  await Promise.all([page.waitForEvent('load'), action()])
}

/**
 * A new page of `context` signed in through the login form as an Acme user (`{name}@example.com` with its demo
 * password, examples/acme.yaml), landed on `next`; its problems go to `problems`.
 */
export async function signInAs(context: BrowserContext, name: string, next: string, problems: string[]): Promise<Page> {
  const page = await context.newPage()
  watchPage(page, problems)
  await page.goto(`/login?next=${encodeURIComponent(next)}`)
  await page.fill('input[name=email]', `${name}@example.com`)
  await page.fill('input[name=password]', `${name}-demo-pass-2026`)
  await thenLoad(page, () => page.click('form.login button[type=submit]'))
  expect(new URL(page.url()).pathname).toBe(next)
  return page
}

/** How much wider than its viewport the page's document is (0: nothing scrolls sideways). */
export async function sidewaysOverflow(page: Page): Promise<number> {
  // A string, evaluated in the page (this project's TypeScript has no DOM types).
  return page.evaluate<number>('Math.max(0, document.documentElement.scrollWidth - window.innerWidth)')
}

/**
 * Whether this pass checks the markup of the pages its flows reach (no sideways scroll, axe-core): on SQLite. A page's
 * markup is the console's rendering of what the API answers, the same on both stores, so the PostgreSQL pass runs the
 * same flows to the same states and checks what the store decides (what is listed, saved, refused), and leaves the two
 * markup checks of those states to the SQLite pass, where they run at every point these files call them. axe-core is
 * much of a browser file's CPU (about a second per check, mostly Chromium's); console-pages-browser, which checks
 * every page's markup, is in the SQLite pass alone for the same reason.
 */
export const checksMarkup = TEST_STORE === 'sqlite'

/** Fails unless the page is no wider than its viewport (naming its URL); on SQLite (`checksMarkup`). */
export async function noSidewaysScroll(page: Page): Promise<void> {
  if (!checksMarkup) return
  expect({ url: page.url(), overflow: await sidewaysOverflow(page) }).toEqual({ url: page.url(), overflow: 0 })
}

/** Marks the page's document: still marked later (`stayed`) means it was never reloaded nor left. */
export const mark = (page: Page) => page.evaluate('window.__stayed = true')
export const stayed = (page: Page) => page.evaluate<boolean>('window.__stayed === true')

const AXE = readFileSync(join(repoRoot, 'node_modules/axe-core/axe.min.js'), 'utf8')

interface Violation {
  id: string
  impact: string | null
  help: string
  nodes: { target: string[] }[]
}

/**
 * axe-core's serious and critical violations, and every empty-table-header, on the page as it is now; none looked for
 * on PostgreSQL (`checksMarkup`).
 */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  if (!checksMarkup) return []
  // Evaluated, not added as a <script>: the console's CSP refuses inline scripts (as it should). Already there in a
  // context that checks every page (`checkingEveryPage`).
  if (!(await page.evaluate<boolean>('typeof axe === "object"'))) await page.evaluate(AXE)
  const result = await page.evaluate<{ violations: Violation[] }>('axe.run(document, { resultTypes: ["violations"] })')
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical' || v.id === 'empty-table-header')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join(', ')}`)
}

/**
 * `context`, with axe-core run in each document it loads from now on (on SQLite, `checksMarkup`): for a context whose
 * every page `accessibilityProblems` checks. An init script costs a page about a third of what evaluating axe-core at
 * the check does (a 500 KB script sent over the DevTools protocol and compiled anew each time), and a page that is not
 * checked pays it too.
 */
export async function checkingEveryPage(context: BrowserContext): Promise<BrowserContext> {
  if (checksMarkup) await context.addInitScript({ content: AXE })
  return context
}

/**
 * The two checks every state a browser test reaches passes, at either screen: the page is no wider than its viewport,
 * and axe-core finds no serious or critical problem in it (both naming the page's URL); on SQLite (`checksMarkup`).
 */
export async function pageIsSound(page: Page): Promise<void> {
  if (!checksMarkup) return
  await noSidewaysScroll(page)
  expect({ url: page.url(), problems: await accessibilityProblems(page) }).toEqual({ url: page.url(), problems: [] })
}

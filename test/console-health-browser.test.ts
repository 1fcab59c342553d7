/**
 * Workflow health in a real browser (Chromium via playwright-core) against `trellis serve` over Acme plus one workflow
 * with 200 runs of mixed outcomes (and a few open tasks), at 1280×800 and 390×844: the workflow's health page, for the
 * last day and the last week (switched by its links), shows the counts, failure rate and percentiles the API's JSON
 * answers at the same time, its chart's table the same counts per bucket; the environment's health page lists the
 * workflow with the same counts. Nothing scrolls sideways; axe-core finds no serious or critical problem on any of
 * these pages, the chart's table opened or not; no page has a script error.
 *
 * The runs are written before the server starts (on SQLite a write beside a running server may find the file locked).
 * The server runs on the real clock, so the runs are written at times counted back from the real time of the seeding,
 * each half a bucket away from a bucket's edge: the seconds between the seeding and the pages' and the API's reads
 * never move a run into another bucket or out of the window.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUIDv7 } from 'bun'
import type { Browser, Page } from 'playwright-core'
import { insertRun } from '../src/db/queue.ts'
import { writeNow } from '../src/db/write.ts'
import { RUN_STATUSES } from '../src/lib/run-statuses.ts'
import { elapsed } from '../src/modules/console/runs.ts'
import { execute, type ServeProcess, type TestEnv } from './helpers.ts'
import { acmeDocument, acmeProject, openTaskOnRun, runBaseOf } from './support/acme.ts'
import { accessibilityProblems, browserAvailable, noSidewaysScroll, requireBrowser, SCREENS, serveAcme, signInAs, stopServed, textOf, thenLoad } from './support/browser.ts'

requireBrowser('console-health-browser')

type Body = Record<string, any>

const WORKFLOW = 'Health check'
const HEALTH_PAGE = `/p/Acme/e/production/t/Support/w/${encodeURIComponent(WORKFLOW)}/health`
const HEALTH_API = `/v1/project/Acme/environment/production/team/Support/workflows/${encodeURIComponent(WORKFLOW)}/health`
const ENVIRONMENT_PAGE = '/p/Acme/e/production/health'
const HOUR = 3_600_000
const RUNS = 200
/** The mix of outcomes, one run in turn each: mostly succeeded, some failed and cancelled, a few still active. */
const OUTCOMES = ['succeeded', 'succeeded', 'failed', 'succeeded', 'cancelled', 'succeeded', 'failed', 'succeeded', 'queued', 'succeeded', 'running', 'waiting'] as const

let env: TestEnv
let server: ServeProcess
let browser: Browser
const problems: string[] = []

/** Run `i`'s age: the first 150 in the last day, the rest over the week, each half a bucket from a bucket's edge. */
const ageOf = (i: number) => (i < 150 ? ((i % 23) + 0.5) * HOUR : ((i % 6) + 1.5) * 24 * HOUR)

async function seedRuns(): Promise<void> {
  const now = Date.now()
  const base = runBaseOf(env.store, WORKFLOW, 'alice')
  // Oldest first: an insert's createdAt follows the environment's newest run.
  const order = Array.from({ length: RUNS }, (_, i) => i).sort((a, b) => ageOf(b) - ageOf(a))
  for (const i of order) {
    const id = randomUUIDv7()
    const status = OUTCOMES[i % OUTCOMES.length]!
    const createdAt = now - ageOf(i)
    await writeNow(env.store, () => insertRun({ ...base, id, recordId: `health-${i}`, createdAt }))
    const ms = 50 + ((i * 37) % 900)
    const ran = status !== 'queued' && status !== 'cancelled'
    const finished = status === 'succeeded' || status === 'failed' || status === 'cancelled'
    // Active runs stay as they are: never due, their lease far ahead (the server's executor leaves them alone).
    execute(
      env.store,
      'UPDATE runs SET status = ?, started_at = ?, finished_at = ?, available_at = ?, lease_owner = ?, lease_expires_at = ? WHERE id = ?',
      status, ran ? createdAt + 10 : null, finished ? createdAt + 10 + ms : null, now + 24 * HOUR, status === 'running' ? 'elsewhere' : null, status === 'running' ? now + 24 * HOUR : null, id,
    )
    if (ran) {
      execute(env.store, "INSERT INTO run_steps (run_id, step_index, name, type, status, attempts, started_at, finished_at) VALUES (?, 0, 'load', 'load', 'succeeded', 1, ?, ?)", id, createdAt + 10, createdAt + 20)
      if (finished) {
        execute(env.store, "INSERT INTO run_steps (run_id, step_index, name, type, status, attempts, started_at, finished_at) VALUES (?, 1, 'notify', 'http', ?, 1, ?, ?)", id, status, createdAt + 20, createdAt + 10 + ms)
      }
    }
    if (status === 'waiting' && Math.floor(i / OUTCOMES.length) % 2 === 0) await openTaskOnRun(env.store, { now: () => createdAt + 30 }, id, { stepIndex: 1, stepName: 'approve', title: `Approve ${i}` })
  }
}

/** The API's answer, with the page's session. */
async function apiHealth(page: Page, path: string): Promise<Body> {
  const response = await page.request.get(path)
  expect(response.status()).toBe(200)
  return (await response.json()) as Body
}

/** The figures and counts the page shows, and its chart table's totals per bucket and status. */
async function shown(page: Page) {
  const figure = (name: string) => textOf(page, `[data-figure="${name}"]`)()
  const counts: Record<string, number> = {}
  for (const status of [...RUN_STATUSES, 'total']) counts[status] = Number(await textOf(page, `table.health-statuses td[data-status="${status}"]`)())
  // A string, evaluated in the page (this project's TypeScript has no DOM types).
  const buckets = await page.evaluate<number[][]>('[...document.querySelectorAll("table.health-buckets tbody tr")].map((row) => [...row.querySelectorAll("td")].slice(1).map((cell) => Number(cell.textContent)))')
  return {
    total: Number(await figure('total')),
    failed: Number(await figure('failed')),
    failureRate: await figure('failure-rate'),
    p50: await figure('p50'),
    p95: await figure('p95'),
    openTasks: Number(await figure('open-tasks')),
    counts,
    buckets,
  }
}

/** What the page should show for the API's answer. */
function expected(api: Body) {
  return {
    total: api.total,
    failed: api.counts.failed,
    failureRate: `${(api.failureRate * 100).toFixed(1)} %`,
    p50: elapsed(api.duration.p50Ms),
    p95: elapsed(api.duration.p95Ms),
    openTasks: api.openTasks.count,
    counts: { ...api.counts, total: api.total },
    buckets: api.buckets.map((bucket: Body) => [...RUN_STATUSES.map((status) => bucket.counts[status]), bucket.total]),
  }
}

describe.skipIf(!browserAvailable)('workflow health in Chromium', () => {
  beforeAll(async () => {
    const document = acmeDocument({ passwords: true })
    acmeProject(document).workflows!.push({ name: WORKFLOW, environment: 'production', team: 'Support', collection: 'orders', steps: [{ type: 'load' }, { type: 'update', name: 'notify', set: { status: 'seen' } }] })
    ;({ env, server, browser } = await serveAcme(document, {}, async (seeded) => {
      env = seeded
      await seedRuns()
    }))
  }, 120_000)

  afterAll(async () => {
    await stopServed({ env, server, browser })
    expect(problems).toEqual([])
  })

  for (const screen of ['laptop', 'phone'] as const) {
    test(`${screen}: the workflow's health for the day and the week shows the API's counts; the environment's lists it`, async () => {
      const context = await browser.newContext({ baseURL: server.url, viewport: SCREENS[screen] })
      const page = await signInAs(context, 'alice', `/p/Acme/e/production/t/Support/w/${encodeURIComponent(WORKFLOW)}`, problems)
      await thenLoad(page, () => page.click('#workflow-health'))
      expect(new URL(page.url()).pathname).toBe(HEALTH_PAGE)

      // The day (the default), then the week through the page's own switch.
      const day = await apiHealth(page, `${HEALTH_API}?window=day`)
      expect(day.total).toBe(150)
      expect(await shown(page)).toEqual(expected(day))
      expect(await page.locator('svg[role=img] rect').count()).toBeGreaterThan(0)
      await noSidewaysScroll(page)
      expect(await accessibilityProblems(page)).toEqual([])
      await page.click('details.chart-data summary')
      expect(await accessibilityProblems(page)).toEqual([])
      await noSidewaysScroll(page)

      await thenLoad(page, () => page.click('nav.window-switch a:text("Last week")'))
      expect(await textOf(page, 'nav.window-switch a[aria-current=page]')()).toBe('Last week')
      const week = await apiHealth(page, `${HEALTH_API}?window=week`)
      expect(week.total).toBe(RUNS)
      expect(await shown(page)).toEqual(expected(week))
      expect(week.openTasks.count).toBeGreaterThan(5)
      expect(await page.locator('table.health-tasks tbody tr td:first-child').allTextContents()).toEqual(week.openTasks.longestWaiting.map((task: Body) => task.title))
      await noSidewaysScroll(page)
      expect(await accessibilityProblems(page)).toEqual([])

      // The environment's page, reached from the project's: the workflow's row has the same counts.
      await page.goto('/p/Acme')
      await thenLoad(page, () => page.click(`a[href="${ENVIRONMENT_PAGE}"]`))
      const environment = await apiHealth(page, '/v1/project/Acme/environment/production/health')
      const row = page.locator('table.health-workflows tbody tr', { hasText: WORKFLOW })
      expect(await row.locator('td').allTextContents()).toEqual([WORKFLOW, 'Support', '150', String(day.counts.failed), `${(day.failureRate * 100).toFixed(1)} %`, String(day.openTasks.count)])
      expect(Number(await textOf(page, '[data-figure="total"]')())).toBe(environment.total)
      await noSidewaysScroll(page)
      expect(await accessibilityProblems(page)).toEqual([])
      await context.close()
    }, 120_000)
  }
})

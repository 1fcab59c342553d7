/**
 * A run's page followed live in Chromium (1280×800 and 390×844) against `trellis serve`: a run of a three-step workflow
 * is cancelled while it waits and retried; the retry's page, opened while it runs, keeps "carried from the retried run"
 * on the step it carried as the live script redraws the steps, and when the run ends its completion callback appears
 * in the Callbacks section without a reload. axe-core finds no serious or critical problem on the ended page, and no
 * page has a script error.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import type { ServeProcess, TestEnv } from './helpers.ts'
import { acmeDocument, acmeProject, ordersWorkflow } from './support/acme.ts'
import { accessibilityProblems, browserAvailable, eventually, mark, noSidewaysScroll, requireBrowser, SCREENS, serveAcme, signInAs, stayed, stopServed, textOf } from './support/browser.ts'

requireBrowser('console-live-run-browser')

let env: TestEnv
let server: ServeProcess
let browser: Browser
let receiver: ReturnType<typeof Bun.serve>
const problems: string[] = []
/** Each screen its own workflow and order, so the two runs of the test do not meet. */
const PLACES = { laptop: { workflow: 'Pause and go', order: 'ord_1001' }, phone: { workflow: 'Pause and go (phone)', order: 'ord_1002' } } as const
const BASE = '/v1/project/Acme/environment/production'

/** The API as the console calls it: from the page, with its session. */
async function api(page: Page, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> | null }> {
  return page.evaluate(
    async ([method, path, body]) => {
      const response = await fetch(path, { method, credentials: 'same-origin', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
      const text = await response.text()
      return { status: response.status, body: text ? JSON.parse(text) : null }
    },
    [method, path, body] as const,
  )
}

describe.skipIf(!browserAvailable)('a run followed live in Chromium', () => {
  beforeAll(async () => {
    receiver = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('ok') })
    const document = acmeDocument({ passwords: true })
    const acme = acmeProject(document)
    for (const { workflow } of Object.values(PLACES)) acme.workflows!.push(ordersWorkflow(workflow, [{ type: 'load' }, { type: 'wait', name: 'pause', seconds: 5 }, { type: 'wait', name: 'then', seconds: 5 }]))
    // The callbacks go to the receiver on this host: the outbound rules let 127.0.0.1 through only when told to.
    ;({ env, server, browser } = await serveAcme(document, { TRELLIS_HTTP_ALLOW: '127.0.0.1' }))
  }, 120_000)

  afterAll(async () => {
    await stopServed({ env, server, browser })
    receiver?.stop(true)
    expect(problems).toEqual([])
  })

  for (const [screen, viewport] of Object.entries(SCREENS)) {
    const { workflow, order } = PLACES[screen as keyof typeof PLACES]
    test(`${screen}: a retried run's carried step keeps its marker live, and its callback appears when it ends`, async () => {
      const context = await browser.newContext({ baseURL: server.url, viewport })
      const page = await signInAs(context, 'alice', '/account', problems)
      const callbacks = `${BASE}/team/Support/workflows/${encodeURIComponent(workflow)}/callbacks`
      expect((await api(page, 'POST', callbacks, { url: `http://127.0.0.1:${receiver.port}/done` })).status).toBe(201)

      // A run cancelled while it waits, then retried: the retry carries the load step and waits again.
      const started = await api(page, 'POST', `${BASE}/workflow-runs`, { workflowName: workflow, teamName: 'Support', recordId: order })
      expect(started.status).toBe(202)
      const first = String(started.body!.runId)
      await eventually('the first run to wait', async () => (await api(page, 'GET', `/v1/workflow-runs/${first}`)).body?.status, (s) => s === 'waiting', 20_000)
      expect((await api(page, 'POST', `/v1/workflow-runs/${first}/cancel`)).status).toBe(200)
      const retried = await api(page, 'POST', `/v1/workflow-runs/${first}/retry`)
      expect(retried.status).toBe(202)
      const retry = String(retried.body!.runId)

      await page.goto(`/runs/${retry}`)
      await mark(page)
      expect(await textOf(page, '#run-callbacks')()).toBe('')
      await eventually('the retry to succeed, shown live', textOf(page, '#run-status'), (t) => t === 'succeeded', 30_000)
      expect(await textOf(page, 'tr[data-step="0"] .step-status')()).toContain('carried from the retried run')
      expect(await textOf(page, 'tr[data-step="2"] .step-status')()).not.toContain('carried')
      await eventually('the callback in the Callbacks section', textOf(page, '#run-callbacks'), (t) => t.includes('run.succeeded'), 20_000)
      expect(await stayed(page)).toBe(true)
      await noSidewaysScroll(page)
      expect(await accessibilityProblems(page)).toEqual([])
      await context.close()
    }, 120_000)
  }
})

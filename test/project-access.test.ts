/**
 * The project access decision on every route that reaches a project's data, whether its path names the project or
 * an id the project is found from (a run, its events and callbacks, the console's run page): the router's own list
 * of routes, so a route added later is covered the day it is added. A project applied without SSO gets a run, then
 * turns SSO on: a password session of its admin and a token generated outside SSO are refused on each of those routes
 * (403 `sso_required`, the console's pages with its 403 page), and an SSO session of the same admin is not.
 * A route this test cannot fill in fails it: place it in NO_PROJECT_DATA with its reason, or give its parameter a
 * value in PARAMS (and make the route take the shared decision, src/modules/auth/service.ts `requireProjectAccess`).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { writeNow } from '../src/db/write.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { SESSION_COOKIE } from '../src/lib/session-cookie.ts'
import { acmeDocument, acmePathParams, acmeProject, applyAcme, openTaskOnRun, reportHook, startRefundWithSession, tokenFor, userId } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'
import { bearer, request, testApp, testEnv } from './helpers.ts'

/** Routes that reach no project's data, each with why. */
const NO_PROJECT_DATA: Record<string, string> = {
  'GET /healthz': 'liveness',
  'GET /readyz': 'readiness',
  'GET /metrics': 'instance metrics (no project data)',
  'GET /openapi.json': 'the API description',
  'GET /v1/audit/public-key': 'the audit trail\'s public key (no project data)',
  'GET /docs': 'the API reference page',
  'GET /docs/docs.css': 'asset',
  'GET /docs/docs.js': 'asset',
  'GET /docs/swagger-ui-bundle.js': 'asset',
  'GET /docs/swagger-ui.css': 'asset',
  'GET /console/builder.js': 'asset',
  'GET /console/console.css': 'asset',
  'GET /console/console.js': 'asset',
  'GET /console/editor.css': 'asset',
  'GET /console/editor.js': 'asset',
  'GET /console/live.js': 'asset',
  'GET /console/records-import.js': 'asset',
  'GET /setup/setup.css': 'asset',
  'GET /setup/setup.js': 'asset',
  'GET /setup': 'first administrator (only before any exists)',
  'POST /setup': 'first administrator (only before any exists)',
  'GET /login': 'sign-in page',
  'GET /invite': 'an invitation link',
  'POST /auth/login': 'signing in',
  'POST /auth/logout': 'signing out',
  'POST /auth/invitation': 'accepting an invitation',
  'GET /': 'home: the names of the projects the user belongs to; opening one is /p/:project',
  'GET /account': "the user's own account and tokens",
  'GET /v1/account': "the user's own account",
  'PATCH /v1/account': "the user's own choices (task e-mail)",
  'GET /v1/account/tokens': "the user's own tokens (revoking one takes no right away)",
  'POST /v1/account/tokens': 'creating a token names its project in the body: the SSO rule is tested in tokens.test.ts',
  'DELETE /v1/account/tokens/:id': "revoking one of the user's own tokens",
  'GET /admin/projects': 'instance administration: project names and sizes',
  'GET /admin/users': 'instance administration: users',
  'GET /admin/outbound': 'instance administration: the outbound allow-list',
  'GET /v1/instance/outbound-allow': 'instance administration: the outbound allow-list',
  'PUT /v1/instance/outbound-allow': 'instance administration: the outbound allow-list',
  'GET /v1/instance/users': 'instance administration: users',
  'POST /v1/instance/users': 'instance administration: users',
  'PUT /v1/instance/users/:id': 'instance administration: users',
  'POST /v1/instance/users/:id/invitation': 'instance administration: users',
  'POST /v1/projects': 'creating a project',
  'GET /search': 'searches only the projects the decision lets the user open (tested below)',
  'GET /inbox': 'lists and counts only the tasks of projects the decision lets the user open (tested below)',
  'POST /mcp': 'a token only: the SSO rule is decided with the token (mcp.test.ts), tested below as TOKEN_ONLY too',
  'POST /v1/hooks/:token': 'a token only: the SSO rule is decided with the token (webhook.test.ts), tested below as TOKEN_ONLY too',
}

const env = testEnv(HIGH_API_BUDGETS)
const app = testApp(env)
const send = (path: string, init: Parameters<typeof request>[1] = {}) => app.handle(request(path, init))

/** Path parameter values on the Acme fixture; `runId` is filled in once its run exists. */
const PARAMS: Record<string, string> = {
  ...acmePathParams(),
  version: '1',
  callbackId: '1',
  deliveryId: '0190f2a8-7b3c-7def-8123-456789abcdef',
}

let passwordCookie: string
let ssoCookie: string
let passwordToken: string
let hook: string

beforeAll(async () => {
  const ctx = { store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }
  const document = acmeDocument()
  const report = await applyAcme(ctx, document)
  hook = reportHook(report, 'Refund order')
  const alice = userId(env.store, 'alice')
  const sessionOf = (viaSso: boolean) => writeNow(env.store, () => createSession(env.clock, alice, viaSso))
  passwordCookie = `${SESSION_COOKIE}=${(await sessionOf(false)).id}`
  ssoCookie = `${SESSION_COOKIE}=${(await sessionOf(true)).id}`
  passwordToken = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
  PARAMS.runId = await startRefundWithSession(app, passwordCookie, 'ord_1001')
  PARAMS.taskId = await openTaskOnRun(env.store, env.clock, PARAMS.runId)
  PARAMS.userId = String(userId(env.store, 'bob'))
  // The reproduction: the project turns SSO on after its run exists.
  acmeProject(document).sso = true
  await applyAcme(ctx, document)
})
afterAll(() => env.cleanup())

interface Route {
  method: string
  path: string
}

const routes = (): Route[] => (app as unknown as { routes: Route[] }).routes.map(({ method, path }) => ({ method, path }))
const nameOf = (route: Route) => `${route.method} ${route.path}`

/** The route's path with its parameters filled in; throws naming a parameter nobody gave a value. */
function filled(route: Route): string {
  return route.path.replace(/:(\w+)/g, (_, name: string) => {
    if (!Object.hasOwn(PARAMS, name)) throw new Error(`${nameOf(route)}: no value for :${name} — place the route in NO_PROJECT_DATA with its reason, or give :${name} a value here (and make sure the route takes the shared project access decision)`)
    return encodeURIComponent(PARAMS[name]!)
  })
}

/** What a route answers a caller: the status and, for a JSON answer, its code. */
async function answer(route: Route, headers: Record<string, string>): Promise<{ status: number; code: string | null }> {
  const init: Parameters<typeof request>[1] = { method: route.method, headers }
  if (!['GET', 'HEAD'].includes(route.method)) init.json = {}
  const response = await send(filled(route), init)
  const type = response.headers.get('content-type') ?? ''
  if (type.includes('text/event-stream')) {
    await response.body?.cancel()
    return { status: response.status, code: null }
  }
  if (type.includes('application/json')) return { status: response.status, code: ((await response.json()) as { code?: string }).code ?? null }
  const text = await response.text()
  return { status: response.status, code: response.status === 403 && text.includes('This project uses SSO') ? 'sso_required' : null }
}

/** The public API's routes that take a Bearer token only (/openapi.json): a session is 401 there before any decision. */
async function tokenOnlyRoutes(): Promise<Set<string>> {
  const document = (await (await send('/openapi.json')).json()) as { paths: Record<string, Record<string, { security?: Record<string, unknown>[] }>> }
  const names = new Set<string>()
  for (const [path, operations] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const schemes = (operation.security ?? []).flatMap((entry) => Object.keys(entry))
      if (schemes.length > 0 && !schemes.includes('sessionCookie')) names.add(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`)
    }
  }
  return names
}

const projectRoutes = () => routes().filter((route) => !Object.hasOwn(NO_PROJECT_DATA, nameOf(route)))
const isConsolePage = (route: Route) => !route.path.startsWith('/v1/')

describe('every route that reaches a project\'s data takes the project access decision', () => {
  test('the router lists the run routes (the test sees what it guards)', () => {
    const names = projectRoutes().map(nameOf)
    for (const expected of [
      'GET /v1/workflow-runs/:runId',
      'GET /v1/workflow-runs/:runId/events',
      'GET /v1/workflow-runs/:runId/callbacks',
      'POST /v1/workflow-runs/:runId/cancel',
      'POST /v1/workflow-runs/:runId/retry',
      'GET /v1/tasks/:taskId',
      'POST /v1/tasks/:taskId/decisions',
      'GET /runs/:runId',
      'GET /p/:project',
    ]) expect(names).toContain(expected)
    // Every route is either filled in here or named as reaching no project data.
    for (const route of projectRoutes()) expect(() => filled(route)).not.toThrow()
  })

  test('a password session of an SSO project\'s admin is refused: 403 sso_required on every such route (401 where only tokens are taken)', async () => {
    const tokenOnly = await tokenOnlyRoutes()
    const wrong: string[] = []
    for (const route of projectRoutes()) {
      const got = await answer(route, { cookie: passwordCookie })
      const refused = tokenOnly.has(nameOf(route)) ? got.status === 401 : got.status === 403 && got.code === 'sso_required'
      if (!refused) wrong.push(`${nameOf(route)} → ${got.status} ${got.code}`)
    }
    expect(wrong).toEqual([])
  })

  test('a token generated outside SSO is refused on every such route (API: 403 sso_required; console pages take no token)', async () => {
    const wrong: string[] = []
    for (const route of projectRoutes()) {
      const got = await answer(route, bearer(passwordToken))
      const refused = (got.status === 403 && got.code === 'sso_required') || (isConsolePage(route) && got.status === 303)
      if (!refused) wrong.push(`${nameOf(route)} → ${got.status} ${got.code}`)
    }
    expect(wrong).toEqual([])
  })

  test('the token-only routes refuse a token generated outside SSO (403 sso_required)', async () => {
    const webhook = await send(hook, { method: 'POST', headers: bearer(passwordToken), json: { record_id: 'ord_1002' } })
    expect({ status: webhook.status, code: ((await webhook.json()) as { code: string }).code }).toEqual({ status: 403, code: 'sso_required' })
    const mcp = await send('/mcp', {
      method: 'POST',
      headers: { ...bearer(passwordToken), accept: 'application/json, text/event-stream' },
      json: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    })
    expect({ status: mcp.status, code: ((await mcp.json()) as { code: string }).code }).toEqual({ status: 403, code: 'sso_required' })
  })

  test('search leaves out a project the decision refuses, and finds in it once the session may open it', async () => {
    const search = async (cookie: string) => {
      const response = await send('/search?q=ord_1001', { headers: { cookie } })
      return { status: response.status, found: (await response.text()).includes('/r/ord_1001') }
    }
    expect(await search(passwordCookie)).toEqual({ status: 200, found: false })
    expect(await search(ssoCookie)).toEqual({ status: 200, found: true })
  })

  test('the inbox and its count leave out a project the decision refuses, and show its task once the session may open it', async () => {
    const inbox = async (cookie: string) => {
      const response = await send('/inbox?show=all', { headers: { cookie } })
      const text = await response.text()
      return { status: response.status, found: text.includes(`/tasks/${PARAMS.taskId}`) }
    }
    expect(await inbox(passwordCookie)).toEqual({ status: 200, found: false })
    expect(await inbox(ssoCookie)).toEqual({ status: 200, found: true })
  })

  test('the run is still there and active: nothing a refused caller sent changed it', async () => {
    const run = await send(`/v1/workflow-runs/${PARAMS.runId}`, { headers: { cookie: ssoCookie } })
    expect(run.status).toBe(200)
    expect(((await run.json()) as { status: string }).status).toBe('queued')
  })
  test('an SSO session of the same admin passes the decision on every such read (the refusals above are the SSO rule)', async () => {
    const tokenOnly = await tokenOnlyRoutes()
    const wrong: string[] = []
    for (const route of projectRoutes().filter((route) => route.method === 'GET' && !tokenOnly.has(nameOf(route)))) {
      const got = await answer(route, { cookie: ssoCookie })
      if (got.code === 'sso_required' || got.status === 401) wrong.push(`${nameOf(route)} → ${got.status} ${got.code}`)
    }
    expect(wrong).toEqual([])
  })

})

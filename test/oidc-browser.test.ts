/**
 * SSO in a real browser, end to end: Chromium (playwright-core) against `trellis serve` in a real
 * process pointed at a real OpenID provider (panva's oidc-provider under Node, its own login and consent pages).
 * Sign in with SSO, generate a token in that session; it works on the SSO project, while a password session is
 * told to sign in with SSO and its token (made before the project turned SSO on) gets the spec's 403. The provider
 * account has alice's verified email but is not yet linked to her: the first SSO sign-in asks for her password once
 * to link it, the next ones go straight in. Then two
 * instances behind a load balancer: the sign-in started on one is completed by the other (it travels in its cookie).
 *
 * Chromium: /usr/bin/chromium (or CHROMIUM_PATH); skipped with a warning without it, unless TRELLIS_REQUIRE_BROWSER=1.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { stringify } from 'yaml'
import { bearer, freePort, POSTGRES_ONLY, postgresOnlyTest, processEnv, runCli, type ServeProcess, startServe, testEnv, type TestEnv } from './helpers.ts'
import { acmeDocument } from './support/acme.ts'
import { browserAvailable, launchBrowser, pageIsSound, requireBrowser, watchPage } from './support/browser.ts'
import { type OidcProvider, startOidcProvider } from './support/oidc-provider.ts'

requireBrowser('oidc-browser')
const SECRET = 'browser-client-secret-0123456789abcdef'

/** The test env the served instances share: its data dir (the instance secret), and on PostgreSQL its database. */
let testbed: TestEnv
let dir: { path: string }
let provider: OidcProvider
let server: ServeProcess
/** The port of the load balancer in front of two more instances (last test), registered with the provider too. */
let balancerPort: number
let browser: Browser
const problems: string[] = []

/** Script errors and CSP violations on Trellis's pages are problems (the provider's dev pages are not ours). */
const watch = (page: Page) => watchPage(page, problems, () => server.url)

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ baseURL: server.url })
  // Nothing leaves the machine (the provider's dev pages ask for a web font).
  await context.route(/^https?:\/\/(?!127\.0\.0\.1)/, (route) => route.abort())
  const page = await context.newPage()
  watch(page)
  return page
}

async function apiStatus(path: string, token: string): Promise<{ status: number; code?: string; message?: string }> {
  const response = await fetch(`${server.url}${path}`, { headers: bearer(token) })
  const body = (await response.json()) as { code?: string; message?: string }
  return { status: response.status, code: body.code, message: body.message }
}

/** On the account page: generates a token for a project and returns the value shown once. */
async function generateToken(page: Page, name: string, project: string): Promise<string> {
  await page.goto('/account')
  await page.fill('#new-token input[name=name]', name)
  await page.selectOption('#new-token select[name=projectName]', project)
  await page.check('#new-token input[name=preset][value=read-write]')
  await page.click('#new-token button[type=submit]')
  await page.waitForSelector('#token-once:not([hidden])')
  return (await page.textContent('#token-value'))!
}

/** From Trellis's sign-in page: "Sign in with SSO", then the provider's own login and consent pages. */
async function signInWithSso(page: Page): Promise<void> {
  await page.click('text=Sign in with SSO')
  await page.waitForURL(`${provider.issuer}/**`)
  await page.fill('input[name=login]', 'alice.sso')
  await page.fill('input[name=password]', 'anything')
  await page.click('button[type=submit]')
  await page.click('button:has-text("Continue")')
}

const NOTES = '/v1/project/Acme/environment/production/notes'

describe.skipIf(!browserAvailable)('SSO in Chromium, against a real OpenID provider', () => {
  beforeAll(async () => {
    testbed = testEnv()
    dir = { path: testbed.dataDir }
    const port = freePort()
    const base = `http://127.0.0.1:${port}`
    balancerPort = freePort()
    const balanced = `http://127.0.0.1:${balancerPort}`
    provider = await startOidcProvider({
      clients: [
        {
          client_id: 'trellis',
          client_secret: SECRET,
          redirect_uris: [`${base}/auth/sso/callback`, `${balanced}/auth/sso/callback`],
          post_logout_redirect_uris: [`${base}/login`],
        },
      ],
      accounts: { 'alice.sso': { email: 'alice@example.com', email_verified: true, name: 'Alice' } },
      // Here the email comes in the ID token itself (oidc.test.ts gets it from UserInfo).
      emailInIdToken: true,
    })
    const file = join(dir.path, 'acme.yaml')
    writeFileSync(file, stringify(acmeDocument({ passwords: true })))
    expect((await runCli(['apply', '-f', file, '--data', dir.path], { env: processEnv(testbed) })).code).toBe(0)
    server = await startServe({
      dataDir: dir.path,
      cwd: dir.path,
      port,
      env: { ...processEnv(testbed), TRELLIS_OIDC_ISSUER: provider.issuer, TRELLIS_OIDC_CLIENT_ID: 'trellis', TRELLIS_OIDC_CLIENT_SECRET: SECRET },
    })
    browser = await launchBrowser()
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
    await provider?.stop()
    testbed?.cleanup()
    expect(problems).toEqual([])
  })

  test('sign in with SSO through the provider, generate a token there: it works on the SSO project; a password session token gets 403', async () => {
    // Before SSO: a password session makes a token for Acme.
    const passwordPage = await newPage()
    await passwordPage.goto('/login')
    await passwordPage.fill('input[name=email]', 'alice@example.com')
    await passwordPage.fill('input[name=password]', 'alice-demo-pass-2026')
    await passwordPage.click('form.login button[type=submit]')
    await passwordPage.waitForURL(`${server.url}/`)
    const passwordToken = await generateToken(passwordPage, 'made-with-password', 'Acme')
    expect((await apiStatus(NOTES, passwordToken)).status).toBe(200)

    // The project turns SSO on.
    const file = join(dir.path, 'acme-sso.yaml')
    writeFileSync(file, stringify({ projects: [{ name: 'Acme', sso: true }] }))
    expect((await runCli(['apply', '-f', file, '--data', dir.path], { env: processEnv(testbed) })).code).toBe(0)
    expect(await apiStatus(NOTES, passwordToken)).toEqual({
      status: 403,
      code: 'sso_required',
      message: 'This project uses SSO: the token must be generated while logged in with SSO',
    })
    // The password session is told to sign in with SSO.
    const refused = await passwordPage.goto('/p/Acme')
    expect(refused!.status()).toBe(403)
    expect(await passwordPage.textContent('p.error')).toContain('sign in with SSO')

    // Sign in with SSO: the provider's own login and consent pages. Its account has alice's verified email, but is
    // not linked to her account yet: Trellis asks for her password once to link them (never by email alone).
    const page = await newPage()
    await page.goto('/p/Acme')
    expect(new URL(page.url()).pathname).toBe('/login')
    await signInWithSso(page)
    await page.waitForSelector('[data-code=sso_link_required]')
    expect(await page.textContent('h1')).toBe('Link your account')
    await pageIsSound(page)
    await page.fill('input[name=password]', 'not her password')
    await page.click('form.login button[type=submit]')
    expect(await page.waitForSelector('p.form-error:has-text("Invalid email or password")')).toBeTruthy()
    await page.fill('input[name=password]', 'alice-demo-pass-2026')
    await page.click('form.login button[type=submit]')
    await page.waitForURL(`${server.url}/p/Acme`)
    expect(await page.textContent('h1')).toBe('Acme')

    // A token generated in this session works on the SSO project, and is listed as an SSO token.
    const ssoToken = await generateToken(page, 'made-with-sso', 'Acme')
    expect((await apiStatus(NOTES, ssoToken)).status).toBe(200)
    await page.goto('/p/Acme/api-access')
    const rows = await page.locator('table.tokens tbody tr').allTextContents()
    expect(rows.find((r) => r.includes('made-with-sso'))).toContain('yes')
    expect(rows.find((r) => r.includes('made-with-password'))).toContain('no')
    await pageIsSound(page)
    expect((await apiStatus(NOTES, passwordToken)).code).toBe('sso_required')

    // Sign out: the Trellis session ends, and the provider's sign-out is offered.
    await page.goto('/account')
    await page.click('header button[type=submit]')
    await page.waitForURL(`${server.url}/login?signedOut=sso`)
    expect(await page.getAttribute('a[href="/auth/sso/logout"]', 'href')).toBe('/auth/sso/logout')
    await pageIsSound(page)
    await page.goto('/p/Acme')
    expect(new URL(page.url()).pathname).toBe('/login')
  }, 60_000)

  postgresOnlyTest(POSTGRES_ONLY.severalInstances, 'two instances behind a load balancer (real processes, one database, one secret): started on A, completed on B', async () => {
    const balanced = `http://127.0.0.1:${balancerPort}`
    const env = { ...processEnv(testbed), TRELLIS_BASE_URL: balanced, TRELLIS_OIDC_ISSUER: provider.issuer, TRELLIS_OIDC_CLIENT_ID: 'trellis', TRELLIS_OIDC_CLIENT_SECRET: SECRET }
    // Both read the instance secret from the same data directory, as all instances of a deployment must share it.
    const [a, b] = await Promise.all([startServe({ dataDir: dir.path, cwd: dir.path, env }), startServe({ dataDir: dir.path, cwd: dir.path, env })])
    const served: string[] = []
    // No sticky sessions: the provider's redirect back always goes to B, everything else to A.
    const balancer = Bun.serve({
      hostname: '127.0.0.1',
      port: balancerPort,
      async fetch(request) {
        const url = new URL(request.url)
        const [name, target] = url.pathname === '/auth/sso/callback' ? ['B', b] : ['A', a]
        served.push(`${url.pathname} → ${name}`)
        const answer = await fetch(`${target.url}${url.pathname}${url.search}`, { method: request.method, headers: request.headers, body: request.body, redirect: 'manual' })
        const headers = new Headers(answer.headers)
        headers.delete('content-encoding')
        headers.delete('content-length')
        return new Response(answer.body, { status: answer.status, headers })
      },
    })
    try {
      const page = await newPage()
      await page.goto(`${balanced}/login?next=/account`)
      // Linked by the first test: this sign-in goes straight in.
      await signInWithSso(page)
      await page.waitForURL(`${balanced}/account`)
      expect(served).toContain('/auth/sso/start → A')
      expect(served).toContain('/auth/sso/callback → B')
      // The session B made is A's too (one database), and it is an SSO session.
      const account = await page.evaluate(async () => (await fetch('/v1/account')).json())
      expect(account).toMatchObject({ user: { email: 'alice@example.com' }, viaSso: true })
      expect((await page.context().cookies(balanced)).map((c) => c.name)).not.toContain('trellis_sso')
    } finally {
      await balancer.stop(true)
      await Promise.all([a.stop(), b.stop()])
    }
  }, 60_000)
})

/**
 * SSO through OpenID Connect (spec §5.5: "If the project uses SSO, the token must be generated while logged in
 * with SSO"), end to end against a real provider: panva's certified oidc-provider under Node on loopback, its own
 * login and consent pages filled in by a browserless person (the Chromium run is in oidc-browser.test.ts).
 * Trellis runs as a real server (the provider redirects to it and Trellis calls the provider back).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash, randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import type { DepsInput } from '../src/deps.ts'
import { ConfigError, DEFAULT_LIVE_TOKENS_PER_USER, loadConfig } from '../src/config.ts'
import { writeNow } from '../src/db/write.ts'
import { setUserDeactivated } from '../src/modules/members/service.ts'
import { createToken } from '../src/modules/tokens/service.ts'
import { createSession } from '../src/modules/auth/sessions.ts'
import { emailVerified } from '../src/modules/auth/oidc.ts'
import { linkSsoIdentity } from '../src/modules/auth/oidc-service.ts'
import { createUser, findUser, hashPasswordSync, setUserPasswordHash } from '../src/modules/users/service.ts'
import { openSignIn, type PendingSignIn, sealSignIn, SIGN_IN_COOKIE_PURPOSE } from '../src/modules/auth/pending-sign-in.ts'
import { purposeKey } from '../src/lib/secret.ts'
import { applyNow, execute, processEnv, queryAll, queryOne, runCli, runNow, startServe, tempDir, testApp, testEnv, type TestEnv } from './helpers.ts'
import { acmeDocument, acmeProject, reportHook, userId } from './support/acme.ts'
import { type OidcProvider, Person, startOidcProvider } from './support/oidc-provider.ts'

const SECRET = 'trellis-client-secret-0123456789abcdef'
const OTHER_SECRET = 'other-app-secret-0123456789abcdef'
const ACCOUNTS = {
  alice: { email: 'alice@example.com', email_verified: true, name: 'Alice' },
  unverified: { email: 'bob@example.com', email_verified: false, name: 'Bob' },
  newcomer: { email: 'newcomer@example.com', email_verified: true, name: 'New Comer' },
  dave: { email: 'dave@example.com', email_verified: true },
  // As Entra ID sends them: no email_verified, the optional claim xms_edov instead (trusted from Microsoft's issuer only).
  entra: { email: 'alice@example.com', xms_edov: true },
  entraUnverified: { email: 'alice@example.com', xms_edov: false },
  // Accounts of other people at this provider whose verified email is a Trellis user's.
  impostor: { email: 'admin@example.com', email_verified: true, name: 'Not The Admin' },
  bobSso: { email: 'bob@example.com', email_verified: true },
  carolSso: { email: 'carol@example.com', email_verified: true },
  aliceTwin: { email: 'alice@example.com', email_verified: true },
  // Bound to a user in a test: its email (unverified, and another user's) no longer matters.
  renamed: { email: 'alice@example.com', email_verified: false },
  daveSso: { email: 'dave.elsewhere@example.com', email_verified: true },
}
const BOB_PASSWORD = 'bob-links-sso-2026'

/** Trellis's clock: real time plus an offset the tests move (ID tokens are stamped by the provider's real clock). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

let server: ReturnType<typeof Bun.serve>
let base: string
let provider: OidcProvider
let env: TestEnv
let deps: Partial<DepsInput>
let app: ReturnType<typeof testApp>
let hook: string

/** The app the server answers with (swapped to try auto-create on, or no SSO at all). */
function serveApp(config: TestEnv['config']) {
  app = testApp(env, { ...deps, config })
}

beforeAll(async () => {
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (request) => app.handle(request) })
  base = `http://127.0.0.1:${server.port}`
  provider = await startOidcProvider({
    clients: [
      { client_id: 'trellis', client_secret: SECRET, redirect_uris: [`${base}/auth/sso/callback`], post_logout_redirect_uris: [`${base}/login`] },
      { client_id: 'other-app', client_secret: OTHER_SECRET, redirect_uris: [`${base}/other/callback`] },
    ],
    accounts: ACCOUNTS,
    idTokenTtl: 60,
  })
  env = testEnv({
    TRELLIS_BASE_URL: base,
    TRELLIS_OIDC_ISSUER: provider.issuer,
    TRELLIS_OIDC_CLIENT_ID: 'trellis',
    TRELLIS_OIDC_CLIENT_SECRET: SECRET,
  })
  deps = { clock }
  const document = acmeDocument()
  acmeProject(document).sso = true
  document.projects.push({ name: 'Open', environments: ['production'], members: [{ user: 'alice@example.com', role: 'admin' }] })
  const report = await applyNow(document, { store: env.store, clock, secret: env.secret, baseUrl: base })
  hook = reportHook(report, 'Refund order')
  await writeNow(env.store, function* () {
        return yield* setUserDeactivated(clock, userId(env.store, 'dave'), true, null)
      })
  // The instance administrator the impostor's email names, and a password for bob (who links his provider account).
  const bobHash = hashPasswordSync(BOB_PASSWORD)
  await writeNow(env.store, function* () {
    yield* createUser(clock, { email: 'admin@example.com', username: 'admin', passwordHash: hashPasswordSync('admin-pass-2026-x'), isInstanceAdmin: true, actorId: null })
    yield* setUserPasswordHash(clock, userId(env.store, 'bob'), bobHash)
  })
  // alice's provider account is bound to her (as her first SSO sign-in would have, once linked): most tests sign in as her.
  await bindAccount('alice', 'alice')
  serveApp(env.config)
})

/** Binds the provider account `subject` to the user `username`, as an operator's `trellis user link-sso` does. */
async function bindAccount(subject: string, username: string) {
  await writeNow(env.store, function* () {
    const user = (yield* findUser(userId(env.store, username)))!
    return yield* linkSsoIdentity(clock, user, { issuer: provider.issuer, subject }, { actorId: null, initiator: 'administrator', how: 'by an operator (CLI)' })
  })
}

afterAll(async () => {
  await server?.stop(true)
  await provider?.stop()
  env?.cleanup()
})

// ── helpers ─────────────────────────────────────────────────────────────────

const callbackPrefix = () => `${base}/auth/sso/callback`

/** Clicks "Sign in with SSO" and signs in at the provider; returns the redirect back to Trellis, not yet followed. */
async function throughProvider(person: Person, next = '/'): Promise<URL> {
  const start = await person.send(new URL(`/auth/sso/start?next=${encodeURIComponent(next)}`, base))
  expect(start.status).toBe(303)
  const authorization = new URL(start.headers.get('location')!)
  expect(authorization.origin).toBe(provider.issuer)
  return person.signInAtProvider(authorization, callbackPrefix())
}

/** The whole sign-in; returns Trellis's answer to the callback. */
async function signIn(login: string, next = '/'): Promise<{ person: Person; response: Response }> {
  const person = new Person(login)
  const callback = await throughProvider(person, next)
  return { person, response: await person.send(callback) }
}

/** A refused callback: its status, and the code on the page. */
async function refusal(response: Response): Promise<{ status: number; code: string | undefined; text: string }> {
  const text = await response.text()
  expect(response.headers.get('content-type')).toContain('text/html')
  return { status: response.status, code: /data-code="([^"]+)"/.exec(text)?.[1], text }
}

function sessionOf(person: Person): string {
  const value = person.cookie(base, 'trellis_session')
  expect(value).toBeDefined()
  return `trellis_session=${value}`
}

async function api(path: string, init: { method?: string; cookie?: string; token?: string; json?: unknown } = {}) {
  const headers = new Headers()
  if (init.cookie) headers.set('cookie', init.cookie)
  if (init.token) headers.set('authorization', `Bearer ${init.token}`)
  if (init.json !== undefined) headers.set('content-type', 'application/json')
  const response = await fetch(new URL(path, base), { method: init.method ?? 'GET', headers, body: init.json === undefined ? undefined : JSON.stringify(init.json) })
  const text = await response.text()
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null }
}

/**
 * A real ID token from the provider, outside Trellis: a whole code flow for `clientId` with the given nonce,
 * exchanged at the token endpoint with that client's secret.
 */
async function providerIdToken(clientId: string, secret: string, redirectUri: string, nonce: string): Promise<string> {
  const verifier = randomBytes(32).toString('base64url')
  const authorization = new URL('/auth', provider.issuer)
  authorization.search = new URLSearchParams({
    client_id: clientId,
    response_type: 'code',
    scope: 'openid email',
    redirect_uri: redirectUri,
    state: 'elsewhere',
    nonce,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString()
  const back = await new Person('alice').signInAtProvider(authorization, redirectUri)
  const response = await fetch(new URL('/token', provider.issuer), {
    method: 'POST',
    headers: { authorization: `Basic ${btoa(`${clientId}:${secret}`)}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: back.searchParams.get('code')!, redirect_uri: redirectUri, code_verifier: verifier }),
  })
  expect(response.status).toBe(200)
  return ((await response.json()) as { id_token: string }).id_token
}

const NOTES = '/v1/project/Acme/environment/production/notes'
const count = (sql: string, ...params: (string | number)[]) => queryOne<{ n: number }>(env.store, sql, ...params)!.n

// ── configuration ───────────────────────────────────────────────────────────

describe('configuration', () => {
  test('flags > env > defaults; off unless an issuer and a client id are both given', () => {
    expect(loadConfig({}, {}).oidc).toBeNull()
    const env = { TRELLIS_OIDC_ISSUER: 'https://id.example.com/realms/acme', TRELLIS_OIDC_CLIENT_ID: 'trellis', TRELLIS_OIDC_CLIENT_SECRET: 's' }
    expect(loadConfig({}, env).oidc).toEqual({ issuer: 'https://id.example.com/realms/acme', clientId: 'trellis', clientSecret: 's', autoCreate: false })
    expect(loadConfig({ 'oidc-issuer': 'https://other.example.com', 'oidc-auto-create': 'true' }, env).oidc).toMatchObject({ issuer: 'https://other.example.com', autoCreate: true })
    expect(loadConfig({}, { ...env, TRELLIS_OIDC_AUTO_CREATE: 'on' }).oidc!.autoCreate).toBe(true)
    expect(loadConfig({}, { ...env, TRELLIS_OIDC_CLIENT_SECRET: '' }).oidc!.clientSecret).toBeUndefined()
  })

  test('the client secret from a file (--oidc-client-secret-file or TRELLIS_OIDC_CLIENT_SECRET_FILE), never a literal flag', () => {
    const dir = tempDir('trellis-oidc-secret-')
    try {
      const file = `${dir.path}/secret`
      writeFileSync(file, 'from-the-file\n')
      const base = { TRELLIS_OIDC_ISSUER: 'https://id.example.com', TRELLIS_OIDC_CLIENT_ID: 'trellis' }
      expect(loadConfig({ 'oidc-client-secret-file': file }, base).oidc!.clientSecret).toBe('from-the-file')
      // the flag wins over the environment's literal; the literal over the environment's file
      expect(loadConfig({ 'oidc-client-secret-file': file }, { ...base, TRELLIS_OIDC_CLIENT_SECRET: 'env' }).oidc!.clientSecret).toBe('from-the-file')
      expect(loadConfig({}, { ...base, TRELLIS_OIDC_CLIENT_SECRET: 'env', TRELLIS_OIDC_CLIENT_SECRET_FILE: file }).oidc!.clientSecret).toBe('env')
      expect(loadConfig({}, { ...base, TRELLIS_OIDC_CLIENT_SECRET_FILE: file }).oidc!.clientSecret).toBe('from-the-file')
      expect(() => loadConfig({ 'oidc-client-secret-file': `${dir.path}/missing` }, base)).toThrow(/oidc-client-secret-file.*cannot read.*ENOENT/)
      writeFileSync(file, '\n')
      expect(() => loadConfig({ 'oidc-client-secret-file': file }, base)).toThrow(/is empty/)
    } finally {
      dir.cleanup()
    }
  })

  test("the apply file's sso: is the lowest layer: used when flags and env name no provider, its auto-create below theirs", () => {
    const stored = { issuer: 'https://id.example.com', clientId: 'from-file', autoCreate: true }
    expect(loadConfig({}, { TRELLIS_OIDC_CLIENT_SECRET: 's' }, { storedSso: stored }).oidc).toEqual({ issuer: 'https://id.example.com', clientId: 'from-file', clientSecret: 's', autoCreate: true })
    expect(loadConfig({}, { TRELLIS_OIDC_CLIENT_ID: 'from-env', TRELLIS_OIDC_AUTO_CREATE: 'false' }, { storedSso: stored }).oidc).toMatchObject({ clientId: 'from-env', autoCreate: false })
    expect(loadConfig({ 'oidc-issuer': 'https://flag.example.com' }, {}, { storedSso: stored }).oidc).toMatchObject({ issuer: 'https://flag.example.com', clientId: 'from-file' })
  })

  test('bad settings are refused at start, naming the setting', () => {
    expect(() => loadConfig({}, { TRELLIS_OIDC_ISSUER: 'https://id.example.com' })).toThrow(/TRELLIS_OIDC_CLIENT_ID/)
    expect(() => loadConfig({}, { TRELLIS_OIDC_CLIENT_ID: 'x' })).toThrow(/TRELLIS_OIDC_ISSUER/)
    expect(() => loadConfig({}, { TRELLIS_OIDC_ISSUER: 'not a url', TRELLIS_OIDC_CLIENT_ID: 'x' })).toThrow(ConfigError)
    // Plain http only for a provider on this machine.
    expect(() => loadConfig({}, { TRELLIS_OIDC_ISSUER: 'http://id.example.com', TRELLIS_OIDC_CLIENT_ID: 'x' })).toThrow(/https/)
    expect(loadConfig({}, { TRELLIS_OIDC_ISSUER: 'http://localhost:9000', TRELLIS_OIDC_CLIENT_ID: 'x' }).oidc).not.toBeNull()
    expect(() => loadConfig({}, { TRELLIS_OIDC_ISSUER: 'https://a.example', TRELLIS_OIDC_CLIENT_ID: 'x', TRELLIS_OIDC_AUTO_CREATE: 'maybe' })).toThrow(/TRELLIS_OIDC_AUTO_CREATE/)
  })
})

describe('sso: in the apply file', () => {
  test('stored without a secret, idempotent, validated, removed with null; serve reads it at start', async () => {
    const own = testEnv()
    const dir = { path: own.dataDir, cleanup: own.cleanup }
    const file = `${dir.path}/sso.yaml`
    const apply = async (text: string, ...extra: string[]) => {
      await Bun.write(file, text)
      return runCli(['apply', '-f', file, '--data', dir.path, '--json', ...extra], { env: processEnv(own) })
    }
    try {
      const first = await apply(`sso:\n  issuer: ${provider.issuer}\n  clientId: trellis\n`)
      expect(first.code).toBe(0)
      expect(JSON.parse(first.stdout).changes).toContainEqual({ action: 'created', kind: 'sso settings', name: provider.issuer })
      expect(JSON.parse((await apply(`sso: { issuer: ${provider.issuer}, clientId: trellis }\n`)).stdout)).toMatchObject({ created: 0, updated: 0, unchanged: 1 })
      // The secret has no place in the file; a bad issuer names the field; nothing is written.
      const secret = await apply(`sso: { issuer: ${provider.issuer}, clientId: trellis, clientSecret: x }\n`)
      expect(secret.code).toBe(1)
      expect(secret.stderr).toContain('clientSecret')
      const insecure = await apply('sso: { issuer: http://id.example.com, clientId: trellis }\n')
      expect(insecure.code).toBe(1)
      expect(insecure.stderr).toContain('sso.issuer: issuer must be an https URL')
      // serve (a real process) takes it, with the secret from its environment.
      const serve = await startServe({ dataDir: dir.path, cwd: dir.path, env: { ...processEnv(own), TRELLIS_OIDC_CLIENT_SECRET: SECRET } })
      try {
        expect(await (await fetch(`${serve.url}/login`)).text()).toContain('Sign in with SSO')
        const start = await fetch(`${serve.url}/auth/sso/start`, { redirect: 'manual' })
        expect(start.status).toBe(303)
        expect(new URL(start.headers.get('location')!).origin).toBe(provider.issuer)
      } finally {
        await serve.stop()
      }
      const removed = await apply('sso: null\n')
      expect(JSON.parse(removed.stdout).changes).toContainEqual({ action: 'updated', kind: 'sso settings (removed)', name: 'identity provider' })
    } finally {
      dir.cleanup()
    }
  }, 30_000)
})

// ── signing in ──────────────────────────────────────────────────────────────

describe('sign-in through the provider', () => {
  test('the login page offers "Sign in with SSO" when configured, and not otherwise', async () => {
    const page = await (await fetch(`${base}/login?next=/account`)).text()
    expect(page).toContain('Sign in with SSO')
    expect(page).toContain('href="/auth/sso/start?next=%2Faccount"')
    const plain = testApp(env, { ...deps, config: { ...env.config, oidc: null } })
    const without = await (await plain.handle(new Request(`${base}/login`))).text()
    expect(without).not.toContain('Sign in with SSO')
    expect((await plain.handle(new Request(`${base}/auth/sso/start`))).status).toBe(404)
  })

  test('code flow with PKCE, state and nonce; the session is marked SSO and lands on the asked page', async () => {
    const person = new Person('alice')
    const start = await person.send(new URL('/auth/sso/start?next=/account', base))
    const authorization = new URL(start.headers.get('location')!)
    const params = authorization.searchParams
    expect(params.get('response_type')).toBe('code')
    expect(params.get('client_id')).toBe('trellis')
    expect(params.get('redirect_uri')).toBe(`${base}/auth/sso/callback`)
    expect(params.get('scope')).toBe('openid email profile')
    expect(params.get('code_challenge_method')).toBe('S256')
    for (const name of ['state', 'nonce', 'code_challenge']) expect(params.get(name)!.length).toBeGreaterThanOrEqual(32)
    // The sign-in in progress, sealed into the browser's cookie (compact JWE, dir + A256GCM): HttpOnly, only for
    // /auth/sso, short-lived, small, and nothing of it readable (the state, verifier and nonce are encrypted).
    const setCookie = start.headers.get('set-cookie')!
    expect(setCookie).toMatch(/^trellis_sso=[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}; Path=\/auth\/sso; HttpOnly; SameSite=Lax; Max-Age=600$/)
    const sealed = person.cookie(base, 'trellis_sso')!
    expect(sealed.length).toBeLessThan(600)
    expect(JSON.parse(Buffer.from(sealed.split('.')[0]!, 'base64url').toString())).toEqual({ alg: 'dir', enc: 'A256GCM' })
    const inClear = sealed.split('.').map((part) => Buffer.from(part, 'base64url').toString('latin1')).join(' ')
    for (const name of ['state', 'nonce']) expect(inClear).not.toContain(params.get(name)!)
    expect(inClear).not.toContain('/account')
    const callback = await person.signInAtProvider(authorization, callbackPrefix())
    expect(callback.searchParams.get('state')).toBe(params.get('state'))
    const done = await person.send(callback)
    expect(done.status).toBe(303)
    expect(done.headers.get('location')).toBe('/account')
    expect(person.cookie(base, 'trellis_sso')).toBeUndefined()
    const account = await api('/v1/account', { cookie: sessionOf(person) })
    expect(account).toMatchObject({ status: 200, body: { user: { email: 'alice@example.com' }, viaSso: true } })
  })

  test('next= only ever leads to a path on this site', async () => {
    // Parsed as a URL: `/\t/host` is `//host` to a browser; a newline or text left to encode (an invalid
    // Location header after the session was made: a 500) leads to `/` too.
    for (const next of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', '/\t/127.0.0.1:19191/x', '/\n/x', '/x\ny', '/\u3002/evil']) {
      const { response } = await signIn('alice', next)
      expect(response.headers.get('location')).toBe('/')
    }
  })

  test('the provider unreachable: a 502 page, and the next attempt discovers again', async () => {
    const lost = { ...env.config, oidc: { ...env.config.oidc!, issuer: 'http://127.0.0.1:9/nowhere' } }
    const broken = testApp(env, { ...deps, config: lost })
    const response = await broken.handle(new Request(`${base}/auth/sso/start`))
    expect(await refusal(response)).toMatchObject({ status: 502, code: 'sso_provider_unavailable' })
    expect((await broken.handle(new Request(`${base}/auth/sso/start`))).status).toBe(502)
  })
})

describe('who the person is', () => {
  test('an unverified email is refused (403), no session', async () => {
    const { person, response } = await signIn('unverified')
    expect(await refusal(response)).toMatchObject({ status: 403, code: 'sso_email_unverified' })
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
  })

  test("Entra ID style: xms_edov is read only from Microsoft's issuer; from any other it says nothing (403 unverified)", async () => {
    // This provider is not Microsoft: its xms_edov is ignored, and without email_verified the email is unverified.
    expect(await refusal((await signIn('entra')).response)).toMatchObject({ status: 403, code: 'sso_email_unverified' })
    expect(await refusal((await signIn('entraUnverified')).response)).toMatchObject({ status: 403, code: 'sso_email_unverified' })
    // Microsoft's issuer form (a real Entra tenant cannot run here): its xms_edov says whether the email is verified.
    const microsoft = 'https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0'
    expect(emailVerified(microsoft, { xms_edov: true })).toBe(true)
    expect(emailVerified(microsoft, { xms_edov: false })).toBe(false)
    expect(emailVerified(microsoft, { email_verified: false, xms_edov: true })).toBe(false)
    for (const other of [provider.issuer, 'https://login.microsoftonline.com.evil.example/x/v2.0', 'https://evil.example/login.microsoftonline.com/x/v2.0', 'https://login.microsoftonline.com/x/v2.0/extra']) {
      expect({ other, verified: emailVerified(other, { xms_edov: true }) }).toEqual({ other, verified: false })
      expect(emailVerified(other, { email_verified: true, xms_edov: false })).toBe(true)
    }
  })

  test('an unknown person with auto-create off is refused (403) and not created', async () => {
    const { person, response } = await signIn('newcomer')
    const page = await refusal(response)
    expect(page).toMatchObject({ status: 403, code: 'sso_unknown_user' })
    expect(page.text).toContain('newcomer@example.com')
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
    expect(count("SELECT count(*) AS n FROM users WHERE email = 'newcomer@example.com'")).toBe(0)
  })

  test('a deactivated user stays refused (403 user_deactivated)', async () => {
    const { person, response } = await signIn('dave')
    expect(await refusal(response)).toMatchObject({ status: 403, code: 'user_deactivated' })
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
  })

  test('auto-create on: the unknown person is created once (no password, no project), logged with initiator identityProvider', async () => {
    serveApp({ ...env.config, oidc: { ...env.config.oidc!, autoCreate: true } })
    try {
      const first = await signIn('newcomer')
      expect(first.response.status).toBe(303)
      const user = queryOne<{ id: number; username: string; password_hash: string | null }>(env.store, "SELECT id, username, password_hash FROM users WHERE email = 'newcomer@example.com'")!
      expect(user).toMatchObject({ username: 'New Comer', password_hash: null })
      const log = queryAll(env.store, 'SELECT * FROM admin_logs WHERE subject_user_id = ?', user.id)
      expect(log).toHaveLength(1)
      expect(log[0]).toMatchObject({ type: 'add', resource: 'user', initiator: 'identityProvider', user_id: null, project_id: null })
      expect(JSON.parse(log[0]!.new_value as string).name).toBe(`newcomer@example.com created at first SSO sign-in (${provider.issuer})`)
      expect(await api('/v1/account', { cookie: sessionOf(first.person) })).toMatchObject({ status: 200, body: { viaSso: true } })
      // An instance administrator reads it on the console's People page (the instance admin log: it has no project).
      execute(env.store, "UPDATE users SET is_instance_admin = TRUE WHERE email = 'alice@example.com'")
      // On the served app's clock (the real one): env.clock is fixed in 2026, and a session made then has expired since.
      const admin = await writeNow(env.store, function* () {
        return yield* createSession(clock, userId(env.store, 'alice'), false)
      })
      const people = await (await fetch(new URL('/admin/users', base), { headers: { cookie: `trellis_session=${admin.id}` } })).text()
      expect(people).toContain('newcomer@example.com created at first SSO sign-in')
      expect(people).toContain('identity provider (SSO)')
      // Created and bound to the provider account: the second sign-in finds the same user by it.
      expect(queryAll(env.store, 'SELECT issuer, subject, user_id FROM sso_identities WHERE user_id = ?', user.id)).toEqual([{ issuer: provider.issuer, subject: 'newcomer', user_id: user.id }])
      expect((await signIn('newcomer')).response.status).toBe(303)
      expect(count("SELECT count(*) AS n FROM users WHERE email = 'newcomer@example.com'")).toBe(1)
      // Auto-create never lets in an unverified email or a deactivated user.
      expect(await refusal((await signIn('unverified')).response)).toMatchObject({ status: 403, code: 'sso_email_unverified' })
      expect(await refusal((await signIn('dave')).response)).toMatchObject({ status: 403, code: 'user_deactivated' })
    } finally {
      serveApp(env.config)
    }
  })
})

describe('provider accounts are bound to users by (issuer, sub); an email is never trusted alone', () => {
  const identities = (subject: string) =>
    queryAll<{ userId: number }>(env.store, 'SELECT user_id AS "userId" FROM sso_identities WHERE issuer = ? AND subject = ?', provider.issuer, subject)
  const link = (person: Person, password: string, headers: Record<string, string> = {}) =>
    person.send(new URL('/auth/sso/link', base), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ password }) })
  /** A JSON error answer: DESIGN §5's body (`error`, `code`, `message`). */
  async function jsonError(response: Response) {
    const body = (await response.json()) as { error: string; code: string; message: string }
    expect(Object.keys(body).sort()).toEqual(['code', 'error', 'message'])
    return { status: response.status, ...body }
  }

  test("a provider account with the instance administrator's verified email is not signed in as them: 409 \"link your account\", no session, nothing bound", async () => {
    const { person, response } = await signIn('impostor')
    expect(response.headers.getSetCookie()).toContain('trellis_sso=; Path=/auth/sso; HttpOnly; SameSite=Lax; Max-Age=0')
    const linkCookie = response.headers.getSetCookie().find((c) => c.startsWith('trellis_sso_link='))!
    expect(linkCookie).toMatch(/^trellis_sso_link=[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+; Path=\/auth\/sso; HttpOnly; SameSite=Lax; Max-Age=600$/)
    const page = await refusal(response)
    expect(page).toMatchObject({ status: 409, code: 'sso_link_required' })
    expect(page.text).toContain('A Trellis account with the email admin@example.com exists')
    expect(page.text).toContain('never links accounts by email alone')
    expect(page.text).toContain('action="/auth/sso/link"')
    expect(page.text).toContain(`trellis user link-sso --email admin@example.com --issuer ${provider.issuer} --subject impostor`)
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
    expect(identities('impostor')).toEqual([])
    // Its sealed cookie holds nothing readable, and without the administrator's password it links nothing.
    const sealed = person.cookie(base, 'trellis_sso_link')!
    expect(sealed.split('.').map((part) => Buffer.from(part, 'base64url').toString('latin1')).join(' ')).not.toContain('admin@example.com')
    expect(await jsonError(await link(person, 'a guess at the password'))).toMatchObject({ status: 401, code: 'invalid_credentials' })
    expect(person.cookie(base, 'trellis_sso_link')).toBe(sealed) // kept for another try
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
    expect(identities('impostor')).toEqual([])
  })

  test('linking with the password: bound, an admin log entry, an SSO session; afterwards the account signs in directly', async () => {
    const bob = userId(env.store, 'bob')
    const first = await signIn('bobSso', '/account')
    expect(await refusal(first.response)).toMatchObject({ status: 409, code: 'sso_link_required' })
    // From another site: refused before anything (the cookie is SameSite=Lax anyway).
    expect(await jsonError(await link(first.person, BOB_PASSWORD, { origin: 'https://evil.example' }))).toMatchObject({ status: 403, code: 'cross_origin' })
    const linked = await link(first.person, BOB_PASSWORD)
    expect(linked.status).toBe(200)
    expect(await linked.json()).toMatchObject({ user: { id: bob, email: 'bob@example.com' } })
    expect(linked.headers.getSetCookie()).toContain('trellis_sso_link=; Path=/auth/sso; HttpOnly; SameSite=Lax; Max-Age=0')
    expect(first.person.cookie(base, 'trellis_sso_link')).toBeUndefined()
    expect(await api('/v1/account', { cookie: sessionOf(first.person) })).toMatchObject({ status: 200, body: { user: { email: 'bob@example.com' }, viaSso: true } })
    expect(identities('bobSso')).toEqual([{ userId: bob }])
    const entries = queryAll(env.store, "SELECT * FROM admin_logs WHERE subject_user_id = ? AND type = 'update' AND resource = 'user'", bob)
    expect(entries).toHaveLength(1)
    expect(entries[0]).toMatchObject({ project_id: null, initiator: 'identityProvider', user_id: bob })
    expect(JSON.parse(entries[0]!.new_value as string).name).toBe(`bob@example.com linked to the SSO account bobSso of ${provider.issuer} with their password at an SSO sign-in`)
    // The cookie is spent: linking again finds nothing to link.
    expect(await jsonError(await link(first.person, BOB_PASSWORD))).toMatchObject({ status: 400, code: 'sso_link_invalid' })
    // Now the provider account signs in as bob at once.
    const again = await signIn('bobSso', '/account')
    expect(again.response.status).toBe(303)
    expect(again.response.headers.get('location')).toBe('/account')
    expect(await api('/v1/account', { cookie: sessionOf(again.person) })).toMatchObject({ status: 200, body: { user: { email: 'bob@example.com' }, viaSso: true } })
  })

  test('the link cookie: missing, altered or older than 10 minutes → 400 sso_link_invalid; the waiting account is linked to the account its email named only', async () => {
    const person = new Person('carolSso')
    expect(await jsonError(await link(person, 'anything at all'))).toMatchObject({ status: 400, code: 'sso_link_invalid', message: expect.stringContaining('no SSO sign-in is waiting') })
    expect(await refusal((await person.send(await throughProvider(person))))).toMatchObject({ status: 409, code: 'sso_link_required' })
    const genuine = person.cookie(base, 'trellis_sso_link')!
    person.setCookie(base, 'trellis_sso_link', `${genuine.slice(0, -3)}AAA`)
    expect(await jsonError(await link(person, 'anything at all'))).toMatchObject({ status: 400, code: 'sso_link_invalid', message: expect.stringContaining('could not be verified') })
    person.setCookie(base, 'trellis_sso_link', genuine)
    clock.offset = 11 * 60_000
    try {
      expect(await jsonError(await link(person, 'anything at all'))).toMatchObject({ status: 400, code: 'sso_link_invalid', message: expect.stringContaining('older than 10 minutes') })
    } finally {
      clock.offset = 0
    }
    // carol has no password: only an operator can link her (next test); another account's password is no use either.
    expect(await jsonError(await link(person, BOB_PASSWORD))).toMatchObject({ status: 401, code: 'invalid_credentials' })
    expect(identities('carolSso')).toEqual([])
  })

  test('a user with an account of this provider bound is never re-bound to another: 409 sso_identity_conflict, no link offered', async () => {
    const { person, response } = await signIn('aliceTwin')
    const page = await refusal(response)
    expect(page).toMatchObject({ status: 409, code: 'sso_identity_conflict' })
    expect(page.text).toContain('never re-linked silently')
    expect(person.cookie(base, 'trellis_sso_link')).toBeUndefined()
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
    expect(identities('aliceTwin')).toEqual([])
    expect(identities('alice')).toEqual([{ userId: userId(env.store, 'alice') }])
  })

  test('a bound account signs in as its user whatever its email says now; a deactivated user stays refused', async () => {
    const erin = await writeNow(env.store, function* () {
      return yield* createUser(clock, { email: 'erin@example.com', username: 'erin', actorId: null })
    })
    await bindAccount('renamed', 'erin')
    // Its email is alice's now, and unverified: it is erin who signs in.
    const { person, response } = await signIn('renamed')
    expect(response.status).toBe(303)
    expect(await api('/v1/account', { cookie: sessionOf(person) })).toMatchObject({ status: 200, body: { user: { id: erin.id, email: 'erin@example.com' }, viaSso: true } })
    await bindAccount('daveSso', 'dave')
    expect(await refusal((await signIn('daveSso')).response)).toMatchObject({ status: 403, code: 'user_deactivated' })
  })

  test('an operator links and unlinks: trellis user link-sso / unlink-sso (a real process), each with an admin log entry', async () => {
    const cli = (...args: string[]) => runCli(['user', ...args, '--data', env.dataDir], { env: processEnv(env) })
    const carol = userId(env.store, 'carol')
    expect(await refusal((await signIn('carolSso')).response)).toMatchObject({ status: 409, code: 'sso_link_required' })
    const linked = await cli('link-sso', '--email', 'carol@example.com', '--issuer', provider.issuer, '--subject', 'carolSso')
    expect(linked).toMatchObject({ code: 0, stdout: `carol@example.com is now linked to the SSO account carolSso of ${provider.issuer}\n` })
    expect((await cli('link-sso', '--email', 'carol@example.com', '--issuer', provider.issuer, '--subject', 'carolSso')).stdout).toContain('was already linked')
    const { person, response } = await signIn('carolSso')
    expect(response.status).toBe(303)
    expect(await api('/v1/account', { cookie: sessionOf(person) })).toMatchObject({ status: 200, body: { user: { email: 'carol@example.com' }, viaSso: true } })
    // Never a second account of the issuer for carol, nor carol's account for someone else.
    const other = await cli('link-sso', '--email', 'carol@example.com', '--issuer', provider.issuer, '--subject', 'somebody-else')
    expect(other.code).toBe(1)
    expect(other.stderr).toContain('is linked to another account of')
    const taken = await cli('link-sso', '--email', 'erin@example.com', '--issuer', provider.issuer, '--subject', 'carolSso')
    expect(taken.code).toBe(1)
    expect(taken.stderr).toContain('already linked to another Trellis user')
    expect(identities('carolSso')).toEqual([{ userId: carol }])
    expect(identities('somebody-else')).toEqual([])
    // Unlinked: the next sign-in asks to link again.
    expect(await cli('unlink-sso', '--email', 'carol@example.com', '--issuer', provider.issuer)).toMatchObject({ code: 0, stdout: `carol@example.com unlinked from the SSO account carolSso of ${provider.issuer}\n` })
    expect(await refusal((await signIn('carolSso')).response)).toMatchObject({ status: 409, code: 'sso_link_required' })
    const entries = queryAll(env.store, "SELECT * FROM admin_logs WHERE subject_user_id = ? AND type = 'update' AND resource = 'user' ORDER BY id", carol).map(
      (e) => ({ initiator: e.initiator, actor: e.user_id, project: e.project_id, previous: e.previous_value && JSON.parse(e.previous_value as string).name, next: JSON.parse(e.new_value as string).name }),
    )
    expect(entries).toEqual([
      { initiator: 'administrator', actor: null, project: null, previous: null, next: `carol@example.com linked to the SSO account carolSso of ${provider.issuer} by an operator (CLI)` },
      {
        initiator: 'administrator',
        actor: null,
        project: null,
        previous: `carol@example.com linked to the SSO account carolSso of ${provider.issuer}`,
        next: `carol@example.com unlinked from ${provider.issuer} by an operator (CLI)`,
      },
    ])
  }, 30_000)
})

describe('refusals of the provider answer, each with a real token from the real provider', () => {
  test('wrong audience: an ID token the provider issued to another client', async () => {
    const person = new Person('alice')
    const callback = await throughProvider(person)
    await provider.nextTokenResponse({ mode: 'replace', idToken: await providerIdToken('other-app', OTHER_SECRET, `${base}/other/callback`, 'n') })
    const page = await refusal(await person.send(callback))
    expect(page).toMatchObject({ status: 401, code: 'sso_id_token_invalid' })
    expect(page.text).toContain('unexpected JWT &quot;aud&quot; (audience) claim value')
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
  })

  test('bad signature: the ID token with its signature altered', async () => {
    const person = new Person('alice')
    const callback = await throughProvider(person)
    await provider.nextTokenResponse({ mode: 'corrupt-signature' })
    const page = await refusal(await person.send(callback))
    expect(page).toMatchObject({ status: 401, code: 'sso_id_token_invalid' })
    expect(page.text).toContain('JWT signature verification failed')
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
  })

  test('expired: the provider issues 60 s ID tokens and Trellis checks it 5 minutes later', async () => {
    const person = new Person('alice')
    const callback = await throughProvider(person)
    clock.offset = 5 * 60_000 // still within the 10 minutes a sign-in may take
    try {
      const page = await refusal(await person.send(callback))
      expect(page).toMatchObject({ status: 401, code: 'sso_id_token_invalid' })
      expect(page.text).toContain('unexpected JWT &quot;exp&quot; (expiration time) claim value')
    } finally {
      clock.offset = 0
    }
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
  })

  test('wrong nonce: an ID token for Trellis from another sign-in', async () => {
    const person = new Person('alice')
    const callback = await throughProvider(person)
    await provider.nextTokenResponse({ mode: 'replace', idToken: await providerIdToken('trellis', SECRET, `${base}/auth/sso/callback`, 'someone-elses-nonce') })
    const page = await refusal(await person.send(callback))
    expect(page).toMatchObject({ status: 401, code: 'sso_id_token_invalid' })
    expect(page.text).toContain('unexpected ID Token &quot;nonce&quot; claim value')
  })

  test('replayed state: a used callback is refused, even with the browser cookie put back', async () => {
    const person = new Person('alice')
    const start = await person.send(new URL('/auth/sso/start', base))
    const binding = person.cookie(base, 'trellis_sso')!
    const callback = await person.signInAtProvider(new URL(start.headers.get('location')!), callbackPrefix())
    expect((await person.send(callback)).status).toBe(303)
    expect(person.cookie(base, 'trellis_sso')).toBeUndefined()
    expect(await refusal(await person.send(callback))).toMatchObject({ status: 400, code: 'sso_state_invalid' })
    // The cookie opens again, but the provider's code is single-use: it refuses the exchange (invalid_grant).
    person.setCookie(base, 'trellis_sso', binding)
    const replayed = await refusal(await person.send(callback))
    expect(replayed).toMatchObject({ status: 400, code: 'sso_state_invalid' })
    expect(replayed.text).toContain('already used or expired at the identity provider')
    expect(replayed.text).toContain('invalid_grant')
    expect(person.cookie(base, 'trellis_session')).toBeDefined() // the first sign-in's, not a new one
  })

  test('missing or unknown state, or another browser, or too late: 400 sso_state_invalid, and the cookie is cleared', async () => {
    const person = new Person('alice')
    const callback = await throughProvider(person)
    const binding = person.cookie(base, 'trellis_sso')!
    /** The callback `url` in `browser` is refused with `says`, its sign-in cookie cleared and no session made. */
    const refused = async (browser: Person, url: URL, says: string) => {
      const response = await browser.send(url)
      expect(response.headers.getSetCookie()).toContain('trellis_sso=; Path=/auth/sso; HttpOnly; SameSite=Lax; Max-Age=0')
      const page = await refusal(response)
      expect(page).toMatchObject({ status: 400, code: 'sso_state_invalid' })
      expect(page.text).toContain(says)
      expect(browser.cookie(base, 'trellis_sso')).toBeUndefined()
      expect(browser.cookie(base, 'trellis_session')).toBeUndefined()
    }
    const withoutState = new URL(callback)
    withoutState.searchParams.delete('state')
    await refused(person, withoutState, 'unknown, already used or was started in another browser')
    person.setCookie(base, 'trellis_sso', binding)
    const forged = new URL(callback)
    forged.searchParams.set('state', 'made-up-state-made-up-state-made-up-state')
    await refused(person, forged, 'unknown, already used or was started in another browser')
    // Another browser presenting this person's callback: without a sign-in cookie, or with its own (another state).
    await refused(new Person('alice'), callback, 'started in another browser (this one has no sign-in in progress)')
    const other = new Person('alice')
    await throughProvider(other)
    await refused(other, callback, 'unknown, already used or was started in another browser')
    // This browser's cookie went with its first refusal: the callback is refused here too now.
    await refused(person, callback, 'this one has no sign-in in progress')
    // Longer than 10 minutes at the provider.
    const slow = new Person('alice')
    const late = await throughProvider(slow)
    clock.offset = 11 * 60_000
    try {
      await refused(slow, late, 'This sign-in took longer than 10 minutes')
    } finally {
      clock.offset = 0
    }
  })

  test('the provider answering with an error (the person cancelled): 401 sso_denied', async () => {
    const person = new Person('alice')
    const start = await person.send(new URL('/auth/sso/start', base))
    const state = new URL(start.headers.get('location')!).searchParams.get('state')!
    const cancelled = new URL(`/auth/sso/callback?error=access_denied&error_description=End-User+aborted&state=${state}`, base)
    expect(await refusal(await person.send(cancelled))).toMatchObject({ status: 401, code: 'sso_denied' })
  })
})

describe('several instances behind a load balancer: the sign-in in progress travels in its sealed cookie', () => {
  const ANOTHER_SECRET = Buffer.from('another-deployment-secret-0123456789abcdef')

  /**
   * Starts the sign-in on instance `a` (the server answers with it), signs in at the provider, then the load
   * balancer sends the provider's redirect back to instance `b`. Two testApps over one store are two instances:
   * each has its own OidcSignIn and memory; they share the database and (unless told otherwise) the secret.
   */
  async function acrossInstances(a: ReturnType<typeof testApp>, b: ReturnType<typeof testApp>, next = '/account') {
    const person = new Person('alice')
    try {
      app = a
      const callback = await throughProvider(person, next)
      app = b
      return { person, response: await person.send(callback) }
    } finally {
      serveApp(env.config)
    }
  }

  test('started on instance A, completed on instance B (same TRELLIS_SECRET): signed in', async () => {
    const { person, response } = await acrossInstances(testApp(env, deps), testApp(env, deps))
    expect(response.status).toBe(303)
    expect(response.headers.get('location')).toBe('/account')
    expect(person.cookie(base, 'trellis_sso')).toBeUndefined()
    expect(await api('/v1/account', { cookie: sessionOf(person) })).toMatchObject({ status: 200, body: { user: { email: 'alice@example.com' }, viaSso: true } })
  })

  test('instances with different secrets: the cookie does not open on B, refused', async () => {
    const { person, response } = await acrossInstances(testApp(env, deps), testApp(env, { ...deps, secret: ANOTHER_SECRET }))
    const page = await refusal(response)
    expect(page).toMatchObject({ status: 400, code: 'sso_state_invalid' })
    expect(page.text).toContain('sealed by a Trellis instance with another TRELLIS_SECRET')
    expect(person.cookie(base, 'trellis_sso')).toBeUndefined()
    expect(person.cookie(base, 'trellis_session')).toBeUndefined()
  })

  test('an unexpected failure on B (its database gone) clears the cookie too', async () => {
    const broken = testEnv()
    await broken.store.close()
    try {
      const { person, response } = await acrossInstances(testApp(env, deps), testApp(broken, { ...deps, config: env.config, secret: env.secret }))
      expect(response.status).toBeGreaterThanOrEqual(500)
      expect(response.headers.getSetCookie()).toContain('trellis_sso=; Path=/auth/sso; HttpOnly; SameSite=Lax; Max-Age=0')
      expect(person.cookie(base, 'trellis_sso')).toBeUndefined()
      expect(person.cookie(base, 'trellis_session')).toBeUndefined()
    } finally {
      broken.cleanup()
    }
  })

  test('a tampered or foreign cookie is refused (never a 500); the genuine one, put back, still signs in', async () => {
    const person = new Person('alice')
    const callback = await throughProvider(person)
    const genuine = person.cookie(base, 'trellis_sso')!
    const pending = (await openSignIn(purposeKey(env.secret, SIGN_IN_COOKIE_PURPOSE), genuine, clock.now())) as PendingSignIn
    expect(pending.state).toBe(callback.searchParams.get('state')!)
    /** `value` with the middle character of its `part`-th dot-separated segment changed. */
    const altered = (value: string, part: number) => {
      const parts = value.split('.')
      const segment = parts[part]!
      const at = Math.floor(segment.length / 2)
      parts[part] = segment.slice(0, at) + (segment[at] === 'A' ? 'B' : 'A') + segment.slice(at + 1)
      return parts.join('.')
    }
    const header = (json: object) => Buffer.from(JSON.stringify(json)).toString('base64url')
    const variants: Record<string, string> = {
      'ciphertext altered': altered(genuine, 3),
      'tag altered': altered(genuine, 4),
      'iv altered': altered(genuine, 2),
      'header altered': [header({ alg: 'dir', enc: 'A128GCM' }), ...genuine.split('.').slice(1)].join('.'),
      'unprotected header': [header({ alg: 'none' }), ...genuine.split('.').slice(1)].join('.'),
      // Sealed with the raw instance secret (the webhook-signing key), not the key derived for this purpose.
      'webhook key': await sealSignIn(new Uint8Array(env.secret.subarray(0, 32)), pending),
      'another secret': await sealSignIn(purposeKey(ANOTHER_SECRET, SIGN_IN_COOKIE_PURPOSE), pending),
      'another purpose': await sealSignIn(purposeKey(env.secret, 'something else'), pending),
      truncated: genuine.slice(0, -5),
      garbage: 'x',
      'five empty parts': '....',
      long: 'a'.repeat(3000),
    }
    for (const [name, value] of Object.entries(variants)) {
      person.setCookie(base, 'trellis_sso', value)
      const page = await refusal(await person.send(callback))
      expect({ name, status: page.status, code: page.code }).toEqual({ name, status: 400, code: 'sso_state_invalid' })
      expect(page.text).toContain('could not be verified')
      expect(person.cookie(base, 'trellis_sso')).toBeUndefined()
    }
    // None of them reached the provider: its code is unspent, and the genuine cookie completes the sign-in.
    person.setCookie(base, 'trellis_sso', genuine)
    expect((await person.send(callback)).status).toBe(303)
  })

  test('an expired cookie is refused even when it opens; the same sign-in resealed in time is accepted', async () => {
    const key = purposeKey(env.secret, SIGN_IN_COOKIE_PURPOSE)
    const person = new Person('alice')
    const callback = await throughProvider(person)
    const pending = (await openSignIn(key, person.cookie(base, 'trellis_sso')!, clock.now())) as PendingSignIn
    expect(pending.expiresAt).toBeGreaterThan(clock.now() + 9 * 60_000)
    expect(pending.expiresAt).toBeLessThanOrEqual(clock.now() + 10 * 60_000)
    person.setCookie(base, 'trellis_sso', await sealSignIn(key, { ...pending, expiresAt: clock.now() - 1000 }))
    const page = await refusal(await person.send(callback))
    expect(page).toMatchObject({ status: 400, code: 'sso_state_invalid' })
    expect(page.text).toContain('took longer than 10 minutes')
    person.setCookie(base, 'trellis_sso', await sealSignIn(key, { ...pending, expiresAt: clock.now() + 60_000 }))
    expect((await person.send(callback)).status).toBe(303)
  })

  test('behind https the cookie is Secure, also when cleared', async () => {
    const https = { 'x-forwarded-proto': 'https' }
    const start = await app.handle(new Request(`${base}/auth/sso/start`, { headers: https }))
    expect(start.status).toBe(303)
    expect(start.headers.get('set-cookie')).toMatch(/^trellis_sso=[A-Za-z0-9_.-]+; Path=\/auth\/sso; HttpOnly; SameSite=Lax; Max-Age=600; Secure$/)
    const refused = await app.handle(new Request(`${base}/auth/sso/callback?state=x&code=y`, { headers: https }))
    expect(refused.status).toBe(400)
    expect(refused.headers.get('set-cookie')).toBe('trellis_sso=; Path=/auth/sso; HttpOnly; SameSite=Lax; Max-Age=0; Secure')
  })

  test('the cookie stays small: next= up to 1,024 characters is kept (cookie under 2 KB), a longer one leads to /', async () => {
    const longest = `/${'n'.repeat(1023)}`
    const kept = new Person('alice')
    const callback = await throughProvider(kept, longest)
    expect(kept.cookie(base, 'trellis_sso')!.length).toBeLessThan(2048)
    expect((await kept.send(callback)).headers.get('location')).toBe(longest)
    expect((await signIn('alice', `${longest}n`)).response.headers.get('location')).toBe('/')
  })

  test('the key is derived per purpose (HKDF): neither the secret itself nor another purpose\'s key', () => {
    const key = purposeKey(env.secret, SIGN_IN_COOKIE_PURPOSE)
    expect(key).toHaveLength(32)
    expect(Buffer.from(key).equals(env.secret.subarray(0, 32))).toBe(false)
    expect(Buffer.from(key).equals(Buffer.from(purposeKey(env.secret, 'something else')))).toBe(false)
    expect(Buffer.from(key).equals(Buffer.from(purposeKey(env.secret, SIGN_IN_COOKIE_PURPOSE)))).toBe(true)
  })
})

// ── SSO projects ────────────────────────────────────────────────────────────

describe('an SSO project', () => {
  let ssoToken: string
  let passwordToken: string

  beforeAll(async () => {
    const { person } = await signIn('alice')
    const created = await api('/v1/account/tokens', { method: 'POST', cookie: sessionOf(person), json: { name: 'sso-made', projectName: 'Acme', preset: 'read-write' } })
    expect(created.status).toBe(201)
    ssoToken = created.body!.token as string
    // A token made before the project turned SSO on (nothing can make one now).
    passwordToken = (
      await writeNow(env.store, function* () {
        return yield* createToken(clock, { name: 'old', userId: userId(env.store, 'alice'), projectId: 1, scopes: ['all'], expiresAt: null, createdWithSso: false, actorId: null, maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER })
      })
    ).value
  })

  test('a token generated in the SSO session is marked so, in listings and in the admin log', async () => {
    const { person } = await signIn('alice')
    const mine = await api('/v1/account/tokens', { cookie: sessionOf(person) })
    const byName = new Map((mine.body!.data as { name: string; createdWithSso: boolean }[]).map((t) => [t.name, t.createdWithSso]))
    expect(byName.get('sso-made')).toBe(true)
    expect(byName.get('old')).toBe(false)
    const project = await api('/v1/project/Acme/api-tokens', { token: ssoToken })
    expect((project.body!.data as { name: string; createdWithSso: boolean }[]).find((t) => t.name === 'sso-made')!.createdWithSso).toBe(true)
    const log = await api('/v1/project/Acme/admin-logs?resource=api-token&extensions=true', { token: ssoToken })
    const names = (log.body!.data as { newValue?: { name: string } }[]).map((e) => e.newValue?.name ?? '')
    expect(names.some((n) => n.startsWith('sso-made (') && n.endsWith(', generated in an SSO session'))).toBe(true)
    expect(names.some((n) => n.startsWith('old (') && !n.includes('SSO'))).toBe(true)
  })

  test('every API family and the webhook: the SSO token works, the other gets the spec 403', async () => {
    const calls: [string, { method?: string; json?: unknown }][] = [
      [NOTES, {}],
      ['/v1/project/Acme/environment/production/activity-logs', {}],
      ['/v1/project/Acme/admin-logs', {}],
      ['/v1/project/Acme/api-tokens', {}],
      ['/v1/account/tokens', {}],
      ['/v1/project/Acme/environment/production/workflow-runs', {}],
    ]
    for (const [path, init] of calls) {
      expect({ path, status: (await api(path, { ...init, token: ssoToken })).status }).toEqual({ path, status: 200 })
      const refused = await api(path, { ...init, token: passwordToken })
      expect({ path, status: refused.status, code: refused.body!.code }).toEqual({ path, status: 403, code: 'sso_required' })
      expect(refused.body!.message).toBe('This project uses SSO: the token must be generated while logged in with SSO')
    }
    const refusedHook = await api(hook, { method: 'POST', token: passwordToken, json: { record_id: 'ord_1001' } })
    expect({ status: refusedHook.status, code: refusedHook.body!.code }).toEqual({ status: 403, code: 'sso_required' })
    const hooked = await api(hook, { method: 'POST', token: ssoToken, json: { record_id: 'ord_1001' } })
    expect(hooked.status).toBe(202)
  })

  test('a password session cannot open the project in the console (told to sign in with SSO), nor make tokens for it', async () => {
    const password = `trellis_session=${(await runNow(env.store, createSession(clock, userId(env.store, 'alice'), false))).id}`
    const page = await fetch(`${base}/p/Acme`, { headers: { cookie: password } })
    expect(page.status).toBe(403)
    const text = await page.text()
    expect(text).toContain('sign in with SSO')
    expect(text).toContain('href="/auth/sso/start?next=%2Fp%2FAcme"')
    const made = await api('/v1/account/tokens', { method: 'POST', cookie: password, json: { name: 'x', projectName: 'Acme' } })
    expect({ status: made.status, code: made.body!.code }).toEqual({ status: 403, code: 'sso_required' })
    // The same person signed in with SSO opens it.
    const { person } = await signIn('alice', '/p/Acme')
    expect((await fetch(`${base}/p/Acme`, { headers: { cookie: sessionOf(person) } })).status).toBe(200)
    // A project without SSO opens either way.
    expect((await fetch(`${base}/p/Open`, { headers: { cookie: password } })).status).toBe(200)
  })

  test('turning sso on cuts off the non-SSO tokens at the next request; turning it off restores nothing that was revoked', async () => {
    const { person } = await signIn('alice')
    const sso = (await api('/v1/account/tokens', { method: 'POST', cookie: sessionOf(person), json: { name: 'open-sso', projectName: 'Open', preset: 'read-write' } })).body!
    const plain = (name: string) =>
      writeNow(env.store, function* () {
            return yield* createToken(clock, { name, userId: userId(env.store, 'alice'), projectId: 2, scopes: ['all'], expiresAt: null, createdWithSso: false, actorId: null, maxLiveTokens: DEFAULT_LIVE_TOKENS_PER_USER })
          },
      )
    const kept = (await plain('open-kept')).value
    const revoked = await plain('open-revoked')
    const openNotes = '/v1/project/Open/environment/production/notes'
    expect((await api(openNotes, { token: kept })).status).toBe(200)
    const ctx = { store: env.store, clock, secret: env.secret, baseUrl: base }
    await applyNow({ projects: [{ name: 'Open', sso: true }] }, ctx)
    for (const token of [kept, revoked.value]) {
      const refused = await api(openNotes, { token })
      expect({ status: refused.status, code: refused.body!.code }).toEqual({ status: 403, code: 'sso_required' })
    }
    expect((await api(openNotes, { token: sso.token as string })).status).toBe(200)
    // The admin sees which tokens are cut off, and revokes one of them.
    const listed = (await api('/v1/project/Open/api-tokens', { token: sso.token as string })).body!.data as { id: number; name: string; createdWithSso: boolean }[]
    expect(listed.map((t) => [t.name, t.createdWithSso]).sort()).toEqual([['open-kept', false], ['open-revoked', false], ['open-sso', true]])
    expect((await api(`/v1/project/Open/api-tokens/${revoked.token.id}`, { method: 'DELETE', token: sso.token as string })).status).toBe(204)
    await applyNow({ projects: [{ name: 'Open', sso: false }] }, ctx)
    expect((await api(openNotes, { token: kept })).status).toBe(200)
    expect((await api(openNotes, { token: revoked.value })).status).toBe(401)
    expect((await api(openNotes, { token: sso.token as string })).status).toBe(200)
  })
})

describe('signing out', () => {
  test('ends the Trellis session; the login page then offers the provider end-session URL', async () => {
    const { person } = await signIn('alice')
    const cookie = sessionOf(person)
    const account = await (await fetch(`${base}/account`, { headers: { cookie } })).text()
    expect(account).toContain('data-next="/login?signedOut=sso"')
    expect((await fetch(`${base}/auth/logout`, { method: 'POST', headers: { cookie } })).status).toBe(204)
    expect((await api('/v1/account', { cookie })).status).toBe(401)
    const login = await (await fetch(`${base}/login?signedOut=sso`)).text()
    expect(login).toContain('href="/auth/sso/logout"')
    const out = await fetch(`${base}/auth/sso/logout`, { redirect: 'manual' })
    expect(out.status).toBe(303)
    const endSession = new URL(out.headers.get('location')!)
    expect(endSession.origin + endSession.pathname).toBe(`${provider.issuer}/session/end`)
    expect(endSession.searchParams.get('client_id')).toBe('trellis')
    expect(endSession.searchParams.get('post_logout_redirect_uri')).toBe(`${base}/login`)
    // The provider accepts it: its own "sign out?" page, not an error.
    const confirm = await fetch(endSession, { redirect: 'manual' })
    expect(confirm.status).toBe(200)
  })

  test('a provider without an end-session endpoint (as Google): the page says to sign out on its own site', async () => {
    const plain = await startOidcProvider({ clients: [], accounts: {}, endSession: false })
    try {
      const config = { ...env.config, oidc: { ...env.config.oidc!, issuer: plain.issuer } }
      const response = await testApp(env, { ...deps, config }).handle(new Request(`${base}/auth/sso/logout`))
      expect(response.status).toBe(200)
      expect(await response.text()).toContain('offers no sign-out link')
    } finally {
      await plain.stop()
    }
  })

  test('serve refuses half a configuration before starting (exit 2, naming the setting)', async () => {
    const dir = tempDir()
    try {
      const result = await runCli(['serve', '--data', dir.path, '--port', '0', '--oidc-issuer', 'https://id.example.com'])
      expect(result.code).toBe(2)
      expect(result.stderr).toContain('TRELLIS_OIDC_CLIENT_ID')
    } finally {
      dir.cleanup()
    }
  })
})

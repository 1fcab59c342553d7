/**
 * The SSO tests' identity provider and a browserless person: `startOidcProvider` runs panva's oidc-provider
 * (test/support/oidc-provider.mjs) under Node on loopback; `Person` follows redirects with a cookie jar per
 * origin and fills in the provider's own login and consent forms, as a browser would.
 */
import { join } from 'node:path'
import { expect } from 'bun:test'

export interface ProviderClient {
  client_id: string
  client_secret: string
  redirect_uris: string[]
  post_logout_redirect_uris?: string[]
}

export interface OidcProvider {
  issuer: string
  /** Changes the ID token of the next token endpoint answer (see oidc-provider.mjs). */
  nextTokenResponse(change: { mode: 'replace'; idToken: string } | { mode: 'corrupt-signature' }): Promise<void>
  stop(): Promise<void>
}

export async function startOidcProvider(options: {
  clients: ProviderClient[]
  accounts: Record<string, Record<string, unknown>>
  idTokenTtl?: number
  endSession?: boolean
  emailInIdToken?: boolean
}): Promise<OidcProvider> {
  const child = Bun.spawn(['node', join(import.meta.dir, 'oidc-provider.mjs'), JSON.stringify({ port: 0, ...options })], {
    stdout: 'pipe',
    stderr: 'pipe',
  })
  // Its stderr (start-up warnings) is read all along, so a full pipe never blocks the provider.
  let errors = ''
  void (async () => {
    for await (const chunk of child.stderr) errors += new TextDecoder().decode(chunk)
  })()
  const reader = child.stdout.getReader()
  let seen = ''
  // A provider that never says ready is stopped after 15 s, which ends the read below.
  const timer = setTimeout(() => child.kill(), 15_000)
  while (!/^ready (\S+)$/m.test(seen)) {
    const { value, done } = await reader.read()
    if (done) {
      clearTimeout(timer)
      throw new Error(`oidc-provider exited before it was ready: ${seen}${errors}`)
    }
    seen += new TextDecoder().decode(value)
  }
  clearTimeout(timer)
  void (async () => {
    while (!(await reader.read()).done);
  })()
  const issuer = /^ready (\S+)$/m.exec(seen)![1]!
  return {
    issuer,
    async nextTokenResponse(change) {
      const response = await fetch(`${issuer}/__test/next-token-response`, { method: 'POST', body: JSON.stringify(change) })
      expect(response.status).toBe(204)
    },
    async stop() {
      child.kill('SIGTERM')
      await child.exited
    },
  }
}

/** Someone with a browserless user agent: cookies per origin, redirects followed by hand. */
export class Person {
  private readonly jar = new Map<string, Map<string, string>>()

  constructor(private readonly login: string) {}

  cookie(origin: string, name: string): string | undefined {
    return this.jar.get(origin)?.get(name)
  }

  setCookie(origin: string, name: string, value: string): void {
    if (!this.jar.has(origin)) this.jar.set(origin, new Map())
    this.jar.get(origin)!.set(name, value)
  }

  /** One request with this person's cookies for the URL's origin; keeps the cookies it sets. */
  async send(url: URL, init: RequestInit = {}): Promise<Response> {
    const cookies = [...(this.jar.get(url.origin) ?? new Map<string, string>())].map(([k, v]) => `${k}=${v}`).join('; ')
    const headers = new Headers(init.headers)
    if (cookies) headers.set('cookie', cookies)
    const response = await fetch(url, { ...init, headers, redirect: 'manual' })
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq).trim()
      const value = pair!.slice(eq + 1).trim()
      const expired = value === '' || attributes.some((a) => /^\s*max-age=0\s*$/i.test(a) || /^\s*expires=thu, 01 jan 1970/i.test(a))
      if (expired) this.jar.get(url.origin)?.delete(name)
      else this.setCookie(url.origin, name, value)
    }
    return response
  }

  /**
   * From a URL that leads to the provider: follows redirects, signs in and consents on the provider's own
   * pages, and stops at (without requesting) the first redirect to `stopAt` — the relying party's callback.
   */
  async signInAtProvider(start: URL, stopAt: string): Promise<URL> {
    let url = start
    let init: RequestInit = {}
    for (let step = 0; step < 20; step++) {
      const response = await this.send(url, init)
      init = {}
      if (response.status >= 300 && response.status < 400) {
        const next = new URL(response.headers.get('location')!, url)
        if (next.href.startsWith(stopAt)) return next
        url = next
        continue
      }
      const page = await response.text()
      if (response.status !== 200) throw new Error(`${url.href} → ${response.status}: ${page.slice(0, 300)}`)
      const action = /<form[^>]*action="([^"]+)"/.exec(page)?.[1]
      const prompt = /name="prompt" value="([^"]+)"/.exec(page)?.[1]
      if (!action || !prompt) throw new Error(`no login or consent form at ${url.href}: ${page.slice(0, 300)}`)
      const form = new URLSearchParams({ prompt })
      if (prompt === 'login') form.set('login', this.login), form.set('password', 'any')
      url = new URL(action.replaceAll('&amp;', '&'), url)
      init = { method: 'POST', body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } }
    }
    throw new Error('too many steps at the provider')
  }
}

/**
 * Console sign-in through an OpenID Connect provider, with openid-client (no hand-written JWT checks):
 * discovery from the issuer URL, authorization code flow with PKCE, `state` and `nonce`; the ID token's issuer,
 * audience, expiry, `nonce` and signature (against the provider's JWKS) are checked by the library.
 *
 * A sign-in in progress is kept by no instance: it is sealed into the HttpOnly cookie of the browser that started
 * it (pending-sign-in.ts), so whichever instance receives the provider's redirect completes it, and only in that
 * browser. Short-lived; a callback whose cookie is missing, altered, sealed under another secret, expired, or
 * for another `state` is refused; the cookie is cleared at the callback whatever the outcome, and a replayed
 * callback with the cookie put back is refused by the provider (its authorization code is single-use and bound to
 * the PKCE verifier).
 */
import * as client from 'openid-client'
import type { OidcConfig } from '../../config.ts'
import type { Clock } from '../../lib/clock.ts'
import { purposeKey } from '../../lib/secret.ts'
import {
  LINK_COOKIE_PURPOSE,
  MAX_NEXT_LENGTH,
  openLink,
  openSignIn,
  type PendingLink,
  type PendingSignIn,
  sealLink,
  sealSignIn,
  SIGN_IN_COOKIE_PURPOSE,
} from './pending-sign-in.ts'

export const SSO_COOKIE = 'trellis_sso'
/** Holds a sign-in waiting to be linked to an existing account (pending-sign-in.ts, PendingLink). */
export const SSO_LINK_COOKIE = 'trellis_sso_link'
/** How long a person may take at the provider's login page. */
export const SIGN_IN_TTL_MS = 10 * 60_000
export const CALLBACK_PATH = '/auth/sso/callback'
export const SCOPES = 'openid email profile'

/** A refused SSO sign-in: the status and code of the page shown. */
export class SsoRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/** The claims Trellis uses, from the verified ID token (and UserInfo when the ID token lacks the email). */
export interface SsoClaims {
  issuer: string
  subject: string
  email: string | undefined
  emailVerified: boolean
  name: string | undefined
}

interface Provider {
  server: client.ServerMetadata
  auth: client.ClientAuth
}

export class OidcSignIn {
  private discovered: Promise<Provider> | undefined
  private jwksCache: client.ExportedJWKSCache | undefined
  /** Seals the sign-in cookie; the same on every instance that shares the instance secret. */
  private readonly cookieKey: Uint8Array
  /** Seals the link cookie (another purpose, another key). */
  private readonly linkKey: Uint8Array
  readonly redirectUri: string

  constructor(
    private readonly settings: OidcConfig,
    baseUrl: string,
    private readonly clock: Clock,
    secret: Buffer,
  ) {
    this.redirectUri = `${baseUrl}${CALLBACK_PATH}`
    this.cookieKey = purposeKey(secret, SIGN_IN_COOKIE_PURPOSE)
    this.linkKey = purposeKey(secret, LINK_COOKIE_PURPOSE)
  }

  private get insecure(): boolean {
    return new URL(this.settings.issuer).protocol === 'http:' // config.ts allows it only for loopback issuers
  }

  /** The provider's metadata, discovered once; a failed discovery is retried by the next sign-in. */
  private provider(): Promise<Provider> {
    this.discovered ??= this.discover().catch((error: unknown) => {
      this.discovered = undefined
      throw new SsoRefusal(502, 'sso_provider_unavailable', `The identity provider could not be reached: ${messageOf(error)}`)
    })
    return this.discovered
  }

  private async discover(): Promise<Provider> {
    const { issuer, clientId, clientSecret } = this.settings
    const found = await client.discovery(new URL(issuer), clientId, undefined, undefined, {
      execute: this.insecure ? [client.allowInsecureRequests] : [],
      timeout: 10,
    })
    const server = found.serverMetadata()
    const methods = server.token_endpoint_auth_methods_supported ?? ['client_secret_basic']
    const auth =
      clientSecret === undefined
        ? client.None()
        : methods.includes('client_secret_basic')
          ? client.ClientSecretBasic(clientSecret)
          : client.ClientSecretPost(clientSecret)
    return { server, auth }
  }

  /**
   * A client configuration for one step. Made afresh each time (cheap) so the ID token's times are checked
   * against Trellis's clock (injectable) as it is now; the provider's keys are cached across them.
   */
  private async configuration(): Promise<client.Configuration> {
    const { server, auth } = await this.provider()
    const skewSeconds = Math.round((this.clock.now() - Date.now()) / 1000)
    const configuration = new client.Configuration(server, this.settings.clientId, { [client.clockSkew]: skewSeconds }, auth)
    configuration.timeout = 10
    if (this.insecure) client.allowInsecureRequests(configuration)
    // Also check the ID token's signature against the provider's JWKS (the library skips it by default for
    // tokens fetched over TLS from the token endpoint).
    client.enableNonRepudiationChecks(configuration)
    if (this.jwksCache) client.setJwksCache(configuration, this.jwksCache)
    return configuration
  }

  /** The provider's authorization URL for a new sign-in, and the sealed sign-in to set as this browser's cookie. */
  async start(next: string): Promise<{ url: string; sealed: string }> {
    const configuration = await this.configuration()
    const pending: PendingSignIn = {
      state: client.randomState(),
      codeVerifier: client.randomPKCECodeVerifier(),
      nonce: client.randomNonce(),
      next: next.length <= MAX_NEXT_LENGTH ? next : '/',
      expiresAt: this.clock.now() + SIGN_IN_TTL_MS,
    }
    const { state, codeVerifier, nonce } = pending
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: this.redirectUri,
      scope: SCOPES,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
    })
    return { url: url.href, sealed: await sealSignIn(this.cookieKey, pending) }
  }

  /**
   * Completes a sign-in from the query of the provider's redirect to the callback and this browser's sealed
   * sign-in cookie (the caller clears it whatever the outcome): the cookie must open, be in time and carry the
   * query's `state`; then the code exchange and every ID token check. Returns the claims and where to go next.
   */
  async finish(query: URLSearchParams, sealed: string | undefined): Promise<{ claims: SsoClaims; next: string }> {
    // The redirect URL as registered (behind a proxy the request's own URL may differ), with the provider's answer.
    const callbackUrl = new URL(this.redirectUri)
    callbackUrl.search = query.toString()
    const state = query.get('state')
    const pending = await this.pendingSignIn(sealed)
    if (state === null || pending.state !== state) {
      throw new SsoRefusal(400, 'sso_state_invalid', 'This sign-in is unknown, already used or was started in another browser: start again with "Sign in with SSO"')
    }
    const error = callbackUrl.searchParams.get('error')
    if (error !== null) {
      const description = callbackUrl.searchParams.get('error_description')
      throw new SsoRefusal(401, 'sso_denied', `The identity provider refused the sign-in: ${error}${description ? ` (${description.slice(0, 200)})` : ''}`)
    }
    const configuration = await this.configuration()
    let tokens
    try {
      tokens = await client.authorizationCodeGrant(configuration, callbackUrl, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: state!,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      })
    } catch (error) {
      if (error instanceof client.ResponseBodyError && error.error === 'invalid_grant') {
        // The provider's code is single-use and short-lived: a replayed callback (its cookie put back) ends here.
        const said = `${error.error}${error.error_description ? `: ${error.error_description.slice(0, 200)}` : ''}`
        throw new SsoRefusal(400, 'sso_state_invalid', `This sign-in is already used or expired at the identity provider (${said}): start again with "Sign in with SSO"`)
      }
      throw new SsoRefusal(401, 'sso_id_token_invalid', `The identity provider's answer was refused: ${messageOf(error)}`)
    } finally {
      this.jwksCache = client.getJwksCache(configuration) ?? this.jwksCache
    }
    const idToken = tokens.claims()!
    let email = typeof idToken.email === 'string' ? idToken.email : undefined
    let verified = emailVerified(idToken.iss, idToken)
    let name = typeof idToken.name === 'string' ? idToken.name : undefined
    if ((email === undefined || saysWhetherVerified(idToken.iss, idToken) === undefined) && configuration.serverMetadata().userinfo_endpoint) {
      // Providers that follow the spec to the letter put scope claims only in UserInfo (whose `sub` must match).
      const info = await client.fetchUserInfo(configuration, tokens.access_token, idToken.sub).catch((error: unknown) => {
        throw new SsoRefusal(401, 'sso_id_token_invalid', `The identity provider's user info was refused: ${messageOf(error)}`)
      })
      if (typeof info.email === 'string') {
        email = info.email
        verified = emailVerified(idToken.iss, info)
      }
      name ??= typeof info.name === 'string' ? info.name : undefined
    }
    return {
      claims: { issuer: idToken.iss, subject: idToken.sub, email, emailVerified: verified, name },
      next: pending.next,
    }
  }

  /** The sealed pending link, for this browser's link cookie (it lives as long as a sign-in may take). */
  sealLink(pending: Omit<PendingLink, 'expiresAt'>): Promise<string> {
    return sealLink(this.linkKey, { ...pending, expiresAt: this.clock.now() + SIGN_IN_TTL_MS })
  }

  /** The link sealed in this browser's cookie, or the refusal saying why there is none. */
  async pendingLink(sealed: string | undefined): Promise<PendingLink> {
    const pending = sealed ? await openLink(this.linkKey, sealed, this.clock.now()) : 'missing'
    if (typeof pending !== 'string') return pending
    const why = { missing: 'no SSO sign-in is waiting to be linked in this browser', expired: `the SSO sign-in to link is older than ${SIGN_IN_TTL_MS / 60_000} minutes`, unreadable: 'the SSO sign-in to link could not be verified' }[pending]
    throw new SsoRefusal(400, 'sso_link_invalid', `Nothing to link: ${why}. Start again with "Sign in with SSO"`)
  }

  /** The provider's end-session URL (RP-initiated logout), or null when it offers none. */
  async endSessionUrl(postLogoutRedirect: string): Promise<string | null> {
    const configuration = await this.configuration().catch(() => null)
    if (!configuration?.serverMetadata().end_session_endpoint) return null
    return client.buildEndSessionUrl(configuration, { client_id: this.settings.clientId, post_logout_redirect_uri: postLogoutRedirect }).href
  }

  /** The sign-in sealed in this browser's cookie, or the refusal saying why there is none. */
  private async pendingSignIn(sealed: string | undefined): Promise<PendingSignIn> {
    if (!sealed) {
      throw new SsoRefusal(400, 'sso_state_invalid', 'This sign-in was started in another browser (this one has no sign-in in progress): start again with "Sign in with SSO"')
    }
    const pending = await openSignIn(this.cookieKey, sealed, this.clock.now())
    if (pending === 'expired') {
      throw new SsoRefusal(400, 'sso_state_invalid', `This sign-in took longer than ${SIGN_IN_TTL_MS / 60_000} minutes: start again with "Sign in with SSO"`)
    }
    if (pending === 'unreadable') {
      throw new SsoRefusal(
        400,
        'sso_state_invalid',
        'This sign-in could not be verified (its cookie was altered, or sealed by a Trellis instance with another TRELLIS_SECRET): start again with "Sign in with SSO"',
      )
    }
    return pending
  }
}

/** Microsoft Entra ID's issuers: `https://login.microsoftonline.com/{tenant}/v2.0`. */
const MICROSOFT_ISSUER = /^https:\/\/login\.microsoftonline\.com\/[^/?#]+\/v2\.0$/

/**
 * Whether the claims say the email is verified: `email_verified: true`. Entra ID never sends it, and says instead
 * with `xms_edov: true` (optional claim) that the email's domain is verified by its owner — read only from a token
 * Microsoft issued: any other provider may put any claim in its tokens, and `xms_edov` means nothing there.
 */
export function emailVerified(issuer: string, claims: Record<string, unknown>): boolean {
  return saysWhetherVerified(issuer, claims) === true
}

/** What the claims say of the email (undefined: nothing), with only the issuer's own claims read (emailVerified). */
function saysWhetherVerified(issuer: string, claims: Record<string, unknown>): boolean | undefined {
  if (claims.email_verified !== undefined) return claims.email_verified === true
  if (MICROSOFT_ISSUER.test(issuer) && claims.xms_edov !== undefined) return claims.xms_edov === true
  return undefined
}

/**
 * The most precise message in the library's error chain (openid-client wraps oauth4webapi's, which names the
 * claim: `unexpected JWT "aud" (audience) claim value`), with its code. Never the token or a response body.
 */
function messageOf(error: unknown): string {
  let inner: unknown = error
  for (let depth = 0; depth < 5 && inner instanceof Error && inner.cause instanceof Error; depth++) inner = inner.cause
  if (!(inner instanceof Error)) return String(inner).slice(0, 300)
  const code = (inner as Error & { code?: unknown }).code
  return `${inner.message.slice(0, 300)}${typeof code === 'string' ? ` (${code})` : ''}`
}

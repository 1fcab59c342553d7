/**
 * GET /auth/sso/start (→ the provider's login page), GET /auth/sso/callback (→ a session marked `viaSso`, or the
 * "link your account" page), POST /auth/sso/link (the password that links the waiting sign-in to its account →
 * a session marked `viaSso`), GET /auth/sso/logout (→ the provider's end-session page). Present only when an issuer
 * is configured. Browser navigations and the console's own form, not API calls: refusals of the navigations are
 * pages, and none of it is in /openapi.json.
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { type Html, html } from '../../console/html.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { clientAddressOf } from '../../http/client-address.ts'
import { conflict, HttpError } from '../../lib/errors.ts'
import { readCookie, sessionIdOf } from '../../lib/session-cookie.ts'
import { refuseUnstorableText } from '../../http/storable-text.ts'
import { queryOf } from '../../http/list.ts'
import { htmlResponse, layout, safeNext } from '../../console/page.ts'
import { userObject } from '../directory/users.ts'
import { isHttps, sessionCookie } from './index.ts'
import { Session } from './model.ts'
import { OidcSignIn, SIGN_IN_TTL_MS, SSO_COOKIE, SSO_LINK_COOKIE, SsoRefusal } from './oidc.ts'
import { linkSsoIdentity, resolveSsoUser, SsoLinkRequired } from './oidc-service.ts'
import { PasswordCheck } from './password-check.ts'
import { createSession, deleteSession, SESSION_TTL_MS } from './sessions.ts'

/**
 * Carries the sealed sign-in in progress (or the sign-in waiting to be linked), so only this browser completes it;
 * Lax, so the provider's top-level redirect back still carries it.
 */
function ssoCookie(value: string, maxAgeSeconds: number, secure: boolean, name = SSO_COOKIE): string {
  return [`${name}=${value}`, 'Path=/auth/sso', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`, ...(secure ? ['Secure'] : [])].join('; ')
}

function seeOther(location: string, cookies: string[] = []): Response {
  const headers = new Headers({ location, 'cache-control': 'no-store' })
  for (const cookie of cookies) headers.append('set-cookie', cookie)
  return new Response(null, { status: 303, headers })
}

/**
 * Rule (c) of oidc-service.ts: the verified email is an existing account's, and this provider account is not linked
 * to it. Its password links them (the form posts to /auth/sso/link, which reads the sign-in from the link cookie).
 */
function linkPage(required: SsoLinkRequired, next: string): Html {
  const { user, account } = required
  return layout({
    title: 'Link your account',
    body: html`<p class="notice" data-code="${required.code}">${required.message}.</p>
<p>Sign in once with your Trellis password to link them: from then on, <strong>Sign in with SSO</strong> with this account signs you in as ${user.email}.</p>
<form class="login" data-api action="/auth/sso/link" data-next="${next}">
  <label>Email <input type="email" value="${user.email}" autocomplete="username" readonly></label>
  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
  <p class="form-error" role="alert"></p>
  <button type="submit">Link and sign in</button>
</form>
<p class="muted">No Trellis password? Ask an administrator to link it: <code>trellis user link-sso --email ${user.email} --issuer ${account.issuer} --subject ${account.subject}</code></p>
<p><a href="/login">Back to sign-in</a></p>`,
  })
}

export function ssoModule(deps: AppDeps) {
  const routes = new Elysia({ name: 'sso-routes', detail: { hide: true } })
  const settings = deps.config.oidc
  if (!settings) return routes
  const signIn = new OidcSignIn(settings, deps.config.baseUrl, deps.clock, deps.secret)
  const passwords = new PasswordCheck(deps)
  const clientAddress = clientAddressOf(deps.config.trustProxy)

  const refusalPage = (refusal: SsoRefusal, secure: boolean) => {
    deps.logger.warn('SSO sign-in refused', { code: refusal.code, reason: refusal.message })
    const response = htmlResponse(
      layout({
        title: 'SSO sign-in failed',
        body: html`<p class="error" data-code="${refusal.code}">${refusal.message}</p><p><a href="/login">Back to sign-in</a></p>`,
      }),
      refusal.status,
    )
    response.headers.append('set-cookie', ssoCookie('', 0, secure))
    return response
  }

  return routes
    .get('/auth/sso/start', async ({ request }) => {
      const secure = isHttps(deps, request)
      try {
        const { url, sealed } = await signIn.start(safeNext(queryOf(request).next))
        return seeOther(url, [ssoCookie(sealed, SIGN_IN_TTL_MS / 1000, secure)])
      } catch (error) {
        if (error instanceof SsoRefusal) return refusalPage(error, secure)
        throw error
      }
    })
    // The sign-in cookie is cleared whatever the outcome: a refusal page, success, or an unexpected error.
    .get('/auth/sso/callback', async ({ request, set }) => {
      const secure = isHttps(deps, request)
      const cookies = request.headers.get('cookie')
      let next = '/'
      try {
        const finished = await signIn.finish(new URL(request.url).searchParams, readCookie(cookies, SSO_COOKIE))
        next = finished.next
        // A password session this browser had ends: the new one is the SSO one (one write, like a password login's).
        const previous = sessionIdOf(request)
        const { user, session } = await write(deps.store, function* () {
          const user = yield* resolveSsoUser(deps.clock, finished.claims, settings.autoCreate)
          if (previous) yield* deleteSession(previous)
          return { user, session: (yield* createSession(deps.clock, user.id, true)) }
        })
        deps.logger.info('SSO sign-in', { userId: user.id })
        // Checked again: a sign-in started by an older version carries a `next` that was never parsed.
        return seeOther(safeNext(next), [sessionCookie(session.id, SESSION_TTL_MS / 1000, secure), ssoCookie('', 0, secure)])
      } catch (error) {
        if (error instanceof SsoLinkRequired) {
          deps.logger.info('SSO sign-in waits to be linked to an existing account', { userId: error.user.id })
          const { issuer, subject } = error.account
          const sealed = await signIn.sealLink({ issuer, subject, userId: error.user.id, email: error.user.email, next })
          const response = htmlResponse(linkPage(error, next), error.status)
          response.headers.append('set-cookie', ssoCookie('', 0, secure))
          response.headers.append('set-cookie', ssoCookie(sealed, SIGN_IN_TTL_MS / 1000, secure, SSO_LINK_COOKIE))
          return response
        }
        if (error instanceof SsoRefusal) return refusalPage(error, secure)
        set.headers['set-cookie'] = ssoCookie('', 0, secure) // onError's answer carries it
        throw error
      }
    })
    .use(authPlugin(deps))
    // The waiting sign-in's account, linked by its password: then signed in as an SSO session (its provider vouched
    // for it moments ago, in this browser). A wrong password keeps the link cookie, for another try.
    .post(
      '/auth/sso/link',
      async ({ body, request, set }) => {
        const secure = isHttps(deps, request)
        const pending = await signIn.pendingLink(readCookie(request.headers.get('cookie'), SSO_LINK_COOKIE)).catch((error: unknown) => {
          throw error instanceof SsoRefusal ? new HttpError(error.status, error.code, error.message) : error
        })
        const user = await passwords.user({ email: pending.email, address: clientAddress(request) }, body.password)
        const previous = sessionIdOf(request)
        const session = await write(deps.store, function* () {
          // The email may have changed hands since the provider's answer: the link goes to the account it named.
          if (user.id !== pending.userId) throw conflict('sso_link_invalid', 'The account to link changed since the SSO sign-in: start again with "Sign in with SSO"')
          const account = { issuer: pending.issuer, subject: pending.subject }
          yield* linkSsoIdentity(deps.clock, user, account, { actorId: user.id, initiator: 'identityProvider', how: 'with their password at an SSO sign-in' })
          if (previous) yield* deleteSession(previous)
          return yield* createSession(deps.clock, user.id, true)
        })
        deps.logger.info('SSO account linked', { userId: user.id })
        set.headers['set-cookie'] = [sessionCookie(session.id, SESSION_TTL_MS / 1000, secure), ssoCookie('', 0, secure, SSO_LINK_COOKIE)]
        return { user: userObject(user), expiresAt: new Date(session.expiresAt).toISOString() }
      },
      { sessionCall: true, beforeHandle: refuseUnstorableText, body: t.Object({ password: t.String({ maxLength: 1024 }) }), response: { 200: Session } },
    )
    .get('/auth/sso/logout', async () => {
      // Trellis's own session ends with POST /auth/logout; this only sends the browser on to the provider's.
      const url = await signIn.endSessionUrl(`${deps.config.baseUrl}/login`)
      if (url) return seeOther(url)
      return htmlResponse(
        layout({
          title: 'Signed out of Trellis',
          body: html`<p>Your identity provider offers no sign-out link: to end your session there too, sign out on its own site.</p><p><a href="/login">Sign in again</a></p>`,
        }),
      )
    })
}


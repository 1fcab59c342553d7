/**
 * GET /auth/sso/start (→ the provider's login page), GET /auth/sso/callback (→ a session marked `viaSso`),
 * GET /auth/sso/logout (→ the provider's end-session page). Present only when an issuer is configured.
 * Browser navigations, not API calls: refusals are pages, and none of it is in /openapi.json.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html } from '../../console/html.ts'
import { write } from '../../db/write.ts'
import { readCookie, sessionIdOf } from '../../http/session-cookie.ts'
import { queryOf } from '../../http/list.ts'
import { htmlResponse, layout, safeNext } from '../console/page.ts'
import { isHttps, sessionCookie } from './index.ts'
import { OidcSignIn, SIGN_IN_TTL_MS, SSO_COOKIE, SsoRefusal } from './oidc.ts'
import { resolveSsoUser } from './oidc-service.ts'
import { createSession, deleteSession, SESSION_TTL_MS } from './sessions.ts'

/** Carries the sealed sign-in in progress, so only this browser completes it; Lax, so the provider's top-level redirect back still carries it. */
function ssoCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return [`${SSO_COOKIE}=${value}`, 'Path=/auth/sso', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`, ...(secure ? ['Secure'] : [])].join('; ')
}

function seeOther(location: string, cookies: string[] = []): Response {
  const headers = new Headers({ location, 'cache-control': 'no-store' })
  for (const cookie of cookies) headers.append('set-cookie', cookie)
  return new Response(null, { status: 303, headers })
}

export function ssoModule(deps: AppDeps) {
  const routes = new Elysia({ name: 'sso-routes', detail: { hide: true } })
  const settings = deps.config.oidc
  if (!settings) return routes
  const signIn = new OidcSignIn(settings, deps.config.baseUrl, deps.clock, deps.secret)

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
      try {
        const { claims, next } = await signIn.finish(new URL(request.url).searchParams, readCookie(cookies, SSO_COOKIE))
        // A password session this browser had ends: the new one is the SSO one (one write, like a password login's).
        const previous = sessionIdOf(request)
        const { user, session } = await write(deps.store, function* () {
          const user = yield* resolveSsoUser(deps.clock, claims, settings.autoCreate)
          if (previous) yield* deleteSession(previous)
          return { user, session: (yield* createSession(deps.clock, user.id, true)) }
        })
        deps.logger.info('SSO sign-in', { userId: user.id })
        // Checked again: a sign-in started by an older version carries a `next` that was never parsed.
        return seeOther(safeNext(next), [sessionCookie(session.id, SESSION_TTL_MS / 1000, secure), ssoCookie('', 0, secure)])
      } catch (error) {
        if (error instanceof SsoRefusal) return refusalPage(error, secure)
        set.headers['set-cookie'] = ssoCookie('', 0, secure) // onError's answer carries it
        throw error
      }
    })
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


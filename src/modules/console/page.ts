/**
 * What every console page shares: the session check (no session → the login page) and errors rendered as pages
 * instead of JSON; the layout and HTML responses are src/console/page.ts.
 */
import type { AppDeps } from '../../deps.ts'
import { html, type Html, path } from '../../console/html.ts'
import { htmlResponse, layout, redirect } from '../../console/page.ts'
import { asHttpError } from '../../http/errors.ts'
import { refuseUnstorableText } from '../../http/storable-text.ts'
import { type Query, queryOf } from '../../http/list.ts'
import { sessionOf } from '../auth/service.ts'
import type { SessionUser } from '../auth/sessions.ts'
import { read } from '../../db/read.ts'
import { countInboxTasks } from '../../db/tasks.ts'

export interface ConsoleRequest {
  deps: AppDeps
  /** With how they signed in (a password session cannot open an SSO project) and how many tasks wait for them (the header's Inbox). */
  user: SessionUser & { viaSso: boolean; inboxCount: number }
  params: Record<string, string>
  query: Query
  url: URL
  request: Request
}

/**
 * A console page handler: the signed-in user, or a redirect to /login?next=…; an HttpError (403, 404, a bad
 * query parameter) or a storage fault (503) becomes an error page with its status, message and headers.
 */
export function consolePage(deps: AppDeps, render: (request: ConsoleRequest) => Html | Response | Promise<Html | Response>) {
  return async ({ request, params }: { request: Request; params: Record<string, string> }): Promise<Response> => {
    // A page shown is a page logged: a browser's speculative prefetch is refused (it discards non-2xx answers),
    // so the audit trail never records a view nobody asked for.
    if (isPrefetch(request)) return new Response(null, { status: 503, headers: { 'cache-control': 'no-store' } })
    const url = new URL(request.url)
    const session = await read(deps.store, sessionOf(deps.clock, request))
    if (!session) return redirect(`/login?next=${encodeURIComponent(url.pathname + url.search)}`)
    try {
      refuseUnstorableText({ params })
      // An empty filter field means no filter (the forms send every field).
      const query = Object.fromEntries(Object.entries(queryOf(request)).filter(([, value]) => value !== ''))
      const inboxCount = await read(deps.store, countInboxTasks(session.user.id, session.viaSso))
      const out = await render({ deps, user: { ...session.user, viaSso: session.viaSso, inboxCount }, params, query, url, request })
      return out instanceof Response ? out : htmlResponse(out)
    } catch (caught) {
      const error = asHttpError(caught)
      if (!error) throw caught
      const ssoLink = error.code === 'sso_required' && deps.config.oidc ? html`<p><a class="button" href="${ssoStartPath(url.pathname + url.search)}">Sign in with SSO</a></p>` : ''
      const page = htmlResponse(layout({ title: error.toBody().error, user: session.user, body: html`<p class="error">${error.message}</p>${ssoLink}<p><a href="/">Home</a></p>` }), error.status)
      for (const [name, value] of Object.entries(error.headers)) page.headers.set(name, value)
      return page
    }
  }
}

/** Where "Sign in with SSO" starts, coming back to `next` afterwards. */
export const ssoStartPath = (next: string) => `/auth/sso/start?next=${encodeURIComponent(next)}`

function isPrefetch(request: Request): boolean {
  const purpose = `${request.headers.get('sec-purpose') ?? ''} ${request.headers.get('purpose') ?? ''} ${request.headers.get('x-moz') ?? ''}`
  return purpose.includes('prefetch')
}

/** ISO time as the API renders it, shortened for tables (UTC). */
export function when(iso: string | null | undefined): Html | string {
  return iso ? html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')}</time>` : html`<span class="muted">—</span>`
}

/**
 * A "next page" link: the same page with `createdAt.lt` set to the last row's time, the API's own paging recipe —
 * exact where createdAt follows id order (logs always; notes while their environment is in time order).
 */
export function olderLink(url: URL, hasMore: boolean, lastCreatedAt: string | undefined): Html | string {
  if (!hasMore || !lastCreatedAt) return ''
  const next = new URL(url)
  next.searchParams.set('createdAt.lt', lastCreatedAt)
  return html`<p class="pager"><a href="${next.pathname + next.search}">Older →</a></p>`
}

export const projectPath = (project: string, ...rest: string[]) => path('p', project, ...rest)
export const renderingPath = (project: string, environment: string, team: string, ...rest: string[]) =>
  path('p', project, 'e', environment, 't', team, ...rest)

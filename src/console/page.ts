/**
 * The page frame every console page and the SSO sign-in pages share: the layout, HTML responses with a strict
 * Content-Security-Policy (pageResponse), redirects, and where a browser may be sent after sign-in.
 */
import { html, type Html, pageResponse } from './html.ts'

/** A stand-in origin for parsing `next`: only "does it stay on the origin it is resolved against" matters. */
const OWN_ORIGIN = 'http://trellis.invalid'

/**
 * Where to send a browser after sign-in: `next` when it is a path on this site, else `/`. Decided by URL parsing,
 * not by prefixes: browsers drop tabs and newlines and read `\` as `/`, so `/\t/host` is `//host`, another origin.
 * Only a path already in the form the URL parser writes it is kept (no control characters, nothing left to
 * percent-encode), so the Location header is always valid and means to the browser what it meant here.
 */
export function safeNext(next: string | undefined): string {
  if (!next || !next.startsWith('/')) return '/'
  let url: URL
  try {
    url = new URL(next, OWN_ORIGIN)
  } catch {
    return '/'
  }
  const path = url.pathname + url.search + url.hash
  return url.origin === OWN_ORIGIN && path === next ? path : '/'
}

export function htmlResponse(body: Html, status = 200): Response {
  return pageResponse(`<!doctype html>\n${body.text}`, status)
}

export function redirect(location: string): Response {
  return new Response(null, { status: 303, headers: { location, 'cache-control': 'no-store' } })
}

export interface Crumb {
  label: string
  href?: string
}

export interface PageSpec {
  title: string
  /** `inboxCount`: the tasks waiting for them (the header's Inbox link; absent on pages outside the console). */
  user?: { email: string; username: string; viaSso?: boolean; isInstanceAdmin?: boolean; inboxCount?: number }
  crumbs?: Crumb[]
  body: Html
  /** A page's own scripts and style sheets (same origin), after the console's. */
  assets?: { scripts?: string[]; styles?: string[] }
}

/**
 * The signed-in person's links: one <details> disclosure that works without script. On a phone it is a "Menu"
 * button opening a panel; on a wide screen console.css shows its links in the header row and hides the button.
 */
function userMenu(user: NonNullable<PageSpec['user']>): Html {
  return html`<details class="menu">
  <summary>Menu</summary>
  <nav class="menu-items" aria-label="Account">
    <span class="muted who">${user.email}</span>
    ${user.isInstanceAdmin ? html`<a href="/admin/users">People</a> <a href="/admin/projects">All projects</a> <a href="/admin/outbound">Outbound</a>` : ''}
    <a href="/account">Account</a>
    <form class="inline" data-api action="/auth/logout" data-next="${user.viaSso ? '/login?signedOut=sso' : '/login'}"><button type="submit">Sign out</button></form>
  </nav>
  </details>`
}

/** The header's Inbox link with the count of tasks waiting for the person; a live page reads it again with its regions. */
/** `count`: capped where counting stops (src/db/tasks.ts `INBOX_COUNT_CAP`), shown as 99+. */
function inboxLink(count: number): Html {
  const shown = count > 99 ? '99+' : String(count)
  return html`<a id="inbox-link" class="inbox" data-refresh href="/inbox" title="Tasks waiting for you">Inbox${count > 0 ? html` <span class="count">${shown}</span>` : ''}</a>`
}

/** The header's search: projects, records, workflows and people the signed-in person may see (`/search`). */
function searchBox(): Html {
  return html`<form class="inline search" method="get" action="/search" role="search"><input name="q" type="search" placeholder="Search" aria-label="Search projects, records, workflows, people" minlength="2" maxlength="200" size="14"></form>`
}

export function layout(spec: PageSpec): Html {
  const crumbs = spec.crumbs ?? []
  return html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${spec.title} · Trellis</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/console.css">
<script src="/console/console.js" defer></script>
<script src="/console/live.js" defer></script>
${(spec.assets?.styles ?? []).map((href) => html`<link rel="stylesheet" href="${href}">\n`)}${(spec.assets?.scripts ?? []).map((src) => html`<script src="${src}" defer></script>\n`)}</head>
<body>
<header>
  <a class="brand" href="/">Trellis</a>
  ${spec.user ? html`${spec.user.inboxCount === undefined ? '' : inboxLink(spec.user.inboxCount)}\n  ${searchBox()}\n  ${userMenu(spec.user)}` : ''}
</header>
<main>
  ${crumbs.length > 0 ? html`<nav class="crumbs">${crumbs.map((c, i) => html`${i > 0 ? ' / ' : ''}${c.href ? html`<a href="${c.href}">${c.label}</a>` : c.label}`)}</nav>` : ''}
  <h1>${spec.title}</h1>
  <p id="flash" class="flash" role="status"></p>
  ${spec.body}
</main>
</body>
</html>`
}

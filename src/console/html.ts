/**
 * HTML for the console, built with one tagged template: every interpolated value is escaped (Bun.escapeHTML)
 * unless it is already `Html` (a fragment built the same way, or `trustedHtml` for sanitised note content).
 * Also the one way every page (console, /setup, /docs) and its script and style files are answered.
 */
import { textResponseDetail } from '../http/openapi.ts'

export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[]

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return ''
  if (part instanceof Html) return part.text
  if (Array.isArray(part)) return part.map(render).join('')
  return Bun.escapeHTML(String(part))
}

export function html(strings: TemplateStringsArray, ...parts: Part[]): Html {
  let out = strings[0]!
  for (let i = 0; i < parts.length; i++) out += render(parts[i]!) + strings[i + 1]!
  return new Html(out)
}

/** Markup that was made safe elsewhere: note messages, sanitised with the allow-list on write. */
export function trustedHtml(text: string): Html {
  return new Html(text)
}

/**
 * A table inside a box that scrolls sideways on its own, so a wide table never makes the page wider than a phone's
 * screen. Focusable, so a keyboard can scroll it too. Every console table is wrapped by this; one with `rowActions`
 * stacks its rows as cards under a phone's width instead (nothing to scroll, so not focusable).
 */
export function scrollingTable(table: Html, options: { rowActions?: boolean } = {}): Html {
  // A table with buttons in its rows (Revoke, Deactivate, Remove, Resend) becomes one card per row on a phone
  // (console.css `.stack`): its actions are on screen, not past a sideways scroll.
  return options.rowActions ? html`<div class="table-scroll stack">${table}</div>` : html`<div class="table-scroll" tabindex="0">${table}</div>`
}

/** `/p/Acme/e/production` from unencoded segments. */
export function path(...segments: string[]): string {
  return `/${segments.map(encodeURIComponent).join('/')}`
}

/** Every HTML page Trellis serves (console, /setup, /docs): no inline script or style, nothing from elsewhere, never framed. */
const PAGE_SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
}

/** An HTML page with the security headers above. */
export function pageResponse(text: string, status = 200): Response {
  return new Response(text, { status, headers: { 'content-type': 'text/html; charset=utf-8', ...PAGE_SECURITY_HEADERS } })
}

/** A handler answering a page's script or style sheet (embedded text), typed and never sniffed. */
export function assetHandler(text: unknown, type: 'text/javascript' | 'text/css', cacheControl = 'no-cache'): () => Response {
  return () =>
    new Response(text as string, { headers: { 'content-type': `${type}; charset=utf-8`, 'cache-control': cacheControl, 'x-content-type-options': 'nosniff' } })
}

/** A page's script or style sheet with its /openapi.json entry (for the pages the document lists: /setup, /docs). */
export function pageAsset(text: unknown, type: 'text/javascript' | 'text/css', description: string, cacheControl?: string) {
  return { handle: assetHandler(text, type, cacheControl), detail: textResponseDetail(type, description) }
}

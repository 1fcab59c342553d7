/**
 * Where templates may go in an `http` step's URL (docs/security.md "Security: outbound requests"): the path and the query,
 * never the scheme or the authority (user, host, port). The workflow definition refuses a template there when it
 * is saved, and the executor refuses to send a URL whose origin is not the one written.
 */

/** A `{{…}}` placeholder in a step's string; src/executor/template.ts fills them. */
export const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g

/**
 * The scheme and authority of a URL as written — `https://api.example.com:8443` of
 * `https://api.example.com:8443/orders?id=1` — up to the first `/`, `?`, `#` or `\` after `//`, where the URL parser
 * ends an http(s) authority; '' when the text does not start with `scheme://`.
 */
export function urlHead(url: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\/[^/\\?#]*/i.exec(url)?.[0] ?? ''
}

/** The first placeholder in a URL template's scheme or authority (`{{record.id}}`), or null when there is none. */
export function placeholderInHead(template: string): string | null {
  // Each placeholder masked, so that whatever it holds cannot end the authority early.
  const end = urlHead(template.replace(PLACEHOLDER, (match) => '\u0000'.repeat(match.length))).length
  for (const match of template.matchAll(PLACEHOLDER)) if (match.index < end) return match[0]
  return null
}

/** Why a template may not be in a URL's scheme or authority: one wording for the save and for the run. */
export function placeholderInHeadMessage(placeholder: string): string {
  return `${placeholder} is in the URL's scheme or host: templates may fill only its path and query (write the scheme and host in the step)`
}

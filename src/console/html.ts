/**
 * HTML for the console, built with one tagged template: every interpolated value is escaped (Bun.escapeHTML)
 * unless it is already `Html` (a fragment built the same way, or `trustedHtml` for sanitised note content).
 */
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

/** `/p/Acme/e/production` from unencoded segments. */
export function path(...segments: string[]): string {
  return `/${segments.map(encodeURIComponent).join('/')}`
}

/**
 * What a run may show of the requests its steps sent (docs/security.md "Security: outbound requests"): every member who can
 * read a run sees its errors and step outputs, so a URL is shown without its user, password, query and fragment,
 * and the values a step sends as credentials are taken out of what it records.
 */

export const REDACTED = '[redacted]'

const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i

/**
 * A URL as runs show it: `https://svc:pw@api.example.com/hook?key=…#…` is `https://api.example.com/hook?[redacted]`
 * (a fragment alone becomes `#[redacted]`). Works on text that does not parse as a URL too.
 */
export function redactUrl(url: string | URL): string {
  const text = String(url)
  const scheme = SCHEME.exec(text)?.[0] ?? ''
  // The authority ends at the first / ? # or \; the user and password end at its last @.
  const rest = text.slice(scheme.length).replace(/^[^/?#\\]*@/, '')
  const cut = rest.search(/[?#]/)
  return scheme + (cut < 0 ? rest : `${rest.slice(0, cut)}${rest[cut]}${REDACTED}`)
}

/** Every `scheme://…` in a text redacted (`redactUrl`): for messages, which may quote a URL anywhere. */
export function redactUrlsIn(text: string): string {
  return text.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi, (url) => redactUrl(url))
}

/** Values shorter than this are not taken out of text: they would blank ordinary words and numbers. */
export const SHORTEST_SECRET = 8

/** Headers that carry no credential: their values stay in what a step records. */
const PLAIN_HEADER = /^(accept(-[a-z]+)?|content-(type|language|encoding)|user-agent|cache-control|pragma|if-[a-z-]+|x-trellis-run-id)$/i

/** The values to take out of what a step records, and how. */
export class StepSecrets {
  private readonly values: string[]

  constructor(values: Iterable<string>) {
    // The longest first, so that a value containing another is taken out whole.
    this.values = [...new Set(values)].filter((value) => value.length >= SHORTEST_SECRET).sort((a, b) => b.length - a.length)
  }

  /**
   * What an `http` step sends as credentials: the value of every header but the plain ones (and, of `Bearer …`,
   * `Basic …`, the part after the scheme), the URL's user and password and the Basic credentials made of them, and
   * the query values written in the step itself (`template`: placeholders are record data, not the step's secrets).
   */
  static ofHttpStep(template: string, url: URL, headers: Record<string, string>): StepSecrets {
    const values: string[] = []
    for (const [name, value] of Object.entries(headers)) {
      if (PLAIN_HEADER.test(name)) continue
      values.push(value, value.replace(/^\S+\s+/, ''))
    }
    if (url.username || url.password) {
      const user = decodeURIComponent(url.username)
      const password = decodeURIComponent(url.password)
      values.push(url.username, url.password, user, password, Buffer.from(`${user}:${password}`).toString('base64'))
    }
    const query = template.split('#')[0]!.split('?').slice(1).join('?')
    for (const pair of query.split('&')) {
      const value = pair.slice(pair.indexOf('=') + 1)
      if (!pair.includes('=') || value.includes('{{')) continue
      values.push(value, safeDecode(value))
    }
    const hash = template.split('#').slice(1).join('#')
    if (hash && !hash.includes('{{')) values.push(hash, safeDecode(hash))
    return new StepSecrets(values)
  }

  /** The longest value taken out (an answer is read that much further, so that one cut at the limit is found whole). */
  get longest(): number {
    return this.values[0]?.length ?? 0
  }

  /** `text` with every value replaced by `[redacted]`. */
  scrub(text: string): string {
    return this.values.reduce((scrubbed, value) => scrubbed.split(value).join(REDACTED), text)
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return text
  }
}

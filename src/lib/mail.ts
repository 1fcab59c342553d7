/**
 * E-mail's rules (docs/mail.md) that configuration, the queue and the sender share: the SMTP server's URL and the
 * from-address as the operator writes them, the retry schedule, and what an SMTP failure may say. The SMTP URL may
 * hold a password: nothing here ever puts the URL, its user or its password into a message.
 */
import { backoffDelayMs } from './backoff.ts'

/** Attempts of one message before it is marked failed: with the default first wait, about 4 hours of trying. */
export const MAIL_MAX_ATTEMPTS = 10
/** The first wait between attempts, unless TRELLIS_MAIL_RETRY_MS says otherwise. */
export const DEFAULT_MAIL_RETRY_MS = 30_000
/** The longest wait, in units of the first one: 120 × 30 s = 1 h. */
export const MAIL_BACKOFF_CAP = 120
/** How long one attempt (connect, greeting, authentication, the message) may take, unless TRELLIS_SMTP_TIMEOUT_SECONDS says otherwise. */
export const DEFAULT_SMTP_TIMEOUT_SECONDS = 30

/** The wait after the `failed`th failed attempt: `baseMs` doubling up to an hour (at the default), ±25 %. */
export function mailRetryDelayMs(failed: number, baseMs: number, random = Math.random): number {
  return backoffDelayMs(failed, baseMs, MAIL_BACKOFF_CAP, random)
}

/** How long a sender holds a message it sends: the attempt's whole time bound twice, and room to record it. */
export const mailLeaseMs = (timeoutMs: number) => 2 * timeoutMs + 5_000

/** What is wrong with an SMTP URL, or null. The answer never quotes the URL (it may hold a password). */
export function smtpUrlProblem(text: string): string | null {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'must be a URL: smtp://[user:password@]host[:port] or smtps://…'
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') return `must be an smtp:// or smtps:// URL, not ${url.protocol.slice(0, -1)}://`
  if (url.hostname === '') return 'must name the SMTP server (smtp://host:port)'
  return null
}

/** The SMTP server as logs and pages may show it: scheme, host and port, never the user or password. */
export function describeSmtpServer(smtpUrl: string): string {
  const url = new URL(smtpUrl)
  const port = url.port || (url.protocol === 'smtps:' ? '465' : '587')
  return `${url.protocol}//${url.hostname}:${port}`
}

/** A from-address as configured — `trellis@example.com` or `Trellis <trellis@example.com>` — with its domain, or the problem. */
export function parseMailFrom(text: string): { from: string; domain: string } | { problem: string } {
  const address = /<([^<>\s]+)>\s*$/.exec(text)?.[1] ?? text
  const match = /^[^@\s<>]+@([A-Za-z0-9.-]+)$/.exec(address)
  if (!match || /[\r\n]/.test(text)) return { problem: 'must be an e-mail address, optionally with a name: Trellis <trellis@example.com>' }
  return { from: text, domain: match[1]!.toLowerCase() }
}

/**
 * An SMTP attempt's failure as it is recorded and logged: the library's message with the URL's user and password
 * taken out (in both their raw and URL-encoded forms), at most 500 characters.
 */
export function smtpErrorText(error: unknown, smtpUrl: string): string {
  let text = error instanceof Error ? error.message : String(error)
  const url = new URL(smtpUrl)
  for (const part of [url.password, url.username]) {
    if (part === '') continue
    for (const form of new Set([part, decodeURIComponent(part)])) text = text.split(form).join('[redacted]')
  }
  return text.slice(0, 500)
}

/**
 * Whether an SMTP failure is for good: the server refused the message or its recipient with a 5xx reply. A refused
 * sign-in (EAUTH) is the operator's to fix and is retried; a 4xx reply, a refused or lost connection, a timeout too.
 */
export function isPermanentSmtpFailure(error: unknown): boolean {
  const { code, responseCode } = error as { code?: unknown; responseCode?: unknown }
  return code !== 'EAUTH' && typeof responseCode === 'number' && responseCode >= 500 && responseCode < 600
}

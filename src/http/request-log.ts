/** One JSON log line per request: method, path (no query, webhook signature redacted), status, ms. */
import type { Logger } from '../lib/logger.ts'
import { requestPath } from './server-request.ts'

/**
 * Webhook URLs are credentials: keep the payload (useful to find the workflow), hide the signature. Wider than the
 * route on purpose, so that no spelling, routed or not, writes a signature: from the first segment that reads
 * `hooks` in any case or encoding (`%68ooks`, `HOOKS`, `hooks.`), every later segment keeps only its leading
 * payload characters (base64url, after percent-decoding) and the rest becomes `.[redacted]`.
 */
export function redactPath(path: string): string {
  if (!/hooks|%/i.test(path)) return path // the common case, without decoding anything
  const segments = path.split('/')
  const first = segments.findIndex((segment) => readAs(segment).includes('hooks'))
  if (first === -1) return path
  const kept = (segment: string, i: number) => i < first || (i === first && readAs(segment).replace(/\.+$/, '') === 'hooks')
  return segments.map((segment, i) => (kept(segment, i) ? segment : redactSegment(segment))).join('/')
}

function redactSegment(segment: string): string {
  const text = decodedOnce(segment)
  const payload = /^[A-Za-z0-9_-]*/.exec(text)?.[0] ?? ''
  return payload.length === text.length ? segment : `${payload}.[redacted]`
}

function decodedOnce(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** A segment as a reader of the log reads it: lower case, percent-decoded until it no longer changes (`%2568` is `h`). */
function readAs(segment: string): string {
  let current = segment
  for (let round = 0; round < 3; round++) {
    const next = decodedOnce(current)
    if (next === current) break
    current = next
  }
  return current.toLowerCase()
}

export function withRequestLog(
  handle: (request: Request) => Response | Promise<Response>,
  logger: Logger,
): (request: Request) => Promise<Response> {
  return async (request) => {
    const started = performance.now()
    let status = 500
    try {
      const response = await handle(request)
      status = response.status
      return response
    } finally {
      logger.info('request', {
        method: request.method,
        path: redactPath(requestPath(request)),
        status,
        ms: Math.round((performance.now() - started) * 100) / 100,
      })
    }
  }
}

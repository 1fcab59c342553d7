/** One JSON log line per request: method, path (no query, webhook signature redacted), status, ms. */
import type { Logger } from '../lib/logger.ts'
import { requestPath } from './server-request.ts'

/**
 * Webhook URLs are credentials: keep the payload (useful to find the workflow), hide the rest. Wider than the route
 * on purpose, so that no spelling, routed or not, writes a signature: from the first segment that reads `hooks` in
 * any case or encoding (`%68ooks`, `HOOKS`, `hooks.`), everything after it becomes `.[redacted]` but a leading
 * payload — base64url (after percent-decoding) that decodes to a JSON object, which a signature never does.
 * `/v1/hooks/<payload>.<signature>` and `/v1/hooks/<payload>/<signature>` are both logged as `…/<payload>.[redacted]`.
 */
export function redactPath(path: string): string {
  if (!/hooks|%/i.test(path)) return path // the common case, without decoding anything
  const segments = path.split('/')
  const first = segments.findIndex((segment) => readAs(segment).includes('hooks'))
  if (first === -1) return path
  const hooks = readAs(segments[first]!).replace(/\.+$/, '') === 'hooks' ? first + 1 : first
  let start = hooks
  while (start < segments.length && segments[start] === '') start++ // `hooks//x`: the empty segments stay
  if (start === segments.length) return path
  const rest = decodedOnce(segments.slice(start).join('/'))
  const payload = leadingPayload(rest)
  const kept = segments.slice(0, start).join('/')
  return payload.length === rest.length ? path : `${kept}/${payload}.[redacted]`
}

/** The base64url text `rest` starts with, when it is a webhook payload (a JSON object); else nothing. */
function leadingPayload(rest: string): string {
  const run = /^[A-Za-z0-9_-]{1,512}/.exec(rest)?.[0] ?? ''
  try {
    const value = JSON.parse(Buffer.from(run, 'base64url').toString('utf8')) as unknown
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? run : ''
  } catch {
    return ''
  }
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

/** One JSON log line per request: method, path (no query, webhook signature redacted), status, ms. */
import type { Logger } from '../lib/logger.ts'

/**
 * Webhook URLs are credentials: keep the payload (useful to find the workflow), hide the signature.
 * The router decodes `%2E` to the `.` separator, so the encoded form is a separator here too.
 */
export function redactPath(pathname: string): string {
  return pathname.replace(/^(\/v1\/hooks\/[^/]*?)(?:\.|%2[eE])[^/]*/, '$1.[redacted]')
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
        path: redactPath(new URL(request.url).pathname),
        status,
        ms: Math.round((performance.now() - started) * 100) / 100,
      })
    }
  }
}

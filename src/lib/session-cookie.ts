/** The console session cookie on the wire: its name, the one reader of it, and the Origin rule of session changes. */
import { forbidden } from './errors.ts'

export const SESSION_COOKIE = 'trellis_session'

/** Reads one cookie from the Cookie header (no signing: the value is a random id looked up by hash). */
export function readCookie(header: string | null, name: string): string | undefined {
  if (!header) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

/** The session id the request carries, if any: the one place the session cookie is read. */
export function sessionIdOf(request: Request): string | undefined {
  return readCookie(request.headers.get('cookie'), SESSION_COOKIE)
}

/**
 * Defence in depth against cross-site requests riding the session cookie (SameSite=Lax and JSON-only bodies
 * already stop them): a browser's `Origin`, when sent, must be this server's — the Host it was asked for, or the
 * configured base URL (behind a proxy that rewrites Host).
 */
function sameOrigin(request: Request, baseOrigin: string): boolean {
  const origin = request.headers.get('origin')
  if (origin === null) return true
  let host: string
  try {
    host = new URL(origin).host
  } catch {
    return false
  }
  return host === request.headers.get('host') || host === new URL(request.url).host || origin === baseOrigin
}

/** The one Origin check of every change made with the session cookie (403 cross_origin). */
export function refuseCrossOrigin(request: Request, baseOrigin: string): void {
  if (request.method !== 'GET' && !sameOrigin(request, baseOrigin)) {
    throw forbidden('A change made with the session must come from a Trellis page', 'cross_origin')
  }
}

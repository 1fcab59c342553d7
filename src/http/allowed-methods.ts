/**
 * Which methods a path is served with, read from the app's own route table (so it cannot drift from routing):
 * a request with another method on a known path is 405 with `Allow`, an unknown path stays 404.
 */
import { errorBody, jsonResponse } from './errors.ts'

interface RouteLike {
  method: string
  path: string
}

/** `(pathname) → methods` for the given routes (read on first use: routes are registered after the hooks). */
export function allowedMethods(routes: () => readonly RouteLike[]): (pathname: string) => string[] {
  let table: { pattern: RegExp; methods: Set<string> }[] | undefined
  const build = () => {
    const byPath = new Map<string, Set<string>>()
    for (const route of routes()) {
      const methods = byPath.get(route.path) ?? new Set<string>()
      methods.add(route.method)
      // A GET route answers HEAD too (Bun and Elysia derive it).
      if (route.method === 'GET') methods.add('HEAD')
      byPath.set(route.path, methods)
    }
    return [...byPath].map(([path, methods]) => ({ pattern: pathPattern(path), methods }))
  }
  return (pathname) => {
    table ??= build()
    const methods = new Set<string>()
    for (const entry of table) if (entry.pattern.test(pathname)) for (const method of entry.methods) methods.add(method)
    return [...methods].sort()
  }
}

function pathPattern(path: string): RegExp {
  const source = path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment === '*' ? '.*' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  return new RegExp(`^${source}$`)
}

/** 405 method_not_allowed with `Allow`. */
export function methodNotAllowed(method: string, pathname: string, allowed: string[]): Response {
  const allow = allowed.join(', ')
  return jsonResponse(405, errorBody(405, 'method_not_allowed', `${method} ${pathname} is not served; this path serves ${allow}`), { allow })
}

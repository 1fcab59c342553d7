/**
 * Names each request's span by the route template it matched (`POST /v1/hooks/:token`), never by its path, which may
 * be a credential (src/lib/tracing.ts). A hook only while tracing is on when the app is built: off, routes carry none.
 */
import { Elysia } from 'elysia'
import { activeTracer } from '../lib/tracing.ts'

export function requestRouteSpan() {
  const plugin = new Elysia({ name: 'request-route-span' })
  const tracer = activeTracer()
  if (tracer !== null) plugin.onTransform({ as: 'global' }, ({ request, route }) => tracer.route(request, route))
  return plugin
}

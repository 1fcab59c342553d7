/** Headers every answer carries, whatever route, status or error produced it. */

/**
 * onRequest hook: `X-Content-Type-Options: nosniff` on every answer (Elysia adds what `set.headers` holds to the
 * Response a handler or onError returns), so a browser never reads a JSON answer — which may echo what a caller
 * sent — as anything but the type it declares.
 */
export function noSniffing({ set }: { set: { headers: Record<string, unknown> } }): void {
  set.headers['x-content-type-options'] = 'nosniff'
}

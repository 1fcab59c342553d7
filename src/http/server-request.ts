/**
 * The server boundary: what `serve` knows about a request that the Request object alone does not carry reliably —
 * its path as sent, and the peer address of the connection. `serve` passes every request through `acceptRequest`
 * before the app; routing, the raw-body rule, error messages and the request log then all read one `requestPath`.
 */

const peers = new WeakMap<Request, string>()

/**
 * Elysia does not parse the URL: it routes on the text from the first `/` at or after index 11, which assumes
 * `http://` and a host of four characters or more (its `standardHostname`).
 */
const ROUTER_PATH_FROM = 11

/**
 * Where the path starts in a request's URL. Bun builds the URL from the Host header (`http://a/x` for `Host: a`);
 * when the Host is empty, missing or not a host (`x/y`) it leaves the bare target (`/x`). -1: no path at all.
 */
function pathStart(url: string): number {
  if (url.startsWith('/')) return 0
  const scheme = url.indexOf('://')
  return scheme === -1 ? -1 : url.indexOf('/', scheme + 3)
}

/** The request target as sent: path and query (`/` when there is none). */
export function requestTarget(request: Request): string {
  const start = pathStart(request.url)
  return start === -1 ? '/' : request.url.slice(start)
}

/** The request's path without the query: the one path routing, the raw-body rule and the request log agree on. */
export function requestPath(request: Request): string {
  const target = requestTarget(request)
  const query = target.indexOf('?')
  return query === -1 ? target : target.slice(0, query)
}

/**
 * Before the app sees a request: when the router would cut its URL elsewhere than `requestPath` does (a Host
 * shorter than four characters, or no usable Host at all), it is given the same target under a placeholder host,
 * so the app routes on the path that was sent. The peer address (from the socket, never from a header) is kept
 * for `peerAddress`.
 */
export function acceptRequest(request: Request, peer: string | undefined): Request {
  const start = pathStart(request.url)
  const routable =
    start !== -1 && request.url.indexOf('/', ROUTER_PATH_FROM) === start
      ? request
      : new Request(`http://localhost${start === -1 ? '/' : request.url.slice(start)}`, request)
  if (peer !== undefined) peers.set(routable, peer)
  return routable
}

/** The address of the connection the request came on, when it came through `acceptRequest` with one. */
export function peerAddress(request: Request): string | undefined {
  return peers.get(request)
}

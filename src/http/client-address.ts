/**
 * Who sent a request, as the login throttle counts clients: the peer address of the connection, or — only when
 * that peer is a proxy named in TRELLIS_TRUST_PROXY — the address X-Forwarded-For gives, walked from the right
 * and skipping trusted hops (proxy-addr's rule). Anything a client sends is untrusted until a trusted proxy
 * vouches for it.
 */
import type { IncomingMessage } from 'node:http'
import ipaddr from 'ipaddr.js'
import proxyaddr from 'proxy-addr'
import { peerAddress } from './server-request.ts'

/** Requests that did not come through `serve` (`app.handle` in tests) have no peer. */
export const UNKNOWN_CLIENT = 'unknown'

export function clientAddressOf(trustedProxies: string[]): (request: Request) => string {
  const trust = trustedProxies.length > 0 ? proxyaddr.compile(trustedProxies) : () => false
  return (request) => {
    const peer = peerAddress(request)
    if (peer === undefined) return UNKNOWN_CLIENT
    // proxy-addr reads a Node request; it needs only these two fields.
    const forwardedFor = request.headers.get('x-forwarded-for') ?? undefined
    const hops = proxyaddr.all({ socket: { remoteAddress: peer }, headers: { 'x-forwarded-for': forwardedFor } } as unknown as IncomingMessage, trust)
    // The last hop is the client; a trusted proxy passing on something that is not an address leaves the hop before.
    const client = hops.findLast((hop) => ipaddr.isValid(hop)) ?? peer
    return counted(client)
  }
}

/** IPv4-mapped IPv6 counts as IPv4; other IPv6 addresses count per /64, the block one subscriber usually gets. */
function counted(address: string): string {
  if (!ipaddr.isValid(address)) return address
  const parsed = ipaddr.process(address)
  if (parsed.kind() === 'ipv4') return parsed.toString()
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4)
  return `${new ipaddr.IPv6([...parts, 0, 0, 0, 0]).toString()}/64`
}

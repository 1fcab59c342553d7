/**
 * The one way Trellis sends a request out (DESIGN §14). The host is resolved here, every address it resolves to
 * is checked against the policy, and the connection goes to the checked address itself (the URL's host is kept in
 * `Host` and, for https, in the TLS server name and certificate check): nothing is resolved a second time, so a
 * name cannot answer differently between the check and the connection. Redirects are never followed, and the
 * answer is read up to the caller's limit, then the connection is dropped.
 */
import { lookup as dnsLookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { type AllowList, hostAllowed, NOTHING_ALLOWED, OPENED_BY, refusedAddressClass } from './policy.ts'

/** The destination may not be called; `message` names the host and why (never an address a name resolved to). */
export class DestinationRefusedError extends Error {
  constructor(
    readonly host: string,
    why: string,
  ) {
    super(`destination ${host} refused: ${why}; ${OPENED_BY}`)
  }
}

/**
 * The allow-list in effect, asked before each request: a fixed list, or a function reading the one the instance
 * administrators keep (src/modules/instance/outbound-allow.ts), so that a change needs no restart.
 */
export type AllowListSource = AllowList | (() => AllowList | Promise<AllowList>)

/** Every address a host name resolves to, as the system resolver answers (hosts file included). */
export type ResolveHost = (hostname: string) => Promise<string[]>

const systemResolve: ResolveHost = async (hostname) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => a.address)

export interface OutboundRequest {
  method: string
  headers: Record<string, string>
  body?: string
  signal: AbortSignal
  /** Characters of the answer's body to keep; the rest is not read (0: the answer ends with its headers). */
  maxBodyChars: number
}

export interface OutboundAnswer {
  status: number
  /** The body's first `maxBodyChars` characters. */
  body: string
  /** The body was longer than that (the rest was not read). */
  truncated: boolean
}

export class OutboundClient {
  private readonly allow: AllowListSource
  private readonly resolve: ResolveHost

  constructor(options: { allow?: AllowListSource; resolve?: ResolveHost } = {}) {
    this.allow = options.allow ?? NOTHING_ALLOWED
    this.resolve = options.resolve ?? systemResolve
  }

  /** Sends one request. Throws DestinationRefusedError before connecting when the destination is not allowed. */
  async send(url: URL, request: OutboundRequest): Promise<OutboundAnswer> {
    const targets = await this.checkedTargets(url, request.signal)
    const headers = new Headers(request.headers)
    if (!headers.has('host')) headers.set('host', url.host)
    // Dropping the connection once enough is read: the caller's signal also ends the call.
    const done = new AbortController()
    try {
      const response = await firstConnected(targets, (target) =>
        fetch(target, {
          method: request.method,
          headers,
          body: request.body,
          redirect: 'manual',
          // The environment's HTTP(S)_PROXY would be judged against the address, not the name: Trellis connects itself.
          proxy: false,
          signal: AbortSignal.any([request.signal, done.signal]),
          ...(url.protocol === 'https:' && target.hostname !== url.hostname ? { tls: { serverName: url.hostname.replace(/\.$/, '') } } : {}),
        }),
      )
      return { status: response.status, ...(await readText(response.body, request.maxBodyChars)) }
    } finally {
      done.abort()
    }
  }

  /** The URLs to connect to, in order: the URL's host replaced by each address checked. */
  private async checkedTargets(url: URL, signal: AbortSignal): Promise<URL[]> {
    const host = url.hostname
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new DestinationRefusedError(host, `${url.protocol} is not http or https`)
    const allow = typeof this.allow === 'function' ? await this.allow() : this.allow
    const literal = host.replace(/^\[(.*)\]$/, '$1')
    if (isIP(literal)) {
      const refused = refusedAddressClass(literal, allow)
      if (refused) throw new DestinationRefusedError(host, `it is a ${refused} address`)
      return [url]
    }
    const addresses = await abortable(this.resolve(host), signal)
    if (addresses.length === 0) throw new Error(`${host} resolves to no address`)
    if (!hostAllowed(host, allow)) {
      for (const address of addresses) {
        const refused = refusedAddressClass(address, allow)
        if (refused) throw new DestinationRefusedError(host, `it resolves to a ${refused} address`)
      }
    }
    return addresses.map((address) => {
      const target = new URL(url)
      target.hostname = isIP(address) === 6 ? `[${address}]` : address
      return target
    })
  }
}

/** Errors that happen before anything was sent: the next address of the name may be reachable. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENETUNREACH', 'EHOSTUNREACH', 'EADDRNOTAVAIL'])

/** Tries each address of a name in turn while the connection itself fails. */
async function firstConnected(targets: URL[], connect: (target: URL) => Promise<Response>): Promise<Response> {
  for (let i = 0; ; i++) {
    try {
      return await connect(targets[i]!)
    } catch (error) {
      if (i === targets.length - 1 || !NOT_CONNECTED.has((error as { code?: string }).code ?? '')) throw error
    }
  }
}

/** Decodes the body up to `maxChars` characters; stops reading there. */
async function readText(body: ReadableStream<Uint8Array> | null, maxChars: number): Promise<{ body: string; truncated: boolean }> {
  if (!body) return { body: '', truncated: false }
  if (maxChars === 0) {
    void body.cancel().catch(() => {})
    return { body: '', truncated: false }
  }
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let text = ''
  try {
    for (;;) {
      const { done, value } = await reader.read()
      text += done ? decoder.decode() : decoder.decode(value, { stream: true })
      if (text.length > maxChars) return { body: text.slice(0, maxChars), truncated: true }
      if (done) return { body: text, truncated: false }
    }
  } finally {
    void reader.cancel().catch(() => {})
  }
}

/** A DNS lookup cannot be cancelled: stop waiting for it when the call is aborted. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}

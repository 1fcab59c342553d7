/**
 * Which destinations Trellis may call (DESIGN §14): public unicast addresses, plus what the outbound allow-list opens
 * (`TRELLIS_HTTP_ALLOW` when set, else the list instance administrators keep in the console). The address classes are ipaddr.js's (IANA special-purpose registries), not a table of ours.
 */
import ipaddr from 'ipaddr.js'

export interface AllowList {
  /** Host names opened whatever they resolve to (lower case, no trailing dot). */
  hosts: ReadonlySet<string>
  /** Address ranges opened (a single address is a /32 or /128). */
  ranges: readonly [ipaddr.IPv4 | ipaddr.IPv6, number][]
}

export const NOTHING_ALLOWED: AllowList = { hosts: new Set(), ranges: [] }

/** The console page where instance administrators see and edit the allow-list. */
export const ALLOW_LIST_PAGE = '/admin/outbound'

/** What a refusal says opens a destination: every refused-destination message ends with it. */
export const OPENED_BY = `the outbound allow-list opens hosts and ranges (instance administrators: ${ALLOW_LIST_PAGE}; TRELLIS_HTTP_ALLOW when set)`

export class AllowListError extends Error {}

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/

/** The entries of `"api.internal, 10.1.0.0/16 ::1"`: separated by commas or white space. */
export function allowListEntries(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean)
}

/** `"api.internal, 10.1.0.0/16 ::1"`: host names, addresses and CIDRs separated by commas or spaces. */
export function parseAllowList(text: string): AllowList {
  const hosts = new Set<string>()
  const ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = []
  for (const entry of allowListEntries(text)) {
    const [address, bits, ...rest] = entry.replace(/^\[(.*)\]$/, '$1').split('/')
    const cidr = `${canonicalAddress(address!)}/${bits}`
    if (bits !== undefined && rest.length === 0 && ipaddr.isValidCIDR(cidr)) {
      const [network, prefix] = ipaddr.parseCIDR(cidr)
      ranges.push(unmapped(network, prefix))
    } else if (bits === undefined && ipaddr.isValid(canonicalAddress(address!))) {
      const parsed = parseAddress(address!)
      ranges.push([parsed, parsed.kind() === 'ipv4' ? 32 : 128])
    } else if (HOST_NAME.test(entry.toLowerCase().replace(/\.$/, ''))) {
      hosts.add(entry.toLowerCase().replace(/\.$/, ''))
    } else {
      throw new AllowListError(`"${entry}" is neither a host name, an IP address nor a CIDR range`)
    }
  }
  return { hosts, ranges }
}

/** `::ffff:10.0.0.0/104` is the IPv4 range 10.0.0.0/8: addresses are compared in their IPv4 form. */
function unmapped(network: ipaddr.IPv4 | ipaddr.IPv6, bits: number): [ipaddr.IPv4 | ipaddr.IPv6, number] {
  if (network.kind() === 'ipv6' && (network as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return [(network as ipaddr.IPv6).toIPv4Address(), bits - 96]
  }
  return [network, bits]
}

/**
 * IPv6 text as the WHATWG URL parser writes it (`::7f00:1`), other text as it is: ipaddr.js reads the deprecated
 * IPv4-compatible spelling `::a.b.c.d` as the IPv4-mapped `::ffff:a.b.c.d`, which is another address.
 */
function canonicalAddress(text: string): string {
  const bare = text.replace(/^\[(.*)\]$/, '$1')
  if (!bare.includes(':') || bare.includes('%') || !URL.canParse(`http://[${bare}]/`)) return bare
  return new URL(`http://[${bare}]/`).hostname.slice(1, -1)
}

/** An address in any spelling, IPv4-mapped IPv6 as the IPv4 address it is. */
function parseAddress(text: string): ipaddr.IPv4 | ipaddr.IPv6 {
  return ipaddr.process(canonicalAddress(text))
}

/** A URL host naming this machine: `localhost`, or any loopback address in any spelling (`[::1]`, `127.0.0.2`). */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || (ipaddr.isValid(canonicalAddress(hostname)) && parseAddress(hostname).range() === 'loopback')
}

/** Is this host name opened by the operator? (`name` as the URL parser gives it: lower case.) */
export function hostAllowed(name: string, allow: AllowList): boolean {
  return allow.hosts.has(name.replace(/\.$/, ''))
}

const DESCRIPTIONS: Record<string, string> = {
  unspecified: 'unspecified',
  loopback: 'loopback',
  private: 'private',
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  multicast: 'multicast',
  broadcast: 'broadcast',
  carrierGradeNat: 'shared (carrier-grade NAT)',
  reserved: 'reserved',
}

/** `::/96` less `::` and `::1`: IPv4-compatible addresses (RFC 4291, deprecated), which ipaddr.js counts as unicast. */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96') as [ipaddr.IPv6, number]
/** The well-known NAT64 prefix; the rest of `rfc6052` (64:ff9b:1::/48) is for local use, with a prefix of /48 to /96. */
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96') as [ipaddr.IPv6, number]

/** ipaddr.js's range of an address, with the IPv4-compatible block it does not name. */
function rangeOf(address: ipaddr.IPv4 | ipaddr.IPv6): string {
  const range = address.range()
  return range === 'unicast' && address.kind() === 'ipv6' && address.match(IPV4_COMPATIBLE) ? 'ipv4Compatible' : range
}

/**
 * The IPv4 addresses an IPv6 address carries, by its form: IPv4-compatible (`::a.b.c.d`), IPv4-translated
 * (`::ffff:0:a.b.c.d`), NAT64 (RFC 6052: the last 32 bits under 64:ff9b::/96; under the local-use 64:ff9b:1::/48
 * every position its /48 to /96 prefixes allow), 6to4 (`2002:AABB:CCDD::`, bits 16–47) and Teredo (the server in
 * bits 32–63, the client in the last 32 bits inverted). IPv4-mapped addresses are turned into IPv4 before this.
 */
function embeddedIPv4(address: ipaddr.IPv6, range: string): ipaddr.IPv4[] {
  const bytes = address.toByteArray()
  const at = (...indexes: number[]) => new ipaddr.IPv4(indexes.map((i) => bytes[i]!))
  switch (range) {
    case 'ipv4Compatible':
    case 'rfc6145':
      return [at(12, 13, 14, 15)]
    case 'rfc6052':
      if (address.match(NAT64_WELL_KNOWN)) return [at(12, 13, 14, 15)]
      // RFC 6052 §2.2 (bits 64–71 are always zero): a /96, /64, /56 or /48 prefix each places the address elsewhere.
      // Positions that read as 0.0.0.0/8 are the zeros around the address placed at another one.
      return [at(12, 13, 14, 15), at(9, 10, 11, 12), at(7, 9, 10, 11), at(6, 7, 9, 10)].filter((inner) => inner.octets[0] !== 0)
    case '6to4':
      return [at(2, 3, 4, 5)]
    case 'teredo':
      return [at(4, 5, 6, 7), new ipaddr.IPv4(bytes.slice(12, 16).map((byte) => byte ^ 0xff))]
    default:
      return []
  }
}

/** Why this one address may not be called, or null: public unicast, or in a range the operator opened. */
function ownRefusal(address: ipaddr.IPv4 | ipaddr.IPv6, range: string, allow: AllowList): string | null {
  if (allow.ranges.some(([network, bits]) => network.kind() === address.kind() && address.match(network, bits))) return null
  if (range === 'unicast') return null
  return DESCRIPTIONS[range] ?? `special-purpose (${range})`
}

/**
 * Why an address may not be called ("loopback", "private"…), or null when it may: a public unicast address, or one
 * in a range the operator opened. The one rule for literal hosts and DNS answers alike. IPv4-mapped IPv6 addresses
 * are judged as the IPv4 address they carry; other IPv6 forms that carry one (NAT64, 6to4, Teredo, IPv4-compatible,
 * IPv4-translated) are judged first by each IPv4 address inside, then as IPv6 addresses themselves — so an IPv4
 * entry of the allow-list opens no such form, and an IPv6 range that opens one (a NAT64 prefix) opens no private
 * IPv4 address behind it.
 */
export function refusedAddressClass(address: string, allow: AllowList): string | null {
  const parsed = parseAddress(address)
  const range = rangeOf(parsed)
  if (parsed.kind() === 'ipv6') {
    for (const inner of embeddedIPv4(parsed as ipaddr.IPv6, range)) {
      const refused = ownRefusal(inner, inner.range(), allow)
      if (refused) return refused
    }
  }
  return ownRefusal(parsed, range, allow)
}

/**
 * Which destinations Trellis may call (DESIGN §14): public unicast addresses, plus what the operator opens with
 * `TRELLIS_HTTP_ALLOW`. The address classes are ipaddr.js's (IANA special-purpose registries), not a table of ours.
 */
import ipaddr from 'ipaddr.js'

export interface AllowList {
  /** Host names opened whatever they resolve to (lower case, no trailing dot). */
  hosts: ReadonlySet<string>
  /** Address ranges opened (a single address is a /32 or /128). */
  ranges: readonly [ipaddr.IPv4 | ipaddr.IPv6, number][]
}

export const NOTHING_ALLOWED: AllowList = { hosts: new Set(), ranges: [] }

export class AllowListError extends Error {}

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/

/** `"api.internal, 10.1.0.0/16 ::1"`: host names, addresses and CIDRs separated by commas or spaces. */
export function parseAllowList(text: string): AllowList {
  const hosts = new Set<string>()
  const ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = []
  for (const entry of text.split(/[\s,]+/).filter(Boolean)) {
    const bare = entry.replace(/^\[(.*)\]$/, '$1')
    if (ipaddr.isValidCIDR(bare)) {
      const [network, bits] = ipaddr.parseCIDR(bare)
      ranges.push(unmapped(network, bits))
    } else if (ipaddr.isValid(bare)) {
      const address = ipaddr.process(bare)
      ranges.push([address, address.kind() === 'ipv4' ? 32 : 128])
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

/** A URL host naming this machine: `localhost`, or any loopback address in any spelling (`[::1]`, `127.0.0.2`). */
export function isLoopbackHost(hostname: string): boolean {
  const bare = hostname.replace(/^\[(.*)\]$/, '$1')
  return hostname === 'localhost' || (ipaddr.isValid(bare) && ipaddr.process(bare).range() === 'loopback')
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

/**
 * Why an address may not be called ("loopback", "private"…), or null when it may: a public unicast address, or one
 * in a range the operator opened. IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
 */
export function refusedAddressClass(address: string, allow: AllowList): string | null {
  const parsed = ipaddr.process(address.replace(/^\[(.*)\]$/, '$1'))
  if (allow.ranges.some(([network, bits]) => network.kind() === parsed.kind() && parsed.match(network, bits))) return null
  const range = parsed.range()
  if (range === 'unicast') return null
  return DESCRIPTIONS[range] ?? `special-purpose (${range})`
}

/**
 * The outbound client (DESIGN §14) against real local servers: every spelling of a local or private destination
 * is refused before connecting, the operator's allow-list opens what it names, the connection goes to the address
 * that was checked (names are resolved once), redirects are not followed, answers are read up to the limit, and
 * https keeps the name for SNI and the certificate check while connecting to the checked address.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { DestinationRefusedError, type OutboundRequest, OutboundClient, type ResolveHost } from '../src/lib/outbound/client.ts'
import { NOTHING_ALLOWED, parseAllowList, refusedAddressClass } from '../src/lib/outbound/policy.ts'
import { redactUrl, redactUrlsIn, StepSecrets } from '../src/lib/outbound/redact.ts'
import { repoRoot } from './helpers.ts'

const served: { path: string; host: string | null }[] = []
const local = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  fetch(req) {
    const url = new URL(req.url)
    served.push({ path: url.pathname, host: req.headers.get('host') })
    switch (url.pathname) {
      case '/redirect':
        return new Response(null, { status: 302, headers: { location: new URL('/landed', url).href } })
      case '/accents':
        return new Response('é'.repeat(50))
      case '/empty':
        return new Response(null, { status: 204 })
      default:
        return new Response(`hello ${req.headers.get('host')}`)
    }
  },
})
const port = local.port
afterAll(() => local.stop(true))

const get = (maxBodyChars = 100): OutboundRequest => ({ method: 'GET', headers: {}, signal: AbortSignal.timeout(3_000), maxBodyChars })

async function refusal(client: OutboundClient, url: string): Promise<string> {
  const before = served.length
  const error = await client.send(new URL(url), get()).then(
    () => null,
    (e: unknown) => e,
  )
  expect(served.length).toBe(before) // refused before connecting
  expect(error).toBeInstanceOf(DestinationRefusedError)
  return (error as Error).message
}

describe('default: nothing local or private is called', () => {
  const client = new OutboundClient()

  test.each([
    [`http://127.0.0.1:${port}/`, '127.0.0.1', 'loopback'],
    [`http://2130706433:${port}/`, '127.0.0.1', 'loopback'],
    [`http://0177.0.0.1:${port}/`, '127.0.0.1', 'loopback'],
    [`http://0x7f.1:${port}/`, '127.0.0.1', 'loopback'],
    [`http://127.1:${port}/`, '127.0.0.1', 'loopback'],
    [`http://%31%32%37.0.0.1:${port}/`, '127.0.0.1', 'loopback'],
    [`http://127.255.255.254:${port}/`, '127.255.255.254', 'loopback'],
    [`http://[::ffff:127.0.0.1]:${port}/`, '[::ffff:7f00:1]', 'loopback'],
    [`http://[::1]:${port}/`, '[::1]', 'loopback'],
    [`http://0.0.0.0:${port}/`, '0.0.0.0', 'unspecified'],
    [`http://0:${port}/`, '0.0.0.0', 'unspecified'],
    [`http://[::]:${port}/`, '[::]', 'unspecified'],
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254', 'link-local'],
    ['http://10.0.0.1/', '10.0.0.1', 'private'],
    ['http://172.16.5.4/', '172.16.5.4', 'private'],
    ['http://192.168.1.1/', '192.168.1.1', 'private'],
    ['http://[::ffff:10.0.0.1]/', '[::ffff:a00:1]', 'private'],
    ['http://100.64.0.1/', '100.64.0.1', 'shared (carrier-grade NAT)'],
    ['http://[fc00::1]/', '[fc00::1]', 'unique-local'],
    ['http://[fd12:3456::1]/', '[fd12:3456::1]', 'unique-local'],
    ['http://[fe80::1]/', '[fe80::1]', 'link-local'],
    ['http://224.0.0.1/', '224.0.0.1', 'multicast'],
    ['http://[ff02::1]/', '[ff02::1]', 'multicast'],
    ['http://255.255.255.255/', '255.255.255.255', 'broadcast'],
    // Judged by the loopback address they carry; the forms are refused with a public one too.
    ['http://[64:ff9b::7f00:1]/', '[64:ff9b::7f00:1]', 'loopback'],
    ['http://[2002:7f00:1::]/', '[2002:7f00:1::]', 'loopback'],
    [`https://127.0.0.1:${port}/`, '127.0.0.1', 'loopback'],
  ])('%s → refused: %s is a %s address', async (url, host, why) => {
    const message = await refusal(client, url)
    expect(message).toBe(`destination ${host} refused: it is a ${why} address; the outbound allow-list opens hosts and ranges (instance administrators: /admin/outbound; TRELLIS_HTTP_ALLOW when set)`)
  })

  // Every IPv6 form that carries an IPv4 address is judged as that address (then as the form itself).
  const embedding: [form: string, address: string, why: string][] = [
    ['IPv4-compatible, loopback', '::127.0.0.1', 'loopback'],
    ['IPv4-compatible, private', '::10.0.0.1', 'private'],
    ['IPv4-compatible, link-local', '::169.254.169.254', 'link-local'],
    ['IPv4-compatible, public: the deprecated form itself', '::8.8.8.8', 'special-purpose (ipv4Compatible)'],
    ['IPv4-mapped, loopback', '::ffff:127.0.0.2', 'loopback'],
    ['IPv4-translated (SIIT), loopback', '::ffff:0:127.0.0.1', 'loopback'],
    ['IPv4-translated (SIIT), public', '::ffff:0:8.8.8.8', 'special-purpose (rfc6145)'],
    ['NAT64 well-known prefix, loopback', '64:ff9b::127.0.0.1', 'loopback'],
    ['NAT64 well-known prefix, metadata', '64:ff9b::169.254.169.254', 'link-local'],
    ['NAT64 well-known prefix, private', '64:ff9b::192.168.0.1', 'private'],
    ['NAT64 well-known prefix, public', '64:ff9b::8.8.8.8', 'special-purpose (rfc6052)'],
    ['NAT64 local-use /96, loopback', '64:ff9b:1::127.0.0.1', 'loopback'],
    ['NAT64 local-use /48 (127.0.0.1 in bits 48–63 and 72–87)', '64:ff9b:1:7f00:0:100::', 'loopback'],
    ['NAT64 local-use /64 (10.0.0.1 in bits 72–103)', '64:ff9b:1:0:a:0:100:0', 'private'],
    ['6to4, loopback', '2002:7f00:1::1', 'loopback'],
    ['6to4, private', '2002:a00:1::1', 'private'],
    ['6to4, carrier-grade NAT', '2002:6440:1::', 'shared (carrier-grade NAT)'],
    ['6to4, public', '2002:808:808::1', 'special-purpose (6to4)'],
    ['Teredo, server loopback', '2001:0:7f00:1:0:0:f7f7:f7f7', 'loopback'],
    ['Teredo, client private (10.0.0.1, bits inverted)', '2001:0:4136:e378:8000:63bf:f5ff:fffe', 'private'],
    ['Teredo, client loopback (127.0.0.1, bits inverted)', '2001:0:4136:e378:8000:63bf:80ff:fffe', 'loopback'],
    ['Teredo, both public', '2001:0:4136:e378:8000:63bf:f7f7:fbfb', 'special-purpose (teredo)'],
  ]

  test.each(embedding)('%s: [%s] as a URL host → refused: %s', async (_, address, why) => {
    const host = `[${new URL(`http://[${address}]/`).hostname.slice(1, -1)}]`
    const message = await refusal(client, `http://[${address}]:${port}/`)
    expect(message).toBe(`destination ${host} refused: it is a ${why} address; the outbound allow-list opens hosts and ranges (instance administrators: /admin/outbound; TRELLIS_HTTP_ALLOW when set)`)
  })

  test.each(embedding)('%s: a name resolving to %s → refused: %s (the address not named)', async (_, address, why) => {
    const client = new OutboundClient({ resolve: async () => [address] })
    const message = await refusal(client, `http://embedded.test:${port}/`)
    expect(message).toBe(`destination embedded.test refused: it resolves to a ${why} address; the outbound allow-list opens hosts and ranges (instance administrators: /admin/outbound; TRELLIS_HTTP_ALLOW when set)`)
  })

  test('a name is resolved to an IPv4 address inside an IPv6 form that is refused, whatever the spelling of the answer', () => {
    for (const address of ['0:0:0:0:0:0:7f00:1', '::7f00:1', '::127.0.0.1', '[::127.0.0.1]', '64:FF9B::7F00:1', '64:ff9b:0:0:0:0:127.0.0.1']) {
      expect(refusedAddressClass(address, NOTHING_ALLOWED)).toBe('loopback')
    }
    // `::a.b.c.d` is IPv4-compatible, not IPv4-mapped: a public address inside does not make it one.
    expect(refusedAddressClass('::8.8.8.8', NOTHING_ALLOWED)).toBe('special-purpose (ipv4Compatible)')
    expect(refusedAddressClass('::ffff:8.8.8.8', NOTHING_ALLOWED)).toBeNull()
  })

  test('a name that resolves to a loopback address (localhost) is refused, naming the host but not the address', async () => {
    const message = await refusal(client, `http://localhost:${port}/`)
    expect(message).toContain('destination localhost refused: it resolves to a loopback address')
    expect(message).not.toContain('127.0.0.1')
  })

  test('a name is refused when any of its addresses is local, even if another is public', async () => {
    const resolve: ResolveHost = async () => ['93.184.215.14', '10.1.2.3']
    const message = await refusal(new OutboundClient({ resolve }), 'http://mixed.test/')
    expect(message).toContain('mixed.test refused: it resolves to a private address')
  })

  test('schemes other than http and https are refused', async () => {
    expect(await refusal(client, 'ftp://example.com/')).toContain('ftp: is not http or https')
  })

  test('public unicast addresses are allowed by the policy', () => {
    for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8']) {
      expect(refusedAddressClass(address, NOTHING_ALLOWED)).toBeNull()
    }
  })
})

describe('TRELLIS_HTTP_ALLOW opens what the operator names', () => {
  test('an address opens every spelling of it (and a name resolving to it)', async () => {
    const client = new OutboundClient({ allow: parseAllowList('127.0.0.1') })
    for (const host of ['127.0.0.1', '2130706433', '0x7f.1', '[::ffff:127.0.0.1]', 'localhost']) {
      const answer = await client.send(new URL(`http://${host}:${port}/hi`), get())
      expect(answer).toMatchObject({ status: 200, truncated: false })
    }
    expect(await refusal(client, `http://127.0.0.2:${port}/`)).toContain('127.0.0.2 refused: it is a loopback address')
    expect(await refusal(client, `http://[::1]:${port}/`)).toContain('[::1] refused')
  })

  test('a CIDR opens its range only', async () => {
    const client = new OutboundClient({ allow: parseAllowList('127.0.0.0/8, fd00::/8') })
    expect((await client.send(new URL(`http://127.0.0.1:${port}/`), get())).status).toBe(200)
    expect(refusedAddressClass('127.9.9.9', parseAllowList('127.0.0.0/8'))).toBeNull()
    expect(refusedAddressClass('fd00::5', parseAllowList('fd00::/8'))).toBeNull()
    expect(refusedAddressClass('fc00::5', parseAllowList('fd00::/8'))).toBe('unique-local')
    expect(refusedAddressClass('10.0.0.1', parseAllowList('127.0.0.0/8'))).toBe('private')
    expect(refusedAddressClass('10.9.0.1', parseAllowList('::ffff:10.0.0.0/104'))).toBeNull()
  })

  test('an IPv4 entry opens that address, not IPv6 forms that carry it (other than IPv4-mapped, the same socket address)', () => {
    const allow = parseAllowList('127.0.0.1, 10.0.0.0/8')
    expect(refusedAddressClass('::ffff:127.0.0.1', allow)).toBeNull()
    expect(refusedAddressClass('10.1.2.3', allow)).toBeNull()
    expect(refusedAddressClass('::127.0.0.1', allow)).toBe('special-purpose (ipv4Compatible)')
    expect(refusedAddressClass('64:ff9b::10.0.0.1', allow)).toBe('special-purpose (rfc6052)')
    expect(refusedAddressClass('2002:a00:1::', allow)).toBe('special-purpose (6to4)')
    // Spelled `::a.b.c.d`, an entry is the IPv4-compatible address (ipaddr.js alone would read it as IPv4-mapped).
    expect(refusedAddressClass('10.0.0.1', parseAllowList('::10.0.0.1'))).toBe('private')
  })

  test('an IPv6 range opens the form (a NAT64 prefix), while the IPv4 address inside is still judged', () => {
    const nat64 = parseAllowList('64:ff9b::/96')
    expect(refusedAddressClass('64:ff9b::8.8.8.8', nat64)).toBeNull()
    expect(refusedAddressClass('64:ff9b::10.0.0.1', nat64)).toBe('private')
    expect(refusedAddressClass('64:ff9b::127.0.0.1', nat64)).toBe('loopback')
    expect(refusedAddressClass('64:ff9b::10.0.0.1', parseAllowList('64:ff9b::/96 10.0.0.0/8'))).toBeNull()
    const sixToFour = parseAllowList('2002::/16')
    expect(refusedAddressClass('2002:808:808::1', sixToFour)).toBeNull()
    expect(refusedAddressClass('2002:a9fe:a9fe::1', sixToFour)).toBe('link-local')
  })

  test('a host name opens that name (whatever it resolves to), not the address behind it', async () => {
    const client = new OutboundClient({ allow: parseAllowList('LocalHost.') })
    const answer = await client.send(new URL(`http://localhost:${port}/hi`), get())
    expect(answer).toEqual({ status: 200, body: `hello localhost:${port}`, truncated: false })
    expect(await refusal(client, `http://127.0.0.1:${port}/`)).toContain('127.0.0.1 refused')
  })
})

describe('the connection goes to the address that was checked', () => {
  test('a name is resolved once per request and its checked address is connected to, the name kept in Host', async () => {
    // `pinned.test` exists in no DNS: the call only works if the client connects to the address it checked.
    const lookups: string[] = []
    const resolve: ResolveHost = async (name) => (lookups.push(name), ['127.0.0.1'])
    const client = new OutboundClient({ allow: parseAllowList('127.0.0.0/8'), resolve })
    const answer = await client.send(new URL(`http://pinned.test:${port}/who`), get())
    expect(answer).toEqual({ status: 200, body: `hello pinned.test:${port}`, truncated: false })
    expect(lookups).toEqual(['pinned.test'])
    expect(served.at(-1)).toEqual({ path: '/who', host: `pinned.test:${port}` })
  })

  test('a name answering an allowed address, then a private one, cannot slip through: one lookup per request, and each is checked', async () => {
    let calls = 0
    const resolve: ResolveHost = async () => (calls++ === 0 ? ['127.0.0.1'] : ['10.0.0.1'])
    const client = new OutboundClient({ allow: parseAllowList('127.0.0.1'), resolve })
    expect((await client.send(new URL(`http://rebind.test:${port}/`), get())).status).toBe(200)
    expect(calls).toBe(1)
    expect(await refusal(client, `http://rebind.test:${port}/`)).toContain('rebind.test refused: it resolves to a private address')
  })

  test('a name with several addresses: when one refuses the connection, the next checked address is tried', async () => {
    // The test server listens on 127.0.0.1 only: ::1 refuses the connection.
    const client = new OutboundClient({ allow: parseAllowList('127.0.0.1 ::1'), resolve: async () => ['::1', '127.0.0.1'] })
    expect(await client.send(new URL(`http://two.test:${port}/two`), get())).toEqual({ status: 200, body: `hello two.test:${port}`, truncated: false })
  })

  test('an HTTP_PROXY in the environment is not used: Trellis connects to the checked address itself', async () => {
    const proxied: string[] = []
    const proxy = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (req) => (proxied.push(req.url), new Response('from the proxy')) })
    const saved = { HTTP_PROXY: process.env.HTTP_PROXY, http_proxy: process.env.http_proxy }
    process.env.HTTP_PROXY = process.env.http_proxy = `http://127.0.0.1:${proxy.port}`
    try {
      const client = new OutboundClient({ allow: parseAllowList('127.0.0.1'), resolve: async () => ['127.0.0.1'] })
      expect(await client.send(new URL(`http://direct.test:${port}/`), get())).toMatchObject({ status: 200, body: `hello direct.test:${port}` })
      expect(proxied).toEqual([])
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
      proxy.stop(true)
    }
  })

  test('https: the checked address is connected to, while SNI and the certificate check use the name', async () => {
    const tls = join(repoRoot, 'test/fixtures/outbound-tls')
    const secure = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      tls: { cert: Bun.file(join(tls, 'cert.pem')), key: Bun.file(join(tls, 'key.pem')) },
      fetch: (req) => new Response(`secure ${req.headers.get('host')}`),
    })
    const send = async (url: string) => {
      const proc = Bun.spawn([process.execPath, join(repoRoot, 'test/support/outbound-send.ts'), url, '127.0.0.1', '127.0.0.1'], {
        env: { PATH: process.env.PATH ?? '', NODE_EXTRA_CA_CERTS: join(tls, 'cert.pem') },
        stdout: 'pipe',
        stderr: 'pipe',
      })
      const [out] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
      return JSON.parse(out) as unknown
    }
    try {
      expect(await send(`https://trellis-outbound.test:${secure.port}/`)).toEqual({
        answer: { status: 200, body: `secure trellis-outbound.test:${secure.port}`, truncated: false },
      })
      // Another name on the same address: the certificate does not name it, so the call fails.
      expect(await send(`https://other.test:${secure.port}/`)).toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' })
    } finally {
      secure.stop(true)
    }
  }, 20_000)
})

describe('answers', () => {
  const client = new OutboundClient({ allow: parseAllowList('127.0.0.1') })

  test('a redirect is returned as it is, never followed', async () => {
    const answer = await client.send(new URL(`http://127.0.0.1:${port}/redirect`), get())
    expect(answer.status).toBe(302)
    expect(served.some((s) => s.path === '/landed')).toBe(false)
  })

  test('the body is cut at the limit in characters (not bytes), and says so; a short or empty body is whole', async () => {
    expect(await client.send(new URL(`http://127.0.0.1:${port}/accents`), get(10))).toEqual({ status: 200, body: 'é'.repeat(10), truncated: true })
    expect(await client.send(new URL(`http://127.0.0.1:${port}/accents`), get(50))).toEqual({ status: 200, body: 'é'.repeat(50), truncated: false })
    expect(await client.send(new URL(`http://127.0.0.1:${port}/empty`), get())).toEqual({ status: 204, body: '', truncated: false })
  })
})

describe('what runs show of a request', () => {
  test.each([
    ['https://api.example.com/hook', 'https://api.example.com/hook'],
    ['https://svc:pw@api.example.com/hook?key=k#f', 'https://api.example.com/hook?[redacted]'],
    ['https://svc:p@ss@api.example.com:8443/a/b', 'https://api.example.com:8443/a/b'],
    ['http://svc@127.0.0.1/#token', 'http://127.0.0.1/#[redacted]'],
    ['https://api.example.com?x=1', 'https://api.example.com?[redacted]'],
    ['https://svc:pw@api.example.com:99999', 'https://api.example.com:99999'],
  ])('redactUrl(%s) → %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown)
  })

  test('every URL inside a message is redacted, the rest of it kept', () => {
    expect(redactUrlsIn('GET https://u:p@a.example/x?k=v answered 500; see http://b.example/y#z.')).toBe('GET https://a.example/x?[redacted] answered 500; see http://b.example/y#[redacted]')
  })

  test('an http step\'s secrets: header values (not the plain ones), the URL\'s user, password and Basic pair, query values written in the step', () => {
    const template = 'https://svc:pass-word-1@api.example.com/x?api_key=key-12345678&order={{record.id}}&short=abc'
    const url = new URL(template.replace('{{record.id}}', 'ord-12345678'))
    const secrets = StepSecrets.ofHttpStep(template, url, { Authorization: 'Bearer token-12345678', 'X-Api-Key': 'apikey-1234', Accept: 'application/json' })
    const text = 'Bearer token-12345678 / token-12345678 / apikey-1234 / application/json / svc:pass-word-1 / c3ZjOnBhc3Mtd29yZC0x / key-12345678 / ord-12345678 / abc'
    expect(secrets.scrub(text)).toBe('[redacted] / [redacted] / [redacted] / application/json / svc:[redacted] / [redacted] / [redacted] / ord-12345678 / abc')
    expect(secrets.longest).toBe('Bearer token-12345678'.length)
  })
})

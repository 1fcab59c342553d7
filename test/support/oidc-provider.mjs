// A real OpenID Provider for the SSO tests: panva's certified `oidc-provider`, run under Node in a child
// process (test/support/oidc-provider.ts starts it). Its own development login and consent pages are the
// interaction UI: any login name is accepted, and `accounts` says what that name's claims are.
//
// Usage: node oidc-provider.mjs '<json>' with { port? (0: a free one), clients, accounts, idTokenTtl?, endSession? (false: no end-session endpoint), emailInIdToken? }.
// Prints "ready <issuer>" once listening.
//
// One test hook sits in front of the token endpoint: POST /__test/next-token-response { mode, idToken? } changes
// the ID token of the NEXT token response only — `replace` swaps in another real ID token this provider issued
// (another client's, or another sign-in's), `corrupt-signature` flips bits of the signature. It stands for a
// tampered or misrouted answer; everything else is the provider's own behaviour.
import { createServer } from 'node:net'
import { Provider } from 'oidc-provider'

const options = JSON.parse(process.argv[2])
const port = options.port || (await freePort())
const issuer = `http://127.0.0.1:${port}`

function freePort() {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
}

const provider = new Provider(issuer, {
  clients: options.clients,
  async findAccount(_ctx, id) {
    const account = options.accounts[id]
    if (!account) return undefined
    return { accountId: id, claims: async () => ({ sub: id, ...account }) }
  },
  claims: { openid: ['sub'], email: ['email', 'email_verified', 'xms_edov'], profile: ['name', 'preferred_username'] },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: options.endSession !== false } },
  ttl: { IdToken: options.idTokenTtl ?? 3600 },
  // Default (true): the email claims reach the relying party through UserInfo only, as the spec says; false puts
  // them in the ID token too, as Keycloak, Google or Entra ID do.
  conformIdTokenClaims: options.emailInIdToken !== true,
  cookies: { keys: ['oidc-provider-test-cookie-key'] },
})

let nextTokenResponse = null

provider.use(async (ctx, next) => {
  if (ctx.path === '/__test/next-token-response' && ctx.method === 'POST') {
    let raw = ''
    for await (const chunk of ctx.req) raw += chunk
    nextTokenResponse = JSON.parse(raw)
    ctx.status = 204
    return
  }
  await next()
  if (ctx.path === '/token' && ctx.status === 200 && nextTokenResponse && ctx.body?.id_token) {
    const change = nextTokenResponse
    nextTokenResponse = null
    if (change.mode === 'replace') ctx.body = { ...ctx.body, id_token: change.idToken }
    if (change.mode === 'corrupt-signature') {
      const [header, payload, signature] = ctx.body.id_token.split('.')
      const bytes = Buffer.from(signature, 'base64url')
      bytes[0] ^= 0xff
      bytes[bytes.length - 1] ^= 0xff
      ctx.body = { ...ctx.body, id_token: `${header}.${payload}.${bytes.toString('base64url')}` }
    }
  }
})

const server = provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`)
})

const stop = () => server.close(() => process.exit(0))
process.on('SIGTERM', stop)
process.on('SIGINT', stop)

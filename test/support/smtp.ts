/**
 * A real SMTP server for tests (the `smtp-server` package) on 127.0.0.1 and a port the OS picks: it requires the
 * sign-in it is given, keeps every message it receives (each attempt, refused ones included) with its headers and
 * decoded text, and answers as `mode` says at the end of each message — accept (250), refuse for now (451), refuse
 * for good (550), or hold (never answer: the sender is caught between sending and hearing back).
 */
import { SMTPServer } from 'smtp-server'

export interface ReceivedMail {
  messageId: string
  to: string
  subject: string
  /** The text part, transfer encoding undone. */
  text: string
  raw: string
  /** What the server answered: `accepted`, `refused` (4xx, 5xx) or `held`. */
  answer: 'accepted' | 'refused' | 'held'
  at: number
}

export interface SmtpServer {
  port: number
  /** `smtp://user:password@127.0.0.1:port` */
  url: string
  mode: 'accept' | 'refuse' | 'reject' | 'hold'
  /** Messages still to refuse for now (451) whatever `mode` says, counted down by each one received. */
  refuseNext: number
  /** Every message received, in order. */
  received: ReceivedMail[]
  /** Sign-ins refused (a wrong user or password). */
  refusedLogins: number
  /** Received copies addressed to `to`. */
  to(to: string): ReceivedMail[]
  close(): Promise<void>
}

/** Headers unfolded, keyed lower-case; the body after the blank line. */
function parse(raw: string): { headers: Map<string, string>; body: string } {
  const split = raw.indexOf('\r\n\r\n')
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ')
  const headers = new Map<string, string>()
  for (const line of head.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon > 0) headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim())
  }
  return { headers, body: raw.slice(split + 4) }
}

function decodeText(body: string, encoding: string | undefined): string {
  if (encoding === 'quoted-printable') {
    const bytes = body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
    return Buffer.from(bytes, 'latin1').toString('utf8')
  }
  if (encoding === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
  return body
}

export async function startSmtpServer(credentials = { user: 'trellis', password: 'smtp-Pa55word-kept-secret' }): Promise<SmtpServer> {
  const state: SmtpServer = {
    port: 0,
    url: '',
    mode: 'accept',
    refuseNext: 0,
    received: [],
    refusedLogins: 0,
    to: (to) => state.received.filter((m) => m.to === to),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    logger: false,
    disableReverseLookup: true,
    // A held connection must not keep `close` waiting.
    closeTimeout: 100,
    onAuth(auth, _session, callback) {
      if (auth.username === credentials.user && auth.password === credentials.password) return callback(null, { user: auth.username })
      state.refusedLogins++
      return callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }))
    },
    onData(stream, _session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8')
        const { headers, body } = parse(raw)
        const mode = state.refuseNext > 0 ? 'refuse' : state.mode
        if (state.refuseNext > 0) state.refuseNext--
        state.received.push({
          messageId: headers.get('message-id') ?? '',
          to: headers.get('to') ?? '',
          subject: headers.get('subject') ?? '',
          text: decodeText(body, headers.get('content-transfer-encoding')),
          raw,
          answer: mode === 'accept' ? 'accepted' : mode === 'hold' ? 'held' : 'refused',
          at: performance.now(),
        })
        if (mode === 'accept') callback()
        else if (mode === 'refuse') callback(Object.assign(new Error('Try again later'), { responseCode: 451 }))
        else if (mode === 'reject') callback(Object.assign(new Error('No such mailbox'), { responseCode: 550 }))
        // hold: no answer at all, until the sender gives up or dies.
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  state.port = (server.server.address() as { port: number }).port
  state.url = `smtp://${credentials.user}:${credentials.password}@127.0.0.1:${state.port}`
  return state
}

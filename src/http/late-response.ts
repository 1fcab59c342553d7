/**
 * A large response that completes after its request's dispatch, sent in two writes instead of one per header part.
 *
 * Bun (1.4.5) writes a response into the socket's 16 KiB cork buffer, which leaves in one `send()`, when the
 * response completes inside the dispatch of its request (the handler and the microtasks drained right after it)
 * or when it fits the buffer. A response over 16 KiB that completes later — a request started in a later turn
 * (./turn-slices.ts), a page read from PostgreSQL, a write that waits for its group commit — is written uncorked:
 * the status line, each header's name, `: `, value and `\r\n`, and the body each take a `send()` of their own
 * (oven-sh/bun#41341, open). Measured on a bare `Bun.serve` with a 44 KB body at 64 connections: 22 µs of CPU per
 * response inside the dispatch, 148 µs after it (docs/performance.md "Large answers completed late").
 *
 * A direct stream's writes are corked: such a response is sent as its head with its body, then the last chunk.
 * The price is the framing: the body goes out with `Transfer-Encoding: chunked` instead of a `Content-Length`,
 * which every HTTP/1.1 client reads the same; and the body read back from the `Response` as its bytes, paid only by
 * the responses that would otherwise take the slow path. Responses completed inside their dispatch, small ones,
 * streams (event streams), HEAD answers and bodiless statuses are left as they are.
 */

import { isEventStream } from './event-stream.ts'

/** Bun's cork buffer (uSockets' LIBUS_SEND_BUFFER_LENGTH): a response up to this size leaves in one send anyway. */
export const CORK_BUFFER_BYTES = 16 * 1024

/** The dispatch running now: set when a request is handed to the app, cleared at the end of the loop's turn. */
let dispatching: object | null = null
let clearScheduled = false

/**
 * Marks the start of a request's dispatch; the token it returns tells `sendable` later whether the response completed
 * inside that dispatch. Bun drains a handler's microtasks before it reads the next socket, so a later dispatch or the
 * turn's end (a `setImmediate`, before any timer or later turn) always replaces the token.
 */
function enterDispatch(): object {
  const token = {}
  dispatching = token
  if (!clearScheduled) {
    clearScheduled = true
    setImmediate(() => {
      dispatching = null
      clearScheduled = false
    })
  }
  return token
}

/** Whether the response can carry a body the client reads (not HEAD's, not a bodiless status). */
function carriesBody(method: string, status: number): boolean {
  return method !== 'HEAD' && status >= 200 && status !== 204 && status !== 304
}

/**
 * The response as it is best sent: unchanged when it completed inside the dispatch `token` marks, or when it is
 * small, an event stream or bodiless; otherwise its bytes re-framed as a direct stream with the same status and headers.
 */
async function sendable(response: Response, method: string, token: object): Promise<Response> {
  if (dispatching === token || !carriesBody(method, response.status) || isEventStream(response)) return response
  // As bytes, text included: Elysia answers JSON with `Response.json`, whose body Bun holds as UTF-8, so a string would
  // be decoded here and encoded again as the stream writes it (the 114 KB notes page: 11–13 % of its CPU).
  const body = await response.bytes()
  const init = { status: response.status, statusText: response.statusText, headers: response.headers }
  if (body.byteLength <= CORK_BUFFER_BYTES) return new Response(body, init)
  const stream = new ReadableStream({
    type: 'direct',
    pull(controller) {
      // A client that does not read: the chunk is taken anyway, and the stream ends once it has drained.
      const written = controller.write(body)
      if (typeof written === 'number') return controller.close()
      return written.then(() => controller.close())
    },
  })
  return new Response(stream, init)
}

/** The server's `fetch`, its late large responses re-framed (see above): `Bun.serve({ fetch: sendLateResponsesWhole(fetch) })`. */
export function sendLateResponsesWhole<Server>(fetch: (request: Request, server: Server) => Promise<Response>): (request: Request, server: Server) => Promise<Response> {
  return async (request, server) => {
    const dispatch = enterDispatch()
    return sendable(await fetch(request, server), request.method, dispatch)
  }
}

/**
 * Server-Sent Events (the WHATWG `text/event-stream` format) as an HTTP answer: a Response whose body is pulled from
 * a source of text chunks — events and heartbeat comments — only as fast as the client reads it (a client that stops
 * reading is not written to: Bun stops pulling once the socket backs up), and whose source is closed when the client
 * goes away. The handler returns the Response at once; the source writes later, from whatever wakes it.
 */
import type { DocumentDecoration } from 'elysia'
import { badRequest } from '../lib/errors.ts'

/** What an event stream writes: the next chunk when there is one (null: the stream ends), and close. */
export interface ChunkSource {
  next(): Promise<string | null>
  close(): void
}

/** `Last-Event-ID`: a stream resumed after this event id. */
export const LAST_EVENT_ID = 'last-event-id'

/** How long an EventSource waits before it reconnects (the stream's first line, `retry:`). */
export const RECONNECT_MS = 2_000

export const EVENT_STREAM_TYPE = 'text/event-stream; charset=utf-8'

/** One event: `id:`, `event:` and its data as one line of JSON (JSON never holds a raw line break). */
export function sseEvent(id: number, type: string, data: unknown): string {
  return `id: ${id}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`
}

/** A comment line: ignored by clients, it keeps proxies and the connection from timing the stream out. */
export const HEARTBEAT = ': heartbeat\n\n'

/**
 * The event id a reconnecting client sends (`Last-Event-ID`): events after it follow. None: null. Anything but an
 * integer from 0 to 2^53 − 1 is a 400 naming the header.
 */
export function lastEventIdOf(request: Request): number | null {
  const raw = request.headers.get(LAST_EVENT_ID)
  if (raw === null) return null
  const value = raw.trim()
  if (/^\d{1,16}$/.test(value) && Number.isSafeInteger(Number(value))) return Number(value)
  throw badRequest('invalid_last_event_id', `Header 'Last-Event-ID' must be an event id: an integer between 0 and ${Number.MAX_SAFE_INTEGER}`)
}

/**
 * How /openapi.json documents an event stream: the `Last-Event-ID` header, and the 200 as `text/event-stream` whose
 * events' `data:` is `eventData` (a schema with an `$id`, listed in `components/schemas`).
 */
export function eventStreamDocs(
  description: string,
  eventData: object,
  parameters: NonNullable<DocumentDecoration['parameters']> = [],
): Pick<DocumentDecoration, 'parameters' | 'responses'> {
  const stream = {
    schema: { type: 'string', description: 'Server-Sent Events: `id:` the event id, `event:` its type, `data:` one line of JSON (x-event-data); comment lines (`:`) are heartbeats' },
    'x-event-data': eventData,
  }
  return {
    parameters: [
      ...parameters,
      {
        name: 'Last-Event-ID',
        in: 'header',
        required: false,
        description: 'Resume: only the events after this event id follow (an EventSource sends the last `id:` it received when it reconnects)',
        schema: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      },
    ],
    responses: {
      200: {
        description,
        // An OpenAPI extension (`x-`): 3.1 has no field for the items of a stream.
        content: { 'text/event-stream': stream as { schema: object } },
      },
    },
  }
}

/**
 * The stream as an answer: pulled chunk by chunk; the source (opened here) is closed when the client cancels or
 * disconnects. A HEAD gets the head alone and opens nothing (Bun held such an answer open, then reset it).
 */
export function eventStreamResponse(request: Request, open: () => ChunkSource): Response {
  const headers = { 'content-type': EVENT_STREAM_TYPE, 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }
  if (request.method === 'HEAD') return new Response(null, { headers })
  const source = open()
  const encoder = new TextEncoder()
  request.signal.addEventListener('abort', () => source.close(), { once: true })
  const body = new ReadableStream<Uint8Array>(
    {
      start: (controller) => controller.enqueue(encoder.encode(`retry: ${RECONNECT_MS}\n\n`)),
      pull: async (controller) => {
        const chunk = await source.next()
        if (chunk === null) controller.close()
        else controller.enqueue(encoder.encode(chunk))
      },
      cancel: () => source.close(),
    },
    { highWaterMark: 0 },
  )
  return new Response(body, { headers })
}

/** Whether an answer is an event stream (`serve` lifts the idle timeout for it: it is quiet between events). */
export function isEventStream(response: Response): boolean {
  return response.headers.get('content-type')?.startsWith('text/event-stream') === true
}

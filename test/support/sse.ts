/**
 * A Server-Sent Events client for tests, reading a `text/event-stream` answer block by block as the WHATWG parser
 * does: `id:`, `event:`, `data:` (joined with newlines), `retry:`; comment lines (heartbeats) are reported as such.
 */

export interface SseEvent {
  id: string | null
  event: string
  data: Record<string, unknown>
}

export type SseItem = SseEvent | { comment: string } | { retry: number }

export const isEvent = (item: SseItem | null): item is SseEvent => item !== null && 'event' in item

export class SseReader {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>
  private readonly decoder = new TextDecoder()
  private buffer = ''
  private readonly items: SseItem[] = []
  private ended = false
  /** Every item read so far, in order. */
  readonly seen: SseItem[] = []

  constructor(readonly response: Response) {
    if (!response.body) throw new Error(`no body (status ${response.status})`)
    this.reader = response.body.getReader() as ReadableStreamDefaultReader<Uint8Array>
  }

  /** The next item, or null once the stream has ended; fails after `timeoutMs` without one. */
  async next(timeoutMs = 10_000): Promise<SseItem | null> {
    const deadline = Date.now() + timeoutMs
    while (this.items.length === 0 && !this.ended) {
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no event-stream item within ${timeoutMs} ms (seen: ${JSON.stringify(this.seen.slice(-5))})`)
      let timer: ReturnType<typeof setTimeout> | undefined
      const chunk = await Promise.race([
        this.reader.read(),
        new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), left))),
      ]).finally(() => clearTimeout(timer))
      if (chunk === 'timeout') continue
      if (chunk.done) this.ended = true
      else this.parse(this.decoder.decode(chunk.value, { stream: true }))
    }
    const item = this.items.shift() ?? null
    if (item) this.seen.push(item)
    return item
  }

  /** The events (comments skipped) up to and including the first that `last` accepts. */
  async eventsUntil(last: (event: SseEvent) => boolean, timeoutMs = 15_000): Promise<SseEvent[]> {
    const deadline = Date.now() + timeoutMs
    const events: SseEvent[] = []
    for (;;) {
      const item = await this.next(Math.max(1, deadline - Date.now()))
      if (item === null) throw new Error(`the stream ended before the awaited event (got ${events.map((e) => e.event).join(', ')})`)
      if (!isEvent(item)) continue
      events.push(item)
      if (last(item)) return events
    }
  }

  /** Every event until the stream ends (comments skipped). */
  async rest(timeoutMs = 15_000): Promise<SseEvent[]> {
    const deadline = Date.now() + timeoutMs
    const events: SseEvent[] = []
    for (;;) {
      const item = await this.next(Math.max(1, deadline - Date.now()))
      if (item === null) return events
      if (isEvent(item)) events.push(item)
    }
  }

  /** Disconnects (the server sees the stream cancelled). */
  async close(): Promise<void> {
    await this.reader.cancel().catch(() => {})
  }

  private parse(text: string): void {
    this.buffer += text
    for (let end = this.buffer.indexOf('\n\n'); end >= 0; end = this.buffer.indexOf('\n\n')) {
      const block = this.buffer.slice(0, end)
      this.buffer = this.buffer.slice(end + 2)
      let id: string | null = null
      let event = 'message'
      const data: string[] = []
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          this.items.push({ comment: line.slice(1).trim() })
          continue
        }
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'id') id = value
        else if (field === 'event') event = value
        else if (field === 'data') data.push(value)
        else if (field === 'retry') this.items.push({ retry: Number(value) })
      }
      if (data.length > 0) this.items.push({ id, event, data: JSON.parse(data.join('\n')) as Record<string, unknown> })
    }
  }
}

export interface RawStream {
  text(): string
  /** Until the text received holds `text` (or matches it). */
  until(text: string | RegExp, timeoutMs?: number): Promise<void>
  close(): void
}

/**
 * A stream read over a bare TCP socket: `fetch` holds at most 256 connections per process, and this holds as many as
 * the test asks (`headers`: more request headers, a `Last-Event-ID`). Its text is the answer as sent (head, then the
 * chunked body; each chunk is whole events).
 */
export async function rawStream(base: string, path: string, token: string, headers: Record<string, string> = {}): Promise<RawStream> {
  const { hostname, port } = new URL(base)
  let received = ''
  const waiting = new Set<() => void>()
  const socket = await Bun.connect({
    hostname,
    port: Number(port),
    socket: {
      data: (_socket, chunk) => {
        received += chunk.toString()
        for (const check of waiting) check()
      },
    },
  })
  const more = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n${more}\r\n`)
  return {
    text: () => received,
    until: (text, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${String(text)} within ${timeoutMs} ms: ${received.slice(-300)}`)), timeoutMs)
        const check = () => {
          if (typeof text === 'string' ? !received.includes(text) : !text.test(received)) return
          clearTimeout(timer)
          waiting.delete(check)
          resolve()
        }
        waiting.add(check)
        check()
      }),
    close: () => socket.end(),
  }
}

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

/**
 * When the request being served arrived (`performance.now()` as the server's handler was called), carried through
 * everything its handling awaits. Work that must see every commit made before the request arrived — the PostgreSQL
 * lookup cache (src/db/postgres/lookup-cache.ts), the lists' watermark (src/db/postgres/list-watermark.ts) — may then
 * reuse a check it sent after that moment instead of asking again. Outside a served request (the executor, the CLI,
 * `app.handle` in tests) there is none, and such work asks.
 */
import { AsyncLocalStorage } from 'node:async_hooks'

/** A request being served: when it arrived, and when a write of its own last committed. */
interface Served {
  arrived: number
  wrote?: number
}

const served = new AsyncLocalStorage<Served>()

/** `serve` calls its handler inside this: `fn`, and all it awaits, is the request that arrived `at`. */
export function servingRequestArrivedAt<T>(at: number, fn: () => T): T {
  return served.run({ arrived: at }, fn)
}

/**
 * `fn`, and all it awaits, outside any request: work on a schedule of its own that must see every commit made before
 * it runs (an event stream's re-check), even when it was set going by a request long ago — a timer started while
 * serving a request carries that request's arrival otherwise.
 */
export function outsideAnyRequest<T>(fn: () => T): T {
  return served.exit(fn)
}

/** The arrival of the request being served, or undefined outside one. */
export function arrivalOfThisRequest(): number | undefined {
  return served.getStore()?.arrived
}

/** Tells the request being served (if any) that a write of its own has just committed. */
export function requestWroteNow(): void {
  const request = served.getStore()
  if (request !== undefined) request.wrote = performance.now()
}

/**
 * Since when the request being served must see every commit in what it reads of a list: its arrival, or its own
 * latest write's commit when it wrote (a note's answer after its insert reads the note as listed). Undefined outside
 * a request.
 */
export function commitsThisRequestMustSee(): number | undefined {
  const request = served.getStore()
  return request?.wrote ?? request?.arrived // a write commits after its request arrived
}

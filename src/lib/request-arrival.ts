/**
 * When the request being served arrived (`performance.now()` as the server's handler was called), carried through
 * everything its handling awaits. Work that must see every commit made before the request arrived — the PostgreSQL
 * lookup cache (src/db/postgres/lookup-cache.ts) — may then reuse a check it sent after that moment instead of asking
 * again. Outside a served request (the executor, the CLI, `app.handle` in tests) there is none, and such work asks.
 */
import { AsyncLocalStorage } from 'node:async_hooks'

const arrivals = new AsyncLocalStorage<number>()

/** `serve` calls its handler inside this: `fn`, and all it awaits, is the request that arrived `at`. */
export function servingRequestArrivedAt<T>(at: number, fn: () => T): T {
  return arrivals.run(at, fn)
}

/**
 * `fn`, and all it awaits, outside any request: work on a schedule of its own that must see every commit made before
 * it runs (an event stream's re-check), even when it was set going by a request long ago — a timer started while
 * serving a request carries that request's arrival otherwise.
 */
export function outsideAnyRequest<T>(fn: () => T): T {
  return arrivals.exit(fn)
}

/** The arrival of the request being served, or undefined outside one. */
export function arrivalOfThisRequest(): number | undefined {
  return arrivals.getStore()
}

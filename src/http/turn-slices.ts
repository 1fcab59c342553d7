/**
 * Short turns of the event loop under load, so that a liveness probe is never held behind a crowd
 * (`/healthz` p99 under 50 ms throughout a saturating load).
 *
 * One JavaScript thread serves every request. Without this, each turn of the event loop starts every request that
 * arrived meanwhile — with 96 busy clients, 96 requests of 1–2 ms of synchronous work each — and a `/healthz` that
 * arrived during that turn waits for all of them, then for the next turn's crowd. Here a request starts at once
 * while the current slice of the turn (SLICE_MS of work) lasts; past it, requests wait in arrival order and start
 * in the following turns, a slice's worth each, so that every turn polls the sockets again after about SLICE_MS.
 * The probes (`/healthz`, `/readyz`) never wait: they answer in the turn that reads them.
 *
 * What it does not change: every admitted request runs to its end as before (a request is never cut in the middle,
 * a write still joins the turn's group commit), nothing is refused (the queue holds at most one entry per open
 * connection, bounded by the clients), and with no crowd every request starts at once.
 */
import { Slices } from '../lib/slices.ts'
import { requestPath } from './server-request.ts'

/** The work one turn starts before it lets the event loop read the sockets again. */
export const SLICE_MS = 2

/**
 * The ms of a busy turn that are `percent` of it when HTTP's requests have their slice (SLICE_MS) of the rest: the
 * executor's share (TRELLIS_EXECUTOR_SHARE) as the time its writes may take in one group commit.
 */
export const shareOfTurnMs = (percent: number) => (SLICE_MS * percent) / (100 - percent)

/** Requests that start at once whatever the load: the probes an orchestrator restarts the process over. */
const PROBES = new Set(['/healthz', '/readyz'])

/** HTTP's requests in slices of SLICE_MS per turn (../lib/slices.ts), but the probes, which start at once. */
export class TurnSlices {
  private readonly slices = new Slices(SLICE_MS)

  /** `handle(request)`, started at once or, past this turn's slice, in a later turn in arrival order. */
  run<T>(request: Request, handle: (request: Request) => Promise<T>): Promise<T> {
    if (PROBES.has(requestPath(request))) return handle(request)
    return this.slices.run(() => handle(request))
  }

  /** Whether HTTP presses: a request waits for a later turn (a trickle of requests, each served at once, does not count). */
  get busy(): boolean {
    return this.slices.busy
  }

  /** How many requests wait for a later turn (for tests and metrics). */
  get queued(): number {
    return this.slices.queued
  }
}

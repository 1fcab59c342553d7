/**
 * Completion callbacks (docs/workflows.md "Completion callbacks"): the rules every part shares — the events, the
 * endpoint's URL and secret, the body a delivery signs, and the retry schedule. The secret is never stored: it is
 * derived from the instance secret, the endpoint's id and its salt, so rotating the instance secret changes every one.
 */
import { createHmac } from 'node:crypto'
import { backoffDelayMs } from './backoff.ts'
import { type AllowList, OPENED_BY, refusedAddressClass } from './outbound/policy.ts'
import { redactUrlsIn } from './outbound/redact.ts'
import { toIso, toIsoMicros, type Micros } from './time.ts'

/** The run ends an endpoint may be sent: the events it is sent when it names none. */
export const RUN_CALLBACK_EVENTS = ['workflow_run.succeeded', 'workflow_run.failed', 'workflow_run.cancelled'] as const
/** A task's life (docs/workflows.md "Task steps"): sent only to the endpoints that name them. */
export const TASK_CALLBACK_EVENTS = ['task.opened', 'task.decided', 'task.closed'] as const
export const CALLBACK_EVENTS = [...RUN_CALLBACK_EVENTS, ...TASK_CALLBACK_EVENTS] as const
export type CallbackEvent = (typeof CALLBACK_EVENTS)[number]
export type TaskCallbackEvent = (typeof TASK_CALLBACK_EVENTS)[number]

/** The event a run ending in `status` sends. */
export const callbackEventOf = (status: 'succeeded' | 'failed' | 'cancelled'): CallbackEvent => `workflow_run.${status}`

/** The longest callback URL accepted. */
export const CALLBACK_URL_MAX_LENGTH = 2000
/** Endpoints one workflow may have. */
export const MAX_CALLBACKS_PER_WORKFLOW = 10
/** An answer must arrive (status line and headers) within this, or the attempt failed. */
export const CALLBACK_TIMEOUT_MS = 10_000
/** How long a worker holds a delivery it sends: the timeout and ample time to record the attempt. */
export const CALLBACK_LEASE_MS = CALLBACK_TIMEOUT_MS + 20_000
/** Attempts of one delivery before it is marked failed (a resend starts a new series). */
export const CALLBACK_MAX_ATTEMPTS = 33
/** The first wait between attempts, unless TRELLIS_CALLBACK_RETRY_MS says otherwise. */
export const DEFAULT_CALLBACK_RETRY_MS = 5_000
/** The longest wait, in units of the first one: 720 × 5 s = 1 h. */
export const CALLBACK_BACKOFF_CAP = 720

/**
 * The wait after the `failed`th failed attempt of a series: `baseMs` doubling (1, 2, 4 … 512 times it), then 720
 * times it, each ±25 % at random (jitter: receivers coming back are not hit by every sender at once). With the
 * default 5 s: 5 s, 10 s … 42 min 40 s, then 1 h; the 33rd attempt comes about 23 h 25 min after the first.
 */
export function callbackRetryDelayMs(failed: number, baseMs: number, random = Math.random): number {
  return backoffDelayMs(failed, baseMs, CALLBACK_BACKOFF_CAP, random)
}

/**
 * What is wrong with a callback URL, or null: an absolute http(s) URL without user or password, at most
 * CALLBACK_URL_MAX_LENGTH characters, whose host — when it is an address — is one outbound requests may reach
 * (src/lib/outbound/). A host name is judged when a delivery resolves it (its DNS may change meanwhile).
 */
export function callbackUrlProblem(text: string, allow: AllowList): string | null {
  if (text.length > CALLBACK_URL_MAX_LENGTH) return `must be at most ${CALLBACK_URL_MAX_LENGTH} characters`
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'must be an absolute http or https URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `must be an http or https URL, not ${url.protocol.slice(0, -1)}`
  if (url.username !== '' || url.password !== '') return 'must not hold a user name or password (the signature authenticates each call)'
  const literal = url.hostname.replace(/^\[(.*)\]$/, '$1')
  const refused = isAddress(literal) ? refusedAddressClass(literal, allow) : null
  if (refused) return `points to a ${refused} address (${url.hostname}), which outbound requests may not reach: ${OPENED_BY}`
  return null
}

/** The WHATWG parser writes every IPv4 spelling as a.b.c.d and IPv6 in brackets: anything else is a name. */
const isAddress = (host: string) => /^\d+\.\d+\.\d+\.\d+$/.test(host) || host.includes(':')

/** The endpoint's signing secret, `whsec_` + base64 of HMAC-SHA256(instance secret, "callback:<id>:<salt>"). */
export function callbackSecret(instanceSecret: Buffer, endpointId: string, salt: string): string {
  return `whsec_${createHmac('sha256', instanceSecret).update(`callback:${endpointId}:${salt}`).digest('base64')}`
}

/** What a callback's body tells of the run that ended, as read in its final transaction. */
export interface EndedRun {
  id: string
  status: 'succeeded' | 'failed' | 'cancelled'
  trigger: string
  recordId: string
  /** The stored JSON `{code, message, step?}`, or null. */
  error: string | null
  retryOf: string | null
  createdAt: Micros
  startedAt: number | null
  finishedAt: number
  workflow: string
  workflowVersion: number
  project: string
  environment: string
  team: string
}

/**
 * The body a delivery sends, signed and sent as these very bytes on every attempt (Standard Webhooks: `type`,
 * `timestamp` — when the run ended —, `data`). An error's message shows URLs as runs do (no user, password, query).
 */
export function callbackPayload(run: EndedRun): string {
  const error = run.error === null ? null : (JSON.parse(run.error) as { message?: unknown })
  return JSON.stringify({
    type: callbackEventOf(run.status),
    timestamp: toIso(run.finishedAt),
    data: {
      runId: run.id,
      workflow: run.workflow,
      workflowVersion: run.workflowVersion,
      project: run.project,
      environment: run.environment,
      team: run.team,
      recordId: run.recordId,
      status: run.status,
      trigger: run.trigger,
      error: error !== null && typeof error.message === 'string' ? { ...error, message: redactUrlsIn(error.message) } : error,
      retryOf: run.retryOf,
      createdAt: toIsoMicros(run.createdAt),
      startedAt: run.startedAt === null ? null : toIso(run.startedAt),
      finishedAt: toIso(run.finishedAt),
    },
  })
}

/**
 * The body a task's event sends (`type`, `timestamp` — when it happened —, `data`: the task as `GET /v1/tasks/{id}`
 * shows it at that moment, decisions and form included; a task holds no secret).
 */
export function taskCallbackPayload(type: TaskCallbackEvent, at: number, task: object): string {
  return JSON.stringify({ type, timestamp: toIso(at), data: task })
}

import { answer as opAnswer } from '../../db/op.ts'
import { DestinationRefusedError } from '../../lib/outbound/client.ts'
import { redactUrl, redactUrlsIn, StepSecrets } from '../../lib/outbound/redact.ts'
import { traceHeaders } from '../../lib/tracing.ts'
import type { Step } from '../../modules/workflows/definition.ts'
import { StepFailure, type StepRunner } from '../step.ts'
import { renderTemplate, renderUrl, type TemplateVariables, UrlTemplateError } from '../../lib/template.ts'
import { templateVariables } from './variables.ts'

type Http = Extract<Step, { type: 'http' }>

export const HTTP_DEFAULT_RETRIES = 3
/** Characters of an answer's body kept in the step's output; the rest is not read. */
export const HTTP_STORED_BODY_CHARS = 2000
const BASE_BACKOFF_MS = 500
const MAX_BACKOFF_MS = 30_000

/** Exponential backoff with full jitter: attempt 1 → up to 0.5 s, 2 → 1 s, … capped at 30 s. */
export function backoffMs(attempt: number, random = Math.random): number {
  return Math.round(random() * Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** (attempt - 1)))
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve()
    }, { once: true })
  })
}

/** The step's URL with its values placed; a URL that cannot be called fails the step at once. */
function renderedUrl(template: string, vars: TemplateVariables): URL {
  try {
    return renderUrl(template, vars)
  } catch (error) {
    if (error instanceof UrlTemplateError) throw new StepFailure('http_invalid_url', error.message)
    throw error
  }
}

/**
 * Calls out through the executor's outbound client (destinations checked, redirects not followed, the answer read
 * up to what is stored). 5xx, timeouts and network errors are retried (bounded, backoff with jitter); other statuses
 * and a refused destination are final. The call happens before the step is recorded: after a crash between the two
 * it is repeated (at-least-once), which is why receivers should be idempotent on `{{run.id}}`.
 */
export const runHttp: StepRunner<Http> = async (ctx, step) => {
  const vars = templateVariables(ctx)
  const url = renderedUrl(step.url, vars)
  const headers = renderTemplate(step.headers ?? {}, vars)
  const body = step.body === undefined ? undefined : JSON.stringify(renderTemplate(step.body, vars))
  const retries = step.retries ?? HTTP_DEFAULT_RETRIES
  const timeoutMs = (step.timeoutSeconds ?? 10) * 1000
  // Every member who can read the run sees what the step records: its URL redacted, its credentials taken out.
  const secrets = StepSecrets.ofHttpStep(step.url, url, headers)
  const shown = `${step.method} ${redactUrl(url)}`
  let lastProblem = ''
  for (let attempt = 1; attempt <= retries + 1; attempt++) {
    if (ctx.signal.aborted) throw new StepFailure('aborted', 'The executor stopped during the call')
    ctx.heartbeat()
    try {
      const answer = await ctx.outbound.send(url, {
        method: step.method,
        headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), 'x-trellis-run-id': ctx.target.run.id, ...traceHeaders(ctx.traceparent ?? null), ...headers },
        body,
        signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(timeoutMs)]),
        // Read past the limit by the longest secret, so that one the limit would cut is still found whole.
        maxBodyChars: HTTP_STORED_BODY_CHARS + secrets.longest,
      })
      if (answer.status < 500) {
        const scrubbed = secrets.scrub(answer.body)
        const truncated = answer.truncated || scrubbed.length > HTTP_STORED_BODY_CHARS
        const output = { status: answer.status, attempts: attempt, body: scrubbed.slice(0, HTTP_STORED_BODY_CHARS), ...(truncated ? { bodyTruncated: true } : {}) }
        if (answer.status >= 400) throw new StepFailure('http_failed', `${shown} answered ${answer.status}`, output)
        return () => opAnswer({ next: 'continue', output })
      }
      lastProblem = `answered ${answer.status}`
    } catch (error) {
      if (error instanceof StepFailure) throw error
      if (error instanceof DestinationRefusedError) throw new StepFailure('http_destination_refused', error.message)
      lastProblem = (error as Error).name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : secrets.scrub(redactUrlsIn((error as Error).message))
    }
    if (attempt <= retries) await sleep(backoffMs(attempt), ctx.signal)
  }
  throw new StepFailure('http_failed', `${shown} ${lastProblem} after ${retries + 1} attempts`, { attempts: retries + 1 })
}

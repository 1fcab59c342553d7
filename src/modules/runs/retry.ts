/**
 * Retrying a failed or cancelled run: a new run of the same workflow version on the same record that
 * resumes at the step the old one stopped at, its steps before that carried over as recorded; one run at a time
 * (`POST /v1/workflow-runs/{runId}/retry`) or the failed runs matching a filter (project admins, bounded and
 * rate-limited). A run is retried at most once: the unique index on `runs.retry_of` decides, whatever races.
 */
import { randomUUIDv7 } from 'bun'
import { type Op, savepoint } from '../../db/op.ts'
import { holdRetriedRun } from '../../db/queue.ts'
import { findTriggerTarget } from '../../db/workflows.ts'
import type { DateFilter } from '../../lib/date-filter.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict, forbidden, HttpError, notFound, tooManyRequests } from '../../lib/errors.ts'
import { type RateCounters, retryAfterOf } from '../../lib/rate-counters.ts'
import { isRetryableStatus } from '../../lib/run-statuses.ts'
import { canReachRendering } from '../directory/projects.ts'
import { findRun, listRunIds, queueRun, type RunActor, workflowIdsNamed } from './service.ts'

/** Who retries: the new run acts as this user (with the token, when the call was made with one). */
export type Retrier = RunActor

/**
 * The retry's op: checks the run may be retried, then queues the new run (./service.ts `queueRun`): the run's
 * version and record, acting as `by`, resuming at the run's `next_step` — the step that failed, or for a cancelled
 * run the first step it had not done — with its steps before that carried over. 409 `run_not_retryable` while it is
 * active or once it succeeded, `workflow_withdrawn` when its workflow has no active version, `already_retried`,
 * `run_in_progress`; 403 `rendering_forbidden` when `by` can no longer reach the workflow's team; 404 when the run
 * history's retention deleted the run meanwhile. Answers the new run's id. `traceContext`: the retrying request's
 * `traceparent` (tracing on), which the new run's trace links to.
 */
export function* retryRun(clock: Clock, id: string, found: RetriedRun, by: Retrier, traceContext: string | null = null): Op<string> {
  const { run } = found
  if (!(yield* holdRetriedRun(run.id))) throw notFound(`Run ${run.id} not found`)
  if (!isRetryableStatus(run.status)) {
    throw conflict('run_not_retryable', `Run ${run.id} is ${run.status}: only a failed or cancelled run can be retried`, { status: run.status })
  }
  const target = yield* findTriggerTarget(run.workflowId)
  if (target?.activeVersionId == null) throw conflict('workflow_withdrawn', `Workflow ${found.workflowName} has no active version: its runs are not retried`)
  if (!(yield* canReachRendering({ userId: by.userId, projectId: found.projectId, teamId: found.teamId }))) {
    throw forbidden('You cannot reach this workflow\'s team', 'rendering_forbidden')
  }
  return yield* queueRun(clock, id, {
    target: { workflowId: run.workflowId, workflowName: found.workflowName, environmentId: run.environmentId, teamId: found.teamId, collectionId: found.collectionId },
    versionId: run.workflowVersionId,
    recordId: run.recordId,
    userId: by.userId,
    tokenId: by.tokenId,
    via: by.via,
    trigger: 'manual',
    retry: { of: run.id, resumeAt: run.nextStep },
    traceContext,
  })
}

/** What `retryRun` reads of the run it retries (`findRun`'s answer). */
export interface RetriedRun {
  run: { id: string; status: string; workflowId: number; workflowVersionId: number; environmentId: number; recordId: string; nextStep: number }
  workflowName: string
  projectId: number
  teamId: number
  collectionId: number
}

// ── Bulk ──────────────────────────────────────────────────────────────────────

/** Runs one bulk call retries at most (`limit`, and its default). */
export const BULK_RETRY_MAX_RUNS = 100
/** Bulk calls per project per minute, whoever makes them (a token's calls also count against its API budget). */
export const BULK_RETRY_CALLS_PER_MINUTE = 10

/** Which failed runs a bulk retry takes: of one workflow (in one team when given), created in a time range. */
export interface BulkRetryFilter {
  workflowName: string
  teamName?: string
  /** `createdAt` comparisons (`gte` createdAfter, `lt` createdBefore), in µs. */
  dates: DateFilter[]
}

export interface BulkRetryOutcome {
  retried: { runId: string; retryOf: string }[]
  skipped: { runId: string; code: string }[]
  more: boolean
}

/**
 * Counts a bulk call against its project's budget (`BULK_RETRY_CALLS_PER_MINUTE`, where the store keeps the limits:
 * shared by every instance on PostgreSQL); 429 with Retry-After over it.
 */
export async function takeBulkRetryCall(counters: RateCounters, clock: Clock, projectId: number): Promise<void> {
  const now = clock.now()
  const take = await counters.take([{ scope: 'bulk-retry', id: projectId, sizeMs: 60_000, limit: BULK_RETRY_CALLS_PER_MINUTE }], now)
  if (!take.taken) throw tooManyRequests(retryAfterOf(take, now), 'Bulk retry rate exceeded for this project')
}

/**
 * The bulk retry's op, one transaction: the environment's newest `limit` failed runs matching `filter` that no run
 * retries yet, each retried as `by` (`retryRun`, in a savepoint: a run the rules refuse, or deleted meanwhile, is
 * skipped with its code, the others go on). `more` when further matching runs are left.
 */
export function* retryFailedRuns(clock: Clock, environmentId: number, filter: BulkRetryFilter, limit: number, by: Retrier): Op<BulkRetryOutcome> {
  const workflowIds = yield* workflowIdsNamed(environmentId, filter.workflowName, filter.teamName)
  const ids = yield* listRunIds(environmentId, { workflowIds, status: 'failed', notRetried: true }, filter.dates, limit)
  const answer: BulkRetryOutcome = { retried: [], skipped: [], more: ids.length > limit }
  for (const runId of ids.slice(0, limit)) {
    try {
      const found = yield* findRun(runId)
      if (!found) throw notFound(`Run ${runId} not found`)
      answer.retried.push({ runId: yield* savepoint(() => retryRun(clock, randomUUIDv7(), found, by)), retryOf: runId })
    } catch (error) {
      // 404: on PostgreSQL the run history's retention may delete a listed run before its turn.
      if (!(error instanceof HttpError) || (error.status !== 409 && error.status !== 404)) throw error
      answer.skipped.push({ runId, code: error.code })
    }
  }
  return answer
}

/**
 * The runs API's calls made by a caller — read, cancel, retry, start by hand — as the REST routes (./index.ts) and the
 * MCP tools (../mcp/) make them: one implementation, so a tool answers and logs exactly what its route does.
 */
import { randomUUIDv7 } from 'bun'
import type { Store } from '../../db/store.ts'
import { read, readListed } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import type { Clock } from '../../lib/clock.ts'
import { forbidden, notFound } from '../../lib/errors.ts'
import type { Channel } from '../activity-logs/service.ts'
import type { MailSettings } from '../mail/service.ts'
import { callerProject, requireCallerScope } from '../auth/service.ts'
import { canReachRendering, requireEnvironment } from '../directory/projects.ts'
import { requireWorkflow } from '../workflows/service.ts'
import { canonicalStartBody, idempotentCall, type RunStarted, startRunOnce } from './idempotency.ts'
import { retryRun } from './retry.ts'
import { currentTraceparent } from '../../lib/tracing.ts'
import { cancelRun, renderRuns, type RunActor, visibleRun } from './service.ts'

/** What the calls use of the app: the store, the clock, the executor to wake (when one runs here), the key window, mail. */
export interface RunCallDeps {
  store: Store
  clock: Clock
  executor?: { notify(): void; abortRun(runId: string): void }
  config: { idempotencyKeyWindowMs: number }
  /** Where a cancelled task's outcome mail goes (to the run's user): null without SMTP. */
  mail: MailSettings | null
}

/** Who acts: the caller's user, through its token when the call was made with one, and how the call came in. */
export const actorOf = (caller: AccountCaller, via?: Channel): RunActor => ({ userId: caller.user.id, tokenId: caller.token?.tokenId ?? null, via })

/** A run as the API shows it now; 404 unless the caller may see it (`visibleRun`). */
export async function readRunAs(deps: RunCallDeps, caller: AccountCaller, runId: string) {
  const { run } = await read(deps.store, visibleRun(caller, runId))
  // A pruning pass may delete the run between the two reads (PostgreSQL reads each statement in its own snapshot).
  // Rendered once listed: its createdAt is final then (the lists' pass may move a new run's by microseconds).
  const [rendered] = await readListed(deps.store, 'runs', renderRuns([run.id], deps.clock.now()))
  if (rendered === undefined) throw notFound(`Run ${runId} not found`)
  return rendered
}

/** Cancels a run the caller may see (scope `workflows:trigger`); 409 `run_finished` once it has finished. Answers the run. */
export async function cancelRunAs(deps: RunCallDeps, caller: AccountCaller, runId: string, via?: Channel) {
  requireCallerScope(caller, 'workflows:trigger')
  await write(deps.store, function* () {
    yield* visibleRun(caller, runId)
    yield* cancelRun(deps.clock, deps.mail, runId, actorOf(caller, via))
  })
  deps.executor?.abortRun(runId)
  return (await read(deps.store, renderRuns([runId], deps.clock.now())))[0]!
}

/** Retries a failed or cancelled run the caller may see (scope `workflows:trigger`; ./retry.ts says which 409s). */
export async function retryRunAs(deps: RunCallDeps, caller: AccountCaller, runId: string, via?: Channel): Promise<{ runId: string; retryOf: string }> {
  requireCallerScope(caller, 'workflows:trigger')
  const id = randomUUIDv7()
  const traceContext = currentTraceparent() // in the request's turn (the transaction may run in another)
  const retried = await write(deps.store, function* () {
    return yield* retryRun(deps.clock, id, yield* visibleRun(caller, runId), actorOf(caller, via), traceContext)
  })
  deps.executor?.notify()
  return { runId: retried, retryOf: runId }
}

/** What a start by hand names: the workflow by its place and name, and the record. */
export interface StartByHand {
  workflowName: string
  teamName: string
  recordId: string
}

/**
 * Starts a run by hand (scope `workflows:trigger`): the project (403/404), the environment and the published workflow
 * (404), the caller reaching its team (403 `rendering_forbidden`), then one active run per record (409
 * `run_in_progress`) and the idempotency key (`keyOf`, read once the caller may start the workflow: 400 when invalid,
 * then a replay, or 422 `idempotency_key_reused`).
 */
export async function startRunAs(
  deps: RunCallDeps,
  caller: AccountCaller,
  place: { projectName: string; environmentName: string },
  start: StartByHand,
  keyOf: () => string | null,
  via?: Channel,
): Promise<RunStarted> {
  requireCallerScope(caller, 'workflows:trigger')
  const project = await read(deps.store, callerProject(caller, place.projectName))
  await read(deps.store, requireEnvironment(place.projectName, place.environmentName))
  const target = await read(deps.store, requireWorkflow(project.id, place.environmentName, start.teamName, start.workflowName))
  if (target.activeVersionId === null) throw notFound(`Workflow ${start.workflowName} has no active version`)
  if (!(await read(deps.store, canReachRendering({ userId: caller.user.id, projectId: project.id, teamId: target.teamId })))) {
    throw forbidden('You cannot reach this workflow\'s team', 'rendering_forbidden')
  }
  const call = idempotentCall(keyOf(), canonicalStartBody(start), deps.config.idempotencyKeyWindowMs)
  const started = await startRunOnce(deps.store, deps.clock, {
    target,
    versionId: target.activeVersionId,
    recordId: start.recordId,
    userId: caller.user.id,
    tokenId: caller.token?.tokenId ?? null,
    via,
    trigger: 'manual',
  }, call)
  if (!started.replayed) deps.executor?.notify()
  return started
}

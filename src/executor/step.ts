/** The contract between the executor loop and the step types (one file each under steps/). */
import type { RunRow } from '../db/queue.ts'
import type { RecordRow } from '../modules/records/service.ts'
import type { Clock } from '../lib/clock.ts'
import type { OutboundClient } from '../lib/outbound/client.ts'
import type { MailSettings } from '../modules/mail/service.ts'
import { type ActivityAction, appendActivityLog } from '../modules/activity-logs/service.ts'
import type { Step } from '../modules/workflows/definition.ts'
import { type Op } from '../db/op.ts'
import type { RunEventType } from '../db/run-events.ts'
import type { TaskOutcome } from '../lib/template.ts'

/** What a run acts on, resolved once when the run is claimed. */
export interface RunTarget {
  run: RunRow
  workflowName: string
  projectId: number
  environmentId: number
  teamId: number
  collectionId: number
}

export interface StepContext {
  target: RunTarget
  stepName: string
  /** The step's place in the definition (a task is the run's step's). */
  stepIndex: number
  /** The outcomes of the run's task steps closed so far, by step name; a task step adds its own. */
  tasks: Map<string, TaskOutcome>
  clock: Clock
  /** The record's data as last read by a data step in this process (templates read it). */
  record: Record<string, unknown> | null
  /** Extends the run's lease; long steps call it while they wait. */
  heartbeat(): void
  /** Aborted when the executor stops or the run is cancelled. */
  signal: AbortSignal
  /** The only way a step sends a request out. */
  outbound: OutboundClient
  /** What queuing a mail needs (a task step tells its assignees); null: no mail is sent. */
  mail: MailSettings | null
  /** The step's span's `traceparent` while tracing is on (an `http` step sends it); else null. */
  traceparent?: string | null
  /**
   * Set by a task step woken by its task's close: when it opened the task (epoch ms). Its span, recorded at the
   * decision, starts there — a span cannot stay open while the run is parked, perhaps across restarts.
   */
  openedAt?: number
}

/** Go on, end the run, or park it: until a time (`wait`), or until a task closes (`task`: the step runs again then). */
export type StepNext = 'continue' | 'end' | { waitUntil: number } | { awaitTask: string }

export interface StepResult {
  output?: unknown
  next: StepNext
  /** Data read by the step (load/update), kept for later templates. */
  record?: Record<string, unknown>
  /** Events of the run the step adds before its own (`task.opened`), appended with the group's. */
  events?: { type: RunEventType; data: Record<string, unknown> }[]
}

/** A step fails the run with a machine-readable code (`record_not_found`, `record_forbidden`, `http_failed`, `http_destination_refused`…). */
export class StepFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly output?: unknown,
  ) {
    super(message)
  }
}

/**
 * A step does its slow part (an HTTP call) in the async function, then returns the part that reads and
 * writes data: it runs inside the transaction that records the step, so effects and record commit together.
 * That part throws StepFailure only in its checks, before its first write: the executor runs it without a savepoint
 * of its own, so a write before a failure would commit with the failed step (test/executor.test.ts checks every type).
 */
export type StepRunner<S extends Step = Step> = (ctx: StepContext, step: S) => Promise<(reads: GroupReads) => Op<StepResult>>

/** What the data steps of one group's transaction have read so far (see `loadRecordAs`): fresh for each attempt. */
export interface GroupReads {
  access?: { read: boolean; edit: boolean }
  /** The record's row (null: there is none). */
  row?: RecordRow | null
  /** The record's data as the group's steps have left it. */
  data?: Record<string, unknown>
}

/**
 * An activity entry for something a run did to its record (read it, changed it, started, ended): the run's user
 * and token, `workflow {name, runId, stepName?}`. A step that does neither writes none (docs/api.md "Activity and admin logs").
 */
export function* logRunActivity(
  clock: Clock,
  target: RunTarget,
  entry: { action: ActivityAction; label: string; stepName?: string; type?: 'read' | 'write' },
): Op<void> {
  yield* appendActivityLog(clock, {
    environmentId: target.environmentId,
    type: entry.type ?? 'write',
    action: entry.action,
    label: entry.label,
    userId: target.run.user_id,
    teamId: target.teamId,
    collectionId: target.collectionId,
    tokenId: target.run.token_id,
    recordIds: [target.run.record_id],
    workflow: { name: target.workflowName, runId: target.run.id, ...(entry.stepName ? { stepName: entry.stepName } : {}) },
  })
}

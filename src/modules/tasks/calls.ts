/**
 * The tasks API's calls made by a caller — one task, a decision — as the REST routes (./index.ts) and the MCP tools
 * (../mcp/) make them: one implementation, so a tool answers, refuses and logs exactly what its route does (the list:
 * ./query.ts).
 */
import type { Store } from '../../db/store.ts'
import { read, readListed } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import type { Clock } from '../../lib/clock.ts'
import { notFound } from '../../lib/errors.ts'
import type { Channel } from '../activity-logs/service.ts'
import type { MailSettings } from '../mail/service.ts'
import { requireCallerScope } from '../auth/service.ts'
import { type DecisionInput, decideTask, renderTasks, visibleTask } from './service.ts'

/** What the calls use of the app: the store, the clock, the executor to wake when a decision closes a task. */
export interface TaskCallDeps {
  store: Store
  clock: Clock
  executor?: { notify(): void }
  /** Where the decision's mail goes (the outcome to the run's user): null without SMTP. */
  mail: MailSettings | null
}

/** The task as the API shows it now, once listed: its createdAt is final then (404 when its run was deleted meanwhile). */
async function renderedTask(store: Store, taskId: string) {
  const [task] = await readListed(store, 'tasks', renderTasks([taskId]))
  if (task === undefined) throw notFound(`Task ${taskId} not found`)
  return task
}

/** A task the caller sees (scope `tasks:read`; 404 otherwise), as the API shows it. */
export async function readTaskAs(store: Store, caller: AccountCaller, taskId: string) {
  requireCallerScope(caller, 'tasks:read')
  await read(store, visibleTask(caller, taskId))
  return renderedTask(store, taskId)
}

/**
 * The caller's decision on a task (scope `tasks:write`; `decideTask` says which refusals), waking the executor when it
 * closes the task; answers the task and whether the call repeated an earlier one with the same `Idempotency-Key`.
 */
export async function decideTaskAs(deps: TaskCallDeps, caller: AccountCaller, taskId: string, body: DecisionInput, idempotencyKey: string | null, via?: Channel) {
  requireCallerScope(caller, 'tasks:write')
  const decided = await write(deps.store, () => decideTask(deps.clock, taskId, body, { caller, via, idempotencyKey, mail: deps.mail }))
  if (decided.closed) deps.executor?.notify()
  return { task: await renderedTask(deps.store, taskId), replayed: decided.replayed }
}

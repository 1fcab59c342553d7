/** The states of a task (a `task` step's question to people): the one list every layer reads; the database's CHECK is built from it. */
export const TASK_STATUSES = ['open', 'approved', 'rejected', 'expired', 'cancelled'] as const
export type TaskStatus = (typeof TASK_STATUSES)[number]
/** What a decider answers. */
export const TASK_DECISIONS = ['approve', 'reject'] as const
export type TaskDecision = (typeof TASK_DECISIONS)[number]
/** What a task step does when its deadline passes (the executor's timers act on it). */
export const TASK_TIMEOUT_ACTIONS = ['fail', 'reject', 'approve', 'escalate'] as const
/** What a task step does when its task is rejected. */
export const TASK_REJECT_ACTIONS = ['fail', 'end', 'continue'] as const

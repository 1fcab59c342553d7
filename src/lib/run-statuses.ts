/** The states of a workflow run (DESIGN §8): the one list every layer reads; the database's CHECK is built from it. */
export const RUN_STATUSES = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled'] as const
export type RunStatus = (typeof RUN_STATUSES)[number]
/** Active: the record is busy (409 run_in_progress); the partial unique index covers exactly these. */
export const ACTIVE_RUN_STATUSES = ['queued', 'running', 'waiting'] as const
/** Finished: the run will not change again (retention prunes these; a failed or cancelled one may be retried). */
export const FINISHED_RUN_STATUSES = ['succeeded', 'failed', 'cancelled'] as const
/** Retryable: the run ended without succeeding (POST /v1/workflow-runs/{runId}/retry). */
export const RETRYABLE_RUN_STATUSES = ['failed', 'cancelled'] as const
/** Whether a run in `status` may be retried (once: whether a run already retries it is the database's to say). */
export const isRetryableStatus = (status: string): boolean => (RETRYABLE_RUN_STATUSES as readonly string[]).includes(status)

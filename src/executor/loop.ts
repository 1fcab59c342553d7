/**
 * What the serving process's claiming loops share — the executor (./executor.ts) and the outboxes' delivery loop
 * (./delivery-loop.ts): how a loop waits when idle, backs off when the database fails it, records what already
 * happened outside whatever the storage says meanwhile, and stops.
 */
import type { Op } from '../db/op.ts'
import type { Store } from '../db/store.ts'
import { write, writeInShare } from '../db/write.ts'
import type { Logger } from '../lib/logger.ts'
import { StorageUnavailableError } from '../lib/storage-unavailable.ts'

/** Longest pause between attempts while the database is locked elsewhere or full. */
const STORAGE_RETRY_MAX_MS = 1000

/** The pause after the nth failure to reach a locked or full database: 100 ms doubling, capped at a second. */
const waitOutStorage = (failures: number) => Bun.sleep(Math.min(STORAGE_RETRY_MAX_MS, 50 * 2 ** failures))

/**
 * A claiming loop's failure (the database locked, full or unreachable, or anything else): said once per outage for a
 * storage fault, each time for anything else, then backed off (`failures`: in a row, from 1) — never a busy loop,
 * and never the end of the loop (or of the process).
 */
export function backOffAfterFailedClaim(logger: Logger, what: string, error: unknown, failures: number): Promise<void> {
  if (!(error instanceof StorageUnavailableError)) logger.error(`${what} failed; retrying`, { error: (error as Error).message })
  else if (failures === 1) logger.warn(`${what} failed; retrying`, { error: error.message })
  return waitOutStorage(failures)
}

/** A stopping loop: waits up to `timeoutMs` for it to finish what it started, then aborts `work` and waits a last second. */
export async function finishOrAbort(finished: Promise<void>, timeoutMs: number, work: AbortController): Promise<void> {
  const timedOut = await Promise.race([finished.then(() => false), Bun.sleep(timeoutMs).then(() => true)])
  if (timedOut) work.abort()
  await Promise.race([finished, Bun.sleep(1000)])
}

/** An idle loop's wait: until the next thing comes due (`next`, ms; null: nothing is), at most `pollMs`, at least 5 ms. */
export const idleWaitMs = (next: number | null, now: number, pollMs: number) => (next === null ? pollMs : Math.max(5, Math.min(pollMs, next - now)))

/**
 * `body` written, a locked or full database waited out (retried with `waitOutStorage`'s backoff) while `running()`
 * says so: for what already happened outside (an HTTP call) and must be recorded, not dropped. `waiting` is told of
 * the first such failure; `shareMs`: the executor's writes (`writeInShare`). Each failed try rolled back whole, so
 * running `body` again is safe.
 */
export async function writeOutlastingStorage<T>(
  store: Store,
  body: () => Op<T>,
  running: () => boolean,
  waiting: (error: StorageUnavailableError) => void,
  shareMs?: number,
): Promise<T> {
  for (let failures = 1; ; failures++) {
    try {
      return await (shareMs === undefined ? write(store, body) : writeInShare(store, body, shareMs))
    } catch (error) {
      if (!(error instanceof StorageUnavailableError) || !running()) throw error
      if (failures === 1) waiting(error)
      await waitOutStorage(failures)
    }
  }
}


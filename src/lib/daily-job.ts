/**
 * A job that runs at once and then every day at a local time (croner), such as log retention and the planner's
 * statistics. Its daily schedule is set up a moment later, not during the start: croner's first schedule builds a
 * local-time date, and a process's first local-time date loads the time-zone data (~7 ms; docs/performance.md
 * "The start"), which the server's first answers need not wait for.
 */
import { Cron } from 'croner'

/** How long after the first run the daily schedule is set up: past a starting server's first answers. */
const DAILY_SCHEDULE_AFTER_MS = 250

/** A running daily job; `stop()` ends it (a schedule not yet set up is never set up). */
export interface DailyJob {
  stop(): void
}

/** `run` now, then at every time `pattern` (a croner pattern, local time) names; one run at a time. */
export function runNowThenDaily(pattern: string, run: () => void | Promise<void>, scheduleAfterMs = DAILY_SCHEDULE_AFTER_MS): DailyJob {
  void run()
  let cron: Cron | null = null
  const timer = setTimeout(() => (cron = new Cron(pattern, { protect: true }, run)), scheduleAfterMs)
  timer.unref()
  return {
    stop: () => {
      clearTimeout(timer)
      cron?.stop()
    },
  }
}

/**
 * The executor's deadline timer (docs/workflows.md "Task steps"): one timer armed for the next task deadline or
 * reminder of the whole database, read from two indexes (src/db/tasks.ts `nextTaskDueAt`), never a scan of the tasks.
 * When it fires it acts on what is due (src/modules/tasks/deadlines.ts), each task in its own transaction, then arms
 * itself again. A task opened with an earlier deadline re-arms it: this process's executor tells it (`notify`), and
 * on PostgreSQL every instance's hears the opening transaction's `NOTIFY trellis_tasks`. Idle, it re-reads at least
 * every `pollMs` (a minute), what catches a deadline whose announcement was lost.
 *
 * Nothing is held in memory that the database does not have: the deadlines are rows, so a restart or a `kill -9`
 * loses none — the timer started with the executor reads the next at once and acts on every one passed meanwhile.
 * Several instances' timers may see the same due task: the conditional write that claims it lets only one act.
 */
import { read } from '../db/read.ts'
import type { Listening, Store } from '../db/store.ts'
import { dueTaskIds, nextTaskDueAt } from '../db/tasks.ts'
import { write } from '../db/write.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { WakeSignal } from '../lib/wake-signal.ts'
import type { MailSettings } from '../modules/mail/service.ts'
import { actOnDeadline, remindOfTask } from '../modules/tasks/deadlines.ts'
import { backOffAfterFailedClaim, idleWaitMs } from './loop.ts'

/** Tasks read per look at what is due; more are taken at once in the next look. */
const DUE_BATCH = 50

export interface TaskDeadlineOptions {
  store: Store
  clock: Clock
  logger: Logger
  mail: MailSettings | null
  /** Longest wait between two reads of the next deadline (default a minute). */
  pollMs?: number
}

export class TaskDeadlines {
  private running = false
  private loop: Promise<void> | null = null
  private readonly wakeUps = new WakeSignal()
  private listening: Promise<Listening | null> | null = null

  constructor(private readonly options: TaskDeadlineOptions) {}

  start(): void {
    if (this.running) return
    this.running = true
    this.listening = this.options.store.listenForTaskDeadlines(() => this.notify()).catch((error) => {
      // Not listening: a deadline another instance announced is still read within `pollMs`.
      this.options.logger.warn('listening for task deadlines failed; polling only', { error: (error as Error).message })
      return null
    })
    this.loop = this.run()
  }

  /** Stops after the task it acts on (its transaction is short): the next start acts on the rest. */
  async stop(): Promise<void> {
    if (!this.running) return
    this.running = false
    this.notify()
    await (await this.listening)?.stop().catch(() => {})
    await this.loop
  }

  /** A task with a deadline opened: read the next deadline again. */
  notify(): void {
    this.wakeUps.notify()
  }

  private async run(): Promise<void> {
    const { store, clock, logger, mail } = this.options
    let failures = 0
    while (this.running) {
      this.wakeUps.clear()
      try {
        const now = clock.now()
        const due = await read(store, dueTaskIds(now, DUE_BATCH))
        // Deadlines first: one that passed with its reminder unsent leaves no reminder to send.
        for (const id of due.deadlines) if (this.running) await write(store, () => actOnDeadline(clock, mail, id))
        for (const id of due.reminders) if (this.running) await write(store, () => remindOfTask(clock, mail, id))
        failures = 0
        if (due.deadlines.length === DUE_BATCH || due.reminders.length === DUE_BATCH) continue
        const next = await read(store, nextTaskDueAt())
        await this.wakeUps.wait(idleWaitMs(next, clock.now(), this.options.pollMs ?? 60_000))
      } catch (error) {
        // What is due stays due: the next look acts on it.
        await backOffAfterFailedClaim(logger, 'acting on task deadlines', error, ++failures)
      }
    }
  }
}

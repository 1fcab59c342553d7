/**
 * A loop's wake-up call (the executor's claiming loop, the callback delivery worker): `notify()` ends the wait in
 * progress or, when the loop is not waiting, makes its next wait return at once — a wake-up that comes while the
 * loop is busy is never lost. `clear()` forgets one that came before the loop looked for itself.
 */
export class WakeSignal {
  private waiting: (() => void)[] = []
  private pending = false

  notify(): void {
    const waiting = this.waiting.splice(0)
    if (waiting.length === 0) this.pending = true
    for (const wake of waiting) wake()
  }

  /** The loop is about to look for work itself: a wake-up from before now is spent. */
  clear(): void {
    this.pending = false
  }

  /** Until `notify()` (at once when one came since the last `clear()` or wait), or `timeoutMs` (null: no timeout). */
  wait(timeoutMs: number | null): Promise<void> {
    if (this.pending) {
      this.pending = false
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        // Timed out: no longer waiting, so a wake-up from now on is remembered instead of spent on this one.
        const at = this.waiting.indexOf(done)
        if (at >= 0) this.waiting.splice(at, 1)
        resolve()
      }
      const timer = timeoutMs === null ? undefined : setTimeout(done, timeoutMs)
      this.waiting.push(done)
    })
  }
}

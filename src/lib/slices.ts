/**
 * Work that shares the turns of the event loop: a piece starts at once while the current turn's slice (`sliceMs` of
 * work) lasts; past it, pieces wait in arrival order and start in the following turns, a slice's worth each, so that
 * every turn polls the sockets again after about `sliceMs`. What a piece does synchronously when it starts is what
 * counts against the slice (a SQLite read: all of it; a PostgreSQL query: sending it). With `atOnce`, at most that
 * many pieces are under way at a time (PostgreSQL's queries: the pool's connections they may hold and the database's
 * time); the others wait for one to end. A piece is never cut in the middle, nothing is refused, and with nothing
 * waiting every piece starts at once.
 */
export class Slices {
  /** When the current turn's slice started; null between turns. */
  private sliceStartedAt: number | null = null
  private readonly waiting: (() => void)[] = []
  private pumpScheduled = false
  /** Pieces started and not ended (counted only under an `atOnce` bound). */
  private running = 0

  constructor(
    private readonly sliceMs: number,
    private readonly atOnce = Number.POSITIVE_INFINITY,
  ) {}

  /** `work()`, started at once or, past this turn's slice (or its bound of pieces under way), later in arrival order. */
  run<T>(work: () => Promise<T>): Promise<T> {
    if (this.waiting.length === 0 && this.running < this.atOnce && this.withinSlice()) return this.start(work)
    return new Promise<void>((resolve) => {
      this.waiting.push(resolve)
      this.schedulePump()
    }).then(() => this.start(work))
  }

  /** Whether work waits for a later turn (a trickle, each piece started at once, does not count). */
  get busy(): boolean {
    return this.waiting.length > 0
  }

  /** How many pieces wait for a later turn (for tests and metrics). */
  get queued(): number {
    return this.waiting.length
  }

  private start<T>(work: () => Promise<T>): Promise<T> {
    if (this.atOnce === Number.POSITIVE_INFINITY) return work()
    const ended = () => {
      this.running--
      if (this.waiting.length > 0) this.schedulePump()
    }
    this.running++
    let done: Promise<T>
    try {
      done = work()
    } catch (error) {
      ended()
      throw error
    }
    done.then(ended, ended)
    return done
  }

  /** Whether the current turn's slice has time left; the first piece of a turn opens its slice. */
  private withinSlice(): boolean {
    if (this.sliceStartedAt === null) {
      this.openSlice()
      return true
    }
    return performance.now() - this.sliceStartedAt < this.sliceMs
  }

  /** Starts this turn's slice now; the next turn finds none open. */
  private openSlice(): void {
    this.sliceStartedAt = performance.now()
    setImmediate(() => (this.sliceStartedAt = null))
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return
    this.pumpScheduled = true
    setImmediate(() => {
      this.pumpScheduled = false
      this.sliceStartedAt = null
      this.startNext()
    })
  }

  /**
   * Starts the oldest waiting piece, then — after its synchronous part has run (the microtask queued behind its
   * start) — the next, while the slice lasts and the bound allows; the rest wait for the next turn, or (the bound
   * reached) for a piece to end.
   */
  private startNext = (): void => {
    if (this.running >= this.atOnce) return
    const next = this.waiting.shift()
    if (next === undefined) return
    if (this.sliceStartedAt === null) this.openSlice()
    next()
    if (this.waiting.length === 0) return
    queueMicrotask(() => {
      if (this.running >= this.atOnce) return
      if (this.withinSlice()) this.startNext()
      else this.schedulePump()
    })
  }
}

/**
 * What a long command says while it works (`db copy` of a million notes takes minutes: a silent one looks hung).
 * On a terminal, the running step's line is redrawn in place — done / total, rate, time left — at most every
 * REDRAW_MS; a finished step leaves its summary line. Anywhere else (CI, logs, pipes), only the summary lines, one per
 * step as it ends, and a total at the end. Always on stderr: stdout keeps the command's result lines for scripts.
 */

/** Where progress goes: stderr, or a fake in tests. `columns`: the terminal's width, when known. */
export interface ProgressStream {
  isTTY: boolean
  columns?: number
  write(text: string): void
}

/** How a step's amount reads: `value(n)` then `name` (rows, MB). */
export interface ProgressUnit {
  name: string
  value(n: number): string
}

export interface Progress {
  /** A step of `total` units of the progress's unit (null: a step with no measure, e.g. a statement that runs). */
  step(label: string, total: number | null): ProgressStep
  /** The closing line: `label`, every step's units together, the time since the progress started. */
  finish(label: string): void
  /** The command failed: the line being redrawn is ended, so that the error starts a line of its own. */
  abandon(): void
}

export interface ProgressStep {
  /** `done` units so far; `phase` names what the step does now (a new phase starts its own rate). */
  update(done: number, phase?: string): void
  /** The step ended having done `done` units (default: the last update). */
  done(done?: number): void
}

export const REDRAW_MS = 100

export const ROWS: ProgressUnit = { name: 'rows', value: (n) => Math.round(n).toLocaleString('en-US') }
export const BYTES: ProgressUnit = { name: 'MB', value: (n) => (n / 1e6).toFixed(1) }

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

/** `3 s`, `2 min 5 s`, `1 h 4 min`: a time left, rounded up to the second. */
export function duration(ms: number): string {
  const s = Math.ceil(ms / 1000)
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
}

/** Prints nothing (`--quiet`, and callers that want no progress). */
export const silentProgress: Progress = { step: () => ({ update() {}, done() {} }), finish() {}, abandon() {} }

/** Clears the line being redrawn: carriage return, erase the line. */
const CLEAR = '\r\x1b[2K'
/** How often a step with no measure redraws its elapsed time. */
const TICK_MS = 1000

/** The progress of one command on `stream`, in `unit`; `now` in ms (injectable for tests). */
export function createProgress(stream: ProgressStream, unit: ProgressUnit, now: () => number = () => performance.now()): Progress {
  const started = now()
  let units = 0
  /** A line is drawn and not yet ended (terminal only). */
  let live = false
  /** The redraw timer of a step with no measure, while it runs. */
  let ticking: ReturnType<typeof setInterval> | null = null
  const stopTicking = () => {
    if (ticking) clearInterval(ticking)
    ticking = null
  }
  const fit = (line: string) => (stream.columns && line.length >= stream.columns ? `${line.slice(0, stream.columns - 2)}…` : line)
  const amount = (n: number) => `${unit.value(n)} ${unit.name}`
  const rate = (n: number, ms: number) => `${unit.value(ms > 0 ? (n * 1000) / ms : 0)} ${unit.name}/s`
  const summary = (label: string, done: number | null, ms: number) =>
    done === null ? `${label}: ${seconds(ms)}` : `${label}: ${amount(done)} in ${seconds(ms)}${done > 0 ? ` (${rate(done, ms)})` : ''}`
  const writeLine = (line: string) => {
    stream.write(`${live ? CLEAR : ''}${line}\n`)
    live = false
  }
  return {
    step(label, total) {
      const stepStarted = now()
      let phase = { name: '', at: stepStarted, from: 0 }
      let last = 0
      let drawnAt = -Infinity
      const line = () => {
        const t = now()
        const head = `${label}${phase.name ? ` ${phase.name}` : ''}`
        if (total === null) return `${head}: ${seconds(t - stepStarted)}`
        const moved = last - phase.from
        const left = moved > 0 && t > phase.at ? `, ${duration(((total - last) * (t - phase.at)) / moved)} left` : ''
        return `${head}: ${unit.value(last)} / ${amount(total)}, ${rate(moved, t - phase.at)}${left}`
      }
      const draw = () => {
        drawnAt = now()
        stream.write(`${CLEAR}${fit(line())}`)
        live = true
      }
      stopTicking()
      if (stream.isTTY) draw()
      if (stream.isTTY && total === null) {
        ticking = setInterval(draw, TICK_MS)
        ticking.unref()
      }
      return {
        update(done, name) {
          if (name !== undefined && name !== phase.name) phase = { name, at: now(), from: done }
          last = done
          if (stream.isTTY && now() - drawnAt >= REDRAW_MS) draw()
        },
        done(done = last) {
          stopTicking()
          if (total !== null) units += done
          writeLine(summary(label, total === null ? null : done, now() - stepStarted))
        },
      }
    },
    finish(label) {
      writeLine(summary(label, units, now() - started))
    },
    abandon() {
      stopTicking()
      if (live) stream.write('\n')
      live = false
    },
  }
}

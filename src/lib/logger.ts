/**
 * JSON-lines logger on stdout/stderr. Never pass secrets (tokens, passwords, URL signatures) to it. While tracing is
 * on, a line written inside a span carries its `trace_id` and `span_id` (./tracing.ts sets `logContextFrom`).
 */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
}

/** The fields every line adds (the current span's ids while tracing is on); none by default. */
let contextFields: (() => Record<string, unknown> | undefined) | null = null

/** Set by tracing when it starts (null when it stops): this file imports nothing of it, so that it loads nothing. */
export function logContextFrom(fields: (() => Record<string, unknown> | undefined) | null): void {
  contextFields = fields
}

export function createLogger(level: LogLevel = 'info', write: (line: string, isError: boolean) => void = defaultWrite): Logger {
  const threshold = LOG_LEVELS.indexOf(level)
  const log = (lvl: Exclude<LogLevel, 'silent'>) => (msg: string, fields: Record<string, unknown> = {}) => {
    if (LOG_LEVELS.indexOf(lvl) < threshold) return
    write(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...contextFields?.(), ...fields }), lvl === 'error' || lvl === 'warn')
  }
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') }
}

function defaultWrite(line: string, isError: boolean): void {
  ;(isError ? process.stderr : process.stdout).write(`${line}\n`)
}

export const silentLogger: Logger = createLogger('silent')

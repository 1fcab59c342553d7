/**
 * Time parsing and rendering: the one place that turns ISO 8601 text into epoch ms or µs and back.
 *
 * Most times are epoch milliseconds (the clock's unit). The times of notes, note messages and log entries are
 * epoch microseconds (`Micros`): their lists page by `createdAt` and need a distinct, increasing time per entry
 * even when thousands arrive in one millisecond, without running ahead of the clock (docs/design-decisions.md "Times").
 */

/** Epoch microseconds: the unit of note, note message and log entry times. Not assignable to `Millis`. */
export type Micros = number & { readonly __unit: 'µs' }

/** Epoch milliseconds: any plain number, but never a `Micros` (the compiler catches a mixed-up unit). */
export type Millis = number & { readonly __unit?: 'ms' }

/** A clock reading (ms) as Micros: `now` on the microsecond scale (its last three digits 0). */
export const microsFromMillis = (ms: Millis): Micros => (ms * 1000) as Micros

/**
 * Full ISO 8601 date-time: date, `T` or space, hours and minutes, optional seconds and fraction,
 * and a zone (`Z` or ±HH:MM / ±HHMM). Without a zone the time is UTC — the compatibility document's own
 * example format is `YYYY-MM-DDTHH:MM` — and a date alone (YYYY-MM-DD) is midnight UTC.
 */
const ISO_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i

/** The instant of an ISO 8601 date-time to the whole second (epoch ms) and its fraction digits, or null. */
function parseIsoParts(text: string): { seconds: number; fraction: string } | null {
  const m = ISO_DATE_TIME.exec(text.trim())
  if (!m) return null
  const [, y, mo, d, h = '00', mi = '00', s = '00', fraction = '', zone] = m
  const year = Number(y)
  const month = Number(mo)
  const day = Number(d)
  const hour = Number(h)
  const minute = Number(mi)
  const second = Number(s)
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return null
  // Not Date.UTC(year, …): it reads years 0–99 as 1900–1999.
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, second, 0)
  if (date.getUTCDate() !== day || date.getUTCMonth() !== month - 1) return null // 2026-02-30
  let seconds = date.getTime()
  if (zone && zone.toUpperCase() !== 'Z') {
    const sign = zone.startsWith('-') ? -1 : 1
    const digits = zone.slice(1).replace(':', '')
    const offH = Number(digits.slice(0, 2))
    const offM = Number(digits.slice(2) || '0')
    if (offH > 23 || offM > 59) return null
    seconds -= sign * (offH * 60 + offM) * 60_000
  }
  return Number.isFinite(seconds) ? { seconds, fraction } : null
}

/** The first fraction digits as an integer (integer arithmetic on the text: no float rounding). */
const fractionDigits = (fraction: string, digits: number) => Number(fraction.padEnd(digits, '0').slice(0, digits))

/** Parses ISO 8601 to epoch ms (UTC), or returns null when the text is not a valid date-time. */
export function parseIsoDateTime(text: string): number | null {
  const parts = parseIsoParts(text)
  return parts === null ? null : parts.seconds + fractionDigits(parts.fraction, 3)
}

/**
 * Parses ISO 8601 to epoch µs (UTC); fraction digits past the sixth are dropped. Null when the text is not a
 * valid date-time or the instant is beyond exact µs (a safe integer: the years 1685 to 2255).
 */
export function parseIsoMicros(text: string): Micros | null {
  const parts = parseIsoParts(text)
  if (parts === null) return null
  const micros = parts.seconds * 1000 + fractionDigits(parts.fraction, 6)
  return Number.isSafeInteger(micros) ? (micros as Micros) : null
}

/** Renders epoch ms as ISO 8601 UTC with milliseconds: `2026-11-21T23:40:33.123Z`. */
export function toIso(ms: Millis): string {
  return new Date(ms).toISOString()
}

export function toIsoOrNull(ms: Millis | null | undefined): string | null {
  return ms == null ? null : toIso(ms)
}

/**
 * Renders epoch µs as ISO 8601 UTC with microseconds, always six digits: `2026-11-21T23:40:33.123456Z` (RFC 3339
 * `date-time` allows any number of fraction digits; a fixed width keeps text order and time order the same).
 */
export function toIsoMicros(us: Micros): string {
  const ms = Math.floor(us / 1000)
  return `${new Date(ms).toISOString().slice(0, -1)}${String(us - ms * 1000).padStart(3, '0')}Z`
}

/** The latest of some µs times. */
export const latestMicros = (...times: Micros[]): Micros => Math.max(...times) as Micros

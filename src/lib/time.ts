/** Time parsing and rendering: the one place that turns ISO 8601 text into epoch ms and back. */

/**
 * Full ISO 8601 date-time: date, `T` or space, hours and minutes, optional seconds and fraction,
 * and a zone (`Z` or ±HH:MM / ±HHMM). Without a zone the time is UTC — the compatibility document's own
 * example format is `YYYY-MM-DDTHH:MM` — and a date alone (YYYY-MM-DD) is midnight UTC.
 */
const ISO_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i

/** Parses ISO 8601 to epoch ms (UTC), or returns null when the text is not a valid date-time. */
export function parseIsoDateTime(text: string): number | null {
  const m = ISO_DATE_TIME.exec(text.trim())
  if (!m) return null
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone] = m
  const year = Number(y)
  const month = Number(mo)
  const day = Number(d)
  const hour = Number(h)
  const minute = Number(mi)
  const second = Number(s)
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return null
  const ms = Math.floor(Number(`0.${frac || '0'}`) * 1000)
  // Not Date.UTC(year, …): it reads years 0–99 as 1900–1999.
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, second, ms)
  if (date.getUTCDate() !== day || date.getUTCMonth() !== month - 1) return null // 2026-02-30
  let t = date.getTime()
  if (zone && zone.toUpperCase() !== 'Z') {
    const sign = zone.startsWith('-') ? -1 : 1
    const digits = zone.slice(1).replace(':', '')
    const offH = Number(digits.slice(0, 2))
    const offM = Number(digits.slice(2) || '0')
    if (offH > 23 || offM > 59) return null
    t -= sign * (offH * 60 + offM) * 60_000
  }
  return Number.isFinite(t) ? t : null
}

/** Renders epoch ms as ISO 8601 UTC with milliseconds: `2026-11-21T23:40:33.123Z`. */
export function toIso(ms: number): string {
  return new Date(ms).toISOString()
}

export function toIsoOrNull(ms: number | null | undefined): string | null {
  return ms == null ? null : toIso(ms)
}

/** Schemas shared by many routes' answers. */
import { Type } from '@sinclair/typebox'
import { t } from 'elysia'

/**
 * A plain JSON integer for answers. Elysia's `t.Integer` also accepts numeric strings (it coerces query and
 * path values), which an answer never holds and the document should not announce.
 */
export const Integer = Type.Integer

/** A time as Trellis renders it: ISO 8601 UTC with milliseconds (`toIso`). */
export const IsoDateTime = t.String({ format: 'date-time', examples: ['2026-11-21T12:00:00.000Z'] })

/** A time of a note, a message or a log entry: ISO 8601 UTC with microseconds (`toIsoMicros`, README "Times"). */
export const IsoDateTimeMicros = t.String({
  format: 'date-time',
  description: 'UTC with six fraction digits; send it back as is in `createdAt.lt` to page',
  examples: ['2026-11-21T12:00:00.000123Z'],
})

/** A time that may not have happened yet. */
export const IsoDateTimeOrNull = t.Union([IsoDateTime, t.Null()])

/**
 * A string documented with its known values (`enum` in /openapi.json) but not checked against them: the log
 * services own those lists and may render values written by older or newer versions.
 */
export function documentedEnum(values: readonly string[], description?: string) {
  return t.String({ enum: [...values], ...(description === undefined ? {} : { description }) })
}

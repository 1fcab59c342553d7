/** Schemas shared by many routes' answers. */
import { type TSchema, Type } from '@sinclair/typebox'
import { t } from 'elysia'

/**
 * A plain JSON integer for answers. Elysia's `t.Integer` also accepts numeric strings (it coerces query and
 * path values), which an answer never holds and the document should not announce.
 */
export const Integer = Type.Integer

/** A time as Trellis renders it: ISO 8601 UTC with milliseconds (`toIso`). */
export const IsoDateTime = t.String({ format: 'date-time', examples: ['2026-11-21T12:00:00.000Z'] })

/** A time of a note, a message or a log entry: ISO 8601 UTC with microseconds (`toIsoMicros`, docs/design-decisions.md "Times"). */
export const IsoDateTimeMicros = t.String({
  format: 'date-time',
  description: 'UTC with six fraction digits; send it back as is in `createdAt.lt` to page',
  examples: ['2026-11-21T12:00:00.000123Z'],
})

/** A log entry's link in its scope's hash chain: a Trellis extension field, present only with `extensions=true` (docs/audit.md). */
export const ChainLinkField = t.Optional(
  t.Object(
    {
      position: t.Integer({ minimum: 1, description: "The entry's position in its chain (1, 2, … per environment, or per project's admin log; gapless)" }),
      hash: t.String({ pattern: '^[0-9a-f]{64}$', description: 'hex(SHA-256(previous hash ‖ the canonical encoding v1 of the entry))' }),
    },
    { description: 'Trellis extension, only with extensions=true: the entry\'s link in the hash chain `trellis audit verify` checks (docs/audit.md)' },
  ),
)

/** A time that may not have happened yet. */
export const IsoDateTimeOrNull = t.Union([IsoDateTime, t.Null()])

/**
 * A string documented with its known values (`enum` in /openapi.json) but not checked against them: the log
 * services own those lists and may render values written by older or newer versions.
 */
export function documentedEnum(values: readonly string[], description?: string) {
  return t.String({ enum: [...values], ...(description === undefined ? {} : { description }) })
}

/** The key Elysia reads on a route's response schema to skip checking each answer against it. */
export const UNCHECKED_ANSWER = 'noValidate'

/**
 * The schema of an answer built by our own renderer from typed rows (notes, logs, runs): Elysia does not check every
 * answer against it at run time (for a page of 100 notes that check costs tens of µs per request, and the renderer cannot produce
 * anything else). The schema is still the route's in /openapi.json (without the mark), and tests validate these
 * routes' answers against it and against the compatibility document (test/answers.test.ts, test/wire-compat.test.ts).
 * Answers whose content comes from elsewhere keep Elysia's check.
 */
export function renderedAnswer<T extends TSchema>(schema: T): T {
  return Object.assign(schema, { [UNCHECKED_ANSWER]: true })
}

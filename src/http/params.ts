/** Path parameter schemas shared by every route, and the one bound on ids. */
import { t } from 'elysia'

/**
 * The largest id a path or query parameter takes: 15 digits. Every such id is a safe integer in JavaScript
 * (2^53 − 1 has 16 digits); SQLite's INTEGER reaches 2^63 − 1, but ids are assigned one by one from 1 and never
 * get near either. Anything longer is refused with a 400 that states this bound.
 */
export const MAX_ID = 999_999_999_999_999
export const ID_RULE = `must be an integer between 1 and ${MAX_ID}`

/**
 * The key under which a parameter schema carries what /openapi.json shows instead: path and query values are
 * strings on the wire, the document names the value they hold (src/http/openapi.ts swaps it in).
 */
export const DOCUMENTED_AS = 'x-documented-as'

/** An id as the document declares it. */
export const ID_SCHEMA = { type: 'integer', minimum: 1, maximum: MAX_ID } as const

/**
 * A positive integer id in the path, checked as the string it arrives as, so that `1.5`, `1e3`, `0` and `-1`
 * are refused with a 400 naming the parameter (t.Numeric would coerce some, and Elysia's t.Integer documents
 * itself as "a string or an integer"). Convert with Number(); /openapi.json shows it as an integer.
 */
export const IdParam = t.String({ pattern: `^[1-9][0-9]{0,${String(MAX_ID).length - 1}}$`, error: ID_RULE, [DOCUMENTED_AS]: ID_SCHEMA })

/** Path parameter schemas and the one range of integer ids, shared by every route and query filter. */
import { t } from 'elysia'
import toRegexRange from 'to-regex-range'

/**
 * The largest id a path or query may name. Ids are SQLite INTEGERs (64-bit) read into JavaScript numbers, which
 * are exact only up to 2^53 − 1: a larger value could not be told apart from its neighbours, so it is refused
 * (400) with this bound in the message rather than rounded into another row's id.
 */
export const MAX_ID = Number.MAX_SAFE_INTEGER

/** What a refused id is told. */
export const ID_RANGE_MESSAGE = `must be an integer between 1 and ${MAX_ID}`

/** Decimal 1 … MAX_ID, no sign, no leading zero, no exponent: exactly the ids there can be. */
const ID_PATTERN = `^(?:${toRegexRange(1, MAX_ID, { capture: false, shorthand: true })})$`
const idText = new RegExp(ID_PATTERN)

/** `text` as an id, or null when it is not an integer from 1 to MAX_ID. */
export function parseId(text: string): number | null {
  return idText.test(text) ? Number(text) : null
}

/**
 * The key under which a parameter schema carries what /openapi.json shows instead: path and query values are
 * strings on the wire, the document names the value they hold (src/http/openapi.ts swaps it in).
 */
export const DOCUMENTED_AS = 'x-documented-as'

/** An id as the document declares it. */
export const ID_SCHEMA = { type: 'integer', minimum: 1, maximum: MAX_ID } as const

/**
 * A positive integer id in the path, kept as a string so that `1.5`, `1e3`, `0`, `-1` and anything above MAX_ID
 * are refused with a 400 naming the parameter and the bound (t.Numeric would coerce some, and Elysia's t.Integer
 * documents itself as "a string or an integer"). Convert with Number(); /openapi.json shows it as an integer.
 */
export const IdParam = t.String({ pattern: ID_PATTERN, error: ID_RANGE_MESSAGE, [DOCUMENTED_AS]: ID_SCHEMA })

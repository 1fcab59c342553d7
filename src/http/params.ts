/** Path parameter schemas shared by every route. */
import { t } from 'elysia'

/**
 * A positive integer id in the path, kept as a string so that `1.5`, `1e3`, `0` and `-1` are refused with a
 * 400 naming the parameter (t.Numeric would coerce some and report others without a name). Convert with Number().
 */
export const IdParam = t.String({ pattern: '^[1-9][0-9]{0,14}$', error: 'must be a positive integer' })

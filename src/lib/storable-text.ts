/**
 * Text PostgreSQL's `text` cannot hold, so Trellis stores none of it, on either store: U+0000 (NUL), which SQLite
 * would store, and a lone surrogate — half of a UTF-16 pair, as JSON's `"\ud800"` or YAML's `"\ud800"` makes — which
 * is no Unicode character and has no UTF-8 form (the driver would send U+FFFD instead, so what is read back is not
 * what was written: a login throttle's key never matched its own row and every such login got 429). A request that
 * would write it is refused with a 400 naming the field (src/http/storable-text.ts, the webhook's `record_id`, the
 * apply file, a new user's email and name), and a filter or lookup by it matches nothing, without asking the store
 * (docs/design-decisions.md "Text never holds U+0000 or a lone surrogate").
 */
import { joinPath } from './validation.ts'

export const NUL_MESSAGE = 'must not contain U+0000 (NUL)'
export const LONE_SURROGATE_MESSAGE = 'must be valid Unicode text: it holds a lone surrogate (U+D800 to U+DFFF)'

/** Why no store may hold `value` (its rule, in words), or null when it is storable text or no string at all. */
export function unstorableTextProblem(value: unknown): string | null {
  if (typeof value !== 'string') return null
  if (value.includes('\u0000')) return NUL_MESSAGE
  return value.isWellFormed() ? null : LONE_SURROGATE_MESSAGE
}

/** Whether `value` is a string no store holds (such a value equals no stored text). */
export function holdsUnstorableText(value: unknown): boolean {
  return unstorableTextProblem(value) !== null
}

/** Whether any value of a flat filter object is unstorable text: such a filter matches no stored row. */
export function someHoldUnstorableText(values: object): boolean {
  return Object.values(values).some(holdsUnstorableText)
}

/**
 * The path (`projects[0].teams[1]`, `(root)` for `value` itself) of the first string in a JSON value that no store
 * holds, with why (for a key, the path of its object), or null when there is none.
 */
export function unstorableTextPath(value: unknown, pointer = ''): { path: string; message: string } | null {
  const problem = unstorableTextProblem(value)
  if (problem !== null) return { path: joinPath('', pointer) || '(root)', message: problem }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = unstorableTextPath(item, `${pointer}/${i}`)
      if (found !== null) return found
    }
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      // A key no store holds is named by its object (the key itself would put the character in the message).
      const keyProblem = unstorableTextProblem(key)
      if (keyProblem !== null) return { path: joinPath('', pointer) || '(root)', message: keyProblem }
      const found = unstorableTextPath(item, `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`)
      if (found !== null) return found
    }
  }
  return null
}

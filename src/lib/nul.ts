/**
 * U+0000 (NUL) in text. PostgreSQL's `text` cannot hold it (SQLite can), so Trellis stores no text that holds it,
 * on either store: a request that would write one is refused with a 400 naming the field (src/http/nul-text.ts, the
 * webhook's `record_id`, the apply file), and a filter or lookup by one matches nothing, without asking the store
 * (README "Text never holds U+0000").
 */
import { joinPath } from './validation.ts'

export const NUL_MESSAGE = 'must not contain U+0000 (NUL)'

/** Whether `value` is a string holding U+0000 (such a value equals no stored text). */
export function holdsNul(value: unknown): boolean {
  return typeof value === 'string' && value.includes('\u0000')
}

/** Whether any value of a flat filter object holds U+0000: such a filter matches no stored row. */
export function someHoldsNul(values: object): boolean {
  return Object.values(values).some(holdsNul)
}

/**
 * The path (`projects[0].teams[1]`, `(root)` for `value` itself) of the first string in a JSON value that holds
 * U+0000 (for a key holding it, the path of its object), or null when there is none.
 */
export function nulPath(value: unknown, pointer = ''): string | null {
  if (holdsNul(value)) return joinPath('', pointer) || '(root)'
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = nulPath(item, `${pointer}/${i}`)
      if (found !== null) return found
    }
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      // A key holding U+0000 is named by its object (the key itself would put the character in the message).
      if (holdsNul(key)) return joinPath('', pointer) || '(root)'
      const found = nulPath(item, `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`)
      if (found !== null) return found
    }
  }
  return null
}

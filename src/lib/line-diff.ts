/**
 * A line diff (longest common subsequence) of two texts, for showing what changed between two workflow versions.
 * The common head and tail are matched first; what is left is compared line by line unless it would take more
 * than MAX_CELLS comparisons, when the middle is shown as all removed, then all added (still a true diff).
 */
export interface DiffLine {
  kind: 'same' | 'removed' | 'added'
  text: string
}

const MAX_CELLS = 4_000_000

export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split('\n')
  const b = after.split('\n')
  let head = 0
  while (head < a.length && head < b.length && a[head] === b[head]) head++
  let tail = 0
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++
  const same = (lines: string[]) => lines.map((text): DiffLine => ({ kind: 'same', text }))
  const middle = middleDiff(a.slice(head, a.length - tail), b.slice(head, b.length - tail))
  return [...same(a.slice(0, head)), ...middle, ...same(a.slice(a.length - tail))]
}

function middleDiff(a: string[], b: string[]): DiffLine[] {
  const removed = (text: string): DiffLine => ({ kind: 'removed', text })
  const added = (text: string): DiffLine => ({ kind: 'added', text })
  if (a.length * b.length > MAX_CELLS) return [...a.map(removed), ...b.map(added)]
  // lengths[i * width + j]: the LCS length of a[i:] and b[j:].
  const width = b.length + 1
  const lengths = new Uint32Array((a.length + 1) * width)
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lengths[i * width + j] = a[i] === b[j] ? lengths[(i + 1) * width + j + 1]! + 1 : Math.max(lengths[(i + 1) * width + j]!, lengths[i * width + j + 1]!)
    }
  }
  const out: DiffLine[] = []
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: 'same', text: a[i]! })
      i++
      j++
    } else if (lengths[(i + 1) * width + j]! >= lengths[i * width + j + 1]!) out.push(removed(a[i++]!))
    else out.push(added(b[j++]!))
  }
  return [...out, ...a.slice(i).map(removed), ...b.slice(j).map(added)]
}
